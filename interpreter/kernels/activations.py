"""Activations: the ReLU family, LEAKY_RELU, PRELU, ELU, HARD_SWISH, GELU, LOGISTIC, TANH,
SOFTMAX, LOG_SOFTMAX, L2_NORMALIZATION and CUMSUM (float32; CUMSUM also int32 and int64).

The formulas are the ones of TFLite's float reference kernels, in the same order of operations,
so that float32 results agree to an ulp or so. Scratch arrays are allocated in `prepare`.
"""
from __future__ import annotations

import numpy as np

from .common import broadcast_shape, clip_, fused_activation
from .registry import register

try:  # the clip ufunc, which writes into another array (np.clip's wrapper costs ~3x a call)
    from numpy._core.umath import clip as _clip
except ImportError:  # numpy < 2
    try:
        from numpy.core.umath import clip as _clip
    except ImportError:
        def _clip(x, lo, hi, out):
            return np.clip(x, lo, hi, out=out)

INF = float("inf")


def _same_shape(node):
    node.expect_inputs(1)
    x = node.input(0)
    node.outputs[0].shape = x.shape
    return x


def _clamp(lo, hi):
    def prepare(node):
        _same_shape(node)

        def run(x, out):
            _clip(x, lo, hi, out=out)
        return run
    return prepare


register("RELU", "float32")(_clamp(0.0, INF))
register("RELU6", "float32")(_clamp(0.0, 6.0))
register("RELU_N1_TO_1", "float32")(_clamp(-1.0, 1.0))
register("RELU_0_TO_1", "float32")(_clamp(0.0, 1.0))


@register("LEAKY_RELU", "float32")
def leaky_relu(node):
    """x > 0 ? x : alpha * x."""
    x = _same_shape(node)
    alpha = float(getattr(node.options, "alpha", 0.2))
    multiply = np.multiply
    if 0.0 <= alpha <= 1.0:  # then alpha * x <= x exactly where x > 0: one maximum
        def run(x, out):
            multiply(x, alpha, out=out)
            np.maximum(x, out, out=out)
        return run
    positive = np.empty(x.shape, np.bool_)

    def run(x, out):
        multiply(x, alpha, out=out)
        np.greater(x, 0.0, out=positive)
        np.copyto(out, x, where=positive)
    return run


@register("PRELU", "float32")
def prelu(node):
    """x >= 0 ? x : alpha * x, alpha broadcast against x: min(x, 0) * alpha + max(x, 0)."""
    node.expect_inputs(2)
    x, alpha = node.input(0), node.input(1)
    node.outputs[0].shape = broadcast_shape(node, x.shape, alpha.shape)
    part = np.empty(x.shape, np.float32)

    def run(x, alpha, out):
        _clip(x, -INF, 0.0, out=part)
        np.multiply(part, alpha, out=out)
        _clip(x, 0.0, INF, out=part)
        np.add(out, part, out=out)
    return run


@register("ELU", "float32")
def elu(node):
    """x < 0 ? expm1(x) : x, as expm1(min(x, 0)) + max(x, 0)."""
    x = _same_shape(node)
    part = np.empty(x.shape, np.float32)

    def run(x, out):
        _clip(x, -INF, 0.0, out=out)
        np.expm1(out, out=out)
        _clip(x, 0.0, INF, out=part)
        np.add(out, part, out=out)
    return run


@register("HARD_SWISH", "float32")
def hard_swish(node):
    """x * relu6(x + 3) / 6."""
    _same_shape(node)

    def run(x, out):
        np.add(x, 3.0, out=out)
        clip_(out, 0.0, 6.0)
        np.multiply(out, x, out=out)
        np.divide(out, 6.0, out=out)
    return run


@register("LOGISTIC", "float32")
def logistic(node):
    """1 / (1 + exp(-x)). TFLite's reference returns exp(x) below -9 and 1 above 16.6: the
    difference there is below 2e-8 absolute, so this skips those two passes."""
    _same_shape(node)

    def run(x, out):
        np.negative(x, out=out)
        np.exp(out, out=out)
        np.add(out, 1.0, out=out)
        np.reciprocal(out, out=out)
    return run


@register("TANH", "float32")
def tanh(node):
    _same_shape(node)

    def run(x, out):
        np.tanh(x, out=out)
    return run


# -- GELU --------------------------------------------------------------------------------------

# erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2), z >= 0: the Chebyshev fit of Numerical
# Recipes (erfcc), relative error below 1.2e-7 everywhere. Coefficients from P's t^0 upwards.
_ERFC_P = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
           -1.13520398, 1.48851587, -0.82215223, 0.17087277)
_SQRT_2_OVER_PI = float(np.float32(np.sqrt(2.0 / np.pi)))
_MINUS_SQRT1_2 = float(np.float32(-np.sqrt(0.5)))


