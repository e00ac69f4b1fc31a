"""The OpenCL device: which one, its context and queue, and compiled programs, shared per process.

One `Device` per OpenCL device: every delegate (and every test) on that device shares its
context, queue and programs. A kernel file is built once per set of defines (precision, vector
widths, tiles, windows), the sets a partition needs together in one program, and cached on disk
by pyopencl (the binary) and PoCL (the per-kernel code), so a second start of a model builds
nothing.
"""
from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

from edgelite.interpreter.delegation import DelegateError

HERE = Path(__file__).resolve().parent
_DEVICES: dict = {}  # (platform name, device name, index) -> Device
_SOURCES: dict = {}  # .cl file name -> its text
_CODES: dict = {}    # .cl file name -> {prefix: {op: code}} (define_codes)
# Defines of a whole program (common.cl reads them once), and the names a kernel file defaults
# or an instance sets, forgotten after each instance.
GLOBAL = frozenset({"HALF", "WEIGHTS_FLOAT"})
RESET = frozenset({"SUFFIX", "VW", "TM", "NV", "DM", "TW", "IS_MAX", "KH", "KW", "SH", "SW",
                   "DH", "DW", "IN_F32", "REQUANT", "INT_DOT", "INT_VNNI", "EXPAND",
                   "NVE"})
WARNING_COUNT = r"\d+ warnings? generated\."   # clang's summary line (PoCL prints it)


def _import_cl():
    try:
        import pyopencl as cl
    except ImportError as e:
        raise DelegateError(
            "the opencl delegate needs pyopencl: pip install 'edgelite[opencl]' (and an OpenCL "
            "driver; pip install pocl-binary-distribution gives a CPU one)") from e
    return cl


def _all_devices(cl) -> list:
    try:
        platforms = cl.get_platforms()
    except Exception as e:  # pyopencl raises LogicError / RuntimeError with no ICD at all
        raise DelegateError(f"no OpenCL platform found ({e}): install an OpenCL driver (pip "
                            "install pocl-binary-distribution gives a CPU one; NVIDIA needs "
                            "/etc/OpenCL/vendors/nvidia.icd)") from e
    devices = []
    for p in platforms:
        try:
            devices.extend(p.get_devices())
        except Exception:
            continue
    devices.sort(key=_added)
    if not devices:
        raise DelegateError("OpenCL platforms found (" + ", ".join(p.name for p in platforms)
                            + ") but no device on any of them")
    return devices


def _added(device) -> bool:
    """PoCL's "basic" device, which _first_listing lists for one thread: sorted after all
    others, so that a choice by kind or index finds what it found without it."""
    return "Portable Computing Language" in device.platform.name \
        and device.name.startswith("basic")


def _describe(devices) -> str:
    return "; ".join(f"{i}: {d.name} ({d.platform.name}, {d.platform.version.strip()})"
                     for i, d in enumerate(devices))


def choose(cl, want=None):
    """The device for option `want`: None (PYOPENCL_CTX if set, else a GPU, else the first),
    "gpu" / "cpu", an index into the list of all devices, "platform:device" as PYOPENCL_CTX,
    part of a device name, or else part of a platform's version (two PoCL builds, pip's and a
    system one, are both "Portable Computing Language": "PoCL 3.1" or "LLVM 15" picks one)."""
    devices = _all_devices(cl)
    if want is None:
        want = os.environ.get("PYOPENCL_CTX") or None
    if want is None:
        gpus = [d for d in devices if d.type & cl.device_type.GPU]
        return (gpus or devices)[0]
    text = str(want).strip()
    kinds = {"gpu": cl.device_type.GPU, "cpu": cl.device_type.CPU,
             "accelerator": cl.device_type.ACCELERATOR}
    if text.lower() in kinds:
        found = [d for d in devices if d.type & kinds[text.lower()]]
        if found:
            return found[0]
    elif ":" in text:
        p, _, d = text.partition(":")
        try:
            platform = cl.get_platforms()[int(p or 0)]
            return sorted(platform.get_devices(), key=_added)[int(d or 0)]
        except (ValueError, IndexError):
            pass
    elif text.isdigit() and int(text) < len(devices):
        return devices[int(text)]
    else:
        low = text.lower()
        found = [d for d in devices if low in d.name.lower()] \
            or [d for d in devices if low in d.platform.version.lower()]
        if found:
            return found[0]
    raise DelegateError(f"no OpenCL device matches {want!r}; devices: {_describe(devices)}")


