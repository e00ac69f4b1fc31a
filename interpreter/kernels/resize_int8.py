"""Resizing and block rearrangements on int8 / uint8 (and int16 where TFLite has them),
bit-exact to TFLite's reference kernels: RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR,
DEPTH_TO_SPACE, SPACE_TO_DEPTH.

Nearest resizing and the block rearrangements move raw values: resize.py's dtype-agnostic
kernels registered for the integer types. int8 and int16 RESIZE_BILINEAR are
ResizeBilinearInteger (10-bit fixed-point positions and weights, rounding halves away from
zero); uint8 is the float32 kernel, truncating after adding 0.5, in TFLite's order of
operations.
"""
from __future__ import annotations

import numpy as np

from . import resize
from .registry import register

F32 = np.float32

register("RESIZE_NEAREST_NEIGHBOR", "int8", "uint8", "int16")(resize.resize_nearest_neighbor)
register("DEPTH_TO_SPACE", "int8", "uint8")(resize.depth_to_space)
register("SPACE_TO_DEPTH", "int8", "uint8")(resize.space_to_depth)


# -- RESIZE_BILINEAR ---------------------------------------------------------------------------

@register("RESIZE_BILINEAR", "int8", "uint8", "int16")
def resize_bilinear(node):
    shape, size, align, half = resize._resize_input(node)
    if align and half:
        raise node.fail("align_corners and half_pixel_centers cannot both be set")
    make = _bilinear_float if node.input(0).type_name == "uint8" else _bilinear_integer
    if size is None:
        return resize._at_run_time(node, make, align, half)
    return make(shape, *size, align, half)


def _trunc_div(a, b: int):
    """C's integer division (toward zero)."""
    return np.where(a >= 0, a // b, -((-a) // b))


def _integer_axis(in_size: int, out_size: int, align: bool, half: bool):
    """ComputeInterpolationValuesInteger: lower, upper source index and their 10-bit weights."""
    if align and out_size > 1:
        scale = ((1 << 10) * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    else:
        scale = ((1 << 10) * in_size + out_size // 2) // out_size
    v = np.arange(out_size, dtype=np.int64) * scale
    if half:
        v = v + scale // 2 - (1 << 9)
    lo = np.maximum(_trunc_div(v, 1 << 10), 0)
    hi = np.minimum(_trunc_div(v + (1 << 10) - 1, 1 << 10), in_size - 1)
    frac = v - (lo << 10)
    return lo, hi, (1 << 10) - frac, frac


def _corners(shape, out_h, out_w, ys, xs):
    """[(flat source index [out_h*out_w], (weight y, weight x))] of the four corners in
    TFLite's order (y0 x0, y1 x0, y0 x1, y1 x1), from per-axis (lower, upper, lower weight,
    upper weight)."""
    w = shape[2]
    y0, y1, wy0, wy1 = ys
    x0, x1, wx0, wx1 = xs
    return [(np.add.outer(yi * w, xi).reshape(-1), (wy, wx))
            for xi, wx in ((x0, wx0), (x1, wx1)) for yi, wy in ((y0, wy0), (y1, wy1))]


def _bilinear_integer(shape, out_h, out_w, align, half):
    n, h, w, c = shape
    corners = [(index, np.multiply.outer(wy, wx).reshape(-1, 1))
               for index, (wy, wx) in _corners(shape, out_h, out_w,
                                                _integer_axis(h, out_h, align, half),
                                                _integer_axis(w, out_w, align, half))]
    p = out_h * out_w
    acc = np.empty((n, p, c), np.int64)
    part = np.empty((n, p, c), np.int64)
    neg = np.empty((n, p, c), np.bool_)

    def run(x, _size, out):
        src = x.reshape(n, h * w, c)
        for k, (index, weight) in enumerate(corners):
            np.multiply(src[:, index], weight, out=acc if k == 0 else part)
            if k:
                np.add(acc, part, out=acc)
        # (acc +- 2^19) / 2^20 truncating: halves away from zero.
        np.less_equal(acc, 0, out=neg)
        np.abs(acc, out=acc)
        np.add(acc, 1 << 19, out=acc)
        np.right_shift(acc, 20, out=acc)
        np.negative(acc, out=acc, where=neg)
        np.copyto(out.reshape(n, p, c), acc, casting="unsafe")
    return run


def _bilinear_float(shape, out_h, out_w, align, half):
    """reference_ops::ResizeBilinear<uint8_t>: float32 in C's order of operations,
    ((v00 a_y) a_x + (v10 b_y) a_x) + (v01 a_y) b_x + (v11 b_y) b_x + 0.5, truncated."""
    n, h, w, c = shape
    one = F32(1)

    def axis(in_size, out_size):
        lo, hi, frac = resize.bilinear_axis(in_size, out_size, align, half)
        return lo, hi, (one - frac).astype(F32), frac.astype(F32)

    corners = _corners(shape, out_h, out_w, axis(h, out_h), axis(w, out_w))
    p = out_h * out_w
    corners = [(index, np.repeat(wy, out_w).reshape(-1, 1), np.tile(wx, out_h).reshape(-1, 1))
               for index, (wy, wx) in corners]
    acc = np.empty((n, p, c), F32)
    term = np.empty((n, p, c), F32)

    def run(x, _size, out):
        src = x.reshape(n, h * w, c)
        for k, (index, wy, wx) in enumerate(corners):
            t = acc if k == 0 else term
            np.multiply(src[:, index], wy, out=t, dtype=F32)
            np.multiply(t, wx, out=t)
            if k:
                np.add(acc, term, out=acc)
        np.add(acc, F32(0.5), out=acc)
        np.copyto(out.reshape(n, p, c), acc, casting="unsafe")
    return run
