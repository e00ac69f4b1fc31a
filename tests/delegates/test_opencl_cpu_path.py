"""The compiled CPU path (the OpenCL delegate on PoCL's CPU device), timing-free: kernels are
compiled for the CPU of PoCL's built-in library, so that its functions inline (no call per
vload16 / fma left in the compiled code); "threads" gives a sub-device of that many compute
units (one thread: PoCL's basic device); a second start with warm caches compiles nothing.
Speed itself is benchmarks/bench_opencl.py's."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from .conftest import opencl_delegate
from .graphs import Graph
from .pocl_probe import PROBE, library_calls

ROOT = Path(__file__).resolve().parents[2]

def _pocl_cpu():
    d = opencl_delegate()
    from edgelite.delegates.opencl.pocl_cpu import is_pocl_cpu
    if not is_pocl_cpu(d.dev.device):
        pytest.skip(f"the OpenCL device is {d.dev.name}, not PoCL's x86-64 CPU device")
    return d


def _fresh_env(tmp_path) -> dict:
    """PoCL's kernel cache and pyopencl's binary cache in `tmp_path`: nothing cached yet."""
    env = dict(os.environ, POCL_CACHE_DIR=str(tmp_path / "pocl"),
               XDG_CACHE_HOME=str(tmp_path / "xdg"))
    env.pop("EDGELITE_POCL_CPU", None)
    return env


@pytest.mark.opencl
def test_kernels_are_compiled_for_the_library_cpu():
    from edgelite.delegates.opencl.pocl_cpu import _host_flags, cpu_name
    d = _pocl_cpu()
    assert d.dev.kernel_cpu == cpu_name(_host_flags())
    assert f'target("arch={d.dev.kernel_cpu}")' in d.dev.target
    assert (ROOT / "delegates/opencl/common.cl").read_text().count(
        "#define KERNEL(name) TARGET CAT(name, SUFFIX)") == 1


@pytest.mark.opencl
def test_pocl_inlines_its_library_into_our_kernels(tmp_path):
    """The guard of the 8x: compile the probe in a fresh cache and look into the compiled
    kernel. Without the target attribute, on a host whose LLVM CPU name lacks one of the
    library CPU's features (Zen 1-3, Alder Lake), _cl_vload16, _cl_fma, _cl_fmax,
    _cl_vstore16 stay as calls (seen under qemu-x86_64 -cpu EPYC-Milan)."""
    _pocl_cpu()
    r = subprocess.run([sys.executable, "-c", PROBE, ""], env=_fresh_env(tmp_path),
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "KERNEL_CPU" in r.stdout
    sos = list((tmp_path / "pocl").rglob("*.so"))
    assert sos, "PoCL wrote no compiled kernel into its cache"
    assert not library_calls(tmp_path / "pocl")


@pytest.mark.opencl
def test_threads_is_a_sub_device_of_that_many_compute_units():
    from edgelite.delegates import DelegateError, load_delegate
    d = _pocl_cpu()
    total = d.dev.device.max_compute_units
    one = load_delegate("opencl", {"threads": 1})
    assert one.dev.threads == 1 and one.dev.device.max_compute_units == 1
    if total > 1:  # PoCL's basic device (_first_listing), elsewhere a sub-device
        assert one.dev is not d.dev and (one.dev.name.startswith("basic")
                                         or one.dev.device.parent_device is not None)
    assert load_delegate("opencl", {"threads": "1"}).dev is one.dev
    assert load_delegate("opencl", {"threads": total + 3}).dev.threads == total
    for bad in (0, -1, 1.5, "two", True):
        with pytest.raises(DelegateError, match="threads"):
            load_delegate("opencl", {"threads": bad})
    # same results on one compute unit as on all of them
    from edgelite.interpreter import Interpreter
    g = Graph()
    x = g.input((1, 9, 11, 24))
    w = np.random.default_rng(0).standard_normal((40, 3, 3, 24)).astype(np.float32)
    y = g.op("CONV_2D", [x, g.const(w), g.const(np.ones(40, np.float32))], padding=0,
             stride_h=1, stride_w=1, fused_activation_function=1)
    g.output(g.op("MEAN", [y, g.const(np.array([1, 2], np.int32))], keep_dims=False))
    content = g.save()
    inp = np.random.default_rng(1).standard_normal((1, 9, 11, 24)).astype(np.float32)
    outs = []
    for delegate in (d, one):
        it = Interpreter(model_content=content, experimental_delegates=[delegate])
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], inp)
        it.invoke()
        outs.append(it.get_tensor(it.get_output_details()[0]["index"]).copy())
    np.testing.assert_array_equal(outs[0], outs[1])


POOL = r"""
import json, os, sys
from edgelite.delegates import load_delegate
options = {"device": "cpu"}
if sys.argv[1] != "all":
    options["threads"] = int(sys.argv[1])
d = load_delegate("opencl", options)
import pyopencl as cl
root = [x for p in cl.get_platforms() for x in p.get_devices(cl.device_type.CPU)
        if x.name.startswith("pthread")]
print(json.dumps({"root_units": root[0].max_compute_units, "threads": d.dev.threads,
                  "name": d.dev.name, "env": [os.environ.get("POCL_MAX_PTHREAD_COUNT"),
                                              os.environ.get("POCL_DEVICES")]}))
