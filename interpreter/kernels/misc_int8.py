"""The remaining quantized kernels on int8 / uint8 (and int16 where TFLite has them), bit-exact
to TFLite's reference kernels: SUM, REDUCE_MAX / REDUCE_MIN, REDUCE_PROD, ARG_MAX / ARG_MIN,
RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR, DEPTH_TO_SPACE, SPACE_TO_DEPTH, LOG_SOFTMAX,
L2_NORMALIZATION.

Data movement and raw-value ops (nearest resizing, block rearrangements, arg max, reduce max)
are the dtype-agnostic kernels of resize.py / reduce.py registered for the integer types. SUM
rescales the zero-point-corrected int32 sum once (reduce.h's QuantizedMeanOrSum). int8 and
int16 RESIZE_BILINEAR are ResizeBilinearInteger (10-bit fixed-point positions and weights,
rounding halves away from zero); uint8 is the float32 kernel, truncating after adding 0.5, in
TFLite's order of operations. LOG_SOFTMAX is the gemmlowp fixed-point pipeline: exp of the
scaled differences to the row max, their sum's fixed-point log, subtracted and rescaled.
"""
from __future__ import annotations

import math

import numpy as np

from . import reduce, resize
from .activations_int8 import exp_on_negative_values, one_over_one_plus_x_for_x_in_0_1
from .pool_int8 import quantized_reduction
from .fixed_point import INT32_MAX, INT32_MIN, mbqm, mbqm64, quantize_multiplier, rdbpot, \
    saturating_shift_left, srdhm, wrap32
from .quant_params import TYPE_RANGE, quant_params
from .registry import register
from .unary_int8 import inv_sqrt_multiplier

F32 = np.float32

# -- data movement and raw values --------------------------------------------------------------

register("RESIZE_NEAREST_NEIGHBOR", "int8", "uint8", "int16")(resize.resize_nearest_neighbor)
register("DEPTH_TO_SPACE", "int8", "uint8")(resize.depth_to_space)
register("SPACE_TO_DEPTH", "int8", "uint8")(resize.space_to_depth)
register("ARG_MAX", "int8", "uint8")(reduce._arg("argmax"))
register("ARG_MIN", "int8", "uint8")(reduce._arg("argmin"))


def _same_quantization(prepare):
    """TFLite's quantized REDUCE_MAX / REDUCE_MIN compare raw values: the output must share
    the input's scale and zero point."""
    def checked(node):
        if quant_params(node, 0) != quant_params(node, 0, output=True):
            raise node.fail("input and output must have the same scale and zero point")
        return prepare(node)
    return checked


register("REDUCE_MAX", "int8", "uint8", "int16")(_same_quantization(reduce._reducer(np.maximum)))
register("REDUCE_MIN", "int8", "uint8", "int16")(_same_quantization(reduce._reducer(np.minimum)))


# -- SUM ---------------------------------------------------------------------------------------

@register("SUM", "int8", "uint8", "int16")
def sum_(node):
    x, key, axes, keep, shape, s_in, z_in, s_out, z_out = quantized_reduction(node, "SUM")
    multiplier, shift = quantize_multiplier(float(s_in) / float(s_out))
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    lo, hi = TYPE_RANGE[key]
    sums = np.empty(shape, np.int64)

    def run(x, axis_, out):
        if x.size == 0:
            out[...] = 0
            return
        np.sum(x, axis=axes, dtype=np.int64, keepdims=keep, out=sums)
        y = mbqm(wrap32(sums - z_in * count), multiplier, shift) + z_out
        np.copyto(out, np.clip(y, lo, hi), casting="unsafe")
    return run


# -- REDUCE_PROD -------------------------------------------------------------------------------

_raw_prod = reduce._reducer(np.multiply)


@register("REDUCE_PROD", "int8", "int16")
def reduce_prod(node):
    """Quantized: the running product rescaled after every factor by input_scale /
    output_scale^(1/n) with the int64 MultiplyByQuantizedMultiplier, in the input's order, and
    once more at the end (reduce.h's QuantizedReduceProd). Unquantized: the raw product."""
    q = node.input(0).quantization
    if q is None or q.scale.size == 0:
        return _raw_prod(node)
    x, key, axes, keep, shape, s_in, z_in, s_out, z_out = quantized_reduction(node,
                                                                              "REDUCE_PROD")
    rank = len(x.shape)
    kept = [i for i in range(rank) if i not in axes]
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    outputs = int(np.prod([x.shape[a] for a in kept], dtype=np.int64))
    if count == 0 or outputs == 0:
        return lambda x, axis_, out: out.fill(0)
    m, e = quantize_multiplier(float(s_in) / math.pow(float(s_out), 1.0 / count))
    lo, hi = TYPE_RANGE[key]
    order = kept + list(axes)      # reduced elements of one output, in the input's order

    def run(x, axis_, out):
        v = np.transpose(x, order).reshape(outputs, count).astype(np.int64) - z_in
        prod = v[:, 0]
        for k in range(1, count):
            prod = mbqm64(prod * v[:, k], m, e)
        y = mbqm64(prod, m, e) + z_out
        np.copyto(out.reshape(-1), np.clip(y, lo, hi), casting="unsafe")
    return run


