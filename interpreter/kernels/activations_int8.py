"""Activations on int8 / uint8, bit-exact to TFLite's reference kernels (activations.cc).

An 8-bit elementwise function has 256 inputs: prepare evaluates TFLite's arithmetic on all of
them and run is one lookup. RELU* requantize with MultiplyByQuantizedMultiplier and clamp
(ReluX); LEAKY_RELU picks the identity or alpha multiplier by sign; HARD_SWISH is reference
hard_swish.h's int16 fixed-point pipeline; LOGISTIC and TANH are the LUT that TFLite itself
populates in Prepare from the float32 function. SOFTMAX is reference_ops::Softmax: gemmlowp
fixed-point exp of the (beta-scaled) difference to the row max, a fixed-point reciprocal of the
sum, one rounding shift.
"""
from __future__ import annotations

import numpy as np

from .common import clip_
from .fixed_point import INT32_MAX, f32, mbqm, quantize_multiplier, rdbpot, round_half_away, \
    saturating_shift_left, srdhm
from .lut import all_values, lookup, lut_populate_int8
from .quant_params import TYPE_RANGE, quant_params
from .registry import register

INF = float("inf")


def _unary(node):
    node.expect_inputs(1)
    x = node.input(0)
    out = node.outputs[0]
    if out.type_name != x.type_name:
        raise node.fail(f"output is {out.type_name}; expected {x.type_name}")
    out.shape = tuple(x.shape)
    return x.type_name


def _relu_x(act_min: float, act_max: float):
    def prepare(node):
        key = _unary(node)
        s_in, z_in = quant_params(node, 0)
        s_out, z_out = quant_params(node, 0, output=True)
        m, s = quantize_multiplier(float(f32(s_in) / f32(s_out)))
        type_lo, type_hi = TYPE_RANGE[key]
        lo = max(type_lo, z_out + round_half_away(float(f32(act_min) / f32(s_out))))
        hi = type_hi if act_max == INF else \
            min(type_hi, z_out + round_half_away(float(f32(act_max) / f32(s_out))))
        v = all_values(key)
        return lookup(np.clip(mbqm(v - z_in, m, s) + z_out, lo, hi).astype(key))
    return prepare


register("RELU", "int8", "uint8")(_relu_x(0.0, INF))
register("RELU6", "int8", "uint8")(_relu_x(0.0, 6.0))
register("RELU_N1_TO_1", "int8", "uint8")(_relu_x(-1.0, 1.0))
register("RELU_0_TO_1", "int8", "uint8")(_relu_x(0.0, 1.0))


@register("LEAKY_RELU", "int8", "uint8")
def leaky_relu(node):
    key = _unary(node)
    s_in, z_in = quant_params(node, 0)
    s_out, z_out = quant_params(node, 0, output=True)
    alpha = f32(getattr(node.options, "alpha", 0.0))
    m_alpha, s_alpha = quantize_multiplier(float(f32(s_in) * alpha / f32(s_out)))
    m_id, s_id = quantize_multiplier(float(f32(s_in) / f32(s_out)))
    v = all_values(key) - z_in
    scaled_alpha = np.sign(m_alpha) * mbqm(v, abs(m_alpha), s_alpha)
    y = z_out + np.where(v >= 0, mbqm(v, m_id, s_id), scaled_alpha)
    return lookup(np.clip(y, *TYPE_RANGE[key]).astype(key))


def _srdhm16(a, b):
    """gemmlowp's int16 SaturatingRoundingDoublingHighMul (truncating division)."""
    ab = np.asarray(a, np.int64) * np.asarray(b, np.int64)
    nudge = np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    v = ab + nudge
    q = np.where(v >= 0, v >> 15, -((-v) >> 15))
    return np.where((np.asarray(a) == -32768) & (np.asarray(b) == -32768), 32767, q)


def _sdhm16(a, b):
    """hard_swish.h's SaturatingDoublingHighMul: int16, rounding toward zero."""
    ab = np.asarray(a, np.int64) * np.asarray(b, np.int64)
    q = np.where(ab >= 0, ab >> 15, -((-ab) >> 15))
    return np.where((np.asarray(a) == -32768) & (np.asarray(b) == -32768), 32767, q)


def _saturating_left_shift16(v, amount: int):
    return np.clip(np.asarray(v, np.int64) * (1 << amount), -32768, 32767)


def _int16_multiplier(m32: int) -> int:
    """DownScaleInt32ToInt16Multiplier."""
    if m32 >= INT32_MAX - (1 << 15):
        return 32767
    return (m32 + (1 << 15)) >> 16


