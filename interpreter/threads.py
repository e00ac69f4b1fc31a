"""The BLAS threads numpy uses while an interpreter runs (`num_threads`).

numpy's wheels bundle OpenBLAS under prefixed names; we find the loaded library and call its
set/get functions through ctypes. Where no OpenBLAS is found the limit is a no-op.

The default (`num_threads` None or -1) is **one thread**, as in LiteRT: -1 "lets the runtime
decide", and LiteRT's CPU backend context (ruy, gemmlowp) and its XNNPACK delegate then run one
thread (`CpuBackendContext` starts at `set_max_num_threads(1)`; XNNPACK makes no thread pool for
fewer than 2 threads). More threads are used only when asked for: a default of "every core"
collapses on a loaded machine (OpenBLAS's threads spin waiting for cores that other processes
hold: 10-100x slower on a busy 2-core machine than one thread).

**More than one thread only on cores that are free.** OpenBLAS's threads wait for each other by
spinning (its server threads between calls, the caller for its workers, the workers for each
other's packed panels inside a GEMM): when other processes hold the cores, a GEMM split in two
waits for the half whose thread is not running, up to a scheduler period, at every GEMM. On this
project's 2-core development machine under a load average of ~10, MobileNetV2 went from 120 ms at
one thread to 1.6 s at two (and 13 -> 255 ms of CPU). So a block that asks for N > 1 threads
gets at most the cores other processes left idle over the last half second (/proc/stat's busy
time less this process's own), at least one: `cores_free()`. On an idle machine that is N. Set
`ADAPTIVE = False` (or EDGELITE_BLAS_THREADS=fixed in the environment) to hand OpenBLAS N
threads whatever the load.

OpenBLAS's thread count is one setting of the whole process. Interpreters in several threads
share it without racing: the first block to enter sets it and the last to leave restores what
the process had; a block that wants another count waits until the blocks running with the
current one have left (changing it while another thread is inside OpenBLAS is what gave wrong
results). A block whose count is what OpenBLAS already has changes nothing.

**No limit where it changes nothing.** In a default process (no OPENBLAS_NUM_THREADS) OpenBLAS
runs a thread per core, so a one-thread invoke set the count to 1 and back every time (2.5 of
the digits CNN's ~11 µs). OpenBLAS runs a small call on one thread whatever its count, so an
interpreter whose plans make only such calls (`serial`) skips the block at one thread: the
process's count is never touched, and another thread changing it cannot reach those calls
(OpenBLAS reads the count only above its size threshold). `openblas_set_num_threads_local`
would not do: in the pthreads builds numpy bundles it sets the process's count (0.3.31).

**At num_threads > 1, one kind of parallelism a plan.** OpenBLAS splits a plan's large GEMMs,
or (`rows_first`) OpenBLAS stays at one thread and the depthwise layers' rows are split on
edgelite's own worker threads (workers.py, kernels/depthwise_rows.py): OpenBLAS's idle workers
spin for ~2**28 cycles after each threaded call, holding the second core through the invoke.
"""
from __future__ import annotations

import contextlib
import ctypes
import math
import os
import threading
import time
from threading import get_ident

import numpy as np

DEFAULT = 1   # num_threads None or -1: as LiteRT's CPU kernels and XNNPACK (see above)
ADAPTIVE = os.environ.get("EDGELITE_BLAS_THREADS", "").lower() != "fixed"
SAMPLE_S = 0.5        # how often the idle cores are measured again (at a block's entry)
FREE_SHARE = 0.7      # a core counts as free when other processes leave this much of it idle

_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
            "openblas_set_num_threads64_", "openblas_set_num_threads")
_api = None
_blas_version: tuple = (0,)   # the library's version (_find)
_find_lock = threading.Lock()

