"""The default resolver's batch-1 hybrid CONV_2D and DEPTHWISE_CONV_2D forms that run their own
products (issue 17, goal 6; hybrid.py's _dequantized_conv_run routes to them): the input
quantized as LiteRT quantizes it (hybrid.row_parameters, rint's rounding), q = round(x * inv)
clamped about the zero point, and the row scale folded into the weights at each run (a pass
over the [C, O] or tap weights instead of one over the input, where those are the smaller):
out = q @ (W * scale) + bias. Float32 rounding from the two-pass form (dequantize_rows, then
the float kernel on dequantized weights: (q * scale) * w against q * (w * scale)).

- pointwise_run: a 1x1 at stride 1; an expansion (C <= O/2) quantizes into a buffer with a
  column of ones, times the weights with the bias as their last row;
- shifted_conv_run: a stride-1 kxk on a large image: one GEMM of the padded image by every
  tap's weights side by side, then shifted adds (no im2col);
- depthwise_run: the input quantized straight into the taps' padded buffer (taps.TapGrid),
  then the float kernel's einsum on the scaled tap weights.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from edgelite.schema.ops import ACTIVATION_BOUNDS

from .common import activation_code, bounds, clip_, raw
from .geometry import conv_windows
from .hybrid import _HIGH, _LOW, F32, _max, _min, _to_f32, row_parameters
from .scratch import Scratch
from .taps import TapGrid


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


def pointwise_applies(node, x_shape, w_shape, out_shape) -> bool:
    """A batch-1, stride-1, ungrouped 1x1 CONV_2D of more than one pixel: pointwise_run."""
    return (x_shape[0] == 1 and tuple(w_shape[1:3]) == (1, 1) and w_shape[3] == x_shape[3]
            and tuple(out_shape[1:3]) == tuple(x_shape[1:3])
            and tuple(x_shape[1:3]) != (1, 1))


class Pre(NamedTuple):
    """What the producer of a convolution's input left to it (fusion_hybrid.py): the input is
    t = clamp(x * channel, lims) (either part None: absent), computed here exactly."""
    channel: object = None      # float32 [C], or None
    lims: object = None         # (lo, hi) 0-d float32 arrays, or None

    def along_rows(self, width: int) -> "Pre":
        """The channel multipliers tiled along a row of `width` pixels: x [H, W*C] times a
        row [W*C] runs whole rows in numpy's inner loop (a broadcast of [C] restarts it every
        pixel: 1.4-1.6x the time on DenseNet's layers)."""
        if self.channel is None:
            return self
        return self._replace(channel=np.tile(self.channel, width))


def _parameters(x: np.ndarray, asymmetric: bool, lims=None) -> tuple:
    """(scale, inv as float32 scalars, the clamp about the zero point: (lo, hi) or None) of the
    whole block clamp(x, lims): dequantize_rows' one row (row_parameters' numbers). The
    clamp's bounds are those of the values it clamps (monotonic); a lower bound >= 0 (RELU,
    RELU6) leaves rmin 0 whatever x's least value (row_parameters reads lo only as
    min(lo, 0) and -lo), so its min pass is skipped."""
    hi = float(_max(x, None))
    if lims is None:
        lo = float(_min(x, None))
    else:
        a, b = float(lims[0]), float(lims[1])
        hi = min(max(hi, a), b)            # (a NaN stays NaN: Python's max / min keep it)
        lo = 0.0 if a >= 0 else min(max(float(_min(x, None)), a), b)
    scale, inv, zp = row_parameters(lo, hi, asymmetric)
    clamp = None
    if asymmetric and (lo * inv + zp < _LOW or hi * inv + zp > _HIGH):
        clamp = (-128.0 - zp, 127.0 - zp)
    if lims is not None:
        # round(clamp(x, a, b) * inv) = clamp(round(x * inv), round(a * inv), round(b * inv)):
        # float32 rounding and rint are monotonic (inv > 0): one clip for both clamps
        a32, b32 = _rint_f32(a * inv), _rint_f32(b * inv)
        lo_q, hi_q = clamp if clamp is not None else (-np.inf, np.inf)
        clamp = (max(a32, lo_q), min(b32, hi_q))
    return F32.type(scale), F32.type(inv), clamp


def _rint_f32(v: float) -> float:
    """rint(float32(v)) of a double product of two float32 values (exact: float32(v) is their
    float32 product), in Python: round() halves to even, as rint."""
    v = _to_f32(v)
    return float(round(v)) if math.isfinite(v) else v


def _rounded(q: np.ndarray, clamp) -> None:
    """q = round(q) in place (rint), clamped to `clamp` when given."""
    np.rint(q, q)
    if clamp is not None:
        clip_(q, *clamp)


