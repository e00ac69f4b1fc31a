"""Ops that pick elements by index: GATHER GATHER_ND EMBEDDING_LOOKUP TOPK_V2.

Index tensors that are data (GATHER's indices, ...) are checked in run: TFLite fails at run time
on an out-of-range index, and so do we. TOPK_V2's k sets the output shape: read at prepare when
constant, else the kernel is dynamic (`node.dynamic`).
"""
from __future__ import annotations

import numpy as np

from .common import DATA_TYPES, int_vector, known_at_run_time, normalize_axis
from .errors import IndexOutOfRange
from .registry import register

INDEX_TYPES = ("int16", "int32", "int64")


# -- GATHER / GATHER_ND / EMBEDDING_LOOKUP -------------------------------------------------------

def _check_indices(idx: np.ndarray, n: int, what: str) -> None:
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = idx[(idx < 0) | (idx >= n)].reshape(-1)[0]
        raise IndexOutOfRange(f"{what} index {bad} is out of range [0, {n})")


def _params_and_indices(node) -> tuple:
    """GATHER's and GATHER_ND's inputs: the params' and the (integer) indices' shapes."""
    node.expect_inputs(2)
    params, indices = node.input(0), node.input(1)
    if indices.type_name not in INDEX_TYPES:
        raise node.fail(f"indices must be int16, int32 or int64, got {indices.type_name}")
    return tuple(params.shape), tuple(indices.shape)


@register("GATHER", *DATA_TYPES)
def gather(node):
    p_shape, i_shape = _params_and_indices(node)
    axis = normalize_axis(node, node.options.axis, len(p_shape))
    batch = int(node.options.batch_dims)
    if batch < 0:
        batch += len(i_shape)
    if not (0 <= batch <= axis and batch <= len(i_shape)) or p_shape[:batch] != i_shape[:batch]:
        raise node.fail(f"batch_dims {node.options.batch_dims} does not fit params "
                        f"{list(p_shape)}, indices {list(i_shape)} and axis {axis}")
    node.outputs[0].shape = p_shape[:axis] + i_shape[batch:] + p_shape[axis + 1:]
    n = p_shape[axis]
    B = int(np.prod(p_shape[:batch], dtype=np.int64))
    outer = int(np.prod(p_shape[batch:axis], dtype=np.int64))
    inner = int(np.prod(p_shape[axis + 1:], dtype=np.int64))
    K = int(np.prod(i_shape[batch:], dtype=np.int64))
    p_view, i_view, o_view = (B, outer, n, inner), (B, K), (B, outer, K, inner)

    def run(x, idx, out):
        _check_indices(idx, n, "gather")
        xs, ids, outs = x.reshape(p_view), idx.reshape(i_view), out.reshape(o_view)
        for b in range(B):
            np.take(xs[b], ids[b], axis=1, out=outs[b])
    return run


@register("GATHER_ND", *DATA_TYPES)
def gather_nd(node):
    p_shape, i_shape = _params_and_indices(node)
    if not i_shape or not 1 <= i_shape[-1] <= len(p_shape):
        raise node.fail(f"indices of shape {list(i_shape)} do not index params of shape "
                        f"{list(p_shape)}")
    nd = i_shape[-1]
    node.outputs[0].shape = i_shape[:-1] + p_shape[nd:]
    bounds = np.array(p_shape[:nd], np.int64)
    strides = np.array([int(np.prod(p_shape[d + 1:nd], dtype=np.int64)) for d in range(nd)],
                       np.int64)
    count = int(np.prod(p_shape[:nd], dtype=np.int64))
    inner = int(np.prod(p_shape[nd:], dtype=np.int64))
    n_slices = int(np.prod(i_shape[:-1], dtype=np.int64))

    def run(x, idx, out):
        coords = idx.reshape(n_slices, nd)
        if coords.size and ((coords < 0).any() or (coords >= bounds).any()):
            raise IndexOutOfRange(f"gather_nd index out of bounds for params of shape "
                                  f"{list(p_shape)}")
        flat = coords @ strides if nd > 1 else coords[:, 0]
        np.take(x.reshape(count, inner), flat, axis=0, out=out.reshape(n_slices, inner))
    return run


