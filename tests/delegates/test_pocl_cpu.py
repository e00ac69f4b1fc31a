"""The PoCL 3.0 target-CPU work-around picks the CPU of PoCL's own built-in library, and gives
the device that CPU where LLVM 14's name for the host is "generic" or lacks its AVX-512."""
from __future__ import annotations

import pytest

from edgelite.delegates.opencl.pocl_cpu import _stale, cpu_name

HASWELL = {"sse2", "ssse3", "sse4_1", "cx16", "avx", "popcnt", "f16c", "avx2", "fma", "bmi1",
           "bmi2", "abm"}


def test_cpu_name_follows_pocls_library_choice():
    assert cpu_name(HASWELL | {"avx512f", "avx512bw"}) == "skylake-avx512"
    assert cpu_name(HASWELL) == "haswell"
    assert cpu_name(HASWELL - {"abm"}) == "ivybridge"
    assert cpu_name({"sse2", "ssse3", "sse4_1", "cx16"}) == "penryn"
    assert cpu_name({"sse2"}) == "athlon64"


def test_stale_device_cpus():
    """LLVM 14 names Zen 5 "generic" (which it then rejects) and Zen 4 "znver3" (no AVX-512,
    beside PoCL's skylake-avx512 library): both become the library's CPU. A Zen 3 (znver3, the
    haswell library) and a host LLVM names after an AVX-512 CPU keep theirs."""
    assert _stale("generic", "skylake-avx512") and _stale("generic", "haswell")
    assert _stale("znver3", "skylake-avx512")
    assert not _stale("znver3", "haswell")
    assert not _stale("znver4", "skylake-avx512")
    assert not _stale("sapphirerapids", "skylake-avx512")
    assert not _stale("skylake-avx512", "skylake-avx512")


def test_fix_is_a_no_op_once_the_device_cpu_is_right(opencl):
    from edgelite.delegates.opencl.pocl_cpu import device_cpu, fix_target_cpu, is_pocl_cpu
    delegate = opencl("fp32")
    assert fix_target_cpu(delegate.dev.device) is None  # fixed already, or never needed
    if is_pocl_cpu(delegate.dev.device):
        name = device_cpu(delegate.dev.device)
        assert name is not None, "the device's CPU name was not found in its structure"
        assert not _stale(name, delegate.dev.kernel_cpu), name


@pytest.mark.parametrize("name, defines", [
    ("gemm", {"HALF": 1, "NV": 2, "TM": 4, "VW": 16}),
    ("gemm", {"NV": 2, "TM": 4, "VW": 16}),
    ("depthwise", {"HALF": 1, "IS_MAX": 1, "KH": 2, "KW": 2, "SH": 2, "SW": 2, "TW": 4,
                   "VW": 16}),
])
def test_512_bit_vectors_build(opencl, name, defines):
    """float16 crosses between the kernels and PoCL's builtins by value: on a Zen 4 left
    "znver3" beside the AVX-512 library, clang rejected every one of these."""
    dev = opencl("fp32").dev
    key = (name, tuple(sorted(defines.items())))
    dev.build([key])
    assert key in dev.programs
