"""MAX_POOL_2D and AVERAGE_POOL_2D on int8 / uint8 and int16, bit-exact to TFLite's reference
kernels (reference_integer_ops::MaxPool / AveragePool, and their int16 instances).

Pools work on the raw values (TFLite requires equal input and output quantization): the max
over the window, or the sum over the window's in-image taps divided by their count, rounding
halves away from zero.
"""
from __future__ import annotations

import numpy as np

from .common import clip_, raw
from .geometry import pool_windows
from .int8_stage import CLIP
from .quant_params import TYPE_RANGE, activation_range, expect_output_type
from .registry import register
from .steps import call, calls_step


def _pool_geometry(node):
    """The pool's windows as (n, c), kernel, stride, (oh, ow), pad, padded size and the input
    rows and columns inside it; the output type must be the input's."""
    win = pool_windows(node)
    x = node.input(0)
    expect_output_type(node, x.type_name)
    n, h, w, c = x.shape
    return (n, c), (win.kh, win.kw), (win.sh, win.sw), (win.oh, win.ow), (win.pt, win.pl), \
        (win.rows, win.cols), win.inside(h, w)


def _taps(buffer, n_c, kernel, stride, out_hw):
    """The window taps as strided views of the padded buffer."""
    views = []
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            views.append(buffer[:, i:i + (out_hw[0] - 1) * stride[0] + 1:stride[0],
                                j:j + (out_hw[1] - 1) * stride[1] + 1:stride[1]])
    return views


# Tiling windows over more than this many inner loops (n oh ow kh kw, each of c values): a
# chain of maxima (rows, then columns: kh + kw - 2 calls over long rows) beats one maximum
# reduction over two strided axes (its inner loops run c values each: digits_cnn_int8's
# 8x8x16 pool 2.7 -> 1.8 µs).
CHAIN_LOOPS = 32


def _tile_chain(x, out, kernel, out_hw, clamp, lo, hi):
    """The max over tiling kh x kw windows on fixed arrays (plan.bind_step): the window rows'
    maximum into a buffer of its own (whole rows of ow kw c values), then its columns' into
    the output; 2-d views where the tiles cover the input's width."""
    (kh, kw), (oh, ow) = kernel, out_hw
    n, c = x.shape[0], x.shape[3]
    part = x[:, :oh * kh, :ow * kw]
    rows = np.empty((n, oh, ow * kw, c), x.dtype)
    if ow * kw == x.shape[2]:            # whole rows: (n oh, kh, ow kw c) and (n oh ow, kw, c)
        taps = part.reshape(n * oh, kh, ow * kw * c)
        row_taps = [taps[:, i] for i in range(kh)]
        acc = rows.reshape(n * oh, ow * kw * c)
        cols = rows.reshape(n * oh * ow, kw, c)
        col_taps, dest = [cols[:, j] for j in range(kw)], out.reshape(n * oh * ow, c)
    else:
        row_taps, acc = [part[:, i::kh] for i in range(kh)], rows
        col_taps, dest = [rows[:, :, j::kw] for j in range(kw)], out
    return calls_step(*_maxima(row_taps, acc), *_maxima(col_taps, dest),
                      _clamped(out, clamp, lo, hi))


def _maxima(taps, out) -> list:
    """out = the max over `taps` (at least one) as calls (steps.call); np.maximum looked up on
    each call, as the tests count it."""
    if len(taps) == 1:
        return [call(raw(np.copyto), out, taps[0])]
    return [call((np, "maximum"), taps[0], taps[1], out=out)] + \
        [call((np, "maximum"), out, tap, out=out) for tap in taps[2:]]


def _clamped(out, clamp: bool, lo: int, hi: int):
    """The fused activation's clamp of `out` in place as a call (0-d bounds of its type), or
    None without one."""
    if not clamp:
        return None
    return call(CLIP, out, np.array(lo, out.dtype), np.array(hi, out.dtype), out)