# -- RESIZE_BILINEAR ---------------------------------------------------------------------------

@register("RESIZE_BILINEAR", "int8", "uint8", "int16")
def resize_bilinear(node):
    shape, size, align, half = resize._resize_input(node)
    if align and half:
        raise node.fail("align_corners and half_pixel_centers cannot both be set")
    make = _bilinear_float if node.input(0).type_name == "uint8" else _bilinear_integer
    if size is None:
        return resize._at_run_time(node, make, align, half)
    return make(shape, *size, align, half)


def _trunc_div(a, b: int):
    """C's integer division (toward zero)."""
    return np.where(a >= 0, a // b, -((-a) // b))


def _integer_axis(in_size: int, out_size: int, align: bool, half: bool):
    """ComputeInterpolationValuesInteger: lower, upper source index and their 10-bit weights."""
    if align and out_size > 1:
        scale = ((1 << 10) * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    else:
        scale = ((1 << 10) * in_size + out_size // 2) // out_size
    v = np.arange(out_size, dtype=np.int64) * scale
    if half:
        v = v + scale // 2 - (1 << 9)
    lo = np.maximum(_trunc_div(v, 1 << 10), 0)
    hi = np.minimum(_trunc_div(v + (1 << 10) - 1, 1 << 10), in_size - 1)
    frac = v - (lo << 10)
    return lo, hi, (1 << 10) - frac, frac


def _corners(shape, out_h, out_w, ys, xs):
    """[(flat source index [out_h*out_w], (weight y, weight x))] of the four corners in
    TFLite's order (y0 x0, y1 x0, y0 x1, y1 x1), from per-axis (lower, upper, lower weight,
    upper weight)."""
    w = shape[2]
    y0, y1, wy0, wy1 = ys
    x0, x1, wx0, wx1 = xs
    return [(np.add.outer(yi * w, xi).reshape(-1), (wy, wx))
            for xi, wx in ((x0, wx0), (x1, wx1)) for yi, wy in ((y0, wy0), (y1, wy1))]


def _bilinear_integer(shape, out_h, out_w, align, half):
    n, h, w, c = shape
    corners = [(index, np.multiply.outer(wy, wx).reshape(-1, 1))
               for index, (wy, wx) in _corners(shape, out_h, out_w,
                                                _integer_axis(h, out_h, align, half),
                                                _integer_axis(w, out_w, align, half))]
    p = out_h * out_w
    acc = np.empty((n, p, c), np.int64)
    part = np.empty((n, p, c), np.int64)
    neg = np.empty((n, p, c), np.bool_)

    def run(x, _size, out):
        src = x.reshape(n, h * w, c)
        for k, (index, weight) in enumerate(corners):
            np.multiply(src[:, index], weight, out=acc if k == 0 else part)
            if k:
                np.add(acc, part, out=acc)
        # (acc +- 2^19) / 2^20 truncating: halves away from zero.
        np.less_equal(acc, 0, out=neg)
        np.abs(acc, out=acc)
        np.add(acc, 1 << 19, out=acc)
        np.right_shift(acc, 20, out=acc)
        np.negative(acc, out=acc, where=neg)
        np.copyto(out.reshape(n, p, c), acc, casting="unsafe")
    return run


def _bilinear_float(shape, out_h, out_w, align, half):
    """reference_ops::ResizeBilinear<uint8_t>: float32 in C's order of operations,
    ((v00 a_y) a_x + (v10 b_y) a_x) + (v01 a_y) b_x + (v11 b_y) b_x + 0.5, truncated."""
    n, h, w, c = shape
    one = F32(1)

    def axis(in_size, out_size):
        lo, hi, frac = resize.bilinear_axis(in_size, out_size, align, half)
        return lo, hi, (one - frac).astype(F32), frac.astype(F32)

    corners = _corners(shape, out_h, out_w, axis(h, out_h), axis(w, out_w))
    p = out_h * out_w
    corners = [(index, np.repeat(wy, out_w).reshape(-1, 1), np.tile(wx, out_h).reshape(-1, 1))
               for index, (wy, wx) in corners]
    acc = np.empty((n, p, c), F32)
    term = np.empty((n, p, c), F32)

    def run(x, _size, out):
        src = x.reshape(n, h * w, c)
        for k, (index, wy, wx) in enumerate(corners):
            t = acc if k == 0 else term
            np.multiply(src[:, index], wy, out=t, dtype=F32)
            np.multiply(t, wx, out=t)
            if k:
                np.add(acc, term, out=acc)
        np.add(acc, F32(0.5), out=acc)
        np.copyto(out.reshape(n, p, c), acc, casting="unsafe")
    return run


# -- LOG_SOFTMAX -------------------------------------------------------------------------------

SCALED_DIFF_BITS, ACCUM_BITS, OUTPUT_BITS = 5, 12, 4


def _clz32(x):
    """CountLeadingZeros of uint32 values (32 for 0)."""
    x = np.asarray(x, np.int64) & 0xFFFFFFFF
    return np.where(x == 0, 32, 32 - np.frexp(x.astype(np.float64))[1].astype(np.int64))


def _saturating_add(a, b):
    return np.clip(np.asarray(a, np.int64) + b, INT32_MIN, INT32_MAX)


def _rounding_half_sum(a, b):
    s = np.asarray(a, np.int64) + b
    return np.where(s >= 0, (s + 1) // 2, -((-s + 1) // 2))


def log_x_for_x_greater_than_or_equal_to_1(x, output_bits: int, input_bits: int):
    """TFLite's fixed-point log (common.h) of a Q(input_bits) value >= 1, in Q(output_bits)."""
    log_2, sqrt_sqrt_half, sqrt_half, quarter = 1488522236, 1805811301, 1518500250, 536870912
    alpha_n, alpha_d, alpha_i, alpha_f = 117049297, 127690142, 1057819769, 638450708
    accum_bits = output_bits + 1
    shifted_quarter = rdbpot(quarter, accum_bits)
    z_a = np.asarray(x, np.int64)
    z_a_headroom_plus_1 = _clz32(z_a)
    r_a_tmp = _shift_left_each(z_a, z_a_headroom_plus_1 - 1)
    r_a_raw = saturating_shift_left(srdhm(r_a_tmp, sqrt_half), 1)
    z_a_pow_2_adj = _saturating_add(
        saturating_shift_left(input_bits - z_a_headroom_plus_1, 31 - accum_bits),
        shifted_quarter)
    z_b = srdhm(z_a, sqrt_half)
    z_b_headroom = _clz32(z_b) - 1
    r_b_raw = _shift_left_each(z_a, z_b_headroom)
    z_b_pow_2_adj = _saturating_add(
        saturating_shift_left(input_bits - z_b_headroom, 31 - accum_bits), -shifted_quarter)
    r = np.minimum(r_a_raw, r_b_raw)
    z_pow_2_adj = np.maximum(z_a_pow_2_adj, z_b_pow_2_adj)
    p = _rounding_half_sum(r, sqrt_sqrt_half)
    q = wrap32(2 * wrap32(r - sqrt_sqrt_half))
    common_sq = srdhm(q, q)
    num = wrap32(srdhm(q, r) + srdhm(srdhm(q, common_sq), alpha_n))
    denom_minus_one = wrap32(srdhm(p, wrap32(alpha_i + q + srdhm(alpha_d, common_sq)))
                             + srdhm(alpha_f, q))
    recip_denom = one_over_one_plus_x_for_x_in_0_1(denom_minus_one)
    num_scaled = rdbpot(num, accum_bits)
    total = wrap32(srdhm(z_pow_2_adj, log_2) + srdhm(num_scaled, recip_denom))
    return saturating_shift_left(total, accum_bits - output_bits)


def _shift_left_each(x, exponents):
    """SaturatingRoundingMultiplyByPOTParam with a per-element exponent >= 0."""
    out = np.asarray(x, np.int64).copy()
    exponents = np.broadcast_to(exponents, out.shape)
    for e in np.unique(exponents):
        if e > 0:
            sel = exponents == e
            out[sel] = saturating_shift_left(out[sel], int(e))
    return out


@register("LOG_SOFTMAX", "int8", "uint8")
def log_softmax(node):
    node.expect_inputs(1)
    x = node.input(0)
    key = x.type_name
    if node.outputs[0].type_name != key:
        raise node.fail(f"output is {node.outputs[0].type_name}; expected {key}")
    if len(x.shape) < 1:
        raise node.fail("the input must have at least one dimension")
    node.outputs[0].shape = tuple(x.shape)
    s_in, _ = quant_params(node, 0)
    s_out, z_out = quant_params(node, 0, output=True)
    lo, hi = TYPE_RANGE[key]
    if s_out != 16.0 / 256 or z_out != hi:
        raise node.fail(f"the output needs scale 16/256 and zero point {hi}, got {s_out:g} "
                        f"and {z_out}")
    # PreprocessLogSoftmaxScalingExp (beta 1) and CalculateInputRadius.
    real = min(float(s_in) * (1 << (31 - SCALED_DIFF_BITS)), (1 << 31) - 1.0)
    if real <= 1.0:
        raise node.fail(f"input scale {s_in:g} is too small")
    multiplier, left_shift = quantize_multiplier(real)
    reverse_m, reverse_shift = quantize_multiplier((1 << (31 - left_shift)) / float(multiplier))
    diff_min = -int(np.floor(((1 << SCALED_DIFF_BITS) - 1) * float(1 << (31 - SCALED_DIFF_BITS))
                             / float(1 << left_shift)))
    # Per difference to the row max (0, -1, ..., -255): the scaled difference in Q5.26 and its
    # exp rescaled to Q12.19 (0 when below diff_min).
    diffs = -np.arange(256, dtype=np.int64)
    scaled = mbqm(diffs, multiplier, left_shift)
    exps = np.where(diffs >= diff_min,
                    rdbpot(exp_on_negative_values(scaled, SCALED_DIFF_BITS), ACCUM_BITS), 0)
    out_shift = 31 - SCALED_DIFF_BITS - OUTPUT_BITS
    shape = tuple(x.shape)
    depth = shape[-1]
    rows = int(np.prod(shape[:-1], dtype=np.int64))

    def run(x, out):
        v = x.reshape(rows, depth).astype(np.int64)
        d = v.max(axis=1, keepdims=True) - v                           # 0 .. 255
        log_sum = log_x_for_x_greater_than_or_equal_to_1(
            wrap32(exps[d].sum(axis=1)), SCALED_DIFF_BITS, ACCUM_BITS)[:, None]
        adjusted = np.maximum(diff_min - 1,
                              mbqm(wrap32(log_sum + INT32_MIN), reverse_m, reverse_shift))
        y = np.clip(rdbpot(wrap32(scaled[d] - log_sum), out_shift) + hi, lo, hi)
        np.copyto(out.reshape(rows, depth), np.where(-d > adjusted, y, lo), casting="unsafe")
    return run


# -- L2_NORMALIZATION --------------------------------------------------------------------------

@register("L2_NORMALIZATION", "int8", "uint8")
def l2_normalization(node):
    """Each row's x - zp times the fixed-point 1/sqrt of its sum of squares, in 1/128 units
    (reference_integer_ops::L2Normalization; uint8 adds 128 as reference_ops does)."""
    node.expect_inputs(1)
    x = node.input(0)
    key = x.type_name
    if node.outputs[0].type_name != key:
        raise node.fail(f"output is {node.outputs[0].type_name}; expected {key}")
    if len(x.shape) < 1:
        raise node.fail("the input must have at least one dimension")
    if int(getattr(node.options, "fused_activation_function", 0) or 0):
        raise node.fail("fused activations are not supported (as in TFLite)")
    _, z_in = quant_params(node, 0)
    s_out, z_out = quant_params(node, 0, output=True)
    want_zp = 0 if key == "int8" else 128
    if s_out != 1.0 / 128 or z_out != want_zp:
        raise node.fail(f"the output needs scale 1/128 and zero point {want_zp}, got {s_out:g} "
                        f"and {z_out}")
    node.outputs[0].shape = tuple(x.shape)
    depth = x.shape[-1]
    rows = int(np.prod(x.shape[:-1], dtype=np.int64))
    lo, hi = TYPE_RANGE[key]

    def run(x, out):
        v = x.reshape(rows, depth).astype(np.int64) - z_in
        m, s = inv_sqrt_multiplier(wrap32((v * v).sum(axis=1)))
        if key == "int8":
            y = mbqm(v, m[:, None], s[:, None] + 7)
        else:
            y = rdbpot(srdhm(128 * v, m[:, None]), -s[:, None]) + 128
        np.copyto(out.reshape(rows, depth), np.clip(y, lo, hi), casting="unsafe")
    return run
