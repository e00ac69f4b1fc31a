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

    def __init__(self):
        self.size = 0
        self.block = None

    @classmethod
    def of(cls, node) -> "Scratch":
        """The pool of the node's interpreter (a private one without an interpreter)."""
        owner = node.runtime
        if owner is None:
            return cls()
        pool = cls._pools.get(owner)
        if pool is None:
            pool = cls._pools[owner] = cls()
        return pool

    def reserve(self, specs: list):
        """specs: [(shape, dtype)]; returns get() -> the list of those arrays, non-overlapping
        with each other (and the same arrays on every call)."""
        offsets, total = [], 0
        for shape, dtype in specs:
            offsets.append(total)
            nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            total += (nbytes + 63) // 64 * 64
        self.size = max(self.size, total)
        arrays = []

        def get() -> list:
            if not arrays:
                if self.block is None or self.block.nbytes < total:
                    self.block = np.empty(max(self.size, total), np.uint8)
                for (shape, dtype), offset in zip(specs, offsets):
                    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
                    arrays.append(self.block[offset:offset + nbytes].view(dtype).reshape(shape))
            return arrays
        return get