@register("MAX_POOL_2D", "int8", "uint8", "int16")
def max_pool_2d(node):
    (n, c), kernel, stride, out_hw, pad, need, (rows, cols) = _pool_geometry(node)
    x = node.input(0)
    lo, hi = activation_range(node.options.fused_activation_function, node.outputs[0], node)
    type_lo, type_hi = TYPE_RANGE[x.type_name]
    clamp = (lo, hi) != (type_lo, type_hi)

    def reduce(views, out):
        """The max over the taps, clamped to the fused activation's range."""
        np.maximum(views[0], views[1], out=out) if len(views) > 1 else np.copyto(out, views[0])
        for v in views[2:]:
            np.maximum(out, v, out=out)
        if clamp:
            clip_(out, lo, hi)

    if pad == (0, 0) and need[0] <= x.shape[1] and need[1] <= x.shape[2]:
        bound = []   # the windows fit the input: its taps are read in place

        def direct(x, out):
            if not bound or bound[0] is not x:
                bound[:] = [x, _taps(x, (n, c), kernel, stride, out_hw)]
            reduce(bound[1], out)

        def fixed(x, out):
            """`direct` on the plan's fixed arrays (plan.bind_step): windows that tile the
            input (kernel = stride) as one max over two axes of a 6-d view, else the taps
            found once; steps of calls (steps.calls_step), written into the plan's run_steps."""
            (kh, kw), (sh, sw), (oh, ow) = kernel, stride, out_hw
            if (kh, kw) == (sh, sw) and x.flags.c_contiguous and out.flags.c_contiguous \
                    and kh > 1 and kw > 1 and n * oh * ow * kh * kw > CHAIN_LOOPS:
                return _tile_chain(x, out, kernel, out_hw, clamp, lo, hi)
            if (kh, kw) == (sh, sw) and x.flags.c_contiguous and out.flags.c_contiguous:
                tiles = x[:, :oh * kh, :ow * kw].reshape(n, oh, kh, ow, kw, c)
                return calls_step(call(np.maximum.reduce, tiles, (2, 4), None, out),
                                  _clamped(out, clamp, lo, hi))
            taps = _taps(x, (n, c), kernel, stride, out_hw)
            return calls_step(*_maxima(taps, out), _clamped(out, clamp, lo, hi))
        direct.bind = fixed
        return direct
    made = []    # the padded buffer (padding never wins a max), made at the first run

    def run(x, out):
        if not made:
            buffer = np.full((n,) + need + (c,), type_lo, x.dtype)
            made[:] = [buffer[:, pad[0]:pad[0] + rows, pad[1]:pad[1] + cols],
                       _taps(buffer, (n, c), kernel, stride, out_hw)]
        interior, views = made
        np.copyto(interior, x[:, :rows, :cols])
        reduce(views, out)
    return run


@register("AVERAGE_POOL_2D", "int8", "uint8", "int16")
def average_pool_2d(node):
    (n, c), kernel, stride, out_hw, pad, need, (rows, cols) = _pool_geometry(node)
    lo, hi = activation_range(node.options.fused_activation_function, node.outputs[0], node)
    buffer = np.zeros((n,) + need + (c,), np.int32)          # padding adds nothing
    interior = buffer[:, pad[0]:pad[0] + rows, pad[1]:pad[1] + cols]
    views = _taps(buffer, (n, c), kernel, stride, out_hw)
    inside = np.zeros(need, np.int32)
    inside[pad[0]:pad[0] + rows, pad[1]:pad[1] + cols] = 1
    count = sum(inside[i:i + (out_hw[0] - 1) * stride[0] + 1:stride[0],
                       j:j + (out_hw[1] - 1) * stride[1] + 1:stride[1]]
                for i in range(kernel[0]) for j in range(kernel[1]))[:, :, None]
    if np.any(count == 0):
        raise node.fail("a pooling window lies entirely in the padding")
    half = count // 2
    acc = np.empty((n,) + out_hw + (c,), np.int32)
    mag = np.empty_like(acc)
    neg = np.empty(acc.shape, np.bool_)

    def run(x, out):
        np.copyto(interior, x[:, :rows, :cols])
        np.copyto(acc, views[0])
        for v in views[1:]:
            np.add(acc, v, out=acc)
        # (acc +- count / 2) / count, truncating: halves away from zero.
        np.less(acc, 0, out=neg)
        np.abs(acc, out=mag)
        np.add(mag, half, out=mag)
        np.floor_divide(mag, count, out=mag)
        np.negative(mag, out=acc, where=neg)
        np.copyto(acc, mag, where=~neg)
        clip_(acc, lo, hi)
        np.copyto(out, acc, casting="unsafe")
    return run
