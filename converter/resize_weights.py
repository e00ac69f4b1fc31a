"""ONNX Resize as one matrix per resized axis: output = W @ input along that axis (+ the
extrapolation value where tf_crop_and_resize samples outside the input).

Resize is separable, and along one axis every ONNX mode is linear in the input: nearest picks one
source pixel, linear and cubic (with or without antialias, exclude_outside) weigh a window of
them, clamped to the edge. `axis_weights` computes W [out, in] and the extrapolation mask with
a small set of array operations, given by an `ops` object: `NumpyOps` (float64, exactly the
reference's arithmetic) when the scale is known while converting, `GraphOps` (TFLite ops,
float32) when it arrives with the model's inputs.
"""
from __future__ import annotations

import math

import numpy as np


class NumpyOps:
    """The operations on float64 numpy arrays."""

    def const(self, value):
        return np.asarray(value, np.float64)

    add, sub, mul, div = np.add, np.subtract, np.multiply, np.divide
    floor, ceil, abs, minimum, maximum = np.floor, np.ceil, np.abs, np.minimum, np.maximum
    less, greater, equal, logical_or = np.less, np.greater, np.equal, np.logical_or

    def where(self, cond, a, b):
        return np.where(cond, a, b)

    def as_float(self, cond):
        return np.asarray(cond, np.float64)

    def column(self, v):
        return np.reshape(v, (-1, 1))

    def row_sum(self, w):
        return w.sum(axis=1, keepdims=True)

    def matmul_const(self, w, f):
        return w @ f


class GraphOps:
    """The same operations emitted as float32 TFLite ops through an IRBuilder (folded where all
    inputs are constant)."""

    def __init__(self, b):
        self.b = b

    def const(self, value):
        return self.b.const(np.asarray(value, np.float32))

    def _t(self, v):
        """Python floats and arrays are constants; ints are tensor indices."""
        return self.const(v) if isinstance(v, (float, np.ndarray, np.floating)) else v

    def _bin(op, dtype=None):
        def f(self, a, b):
            return self.b.op(op, [self._t(a), self._t(b)], dtype=dtype)
        return f

    add, sub, mul, div = _bin("ADD"), _bin("SUB"), _bin("MUL"), _bin("DIV")
    minimum, maximum = _bin("MINIMUM"), _bin("MAXIMUM")
    less, greater, equal = _bin("LESS", "bool"), _bin("GREATER", "bool"), _bin("EQUAL", "bool")
    logical_or = _bin("LOGICAL_OR", "bool")
    del _bin

    def floor(self, a):
        return self.b.op("FLOOR", [a])

    def ceil(self, a):
        return self.b.op("CEIL", [a])

    def abs(self, a):
        return self.b.op("ABS", [a])

    def where(self, cond, a, b):
        if isinstance(cond, (bool, np.bool_)):
            return a if cond else b
        a, b = self._t(a), self._t(b)
        return self.b.op("SELECT_V2", [cond, a, b], dtype="float32")

    def as_float(self, cond):
        return self.b.cast(cond, "float32")

    def column(self, v):
        return self.b.reshape(v, (self.b.shape(v)[0], 1))

    def row_sum(self, w):
        return self.b.op("SUM", [w, self.b.const(np.array([1], np.int32))], {"keep_dims": True})

    def matmul_const(self, w, f):
        return self.b.op("FULLY_CONNECTED", [w, self.b.const(np.ascontiguousarray(
            f.T.astype(np.float32))), -1])


# -- source coordinates --------------------------------------------------------------------------

