"""Neural-network ONNX ops: Conv, BatchNormalization, Gemm, MatMul, Softmax (pools:
`lower_pool.py`).

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


def window_attrs(n, b, x, kernel=None):
    nd = b.rank(x) - 2
    kernel = list(kernel if kernel is not None else n.attr("kernel_shape"))
    strides = list(n.attr("strides", [1] * nd))
    dilations = list(n.attr("dilations", [1] * nd))
    if not len(kernel) == len(strides) == len(dilations) == nd:
        raise n.fail(f"kernel {kernel}, strides {strides} and dilations {dilations} must each "
                     f"hold {nd} values for a rank-{nd + 2} input")
    pads = explicit_pads(n, b.shape(x)[2:], kernel, strides, dilations)
    return kernel, strides, dilations, pads


def as_2d(b, n, x):
    """A rank-3 (N, C, L) input as (N, C, 1, L); rank-4 as is."""
    rank = b.rank(x)
    if rank == 4:
        return x
    if rank == 3:
        shape = b.shape(x)
        return b.reshape(x, (shape[0], shape[1], 1, shape[2]))
    raise n.fail(f"only 1-D and 2-D {n.op_type} is supported, the input has rank {rank}")


def spatial_1d_to_2d(values, fill):
    return [fill] + list(values)


# -- Conv ----------------------------------------------------------------------------------------

@lowers("Conv")
def conv(b, n):
    x, w, bias = n.input(0), n.input(1), n.input(2)
    if b.rank(x) == 5:
        return _conv_3d(b, n, x, w, bias)
    one_d = b.rank(x) == 3
    kernel, strides, dilations, pads = window_attrs(n, b, x, b.shape(w)[2:])
    x4 = as_2d(b, n, x)
    if one_d:
        w = b.reshape(w, b.shape(w)[:2] + (1,) + b.shape(w)[2:])
        kernel, strides = spatial_1d_to_2d(kernel, 1), spatial_1d_to_2d(strides, 1)
        dilations, pads = spatial_1d_to_2d(dilations, 1), [(0, 0)] + pads
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


TO_NDHWC, TO_NCDHW = (0, 2, 3, 4, 1), (0, 4, 1, 2, 3)


def _conv_3d(b, n, x, w, bias):
    """CONV_3D on NDHWC (filter [kD, kH, kW, C_in, C_out]); groups as one CONV_3D each."""
    kernel, strides, dilations, pads = window_attrs(n, b, x, b.shape(w)[2:])
    c_out, c_group = b.shape(w)[:2]
    group = int(n.attr("group", 1))
    if b.shape(x)[1] != c_group * group:
        raise n.fail(f"input has {b.shape(x)[1]} channels but weights take {c_group} x group "
                     f"{group}")
    if bias < 0:
        bias = b.const(np.zeros(c_out, b.sg.tensors[x].np_dtype))
    xt = b.transpose(x, TO_NDHWC)
    xt, padding = choose_padding(b, xt, pads, b.shape(x)[2:], kernel, strides, dilations)
    options = {"padding": padding, "stride_d": strides[0], "stride_h": strides[1],
               "stride_w": strides[2], "dilation_d_factor": dilations[0],
               "dilation_h_factor": dilations[1], "dilation_w_factor": dilations[2]}
    wt = b.transpose(w, (2, 3, 4, 1, 0))
    if group == 1:
        y = b.op("CONV_3D", [xt, wt, bias], options)
    else:
        split = lambda t, axis: b.ops("SPLIT", [b.const(np.array(axis, np.int32)), t],  # noqa
                                      {"num_splits": group}, n_out=group)
        y = b.op("CONCATENATION", [b.op("CONV_3D", [p, wk, bk], options) for p, wk, bk in
                                   zip(split(xt, 4), split(wt, 4), split(bias, 0))],
                 {"axis": 4})
    return b.transpose(y, TO_NCDHW)


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

