"""Neural-network ONNX ops: Conv, pools, BatchNormalization, Gemm, MatMul, Softmax.

Layout-sensitive ops become their NHWC TFLite op between two TRANSPOSE ops (NCHW -> NHWC before,
back after); the layout pass removes those transposes wherever the graph allows.
"""
from __future__ import annotations

import math

import numpy as np

from edgelite.interpreter.kernels.common import same_padding

from .lower import axis_of, lowers

TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)
SAME, VALID = 0, 1   # the format's Padding values

# -- padding -------------------------------------------------------------------------------------


def explicit_pads(n, in_sizes, kernel, strides, dilations) -> list:
    """[(begin, end)] per spatial dim from `pads` or `auto_pad`, as ONNX defines them."""
    auto_pad = n.attr("auto_pad", "NOTSET")
    nd = len(in_sizes)
    if auto_pad in ("NOTSET", ""):
        pads = list(n.attr("pads", [0] * (2 * nd)))
        if len(pads) != 2 * nd:
            raise n.fail(f"pads {pads} must hold {2 * nd} values")
        if any(p < 0 for p in pads):
            raise n.fail(f"negative pads {pads} are not supported")
        return [(pads[i], pads[i + nd]) for i in range(nd)]
    if auto_pad == "VALID":
        return [(0, 0)] * nd
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = []
        for size, k, s, d in zip(in_sizes, kernel, strides, dilations):
            effective = (k - 1) * d + 1
            total = max((math.ceil(size / s) - 1) * s + effective - size, 0)
            small, large = total // 2, total - total // 2
            out.append((small, large) if auto_pad == "SAME_UPPER" else (large, small))
        return out
    raise n.fail(f"auto_pad={auto_pad!r} is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER")


def same_equivalent(pads, in_sizes, kernel, strides, dilations) -> bool:
    """True when explicit `pads` read the same windows as TFLite's SAME padding."""
    for (begin, end), size, k, s, d in zip(pads, in_sizes, kernel, strides, dilations):
        effective = (k - 1) * d + 1
        out = (size + begin + end - effective) // s + 1
        same_out, same_begin = same_padding(size, k, s, d)
        if out != same_out or begin != same_begin:
            return False
    return True


def choose_padding(b, x_nhwc, pads, in_sizes, kernel, strides, dilations, pad_value=None):
    """(input, Padding) for an NHWC op: SAME or VALID when they read the same windows as `pads`,
    else an explicit PAD (PADV2 with `pad_value`) and VALID."""
    if all(p == (0, 0) for p in pads):
        return x_nhwc, VALID
    if same_equivalent(pads, in_sizes, kernel, strides, dilations):
        return x_nhwc, SAME
    return pad_nhwc(b, x_nhwc, pads, pad_value), VALID


def pad_nhwc(b, x_nhwc, pads, pad_value=None) -> int:
    paddings = np.array([(0, 0), *pads, (0, 0)], np.int32)
    if pad_value is None:
        return b.op("PAD", [x_nhwc, b.const(paddings)])
    value = b.const(np.array(pad_value, b.sg.tensors[x_nhwc].np_dtype))
    return b.op("PADV2", [x_nhwc, b.const(paddings), value])


def _window_attrs(n, b, x, kernel=None):
    nd = b.rank(x) - 2
    kernel = list(kernel if kernel is not None else n.attr("kernel_shape"))
    strides = list(n.attr("strides", [1] * nd))
    dilations = list(n.attr("dilations", [1] * nd))
    if not len(kernel) == len(strides) == len(dilations) == nd:
        raise n.fail(f"kernel {kernel}, strides {strides} and dilations {dilations} must each "
                     f"hold {nd} values for a rank-{nd + 2} input")
    pads = explicit_pads(n, b.shape(x)[2:], kernel, strides, dilations)
    return kernel, strides, dilations, pads


def _as_2d(b, n, x):
    """A rank-3 (N, C, L) input as (N, C, 1, L); rank-4 as is."""
    rank = b.rank(x)
    if rank == 4:
        return x
    if rank == 3:
        shape = b.shape(x)
        return b.reshape(x, (shape[0], shape[1], 1, shape[2]))
    raise n.fail(f"only 1-D and 2-D {n.op_type} is supported, the input has rank {rank}")