def _quantized(x: np.ndarray, q: np.ndarray, asymmetric: bool, pre: Pre | None = None):
    """q = round(t * inv), clamped about the zero point where the block's bounds need it: the
    integers of dequantize_rows' one row for the whole block t, into `q` of x's shape (any
    strides); returns the row scale as a float32 scalar. t is x, or with `pre` the clamp of
    x times its channel multipliers (their product written into q first)."""
    lims = None
    if pre is not None:
        if pre.channel is not None:
            np.multiply(x, pre.channel, q)
            x = q
        lims = pre.lims
    scale, inv, clamp = _parameters(x, asymmetric, lims)
    np.multiply(x, inv, q)
    _rounded(q, clamp)
    return scale


def _clamp(node):
    """The fused activation's bounds as 0-d float32 arrays, or None (no activation)."""
    code = activation_code(node.options)
    return bounds(*ACTIVATION_BOUNDS[code]) if code in ACTIVATION_BOUNDS else None


def _epilogue(rows, scale, bias_row, lims) -> None:
    """rows times the row scale (None: folded into the weights), plus the tiled bias, clamped."""
    if scale is not None:
        np.multiply(rows, scale, rows)
    if bias_row is not None:
        np.add(rows, bias_row, rows)
    if lims is not None:
        clip_(rows, lims[0], lims[1])


def shifted_conv_run(node, weights, bias, asymmetric: bool, pre: Pre | None = None):
    """The default resolver's kxk CONV_2D without im2col: the input quantized into a buffer
    [H*W, C]; one GEMM of it by every tap's weights side by side times the row scale,
    P = q @ ([W_00 | W_01 | ...] * scale) ([C, kh*kw*O]); then output pixel (y, x) sums
    P[y + i - pt, x + j - pl, tap (i, j)] over the taps whose pixel lies inside the image
    (padding adds nothing): kh*kw adds of [Ho, Wo, O] sub-rectangles, the first from a tap
    that covers the whole output (the centre one for SAME, the first for VALID) with the bias.
    The GEMM's rows are the image's pixels (no zero border's products: a padded layout made
    ~7% more at 56x56 and ~15% at 28x28, 3x3), instead of an im2col copy kh*kw times the
    input's size; the scale costs C*kh*kw*O products (shifted_applies' images are larger
    than kh*kw*O pixels) instead of a pass over the input."""
    x = node.input(0)
    _, h, wd, c = x.shape
    o, kh, kw, _ = weights.shape
    g = conv_windows(node, x.shape, kh, kw)
    ho, wo = g.oh, g.ow
    taps = kh * kw
    w_all = np.ascontiguousarray(weights.transpose(3, 1, 2, 0).reshape(c, taps * o))
    on_weights = taps * o < h * wd
    w_run = np.empty_like(w_all) if on_weights else w_all
    get = Scratch.of(node).reserve([((h * wd, c), F32), ((h * wd, taps * o), F32)])
    pre = None if pre is None else pre.along_rows(wd)
    lims = _clamp(node)
    bias_tile = np.zeros(o, F32) if bias is None else bias
    # per tap: (output rows, output columns, its pixels' rows, columns) where they overlap
    regions = []
    for t, (i, j) in enumerate((i, j) for i in range(kh) for j in range(kw)):
        dy, dx = i - g.pt, j - g.pl
        y0, y1, x0, x1 = max(0, -dy), min(ho, h - dy), max(0, -dx), min(wo, wd - dx)
        if y0 < y1 and x0 < x1:
            regions.append((t, (slice(y0, y1), slice(x0, x1)),
                            (slice(y0 + dy, y1 + dy), slice(x0 + dx, x1 + dx), slice(t * o,
                                                                                   t * o + o))))
    full = next((k for k, (_, (ys, xs), _) in enumerate(regions)
                 if (ys.start, ys.stop, xs.start, xs.stop) == (0, ho, 0, wo)), None)
    if full is not None:
        regions.insert(0, regions.pop(full))
    bound = []

    def bind():
        q, prod = get()
        p3 = prod.reshape(h, wd, taps * o)
        bound.extend([q, q.reshape(h, wd * c), prod, [(dst, p3[src]) for _, dst, src in regions]])
    multiply, add, matmul, copyto = np.multiply, np.add, np.matmul, np.copyto

    def run(x, w_, b_, out):
        if not bound:
            bind()
        q, q_rows, prod, adds = bound
        scale = _quantized(x.reshape(h, wd * c), q_rows, asymmetric, pre)
        if on_weights:
            multiply(w_all, scale, w_run)
        else:
            multiply(q, scale, q)
        matmul(q, w_run, prod)
        o3 = out.reshape(ho, wo, o)
        if full is not None:
            add(adds[0][1], bias_tile, o3)
            rest = adds[1:]
        else:
            copyto(o3, bias_tile)
            rest = adds
        for dst, v in rest:
            part = o3[dst]
            add(part, v, part)
        if lims is not None:
            clip_(o3, lims[0], lims[1])
    return run


