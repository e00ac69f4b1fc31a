"""Helpers for ONNX parameters (axes, starts, pads, shapes, ...) that are tensors known only while
running: they are turned into TFLite's parameter tensors by ops in the graph, which fold away
when the parameters are constant after all.

The ops that take such a parameter are dynamic kernels (their output shapes follow the values);
the lowering records the output shape ONNX's shape inference declares (`OnnxNode.out_shape`).
"""
from __future__ import annotations

import numpy as np

from edgelite.schema.validate import INT32_MAX


def is_runtime(b, t: int) -> bool:
    """True when tensor t exists, has elements, and its value is known only while running."""
    return t >= 0 and t not in b.empty and 0 not in b.shape(t) and b.value(t) is None


def as_int32(b, t: int) -> int:
    """An integer tensor as int32, its values clamped to int32's range first (ONNX writes
    INT64_MAX for "to the end")."""
    if b.dtype(t) == "int32":
        return t
    if b.dtype(t) == "int64":
        t = b.op("MINIMUM", [b.op("MAXIMUM", [t, b.const(np.int64(-INT32_MAX))]),
                             b.const(np.int64(INT32_MAX))])
    return b.cast(t, "int32")


def scalar(b, t: int) -> int:
    """A one-element tensor as a 0-d tensor."""
    return b.reshape(t, ()) if b.shape(t) != () else t


def normalize_axes(b, axes: int, rank: int) -> int:
    """Runtime axes in [-rank, rank) as [0, rank)."""
    return b.op("FLOOR_MOD", [axes, b.const(np.array(rank, b.sg.tensors[axes].np_dtype))])


def scatter_to_axes(b, values: int, axes, rank: int, defaults) -> int:
    """The rank-long vector holding `values[k]` at position `axes[k]` and `defaults` elsewhere.
    `axes`: a list (known) or a tensor (runtime); `values`: a tensor of length len(axes)."""
    dtype = b.sg.tensors[values].np_dtype
    defaults = np.asarray(defaults, dtype).reshape(rank)
    if isinstance(axes, (list, tuple)):
        count = len(axes)
        extended = b.op("CONCATENATION", [values, b.const(np.zeros(1, dtype))], {"axis": 0})
        index = [axes.index(j) if j in axes else count for j in range(rank)]
        picked = b.op("GATHER", [extended, b.const(np.array(index, np.int32))], {"axis": 0})
        unset = np.array([j not in axes for j in range(rank)])
        return b.op("ADD", [picked, b.const(np.where(unset, defaults, 0).astype(dtype))])
    axes = normalize_axes(b, axes, rank)
    positions = b.const(np.arange(rank, dtype=b.sg.tensors[axes].np_dtype).reshape(rank, 1))
    hits = b.op("EQUAL", [positions, b.reshape(axes, (1, b.shape(axes)[0]))], dtype="bool")
    mask = b.cast(hits, dtype.name)                                         # [rank, count]
    picked = b.op("SUM", [b.op("MUL", [mask, b.reshape(values, (1, b.shape(values)[0]))]),
                          b.const(np.array([1], np.int32))], {"keep_dims": False})
    unset = b.op("SUB", [b.const(np.ones(rank, dtype)),
                         b.op("SUM", [mask, b.const(np.array([1], np.int32))],
                              {"keep_dims": False})])
    return b.op("ADD", [picked, b.op("MUL", [unset, b.const(defaults)])])
