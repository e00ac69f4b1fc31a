"""AVERAGE_POOL_2D, MAX_POOL_2D and L2_POOL_2D on float32 NHWC data.

Each pool combines its window's taps one strided view at a time (taps.py's `Window`;
ufunc.reduce over all taps of a strided view is several times slower). Padding never counts:
MAX_POOL pads with -inf, the averages divide by the number of in-bounds taps.
"""
from __future__ import annotations

import numpy as np

from .common import F32, check_float, clamp_activation
from .geometry import pool_windows
from .registry import register
from .taps import Window


def _window(node):
    win = pool_windows(node)
    x = node.input(0)
    check_float(node, x)
    fill = -np.inf if node.op == "MAX_POOL_2D" else 0.0
    return Window(node, x.shape, win, fill=fill), \
        clamp_activation(node.options.fused_activation_function, node)


def _in_bounds_counts(win, shape):
    """How many taps of each output's window fall inside the input, as a scalar when all
    agree, else an array in the layout of `win.out_view`."""
    n, h, w, c = shape

    def along(size, out, kernel, stride, pad):
        start = np.arange(out) * stride - pad
        return np.minimum(start + kernel, size) - np.maximum(start, 0)

    counts = np.multiply.outer(along(h, win.ho, win.kh, win.sh, win.pt),
                               along(w, win.wo, win.kw, win.sw, win.pl)).astype(F32)
    if (counts == counts.flat[0]).all():
        return F32.type(counts.flat[0])
    full = np.ascontiguousarray(np.broadcast_to(counts[None, :, :, None], win.shape))
    return win.out_view(full)


def _reduce_taps(win, x, out, ufunc):
    """The window's taps of `x` folded with `ufunc` (add, maximum) into `out`'s view; returns
    that view."""
    if win.copy_in is not None:
        win.copy_in(x)
    taps = win.tap_list(x)
    o = win.out_view(out)
    if len(taps) == 1:
        np.copyto(o, taps[0])
    else:
        ufunc(taps[0], taps[1], out=o)
    for t in taps[2:]:
        ufunc(o, t, out=o)
    return o


def _summing_pool(node, square: bool):
    win, act = _window(node)
    x_shape = node.input(0).shape
    counts = _in_bounds_counts(win, x_shape)
    squares = np.empty(x_shape, F32) if square else None

    def run(x, out):
        if square:
            np.square(x, out=squares)
            x = squares
        o = _reduce_taps(win, x, out, np.add)
        np.divide(o, counts, out=o)
        if square:
            np.sqrt(o, out=o)
        if act is not None:
            act(o)
    return run


@register("AVERAGE_POOL_2D", "float32")
def average_pool_2d(node):
    return _summing_pool(node, square=False)


@register("L2_POOL_2D", "float32")
def l2_pool_2d(node):
    return _summing_pool(node, square=True)


@register("MAX_POOL_2D", "float32")
def max_pool_2d(node):
    win, act = _window(node)

    def run(x, out):
        o = _reduce_taps(win, x, out, np.maximum)
        if act is not None:
            act(o)
    return run
