"""Errors kernels raise while running, for values only known then (named, not bare builtins:
the plan adds the operator to the message)."""
from __future__ import annotations

from .registry import KernelError


class IndexOutOfRange(KernelError, IndexError):
    """An index the model computed lies outside the tensor it indexes (GATHER, GATHER_ND,
    SCATTER_ND, a shrunk STRIDED_SLICE axis). Also an IndexError, as edgelite raised before."""
