"""SOFTMAX, LOG_SOFTMAX and L2_NORMALIZATION on int8 / uint8, bit-exact to TFLite's reference
kernels: each row along the last axis normalized in gemmlowp's fixed point.

SOFTMAX is reference_ops::Softmax: the fixed-point exp of the (beta-scaled) difference to the row
max, a fixed-point reciprocal of the sum, one rounding shift (int8 or int16 outputs). LOG_SOFTMAX:
the same exps, their sum's fixed-point log, subtracted and rescaled. L2_NORMALIZATION:
x - zp times the fixed-point 1/sqrt of the row's sum of squares, in 1/128 units. A row's
differences to its max take 256 values: their exps are a table made at prepare.
"""
from __future__ import annotations

import numpy as np

from .common import activation_code, clip_
from .fixed_point import INT32_MAX, INT32_MIN, f32, mbqm, quantize_multiplier, rdbpot, srdhm, \
    wrap32
from .fixed_point_math import exp_on_negative_values, get_reciprocal, inv_sqrt_multiplier, \
    log_x_for_x_greater_than_or_equal_to_1
from .quant_params import TYPE_RANGE, quant_params
from .registry import register

SCALED_DIFF_BITS, ACCUM_BITS, OUTPUT_BITS = 5, 12, 4   # log-softmax's output is Q4.27


def _row_op(node, also: str | None = None) -> tuple:
    """One input of rank >= 1 normalized along its last axis into an output of its type (or
    `also`) and shape; returns (x, type, rows, depth)."""
    node.expect_inputs(1)
    x = node.input(0)
    key, out_key = x.type_name, node.outputs[0].type_name
    if out_key not in (key, also):
        raise node.fail(f"output is {out_key}; expected {key}" + (f" or {also}" if also else ""))
    if len(x.shape) < 1:
        raise node.fail("the input must have at least one dimension")
    node.outputs[0].shape = tuple(x.shape)
    return x, key, int(np.prod(x.shape[:-1], dtype=np.int64)), x.shape[-1]


def _exp_of_differences(real: float) -> tuple:
    """PreprocessSoftmaxScaling for the real multiplier of a difference (beta * input scale),
    CalculateInputRadius, and per difference to the row max (0, -1, ..., -255) its scaled value
    (Q5.26) and exp (Q0.31, 0 past the radius). Returns (multiplier, left_shift, diff_min,
    scaled, exps)."""
    real = min(real * (1 << (31 - SCALED_DIFF_BITS)), (1 << 31) - 1.0)
    multiplier, left_shift = quantize_multiplier(real)
    diff_min = -int(np.floor(((1 << SCALED_DIFF_BITS) - 1) * float(1 << (31 - SCALED_DIFF_BITS))
                             / 2.0 ** left_shift))
    diffs = -np.arange(256, dtype=np.int64)
    scaled = mbqm(diffs, multiplier, left_shift)
    exps = np.where(diffs >= diff_min, exp_on_negative_values(scaled, SCALED_DIFF_BITS), 0)
    return multiplier, left_shift, diff_min, scaled, exps


# -- SOFTMAX -----------------------------------------------------------------------------------

@register("SOFTMAX", "int8", "uint8")
def softmax(node):
    x, key, rows, depth = _row_op(node, also="int16")
    out_key = node.outputs[0].type_name
    s_in, _ = quant_params(node, 0)
    s_out, z_out = quant_params(node, 0, output=True)
    if key == "int8" and out_key == "int8" and (z_out != -128 or abs(s_out - 1 / 256) >
                                                 0.001 / 256):
        raise node.fail(f"int8 output needs scale 1/256 and zero point -128, got {s_out:g}, "
                        f"{z_out}")
    beta = float(f32(getattr(node.options, "beta", 1.0)))
    exps = _exp_of_differences(beta * float(s_in))[-1]
    rescaled = rdbpot(exps, ACCUM_BITS)                   # Rescale<12>: Q0.31 -> Q12.19
    out_bits = 16 if out_key == "int16" else 8
    out_lo, out_hi = TYPE_RANGE[out_key]

    def run(x, out):
        v = x.reshape(rows, depth).astype(np.int16)
        d = v.max(axis=1, keepdims=True) - v                       # 0 .. 255
        total = rescaled[d].sum(axis=1)
        scale, bits_over_unit = get_reciprocal(total, ACCUM_BITS)
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
    """get_reciprocal(total, ACCUM_BITS) for one row, in Python integers."""
    headroom_plus_one = 32 - max(total, 1).bit_length()          # clz
    bits_over_unit = ACCUM_BITS - headroom_plus_one
    a = ((total << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31)
    s = a + INT32_MAX
    half_denominator = (s + 1) // 2 if s >= 0 else -((-s + 1) // 2)
    x = 1515870810 + _srdhm_scalar(half_denominator, -1010580540)
    for _ in range(3):
        one_minus = (1 << 29) - _srdhm_scalar(half_denominator, x)
        x = x + _shift_left_scalar(_srdhm_scalar(x, one_minus), 2)
    return _shift_left_scalar(x, 1), bits_over_unit


# -- LOG_SOFTMAX -------------------------------------------------------------------------------

@register("LOG_SOFTMAX", "int8", "uint8")
def log_softmax(node):
    x, key, rows, depth = _row_op(node)
    s_in, _ = quant_params(node, 0)
    s_out, z_out = quant_params(node, 0, output=True)
    lo, hi = TYPE_RANGE[key]
    if s_out != 16.0 / 256 or z_out != hi:
        raise node.fail(f"the output needs scale 16/256 and zero point {hi}, got {s_out:g} "
                        f"and {z_out}")
    # PreprocessLogSoftmaxScalingExp (beta 1).
    if float(s_in) * (1 << (31 - SCALED_DIFF_BITS)) <= 1.0:
        raise node.fail(f"input scale {s_in:g} is too small")
    multiplier, left_shift, diff_min, scaled, exps = _exp_of_differences(float(s_in))
    reverse_m, reverse_shift = quantize_multiplier((1 << (31 - left_shift)) / float(multiplier))
    exps = rdbpot(exps, ACCUM_BITS)                        # Q12.19
    out_shift = 31 - SCALED_DIFF_BITS - OUTPUT_BITS

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
    x, key, rows, depth = _row_op(node)
    if activation_code(node.options):
        raise node.fail("fused activations are not supported (as in TFLite)")
    _, z_in = quant_params(node, 0)
    s_out, z_out = quant_params(node, 0, output=True)
    want_zp = 0 if key == "int8" else 128
    if s_out != 1.0 / 128 or z_out != want_zp:
        raise node.fail(f"the output needs scale 1/128 and zero point {want_zp}, got {s_out:g} "
                        f"and {z_out}")
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
