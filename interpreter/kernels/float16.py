"""float16 ("half") variants of elementwise ops, computed as LiteRT computes them.

LiteRT keeps float16 tensors in half precision and, per element, widens to float, computes
and rounds back: binary arithmetic (ADD, MUL, MAXIMUM, MINIMUM) is numpy's float16 arithmetic,
which rounds the same way; math functions (SIN, COS, TANH, LOGISTIC's exp; ATAN2 in misc.py)
are computed as correctly rounded float32 values (here: in float64, rounded to float32) before
rounding to half. ADD and MUL clamp to the fused activation's range, which without an activation
is the finite half range (an overflow gives +-65504, not inf), as TFLite's
CalculateActivationRange; under the default resolver LiteRT runs them in XNNPACK, whose range
is unbounded above (and below without an activation): an overflow or an inf input gives inf.
"""
from __future__ import annotations

import numpy as np

from .common import activation_code, broadcast_shape, clip_
from .registry import register
from .requantize import exact_rounding

HALF_MAX = float(np.finfo(np.float16).max)
# Fused activation -> clamp bounds; other codes (TANH, SIGN_BIT, ...) clamp like NONE.
_BOUNDS = {1: (0.0, HALF_MAX), 2: (-1.0, 1.0), 3: (0.0, 6.0)}


def _binary_shapes(node):
    node.expect_inputs(2)
    a, b = node.input(0), node.input(1)
    if a.dtype != b.dtype:
        raise node.fail(f"input types differ: {a.type_name} and {b.type_name}")
    node.outputs[0].shape = broadcast_shape(node, a.shape, b.shape)


def _arithmetic(ufunc):
    def prepare(node):
        _binary_shapes(node)
        code = activation_code(node.options)
        lo, hi = _BOUNDS.get(code, (-HALF_MAX, HALF_MAX))
        if code in (0, 1, 2, 3) and not exact_rounding(node):
            return _xnnpack_arithmetic(ufunc, -np.inf if code == 0 else lo,
                                       np.inf if hi == HALF_MAX else hi)

        def run(x, y, out):
            ufunc(x, y, out=out)
            clip_(out, lo, hi)
        return run
    return prepare


def _xnnpack_arithmetic(ufunc, lo, hi):
    """ADD / MUL under the default resolver, as XNNPACK (which takes the activations NONE,
    RELU, RELU_N1_TO_1 and RELU6) computes them: half's range is +-inf, and a clamp takes NaN
    to its lower bound (max(x, lo) as SSE's maxps orders it, then min(x, hi))."""
    def run(x, y, out):
        ufunc(x, y, out=out)
        if lo != -np.inf:
            np.fmax(out, lo, out=out)
        if hi != np.inf:
            np.minimum(out, hi, out=out)
    return run


def _elementwise(ufunc):
    def prepare(node):
        _binary_shapes(node)
        return lambda x, y, out: ufunc(x, y, out=out)
    return prepare


register("ADD", "float16")(_arithmetic(np.add))
register("MUL", "float16")(_arithmetic(np.multiply))
def nan_as_litert(ufunc):
    """MAXIMUM / MINIMUM of floats as TFLite's el1 > el2 ? el1 : el2 (< for MINIMUM): a NaN
    first operand gives the second, a NaN second operand gives NaN; numpy's propagate both."""
    def apply(x, y, out):
        ufunc(x, y, out=out)
        if out.size and _has_nan(out):
            np.copyto(out, y, where=np.isnan(x))
    return apply


def _has_nan(a: np.ndarray) -> bool:
    """Whether `a` holds a NaN; half by its bits (numpy's half reductions are scalar loops:
    ~10 us vs ~900 us on 150k values)."""
    if a.dtype == np.float16:
        return bool((a.view(np.uint16) & 0x7FFF).max() > 0x7C00)
    return bool(np.isnan(np.maximum.reduce(a, axis=None)))


register("MAXIMUM", "float16")(_elementwise(nan_as_litert(np.maximum)))
register("MINIMUM", "float16")(_elementwise(nan_as_litert(np.minimum)))
for _op, _ufunc in (("LESS", np.less), ("LESS_EQUAL", np.less_equal), ("GREATER", np.greater),
                    ("GREATER_EQUAL", np.greater_equal), ("EQUAL", np.equal),
                    ("NOT_EQUAL", np.not_equal)):
    register(_op, "float16")(_elementwise(_ufunc))


def _unary(compute):
    """A kernel writing `compute(x)` (any float type) into the half output."""
    def prepare(node):
        node.expect_inputs(1)
        node.outputs[0].shape = tuple(node.input(0).shape)

        def run(x, out):
            out[...] = compute(x)
        return run
    return prepare


def _via_float(f):
    """f in float64 rounded to float32: a correctly rounded float function, then half."""
    return lambda x: f(x.astype(np.float64)).astype(np.float32)


def _logistic(x):
    """TFLite's reference Logistic: 1 past 16.619..., exp(x) below -9, else 1 / (1 + exp(-x)),
    in float32."""
    x32 = x.astype(np.float32)
    x64 = x.astype(np.float64)
    e = np.exp(-x64).astype(np.float32)
    mid = np.float32(1) / (np.float32(1) + e)
    low = np.exp(x64).astype(np.float32)
    return np.where(x32 > np.float32(16.619047164916992), np.float32(1),
                    np.where(x32 < np.float32(-9), low, mid))


register("NEG", "float16")(_unary(np.negative))
register("FLOOR", "float16")(_unary(np.floor))
register("SIN", "float16")(_unary(_via_float(np.sin)))
register("COS", "float16")(_unary(_via_float(np.cos)))
register("TANH", "float16")(_unary(_via_float(np.tanh)))
register("LOGISTIC", "float16")(_unary(_logistic))




@register("SOFTMAX", "float16")
def softmax(node):
    """TFLite's reference Softmax on half: exp((x - max) * beta) in float, each rounded to half
    as it is stored, a float sum of the unrounded values in order, then stored / sum."""
    node.expect_inputs(1)
    x = node.input(0)
    if len(x.shape) < 1:
        raise node.fail("input must have rank >= 1")
    node.outputs[0].shape = tuple(x.shape)
    beta = np.float32(node.options.beta)

    def run(a, out):
        a32 = a.astype(np.float32)
        shifted = (a32 - a32.max(axis=-1, keepdims=True)) * beta
        e = np.exp(shifted.astype(np.float64)).astype(np.float32)
        total = np.cumsum(e, axis=-1, dtype=np.float32)[..., -1:]
        out[...] = e.astype(np.float16).astype(np.float32) / total
    return run