"""


@pytest.mark.opencl
def test_first_listing_gives_one_thread_pocls_basic_device_and_sizes_the_pool(tmp_path):
    """PoCL 3.0 runs a sub-device's kernels on every worker thread (measured: "threads": 1
    kept both workers of a 2-core machine busy). So the first listing of the process asks
    PoCL for its "basic" device too, where "threads": 1 runs (kernels on the calling thread),
    and a first delegate with "threads" of 2 or more sizes the threaded device's worker pool;
    the variables are set for that call only."""
    _pocl_cpu()
    env = _fresh_env(tmp_path)
    for name in ("POCL_MAX_PTHREAD_COUNT", "POCL_DEVICES"):
        env.pop(name, None)
    cores = os.cpu_count() or 1

    def run(which):
        r = subprocess.run([sys.executable, "-c", POOL, which], env=env, capture_output=True,
                           text=True, cwd=ROOT, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads(r.stdout.strip().splitlines()[-1])
    one, every = run("1"), run("all")
    assert one["name"].startswith("basic") and one["threads"] == 1, one
    assert every["name"].startswith("pthread") and every["threads"] == every["root_units"]
    assert one["env"] == every["env"] == [None, None]
    if cores > 1:
        assert every["root_units"] > 1 and one["root_units"] == every["root_units"]
    if cores > 2:
        pool = run("2")
        assert pool["root_units"] == 2 and pool["threads"] == 2, pool


STARTUP = r"""
import sys, numpy as np
from edgelite.delegates import load_delegate
from edgelite.interpreter import Interpreter
d = load_delegate("opencl", {"device": sys.argv[2] or None})
it = Interpreter(model_content=open(sys.argv[1], "rb").read(), experimental_delegates=[d])
it.allocate_tensors()
det = it.get_input_details()[0]
it.set_tensor(det["index"], np.ones(det["shape"], np.float32))
it.invoke()
print("COMPILED", sum(getattr(run, "compiled", 0) for run, _ in it._runtime.plans[0].steps))
print("OUT", float(it.get_tensor(it.get_output_details()[0]["index"]).sum()))
"""


@pytest.mark.opencl
def test_a_second_start_compiles_nothing(tmp_path):
    """Two fresh processes on the same caches: each launches its kernels once while it
    prepares (graph._compile_kernels: where PoCL compiles them), and the second writes no new
    cache file (PoCL found the program and every compiled kernel; its tempfile_* source copies,
    written on every build call, are not compiled code)."""
    _pocl_cpu()
    g = Graph()
    x = g.input((1, 8, 8, 16))
    w = np.random.default_rng(0).standard_normal((1, 3, 3, 16)).astype(np.float32)
    y = g.op("DEPTHWISE_CONV_2D", [x, g.const(w), g.const(np.zeros(16, np.float32))],
             padding=0, stride_h=1, stride_w=1, depth_multiplier=1)
    g.output(g.op("ADD", [y, x]))
    model = tmp_path / "m.tflite"
    model.write_bytes(g.save())
    env = _fresh_env(tmp_path)

    def files():
        return {p for p in tmp_path.rglob("*") if p.is_file()
                and not p.name.startswith("tempfile_") and p != model}

    outs, compiled = [], []
    for _ in range(2):
        before = files()
        r = subprocess.run([sys.executable, "-c", STARTUP, str(model), ""], env=env,
                           capture_output=True, text=True, cwd=ROOT, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        outs.append(r.stdout.split("OUT")[-1].strip())
        compiled.append(int(r.stdout.split("COMPILED")[1].split()[0]))
        new = files() - before
    assert outs[0] == outs[1]
    assert compiled[0] == compiled[1] >= 2, compiled
    assert not new, sorted(str(p.relative_to(tmp_path)) for p in new)


def test_importing_the_interpreter_loads_no_opencl():
    """`import edgelite.interpreter` (its start-up cost) loads none of the delegate's parts:
    pyopencl, the OpenCL delegate and the CLI's progress bar come with load_delegate("opencl")
    and with a compilation on a terminal only."""
    code = ("import sys, edgelite.interpreter; print(' '.join(sorted(m for m in sys.modules if "
            "m.split('.')[0] in ('pyopencl', 'rich', 'onnx') or m.startswith(("
            "'edgelite.delegates.opencl', 'edgelite.cli')))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == [], r.stdout


# Kernel launches per invoke on PoCL's CPU device (fuse.py folds depthwise convolutions, ReLUs,
# residual ADDs and zero PADs into the convolutions, and the large inverted-residual blocks
# into one launch each: MobileNetV2's 3, hand landmarks' 1): each launch is a command PoCL's
# workers take up and finish, on every invoke. More than these is a lost fusion.
LAUNCHES = {"mobilenet_v2": 35, "mp_face_detection": 28, "mp_hand_landmark": 39}


@pytest.mark.opencl
@pytest.mark.parametrize("name", sorted(LAUNCHES))
def test_kernel_launches_per_invoke_on_the_cpu_path(name, models_dir):
    from edgelite.interpreter import Interpreter
    d = _pocl_cpu()
    it = Interpreter(model_path=str(models_dir / f"{name}.tflite"), experimental_delegates=[d])
    it.allocate_tensors()
    runs = [run for run, _ in it._runtime.plans[0].steps if getattr(run, "launches", 0)]
    assert len(runs) == 1  # one partition
    assert runs[0].launches == LAUNCHES[name]
    invokes = d.stats.invokes
    it.invoke()
    assert d.stats.invokes == invokes + 1
