"""PRELU, SQUARED_DIFFERENCE, DIV and the comparisons (EQUAL NOT_EQUAL LESS LESS_EQUAL GREATER
GREATER_EQUAL) on quantized int8 / uint8 (and int16 where TFLite has them), bit-exact to
TFLite's reference kernels.

8-bit PRELU and SQUARED_DIFFERENCE have 65536 input pairs: prepare evaluates TFLite's arithmetic
on all of them and run is one lookup (lut.pair_lookup). PRELU requantizes x (x >= 0) or
x * alpha (x < 0); SQUARED_DIFFERENCE rescales both inputs to a common scale with 7 bits of
headroom, squares the difference and rescales (squared_difference.cc). DIV multiplies by the
divisor's fixed-point reciprocal and rescales (reference_ops::DivElementwise). Comparisons
rescale each input on its own, value << 8 by its scale's multiplier (comparisons.cc), and
compare: a table per input. On int16 only EQUAL and NOT_EQUAL of quantized inputs rescale;
LESS, LESS_EQUAL, GREATER and GREATER_EQUAL compare the raw values whatever the scales, as
TFLite does. 8-bit DIV is a pair table too; int16 DIV computes while running.
"""
from __future__ import annotations

import numpy as np

from .common import activation_code, broadcast_shape
from .elementwise_int8 import _mul_smaller
from .elementwise_int8 import _rdbpot_negative
from .fixed_point import f32, mbqm, quantize_multiplier, srdhm, wrap32
from .fixed_point_math import clz32, one_over_one_plus_x_for_x_in_0_1
from .lut import all_values, pair_lookup, pair_table
from .quant_params import TYPE_RANGE, activation_range, quant_params
from .registry import register


def _binary_shape(node, want_out: str) -> tuple:
    node.expect_inputs(2)
    a, b = node.input(0), node.input(1)
    if node.outputs[0].type_name != want_out:
        raise node.fail(f"output is {node.outputs[0].type_name}; expected {want_out}")
    shape = broadcast_shape(node, a.shape, b.shape)
    node.outputs[0].shape = shape
    return a.type_name, b.type_name, shape


# -- PRELU -------------------------------------------------------------------------------------

@register("PRELU", "int8", "uint8", "int16")
def prelu(node):
    x_key = node.input(0).type_name
    key, alpha_key, shape = _binary_shape(node, x_key)
    want_alpha = "int8" if key == "int16" else key
    if alpha_key != want_alpha:
        raise node.fail(f"alpha is {alpha_key}; {key} inputs need {want_alpha} alpha")
    if shape != tuple(node.input(0).shape):
        raise node.fail(f"alpha {list(node.input(1).shape)} must broadcast to the input "
                        f"{list(node.input(0).shape)}")
    s_in, z_in = quant_params(node, 0)
    s_a, z_a = quant_params(node, 1)
    s_out, z_out = quant_params(node, 0, output=True)
    m1, e1 = quantize_multiplier(float(f32(s_in) / f32(s_out)))
    m2, e2 = quantize_multiplier(float(f32(s_in) * f32(s_a) / f32(s_out)))
    lo, hi = TYPE_RANGE[key]

    def f(x, a):
        v = x - z_in
        y = np.where(v >= 0, mbqm(v, m1, e1), mbqm(v * (a - z_a), m2, e2))
        return np.clip(y + z_out, lo, hi)

    if key != "int16":
        return pair_lookup(pair_table(key, key, f, np.dtype(key)), shape)

    positive = np.clip(mbqm(all_values("int16") - z_in, m1, e1) + z_out, lo, hi)

    def run(x, alpha, out):
        v = x.astype(np.int64) - z_in
        negative = np.clip(mbqm(v * (alpha.astype(np.int64) - z_a), m2, e2) + z_out, lo, hi)
        np.copyto(out, np.where(v >= 0, positive[x.view(np.uint16)], negative),
                  casting="unsafe")
    return run


# -- SQUARED_DIFFERENCE ------------------------------------------------------------------------

@register("SQUARED_DIFFERENCE", "int8")
def squared_difference(node):
    _, b_key, shape = _binary_shape(node, "int8")
    if b_key != "int8":
        raise node.fail(f"inputs must both be int8, got int8 and {b_key}")
    s1, z1 = quant_params(node, 0)
    s2, z2 = quant_params(node, 1)
    so, zo = quant_params(node, 0, output=True)
    left_shift = 7
    twice_max = 2.0 * float(max(f32(s1), f32(s2)))
    real_out = twice_max * twice_max / float(f32(1 << (2 * left_shift)) * f32(so))
    if not real_out < 1.0:
        raise node.fail(f"output rescaling multiplier {real_out:g} must be below 1")
    m1, e1 = quantize_multiplier(float(s1) / twice_max)
    m2, e2 = quantize_multiplier(float(s2) / twice_max)
    mo, eo = quantize_multiplier(real_out)

    def f(x, y):
        d = _mul_smaller((x - z1) << left_shift, m1, e1) - \
            _mul_smaller((y - z2) << left_shift, m2, e2)
        return np.clip(_mul_smaller(d * d, mo, eo) + zo, -128, 127)

    return pair_lookup(pair_table("int8", "int8", f, np.int8), shape)