# The process-wide setting while edgelite blocks run: how many are inside, with which count,
# and what the process had before the first entered.
_lock = threading.Lock()      # entered directly on the hot path (no Python frame), or...
_state = threading.Condition(_lock)   # ...through the condition, to wait for another count
_waiting = 0                  # blocks waiting in enter for another count
_active = 0
_current = None
_saved = None
_inside = threading.local()   # this thread's depth of nested blocks (they keep the outer count)
# The fast path: a block whose count OpenBLAS already has, while no block is changing it, only
# puts its thread's id in `_fast` (list appends and removes are atomic) and takes no lock: 0.5
# instead of 1.5 µs an invoke. A block that changes the count sets `_changing`, waits
# until `_fast` is empty, sets it and counts the change in `_epoch`; a fast block reads `_epoch`,
# the count, then appends and backs off to the locked path when `_changing` is set or `_epoch`
# moved: either the changer sees the append or the fast block sees the change. On the locked
# path, a block at the count running joins `_fast` after it waited JOIN_S for a change.
_fast: list = []
_changing = False
_epoch = 0                    # changes of the count so far
FAST = -2                     # what enter returns for a block on the fast path
JOIN_S = 0.1                  # how long a block at the count running waits for a change


def _version() -> tuple:
    """The loaded OpenBLAS's version, from the config string of the library `_find` chose
    ((0,) where unknown)."""
    _find()
    return _blas_version


def _find():
    global _api, _blas_version
    if _api is not None:
        return _api
    with _find_lock:
        if _api is not None:
            return _api
        found = ()
        try:
            with open("/proc/self/maps") as f:
                paths = sorted({line.split()[-1] for line in f if "openblas" in line.lower()})
        except OSError:
            paths = []
        for path in paths:
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for name in _SETTERS:
                getter = name.replace("_set_", "_get_")
                if hasattr(lib, name) and hasattr(lib, getter):
                    setter, get = getattr(lib, name), getattr(lib, getter)
                    setter.argtypes, setter.restype = [ctypes.c_int], None
                    get.restype = ctypes.c_int
                    found = (setter, get)
                    config = getattr(lib, name.replace("_set_num_threads", "_get_config"), None)
                    if config is not None:
                        import re
                        config.restype = ctypes.c_char_p
                        m = re.search(rb"OpenBLAS (\d+)\.(\d+)\.(\d+)", config() or b"")
                        _blas_version = tuple(map(int, m.groups())) if m else (0,)
                    break
            if found:
                break
        _api = found
    return _api


def blas_threads() -> int | None:
    api = _find()
    return api[1]() if api else None


def _cpu_ticks():
    """(busy, total) ticks of all CPUs from /proc/stat, or None where there is none."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()[1:9]
    except OSError:
        return None
    ticks = [int(v) for v in fields]
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)   # idle and iowait are not busy


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class _Sampler:
    """Cores other processes leave idle: busy CPU time of the machine less this process's own,
    over the time since the last sample (taken at most every SAMPLE_S seconds)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.last = None       # (monotonic, process CPU seconds, busy ticks, total ticks)
        self.free = None

    def __call__(self) -> float:
        now = time.monotonic()
        last = self.last
        if last is not None and now - last[0] < SAMPLE_S and self.free is not None:
            return self.free
        with self.lock:
            ticks = _cpu_ticks()
            cores = _cores()
            if ticks is None:   # no /proc/stat: the load average, where there is one
                try:
                    self.free = max(0.0, cores - os.getloadavg()[0])
                except (AttributeError, OSError):
                    self.free = float(cores)
                self.last = (now, 0.0, 0, 0)
                return self.free
            mine = time.process_time()
            if last is not None and ticks[1] > last[3]:
                busy = (ticks[0] - last[2]) / (ticks[1] - last[3]) * cores   # cores in use
                ours = (mine - last[1]) / max(now - last[0], 1e-9)
                self.free = min(float(cores), max(0.0, cores - max(0.0, busy - ours)))
            elif self.free is None:   # the first sample: the load average, less this thread
                self.free = min(float(cores), max(0.0, cores + 1 - os.getloadavg()[0]))
            self.last = (now, mine, ticks[0], ticks[1])
            return self.free


_sampler = _Sampler()


def cores_free() -> float:
    """How many cores other processes left idle lately (fractional; see the module's doc)."""
    return _sampler()


def effective(want: int) -> int:
    """The BLAS threads a block asking for `want` gets: `want`, or fewer when other processes
    hold the cores (ADAPTIVE), at least 1."""
    if want <= 1 or not ADAPTIVE:
        return want
    return max(1, min(want, int(cores_free() + 1 - FREE_SHARE)))


def resolve(num_threads: int | None) -> int:
    """The thread count an interpreter's `num_threads` means: None and -1 give DEFAULT."""
    return DEFAULT if num_threads is None or num_threads < 1 else int(num_threads)


