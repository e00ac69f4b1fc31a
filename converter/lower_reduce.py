"""ONNX reductions: ReduceMean ReduceSum ReduceMax ReduceMin ReduceProd ReduceL2, ArgMax ArgMin.

TFLite's reducers take the axes as a tensor, as ONNX does from opset 18 (ReduceSum from 13).
"""
from __future__ import annotations

import numpy as np

from .lower import axis_of, lowers, optional_const
from .runtime_params import as_int32, is_runtime

_REDUCERS = {"ReduceMean": "MEAN", "ReduceSum": "SUM", "ReduceMax": "REDUCE_MAX",
             "ReduceMin": "REDUCE_MIN", "ReduceProd": "REDUCE_PROD"}


def _reduce_axes(b, n, rank: int):
    """The axes to reduce (sorted), or None for "no reduction" (noop_with_empty_axes)."""
    takes_input = n.opset >= 18 or (n.op_type == "ReduceSum" and n.opset >= 13)
    axes = optional_const(b, n, 1, "axes") if takes_input else n.attr("axes")
    if axes is None or len(np.asarray(axes).reshape(-1)) == 0:
        return None if int(n.attr("noop_with_empty_axes", 0)) else list(range(rank))
    return sorted({axis_of(n, a, rank) for a in np.asarray(axes).reshape(-1)})


def _empty_identity(b, n, op, x):
    """A reduction over no elements is its identity everywhere (ONNX: -inf for ReduceMax,
    where TFLite's kernels start from the lowest finite value): a constant, or None when the
    input has elements or the output shape is not declared."""
    out = n.out_shape(0)
    if 0 not in b.shape(x) or out is None or 0 in out:
        return None
    dtype = b.sg.tensors[x].np_dtype
    if op in ("REDUCE_MAX", "REDUCE_MIN"):
        low = op == "REDUCE_MAX"
        if dtype.kind == "f":
            value = -np.inf if low else np.inf
        elif dtype.kind == "b":
            value = not low
        else:
            value = np.iinfo(dtype).min if low else np.iinfo(dtype).max
    else:
        value = {"SUM": 0, "REDUCE_PROD": 1, "MEAN": np.nan, "REDUCE_ANY": False,
                 "REDUCE_ALL": True}[op]
    return b.const(np.full(out, value, dtype))


def _reduce(b, n, op, x):
    keep = bool(int(n.attr("keepdims", 1)))
    identity = _empty_identity(b, n, op, x)
    if identity is not None:
        return identity
    takes_input = n.opset >= 18 or (n.op_type == "ReduceSum" and n.opset >= 13)
    if b.dtype(x) == "bool" and op in _BOOL_REDUCERS:
        op = _BOOL_REDUCERS[op]
    if takes_input and is_runtime(b, n.input(1)):  # the axes arrive while running
        return b.op(op, [x, as_int32(b, n.input(1))], {"keep_dims": keep},
                    shape=n.out_shape(0))
    axes = _reduce_axes(b, n, b.rank(x))
    if axes is None or not axes:
        return x
    return b.op(op, [x, b.const(np.array(axes, np.int32))], {"keep_dims": keep})


_BOOL_REDUCERS = {"REDUCE_MAX": "REDUCE_ANY", "REDUCE_MIN": "REDUCE_ALL"}


@lowers(*_REDUCERS)
def reduce(b, n):
    return _reduce(b, n, _REDUCERS[n.op_type], n.input(0))


@lowers("ReduceL2")
def reduce_l2(b, n):
    x = n.input(0)
    return b.op("SQRT", [_reduce(b, n, "SUM", b.op("MUL", [x, x]))])


@lowers("ReduceSumSquare")
def reduce_sum_square(b, n):
    x = n.input(0)
    return _reduce(b, n, "SUM", b.op("MUL", [x, x]))


@lowers("ArgMax", "ArgMin")
def arg(b, n):
    x = n.input(0)
    shape = b.shape(x)
    axis = axis_of(n, n.attr("axis", 0), len(shape))
    op = "ARG_MAX" if n.op_type == "ArgMax" else "ARG_MIN"
    axis_t = b.const(np.array([axis], np.int32))
    last = bool(int(n.attr("select_last_index", 0)))
    if last:  # the first index of the reversed axis, counted from the end
        x = b.op("REVERSE_V2", [x, axis_t])
    y = b.op(op, [x, axis_t], {"output_type": 4}, dtype="int64")
    if last:
        y = b.op("SUB", [b.const(np.array(shape[axis] - 1, np.int64)), y])
    if int(n.attr("keepdims", 1)):
        y = b.reshape(y, shape[:axis] + (1,) + shape[axis + 1:])
    return y
