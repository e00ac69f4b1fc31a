"""PoCL 3.0's CPU device: kernels compiled for the CPU of PoCL's built-in library.

PoCL links every kernel with a built-in library (vload16, fma, fmax, exp, ...) that it picks by
the host's CPU features from eight variants (sse2 ... avx2, avx512), each compiled for one CPU
(`cpu_name`: athlon64 ... haswell, skylake-avx512), and compiles the kernel itself for the CPU
name LLVM gives the host. LLVM inlines a function only into one whose CPU has every feature of
the callee's; a host CPU that lacks one of the library CPU's features, even one that changes no
instruction the kernels use, gets a call per vload16 / fma / fmax in the innermost loops:
Zen 1-3 lack haswell's ERMSB (and Zen 1-2 its INVPCID), Alder Lake lacks its ERMSB; measured,
PoCL ran MobileNetV2 at 8x the numpy path on a Zen 3. PoCL 3.0 takes no build option for the
target (its option filter allows -cl-*, -D, -I, -w, -g, -Werror only; POCL_EXTRA_BUILD_FLAGS goes
through the same filter) and no variable for the CPU name, so the kernels say it themselves:
`kernel_cpu` is the library's CPU, and device.py defines TARGET, which common.cl puts on every
kernel, as `__attribute__((target("arch=<it>")))`. The work-group function PoCL wraps around a
kernel inlines it whatever the target, and on a host that LLVM already names the library's CPU,
or one above it, the attribute changes nothing.

Two cases still need more, both an LLVM 14 that predates the host CPU. (1) LLVM 14 names
CPUs newer than itself "generic", which its own front end then rejects, so that every program
build fails with "unknown target CPU 'generic'" (pocl issue #1049; AMD Zen 5 hits it) before any
attribute is read. (2) It names every AMD family 19h CPU "znver3", Zen 4 included (znver4
arrived in LLVM 16): a CPU without AVX-512, while PoCL picks the skylake-avx512 library by the
host's flags. Then the kernels (TARGET) and the library have AVX-512 and the builtins'
declarations, compiled for the device's CPU, have not: clang rejects every 512-bit vector that
crosses between them ("AVX vector return of type 'float16' without 'avx512f' enabled changes
the ABI", every VW=16 kernel), and an integer kernel built anyway crashed at its launch
(measured on a Zen 4, EPYC family 25 model 17). The device keeps the name in a heap string that
its `llvm_cpu` field points to, right after the target triple's. `fix_target_cpu` finds that
pair in the device structure and writes, in place, the library's CPU name: the same state as a
host that LLVM names after the library's CPU, and on (1) a CPU unknown to LLVM 14 is newer than
all of these and has their features, on (2) the host has every feature of skylake-avx512's.
It only ever writes over a string that reads "generic", or a CPU name that `AVX512` lacks when
the library's CPU is in it, in a PoCL CPU device on x86-64, and only into the bytes that malloc
gave it. Later PoCL releases read `POCL_LLVM_CPU_NAME`; 3.0 has no such switch. The one way
around (2) without a write is to keep every vector at 256 bits on such a host (VW <= 8, the
integer product at 256 bits without VNNI), which gives up the width the host has.
`EDGELITE_POCL_CPU` overrides the name for both ("off" disables both).

Debian's PoCL 3.1 (`pocl-opencl-icd`, LLVM 15, a "distro" build) takes the device's CPU name
from the kernel library it picks by the same feature tests (its device is named
"pthread-skylake-avx512-<cpu>" on a Zen 5), so there `kernel_cpu` equals the device's CPU and
`fix_target_cpu` finds no "generic": both are no-ops (measured: needs_fix False, the same
kernels). Its library variants are the same CPUs as `cpu_name` gives, but sse2's, x86-64 there
(athlon64 here: a superset, which inlines it).
"""
from __future__ import annotations

import ctypes
import functools
import os

_FIELDS_SCANNED = 512  # pointer-sized words of the device structure to look through
_NAME_BYTES = 32  # the most of a CPU name string read

# LLVM CPU names with AVX-512 (F, CD, BW, DQ, VL: skylake-avx512's), the x86-64 ones LLVM 14 to
# 19 know.
AVX512 = frozenset({"skylake-avx512", "cascadelake", "cooperlake", "cannonlake",
                    "icelake-client", "icelake-server", "tigerlake", "rocketlake",
                    "sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d",
                    "znver4", "znver5", "x86-64-v4"})


