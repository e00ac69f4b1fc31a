"""Segment reductions (SEGMENT_SUM, UNSORTED_SEGMENT_SUM / PROD / MAX / MIN) and UNIQUE.

Segments reduce in input order, as TFLite's loops do (`ufunc.at` applies its updates in order,
so float sums round the same way; integers wrap). SEGMENT_SUM and UNIQUE have output shapes
that depend on input values: their kernels are dynamic unless those values are constant.
"""
from __future__ import annotations

import numpy as np

from .registry import register


def _segment_ids(node, k: int = 1):
    ids = node.input(k)
    if ids.type_name != "int32":
        raise node.fail(f"segment_ids must be int32, got {ids.type_name}")
    return ids


# -- SEGMENT_SUM -----------------------------------------------------------------------------

@register("SEGMENT_SUM", "float32", "int32")
def segment_sum(node):
    """Sums of the rows of `data` that share a segment id; ids are sorted and count up from 0
    in steps of 0 or 1, and the output has max(id) + 1 rows."""
    node.expect_inputs(2)
    data, ids = node.input(0), _segment_ids(node)
    if len(data.shape) < 1 or len(ids.shape) != 1 or ids.shape[0] != data.shape[0]:
        raise node.fail(f"segment_ids {list(ids.shape)} must be 1-D with one id per row of "
                        f"data {list(data.shape)}")

    def rows(seg, error=node.fail) -> int:
        seg = np.asarray(seg, np.int64)
        if seg.size and (seg[0] != 0 or np.any((np.diff(seg) != 0) & (np.diff(seg) != 1))):
            raise error(f"segment_ids {seg.tolist()} must start at 0 and grow by 0 or 1")
        return int(seg[-1]) + 1 if seg.size else 0

    def compute(x, seg, out):
        out.fill(0)
        np.add.at(out, seg, x)

    if ids.data is None:
        node.dynamic = True

        def run_dynamic(x, seg):
            out = np.empty((rows(seg, ValueError),) + x.shape[1:], data.dtype)
            compute(x, seg, out)
            return [out]
        return run_dynamic
    node.outputs[0].shape = (rows(ids.data),) + tuple(data.shape[1:])
    return compute


# -- UNSORTED_SEGMENT_* ----------------------------------------------------------------------

def _unsorted_segment(ufunc, initial):
    """A kernel reducing with `ufunc` into `num_segments` rows that start at `initial(dtype)`;
    negative ids are skipped. The ids may have any shape that prefixes the data's."""
    def prepare(node):
        node.expect_inputs(3)
        data, ids = node.input(0), _segment_ids(node)
        count = node.input(2)
        if count.type_name != "int32" or int(np.prod(count.shape)) != 1:
            raise node.fail("num_segments must be one int32 value")
        rank = len(ids.shape)
        if rank < 1 or tuple(data.shape[:rank]) != tuple(ids.shape):
            raise node.fail(f"segment_ids {list(ids.shape)} must be a prefix of the data "
                            f"shape {list(data.shape)}")
        row = tuple(data.shape[rank:])
        start = initial(data.dtype)

        def compute(x, seg, _count, out):
            n = out.shape[0]
            seg = seg.reshape(-1)
            if np.any(seg >= n):
                raise ValueError(f"segment id {int(seg.max())} is not below num_segments {n}")
            out.fill(start)
            keep = seg >= 0
            x = x.reshape((-1,) + row)
            if not keep.all():
                seg, x = seg[keep], x[keep]
            ufunc.at(out, seg, x)

        if count.data is None:
            node.dynamic = True

            def run_dynamic(x, seg, n):
                n = int(n.reshape(-1)[0])
                if n < 0:
                    raise ValueError(f"num_segments must be >= 0, got {n}")
                out = np.empty((n,) + row, data.dtype)
                compute(x, seg, n, out)
                return [out]
            return run_dynamic
        n = int(count.data.reshape(-1)[0])
        if n < 0:
            raise node.fail(f"num_segments must be >= 0, got {n}")
        node.outputs[0].shape = (n,) + row
        return compute
    return prepare


def _lowest(dtype):
    return np.finfo(dtype).min if dtype.kind == "f" else np.iinfo(dtype).min


def _highest(dtype):
    return np.finfo(dtype).max if dtype.kind == "f" else np.iinfo(dtype).max


register("UNSORTED_SEGMENT_SUM", "float32", "int32")(_unsorted_segment(np.add, lambda d: 0))
register("UNSORTED_SEGMENT_PROD", "float32", "int32")(_unsorted_segment(np.multiply, lambda d: 1))
# fmax / fmin: LiteRT's std::max(out, x) / std::min(out, x) keep `out` when x is NaN
register("UNSORTED_SEGMENT_MAX", "float32", "int32")(_unsorted_segment(np.fmax, _lowest))
register("UNSORTED_SEGMENT_MIN", "float32", "int32")(_unsorted_segment(np.fmin, _highest))


# -- UNIQUE ----------------------------------------------------------------------------------

@register("UNIQUE", "float32", "int8", "uint8", "int16", "int32", "int64")
def unique(node):
    """The distinct values of a 1-D tensor in order of first appearance, and for each input
    element the position of its value among them (int32 or int64, `idx_out_type`)."""
    node.expect_inputs(1)
    x = node.input(0)
    if len(x.shape) != 1:
        raise node.fail(f"input must be 1-D, got shape {list(x.shape)}")
    if len(node.outputs) != 2:
        raise node.fail(f"expected 2 outputs, got {len(node.outputs)}")
    idx_type = node.outputs[1].dtype
    if node.outputs[1].type_name not in ("int32", "int64"):
        raise node.fail(f"the index output must be int32 or int64, got "
                        f"{node.outputs[1].type_name}")
    node.dynamic = True
    floats = x.dtype.kind == "f"

    def run(values):
        if floats and values.size and np.isnan(values.min()):    # min is NaN if any is
            return _unique_with_nan(values, idx_type)
        uniques, idx = _unique(values)
        return [uniques, idx.astype(idx_type)]
    return run


def _unique(values) -> tuple:
    """(distinct values in order of first appearance, each element's position among them)."""
    _, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return values[first[order]], rank[inverse.reshape(-1)]


def _unique_with_nan(values, idx_type) -> list:
    """UNIQUE as LiteRT's std::map<float, int> gives it when NaN is among the values: NaN
    compares neither less nor greater than anything, so a lookup of NaN finds the least key
    inserted so far, and a NaN first becomes the only key (every element finds it)."""
    if np.isnan(values[0]):
        return [values[:1].copy(), np.zeros(values.size, idx_type)]
    nan = np.isnan(values)
    uniques, clean_idx = _unique(values[~nan])
    idx = np.empty(values.size, np.int64)
    idx[~nan] = clean_idx
    least = np.minimum.accumulate(np.where(nan, np.inf, values))   # values[0] is a number
    order = np.argsort(uniques, kind="stable")
    idx[nan] = order[np.searchsorted(uniques[order], least[nan])]
    return [uniques, idx.astype(idx_type)]
