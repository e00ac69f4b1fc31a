"""The default resolver's batch-1 hybrid CONV_2D forms that run their own GEMM (issue 17, goal 6;
hybrid.py's _dequantized_conv_run routes to them): the input quantized as LiteRT quantizes it
(hybrid.row_parameters, rint's rounding) in fewer passes than dequantize_rows then the float
kernel, float32 rounding from that two-pass form.

- pointwise_run: a 1x1 projection (fewer outputs than inputs): the row scale on the output;
- shifted_conv_run: a stride-1 kxk on a large image: one GEMM of the padded image by every
  tap's weights side by side, then shifted adds (no im2col).
"""
from __future__ import annotations

import numpy as np

from edgelite.schema.ops import ACTIVATION_BOUNDS

from .common import activation_code, bounds, clip_
from .geometry import conv_windows
from .hybrid import _HIGH, _LOW, F32, _max, _min, row_parameters
from .scratch import Scratch


SHIFTED_MIN_PIXELS = 28 * 28    # below, im2col's copy costs less than the GEMM's extra rows
SHIFTED_MIN_CHANNELS = 8


def shifted_applies(node, x_shape, w_shape) -> bool:
    """A batch-1, stride-1, undilated, ungrouped kxk CONV_2D on a large image (DenseNet's 3x3
    growth layers): shifted_conv_run."""
    o = node.options
    cout, kh, kw, c = w_shape
    return (x_shape[0] == 1 and (kh > 1 or kw > 1) and c == x_shape[3]
            and int(o.stride_h) == int(o.stride_w) == 1
            and int(getattr(o, "dilation_h_factor", 1) or 1) == 1
            and int(getattr(o, "dilation_w_factor", 1) or 1) == 1
            and x_shape[1] * x_shape[2] >= SHIFTED_MIN_PIXELS
            # a deep input (the GEMM's depth; a stem's 3 channels keep im2col) and a product
            # [pixels, kh*kw*O] no larger than twice im2col's [pixels, kh*kw*C]
            and c >= SHIFTED_MIN_CHANNELS and cout <= 2 * c)


def _quantized(x: np.ndarray, q: np.ndarray, asymmetric: bool):
    """q = round(x * inv), clamped about the zero point where the block's bounds need it: the
    integers of dequantize_rows' one row (row_parameters' numbers) for the whole block x, into
    `q` of x's shape; returns the row scale as a float32 scalar."""
    lo, hi = float(_min(x, None)), float(_max(x, None))
    scale, inv, zp = row_parameters(lo, hi, asymmetric)
    np.multiply(x, F32.type(inv), q)
    np.rint(q, q)
    if asymmetric and (lo * inv + zp < _LOW or hi * inv + zp > _HIGH):
        clip_(q, -128.0 - zp, 127.0 - zp)
    return F32.type(scale)


def _clamp(node):
    """The fused activation's bounds as 0-d float32 arrays, or None (no activation)."""
    code = activation_code(node.options)
    return bounds(*ACTIVATION_BOUNDS[code]) if code in ACTIVATION_BOUNDS else None


