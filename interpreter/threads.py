"""Bounding the BLAS threads numpy uses while an interpreter runs (`num_threads`).

numpy's wheels bundle OpenBLAS under prefixed names; we find the loaded library and call its
set/get functions through ctypes. Where no OpenBLAS is found the limit is a no-op.
"""
from __future__ import annotations

import contextlib
import ctypes

_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
            "openblas_set_num_threads64_", "openblas_set_num_threads")
_api = None


def _find():
    global _api
    if _api is not None:
        return _api
    _api = ()
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
                setter.argtypes, setter.restype, get.restype = [ctypes.c_int], None, ctypes.c_int
                _api = (setter, get)
                return _api
    return _api


def blas_threads() -> int | None:
    api = _find()
    return api[1]() if api else None


@contextlib.contextmanager
def limit(num_threads: int | None):
    """Within the block, BLAS uses at most `num_threads` threads (None or -1: no change)."""
    api = _find() if num_threads and num_threads > 0 else ()
    if not api:
        yield
        return
    setter, get = api
    before = get()
    setter(num_threads)
    try:
        yield
    finally:
        setter(before)
