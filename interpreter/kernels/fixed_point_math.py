"""gemmlowp's and TFLite's fixed-point functions, bit-exact, in numpy int64 (int32 values):
exp of values <= 0, 1 / (1 + x) on [0, 1), the reciprocal of a sum (GetReciprocal), log of
values >= 1, and the multiplier of 1 / sqrt(x) (GetInvSqrtQuantizedMultiplierExp). They serve
the integer SOFTMAX, LOG_SOFTMAX, L2_NORMALIZATION, DIV and RSQRT kernels."""
from __future__ import annotations

import numpy as np

from .fixed_point import INT32_MAX, INT32_MIN, rdbpot, saturating_shift_left, srdhm, wrap32


def clz32(x):
    """CountLeadingZeros of uint32 values (32 for 0)."""
    x = np.asarray(x, np.int64) & 0xFFFFFFFF
    return np.where(x == 0, 32, 32 - np.frexp(x.astype(np.float64))[1].astype(np.int64))


def saturating_add(a, b):
    return np.clip(np.asarray(a, np.int64) + b, INT32_MIN, INT32_MAX)


def rounding_half_sum(a, b):
    s = np.asarray(a, np.int64) + b
    return np.where(s >= 0, (s + 1) // 2, -((-s + 1) // 2))


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
    half_denominator = rounding_half_sum(a, INT32_MAX)
    x = 1515870810 + srdhm(half_denominator, -1010580540)
    for _ in range(3):
        one_minus = (1 << 29) - srdhm(half_denominator, x)
        x = x + saturating_shift_left(srdhm(x, one_minus), 2)
    return saturating_shift_left(x, 1)


def get_reciprocal(x, integer_digits: int) -> tuple:
    """GetReciprocal: 1 / x for int32 x >= 1 in Q`integer_digits`, as (Q0.31 scale,
    num_bits_over_unit) with 1 / x = scale * 2^-num_bits_over_unit."""
    x = np.asarray(x, np.int64)
    headroom_plus_one = clz32(x)
    shifted_minus_one = wrap32(((x << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31))
    return one_over_one_plus_x_for_x_in_0_1(shifted_minus_one), integer_digits - headroom_plus_one


def log_x_for_x_greater_than_or_equal_to_1(x, output_bits: int, input_bits: int):
    """TFLite's fixed-point log (common.h) of a Q(input_bits) value >= 1, in Q(output_bits)."""
    log_2, sqrt_sqrt_half, sqrt_half, quarter = 1488522236, 1805811301, 1518500250, 536870912
    alpha_n, alpha_d, alpha_i, alpha_f = 117049297, 127690142, 1057819769, 638450708
    accum_bits = output_bits + 1
    shifted_quarter = rdbpot(quarter, accum_bits)
    z_a = np.asarray(x, np.int64)
    z_a_headroom_plus_1 = clz32(z_a)
    r_a_tmp = shift_left_each(z_a, z_a_headroom_plus_1 - 1)
    r_a_raw = saturating_shift_left(srdhm(r_a_tmp, sqrt_half), 1)
    z_a_pow_2_adj = saturating_add(
        saturating_shift_left(input_bits - z_a_headroom_plus_1, 31 - accum_bits),
        shifted_quarter)
    z_b = srdhm(z_a, sqrt_half)
    z_b_headroom = clz32(z_b) - 1
    r_b_raw = shift_left_each(z_a, z_b_headroom)
    z_b_pow_2_adj = saturating_add(
        saturating_shift_left(input_bits - z_b_headroom, 31 - accum_bits), -shifted_quarter)
    r = np.minimum(r_a_raw, r_b_raw)
    z_pow_2_adj = np.maximum(z_a_pow_2_adj, z_b_pow_2_adj)
    p = rounding_half_sum(r, sqrt_sqrt_half)
    q = wrap32(2 * wrap32(r - sqrt_sqrt_half))
    common_sq = srdhm(q, q)
    num = wrap32(srdhm(q, r) + srdhm(srdhm(q, common_sq), alpha_n))
    denom_minus_one = wrap32(srdhm(p, wrap32(alpha_i + q + srdhm(alpha_d, common_sq)))
                             + srdhm(alpha_f, q))
    recip_denom = one_over_one_plus_x_for_x_in_0_1(denom_minus_one)
    num_scaled = rdbpot(num, accum_bits)
    total = wrap32(srdhm(z_pow_2_adj, log_2) + srdhm(num_scaled, recip_denom))
    return saturating_shift_left(total, accum_bits - output_bits)


def shift_left_each(x, exponents):
    """SaturatingRoundingMultiplyByPOTParam with a per-element exponent >= 0."""
    out = np.asarray(x, np.int64).copy()
    exponents = np.broadcast_to(exponents, out.shape)
    for e in np.unique(exponents):
        if e > 0:
            sel = exponents == e
            out[sel] = saturating_shift_left(out[sel], int(e))
    return out


def inv_sqrt_multiplier(values) -> tuple:
    """GetInvSqrtQuantizedMultiplierExp(value, reverse_shift=-1) over an array of int32 values
    >= 0: (multipliers, shifts) with 1/sqrt(v) ~= m * 2^(shift - 31), by fixed-point
    Newton-Raphson as TFLite computes it."""
    v = np.asarray(values, np.int64).copy()
    small = v <= 1
    shift = np.full(v.shape, 11, np.int64)
    for _ in range(2):                       # int32 values need at most two divisions by 4
        big = v >= 1 << 29
        v = np.where(big, v // 4, v)
        shift += big
    v = np.maximum(v, 2)
    bits = np.frexp(v.astype(np.float64))[1].astype(np.int64)      # bit length
    pairs = ((32 - bits) - 1) // 2 - 1
    shift -= pairs
    v <<= 2 * pairs
    half_input = rdbpot(v >> 1, 1)
    half_three = (1 << 28) + (1 << 27)
    x = np.full(v.shape, 1 << 28, np.int64)
    for _ in range(5):
        x3 = saturating_shift_left(srdhm(srdhm(x, x), x), 6)
        x = saturating_shift_left(wrap32(srdhm(half_three, x) - srdhm(half_input, x3)), 3)
    x = srdhm(x, 1518500250)
    x = np.where(shift < 0, wrap32(x << np.maximum(-shift, 0)), x)
    shift = np.maximum(shift, 0)
    return np.where(small, INT32_MAX, x), np.where(small, 0, -shift)