@register("HARD_SWISH", "int8", "uint8")
def hard_swish(node):
    key = _unary(node)
    s_in, z_in = quant_params(node, 0)
    s_out, z_out = quant_params(node, 0, output=True)
    hires = f32(1.0 / 128.0) * f32(s_in)
    m_out32, e_out = quantize_multiplier(float(hires / f32(s_out)))
    m_relu32, e_relu = quantize_multiplier(float(hires / f32(3.0 / 32768.0)))
    if e_out > 0:
        raise node.fail(f"output rescaling exponent {e_out} must not be positive")
    m_out, m_relu = _int16_multiplier(m_out32), _int16_multiplier(m_relu32)

    v = all_values(key) - z_in
    hires_v = v * (1 << 7)
    preshift = _srdhm16(hires_v, m_out)
    reluish = hires_v
    if e_relu > 0:
        reluish = _saturating_left_shift16(reluish, e_relu - 1)
    reluish = _srdhm16(reluish, m_relu)
    if e_relu > 0:
        reluish = _saturating_left_shift16(reluish, 1)
    if e_relu < 0:
        reluish = rdbpot(reluish, -e_relu)
    reluish = (reluish + (1 << 15)) >> 1
    y = rdbpot(_sdhm16(reluish, preshift), -e_out) + z_out
    return lookup(np.clip(y, *TYPE_RANGE[key]).astype(key))


# float64 values from here on round to float32 infinity (float32's max plus half its last ulp).
_F32_INF_FROM = float(np.finfo(np.float32).max) + 2.0 ** 103


def _exp32(x):
    """float32 exp, correctly rounded (as glibc's expf): inf past float32's range, computed
    with no overflow (exp(89) is past it already, and inf is written, not cast)."""
    e = np.exp(np.minimum(x.astype(np.float64), 89.0))
    return np.where(e < _F32_INF_FROM, e, np.inf).astype(np.float32)


def _check_logistic_output(node):
    s_out, _ = quant_params(node, 0, output=True)
    if s_out != 1.0 / 256:
        raise node.fail(f"the output scale must be 1/256, got {s_out:g}")


@register("LOGISTIC", "int8", "uint8")
def logistic(node):
    key = _unary(node)
    _check_logistic_output(node)
    return lookup(lut_populate_int8(node, key, lambda x: f32(1.0) / (f32(1.0) + _exp32(-x))))


@register("TANH", "int8", "uint8")
def tanh(node):
    key = _unary(node)
    return lookup(lut_populate_int8(node, key,
                                    lambda x: np.tanh(x.astype(np.float64)).astype(np.float32)))


# -- SOFTMAX -----------------------------------------------------------------------------------

SCALED_DIFF_INTEGER_BITS = 5
ACCUMULATION_INTEGER_BITS = 12


def _exp_on_interval(a):
    """gemmlowp exp_on_interval_between_negative_one_quarter_and_0_excl (Q0.31)."""
    constant_term, one_third = 1895147668, 715827883
    x = a + (1 << 28)
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = rdbpot(x4, 2)
    poly = rdbpot(srdhm(x4_over_4 + x3, one_third) + x2, 1)
    return constant_term + srdhm(constant_term, x + poly)


def exp_on_negative_values(a, integer_bits: int):
    """gemmlowp exp_on_negative_values: exp of a Q(integer_bits) value <= 0, in Q0.31."""
    frac_bits = 31 - integer_bits
    quarter = 1 << (frac_bits - 2)
    a = np.asarray(a, np.int64)
    shifted = (a & (quarter - 1)) - quarter
    result = _exp_on_interval(saturating_shift_left(shifted, integer_bits)
                              if integer_bits else shifted)
    remainder = shifted - a
    barrel = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
              (2, 39332535), (3, 720401), (4, 242))
    for exponent, multiplier in barrel:
        if integer_bits > exponent:
            bit = (remainder & (1 << (frac_bits + exponent))) != 0
            result = np.where(bit, srdhm(result, multiplier), result)
    if integer_bits > 5:
        clamp = -(1 << (36 - integer_bits))
        result = np.where(a < clamp, 0, result)
    return np.where(a == 0, INT32_MAX, result)


