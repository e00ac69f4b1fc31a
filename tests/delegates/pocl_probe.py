"""The probe of PoCL's inlining, shared by tests/delegates/test_opencl_cpu_path.py and
benchmarks/pocl_cpu_check.py (which runs it under qemu as other CPUs): no imports of the test
package, so that a script can load it."""
from __future__ import annotations

import re
from pathlib import Path

# A kernel of what the delegate's kernels call in their inner loops, through common.cl's KERNEL
# (which carries the target attribute). PoCL's library names its functions _cl_<name>
# (_Z11_cl_vload16..., _Z7_cl_fma...): one left in the compiled kernel is a call per use.
PROBE = r"""
import os, sys
import numpy as np
from edgelite.delegates import load_delegate
from edgelite.delegates.opencl import device
src = '''
__kernel void KERNEL(probe)(__global const float* restrict a, __global float* restrict o, int n)
{
    const int i = get_global_id(0);
    float16 acc = 0.0f;
    for (int j = 0; j < n; j++)
        acc = fma(vload16(0, a + (i + j) * 16), (float16)(1.5f), acc);
    vstore16(fmax(acc, 0.0f), 0, o + i * 16);
}
'''
device._SOURCES["probe"] = src
dev = load_delegate("opencl", {"device": sys.argv[1] or None}).dev
k = dev.kernel("probe", "probe", {})
cl = dev.cl
a = np.ones(16 * 64, np.float32)
A = cl.Buffer(dev.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=a)
O = cl.Buffer(dev.context, cl.mem_flags.WRITE_ONLY, 16 * 32 * 4)
k(dev.queue, (32,), (1,), A, O, np.int32(16))
out = np.empty(16 * 32, np.float32)
cl.enqueue_copy(dev.queue, out, O)
assert np.all(out == 24.0), out[:4]
print("KERNEL_CPU", dev.kernel_cpu)
"""


def library_calls(folder: Path) -> set:
    """Names of PoCL library functions left in the compiled kernels (shared objects) there."""
    left = set()
    for so in folder.rglob("*.so"):
        left |= {m.decode() for m in re.findall(rb"_Z\d+_cl_\w+", so.read_bytes())}
    return left