class Device:
    """A context and in-order queue on one device, and its compiled programs."""

    def __init__(self, cl, device):
        from .pocl_cpu import fix_target_cpu, kernel_cpu
        self.cl = cl
        self.device = device
        self.pocl_cpu = fix_target_cpu(device)
        # the CPU every kernel is compiled for (PoCL's library's, see pocl_cpu.py), or None
        self.kernel_cpu = kernel_cpu(device)
        self.target = "" if self.kernel_cpu is None else \
            f'#define TARGET __attribute__((target("arch={self.kernel_cpu}")))\n'
        self.context = cl.Context([device])
        self.queue = cl.CommandQueue(self.context)
        self.name = device.name.strip()
        self.has_fp16 = "cl_khr_fp16" in device.extensions
        self.is_cpu = bool(device.type & cl.device_type.CPU)
        self.programs: dict = {}  # (file, defines) -> (program, kernel name suffix)
        self.builds = 0  # programs built (from source or pyopencl's binary cache) here
        self.first_launched: set = set()  # (kernel, defines, sizes) launched once already

    def build(self, keys) -> None:
        """Build the instances `keys` ((file name, sorted defines) pairs) not built yet, all
        in one program per set of GLOBAL defines: PoCL spends ~0.1 s on every program besides
        its kernels (MobileNetV2's 8 programs became one). An instance is the file's text
        after its defines, under a suffix of its own for its kernels' names (common.cl)."""
        missing = sorted({k for k in keys if k not in self.programs})
        groups: dict = {}
        for name, defines in missing:
            shared = tuple((k, v) for k, v in defines if k in GLOBAL)
            groups.setdefault(shared, []).append((name, defines))
        with progress("OpenCL: compiling programs", len(groups)) as bar:
            for shared, instances in groups.items():
                self._build_group(shared, instances)
                bar.advance()

    def _build_group(self, shared: tuple, instances: list) -> None:
        """One program: `instances` of kernel files under the GLOBAL defines `shared`."""
        source = [self.target, "".join(f"#define {k} {v}\n" for k, v in shared),
                  _text("common")]
        for i, (name, defines) in enumerate(instances):
            own = [(k, v) for k, v in defines if k not in GLOBAL]
            source += ["".join(f"#define {k} {v}\n" for k, v in own),
                       f"#define SUFFIX _{i}\n", _text("vector"), _text(name),
                       "".join(f"#undef {k}\n" for k in sorted(RESET | {k for k, _ in own}))]
        try:
            prog = self._build_quietly("".join(source))
        except self.cl.RuntimeError as e:
            what = "; ".join(f"{n}.cl {dict(d)}" for n, d in instances)
            raise DelegateError(f"OpenCL program ({what}) failed to build on "
                                f"{self.name}: {e}") from e
        self.builds += 1
        for i, key in enumerate(instances):
            self.programs[key] = (prog, f"_{i}")

    def _build_quietly(self, source: str):
        """The built program, without the compiler's chatter: pyopencl's CompilerWarning for a
        non-empty build log, and the "N warnings generated." that PoCL's compiler prints on
        descriptor 2. A failed build still raises, its log in the message."""
        from edgelite.interpreter.native_stderr import filtered_stderr

        with warnings.catch_warnings(), filtered_stderr(WARNING_COUNT):
            warnings.filterwarnings("ignore", category=self.cl.CompilerWarning)
            return self.cl.Program(self.context, source).build(
                options=["-cl-mad-enable", "-cl-no-signed-zeros"])

    def kernel(self, name: str, kernel: str, defines: dict):
        """Kernel `kernel` of `<name>.cl` built with `defines` (built now if `build` has not)."""
        key = (name, tuple(sorted(defines.items())))
        if key not in self.programs:
            self.build([key])
        prog, suffix = self.programs[key]
        return self.cl.Kernel(prog, kernel + suffix)


class _NoBar:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def advance(self, n: float = 1) -> None:
        pass


def progress(description: str, total: int):
    """Progress of a long compilation: a rich bar on a terminal (cli/progress.py), nothing off
    one (the delegate is a library: its callers' output is theirs)."""
    if total < 1 or not sys.stderr.isatty():
        return _NoBar()
    from edgelite.cli.progress import Progress
    return Progress(description, total=total, line=False)


def define_codes(name: str, prefix: str, codes: dict) -> None:
    """`<name>.cl` is built with `#define <prefix><op> <code>` for each entry of `codes`, put
    before its text: op codes a kernel switches on come from the host's table, so the two
    cannot drift apart."""
    _CODES.setdefault(name, {})[prefix] = dict(codes)


def _text(name: str) -> str:
    text = _SOURCES.get(name)
    if text is None:
        text = _SOURCES[name] = (HERE / f"{name}.cl").read_text()
    codes = _CODES.get(name, {})
    return "".join(f"#define {prefix}{op} {int(code)}\n" for prefix, table in codes.items()
                   for op, code in table.items()) + text


_POOL = "POCL_MAX_PTHREAD_COUNT"
_DEVICES_VAR = "POCL_DEVICES"
_opened = False  # whether this module has listed the OpenCL devices yet