# -- DIV ---------------------------------------------------------------------------------------

def _divide(a, b, multiplier: int, shift: int):
    """DivElementwise on zero-point-corrected values (b != 0), before the output offset."""
    a, b = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
    a = np.where(b < 0, -a, a)
    b = np.abs(b)
    headroom_plus_one = clz32(b)                                   # GetReciprocal(b, 31)
    recip_shift = 31 - headroom_plus_one
    inverse = one_over_one_plus_x_for_x_in_0_1(
        wrap32(((b << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31)))
    headroom = clz32(a ^ (a >> 63)) - 1                            # CountLeadingSignBits
    quotient = srdhm(wrap32(a << headroom), inverse)
    total = shift - recip_shift - headroom
    scaled = srdhm(quotient, multiplier)
    # MultiplyByQuantizedMultiplierSmallerThanOneExp. A zero dividend has 31 bits of headroom
    # and can shift right by more than 31 (or, with an output multiplier above 1, left): the
    # int32 RoundingDivideByPOT then computes what x86's masked shift counts give.
    return _rdbpot_negative(scaled, -total)


@register("DIV", "int8", "uint8", "int16")
def div(node):
    key, b_key, shape = _binary_shape(node, node.input(0).type_name)
    if b_key != key:
        raise node.fail(f"inputs must have the same type, got {key} and {b_key}")
    s1, z1 = quant_params(node, 0)
    s2, z2 = quant_params(node, 1)
    so, zo = quant_params(node, 0, output=True)
    m, e = quantize_multiplier(float(f32(s1) / (f32(s2) * f32(so))))
    lo, hi = activation_range(activation_code(node.options), node.outputs[0], node)
    refused = node.fail(f"division by zero (an input 1 value equal to its zero point {z2})")

    def f(x, y):
        safe = np.where(y == z2, z2 + 1, y)
        return np.clip(_divide(x - z1, safe - z2, m, e) + zo, lo, hi)

    if key != "int16":
        table = pair_lookup(pair_table(key, key, f, np.dtype(key)), shape)

        def run(a, b, out):
            if np.any(b == z2):
                raise RuntimeError(str(refused))
            table(a, b, out)
        return run

    def run16(a, b, out):
        if np.any(b == z2):
            raise RuntimeError(str(refused))
        np.copyto(out, f(a.astype(np.int64), b.astype(np.int64)), casting="unsafe")
    return run16


# -- comparisons -------------------------------------------------------------------------------

def _rescaling_table(node, k: int, key: str) -> np.ndarray:
    """Every value of input k rescaled as ComparisonWithScaling does: ((v - zp) << 8) times
    its scale's multiplier (SmallerThanOneExp, or GreaterThanOne's for scales >= 1)."""
    scale, zp = quant_params(node, k)
    if scale <= 0:
        raise node.fail(f"input {k} needs a positive scale, got {scale:g}")
    m, e = quantize_multiplier(float(scale))
    values = all_values(key)
    return _mul_smaller((values - zp) << 8, m, e)


def _comparison(ufunc, int16_rescaled: bool):
    def prepare(node):
        key, b_key, shape = _binary_shape(node, "bool")
        if b_key != key:
            raise node.fail(f"inputs must have the same type, got {key} and {b_key}")
        index_type = np.uint16 if key == "int16" else np.uint8
        q = node.input(0).quantization
        if key == "int16" and (not int16_rescaled or q is None or q.scale.size == 0):
            def raw(a, b, out):
                ufunc(a, b, out=out)
            return raw
        table_a, table_b = _rescaling_table(node, 0, key), _rescaling_table(node, 1, key)
        ta = np.empty(node.input(0).shape, np.int64)
        tb = np.empty(node.input(1).shape, np.int64)

        def run(a, b, out):
            np.take(table_a, a.view(index_type), out=ta)
            np.take(table_b, b.view(index_type), out=tb)
            ufunc(ta, tb, out=out)
        return run
    return prepare


for _op, _ufunc in (("EQUAL", np.equal), ("NOT_EQUAL", np.not_equal), ("LESS", np.less),
                    ("LESS_EQUAL", np.less_equal), ("GREATER", np.greater),
                    ("GREATER_EQUAL", np.greater_equal)):
    register(_op, "int8", "uint8", "int16")(_comparison(_ufunc, _op in ("EQUAL", "NOT_EQUAL")))
