"""Unary math: ABS NEG EXP LOG SQRT RSQRT SQUARE SIN COS FLOOR CEIL ROUND SIGN.

Each is one or two ufunc calls with `out=`; ROUND rounds half to even like TFLite's reference
kernel (and numpy's rint). `swish` is the fused LOGISTIC + MUL of x and its sigmoid,
`channel_gate` that of x and a per-channel sigmoid (fusion.py).
"""
from __future__ import annotations

import numpy as np

from .common import bounds, clip
from .registry import register
from .scratch import Scratch

F32 = np.dtype(np.float32)


def _unary(*ufuncs):
    """A kernel applying `ufuncs` in turn: the first reads the input, the rest work in place."""
    first, rest = ufuncs[0], ufuncs[1:]

    def prepare(node):
        node.expect_inputs(1)
        node.outputs[0].shape = node.input(0).shape
        if not rest:
            def run(x, out):
                first(x, out=out)
            return run
        second = rest[0]

        def run(x, out):
            first(x, out=out)
            second(out, out=out)
        return run
    return prepare


register("ABS", "float32", "int32")(_unary(np.absolute))
register("NEG", "float32", "int32", "int64")(_unary(np.negative))
register("EXP", "float32")(_unary(np.exp))
register("LOG", "float32")(_unary(np.log))
register("SQRT", "float32")(_unary(np.sqrt))
register("RSQRT", "float32")(_unary(np.sqrt, np.reciprocal))  # 1 / sqrt(x), as TFLite does
register("SQUARE", "float32")(_unary(np.square))
register("SIN", "float32")(_unary(np.sin))
register("COS", "float32")(_unary(np.cos))
register("FLOOR", "float32")(_unary(np.floor))
register("CEIL", "float32")(_unary(np.ceil))
register("ROUND", "float32")(_unary(np.rint))
register("SIGN", "float32", "float64", "int32")(_unary(np.sign))


def swish(node, shape, clamp=None, halved=False):
    """run(x, out): x * sigmoid(x) of float32 x of `shape` (EfficientNet's activation, TFLite's
    LOGISTIC then MUL), as h + h * tanh(h) with h = x / 2: four passes instead of the two ops'
    six, and numpy's float32 tanh costs half its exp (within ~1e-6 of the float64 value for
    |x| < 10, where 1 / (1 + exp(-x)) in float32 is as far). x * 0.5 is exact; -inf gives
    NaN, as -inf * LOGISTIC(-inf) = -inf * 0 does. `clamp`: the MUL's fused (lo, hi), or None.
    `halved`: the input is h already (a convolution on halved weights wrote it): three passes.
    `out` may be x (the arena may give the MUL's output the input's memory): x is read once,
    by the first pass. The tanh goes to a work buffer of the interpreter's Scratch."""
    get = Scratch.of(node).reserve([(tuple(shape), F32)])
    half = np.array(0.5, F32)
    lims = None if clamp is None else bounds(*clamp)
    multiply, tanh, add = np.multiply, np.tanh, np.add

    def run(x, out):
        t = get()[0]
        if halved:
            if out is not x:
                np.copyto(out, x)
        else:
            multiply(x, half, out)
        tanh(out, t)
        multiply(t, out, t)
        add(t, out, out)
        if lims is not None:
            clip(out, lims[0], lims[1], out)
    return run


def channel_gate(sigmoid, gate_shape, shape, clamp=None):
    """run(g, x, out): out = x * sigmoid(g) for a gate g of `gate_shape` (ones, then the C of
    x's last axis) and x of `shape`: `sigmoid` (the LOGISTIC's prepared kernel) into a buffer,
    copied along one pixel row, then one multiply over [rows, W*C] (the same products as the
    broadcast). `clamp`: the MUL's fused (lo, hi), or None."""
    c = shape[-1]
    width = shape[-2] * c if len(shape) >= 2 else c
    rows = int(np.prod(shape)) // width
    gate = np.empty(gate_shape, F32)
    tile = np.empty(width, F32)
    tile2, gate2 = tile.reshape(-1, c), gate.reshape(1, c)
    lims = None if clamp is None else bounds(*clamp)
    multiply, copyto = np.multiply, np.copyto

    def run(g, x, out):
        sigmoid(g, gate)
        copyto(tile2, gate2)
        o2 = out.reshape(rows, width)
        multiply(x.reshape(rows, width), tile, o2)
        if lims is not None:
            clip(o2, lims[0], lims[1], o2)
    return run