# -- plans that need no limit ------------------------------------------------------------------
# OpenBLAS runs a call on one thread, whatever its count, below these sizes (0.3.28-0.3.31,
# interface/gemm.c, gemv.c, kernel/x86_64/*dot.c): SGEMM / DGEMM at m*n*k <= SMP_THRESHOLD_MIN
# (65536) * GEMM_MULTITHREAD_THRESHOLD (4), GEMV at m*n < 115200 * 4, SDOT never, DDOT at
# n <= 10000; complex GEMM at m*n*k <= 8192 * 4. test_threads_serial checks the float32 bound
# against the bundled library (workers woken or not).
SERIAL_F32 = 65536 * 4
SERIAL_OTHER = 8192    # float64 (DDOT) and complex tensors
_WIDE = frozenset(("float64", "complex64", "complex128"))


# Kernel modules that call BLAS (matmul, dot, tensordot, linalg) or import one that does
# (test_threads_serial checks the list against the sources). An op whose kernels are all
# elsewhere makes no BLAS call.
BLAS_MODULES = frozenset((
    "activations", "bidirectional_lstm", "conv", "conv3d", "conv_int16", "conv_int8",
    "depthwise_rows", "fully_connected", "fully_connected_int8", "gather", "hybrid",
    "hybrid_conv", "hybrid_lstm", "hybrid_row", "layer_norm", "lstm", "lstm_full",
    "mediapipe_ops", "misc", "reduce", "reduce_int8", "rnn", "rnn_cells", "rnn_loop",
    "transpose_conv_int8", "while_rnn"))
# Modules that reach BLAS only through these ops (control.py's WHILE runs a Keras RNN loop as
# while_rnn's sequence kernel); their other ops make no BLAS call.
BLAS_VIA = {"control": frozenset(("WHILE",))}
_VIA_OPS = frozenset().union(*BLAS_VIA.values())


def _conv_2d(shapes, op):   # out pixels * Cout * (kh * kw * Cin / groups): im2col's m*n*k
    return math.prod(shapes[op.outputs[0]]) * math.prod(shapes[op.inputs[1]][1:])


def _depthwise(shapes, op):
    w = shapes[op.inputs[1]]
    return math.prod(shapes[op.outputs[0]]) * w[1] * w[2]


def _fully_connected(shapes, op):   # rows * units * in
    return math.prod(shapes[op.outputs[0]]) * shapes[op.inputs[1]][-1]


def _batch_matmul(shapes, op):      # batches * m * n * k, k either of x's last two axes
    x = shapes[op.inputs[0]]
    return math.prod(shapes[op.outputs[0]]) * max(x[-2:], default=1)


def _transpose_conv(shapes, op):    # in pixels * Cin * (Cout * kh * kw)
    return math.prod(shapes[op.inputs[2]]) * math.prod(shapes[op.inputs[1]][:3])


# m*n*k of the GEMMs an op's kernels make (their arithmetic: the multiply-adds of the op)
GEMM_SIZE = {"CONV_2D": _conv_2d, "DEPTHWISE_CONV_2D": _depthwise,
             "FULLY_CONNECTED": _fully_connected, "BATCH_MATMUL": _batch_matmul,
             "TRANSPOSE_CONV": _transpose_conv}


def op_bound(sizes) -> int:
    """A bound on m*n*k of any BLAS call a kernel makes for an op not in GEMM_SIZE whose
    tensors (inputs, outputs, intermediates) have these element counts: 4 times their sum times
    the largest. A GEMM C[m,n] = A[m,k] B[k,n] of a kernel has C within an output (or a slab
    of one) and k within a weight or input, or A, B and C all within op tensors (m*n*k =
    sqrt(|A| |B| |C|)); the sum covers weights split into several tensors (an LSTM's gates)
    that the kernel concatenates, the 4 a WHILE run as one recurrent kernel (while_rnn: its
    gates' weights live in the body, sized there)."""
    sizes = list(sizes)
    return 4 * sum(sizes) * max(sizes) if sizes else 0


