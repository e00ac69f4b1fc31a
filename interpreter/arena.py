"""The memory planner: tensors whose lifetimes do not overlap share one arena.

Greedy by size, as TFLite's arena planner does: the largest tensor is placed first, each at the
lowest aligned offset that does not collide with a placed tensor alive at the same time.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ALIGN = 64


@dataclass
class Lifetime:
    tensor: int
    nbytes: int
    first: int  # step that writes it (or -1 for values present before the first step)
    last: int   # last step that reads it


def plan(lifetimes: list) -> tuple:
    """Offsets for each tensor and the arena size: ({tensor: offset}, total bytes)."""
    placed: list = []  # (offset, end, first, last)
    offsets = {}
    total = 0
    for lt in sorted(lifetimes, key=lambda x: (-x.nbytes, x.first, x.tensor)):
        size = _aligned(max(lt.nbytes, 1))
        busy = sorted((o, e) for o, e, first, last in placed
                      if first <= lt.last and lt.first <= last)
        offset = 0
        for o, e in busy:
            if offset + size <= o:
                break
            offset = max(offset, e)
        placed.append((offset, offset + size, lt.first, lt.last))
        offsets[lt.tensor] = offset
        total = max(total, offset + size)
    return offsets, total


def live_lower_bound(lifetimes: list) -> int:
    """The most bytes alive at any one step: no arena can be smaller."""
    if not lifetimes:
        return 0
    events = sorted({lt.first for lt in lifetimes} | {lt.last for lt in lifetimes})
    return max(sum(lt.nbytes for lt in lifetimes if lt.first <= s <= lt.last) for s in events)


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def allocate(nbytes: int) -> np.ndarray:
    """An aligned uint8 block of `nbytes`."""
    raw = np.empty(nbytes + ALIGN, np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    return raw[start:start + nbytes]
