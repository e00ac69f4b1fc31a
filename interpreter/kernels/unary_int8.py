"""Quantized unary math on int8 (uint8 for GELU) and int16, bit-exact to TFLite's reference
kernels: ABS NEG SQRT RSQRT EXP LOG GELU.

Every one is a function of one 8- or 16-bit value, so prepare evaluates TFLite's arithmetic on
all of them and run is one lookup. EXP, LOG, GELU and int16 RSQRT are TFLite's lookup tables
(LUTPopulate: the float32 function sampled at every 8-bit input; for int16, 513 samples with
midpoint-corrected interpolation). ABS requantizes |x - zp| when the scales differ; NEG negates
the raw value; SQRT goes through float32 and truncates; int8 RSQRT is the fixed-point
Newton-Raphson inverse square root (GetInvSqrtQuantizedMultiplierExp). SQRT and RSQRT refuse
negative inputs while running, as TFLite does.
"""
from __future__ import annotations

import math

import numpy as np

from .fixed_point import f32, mbqm, quantize_multiplier
from .fixed_point_math import inv_sqrt_multiplier
from .lut import all_values, lookup, lut_lookup_int16, lut_populate_int16, lut_populate_int8
from .quant_params import TYPE_RANGE, quant_params
from .registry import register

F32 = np.float32


def _unary(node, keys):
    node.expect_inputs(1)
    x, out = node.input(0), node.outputs[0]
    key = x.type_name
    if key not in keys:
        raise node.fail(f"{key} is not supported")
    if out.type_name != key:
        raise node.fail(f"output is {out.type_name}; expected {key}")
    out.shape = tuple(x.shape)
    s_in, z_in = quant_params(node, 0)
    s_out, z_out = quant_params(node, 0, output=True)
    if key == "int16" and (z_in or z_out):
        raise node.fail("int16 input and output need zero point 0")
    return key, s_in, z_in, s_out, z_out


def _table(key, values):
    return lookup(np.clip(values, *TYPE_RANGE[key]).astype(key))


def _float_fn(fn):
    """A float32 math function as glibc's (computed in double, rounded once)."""
    return lambda v: np.asarray(fn(np.asarray(v, np.float64)), np.float64).astype(F32)


def _lut(node, key, s_in, z_in, s_out, z_out, transform):
    """TFLite's LUT of a float32 transform (array in, array out) for an int8/uint8/int16 input."""
    if key != "int16":
        return lookup(lut_populate_int8(node, key, transform))
    lut = lut_populate_int16(s_in, z_in, s_out, z_out,
                             lambda v: F32(transform(np.array([v], F32))[0]), F32)
    return lookup(lut_lookup_int16(all_values("int16"), lut).astype(np.int16))


@register("EXP", "int8", "int16")
def exp(node):
    key, *q = _unary(node, ("int8", "int16"))
    return _lut(node, key, *q, _float_fn(np.exp))


@register("LOG", "int8", "int16")
def log(node):
    key, s_in, z_in, s_out, z_out = _unary(node, ("int8", "int16"))
    output_min = F32(TYPE_RANGE[key][0] - z_out) * F32(s_out)
    log32 = _float_fn(np.log)

    def transform(v):
        return np.where(v <= 0, output_min, log32(np.maximum(v, F32(1e-30)))).astype(F32)
    return _lut(node, key, s_in, z_in, s_out, z_out, transform)


SQRT1_2 = F32(-math.sqrt(0.5))
SQRT_2_OVER_PI = F32(2.0 / math.sqrt(math.pi) * math.sqrt(0.5))
_erfc32 = _float_fn(np.vectorize(math.erfc))
_tanh32 = _float_fn(np.tanh)


def _gelu(v):
    """GeluTransform: 0.5 x erfc(-x / sqrt 2), in float32."""
    return (F32(0.5) * v * _erfc32(v * SQRT1_2)).astype(F32)


def _gelu_approximate(v):
    """GeluTransformApproximate: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in float32."""
    inner = SQRT_2_OVER_PI * (v + F32(0.044715) * v * v * v)
    return (F32(0.5) * v * (F32(1) + _tanh32(inner.astype(F32)))).astype(F32)


@register("GELU", "int8", "uint8", "int16")
def gelu(node):
    key, *q = _unary(node, ("int8", "uint8", "int16"))
    approximate = bool(getattr(node.options, "approximate", False))
    return _lut(node, key, *q, _gelu_approximate if approximate else _gelu)


@register("NEG", "int8", "int16")
def neg(node):
    node.expect_inputs(1)
    if node.outputs[0].type_name != node.input(0).type_name:
        raise node.fail(f"output is {node.outputs[0].type_name}; expected "
                        f"{node.input(0).type_name}")
    node.outputs[0].shape = tuple(node.input(0).shape)

    def run(x, out):
        np.negative(x, out=out)    # raw values, wrapping as C's cast does
    return run


@register("ABS", "int8", "int16")
def abs_(node):
    x = node.input(0)
    if x.type_name == "int16" and (x.quantization is None or x.quantization.scale.size == 0):
        node.expect_inputs(1)
        node.outputs[0].shape = tuple(x.shape)

        def raw(x, out):
            np.abs(x, out=out)
        return raw
    key, s_in, z_in, s_out, z_out = _unary(node, ("int8", "int16"))
    value = np.abs(all_values(key) - z_in)
    if f32(s_in) != f32(s_out):
        m, s = quantize_multiplier(float(f32(s_in) / f32(s_out)))
        value = mbqm(value, m, s)
    return _table(key, value + z_out)


def _refusing_below(node, run, key, z_in, strict: bool, what: str):
    """run, preceded by TFLite's check that every input is >= (or >) the zero point."""
    lo = z_in + 1 if strict else z_in
    if lo <= TYPE_RANGE[key][0]:
        return run
    name = node.fail(what)

    def checked(x, out):
        if x.min(initial=lo) < lo:
            raise RuntimeError(str(name))
        run(x, out)
    return checked


@register("SQRT", "int8", "int16")
def sqrt(node):
    key, s_in, z_in, s_out, z_out = _unary(node, ("int8", "int16"))
    dq = F32(s_in) * (all_values(key) - z_in).astype(F32)
    root = np.sqrt(np.maximum(dq, F32(0)))
    value = np.trunc(root / F32(s_out)).astype(np.int64) + z_out
    return _refusing_below(node, _table(key, value), key, z_in, False,
                           "SQRT is only defined for non-negative values")


@register("RSQRT", "int8", "int16")
def rsqrt(node):
    key, s_in, z_in, s_out, z_out = _unary(node, ("int8", "int16"))
    if key == "int16":
        max_out = F32(32767) * F32(s_out)

        def transform(v):
            return np.where(v <= 0, max_out,
                            F32(1) / np.sqrt(np.maximum(v, F32(1e-30)))).astype(F32)
        run = _lut(node, key, s_in, z_in, s_out, z_out, transform)
    else:
        m, s = quantize_multiplier(1.0 / float(np.sqrt(F32(s_in)) * F32(s_out)))
        lo, hi = TYPE_RANGE[key]
        v = all_values(key) - z_in
        inv, inv_shift = inv_sqrt_multiplier(np.maximum(v, 0))
        values = mbqm(mbqm(1, inv, inv_shift + 20), m, s - 20) + z_out
        # 0 stands for the largest output; below 0 is refused while running.
        run = _table(key, np.where(v <= 0, hi, values))
    return _refusing_below(node, run, key, z_in, False,
                           "RSQRT is only defined for positive values")
