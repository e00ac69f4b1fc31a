"""The BLAS threads numpy uses while an interpreter runs (`num_threads`).

numpy's wheels bundle OpenBLAS under prefixed names; we find the loaded library and call its
set/get functions through ctypes. Where no OpenBLAS is found the limit is a no-op.

The default (`num_threads` None or -1) is **one thread**, as in LiteRT: -1 "lets the runtime
decide", and LiteRT's CPU backend context (ruy, gemmlowp) and its XNNPACK delegate then run one
thread (`CpuBackendContext` starts at `set_max_num_threads(1)`; XNNPACK makes no thread pool for
fewer than 2 threads). More threads are used only when asked for: a default of "every core"
collapses on a loaded machine (OpenBLAS's threads spin waiting for cores that other processes
hold: 10-100x slower on a busy 2-core machine than one thread).

OpenBLAS's thread count is one setting of the whole process. Interpreters in several threads
share it without racing: the first block to enter sets it and the last to leave restores what
the process had; a block that wants another count waits until the blocks running with the
current one have left (changing it while another thread is inside OpenBLAS is what gave wrong
results). A block whose count is what OpenBLAS already has changes nothing.
"""
from __future__ import annotations

import contextlib
import ctypes
import threading

DEFAULT = 1   # num_threads None or -1: as LiteRT's CPU kernels and XNNPACK (see above)

_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
            "openblas_set_num_threads64_", "openblas_set_num_threads")
_api = None
_find_lock = threading.Lock()

# The process-wide setting while edgelite blocks run: how many are inside, with which count,
# and what the process had before the first entered.
_state = threading.Condition()
_active = 0
_current = None
_saved = None
_inside = threading.local()   # this thread's depth of nested blocks (they keep the outer count)


def _find():
    global _api
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
                    break
            if found:
                break
        _api = found
    return _api


def blas_threads() -> int | None:
    api = _find()
    return api[1]() if api else None


def resolve(num_threads: int | None) -> int:
    """The thread count an interpreter's `num_threads` means: None and -1 give DEFAULT."""
    return DEFAULT if num_threads is None or num_threads < 1 else int(num_threads)


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
    `leave` needs, this thread's depth of nested blocks before it (-1: no OpenBLAS)."""
    global _active, _current, _saved
    api = _api if _api is not None else _find()
    if not api:
        return -1
    depth = getattr(_inside, "depth", 0)
    _inside.depth = depth + 1
    if depth:   # nested in this thread's own block (a signature runner's invoke): as it is
        return depth
    want = DEFAULT if num_threads is None or num_threads < 1 else int(num_threads)
    setter, get = api
    try:
        with _state:
            while _active and _current != want:
                _state.wait()
            if _active == 0:
                _saved = get()
                if _saved != want:
                    setter(want)
                _current = want
            _active += 1
    except BaseException:
        _inside.depth = 0
        raise
    return 0


def leave(entered: int) -> None:
    """Ends the block `enter` began (with what it returned)."""
    global _active, _current
    if entered < 0:
        return
    _inside.depth = entered
    if entered:
        return
    _, get = _api
    with _state:
        _active -= 1
        if _active == 0:
            if get() != _saved:
                _api[0](_saved)
            _current = None
            _state.notify_all()
