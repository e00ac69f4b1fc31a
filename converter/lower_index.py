"""ONNX ops that pick, place or order elements: TopK, GatherElements, GatherND, ScatterND,
NonZero, CumSum."""
from __future__ import annotations

import numpy as np

from .data_dependent import data_dependent
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
    if axis in b.dynamic_axes(x):   # at least 1: see _wrapped
        size = b.op("MAXIMUM", [_dim(b, x, axis, dtype.name), b.const(np.array(1, dtype))])
    indices = b.op("FLOOR_MOD", [indices, size])
    if b.dynamic_axes(indices):
        return b.op("GATHER_ND", [x, _dynamic_coords(b, indices, axis, dtype.name)])
    grids = np.indices(shape, dtype=dtype)
    parts = [b.reshape(indices, shape + (1,)) if d == axis else b.const(grids[d][..., None])
             for d in range(rank)]
    coords = parts[0] if rank == 1 else b.op("CONCATENATION", parts, {"axis": rank})
    return b.op("GATHER_ND", [x, coords])


def _dim(b, t: int, axis: int, dtype: str) -> int:
    """Dim `axis` of t as a 0-d tensor, read from its SHAPE."""
    picked = b.op("GATHER", [b.dims_of(t, dtype), b.const(np.array([axis], np.int32))],
                  {"axis": 0})
    return b.reshape(picked, ())


def _dynamic_coords(b, indices: int, axis: int, dtype: str) -> int:
    """GatherElements' coordinates when the indices' shape is dynamic: along every other axis
    a RANGE over that dim broadcast to the indices' SHAPE."""
    rank = b.rank(indices)
    dims = b.dims_of(indices, "int32")
    parts = []
    for d in range(rank):
        if d == axis:
            coord = indices
        else:
            line = b.op("RANGE", [b.const(np.array(0, np.int32)), _dim(b, indices, d, "int32"),
                                  b.const(np.array(1, np.int32))])
            view = [1] * rank
            view[d] = -1
            line = b.op("RESHAPE", [line, b.const(np.array(view, np.int32))],
                        {"new_shape": tuple(view)})
            coord = b.cast(b.op("BROADCAST_TO", [line, dims]), dtype)
        parts.append(b.op("EXPAND_DIMS", [coord, b.const(np.array(-1, np.int32))]))
    return parts[0] if rank == 1 else b.op("CONCATENATION", parts, {"axis": rank})


def _wrapped(b, indices: int, x: int, axes) -> int:
    """Coordinates along `axes` of x (the last axis of `indices`) with negatives wrapped: ONNX
    takes [-d, d), TFLite [0, d). Folds when the indices are constant; dims of x that are
    dynamic are read from its SHAPE (at least 1: an empty x has no valid coordinates, and
    LiteRT's FLOOR_MOD refuses a zero divisor even with no elements to divide)."""
    dtype = b.sg.tensors[indices].np_dtype
    dims = b.const(np.array([b.shape(x)[a] for a in axes], dtype))
    if set(axes) & b.dynamic_axes(x):
        picked = b.op("GATHER", [b.dims_of(x, dtype.name), b.const(np.array(axes, np.int32))],
                      {"axis": 0})
        dims = b.op("MAXIMUM", [picked, b.const(np.array(1, dtype))])
    return b.op("FLOOR_MOD", [indices, dims])


@lowers("GatherND")
def gather_nd(b, n):
    """GATHER_ND; batch_dims > 0 as full coordinates (each position's batch coordinates put
    before its indices), which TFLite's GATHER_ND takes with none."""
    x, indices = n.input(0), n.input(1)
    batch = int(n.attr("batch_dims", 0))
    data_shape, shape = b.shape(x), b.shape(indices)
    depth = shape[-1]
    if not 0 <= batch < len(shape) or batch + depth > len(data_shape) or \
            tuple(shape[:batch]) != tuple(data_shape[:batch]):
        raise n.fail(f"indices {list(shape)} with batch_dims {batch} do not fit data "
                     f"{list(data_shape)}")
    indices = _wrapped(b, indices, x, list(range(batch, batch + depth)))
    if batch:
        dtype = b.sg.tensors[indices].np_dtype
        grids = np.indices(shape[:-1], dtype=dtype)[:batch]
        parts = [b.const(g[..., None]) for g in grids] + [indices]
        indices = b.op("CONCATENATION", parts, {"axis": len(shape) - 1})
    return b.op("GATHER_ND", [x, indices])


@lowers("ScatterND")
def scatter_nd(b, n):
    """TFLite's SCATTER_ND writes into zeros (and adds duplicates): reduction "add" adds that to
    the data; "none" takes it where a second SCATTER_ND of ones says an update landed."""
    x, indices, updates = n.input(0), n.input(1), n.input(2)
    reduction = n.attr("reduction", "none")
    if reduction not in ("none", "add"):
        raise n.fail(f"reduction={reduction!r} is not supported (only 'none' and 'add')")
    data_shape, shape = b.shape(x), b.shape(indices)
    depth = shape[-1]
    if depth > len(data_shape) or \
            tuple(b.shape(updates)) != tuple(shape[:-1]) + tuple(data_shape[depth:]):
        raise n.fail(f"updates {list(b.shape(updates))} do not fit indices {list(shape)} "
                     f"into data {list(data_shape)}")
    dtype = b.dtype(x)
    indices = b.cast(_wrapped(b, indices, x, list(range(depth))), "int32")
    target = b.const(np.array(data_shape, np.int32))
    scattered = b.op("SCATTER_ND", [indices, updates, target], dtype=dtype)
    if reduction == "add":
        return b.op("ADD", [x, scattered])
    ones = b.const(np.ones(b.shape(updates), np.int32))
    hits = b.op("SCATTER_ND", [indices, ones, target], dtype="int32")
    landed = b.op("GREATER", [hits, b.const(np.array(0, np.int32))], dtype="bool")
    return b.op("SELECT_V2", [landed, scattered, x], dtype=dtype)


@lowers("NonZero")
def non_zero(b, n):
    """WHERE's coordinates ([count, rank], int64) transposed to ONNX's [rank, count]. Their
    count follows the values: a constant input folds, a declared count is recorded, else the
    count is a data-dependent dynamic dim (`data_dependent`)."""
    x = n.input(0)
    shape = n.out_shape(0)
    if shape is not None:
        coords = b.op("WHERE", [x], dtype="int64", shape=tuple(reversed(shape)))
    else:
        coords = data_dependent(b, "WHERE", [x], (None, b.rank(x)), dtype="int64")
    return b.transpose(coords, [1, 0])


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