def _first_listing(cl, want, threads):
    """`choose(cl, want)`. PoCL 3.0 makes its devices when they are first listed in a process,
    and two things must be asked for then, by variables it reads at that moment (set for this
    call only, not for child processes, and only where the user has not set them):

    - POCL_DEVICES="pthread basic": besides the threaded CPU device, PoCL's "basic" one, which
      runs kernels on the thread that waits for them: "threads": 1 runs there (`_single`), so
      an invoke hands no work to a worker that must first get a core (on a loaded 2-core
      machine face detection took 2.5 ms a invoke through one PoCL worker, 0.75 ms on basic,
      LiteRT 0.70 ms; CPU 0.90 / 0.74 / 0.69 ms) and pays no worker hand-offs (MobileNetV2
      5.6 -> 5.4 ms CPU).
    - POCL_MAX_PTHREAD_COUNT=threads (from 2 threads on): the threaded device's worker pool.
      PoCL 3.0 runs every kernel on all of its workers, a sub-device's too (measured:
      "threads": 1 as a sub-device kept both workers of 2 busy); later delegates of the
      process share the pool that the first one made."""
    global _opened
    if _opened:
        return choose(cl, want)
    names = []
    if _DEVICES_VAR not in os.environ:
        os.environ[_DEVICES_VAR] = "pthread basic"
        names.append(_DEVICES_VAR)
    if threads is not None and threads > 1 and _POOL not in os.environ:
        os.environ[_POOL] = str(threads)
        names.append(_POOL)
    try:
        return choose(cl, want)
    finally:
        for name in names:
            del os.environ[name]
        _opened = True


def _single(cl, device):
    """PoCL's "basic" device beside `device`, PoCL's threaded CPU device, or None."""
    from .pocl_cpu import is_pocl_cpu
    if not is_pocl_cpu(device) or not device.name.startswith("pthread"):
        return None
    try:
        found = [d for d in device.platform.get_devices(cl.device_type.CPU)
                 if d.name.startswith("basic")]
    except cl.Error:
        return None
    return found[0] if found else None


def open_device(want=None, threads=None) -> Device:
    """The shared `Device` for option `want` (see `choose`). `threads` (a CPU device only): the
    compute units its kernels run on, as a sub-device of that many (PoCL's CPU device runs a
    worker thread per compute unit, all of them by default; a first delegate of the process
    with "threads" sets how many PoCL starts: `_first_listing`); on PoCL 1 is its "basic"
    device (kernels on the calling thread); None or more than it has: all."""
    cl = _import_cl()
    if isinstance(threads, str) and threads.strip().isdigit():
        threads = int(threads)
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):
        raise DelegateError(f"threads {threads!r}: use a whole number >= 1 (or None: all "
                            "of the device's compute units)")
    device = _first_listing(cl, want, threads)
    if threads == 1 and (basic := _single(cl, device)) is not None:
        device, threads = basic, None  # one thread: the calling one
    if threads is not None:
        if not device.type & cl.device_type.CPU or threads >= device.max_compute_units:
            threads = None
    key = (device.platform.name, device.name, device.int_ptr, threads)
    dev = _DEVICES.get(key)
    if dev is None:
        if threads is not None:
            from .pocl_cpu import fix_target_cpu
            fix_target_cpu(device)  # before the sub-device copies the device's CPU name
            part = cl.device_partition_property
            try:
                device = device.create_sub_devices(
                    [part.BY_COUNTS, threads, part.BY_COUNTS_LIST_END])[0]
            except cl.Error as e:
                raise DelegateError(f"threads {threads}: {device.name.strip()} cannot be "
                                    f"partitioned into {threads} compute units ({e})") from e
        dev = _DEVICES[key] = Device(cl, device)
        dev.threads = threads or device.max_compute_units
    return dev


# A partition whose convolutions and matrix products average fewer multiply-adds a node than
# this runs on PoCL's basic device (kernels on the calling thread) whatever "threads" asks:
# its kernels (tens of microseconds) are too small to split across PoCL's workers, which wake
# for every kernel (BlazeFace, 0.8M a node, 28 launches: 2 workers took 1.04 ms of wall and
# CPU time an invoke where the calling thread alone took 0.76 at load 1.2). MobileNetV2
# (5.7M a node) and hand landmarks (2.9M) keep the workers.
SPLIT_MIN_MACS = 1_500_000


def macs_per_node(nodes) -> float:
    """Mean multiply-adds of the convolutions and matrix products among `nodes` (0: none):
    threads.GEMM_SIZE's count of each."""
    from edgelite.interpreter.threads import GEMM_SIZE
    sizes = []
    for node in nodes:
        size = GEMM_SIZE.get(node.op)
        if size is None or len(node.inputs) < 2 or node.inputs[1] is None:
            continue
        tensors = [t for t in (*node.inputs, *node.outputs) if t is not None]
        op = SimpleNamespace(inputs=[-1 if t is None else t.index for t in node.inputs],
                             outputs=[t.index for t in node.outputs])
        sizes.append(size({t.index: tuple(t.shape) for t in tensors}, op))
    return sum(sizes) / len(sizes) if sizes else 0.0


def for_work(dev: Device, nodes, want=None) -> Device:
    """`dev`, or PoCL's basic device (the calling thread) when `dev` runs PoCL's workers and
    `nodes` average fewer than SPLIT_MIN_MACS multiply-adds a convolution (see there)."""
    if getattr(dev, "threads", 1) <= 1 or not dev.name.startswith("pthread") \
            or macs_per_node(nodes) >= SPLIT_MIN_MACS:
        return dev
    from .pocl_cpu import is_pocl_cpu
    if not is_pocl_cpu(dev.device):
        return dev
    one = open_device(want, 1)
    return one if one.name.startswith("basic") else dev
