"""ONNX ops that pick or order elements along an axis: TopK, GatherElements, CumSum."""
from __future__ import annotations

import numpy as np

from .lower import axis_of, lowers
from .runtime_params import as_int32, is_runtime, normalize_axes, scalar


def _last(b, x, axis: int):
    """(x with `axis` moved last, the perm that moves it back)."""
    rank = b.rank(x)
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    return b.transpose(x, perm), perm


@lowers("TopK")
def top_k(b, n):
    """TOPK_V2 over the last axis (others moved there and back); the k smallest are the k
    largest of the negated input (TFLite's and ONNX's ties both keep the lower index first)."""
    x, k = n.input(0), n.input(1)
    if n.opset < 10:
        k = b.const(np.array([n.attr("k")], np.int64))
    axis = axis_of(n, n.attr("axis", -1), b.rank(x))
    largest = bool(int(n.attr("largest", 1)))
    if not largest and b.dtype(x).startswith("uint"):
        raise n.fail("smallest values of an unsigned type are not supported")
    xt, perm = _last(b, x, axis)
    if not largest:
        xt = b.op("NEG", [xt])
    shapes = None
    if is_runtime(b, k):
        out = n.out_shape(0)
        shapes = None if out is None else [tuple(out[p] for p in perm)] * 2
    values, indices = b.ops("TOPK_V2", [xt, scalar(b, as_int32(b, k))], n_out=2,
                            dtypes=[b.dtype(xt), "int32"], shapes=shapes)
    if not largest:
        values = b.op("NEG", [values])
    return [b.transpose(values, perm), b.transpose(b.cast(indices, "int64"), perm)]


@lowers("GatherElements")
def gather_elements(b, n):
    """GATHER_ND with full coordinates: the indices along `axis` (negatives wrapped), the
    position itself along every other axis."""
    x, indices = n.input(0), n.input(1)
    rank = b.rank(x)
    axis = axis_of(n, n.attr("axis", 0), rank)
    shape = b.shape(indices)
    dtype = b.sg.tensors[indices].np_dtype
    size = b.const(np.array(b.shape(x)[axis], dtype))
    indices = b.op("FLOOR_MOD", [indices, size])
    grids = np.indices(shape, dtype=dtype)
    parts = [b.reshape(indices, shape + (1,)) if d == axis else b.const(grids[d][..., None])
             for d in range(rank)]
    coords = parts[0] if rank == 1 else b.op("CONCATENATION", parts, {"axis": rank})
    return b.op("GATHER_ND", [x, coords])


@lowers("CumSum")
def cumsum(b, n):
    """CUMSUM; an axis known only while running: the CUMSUM along each axis, the one asked for
    picked by SELECT_V2 (TFLite's CUMSUM takes a constant axis)."""
    x, axis_t = n.input(0), n.input(1)
    rank = b.rank(x)
    options = {"exclusive": bool(int(n.attr("exclusive", 0))),
               "reverse": bool(int(n.attr("reverse", 0)))}
    if not is_runtime(b, axis_t):
        axis = axis_of(n, int(b.value(axis_t).reshape(-1)[0]), rank)
        return b.op("CUMSUM", [x, b.const(np.array(axis, np.int32))], options)
    axis_t = normalize_axes(b, scalar(b, axis_t), rank)
    y = None
    for d in range(rank):
        along = b.op("CUMSUM", [x, b.const(np.array(d, np.int32))], options)
        if y is None:
            y = along
            continue
        here = b.op("EQUAL", [axis_t, b.const(np.array(d, b.sg.tensors[axis_t].np_dtype))],
                    dtype="bool")
        y = b.op("SELECT_V2", [here, along, y], dtype=b.dtype(along))
    return y