def _blas_size(op, name, shapes, sizes) -> int:
    from .kernels import registry
    gemm = GEMM_SIZE.get(name)
    if gemm is not None and len(op.inputs) > 1 and op.inputs[1] >= 0:
        try:
            return gemm(shapes, op)
        except (IndexError, TypeError):
            pass
    modules = registry.REGISTERED_BY.get(name)
    if modules is not None and not modules & BLAS_MODULES and name not in _VIA_OPS:
        return 0
    return op_bound(sizes)


def _custom_is_ours(name: str) -> bool:
    from .kernels import registry
    prepare = registry.CUSTOM_OPS.get(name)
    return prepare is not None and getattr(prepare, "__module__", "").startswith(
        __name__.rpartition(".")[0] + ".")


def serial(runtime) -> bool:
    """True when no BLAS call of the model's plans can run on more than one thread: every op's
    `op_bound` is under OpenBLAS's threshold, every shape is known (the main plan prepared, no
    tensor whose shape is found only while running, other subgraphs at the file's shapes with
    no dynamic dimension and the main plan at its file's shapes), no user custom op (its code
    may call BLAS at any size). Then an invoke at one thread needs no limit: OpenBLAS's count
    does not matter to it, and the process's count stays as the user set it (issue 17)."""
    if _version() < (0, 3, 27):   # the bound is checked on 0.3.28's sources and 0.3.31
        return False
    model = runtime.model
    main = runtime.plans.get(0)
    if main is None or not main.ready or main.dynamic:
        return False
    many = len(model.subgraphs) > 1
    for si, sg in enumerate(model.subgraphs):
        if si == 0:
            shapes = [info.shape for info in main.infos]
            if many and any(tuple(shapes[t]) != tuple(sg.tensors[t].shape) for t in sg.inputs):
                return False   # resized: the bodies' shapes may follow the main plan's
        else:
            shapes = [t.shape for t in sg.tensors]
        for t in sg.tensors if si else ():
            if t.shape_signature is not None and -1 in t.shape_signature:
                return False
        for op in sg.operators:
            if op.opcode.builtin == "CUSTOM" and not _custom_is_ours(op.opcode.custom_code):
                return False
            sizes, wide = [], False
            for t in (*op.inputs, *op.outputs, *op.intermediates):
                if t < 0:
                    continue
                shape = shapes[t]
                if any(not isinstance(d, (int, np.integer)) or d < 0 for d in shape):
                    return False
                sizes.append(math.prod(shape))
                wide = wide or sg.tensors[t].dtype in _WIDE
            if _blas_size(op, op.opcode.name, shapes, sizes) > (
                    SERIAL_OTHER if wide else SERIAL_F32):
                return False
    return True


# -- at num_threads > 1: OpenBLAS's threads, or rows on edgelite's workers ---------------------
# OpenBLAS's workers spin (x86-64: nops, no yield) ~2**28 cycles after each threaded call, so
# in an invoke whose GEMMs OpenBLAS threads its worker holds the second core throughout: a
# worker of edgelite's (workers.py) splitting a depthwise layer then shares that core with it
# and loses (mp_hand_landmark 2/1 wall 1.10 with both). So a plan runs one way: OpenBLAS at
# num_threads, or OpenBLAS at one thread and the depthwise rows split on edgelite's workers.
# Measured in idle blocks (others < 0.25 cores, 6-9 blocks of 0.3 s each, this 2-vCPU VM):
# splitting rows with OpenBLAS at one thread gave mp_hand_landmark 1.26 and selfie segmentation
# 1.19 (OpenBLAS's threads: 0.94, 0.92) and a lone 112x112x24 depthwise layer 0.92 (a helper
# starts ~40-110 us after it is asked, against parts of ~200 us). So rows are split only in a
# plan with no GEMM OpenBLAS would thread.
SPLIT_ROWS = os.environ.get("EDGELITE_SPLIT_ROWS", "auto").lower()   # auto, always, never


