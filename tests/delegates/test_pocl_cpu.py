"""The PoCL 3.0 target-CPU work-around picks the CPU of PoCL's own built-in library."""
from __future__ import annotations

from edgelite.delegates.opencl.pocl_cpu import cpu_name

HASWELL = {"sse2", "ssse3", "sse4_1", "cx16", "avx", "popcnt", "f16c", "avx2", "fma", "bmi1",
           "bmi2", "abm"}


def test_cpu_name_follows_pocls_library_choice():
    assert cpu_name(HASWELL | {"avx512f", "avx512bw"}) == "skylake-avx512"
    assert cpu_name(HASWELL) == "haswell"
    assert cpu_name(HASWELL - {"abm"}) == "ivybridge"
    assert cpu_name({"sse2", "ssse3", "sse4_1", "cx16"}) == "penryn"
    assert cpu_name({"sse2"}) == "athlon64"


def test_fix_is_a_no_op_without_a_generic_cpu(opencl):
    from edgelite.delegates.opencl.pocl_cpu import fix_target_cpu
    delegate = opencl("fp32")
    assert fix_target_cpu(delegate.dev.device) is None  # fixed already, or never needed
