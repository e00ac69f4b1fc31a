"""Activations on int8 / uint8, bit-exact to TFLite's reference kernels (activations.cc).

An 8-bit elementwise function has 256 inputs: prepare evaluates TFLite's arithmetic on all of
them and run is one lookup. RELU* requantize with MultiplyByQuantizedMultiplier and clamp
(ReluX); LEAKY_RELU picks the identity or alpha multiplier by sign; HARD_SWISH is reference
hard_swish.h's int16 fixed-point pipeline; LOGISTIC and TANH are the LUT that TFLite itself
populates in Prepare from the float32 function. SOFTMAX is softmax_int8.py's.
"""
from __future__ import annotations

import numpy as np

from .fixed_point import INT32_MAX, f32, mbqm, quantize_multiplier, rdbpot, round_half_away
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
