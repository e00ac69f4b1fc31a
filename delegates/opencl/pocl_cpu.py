"""A work-around for PoCL 3.0's CPU device on processors its LLVM 14 does not know.

PoCL asks LLVM for the host CPU's name and passes it to the compiler as `-target-cpu`. LLVM 14
(the one inside `pocl-binary-distribution` 3.0, the PoCL that `pip install "pyopencl[pocl]"`
brings) names CPUs newer than itself "generic", which its own front end then rejects: every
program build fails with "unknown target CPU 'generic'" (pocl issue #1049; AMD Zen 4/5 hit it).
Later PoCL releases read `POCL_LLVM_CPU_NAME`; 3.0 has no such switch.

The device keeps the name in a heap string that its `llvm_cpu` field points to, right after the
target triple's. `fix_target_cpu` finds that pair in the device structure and writes, in place,
the name of the generic x86-64 level the host supports whose instruction set matches the
built-in library PoCL picks by the same CPU features (an AVX-512 host gets PoCL's avx512
library and must be compiled for x86-64-v4: mixing levels aborts LLVM). It only ever writes
over a string that reads "generic" in a PoCL CPU device on x86-64, and only into the bytes that
malloc gave it. `EDGELITE_POCL_CPU` overrides the name ("off" disables the work-around).
"""
from __future__ import annotations

import ctypes
import os

_FIELDS_SCANNED = 512  # pointer-sized words of the device structure to look through


def _host_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_level(flags: set) -> str | None:
    """The x86-64 level matching PoCL's choice of built-in library for these CPU flags."""
    if "avx512f" in flags:
        v4 = {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
        return "x86-64-v4" if v4 <= flags else None
    if {"avx2", "fma", "bmi1", "bmi2", "f16c", "abm"} <= flags or \
            {"avx2", "fma", "bmi1", "bmi2", "f16c", "lzcnt"} <= flags:
        return "x86-64-v3"
    if "avx" in flags:
        return None  # PoCL's avx / avx_f16c libraries match no generic level
    if {"sse4_1", "ssse3", "cx16"} <= flags:
        return "x86-64-v2"
    return "x86-64"


def _readable_ranges() -> list:
    ranges = []
    with open("/proc/self/maps") as f:
        for line in f:
            span, perms = line.split()[:2]
            if perms.startswith("r"):
                lo, hi = (int(x, 16) for x in span.split("-"))
                ranges.append((lo, hi))
    return ranges


def needs_fix(device) -> bool:
    return _find_cpu_name(device) is not None


def _find_cpu_name(device) -> int | None:
    """The address of the device's "generic" CPU name string, or None."""
    try:
        import pyopencl as cl
        if "Portable Computing Language" not in device.platform.name \
                or not device.type & cl.device_type.CPU:
            return None
        ranges = _readable_ranges()
    except Exception:
        return None

    def readable(p, n):
        return any(lo <= p and p + n <= hi for lo, hi in ranges)

    base = device.int_ptr
    if not readable(base, 8 * _FIELDS_SCANNED):
        return None
    words = (ctypes.c_uint64 * _FIELDS_SCANNED).from_address(base)
    for i in range(1, _FIELDS_SCANNED):
        prev, cur = words[i - 1], words[i]
        if readable(prev, 8) and readable(cur, 8) \
                and ctypes.string_at(prev, 7) == b"x86_64-" \
                and ctypes.string_at(cur, 8) == b"generic\0":
            return cur
    return None


def fix_target_cpu(device) -> str | None:
    """Give PoCL a CPU name LLVM knows when it has "generic"; returns the name written (None
    when nothing needed or could be done)."""
    want = os.environ.get("EDGELITE_POCL_CPU") or cpu_level(_host_flags())
    if not want or want == "off":
        return None
    where = _find_cpu_name(device)
    if where is None:
        return None
    libc = ctypes.CDLL(None)
    usable = getattr(libc, "malloc_usable_size", None)
    if usable is None:
        return None
    usable.restype = ctypes.c_size_t
    usable.argtypes = [ctypes.c_void_p]
    name = want.encode() + b"\0"
    if usable(where) < len(name):
        return None
    ctypes.memmove(where, name, len(name))
    return want