def one_over_one_plus_x_for_x_in_0_1(a):
    """gemmlowp: 1 / (1 + a) for a Q0.31 value in [0, 1), by Newton-Raphson, in Q0.31."""
    a = np.asarray(a, np.int64)
    s = a + INT32_MAX
    half_denominator = np.where(s >= 0, (s + 1) // 2, -((-s + 1) // 2))  # RoundingHalfSum
    x = 1515870810 + srdhm(half_denominator, -1010580540)
    for _ in range(3):
        one_minus = (1 << 29) - srdhm(half_denominator, x)
        x = x + saturating_shift_left(srdhm(x, one_minus), 2)
    return saturating_shift_left(x, 1)


def _reciprocal(total):
    """GetReciprocal(sum, 12): (Q0.31 scale, num_bits_over_unit) per row."""
    total = np.asarray(total, np.int64)
    headroom_plus_one = 32 - np.frexp(np.maximum(total, 1))[1].astype(np.int64)  # clz
    bits_over_unit = ACCUMULATION_INTEGER_BITS - headroom_plus_one
    shifted_minus_one = ((total << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31)
    return one_over_one_plus_x_for_x_in_0_1(shifted_minus_one), bits_over_unit


@register("SOFTMAX", "int8", "uint8")
def softmax(node):
    node.expect_inputs(1)
    x = node.input(0)
    key, out_key = x.type_name, node.outputs[0].type_name
    if out_key not in (key, "int16"):
        raise node.fail(f"output is {out_key}; expected {key} or int16")
    if len(x.shape) < 1:
        raise node.fail("the input must have at least one dimension")
    node.outputs[0].shape = tuple(x.shape)
    s_in, _ = quant_params(node, 0)
    s_out, z_out = quant_params(node, 0, output=True)
    if key == "int8" and out_key == "int8" and (z_out != -128 or abs(s_out - 1 / 256) >
                                                 0.001 / 256):
        raise node.fail(f"int8 output needs scale 1/256 and zero point -128, got {s_out:g}, "
                        f"{z_out}")
    beta = float(f32(getattr(node.options, "beta", 1.0)))
    # PreprocessSoftmaxScaling and CalculateInputRadius (double rounding build).
    real = min(beta * float(s_in) * (1 << (31 - SCALED_DIFF_INTEGER_BITS)), (1 << 31) - 1.0)
    multiplier, left_shift = quantize_multiplier(real)
    radius = int(np.floor(((1 << SCALED_DIFF_INTEGER_BITS) - 1)
                          * float(1 << (31 - SCALED_DIFF_INTEGER_BITS)) / float(1 << left_shift)))
    diff_min = -radius

    # Per possible difference to the row max (0, -1, ..., -255): exp in Q0.31, 0 when excluded.
    diffs = -np.arange(256, dtype=np.int64)
    scaled = srdhm(diffs * (1 << left_shift), multiplier)
    exps = np.where(diffs >= diff_min, exp_on_negative_values(scaled, SCALED_DIFF_INTEGER_BITS), 0)
    rescaled = rdbpot(exps, ACCUMULATION_INTEGER_BITS)     # Rescale<12>: Q0.31 -> Q12.19
    out_bits = 16 if out_key == "int16" else 8
    out_lo, out_hi = TYPE_RANGE[out_key]
    shape = tuple(x.shape)
    depth = shape[-1]
    rows = int(np.prod(shape[:-1], dtype=np.int64))

    def run(x, out):
        v = x.reshape(rows, depth).astype(np.int16)
        d = v.max(axis=1, keepdims=True) - v                       # 0 .. 255
        total = rescaled[d].sum(axis=1)
        scale, bits_over_unit = _reciprocal(total)
        exponent = (bits_over_unit + 31 - out_bits)[:, None]
        y = rdbpot(srdhm(scale[:, None], exps[d]), exponent) + out_lo
        np.copyto(out.reshape(rows, depth), np.clip(y, out_lo, out_hi), casting="unsafe")

    if rows > 4:
        return run
    # Few rows (a classifier's output): per row, the output for each of the 256 differences
    # as one small table, the reciprocal in Python integers.
    # The scale is positive and exps >= 0, so SRDHM never saturates and RoundingDivideByPOT
    # (by at least 15 bits: the row max alone sums to 2^19) rounds a non-negative value.
    diffs = np.empty((rows, depth), np.int16)
    index = diffs.view(np.uint16)
    table = np.empty(exps.shape, np.int64)
    table_out = np.empty(exps.shape, node.outputs[0].dtype)

    def run_rows(x, out):
        v = x.reshape(rows, depth)
        o = out.reshape(rows, depth)
        for r in range(rows):
            np.subtract(v[r].max(), v[r], out=diffs[r], dtype=np.int16)
            total = int(np.take(rescaled, index[r]).sum())
            scale, bits_over_unit = _reciprocal_scalar(total)
            shift = bits_over_unit + 31 - out_bits
            np.multiply(exps, scale, out=table)
            np.add(table, 1 << 30, out=table)
            np.right_shift(table, 31, out=table)
            np.add(table, (1 << (shift - 1)) + (out_lo << shift), out=table)
            np.right_shift(table, shift, out=table)
            clip_(table, out_lo, out_hi)
            np.copyto(table_out, table, casting="unsafe")
            np.take(table_out, index[r], out=o[r])
    return run_rows


def _srdhm_scalar(a: int, b: int) -> int:
    if a == b == -(1 << 31):
        return INT32_MAX
    return (a * b + (1 << 30)) >> 31


def _shift_left_scalar(x: int, exponent: int) -> int:
    threshold = (1 << (31 - exponent)) - 1
    return INT32_MAX if x > threshold else -(1 << 31) if x < -threshold else x << exponent


def _reciprocal_scalar(total: int) -> tuple:
    """_reciprocal for one row, in Python integers."""
    headroom_plus_one = 32 - max(total, 1).bit_length()          # clz
    bits_over_unit = ACCUMULATION_INTEGER_BITS - headroom_plus_one
    a = ((total << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31)
    s = a + INT32_MAX
    half_denominator = (s + 1) // 2 if s >= 0 else -((-s + 1) // 2)
    x = 1515870810 + _srdhm_scalar(half_denominator, -1010580540)
    for _ in range(3):
        one_minus = (1 << 29) - _srdhm_scalar(half_denominator, x)
        x = x + _shift_left_scalar(_srdhm_scalar(x, one_minus), 2)
    return _shift_left_scalar(x, 1), bits_over_unit