class _Erfc:
    """erfc over float32 arrays of one shape, in float32 with preallocated scratch.

    exp(-z^2) is taken as exp(-h^2) * exp(-(z - h)(z + h)) with h = z rounded down to 1/64: h^2
    is exact in float32, so large z keeps full relative accuracy (about 5e-7 in all)."""

    def __init__(self, shape):
        self.a, self.t, self.p, self.h = (np.empty(shape, np.float32) for _ in range(4))
        self.negative = np.empty(shape, np.bool_)

    def __call__(self, z, out):
        a, t, p, h = self.a, self.t, self.p, self.h
        np.less(z, 0.0, out=self.negative)
        np.absolute(z, out=a)
        np.multiply(a, 0.5, out=t)
        t += 1.0
        np.reciprocal(t, out=t)
        p.fill(_ERFC_P[-1])
        for c in _ERFC_P[-2::-1]:
            p *= t
            p += c
        np.multiply(a, 64.0, out=h)
        np.floor(h, out=h)
        h *= 1.0 / 64.0
        np.add(a, h, out=out)
        a -= h
        a *= out
        p -= a                    # P(t) - (z - h)(z + h)
        np.exp(p, out=p)
        np.multiply(h, h, out=h)
        np.negative(h, out=h)
        np.exp(h, out=h)
        np.multiply(t, p, out=out)
        out *= h
        np.subtract(2.0, out, out=out, where=self.negative)  # erfc(-z) = 2 - erfc(z)


@register("GELU", "float32")
def gelu(node):
    """0.5 x erfc(-x / sqrt 2), or with `approximate` 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
    x^3))), as TFLite's reference kernel."""
    x = _same_shape(node)
    z = np.empty(x.shape, np.float32)
    if getattr(node.options, "approximate", False):
        def run(x, out):
            np.multiply(x, 0.044715, out=z)
            np.multiply(z, x, out=z)
            np.multiply(z, x, out=z)
            np.add(z, x, out=z)
            np.multiply(z, _SQRT_2_OVER_PI, out=z)
            np.tanh(z, out=z)
            np.add(z, 1.0, out=z)
            np.multiply(x, 0.5, out=out)
            out *= z
        return run
    erfc = _Erfc(x.shape)
    e = np.empty(x.shape, np.float32)

    def run(x, out):
        np.multiply(x, _MINUS_SQRT1_2, out=z)
        erfc(z, e)
        np.multiply(x, 0.5, out=out)
        out *= e
    return run


# -- along the last axis -----------------------------------------------------------------------

def _last_axis(node):
    x = _same_shape(node)
    if len(x.shape) == 0:
        raise node.fail("the input must have at least one dimension")
    return x, np.empty(x.shape[:-1] + (1,), np.float32)


@register("SOFTMAX", "float32")
def softmax(node):
    """exp((x - max) * beta) / sum, along the last axis."""
    x, row = _last_axis(node)
    beta = float(getattr(node.options, "beta", 1.0))
    maximum, add = np.maximum.reduce, np.add.reduce

    def run(x, out):
        maximum(x, axis=-1, keepdims=True, out=row)
        np.subtract(x, row, out=out)
        if beta != 1.0:
            out *= beta
        np.exp(out, out=out)
        add(out, axis=-1, keepdims=True, out=row)
        np.divide(out, row, out=out)
    return run


@register("LOG_SOFTMAX", "float32")
def log_softmax(node):
    """x - max - log(sum(exp(x - max))), along the last axis."""
    x, row = _last_axis(node)
    row_max = np.empty_like(row)
    maximum, add = np.maximum.reduce, np.add.reduce

    def run(x, out):
        maximum(x, axis=-1, keepdims=True, out=row_max)
        np.subtract(x, row_max, out=out)
        np.exp(out, out=out)
        add(out, axis=-1, keepdims=True, out=row)
        np.log(row, out=row)
        np.subtract(x, row_max, out=out)
        out -= row
    return run


L2_EPSILON = 1e-6  # TFLite's l2norm.cc: x / max(sqrt(sum(x^2)), 1e-6)


@register("L2_NORMALIZATION", "float32")
def l2_normalization(node):
    x, row = _last_axis(node)
    act = fused_activation(getattr(node.options, "fused_activation_function", 0), node)
    add = np.add.reduce

    def run(x, out):
        np.multiply(x, x, out=out)
        add(out, axis=-1, keepdims=True, out=row)
        np.sqrt(row, out=row)
        clip_(row, L2_EPSILON, INF)
        np.divide(x, row, out=out)
        if act is not None:
            act(out)
    return run


@register("CUMSUM", "float32", "int32", "int64")
def cumsum(node):
    """Running sums along `axis` (input 1, a scalar), optionally exclusive and reversed."""
    node.expect_inputs(2)
    x, axis_t = node.input(0), node.input(1)
    rank = len(x.shape)
    node.outputs[0].shape = x.shape
    if axis_t.data is None:
        raise node.fail("the axis (input 1) must be a constant")
    axis = int(np.asarray(axis_t.data).reshape(-1)[0])
    if not -rank <= axis < rank:
        raise node.fail(f"axis {axis} is out of range for rank {rank}")
    axis %= rank
    exclusive = bool(getattr(node.options, "exclusive", False))
    reverse = bool(getattr(node.options, "reverse", False))

    def along(step, start=None, stop=None):
        return (slice(None),) * axis + (slice(start, stop, step),)
    flip = along(-1 if reverse else 1)
    head, tail, first = along(None, None, -1), along(None, 1, None), along(None, 0, 1)
    accumulate, dtype = np.add.accumulate, x.dtype
    if x.shape[axis] == 0:
        return lambda x, axis_value, out: None
    if not exclusive:
        def run(x, axis_value, out):
            accumulate(x[flip], axis=axis, dtype=dtype, out=out[flip])
        return run

    def run(x, axis_value, out):
        o = out[flip]
        o[first] = 0
        accumulate(x[flip][head], axis=axis, dtype=dtype, out=o[tail])
    return run