def _host_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_name(flags: set) -> str:
    """The CPU that PoCL's built-in library for these CPU flags was compiled for: the same
    feature tests as PoCL 3.0's getX86KernelLibName, and the -mcpu of each library variant.
    Kernels must target exactly it: LLVM inlines the library's functions (vload, fma, ...)
    only into code whose CPU has every feature of theirs, and calls them otherwise (4x
    slower); a lower level than the library's aborts LLVM."""
    lzcnt = "abm" in flags or "lzcnt" in flags
    name = "athlon64"
    if {"ssse3", "cx16"} <= flags:
        name = "core2"
    if {"sse4_1", "cx16"} <= flags:
        name = "penryn"
    if {"avx", "cx16", "popcnt"} <= flags:
        name = "sandybridge"
    if {"avx", "cx16", "popcnt", "f16c"} <= flags:
        name = "ivybridge"
    if {"avx", "cx16", "popcnt", "xop", "fma4"} <= flags:
        name = "bdver1"
    if {"avx", "avx2", "cx16", "popcnt", "f16c", "fma", "bmi1", "bmi2"} <= flags and lzcnt:
        name = "haswell"
    if "avx512f" in flags:
        name = "skylake-avx512"
    return name


def _readable_ranges() -> list:
    ranges = []
    with open("/proc/self/maps") as f:
        for line in f:
            span, perms = line.split()[:2]
            if perms.startswith("r"):
                lo, hi = (int(x, 16) for x in span.split("-"))
                ranges.append((lo, hi))
    return ranges


def is_pocl_cpu(device) -> bool:
    """PoCL's CPU device on x86-64 (the one whose kernel library `cpu_name` describes)."""
    try:
        import pyopencl as cl
        return "Portable Computing Language" in device.platform.name \
            and bool(device.type & cl.device_type.CPU) and os.uname().machine == "x86_64"
    except Exception:
        return False


def _wanted_cpu() -> str:
    """The CPU name both work-arounds use: EDGELITE_POCL_CPU's, else the library's for this
    host (read from /proc/cpuinfo once a process)."""
    return os.environ.get("EDGELITE_POCL_CPU") or _library_cpu()


@functools.lru_cache(maxsize=1)
def _library_cpu() -> str:
    return cpu_name(_host_flags())


def kernel_cpu(device) -> str | None:
    """The CPU that kernels for `device` should be compiled for (the `target("arch=...")` of
    every kernel): PoCL's library's on PoCL's x86-64 CPU device, None elsewhere or when
    EDGELITE_POCL_CPU is "off"."""
    if not is_pocl_cpu(device):
        return None
    want = _wanted_cpu()
    return None if want == "off" else want


def needs_fix(device) -> bool:
    return _find_cpu_name(device) is not None


def device_cpu(device) -> str | None:
    """The CPU name PoCL's device compiles for (what LLVM calls the host, or what
    `fix_target_cpu` wrote), read from the device structure; None where it is not found."""
    found = _cpu_name_string(device)
    return None if found is None else found[1]


def _stale(name: str, want: str) -> bool:
    """Whether the device's CPU `name` must become `want` (the library's CPU): "generic", or a
    CPU without the AVX-512 that the library has."""
    return name == "generic" or (want in AVX512 and name not in AVX512 and name != want)


def _find_cpu_name(device) -> int | None:
    """The address of the device's CPU name string when `_stale`, or None."""
    want = _wanted_cpu()
    found = _cpu_name_string(device)
    if found is None or not want or want == "off" or not _stale(found[1], want):
        return None
    return found[0]


def _cpu_name_string(device) -> tuple | None:
    """(address, name) of the device's CPU name: the string that the pointer after the one to
    its target triple ("x86_64-...") points to; None elsewhere."""
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
        if readable(prev, 8) and readable(cur, _NAME_BYTES) \
                and ctypes.string_at(prev, 7) == b"x86_64-":
            raw = ctypes.string_at(cur, _NAME_BYTES)
            name, nul, _ = raw.partition(b"\0")
            text = name.decode("latin-1")
            if nul and text and all(c.isascii() and (c.isalnum() or c in "-_.") for c in text):
                return cur, text
    return None


def fix_target_cpu(device) -> str | None:
    """Give PoCL's device the library's CPU name where its own is `_stale`; returns the name
    written (None when nothing needed or could be done)."""
    where = _find_cpu_name(device)   # (None where EDGELITE_POCL_CPU is "off")
    if where is None:
        return None
    libc = ctypes.CDLL(None)
    usable = getattr(libc, "malloc_usable_size", None)
    if usable is None:
        return None
    usable.restype = ctypes.c_size_t
    usable.argtypes = [ctypes.c_void_p]
    want = _wanted_cpu()
    name = want.encode() + b"\0"
    if usable(where) < len(name):
        return None
    ctypes.memmove(where, name, len(name))
    return want
