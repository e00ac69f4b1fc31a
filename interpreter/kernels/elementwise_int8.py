"""ADD, SUB, MUL, MAXIMUM, MINIMUM on int8 / uint8, bit-exact to TFLite's reference kernels.

An 8-bit binary op has only 65536 input pairs, so prepare evaluates TFLite's integer arithmetic
(with its fused activation) on all of them, and run is one table lookup per output element.
ADD and SUB rescale both inputs to a common scale with 20 bits of headroom (left_shift = 20),
sum, then rescale to the output (add.cc, sub.cc); MUL multiplies the zero-point-corrected values
and rescales once, with a multiplier computed in float32 (mul.cc).

Under the default resolver (not BUILTIN_REF) ADD and SUB run in float32 instead, a few
vectorized passes cheaper than the table's gather: both the table and floor(x ra + y rb + c)
round nearly the same real value, and prepare checks the float arithmetic on all 65536 pairs
against the table (at most 1 apart, as LiteRT's optimized kernels), keeping the table otherwise.
"""
from __future__ import annotations

import numpy as np

from .common import activation_code, broadcast_shape, clip
from .elementwise import binary
from .fixed_point import f32, mbqm, quantize_multiplier, rdbpot, srdhm, wrap32
from .int8_stage import requantized
from .lut import all_values, pair_lookup, pair_table
from .quant_params import activation_range, quant_params
from .registry import register
from .requantize import exact_rounding
from .steps import call, calls_step

LEFT_SHIFT = 20  # 8-bit ADD/SUB headroom


def _smaller_than_one(real: float, node) -> tuple:
    m, s = quantize_multiplier(real)
    if not 0.0 < real < 1.0 or s > 0:
        raise node.fail(f"rescaling multiplier {real:g} must lie in (0, 1)")
    return m, s


def _mul_smaller(x, m, s):
    """MultiplyByQuantizedMultiplierSmallerThanOneExp: RDBPOT(SRDHM(x, m), -s)."""
    if s <= 0:
        return rdbpot(srdhm(x, m), -s)
    return _rdbpot_negative(srdhm(x, m), -s)


def _rdbpot_negative(x, exponent: int):
    """RoundingDivideByPOT called with a negative exponent, as SUB does when its output
    multiplier exceeds 1: undefined in C; x86-64 masks shift counts (to 6 bits for the int64
    mask, 5 bits for the int32 shift), which is what LiteRT's x86 build computes."""
    mask = wrap32((1 << (exponent & 63)) - 1)
    x = np.asarray(x, np.int64)
    threshold = (mask >> 1) + (x < 0)
    return (x >> (exponent & 31)) + ((x & mask) > threshold)


def prepare_integer_binary(node):
    node.expect_inputs(2)
    a, b = node.input(0), node.input(1)
    key = a.type_name
    if b.type_name != key or node.outputs[0].type_name != key:
        raise node.fail(f"inputs and output must all be {key}, got {b.type_name} and "
                        f"{node.outputs[0].type_name}")
    shape = broadcast_shape(node, a.shape, b.shape)
    node.outputs[0].shape = shape
    return key, shape


def _add_sub(sign: int):
    def prepare(node):
        key, shape = prepare_integer_binary(node)
        s1, z1 = quant_params(node, 0)
        s2, z2 = quant_params(node, 1)
        so, zo = quant_params(node, 0, output=True)
        twice_max = 2.0 * float(max(f32(s1), f32(s2)))
        m1, sh1 = _smaller_than_one(float(s1) / twice_max, node)
        m2, sh2 = _smaller_than_one(float(s2) / twice_max, node)
        real_out = twice_max / float(f32(1 << LEFT_SHIFT) * f32(so))
        mo, sho = quantize_multiplier(real_out)
        if sign > 0 and sho > 0:
            raise node.fail(f"output rescaling multiplier {real_out:g} must be below 1")
        lo, hi = activation_range(activation_code(node.options), node.outputs[0], node)

        def f(x, y):
            a = _mul_smaller((x - z1) << LEFT_SHIFT, m1, sh1)
            b = _mul_smaller((y - z2) << LEFT_SHIFT, m2, sh2)
            raw = a + b if sign > 0 else a - b
            # SUB allows an output multiplier above 1 (QuantizeMultiplierGreaterThanOne).
            out = _mul_smaller(raw, mo, sho)
            return np.clip(out + zo, lo, hi)

        table = pair_table(key, key, f, np.dtype(key))
        if not exact_rounding(node):
            ra = f32(s1) / f32(so)
            rb = f32(sign * f32(s2) / f32(so))
            run = _float_add(key, shape, node.input(0).shape, node.input(1).shape, ra, rb,
                             zo - z1 * float(ra) - z2 * float(rb), lo, hi, table)
            if run is not None:
                return run
        return pair_lookup(table, shape)
    return prepare