def pointwise_run(node, weights, bias, asymmetric: bool, pre: Pre | None = None,
                  clamp_output: bool = True):
    """The default resolver's 1x1 CONV_2D at batch 1, stride 1: the integers q = round(x * inv)
    (clamped about the zero point when the row's bounds need it), one GEMM by the weights
    times the row scale (W * scale at each run: C*O products, where C < the pixels; else the
    scale on the output), then the bias: out = q @ (W * scale) + bias. An expansion (C <= O/2)
    copies q into a buffer [P, C + 1] whose last column is ones, times [W * scale; bias]: the
    bias in the GEMM instead of a pass over the wider output (conv.py's _conv_1x1 does the
    same with the float input)."""
    x, out = node.input(0), node.outputs[0]
    _, h, wd, c = x.shape
    o = out.shape[3]
    p = h * wd
    on_weights = c < p
    ones = bias is not None and on_weights and 2 * c <= o
    w2 = np.ascontiguousarray(weights.reshape(o, c).T)                        # [C, O]
    if ones:
        w_run = np.empty((c + 1, o), F32)
        w_run[c] = bias
    else:
        w_run = np.empty_like(w2) if on_weights else w2
    w_scaled = w_run[:c]
    tiled = None if bias is None or ones else np.tile(bias, wd)              # one row's
    lims = _clamp(node) if clamp_output else None
    pre = None if pre is None else pre.along_rows(wd)
    get = Scratch.of(node).reserve([((p, c), F32)] + [((p, c + 1), F32)] * ones)
    multiply, matmul, copyto = np.multiply, np.matmul, raw(np.copyto)
    item = np.dtype((np.void, 4 * c))

    def run(x, w_, b_, out):
        q, *rest = get()
        scale = _quantized(x.reshape(h, wd * c), q.reshape(h, wd * c), asymmetric, pre)
        buf = q
        if ones:   # q copied in as opaque rows of C floats: ~3x faster than strided passes
            buf = rest[0]
            copyto(buf[:, :c].view(item)[:, 0], q.view(item)[:, 0])
            buf[:, c] = 1.0
        if on_weights:
            multiply(w2, scale, w_scaled)
        matmul(buf, w_run, out.reshape(p, o))
        _epilogue(out.reshape(h, wd * o), None if on_weights else scale, tiled, lims)
    return run


def depthwise_run(node, weights, bias, asymmetric: bool):
    """The default resolver's DEPTHWISE_CONV_2D at batch 1: the input times inv written
    straight into the taps' padded buffer (taps.TapGrid; VALID at stride 1 reads a buffer of
    the input's shape), rounded and clamped there, then conv.depthwise_conv_2d's einsum over
    the tap views by the tiled weights times the row scale (kh*kw*Wo*O products at each run,
    where kh*kw <= Ho; else the scale is a pass over the output), the bias, the clamp: no
    dequantized copy of the input, no pass for the scale over it."""
    x = node.input(0)
    _, h, wd, c = x.shape
    _, kh, kw, o = weights.shape
    g = conv_windows(node, x.shape, kh, kw)
    grids = TapGrid.bands(node, x.shape, g, o // c)
    ho, wo = grids[-1].end, grids[0].wo
    tiled = [np.empty((kh, len(cols), wo * o), F32) for cols in grids[0].columns]
    grids[0].tile_weights(tiled, weights)
    on_weights = kh * kw <= ho
    scaled = [np.empty_like(t) for t in tiled] if on_weights else tiled
    pairs = list(zip(tiled, scaled))
    direct = grids[0].padded is None
    q = np.empty(x.shape, F32) if direct else None
    bias_row = None if bias is None else np.tile(bias, wo)
    lims = _clamp(node)
    multiply, add, einsum = np.multiply, np.add, np.einsum
    rest = range(1, len(tiled))

    def run(x, w_, b_, out):
        scale, inv, clamp = _parameters(x, asymmetric)
        if on_weights:
            for t, s in pairs:
                multiply(t, scale, s)
        if direct:
            multiply(x, inv, q)
            _rounded(q, clamp)
        acc = out.reshape(1, ho, wo * o)
        for grid in grids:
            if direct:
                views, partial = grid.views(q)
            else:
                views, partial = grid.views(x, inv)
                _rounded(grid.padded.buffer, clamp)
            band = acc[:, grid.start:grid.end]
            einsum("ijnyk,ijk->nyk", views[0], scaled[0], out=band)
            for k in rest:
                einsum("ijnyk,ijk->nyk", views[k], scaled[k], out=partial)
                add(band, partial, out=band)
        _epilogue(acc[0], None if on_weights else scale, bias_row, lims)
    return run