@register("EMBEDDING_LOOKUP", "int32")
def embedding_lookup(node):
    node.expect_inputs(2)
    ids, value, out_info = node.input(0), node.input(1), node.outputs[0]
    if len(ids.shape) != 1:
        raise node.fail(f"the ids must be a vector, got shape {list(ids.shape)}")
    if len(value.shape) < 2:
        raise node.fail(f"the table must have at least 2 dimensions, got {list(value.shape)}")
    out_info.shape = (ids.shape[0],) + tuple(value.shape[1:])
    rows = value.shape[0]
    hybrid = value.type_name in ("int8", "uint8") and out_info.type_name in ("float32", "float16")
    if not hybrid:
        if value.type_name != out_info.type_name:
            raise node.fail(f"the table is {value.type_name} but the output is "
                            f"{out_info.type_name}")

        def run(i, table, out):
            _check_indices(i, rows, "embedding_lookup")
            np.take(table, i, axis=0, out=out)
        return run
    q = value.quantization
    if q is None or not q.scale.size:
        raise node.fail("an int8 table with a float output needs a quantization scale")
    if np.any(np.asarray(q.zero_point) != 0):
        raise node.fail("an int8 table with a float output must be symmetric (zero point 0)")
    scales = np.asarray(q.scale, np.float32)
    if scales.size > 1 and scales.size != rows:
        raise node.fail(f"{scales.size} scales for a table of {rows} rows")
    per_row = scales.reshape((-1,) + (1,) * (len(value.shape) - 1))
    acc = np.empty(out_info.shape, np.float32) if out_info.type_name == "float16" else None

    def run_hybrid(i, table, out):
        _check_indices(i, rows, "embedding_lookup")
        # TFLite reads a uint8 table as int8 bytes too.
        q8 = table.view(np.int8)[i]
        s = per_row[i] if scales.size > 1 else per_row[0]
        np.multiply(q8, s, out=out if acc is None else acc)
        if acc is not None:
            np.copyto(out, acc, casting="unsafe")
    return run_hybrid


# -- TOPK_V2 -------------------------------------------------------------------------------------

@register("TOPK_V2", "float32", "int8", "uint8", "int16", "int32", "int64", "uint64", "float16")
def topk_v2(node):
    node.expect_inputs(2)
    in_shape = node.input(0).shape
    if not in_shape:
        raise node.fail("the input must have at least one dimension")
    if len(node.outputs) != 2:
        raise node.fail(f"expected 2 outputs (values, indices), got {len(node.outputs)}")
    index_type = node.outputs[1].dtype
    if known_at_run_time(node, 1):
        node.dynamic = True  # the output shape depends on k

        def run_values(x, k_value):
            k = _top_k(node, x.shape, int_vector(node, 1, "k", k_value))
            shape = x.shape[:-1] + (k,)
            values, indices = np.empty(shape, x.dtype), np.empty(shape, index_type)
            _top(x, k, values, indices)
            return [values, indices]
        return run_values
    k = _top_k(node, in_shape, int_vector(node, 1, "k"))
    shape = tuple(in_shape[:-1]) + (k,)
    node.outputs[0].shape = node.outputs[1].shape = shape

    def run(x, _, values, indices):
        _top(x, k, values, indices)
    return run


def _top_k(node, in_shape: tuple, k_values: list) -> int:
    if len(k_values) != 1:
        raise node.fail(f"k must hold one value, got {len(k_values)}")
    k, n = k_values[0], in_shape[-1]
    if not 0 <= k <= n:
        raise node.fail(f"k {k} is out of range for a last dimension of {n}")
    return k


def _top(x, k: int, values, indices) -> None:
    # Largest first; among equal values the lower index first (TFLite's order): a stable
    # ascending sort of the reversed row, read backwards.
    n = x.shape[-1]
    order = np.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1][..., :k]
    np.subtract(n - 1, order, out=indices, casting="unsafe")
    np.copyto(values, np.take_along_axis(x, indices, axis=-1))
