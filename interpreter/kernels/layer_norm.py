"""Layer normalization over the last axis, float32: the fused form of the ten ops TensorFlow
lowers Keras's LayerNormalization to (MEAN, SQUARED_DIFFERENCE, MEAN, ADD eps, RSQRT, MUL
gamma, then x*s + (-mean)*s or x*s + (beta - mean*s)), matched by interpreter/fusion.py.

    y = clamp(gamma * (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) + beta)

When a FULLY_CONNECTED with constant weights feeds it alone, its weights are centered in
prepare (each input's weights less their mean over the units): the product is then x - mean(x)
itself, one matmul for the layer and the centering. One row (a keyword-spotting head's
[1, 32]) takes its 1 / sqrt in Python on the scalar: 5 numpy calls for the FC and the norm
instead of 13 (~1.2 µs against ~9)."""
from __future__ import annotations

import math

import numpy as np

from .common import F32, bound_on_call, clip, fixed_view, raw


def centered_weights(w: np.ndarray, b: np.ndarray | None) -> tuple:
    """FULLY_CONNECTED's [units, depth] weights (and bias) as the [depth, units] matrix (and
    bias) whose product is the layer's output less its mean over the units."""
    w64 = w.astype(np.float64)
    wc = np.ascontiguousarray((w64 - w64.mean(axis=0)).T, dtype=F32)
    bc = None if b is None else (b.astype(np.float64) - b.astype(np.float64).mean()).astype(F32)
    return wc, bc


def layer_norm(rows: int, depth: int, eps: float, gamma, beta, lims, weights=None, bias=None):
    """run(x, out): `rows` rows of `depth` values normalized (see the module); `weights`
    [in, depth] (centered_weights) first when an FC is fused in, x then being its input."""
    gamma = None if gamma is None else np.ascontiguousarray(np.broadcast_to(gamma, (depth,)),
                                                            dtype=F32)
    beta = None if beta is None else np.ascontiguousarray(np.broadcast_to(beta, (depth,)),
                                                          dtype=F32)
    width = depth if weights is None else weights.shape[0]
    lo, hi = lims or (None, None)
    dot, multiply, add, subtract = raw(np.dot), np.multiply, np.add, np.subtract
    ones = np.full(depth, 1.0 / depth, F32)      # a mean as a product

    def bind(x, out):
        x2, y = fixed_view(x, (rows, width)), fixed_view(out, (rows, depth))
        if x2 is None or y is None or not (x2.flags.c_contiguous and y.flags.c_contiguous):
            return None
        d = np.empty((rows, depth), F32)
        if rows == 1:
            return _one_row(x2[0], y[0], d[0], eps, gamma, beta, lo, hi, weights, bias, ones)
        mean, var = np.empty((rows, 1), F32), np.empty((rows, 1), F32)
        squares = np.empty((rows, depth), F32)
        eps_, one = np.array(eps, F32), np.array(1.0, F32)
        col = ones.reshape(depth, 1)

        def run():
            if weights is None:
                dot(x2, col, mean)
                subtract(x2, mean, d)
            else:
                dot(x2, weights, d)
                if bias is not None:
                    add(d, bias, d)
            multiply(d, d, squares)
            dot(squares, col, var)
            add(var, eps_, var)
            np.sqrt(var, var)
            np.divide(one, var, var)
            multiply(d, var, y)
            if gamma is not None:
                multiply(y, gamma, y)
            if beta is not None:
                add(y, beta, y)
            if lo is not None:
                clip(y, lo, hi, y)
        return run

    return bound_on_call(bind, "the fused layer normalization")


def _one_row(x, y, d, eps, gamma, beta, lo, hi, weights, bias, ones):
    """The one-row form: the mean and the sum of squares as dot products, 1 / sqrt in Python
    (a numpy call on a 0-d array costs 0.3 µs, the float arithmetic 0.1 µs in all)."""
    depth = d.shape[0]
    dot, multiply, add, subtract, sqrt = raw(np.dot), np.multiply, np.add, np.subtract, math.sqrt
    mean, squares, scale = np.empty((), F32), np.empty((), F32), np.empty((), F32)
    inv_depth = 1.0 / depth

    def run():
        if weights is None:
            dot(x, ones, mean)
            subtract(x, mean, d)
        else:
            dot(x, weights, d)
            if bias is not None:
                add(d, bias, d)
        dot(d, d, squares)
        v = float(squares) * inv_depth + eps
        scale[()] = 1.0 / sqrt(v) if v > 0 else math.inf if v == 0 else math.nan
        multiply(d, scale, y)
        if gamma is not None:
            multiply(y, gamma, y)
        if beta is not None:
            add(y, beta, y)
        if lo is not None:
            clip(y, lo, hi, y)
    return run