def rows_first(runtime) -> bool:
    """Whether the main plan splits its depthwise rows on edgelite's workers (OpenBLAS at one
    thread) rather than letting OpenBLAS thread its GEMMs: it has depthwise layers above
    SPLIT_MACS and no GEMM OpenBLAS would split (SPLIT_ROWS "auto"; see above)."""
    if SPLIT_ROWS in ("always", "never"):
        return SPLIT_ROWS == "always"
    main = runtime.plans.get(0)
    if main is None or not main.ready:
        return False
    from .kernels.depthwise_rows import SPLIT_MACS
    shapes = [info.shape for info in main.infos]
    gemm = depthwise = 0
    for op in runtime.model.subgraphs[0].operators:
        name = op.opcode.name
        size = GEMM_SIZE.get(name)
        if size is None or len(op.inputs) < 2 or op.inputs[1] < 0:
            continue
        try:
            macs = size(shapes, op)
        except (IndexError, TypeError):
            continue
        if name == "DEPTHWISE_CONV_2D":
            depthwise += macs if macs >= SPLIT_MACS else 0
        elif macs > 2 * SERIAL_F32:   # what OpenBLAS splits across 2 threads
            gemm += macs
    return depthwise > 0 and gemm == 0


@contextlib.contextmanager
def limit(num_threads: int | None):
    """Within the block, BLAS uses at most `num_threads` threads (None or -1: DEFAULT). Safe
    to enter from several threads at once (see the module's docstring)."""
    entered = enter(num_threads)
    try:
        yield
    finally:
        leave(entered)


def enter(num_threads: int | None) -> int:
    """`limit`'s entry as a plain call (an invoke's hot path: no generator): returns what
    `leave` needs: FAST (a block on the fast path), this thread's depth of nested blocks
    before it, or -1 (no OpenBLAS)."""
    global _active, _current, _saved, _waiting, _changing, _epoch
    api = _api if _api is not None else _find()
    if not api:
        return -1
    want = DEFAULT if num_threads is None or num_threads < 1 else int(num_threads)
    if want > 1:
        want = effective(want)
    get = api[1]
    epoch, count = _epoch, get()
    if count == want:   # the fast path (see _fast), unless a change began or ended since
        ident = get_ident()
        _fast.append(ident)
        if not _changing and _epoch == epoch:
            return FAST
        _fast.remove(ident)
        if _changing:   # the block changing the count may have seen the append: look again
            with _lock:
                _state.notify_all()
    depth = getattr(_inside, "depth", 0)
    if depth:   # nested in this thread's own block (a signature runner's invoke): as it is
        _inside.depth = depth + 1
        return depth
    if _fast and get_ident() in _fast:   # nested in this thread's own fast block: as it is
        _fast.append(get_ident())
        return FAST
    _inside.depth = 1
    try:
        with _lock:
            join_at = None
            while _changing or (_active and _current != want):
                timeout = None
                if _changing and _fast and get() == want:
                    # A change waits (in _state.wait: not yet made) for fast blocks at the
                    # count running. Waiting for it hangs when one of them waits on this
                    # block (a custom op handing work to interpreters in a pool at the same
                    # count); joining them at once starves the change while blocks overlap
                    # (389e030's locked joins: forever). So: join after JOIN_S.
                    now = time.monotonic()
                    if join_at is None:
                        join_at = now + JOIN_S
                    elif now >= join_at:
                        _fast.append(get_ident())
                        _inside.depth = 0
                        return FAST
                    timeout = join_at - now
                _waiting += 1
                try:
                    _state.wait(timeout)
                finally:
                    _waiting -= 1
            if _active == 0:
                _saved = count if _epoch == epoch else get()   # no change since: as it was
                if _saved != want:   # once no fast block is inside (as in leave; inline: an
                    _changing = True  # invoke's Python frames are counted, frames.py)
                    try:
                        while _fast:
                            _state.wait()
                        api[0](want)
                    finally:
                        _epoch += 1
                        _changing = False
                        if _waiting:
                            _state.notify_all()
                _current = want
            _active += 1
    except BaseException:
        _inside.depth = 0
        raise
    return 0


def leave(entered: int) -> None:
    """Ends the block `enter` began (with what it returned)."""
    global _active, _current, _changing, _epoch
    if entered == FAST:
        _fast.remove(get_ident())
        if _changing:   # a block waits for the fast ones to leave
            with _lock:
                _state.notify_all()
        return
    if entered < 0:
        return
    _inside.depth = entered
    if entered:
        return
    _, get = _api
    with _lock:
        _active -= 1
        if _active == 0:
            if get() != _saved:   # once no fast block is inside (as in enter)
                _changing = True
                try:
                    while _fast:
                        _state.wait()
                    _api[0](_saved)
                finally:
                    _epoch += 1
                    _changing = False
            _current = None
            if _waiting:
                _state.notify_all()

