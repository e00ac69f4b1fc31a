"""CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED and BATCH_MATMUL on 16x8 (int16 activations with
zero point 0, int8 weights, int64 bias), bit-exact to TFLite's reference kernels
(reference_integer_ops::ConvPerChannel, DepthwiseConvPerChannel, FullyConnected[PerChannel],
reference_ops::BatchMatMul<int16_t, int64_t>).

int16 x int8 sums run on float64 BLAS: every partial sum is an integer far below 2^53, so exact.
Convolutions and BATCH_MATMUL requantize int64 accumulators with TFLite's single-rounding
MultiplyByQuantizedMultiplier (requantize.WideRequantizer); a CONV_2D whose options say
quantized_bias_type INT32 accumulates in int32 and takes the double-rounding one instead.
FULLY_CONNECTED requantizes in double: round(acc * input_scale * filter_scale / output_scale).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .common import clip_, matmul_shape
from .conv_integer import PaddedSource, RowBlocks, bias_16x8, check_symmetric, conv_setup, \
    integer_weights
from .fixed_point import f32, quantize_multiplier, round_half_away
from .geometry import fully_connected_shape
from .quant_params import TYPE_RANGE, activation_range, channel_scales, expect_output_type, \
    quant_params
from .registry import register
from .requantize import Requantizer, WideRequantizer

X_MAX = 1 << 15                # the largest |int16|


def requantizer(multiplier, shift, lo, hi, rows: int, channels: int, bias, wide: bool,
                acc_bound):
    """requant(acc, out) for (p <= rows, channels) float64 accumulators (overwritten)."""
    if wide:
        return WideRequantizer(multiplier, shift, lo, hi, channels, bias, acc_bound)
    r = Requantizer(multiplier, shift, 0, lo, hi, (rows, channels), bias)
    work = r.work()
    return lambda acc, out: r(acc, out, work)


@register("CONV_2D", "int16")
def conv_2d(node):
    x, wc, win, groups, cout, _, _, multiplier, shift, lo, hi = conv_setup(node, "int16", False)
    _, kh, kw, cg = wc.shape
    n, cin = x.shape[0], x.shape[3]
    oh, ow = win.oh, win.ow
    bias, wide = bias_16x8(node, 2, cout)
    acc_bound = np.abs(wc).reshape(cout, -1).sum(1) * X_MAX
    k = kh * kw * cg
    per_group = cout // groups
    wmats = [np.ascontiguousarray(wc[g * per_group:(g + 1) * per_group].reshape(per_group, k).T,
                                  dtype=np.float64) for g in range(groups)]
    source = PaddedSource(x.shape, x.dtype, win, 0)
    chunks = RowBlocks(n, oh, 2 * ow * max(k * groups, cout))
    most = chunks.most_rows * ow
    requant = requantizer(multiplier, shift, lo, hi, most, cout, bias, wide, acc_bound)
    cols = np.empty((most, kh, kw, cin), np.float64)
    acc = np.empty((most, cout), np.float64)
    cache = {}

    def windows(src):
        if cache.get("src") is not src:
            cache["view"], cache["src"] = win.patches(src), src
        return cache["view"]

    def run(x, w_, *rest):
        out = rest[-1]
        view = windows(source(x))
        flat = out.reshape(n * oh * ow, cout)
        for b, r0, r1 in chunks:
            p = (r1 - r0) * ow
            c = cols[:p]
            np.copyto(c.reshape(r1 - r0, ow, kh, kw, cin), view[b, r0:r1], casting="unsafe")
            if groups == 1:
                np.matmul(c.reshape(p, k), wmats[0], out=acc[:p])
            else:
                for g, wm in enumerate(wmats):
                    part = np.ascontiguousarray(c[..., g * cg:(g + 1) * cg]).reshape(p, k)
                    np.matmul(part, wm, out=acc[:p, g * per_group:(g + 1) * per_group])
            start = (b * oh + r0) * ow
            requant(acc[:p], flat[start:start + p])
    return run


@register("DEPTHWISE_CONV_2D", "int16")
def depthwise_conv_2d(node):
    x, w, win, mult, cout, _, _, multiplier, shift, lo, hi = conv_setup(node, "int16", True)
    _, kh, kw, _ = w.shape
    n, h, wd, cin = x.shape
    (sh, sw), (dh, dw), (oh, ow), pad = (win.sh, win.sw), (win.dh, win.dw), (win.oh, win.ow), \
        (win.pt, win.pl)
    bias, _ = bias_16x8(node, 2, cout, option=False)
    wc = w[0].astype(np.float64)                                      # (kh, kw, cout)
    acc_bound = np.abs(wc).reshape(-1, cout).sum(0) * X_MAX
    requant = WideRequantizer(multiplier, shift, lo, hi, cout, bias, acc_bound)

    # The input as float64, padded with zeros, each channel repeated `mult` times; all taps as
    # one strided view summed by one einsum. With stride_w 1 a tap's innermost axis is a whole
    # output row (ow * cout contiguous values, weights tiled along it): long inner loops.
    need_h, need_w = win.rows, win.cols
    rows, cols = win.inside(h, wd)
    xp = np.zeros((n, need_h, need_w, cin, mult), np.float64)
    interior = xp[:, pad[0]:pad[0] + rows, pad[1]:pad[1] + cols]
    xp = xp.reshape(n, need_h, need_w, cout)
    s0, s1, s2, s3 = xp.strides
    if sw == 1:
        taps = as_strided(xp, (kh, kw, n, oh, ow * cout), (dh * s1, dw * s2, s0, sh * s1, s3),
                          writeable=False)
        weights = np.ascontiguousarray(np.tile(wc, (1, 1, ow)))
        spec = "ijnyk,ijk->nyk"
        acc = np.empty((n, oh, ow * cout), np.float64)
    else:
        taps = as_strided(xp, (kh, kw, n, oh, ow, cout),
                          (dh * s1, dw * s2, s0, sh * s1, sw * s2, s3), writeable=False)
        weights, spec = wc, "ijnyxk,ijk->nyxk"
        acc = np.empty((n, oh, ow, cout), np.float64)
    acc4 = acc.reshape(n, oh, ow, cout)

    def run(x, w_, *rest):
        out = rest[-1]
        np.copyto(interior, x[:, :rows, :cols, :, None], casting="unsafe")
        np.einsum(spec, taps, weights, out=acc)
        requant(acc4, out)
    return run


@register("FULLY_CONNECTED", "int16")
def fully_connected(node):
    node.expect_inputs(2, 3)
    wt = node.input(1)
    w = integer_weights(node, 1, "int8")
    batch, units, depth = fully_connected_shape(node, wt.shape)
    expect_output_type(node, "int16")
    check_symmetric(node, 0)
    opts, out = node.options, node.outputs[0]
    in_scale, _ = quant_params(node, 0)
    out_scale, _ = quant_params(node, 0, output=True)
    q = wt.quantization
    scales = channel_scales(node, 1, units, 0).astype(np.float64)
    effective = float(in_scale) * scales / float(out_scale)
    per_channel = q.scale.size > 1
    zw = 0 if per_channel or not q.zero_point.size else int(q.zero_point[0])
    bias, _ = bias_16x8(node, 2, units)
    lo, hi = activation_range(opts.fused_activation_function, out, node)
    wc = w.astype(np.int64) - zw
    wmat = np.ascontiguousarray(wc.T, dtype=np.float64)
    bias_f = bias.astype(np.float64)
    bound = (np.abs(wc).sum(1) * X_MAX + np.abs(bias)) * effective
    # C's int32 cast of a rounded value past int32 gives INT32_MIN on x86 (clamped to lo).
    overflow = bool(np.any(bound >= 2.0 ** 31 - 1))
    xf = np.empty((batch, depth), np.float64)
    acc = np.empty((batch, units), np.float64)
    frac = np.empty_like(acc)
    flag = np.empty(acc.shape, np.bool_)

    def run(x, w_, *rest):
        out = rest[-1]
        np.copyto(xf, x.reshape(batch, depth), casting="unsafe")
        np.matmul(xf, wmat, out=acc)
        np.add(acc, bias_f, out=acc)
        np.multiply(acc, effective, out=acc)
        round_half_away(acc, (frac, flag))
        if overflow:
            np.greater_equal(np.abs(acc, out=frac), 2.0 ** 31, out=flag)
            acc[flag] = lo
        clip_(acc, lo, hi)
        np.copyto(out.reshape(batch, units), acc, casting="unsafe")
    return run


@register("BATCH_MATMUL", "int16")
def batch_matmul(node):
    node.expect_inputs(2)
    a, b = node.input(0), node.input(1)
    if b.type_name not in ("int16", "int8"):
        raise node.fail(f"int16 BATCH_MATMUL needs an int16 or int8 right-hand side, got "
                        f"{b.type_name}")
    if not (2 <= len(a.shape) <= 5 and 2 <= len(b.shape) <= 5):
        raise node.fail(f"inputs must have rank 2 to 5, got {list(a.shape)} and {list(b.shape)}")
    expect_output_type(node, "int16")
    check_symmetric(node, 0, 1)
    adj_x, adj_y, rows, depth, cols, batch = matmul_shape(node, a.shape, b.shape)
    out = node.outputs[0]
    out.shape = tuple(batch) + (rows, cols)
    sa, _ = quant_params(node, 0)
    sb, _ = quant_params(node, 1)
    so, _ = quant_params(node, 0, output=True)
    m, s = quantize_multiplier(float(f32(sa) * f32(sb)) / float(so))
    lo, hi = TYPE_RANGE["int16"]
    b_max = X_MAX if b.type_name == "int16" else 128
    requant = WideRequantizer(m, s, lo, hi, cols, acc_bound=depth * X_MAX * b_max)
    af = np.empty(a.shape, np.float64)
    bf = np.empty(b.shape, np.float64)
    acc = np.empty(out.shape, np.float64)
    b_const = None if b.data is None else b.data.astype(np.float64)

    def run(x, y, out):
        np.copyto(af, x, casting="unsafe")
        lhs = af.swapaxes(-1, -2) if adj_x else af
        if b_const is None:
            np.copyto(bf, y, casting="unsafe")
            rhs = bf
        else:
            rhs = b_const
        rhs = rhs.swapaxes(-1, -2) if adj_y else rhs
        np.matmul(lhs, rhs, out=acc)
        requant(acc, out)
    return run
