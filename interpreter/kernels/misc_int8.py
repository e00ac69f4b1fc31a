"""The remaining quantized kernels on int8 / uint8 (and int16 where TFLite has them), bit-exact
to TFLite's reference kernels: SUM, REDUCE_MAX / REDUCE_MIN, REDUCE_PROD, ARG_MAX / ARG_MIN,
RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR, DEPTH_TO_SPACE, SPACE_TO_DEPTH.

Data movement and raw-value ops (nearest resizing, block rearrangements, arg max, reduce max)
are the dtype-agnostic kernels of resize.py / reduce.py registered for the integer types. SUM
rescales the zero-point-corrected int32 sum once (reduce.h's QuantizedMeanOrSum). int8 and
int16 RESIZE_BILINEAR are ResizeBilinearInteger (10-bit fixed-point positions and weights,
rounding halves away from zero); uint8 is the float32 kernel, truncating after adding 0.5, in
TFLite's order of operations.
"""
from __future__ import annotations

import math

import numpy as np

from . import reduce, resize
from .pool_int8 import quantized_reduction
from .fixed_point import mbqm, mbqm64, quantize_multiplier, wrap32
from .quant_params import TYPE_RANGE, quant_params
from .registry import register

F32 = np.float32

# -- data movement and raw values --------------------------------------------------------------

register("RESIZE_NEAREST_NEIGHBOR", "int8", "uint8", "int16")(resize.resize_nearest_neighbor)
register("DEPTH_TO_SPACE", "int8", "uint8")(resize.depth_to_space)
register("SPACE_TO_DEPTH", "int8", "uint8")(resize.space_to_depth)
register("ARG_MAX", "int8", "uint8")(reduce._arg("argmax"))
register("ARG_MIN", "int8", "uint8")(reduce._arg("argmin"))


def _same_quantization(prepare):
    """TFLite's quantized REDUCE_MAX / REDUCE_MIN compare raw values: the output must share
    the input's scale and zero point."""
    def checked(node):
        if quant_params(node, 0) != quant_params(node, 0, output=True):
            raise node.fail("input and output must have the same scale and zero point")
        return prepare(node)
    return checked


register("REDUCE_MAX", "int8", "uint8", "int16")(_same_quantization(reduce._reducer(np.maximum)))
register("REDUCE_MIN", "int8", "uint8", "int16")(_same_quantization(reduce._reducer(np.minimum)))


# -- SUM ---------------------------------------------------------------------------------------

@register("SUM", "int8", "uint8", "int16")
def sum_(node):
    x, key, axes, keep, shape, s_in, z_in, s_out, z_out = quantized_reduction(node, "SUM")
    multiplier, shift = quantize_multiplier(float(s_in) / float(s_out))
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    lo, hi = TYPE_RANGE[key]
    sums = np.empty(shape, np.int64)

    def run(x, axis_, out):
        if x.size == 0:
            out[...] = 0
            return
        np.sum(x, axis=axes, dtype=np.int64, keepdims=keep, out=sums)
        y = mbqm(wrap32(sums - z_in * count), multiplier, shift) + z_out
        np.copyto(out, np.clip(y, lo, hi), casting="unsafe")
    return run


# -- REDUCE_PROD -------------------------------------------------------------------------------

_raw_prod = reduce._reducer(np.multiply)


@register("REDUCE_PROD", "int8", "int16")
def reduce_prod(node):
    """Quantized: the running product rescaled after every factor by input_scale /
    output_scale^(1/n) with the int64 MultiplyByQuantizedMultiplier, in the input's order, and
    once more at the end (reduce.h's QuantizedReduceProd). Unquantized: the raw product."""
    q = node.input(0).quantization
    if q is None or q.scale.size == 0:
        return _raw_prod(node)
    x, key, axes, keep, shape, s_in, z_in, s_out, z_out = quantized_reduction(node,
                                                                              "REDUCE_PROD")
    rank = len(x.shape)
    kept = [i for i in range(rank) if i not in axes]
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    outputs = int(np.prod([x.shape[a] for a in kept], dtype=np.int64))
    if count == 0 or outputs == 0:
        return lambda x, axis_, out: out.fill(0)
    m, e = quantize_multiplier(float(s_in) / math.pow(float(s_out), 1.0 / count))
    lo, hi = TYPE_RANGE[key]
    order = kept + list(axes)      # reduced elements of one output, in the input's order

    def run(x, axis_, out):
        v = np.transpose(x, order).reshape(outputs, count).astype(np.int64) - z_in
        prod = v[:, 0]
        for k in range(1, count):
            prod = mbqm64(prod * v[:, k], m, e)
        y = mbqm64(prod, m, e) + z_out
        np.copyto(out.reshape(-1), np.clip(y, lo, hi), casting="unsafe")
    return run


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
