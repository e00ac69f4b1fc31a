"""Work buffers shared by the kernels of one interpreter (im2col patches, padded inputs,
accumulators, requantization temporaries): its kernels run one at a time, so their temporaries
can overlap in one block."""
from __future__ import annotations

import weakref

import numpy as np


class Scratch:
    """The work buffers of one interpreter's kernels, in one block. prepare reserves buffers;
    run gets them, as views of the block allocated at the first run (when every kernel has
    reserved). A later, larger reservation (a subgraph prepared later, a resize) gets a larger
    block of its own."""

    _pools = weakref.WeakKeyDictionary()
    key = ("scratch",)     # what the block is held under in the budget

    def __init__(self, budget=None):
        self.size = 0
        self.block = None
        self.budget = budget   # the interpreter's allocation budget (budget.py), if any

    @classmethod
    def of(cls, node) -> "Scratch":
        """The pool of the node's interpreter (a private one without an interpreter)."""
        owner = node.runtime
        if owner is None:
            return cls()
        pool = cls._pools.get(owner)
        if pool is None:
            pool = cls._pools[owner] = cls(getattr(owner, "budget", None))
        return pool

    def reserve(self, specs: list):
        """specs: [(shape, dtype)]; returns get() -> the list of those arrays, non-overlapping
        with each other (and the same arrays on every call)."""
        offsets, total = [], 0
        for shape, dtype in specs:
            offsets.append(total)
            nbytes = _nbytes(shape, dtype)
            total += (nbytes + 63) // 64 * 64
        if self.budget is not None:  # the block this reservation may make (the largest yet)
            self.budget.hold(self.key, max(self.size, total),
                             f"the kernels' work buffers {[list(s) for s, _ in specs]}")
        self.size = max(self.size, total)
        arrays = []

        def get() -> list:
            if not arrays:
                if self.block is None or self.block.nbytes < total:
                    self.block = np.empty(max(self.size, total), np.uint8)
                for (shape, dtype), offset in zip(specs, offsets):
                    nbytes = _nbytes(shape, dtype)
                    arrays.append(self.block[offset:offset + nbytes].view(dtype).reshape(shape))
            return arrays
        return get


def _nbytes(shape, dtype) -> int:
    count = 1
    for d in shape:
        count *= int(d)
    return count * np.dtype(dtype).itemsize
