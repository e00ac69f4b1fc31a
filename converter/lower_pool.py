"""ONNX pools: MaxPool, AveragePool (1-D and 2-D as TFLite's NHWC pools; dilated, 3-D and
MaxPool's Indices as one strided slice per kernel tap), GlobalAveragePool, GlobalMaxPool."""
from __future__ import annotations

import math

import numpy as np

from .lower import lowers
from .lower_nn import (SAME, TO_NCHW, TO_NHWC, VALID, as_2d, choose_padding, pad_nhwc,
                       same_equivalent, spatial_1d_to_2d, window_attrs)

def _pool(b, n, op, pad_value):
    x = n.input(0)
    indices = len([o for o in n.proto.output if o]) > 1
    if int(n.attr("storage_order", 0)) != 0 and not indices:
        raise n.fail("storage_order=1 is not supported")
    one_d = b.rank(x) == 3
    kernel, strides, dilations, pads = window_attrs(n, b, x)
    if indices or any(d != 1 for d in dilations) or b.rank(x) not in (3, 4):
        return _pool_by_taps(b, n, op, x, kernel, strides, dilations, pads, indices)
    if one_d:
        kernel, strides = spatial_1d_to_2d(kernel, 1), spatial_1d_to_2d(strides, 1)
        dilations, pads = spatial_1d_to_2d(dilations, 1), [(0, 0)] + pads
    x4 = as_2d(b, n, x)
    sizes = b.shape(x4)[2:]
    extra = _ceil_extra(sizes, kernel, strides, pads) if int(n.attr("ceil_mode", 0)) else [0, 0]
    xt = b.transpose(x4, TO_NHWC)
    window = {"stride_h": strides[0], "stride_w": strides[1], "filter_height": kernel[0],
              "filter_width": kernel[1]}
    if op == "AVERAGE_POOL_2D":
        y = _average(b, xt, pads, extra, sizes, kernel, strides,
                     bool(int(n.attr("count_include_pad", 0))), window)
    else:
        pads = [(begin, end + e) for (begin, end), e in zip(pads, extra)]
        xt, padding = choose_padding(b, xt, pads, sizes, kernel, strides, dilations, pad_value)
        y = b.op(op, [xt], {"padding": padding, **window})
    y = b.transpose(y, TO_NCHW)
    if one_d:
        shape = b.shape(y)
        y = b.reshape(y, (shape[0], shape[1], shape[3]))
    return y


def _average(b, xt, pads, extra, sizes, kernel, strides, include_pad: bool, window):
    """TFLite averages over the window part inside the input (SAME) or the whole window
    (VALID). Other divisors: average the zero-padded input, then divide by the fraction of
    each window that ONNX counts (the same pool over a mask, folded to a constant)."""
    full = [(begin, end + e) for (begin, end), e in zip(pads, extra)]
    if all(p == (0, 0) for p in full):
        return b.op("AVERAGE_POOL_2D", [xt], {"padding": VALID, **window})
    if not include_pad and not any(extra) and \
            same_equivalent(pads, sizes, kernel, strides, (1, 1)):
        return b.op("AVERAGE_POOL_2D", [xt], {"padding": SAME, **window})
    y = b.op("AVERAGE_POOL_2D", [pad_nhwc(b, xt, full)], {"padding": VALID, **window})
    if include_pad and not any(extra):
        return y
    counted = np.ones((1, *sizes, 1), np.float32)
    if include_pad:
        counted = np.pad(counted, [(0, 0), *pads, (0, 0)], constant_values=1.0)
        full = [(0, e) for e in extra]
    mask = pad_nhwc(b, b.const(counted), full)
    fraction = b.op("AVERAGE_POOL_2D", [mask], {"padding": VALID, **window})
    return b.op("DIV", [y, fraction])