def source_coords(ops, mode: str, m: int, n: int, scale, roi=None):
    """(x, extrapolated or None): ONNX's source coordinate of each of the m outputs along an
    axis of n inputs, resized by `scale` (a number, or a scalar of `ops`)."""
    y = ops.const(np.arange(m))
    width = ops.mul(scale, float(n))                     # output_width: scale * input_width
    is_one = ops.equal(width, 1.0) if not isinstance(width, (float, np.floating)) else \
        width == 1.0
    half = ops.sub(ops.div(ops.add(y, 0.5), scale), 0.5)
    if mode == "half_pixel":
        return half, None
    if mode == "asymmetric":
        return ops.div(y, scale), None
    if mode == "pytorch_half_pixel":
        return ops.where(is_one, ops.const(np.full(m, -0.5)), half), None
    if mode == "align_corners":
        spread = ops.div(ops.mul(y, float(n - 1)), ops.sub(width, 1.0))
        return ops.where(is_one, ops.const(np.zeros(m)), spread), None
    if mode == "half_pixel_symmetric":
        adjustment = ops.div(float(m), width)
        offset = ops.mul(n / 2, ops.sub(1.0, adjustment))
        return ops.add(offset, half), None
    if mode == "tf_half_pixel_for_nn":
        return ops.div(ops.add(y, 0.5), scale), None
    if mode == "tf_crop_and_resize":
        start, end = roi
        extent = ops.mul(ops.sub(end, start), float(n - 1))
        x = ops.where(is_one, ops.add(ops.mul(y, 0.0), ops.div(extent, 2.0)),
                      ops.div(ops.mul(y, extent), ops.sub(width, 1.0)))
        x = ops.add(x, ops.mul(start, float(n - 1)))
        return x, ops.logical_or(ops.less(x, 0.0), ops.greater(x, float(n - 1)))
    raise KeyError(mode)


# -- weights -------------------------------------------------------------------------------------

def _nearest_index(ops, x, rounding: str):
    if rounding == "round_prefer_floor":
        return ops.ceil(ops.sub(x, 0.5))
    if rounding == "round_prefer_ceil":
        return ops.floor(ops.add(x, 0.5))
    if rounding == "floor":
        return ops.floor(x)
    if rounding == "ceil":
        return ops.ceil(x)
    raise KeyError(rounding)


def _cubic(ops, t, a: float):
    """Keys' cubic kernel at distances t (>= 0)."""
    t2 = ops.mul(t, t)
    t3 = ops.mul(t2, t)
    near = ops.add(ops.sub(ops.mul(t3, a + 2), ops.mul(t2, a + 3)), 1.0)
    far = ops.sub(ops.add(ops.sub(ops.mul(t3, a), ops.mul(t2, 5 * a)), ops.mul(t, 8 * a)), 4 * a)
    inside = ops.where(ops.greater(t, 2.0), 0.0, ops.where(ops.greater(t, 1.0), far, 0.0))
    return ops.where(ops.greater(t, 1.0), inside, near)


def axis_weights(ops, n: int, m: int, scale, mode: str, ctm: str, rounding: str,
                 cubic_a: float, antialias: bool, exclude_outside: bool, roi=None,
                 scale_bound: float | None = None):
    """(W [m, n], extrapolation mask [m] or None) of one axis, as ONNX's reference computes
    it. `scale_bound`: a lower bound of the scale when it is a tensor (sizes the window)."""
    x, extrapolated = source_coords(ops, ctm, m, n, scale, roi)
    column = ops.column(x)
    if mode == "nearest":
        index = ops.minimum(ops.maximum(_nearest_index(ops, x, rounding), 0.0), float(n - 1))
        w = ops.as_float(ops.equal(ops.column(index), ops.const(np.arange(n).reshape(1, n))))
    else:
        # Every source position p near x weighs K((p - x) * s'), s' = min(scale, 1) with
        # antialias (the kernel widens when downsampling); positions past the edge count for
        # the edge pixel (or not at all with exclude_outside); rows sum to 1.
        shrink = ops.minimum(scale, 1.0) if antialias else 1.0
        low = scale if isinstance(scale, (float, int, np.floating)) else (scale_bound or 1.0)
        radius = (2.0 if mode == "cubic" else 1.0) / (min(low, 1.0) if antialias else 1.0)
        pad = int(math.ceil(radius)) + 1
        positions = np.arange(-pad, n + pad)
        t = ops.abs(ops.mul(ops.sub(ops.const(positions.reshape(1, -1)), column), shrink))
        k = _cubic(ops, t, cubic_a) if mode == "cubic" else \
            ops.maximum(ops.sub(1.0, t), 0.0)
        fold = np.zeros((len(positions), n))
        for j, p in enumerate(positions):
            if 0 <= p < n:
                fold[j, p] = 1.0
            elif not exclude_outside:
                fold[j, min(max(p, 0), n - 1)] = 1.0
        w = ops.matmul_const(k, fold)
        total = ops.row_sum(w)
        w = ops.div(w, ops.where(ops.equal(total, 0.0), 1.0, total))
    if extrapolated is not None:
        w = ops.mul(w, ops.sub(1.0, ops.as_float(ops.column(extrapolated))))
    return w, extrapolated