def _spatial_1d_to_2d(values, fill):
    return [fill] + list(values)


# -- Conv ----------------------------------------------------------------------------------------

@lowers("Conv")
def conv(b, n):
    x, w, bias = n.input(0), n.input(1), n.input(2)
    one_d = b.rank(x) == 3
    kernel, strides, dilations, pads = _window_attrs(n, b, x, b.shape(w)[2:])
    x4 = _as_2d(b, n, x)
    if one_d:
        w = b.reshape(w, b.shape(w)[:2] + (1,) + b.shape(w)[2:])
        kernel, strides = _spatial_1d_to_2d(kernel, 1), _spatial_1d_to_2d(strides, 1)
        dilations, pads = _spatial_1d_to_2d(dilations, 1), [(0, 0)] + pads
    _, c_in, h, wd = b.shape(x4)
    c_out, c_group = b.shape(w)[:2]
    group = int(n.attr("group", 1))
    if c_in != c_group * group:
        raise n.fail(f"input has {c_in} channels but weights take {c_group} x group {group}")
    if bias < 0:
        bias = b.const(np.zeros(c_out, b.sg.tensors[x].np_dtype))
    xt = b.transpose(x4, TO_NHWC)
    xt, padding = choose_padding(b, xt, pads, (h, wd), kernel, strides, dilations)
    options = {"padding": padding, "stride_h": strides[0], "stride_w": strides[1],
               "dilation_h_factor": dilations[0], "dilation_w_factor": dilations[1]}
    if group == 1:
        y = b.op("CONV_2D", [xt, b.transpose(w, TO_NHWC), bias], options)
    elif c_group == 1:  # depthwise: weights [1, H, W, C_out]
        wt = b.transpose(w, (1, 2, 3, 0))
        y = b.op("DEPTHWISE_CONV_2D", [xt, wt, bias],
                 {**options, "depth_multiplier": c_out // c_in})
    else:
        y = _grouped_conv(b, xt, w, bias, group, options)
    y = b.transpose(y, TO_NCHW)
    if one_d:
        shape = b.shape(y)
        y = b.reshape(y, (shape[0], shape[1], shape[3]))
    return y


def _grouped_conv(b, xt, w, bias, group, options):
    """A grouped convolution as one CONV_2D per group between SPLIT and CONCATENATION."""
    axis = b.const(np.array(3, np.int32))
    parts = b.ops("SPLIT", [axis, xt], {"num_splits": group}, n_out=group)
    weights = b.ops("SPLIT", [b.const(np.array(0, np.int32)), b.transpose(w, TO_NHWC)],
                    {"num_splits": group}, n_out=group)
    biases = b.ops("SPLIT", [b.const(np.array(0, np.int32)), bias], {"num_splits": group},
                   n_out=group)
    outs = [b.op("CONV_2D", [p, wk, bk], options) for p, wk, bk in zip(parts, weights, biases)]
    return b.op("CONCATENATION", outs, {"axis": 3})


# -- pools ---------------------------------------------------------------------------------------

def _pool(b, n, op, pad_value):
    x = n.input(0)
    indices = len([o for o in n.proto.output if o]) > 1
    if int(n.attr("storage_order", 0)) != 0 and not indices:
        raise n.fail("storage_order=1 is not supported")
    one_d = b.rank(x) == 3
    kernel, strides, dilations, pads = _window_attrs(n, b, x)
    if indices or any(d != 1 for d in dilations) or b.rank(x) not in (3, 4):
        return _pool_by_taps(b, n, op, x, kernel, strides, dilations, pads, indices)
    if one_d:
        kernel, strides = _spatial_1d_to_2d(kernel, 1), _spatial_1d_to_2d(strides, 1)
        dilations, pads = _spatial_1d_to_2d(dilations, 1), [(0, 0)] + pads
    x4 = _as_2d(b, n, x)
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


# -- BatchNormalization --------------------------------------------------------------------------

@lowers("BatchNormalization")
def batch_norm(b, n):
    """Inference batch norm as a per-channel MUL and ADD (their factors fold to constants when
    the statistics are constant); the fusion pass folds both into the op before it."""
    if int(n.attr("training_mode", 0)) or len([o for o in n.proto.output if o]) > 1:
        raise n.fail("training mode (running statistics as outputs) is not supported")
    x, scale, offset, mean, var = (n.input(k) for k in range(5))
    dtype = b.sg.tensors[x].np_dtype
    eps = b.const(np.array(n.attr("epsilon", 1e-5), dtype))
    s = b.op("MUL", [scale, b.op("RSQRT", [b.op("ADD", [var, eps])])])
    t = b.op("SUB", [offset, b.op("MUL", [mean, s])])
    shape = (1, b.shape(x)[1]) + (1,) * (b.rank(x) - 2)
    y = b.op("MUL", [x, b.reshape(s, shape)])
    return b.op("ADD", [y, b.reshape(t, shape)])


# -- Gemm / MatMul -------------------------------------------------------------------------------

@lowers("Gemm")
def gemm(b, n):
    a, w, c = n.input(0), n.input(1), n.input(2)
    alpha, beta = float(n.attr("alpha", 1.0)), float(n.attr("beta", 1.0))
    trans_b = bool(int(n.attr("transB", 0)))
    if int(n.attr("transA", 0)):
        a = b.transpose(a, (1, 0))
    if c in b.empty:
        c = -1
    if c >= 0 and beta != 1.0:
        c = b.op("MUL", [c, b.const(np.array(beta, b.sg.tensors[c].np_dtype))])
    if not b.is_const(w):
        y = b.op("BATCH_MATMUL", [a, w], {"adj_y": trans_b})
        if alpha != 1.0:
            y = b.op("MUL", [y, b.const(np.array(alpha, b.sg.tensors[y].np_dtype))])
        return y if c < 0 else b.op("ADD", [y, c])
    w = w if trans_b else b.transpose(w, (1, 0))   # FULLY_CONNECTED wants weights [out, in]
    if alpha != 1.0:
        w = b.op("MUL", [w, b.const(np.array(alpha, b.sg.tensors[w].np_dtype))])
    units = b.shape(w)[0]
    cv = b.value(c) if c >= 0 else None
    if cv is not None and cv.size in (1, units) and (cv.ndim == 0 or cv.shape[-1] == cv.size):
        bias = b.const(np.broadcast_to(cv.reshape(-1), (units,)))
        return b.op("FULLY_CONNECTED", [a, w, bias])
    y = b.op("FULLY_CONNECTED", [a, w, -1])
    return y if c < 0 else b.op("ADD", [y, c])


@lowers("MatMul")
def matmul(b, n):
    a, w = n.input(0), n.input(1)
    ra, rw = b.rank(a), b.rank(w)
    if ra == 0 or rw == 0:
        raise n.fail("MatMul of a scalar")
    if ra == 1:
        a = b.reshape(a, (1,) + b.shape(a))
    vector_w = rw == 1
    if vector_w:
        w = b.reshape(w, b.shape(w) + (1,))
    if b.is_const(w) and b.rank(w) == 2:
        options = {"keep_num_dims": b.rank(a) > 2}
        y = b.op("FULLY_CONNECTED", [a, b.transpose(w, (1, 0)), -1], options)
    else:
        y = b.op("BATCH_MATMUL", [a, w])
    shape = list(b.shape(y))
    if ra == 1:
        del shape[-2]
    if vector_w:
        del shape[-1]
    return b.reshape(y, shape)


# -- Softmax -------------------------------------------------------------------------------------

def _softmax(b, n, op, options):
    x = n.input(0)
    rank = b.rank(x)
    axis = axis_of(n, n.attr("axis", -1 if n.opset >= 13 else 1), rank)
    if axis == rank - 1:
        return b.op(op, [x], options)
    if n.opset >= 13:  # one axis: move it last and back
        perm = list(range(rank))
        perm[axis], perm[-1] = perm[-1], perm[axis]
        return b.transpose(b.op(op, [b.transpose(x, perm)], options), perm)
    shape = b.shape(x)  # before opset 13: over all dims from `axis`, as a 2-D matrix
    flat = b.reshape(x, (math.prod(shape[:axis]), math.prod(shape[axis:])))
    return b.reshape(b.op(op, [flat], options), shape)


@lowers("Softmax")
def softmax(b, n):
    return _softmax(b, n, "SOFTMAX", {"beta": 1.0})


@lowers("LogSoftmax")
def log_softmax(b, n):
    return _softmax(b, n, "LOG_SOFTMAX", None)

