"""Normalizations computed from reductions: LayerNormalization and InstanceNormalization.

Both are (x - mean) * rsqrt(var + eps) * scale + bias over some axes, the form TensorFlow's own
converter writes: MEAN, SQUARED_DIFFERENCE, MEAN, ADD, RSQRT, SUB, MUL, MUL, ADD.
"""
from __future__ import annotations

import numpy as np

from .lower import axis_of, lowers


def normalize(b, x, axes, eps: float):
    """((x - mean) / sqrt(var + eps), mean, 1 / sqrt(var + eps)) over `axes`."""
    axes_t = b.const(np.array(axes, np.int32))
    mean = b.op("MEAN", [x, axes_t], {"keep_dims": True})
    var = b.op("MEAN", [b.op("SQUARED_DIFFERENCE", [x, mean]), axes_t], {"keep_dims": True})
    dtype = b.sg.tensors[x].np_dtype
    inv = b.op("RSQRT", [b.op("ADD", [var, b.const(np.array(eps, dtype))])])
    return b.op("MUL", [b.op("SUB", [x, mean]), inv]), mean, inv


def _affine(b, y, scale, bias, shape=None):
    """y * scale + bias; a constant scale of ones or bias of zeros (as freshly initialized
    models have) is left out."""
    if scale >= 0 and not _is_constant(b, y, scale, 1, shape):
        y = b.op("MUL", [y, scale if shape is None else b.reshape(scale, shape)])
    if bias >= 0 and bias not in b.empty and not _is_constant(b, y, bias, 0, shape):
        y = b.op("ADD", [y, bias if shape is None else b.reshape(bias, shape)])
    return y


def _is_constant(b, y, t, value, shape=None) -> bool:
    """t (reshaped to `shape`) is a constant that holds only `value` and does not broadcast y
    to a larger shape."""
    v = b.value(t)
    if v is None or not np.all(v == value):
        return False
    v = v if shape is None else v.reshape(shape)
    y_shape = b.shape(y)
    return len(v.shape) <= len(y_shape) and all(
        d == 1 or d == e for d, e in zip(v.shape[::-1], y_shape[::-1]))


@lowers("LayerNormalization")
def layer_norm(b, n):
    x = n.input(0)
    rank = b.rank(x)
    axis = axis_of(n, n.attr("axis", -1), rank)
    y, mean, inv = normalize(b, x, list(range(axis, rank)), float(n.attr("epsilon", 1e-5)))
    return [_affine(b, y, n.input(1), n.input(2)), mean, inv]


@lowers("InstanceNormalization")
def instance_norm(b, n):
    x = n.input(0)
    rank = b.rank(x)
    y, _, _ = normalize(b, x, list(range(2, rank)), float(n.attr("epsilon", 1e-5)))
    shape = (b.shape(x)[1],) + (1,) * (rank - 2)
    return _affine(b, y, n.input(1), n.input(2), shape)
