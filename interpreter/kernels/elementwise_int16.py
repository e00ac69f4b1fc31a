"""ADD, SUB, MUL, MAXIMUM and MINIMUM on int16 (zero points 0), bit-exact to TFLite's reference
kernels.

ADD and SUB take one of two paths, as add.cc / sub.cc choose them: with power-of-two scales
(and the options' pot_scale_int16, true by default) the inputs are aligned by rounding right
shifts and added or subtracted with saturation; otherwise each input is rescaled to a common
scale with 15 bits of headroom (left_shift = 15), and the sum rescaled to the output, as the
8-bit kernels do. Each input's rescaling depends on its value only: a 65536-entry table.
MUL multiplies the values and rescales once (MultiplyByQuantizedMultiplier). MAXIMUM and
MINIMUM compare the raw values, as the 8-bit kernels do.
"""
from __future__ import annotations

import math

import numpy as np

from .common import activation_code, broadcast_shape, clip_
from .elementwise import binary
from .elementwise_int8 import _mul_smaller, prepare_integer_binary
from .fixed_point import f32, mbqm, quantize_multiplier, round_half_away
from .lut import all_values
from .quant_params import activation_range, quant_params
from .registry import register

LEFT_SHIFT = 15


def checked_log2(x: float) -> tuple:
    """TFLite's CheckedLog2 in float32: (is a power of two within 1e-3, rounded log2)."""
    log2 = f32(f32(math.log(f32(x))) * f32(1.0 / float(f32(math.log(2.0)))))
    rounded = round_half_away(float(log2))
    return abs(float(log2 - f32(rounded))) < 1e-3, rounded


def rdbpot_(x: np.ndarray, exponent: int, neg: np.ndarray) -> None:
    """x = RoundingDivideByPOT(x, exponent) in place (int64 x; neg: a work array like x)."""
    if exponent <= 0:
        return
    np.less(x, 0, out=neg)
    np.add(x, 1 << (exponent - 1), out=x)
    np.subtract(x, neg, out=x)
    np.right_shift(x, exponent, out=x)


def _prepare(node):
    node.expect_inputs(2)
    a, b = node.input(0), node.input(1)
    if b.type_name != "int16" or node.outputs[0].type_name != "int16":
        raise node.fail(f"inputs and output must all be int16, got {b.type_name} and "
                        f"{node.outputs[0].type_name}")
    shape = broadcast_shape(node, a.shape, b.shape)
    node.outputs[0].shape = shape
    scales = []
    for k in (0, 1):
        s, z = quant_params(node, k)
        if z:
            raise node.fail(f"int16 input {k} needs zero point 0")
        scales.append(s)
    so, zo = quant_params(node, 0, output=True)
    if zo:
        raise node.fail("the int16 output needs zero point 0")
    lo, hi = activation_range(activation_code(node.options), node.outputs[0], node)
    return shape, scales[0], scales[1], so, lo, hi


def _pot_shifts(node, s1, s2, so):
    """The input shifts of the power-of-two path, or None when it does not apply."""
    if not getattr(node.options, "pot_scale_int16", True):
        return None
    logs = [checked_log2(s) for s in (s1, s2, so)]
    if not all(ok for ok, _ in logs):
        return None
    shift1, shift2 = logs[0][1] - logs[2][1], logs[1][1] - logs[2][1]
    if not (shift1 == 0 or shift2 == 0) or shift1 > 0 or shift2 > 0:
        raise node.fail(f"power-of-two scales: only one input may be rescaled, and only "
                        f"down (input shifts {shift1}, {shift2})")
    return -shift1, -shift2


def _add_sub(sign: int):
    def prepare(node):
        shape, s1, s2, so, lo, hi = _prepare(node)
        a_shape, b_shape = tuple(node.input(0).shape), tuple(node.input(1).shape)
        pot = _pot_shifts(node, s1, s2, so)
        ta = np.empty(a_shape, np.int64)
        tb = np.empty(b_shape, np.int64)
        acc = np.empty(shape, np.int64)
        if pot is not None:
            if sign > 0 and a_shape != b_shape:
                raise node.fail("int16 ADD with power-of-two scales does not broadcast in "
                                "TFLite (its kernel reads past the smaller input); set "
                                "pot_scale_int16 false")
            r1, r2 = pot
            neg_a, neg_b = np.empty(a_shape, np.bool_), np.empty(b_shape, np.bool_)

            def run(a, b, out):
                np.copyto(ta, a)
                np.copyto(tb, b)
                rdbpot_(ta, r1, neg_a)
                rdbpot_(tb, r2, neg_b)
                (np.add if sign > 0 else np.subtract)(ta, tb, out=acc)
                clip_(acc, lo, hi)
                np.copyto(out, acc, casting="unsafe")
            return run

        twice_max = 2.0 * float(max(f32(s1), f32(s2)))
        multipliers = []
        for s in (s1, s2, None):
            real = float(s) / twice_max if s is not None else \
                twice_max / float(f32(1 << LEFT_SHIFT) * f32(so))
            m, e = quantize_multiplier(real)
            if not 0.0 < real < 1.0 and (s is not None or sign > 0):
                raise node.fail(f"rescaling multiplier {real:g} must lie in (0, 1)")
            multipliers.append((m, e))
        (m1, e1), (m2, e2), (mo, eo) = multipliers
        v = all_values("int16") << LEFT_SHIFT
        table_a = _mul_smaller(v, m1, e1)
        table_b = _mul_smaller(v, m2, e2)
        if sign < 0:
            table_b = -table_b
        neg = np.empty(shape, np.bool_)

        def run(a, b, out):
            np.take(table_a, a.view(np.uint16), out=ta)
            np.take(table_b, b.view(np.uint16), out=tb)
            np.add(ta, tb, out=acc)
            if eo <= 0:        # MultiplyByQuantizedMultiplierSmallerThanOneExp
                np.multiply(acc, mo, out=acc)
                np.add(acc, 1 << 30, out=acc)
                np.right_shift(acc, 31, out=acc)
                rdbpot_(acc, -eo, neg)
            else:              # SUB's output multiplier above 1
                acc[...] = _mul_smaller(acc, mo, eo)
            clip_(acc, lo, hi)
            np.copyto(out, acc, casting="unsafe")
        return run
    return prepare


register("ADD", "int16")(_add_sub(+1))
register("SUB", "int16")(_add_sub(-1))


@register("MUL", "int16")
def mul(node):
    shape, s1, s2, so, lo, hi = _prepare(node)
    m, s = quantize_multiplier(float(f32(s1) * f32(s2) / f32(so)))
    acc = np.empty(shape, np.int64)
    neg = np.empty(shape, np.bool_)

    def run(a, b, out):
        np.multiply(a, b, out=acc, dtype=np.int64)
        if s <= 0:
            np.multiply(acc, m, out=acc)
            np.add(acc, 1 << 30, out=acc)
            np.right_shift(acc, 31, out=acc)
            rdbpot_(acc, -s, neg)
        else:
            acc[...] = mbqm(acc, m, s)
        clip_(acc, lo, hi)
        np.copyto(out, acc, casting="unsafe")
    return run


register("MAXIMUM", "int16")(binary(np.maximum, check=prepare_integer_binary))
register("MINIMUM", "int16")(binary(np.minimum, check=prepare_integer_binary))