def _float_add(key, shape, a_shape, b_shape, ra, rb, c: float, lo: int, hi: int, table):
    """run(a, b, out) = clip(floor(a ra + b rb + c + 1/2)) in float32 passes (lifted by 128
    for int8, so that the cast truncates a non-negative value: a floor), or None where that
    differs from `table` by more than 1 for some pair of values."""
    lift = 128 if key == "int8" else 0
    offset = np.float32(c + 0.5 + lift)
    bounds = np.float32(lo + lift), np.float32(hi + lift + 0.5)
    lift8 = np.uint8(lift)

    def compute(a, b, fa, fb, s, raw):
        np.multiply(a, ra, out=fa, dtype=np.float32)
        np.multiply(b, rb, out=fb, dtype=np.float32)
        np.add(fa, fb, out=s)
        np.add(s, offset, out=s)
        clip(s, *bounds, out=raw, casting="unsafe")
        if lift:
            np.bitwise_xor(raw, lift8, out=raw)

    values = all_values(key)
    pairs = np.empty((256, 256), np.dtype(key))
    compute(values[:, None].astype(key), values[None, :].astype(key),
            np.empty((256, 1), np.float32), np.empty((1, 256), np.float32),
            np.empty((256, 256), np.float32), pairs.view(np.uint8))
    if np.abs(pairs.reshape(-1).astype(np.int64) - table).max() > 1:
        return None
    same_a = tuple(a_shape) == tuple(shape)
    fa = np.empty(a_shape, np.float32)
    fb = np.empty(b_shape, np.float32)
    s = fa if same_a else np.empty(shape, np.float32)

    def run(a, b, out):
        compute(a, b, fa, fb, s, out.view(np.uint8))

    def bind(a, b, out):
        """`run` on the plan's fixed arrays (plan.bind_step): 0-d constants made once, the
        clip in place then the cast (cheaper than clip's own cast); the same values. A step
        of calls (steps.calls_step), written into the plan's run_steps."""
        fra, frb, off, lo_, hi_ = (np.array(v, np.float32) for v in (ra, rb, offset) + bounds)
        return calls_step(call((np, "multiply"), a, fra, out=fa, dtype=np.float32),
                          call((np, "multiply"), b, frb, out=fb, dtype=np.float32),
                          call((np, "add"), fa, fb, s), call((np, "add"), s, off, s),
                          *requantized((s, lo_, hi_, out.view(np.uint8),
                                        np.array(lift, np.uint8) if lift else None)))

    run.bind = bind
    return run


register("ADD", "int8", "uint8")(_add_sub(+1))
register("SUB", "int8", "uint8")(_add_sub(-1))


@register("MUL", "int8", "uint8")
def mul(node):
    key, shape = prepare_integer_binary(node)
    s1, z1 = quant_params(node, 0)
    s2, z2 = quant_params(node, 1)
    so, zo = quant_params(node, 0, output=True)
    m, s = quantize_multiplier(float(f32(s1) * f32(s2) / f32(so)))
    lo, hi = activation_range(activation_code(node.options), node.outputs[0], node)

    def f(x, y):
        return np.clip(mbqm((x - z1) * (y - z2), m, s) + zo, lo, hi)

    return pair_lookup(pair_table(key, key, f, np.dtype(key)), shape)


# MAXIMUM / MINIMUM compare the raw values (TFLite does not rescale).
register("MAXIMUM", "int8", "uint8")(binary(np.maximum, check=prepare_integer_binary))
register("MINIMUM", "int8", "uint8")(binary(np.minimum, check=prepare_integer_binary))
