"""TFLite's fixed-point arithmetic, bit-exact, in numpy int64.

The facts follow TFLite's reference kernels (LiteRT built without TFLITE_SINGLE_ROUNDING):
`quantize_multiplier` is QuantizeMultiplier (quantization_util.cc), `srdhm` and `rdbpot` are
gemmlowp's SaturatingRoundingDoublingHighMul and RoundingDivideByPOT, `mbqm` is the
double-rounding MultiplyByQuantizedMultiplier (common.cc), `mbqm64` its single-rounding form for
int64 accumulators. Arrays hold int32 values in int64 so that products never overflow.
"""
from __future__ import annotations

import math

import numpy as np

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
EXACT_F32 = 1 << 24  # integers below this are exact in float32 (sums of products stay so)


def exact_float_type(bound: float):
    """float32 when integer sums up to `bound` are exact in it (below 2^24), else float64."""
    return np.float32 if bound < EXACT_F32 else np.float64


# -- scalars: what Prepare functions compute --------------------------------------------------

def round_half_away(x, work=None):
    """C's round(): halves away from zero, exactly (floor(x + 0.5) is not: 0.49999999999999994
    + 0.5 rounds to 1). A Python number gives an int; an array an array of its float type; with
    `work` (buffers of x's shape: float, bool) x itself, rounded in place, for the hot path."""
    if work is not None:
        frac, flag = work
        np.trunc(x, out=frac)
        np.subtract(x, frac, out=x)                 # the fraction, exact
        np.greater_equal(x, 0.5, out=flag)
        np.add(frac, flag, out=frac)
        np.less_equal(x, -0.5, out=flag)
        np.subtract(frac, flag, out=x)
        return x
    if isinstance(x, (int, float)):
        t = math.trunc(x)
        return t + (1 if x - t >= 0.5 else -1 if x - t <= -0.5 else 0)
    t = np.trunc(x)
    frac = x - t  # exact
    return t + (frac >= 0.5) - (frac <= -0.5)


def quantize_multiplier(real: float) -> tuple:
    """(multiplier, shift) with real ~= multiplier * 2^(shift - 31), multiplier in [2^30, 2^31)."""
    real = float(real)
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    fixed = round_half_away(q * (1 << 31))
    if fixed == 1 << 31:
        fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return fixed, shift


def quantize_multipliers(reals) -> tuple:
    """`quantize_multiplier` over an array: (int64 multipliers, int64 shifts)."""
    pairs = [quantize_multiplier(r) for r in np.asarray(reals, np.float64).reshape(-1)]
    return (np.array([p[0] for p in pairs], np.int64), np.array([p[1] for p in pairs], np.int64))


def f32(x) -> np.float32:
    return np.float32(x)


def quantize_f32(value: float, scale: float, zero_point: int) -> int:
    """kernel_util's Quantize: zero_point + roundf(value / scale), in float32."""
    return int(zero_point) + round_half_away(float(f32(value) / f32(scale)))


# -- arrays: exact integer arithmetic on int32 values held in int64 ---------------------------

def srdhm(a, b):
    """SaturatingRoundingDoublingHighMul: round(a * b / 2^31), halves upward.

    gemmlowp adds 2^30 (or 1 - 2^30 for negative products) and divides truncating; both cases
    reduce to one floor shift. The saturating case (a == b == INT32_MIN) is handled."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    r = (a * b + (1 << 30)) >> 31
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, r)


def rdbpot(x, exponent):
    """RoundingDivideByPOT: x / 2^exponent rounded to nearest, halves away from zero."""
    x = np.asarray(x, np.int64)
    e = np.asarray(exponent, np.int64)
    mask = (np.int64(1) << e) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> e) + ((x & mask) > threshold)


def mbqm(x, multiplier, shift):
    """MultiplyByQuantizedMultiplier (double rounding): x * multiplier * 2^(shift - 31)."""
    x = np.asarray(x, np.int64)
    shift = np.asarray(shift, np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    return rdbpot(srdhm(wrap32(x << left), multiplier), right)


def wrap32(x):
    """int32 wrap-around of int64 values (what C's int32 arithmetic leaves)."""
    return ((np.asarray(x, np.int64) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def saturating_shift_left(x, exponent: int):
    """gemmlowp's SaturatingRoundingMultiplyByPOT for a positive exponent (int32)."""
    threshold = (1 << (31 - exponent)) - 1
    x = np.asarray(x, np.int64)
    return np.where(x > threshold, INT32_MAX, np.where(x < -threshold, INT32_MIN, x << exponent))


# -- 64-bit accumulators (16x8 kernels) --------------------------------------------------------

def reduced_multiplier(multiplier):
    """The 16-bit multiplier of MultiplyByQuantizedMultiplier(int64 x, ...): round(m / 2^16),
    saturated at 0x7FFF."""
    m = np.asarray(multiplier, np.int64)
    return np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)


def mbqm64(x, multiplier, shift):
    """MultiplyByQuantizedMultiplier for int64 accumulators (common.cc): one rounding,
    (x * reduced + 2^(14 - shift)) >> (15 - shift), truncated to int32."""
    x = np.asarray(x, np.int64)
    total = 15 - np.asarray(shift, np.int64)
    y = (x * reduced_multiplier(multiplier) + (np.int64(1) << (total - 1))) >> total
    return wrap32(y)