def shifted_conv_run(node, weights, bias, asymmetric: bool):
    """The default resolver's kxk CONV_2D without im2col: the input quantized and dequantized
    (dequantize_rows' values) straight into a zero-bordered buffer of padded rows [Hp * Wp + slack,
    C]; one GEMM of all of it by every tap's weights side by side, P = buffer @ [W_00 | W_01 |
    ...] ([C, kh*kw*O]); then output pixel (y, x) sums P[(y + i) * Wp + x + j, tap (i, j)]
    over the taps: kh*kw strided adds of [Ho, Wo, O] views (the first with the bias). The
    GEMM's rows are the padded image's (Hp*Wp / (Ho*Wo) more products: ~7% at 56x56, 3x3),
    instead of an im2col copy kh*kw times the input's size. Float32 rounding from the two-pass
    form (a different order of the same sums)."""
    x = node.input(0)
    _, h, wd, c = x.shape
    o, kh, kw, _ = weights.shape
    g = conv_windows(node, x.shape, kh, kw)
    ho, wo = g.oh, g.ow
    hp, wp = max(g.rows, g.pt + h), max(g.cols, g.pl + wd)
    rows = hp * wp + kw - 1                       # the last taps read kw - 1 rows past the end
    taps = kh * kw
    w_all = np.ascontiguousarray(weights.transpose(3, 1, 2, 0).reshape(c, taps * o))
    get = Scratch.of(node).reserve([((rows, c), F32), ((rows, taps * o), F32)])
    lims = _clamp(node)
    bias_tile = np.zeros(o, F32) if bias is None else bias
    bound = []

    def bind():
        buf, prod = get()
        grid = buf[:hp * wp].reshape(hp, wp, c)
        interior = grid[g.pt:g.pt + h, g.pl:g.pl + wd]
        borders = [grid[:g.pt], grid[g.pt + h:], grid[g.pt:g.pt + h, :g.pl],
                   grid[g.pt:g.pt + h, g.pl + wd:], buf[hp * wp:]]
        borders = [b for b in borders if b.size]
        row = prod.strides[0]
        views = [np.lib.stride_tricks.as_strided(
            prod[(i * wp + j):, t * o:], (ho, wo, o), (wp * row, row, prod.strides[1]),
            writeable=False)
            for t, (i, j) in enumerate((i, j) for i in range(kh) for j in range(kw))]
        bound.extend([buf, prod, interior, borders, views])
    multiply, add, matmul = np.multiply, np.add, np.matmul

    def run(x, w_, b_, out):
        if not bound:
            bind()
        buf, prod, interior, borders, views = bound
        for b in borders:
            b.fill(0.0)
        scale = _quantized(x.reshape(h, wd, c), interior, asymmetric)
        multiply(interior, scale, interior)
        matmul(buf, w_all, prod)
        o3 = out.reshape(ho, wo, o)
        add(views[0], bias_tile, o3)
        for v in views[1:]:
            add(o3, v, o3)
        if lims is not None:
            clip_(o3, lims[0], lims[1])
    return run


def pointwise_run(node, weights, bias, asymmetric: bool):
    """The default resolver's 1x1 CONV_2D at batch 1, stride 1, with fewer output channels than
    input ones (a projection): the integers q = round(x * inv) (clamped about the zero point
    when the row's bounds need it), one GEMM on the dequantized weights, then the row scale and
    the bias on the output, out = (q @ W) * scale + bias: the scale costs a pass over the
    narrower output instead of one over the input (dequantize_rows' last multiply). Float32
    rounding from the two-pass form (dequantize_rows, then the float kernel), as the default
    resolver's other hybrid kernels. (An expansion keeps that form: the float kernel's copy
    into its [x, 1] buffer then carries the bias, and strided passes over a narrow input
    there cost more than they save.)"""
    x, out = node.input(0), node.outputs[0]
    _, h, wd, c = x.shape
    o = out.shape[3]
    p = h * wd
    w2 = np.ascontiguousarray(weights.reshape(o, c).T)                        # [C, O]
    tiled = None if bias is None else np.tile(bias, wd)                      # one row's
    lims = _clamp(node)
    get = Scratch.of(node).reserve([((p, c), F32)])
    multiply, add, matmul = np.multiply, np.add, np.matmul

    def run(x, w_, b_, out):
        q = get()[0]
        scale = _quantized(x.reshape(p, c), q, asymmetric)
        o2 = out.reshape(p, o)
        matmul(q, w2, o2)
        rows = out.reshape(h, wd * o)
        multiply(rows, scale, rows)
        if tiled is not None:
            add(rows, tiled, rows)
        if lims is not None:
            clip_(rows, lims[0], lims[1])
    return run
