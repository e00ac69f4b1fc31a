"""RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR, DEPTH_TO_SPACE and SPACE_TO_DEPTH on NHWC data.

The resizes gather pixels through flat (H*W) index tables computed in prepare with TFLite's
float32 arithmetic (scales, half-pixel offsets, rounding), so they pick the same pixels and
weights as LiteRT's reference kernels. A size known only while running makes the resize dynamic
(`node.dynamic`): the tables are then built per size, when it arrives. The block rearrangements
are one copy of a transposed view.
"""
from __future__ import annotations

import numpy as np

from .registry import register

F32 = np.float32


def _resize_input(node):
    """(input shape, output size or None when it arrives while running, align_corners,
    half_pixel_centers); sets the output shape when the size is constant."""
    node.expect_inputs(2)
    x, size = node.input(0), node.input(1)
    if len(x.shape) != 4:
        raise node.fail(f"input {list(x.shape)} must be 4-D (NHWC)")
    if size.type_name != "int32" or int(np.prod(size.shape)) != 2:
        raise node.fail(f"size must hold 2 int32 values, got {size.type_name} {list(size.shape)}")
    o = node.options
    flags = bool(o.align_corners), bool(o.half_pixel_centers)
    if size.data is None:
        return x.shape, None, *flags
    out_h, out_w = _out_size(node, size.data)
    n, h, w, c = x.shape
    node.outputs[0].shape = (n, out_h, out_w, c)
    return x.shape, (out_h, out_w), *flags


def _out_size(node, size) -> tuple:
    out_h, out_w = (int(v) for v in np.asarray(size).reshape(2))
    if out_h <= 0 or out_w <= 0:
        raise node.fail(f"output size {out_h}x{out_w} must be positive")
    return out_h, out_w


def _at_run_time(node, make_run, align, half):
    """A resize to a size that arrives while running: run(x, size) returns the output, with the
    tables for each new (input shape, size) built once."""
    node.dynamic = True
    cache: dict = {}

    def run(x, size):
        out_h, out_w = _out_size(node, size)
        key = (x.shape, out_h, out_w)
        step = cache.get(key)
        if step is None:
            step = cache[key] = make_run(x.shape, out_h, out_w, align, half)
        n, _, _, c = x.shape
        out = np.empty((n, out_h, out_w, c), x.dtype)
        step(x, size, out)
        return [out]
    return run


def _scale(in_size, out_size, align_corners):
    if align_corners and out_size > 1:
        return F32(in_size - 1) / F32(out_size - 1)
    return F32(in_size) / F32(out_size)


def bilinear_axis(in_size, out_size, align_corners, half_pixel):
    """Per output coordinate: the lower and upper source index and the upper's weight."""
    scale = _scale(in_size, out_size, align_corners)
    pos = np.arange(out_size, dtype=F32)
    scaled = (pos + F32(0.5)) * scale - F32(0.5) if half_pixel else pos * scale
    lo = np.maximum(np.floor(scaled).astype(np.int64), 0)
    hi = np.minimum(np.ceil(scaled).astype(np.int64), in_size - 1)
    return lo, hi, (scaled - lo.astype(F32)).astype(F32)


@register("RESIZE_BILINEAR", "float32")
def resize_bilinear(node):
    shape, size, align, half = _resize_input(node)
    if align and half:
        raise node.fail("align_corners and half_pixel_centers cannot both be set")
    if size is None:
        return _at_run_time(node, _bilinear, align, half)
    return _bilinear(shape, *size, align, half)


def _bilinear(shape, out_h, out_w, align, half):
    n, h, w, c = shape
    y0, y1, dy = bilinear_axis(h, out_h, align, half)
    x0, x1, dx = bilinear_axis(w, out_w, align, half)
    one = F32(1)
    # The four corners: flat source indices and weights, [out_h * out_w] and [.., 1].
    corners = [(np.add.outer(ys * w, xs).reshape(-1),
                np.multiply.outer(wy, wx).reshape(-1, 1).astype(F32))
               for ys, wy in ((y0, one - dy), (y1, dy)) for xs, wx in ((x0, one - dx), (x1, dx))]
    gathered = np.empty((n, out_h * out_w, c), F32)

    def run(x, _size, out):
        src = x.reshape(n, h * w, c)
        o = out.reshape(n, out_h * out_w, c)
        for k, (index, weight) in enumerate(corners):
            np.take(src, index, axis=1, out=gathered)
            if k == 0:
                np.multiply(gathered, weight, out=o)
            else:
                np.multiply(gathered, weight, out=gathered)
                np.add(o, gathered, out=o)
    return run


def _nearest_axis(in_size, out_size, align_corners, half_pixel):
    scale = _scale(in_size, out_size, align_corners)
    pos = (np.arange(out_size, dtype=F32) + F32(0.5 if half_pixel else 0.0)) * scale
    # TfLiteRound rounds halves away from zero; the positions are never negative.
    index = np.floor(pos + F32(0.5)) if align_corners else np.floor(pos)
    index = np.minimum(index.astype(np.intp), in_size - 1)   # np.take's index type (32-bit Pis)
    return np.maximum(index, 0) if half_pixel else index


@register("RESIZE_NEAREST_NEIGHBOR", "float32")
def resize_nearest_neighbor(node):
    shape, size, align, half = _resize_input(node)
    if size is None:
        return _at_run_time(node, _nearest, align, half)
    return _nearest(shape, *size, align, half)


def _nearest(shape, out_h, out_w, align, half):
    n, h, w, c = shape
    index = np.add.outer(_nearest_axis(h, out_h, align, half) * w,
                         _nearest_axis(w, out_w, align, half)).reshape(-1)

    def run(x, _size, out):
        np.take(x.reshape(n, h * w, c), index, axis=1, out=out.reshape(n, out_h * out_w, c))
    return run


def _block_size(node):
    node.expect_inputs(1)
    x = node.input(0)
    if len(x.shape) != 4:
        raise node.fail(f"input {list(x.shape)} must be 4-D (NHWC)")
    if node.outputs[0].dtype != x.dtype:
        raise node.fail(f"output is {node.outputs[0].type_name}, input {x.type_name}")
    bs = int(node.options.block_size or 0)
    if bs <= 0:
        raise node.fail(f"block_size must be positive, got {bs}")
    return x.shape, bs


@register("DEPTH_TO_SPACE", "float32", "int32", "int64")
def depth_to_space(node):
    (n, h, w, c), bs = _block_size(node)
    if c % (bs * bs):
        raise node.fail(f"{c} channels do not split into {bs}x{bs} blocks")
    co = c // (bs * bs)
    node.outputs[0].shape = (n, h * bs, w * bs, co)

    def run(x, out):
        src = x.reshape(n, h, w, bs, bs, co).transpose(0, 1, 3, 2, 4, 5)
        np.copyto(out.reshape(n, h, bs, w, bs, co), src)
    return run


@register("SPACE_TO_DEPTH", "float32", "int32", "int64")
def space_to_depth(node):
    (n, h, w, c), bs = _block_size(node)
    if h % bs or w % bs:
        raise node.fail(f"height {h} and width {w} must be multiples of block_size {bs}")
    ho, wo = h // bs, w // bs
    node.outputs[0].shape = (n, ho, wo, bs * bs * c)

    def run(x, out):
        src = x.reshape(n, ho, bs, wo, bs, c).transpose(0, 1, 3, 2, 4, 5)
        np.copyto(out.reshape(n, ho, wo, bs, bs, c), src)
    return run