def _pool_by_taps(b, n, op, x, kernel, strides, dilations, pads, indices: bool):
    """A pool TFLite's 2-D ops cannot run (dilations, 3-D, the Indices output), any rank: one
    strided slice of the padded input per kernel tap, combined by MAXIMUM or ADD (then divided
    by the counted taps: the same sum over a constant mask, folded). Indices: the flat NCHW
    position of the first maximum, picked tap by tap."""
    shape = b.shape(x)
    if b.dtype(x) != "float32":
        raise n.fail(f"{n.op_type} of {b.dtype(x)} with dilations or 3-D is not supported")
    effective = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    extra = _ceil_extra(shape[2:], effective, strides, pads) if int(n.attr("ceil_mode", 0)) \
        else [0] * len(kernel)
    full = [(0, 0), (0, 0)] + [(pb, pe + e) for (pb, pe), e in zip(pads, extra)]
    out = [(size + pb + pe - k) // s + 1 for size, (pb, pe), k, s in
           zip(shape[2:], full[2:], effective, strides)]
    is_max = op == "MAX_POOL_2D"

    def taps(t, value):
        """Per kernel tap, the strided slice of t (padded with value) that it reads."""
        padded = t
        if any(p != (0, 0) for p in full):
            padded = b.op("PADV2", [t, b.const(np.array(full, np.int32)),
                                    b.const(np.array(value, b.sg.tensors[t].np_dtype))])
        for tap in np.ndindex(*kernel):
            begin = [0, 0] + [i * d for i, d in zip(tap, dilations)]
            end = list(b.shape(t)[:2]) + [st + (o - 1) * s + 1 for st, o, s in
                                         zip(begin[2:], out, strides)]
            yield b.op("STRIDED_SLICE", [padded, b.const(np.array(begin, np.int32)),
                                         b.const(np.array(end, np.int32)),
                                         b.const(np.array([1, 1] + list(strides), np.int32))])

    if is_max:
        y, where = None, None
        positions = b.const(_flat_positions(shape, int(n.attr("storage_order", 0)))) \
            if indices else None
        index_taps = taps(positions, -1) if indices else None
        for v in taps(x, -np.inf):
            at = next(index_taps) if indices else None
            if y is None:
                y, where = v, at
                continue
            if indices:
                better = b.op("GREATER", [v, y], dtype="bool")
                where = b.op("SELECT_V2", [better, at, where], dtype="int64")
            y = b.op("MAXIMUM", [y, v])
        return [y, where] if indices else y
    total = None
    for v in taps(x, 0.0):
        total = v if total is None else b.op("ADD", [total, v])
    mask = np.ones((1, 1) + tuple(shape[2:]), np.float32)
    if int(n.attr("count_include_pad", 0)):
        mask = np.pad(mask, [(0, 0), (0, 0)] + list(pads), constant_values=1.0)
        full = [(0, 0), (0, 0)] + [(0, e) for e in extra]
    count = None
    for v in taps(b.const(mask), 0.0):
        count = v if count is None else b.op("ADD", [count, v])
    return b.op("DIV", [total, count])


def _flat_positions(shape, storage_order: int) -> np.ndarray:
    """ONNX MaxPool's Indices: the flat position of each element, the spatial dims row-major
    (storage_order 0) or column-major (1) within each (N, C) plane."""
    spatial = math.prod(shape[2:])
    grid = np.arange(spatial, dtype=np.int64).reshape(shape[2:][::-1]).T if storage_order \
        else np.arange(spatial, dtype=np.int64).reshape(shape[2:])
    planes = np.arange(shape[0] * shape[1], dtype=np.int64).reshape(shape[:2] + (1,) * len(
        shape[2:])) * spatial
    return planes + grid


def _ceil_extra(sizes, kernel, strides, pads) -> list:
    """End padding that gives ceil_mode's output size with floor arithmetic."""
    out = []
    for size, k, s, (begin, end) in zip(sizes, kernel, strides, pads):
        ceil_out = -(-(size + begin + end - k) // s) + 1
        if (ceil_out - 1) * s >= size + begin:  # the last window would start in the end padding
            ceil_out -= 1
        out.append(max((ceil_out - 1) * s + k - (size + begin + end), 0))
    return out


@lowers("MaxPool")
def max_pool(b, n):
    return _pool(b, n, "MAX_POOL_2D", float(np.finfo(np.float32).min))


@lowers("AveragePool")
def average_pool(b, n):
    return _pool(b, n, "AVERAGE_POOL_2D", None)


@lowers("GlobalAveragePool", "GlobalMaxPool")
def global_pool(b, n):
    x = n.input(0)
    axes = b.const(np.arange(2, b.rank(x), dtype=np.int32))
    op = "MEAN" if n.op_type == "GlobalAveragePool" else "REDUCE_MAX"
    return b.op(op, [x, axes], {"keep_dims": True})
