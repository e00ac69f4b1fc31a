"""CONV_2D and DEPTHWISE_CONV_2D on int8 (per-channel weights) and uint8 (per-tensor), bit-exact
to TFLite's reference kernels (reference_integer_ops::ConvPerChannel, DepthwiseConvPerChannel;
reference_ops::Conv, DepthwiseConv for uint8).

The integer sums run on float BLAS: raw 8-bit values as float32 are exact while every partial
sum stays below 2^24 (checked in prepare from the weights; float64 otherwise). Zero points fold
into the bias with precomputed weight sums: sum w (x - zx) = sum w x - zx sum w, and padding
holds zx, so padded taps add w zx - zx w = 0, as TFLite skips them. The requantization
(requantize.Requantizer) reads the float accumulators; the temporaries live in the interpreter's
shared Scratch. CONV_2D runs in blocks of output rows (im2col patches, GEMM, requantization).

Where the rounding error stays small enough (few inputs per output; most depthwise layers),
the float weights carry the requantization scale (and CONV_2D's ones column the whole offset),
which saves the requantizer its multiply and add passes; the few outputs the error bound
leaves near a rounding edge are recomputed exactly from the patches or the input.
"""
from __future__ import annotations

import sys
from functools import partial

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .common import activation_code, raw, with_optional_inputs
from .conv_integer import PaddedSource, RowBlocks, conv_setup, integer_bias
from .fixed_point import EXACT_F32, exact_float_type
from .geometry import pool_windows
from .int8_stage import copy, finished, requantized_step
from .registry import register
from .requantize import Requantizer, exact_rounding
from .scratch import Scratch
from .steps import call, calls_step
from .taps import check_padded

IN_PLACE = 1 << 17       # outputs from which requantization runs in place
SCALED_WIDTH = 4.5e-3    # the most outputs (fraction) near an edge for the scale in the weights
OWN_COLUMNS = 16 << 10   # a bound CONV_2D's single block of patches up to this size is its own
TAKE_BELOW_CHANNELS = 4  # a pooled convolution of fewer input channels gathers by a take
SPEC = "ijnyk,ijk->nyk"  # DEPTHWISE_CONV_2D's sums: taps [kh, taps, n, oh, row] times weights
ROW_SPEC = "ij,ij->j"    # the same of one output row (n = oh = 1): taps [kh * taps, row]
# np.einsum without its Python wrapper (what it calls when not optimizing); bound steps look it
# up here on each call, as call((_MODULE, "einsum"), ...) (tests/interpreter/
# test_quantized_passes.py counts it).
try:
    from numpy._core.multiarray import c_einsum as einsum  # noqa: F401
except ImportError:   # numpy < 2
    from numpy.core.multiarray import c_einsum as einsum  # noqa: F401


_MODULE = sys.modules[__name__]   # (where bound steps look `einsum` up)


def _dot_rows(rows: np.ndarray, wrows: np.ndarray, near: np.ndarray) -> np.ndarray:
    """The GEMM's sums at flat output indices `near` (exact: float32-exact integers), from
    its patch rows and the weights as rows (channels, patch)."""
    p, ch = np.divmod(near, wrows.shape[0])
    return np.einsum("ij,ij->i", np.take(rows, p, axis=0),
                     np.take(wrows, ch, axis=0)).astype(np.int64)


@register("CONV_2D", "int8", "uint8")
def conv_2d(node, input_lift: int = 0):
    """`input_lift`: the input arrives as float32 values + that lift (int8 + 128: [0, 255]),
    written into the patches by the op before it (fusion_int8.py): the lift joins the input
    zero point, the sums are the same integers."""
    key = node.input(0).type_name
    x, wc, win, groups, cout, zx, zo, multiplier, shift, lo, hi = conv_setup(node, key, False)
    zx += input_lift
    _, kh, kw, cg = wc.shape
    n, cin = x.shape[0], x.shape[3]
    oh, ow = win.oh, win.ow
    bias = integer_bias(node, 2, cout) - zx * wc.reshape(cout, -1).sum(1)
    x_max = 128 if key == "int8" and not input_lift else 255
    acc_bound = np.abs(wc).reshape(cout, -1).sum(1) * x_max
    ftype = exact_float_type(float(acc_bound.max(initial=0)))
    k = kh * kw * cg
    per_group = cout // groups
    patch = kh * kw * cin                            # one pixel's patch (all groups)
    source = PaddedSource(x.shape, x.dtype, win, zx)
    check_padded(node, *source.size)
    # A 1x1 convolution at stride 1 reads the input rows as they are.
    plain = kh == kw == 1 and (win.sh, win.sw) == (1, 1) and source.direct
    chunks = RowBlocks(n, oh, ow * max((patch + 1) * groups, cout))
    most = chunks.most_rows * ow
    wint = wc.reshape(cout, k).T                                     # (k, cout)

    # Exact integer sums: the bias may be a last row of the weights, times a column of ones in
    # the patches (exact while |acc| + |bias| < 2^24; not for a few input channels read
    # straight, where the strided copy costs more than the bias does in the requantizer).
    fold = groups == 1 and ftype == np.float32 and not (plain and patch < 64) and \
        float((acc_bound + np.abs(bias)).max(initial=0)) < EXACT_F32
    exact = exact_rounding(node)
    requant = Requantizer(multiplier, shift, zo, lo, hi, (most, cout), bias,
                          acc_bound if ftype == np.float32 else None, tile=ow, bias_in_acc=fold,
                          exact=exact)
    scaled = False
    if groups == 1 and ftype == np.float32 and (not requant.tiny or not exact):
        # Or the scale and the whole offset in the float weights (no multiply or add pass),
        # while the GEMM's rounding leaves few outputs near an edge to redo (or, not `exact`,
        # whatever their number: they stay within 1, see Requantizer._finish).
        real = multiplier.astype(np.float64) * np.exp2(shift.astype(np.float64) - 31)
        terms = acc_bound * real + np.abs(bias) * real + abs(zo) + 131
        error = (patch + 3) * 2.0 ** -24 * (1 + 2.0 ** -20) * terms
        other = Requantizer(multiplier, shift, zo, lo, hi, (most, cout), bias, tile=ow,
                            scaled_error=error, exact=exact)
        if other.fast and (other.width <= SCALED_WIDTH or not exact):
            scaled, fold, requant = True, True, other
    if scaled:
        wmats = [np.concatenate([(wint * real).astype(np.float32), requant.offset[None, :]])]
        wrows = np.concatenate([wint, np.zeros((1, cout), np.int64)]).T.astype(np.float32)
    else:
        wmats = [np.ascontiguousarray(wint[:, g * per_group:(g + 1) * per_group], dtype=ftype)
                 for g in range(groups)]
        if fold:
            wmats = [np.concatenate([wmats[0], bias[None, :].astype(ftype)])]
        wrows = np.ascontiguousarray(wmats[0].T) if groups == 1 else None
    kc = patch + fold
    buffers = Scratch.of(node).reserve([((most, kc), ftype), ((most, cout), ftype)]
                                       + requant.specs)
    cache = {}

    def windows(src):
        view = cache.get("view")
        if view is None or cache.get("src") is not src:
            view = win.patches(src)
            cache["view"], cache["src"] = view, src
        return view

    bound = []

    def bind(x, out):
        """Per chunk, the views a not-exact scaled run uses (see fast_run)."""
        cols, acc_f, *work = buffers()
        flat = out.reshape(n * oh * ow, cout)
        view = None if plain else windows(source.buffer if not source.direct else x)
        rows = x.reshape(n * oh * ow, cin) if plain else None
        steps = []
        for b, r0, r1 in chunks:
            p = (r1 - r0) * ow
            start = (b * oh + r0) * ow
            c = cols[:p]
            if plain:
                dest, src = c[:, :patch], rows[start:start + p]
            else:
                dest = c[:, :patch].reshape(r1 - r0, ow, kh, kw, cin)
                src = view[b, r0:r1]
            steps.append((dest, src, c[:, patch], c, acc_f[:p], flat[start:start + p]))
        bound[:] = [x, out, steps, work]

    def fast_run(x, w_, b_, out):
        """Scaled float weights, rounding within 1 (not `exact`: nothing to redo, so the
        views are bound once): patches, ones, matmul, then the requantizer's float passes."""
        if not bound or bound[0] is not x or bound[1] is not out:
            bind(x, out)
        if not source.direct:
            source(x)
        wm, work = wmats[0], bound[3]
        for dest, src, ones, c, acc, flat in bound[2]:
            np.copyto(dest, src, casting="unsafe")
            ones.fill(1.0)
            np.dot(c, wm, acc)
            requant.finish(acc, flat, work, None)

    def run(x, w_, b_, out):
        cols, acc_f, *work = buffers()
        flat = out.reshape(n * oh * ow, cout)
        if plain:
            rows = x.reshape(n * oh * ow, cin)
        else:
            view = windows(source(x))
        for b, r0, r1 in chunks:
            p = (r1 - r0) * ow
            start = (b * oh + r0) * ow
            c = cols[:p]
            if plain:
                np.copyto(c[:, :patch], rows[start:start + p], casting="unsafe")
            else:
                np.copyto(c[:, :patch].reshape(r1 - r0, ow, kh, kw, cin), view[b, r0:r1],
                          casting="unsafe")
            if fold:
                c[:, patch] = 1.0
            if groups == 1:
                np.matmul(c, wmats[0], out=acc_f[:p])
            else:
                for g, wm in enumerate(wmats):
                    part = np.ascontiguousarray(
                        c.reshape(p, kh, kw, cin)[..., g * cg:(g + 1) * cg]).reshape(p, k)
                    np.matmul(part, wm, out=acc_f[:p, g * per_group:(g + 1) * per_group])
            if scaled:
                requant.finish(acc_f[:p], flat[start:start + p], work,
                               partial(_dot_rows, c, wrows))
            elif groups == 1 and p * cout >= IN_PLACE:
                # In place; the sums of the few it redoes, exact again from the patches.
                requant(acc_f[:p], flat[start:start + p], work, partial(_dot_rows, c, wrows))
            else:
                requant(acc_f[:p], flat[start:start + p], work)

    def fixed(x, w_, b_, out):
        """`fast_run` on the plan's fixed arrays (plan.bind_step): the same copies, matmuls
        and requantization passes as calls (steps.calls_step: a line of the plan's
        run_steps), their views and the requantizer's constants made once."""
        bind(x, out)                # (which made source's padded buffer and its interior)
        # source(x) on fixed arrays: the input into the padded one
        copies = () if source.direct else \
            ((source.interior, x[:, :source.rows, :source.cols]),)
        wm, work = wmats[0], bound[3]
        blocks = []
        for dest, src, ones, c, acc, flat in bound[2]:
            tail = requant.bind_finish(acc, flat, work, False)
            if tail is None:
                return None
            blocks.append((dest, src, ones, c, acc, tail))
        dot = raw(np.dot)
        if len(blocks) == 1 and blocks[0][3].nbytes <= OWN_COLUMNS:
            # One small block: patches of its own, the ones column set here once (the shared
            # buffer is another kernel's between runs).
            dest, src, _ones, c, acc, tail = blocks[0]
            c = np.empty(c.shape, c.dtype)
            c[:, patch] = 1.0
            dest = c[:, :patch] if plain else c[:, :patch].reshape(dest.shape)
            return requantized_step(dest if plain else None, copies + ((dest, src),),
                                    (call(dot, c, wm, acc),), tail)
        return calls_step(*[copy(*pair) for pair in copies],
                          *[one for dest, src, ones, cols, acc, tail in blocks
                            for one in (copy(dest, src), call(ones.fill, 1.0),
                                        call(dot, cols, wm, acc), *finished(tail))])

    fast_run.bind = fixed
    chosen = fast_run if scaled and not exact and groups == 1 and len(chunks) <= 64 else run
    if chosen is fast_run and len(chunks) == 1 and not plain and len(node.inputs) == 3:
        fast_run.pool_fusion = lambda g: _pooled_conv(
            g, n, oh, ow, kh, kw, cin, cout, patch, source, win, wmats[0], requant, buffers)
    result = with_optional_inputs(node, chosen, 3)             # (fast_run: views per block)
    # fusion_int8.py: whether a bound run may give a Stage (one small block), and take its
    # input from the op before (read straight: 1x1 at stride 1).
    result.stage_out = chosen is fast_run and len(chunks) == 1 and \
        most * kc * np.dtype(ftype).itemsize <= OWN_COLUMNS and getattr(requant, "lift", 0) == 128
    result.stage_in = result.stage_out and plain
    return result


def max_pool_fusion(conv, pool):
    """CONV_2D (int8, the default resolver's scaled path, one block of patches) then a
    MAX_POOL_2D whose windows tile its output (plan fusion, fusion.py): run(x, w, bias, pooled)
    or None. The patches' rows go in the order (window tap, pooled pixel), so the GEMM's output
    is [taps, pooled pixels * cout] and the pool one maximum.reduce over its first axis, on the
    float sums: the requantization (clip, floor, the sign flip) is monotonic, so it commutes
    with the maximum and runs on the pooled sums alone, the same bits as the two ops. The
    convolution's int8 output is never written."""
    make = getattr(conv.run, "pool_fusion", None)
    if make is None or activation_code(pool.node.options):
        return None
    g = pool_windows(pool.node)
    if (g.kh, g.kw) != (g.sh, g.sw) or g.pt or g.pl or g.kh * g.kw == 1:
        return None
    return make(g)


def _pooled_conv(g, n, oh, ow, kh, kw, cin, cout, patch, source, win, wm, requant, buffers):
    taps, (poh, pw) = g.kh * g.kw, (g.oh, g.ow)
    if poh * g.kh > oh or pw * g.kw > ow:
        return None
    pixels = n * poh * pw
    cols = np.empty((taps * pixels, patch + 1), np.float32)
    cols[:, patch] = 1.0
    dest = cols[:, :patch].reshape(g.kh, g.kw, n, poh, pw, kh, kw, cin)
    acc = np.empty((taps * pixels, cout), np.float32)
    pooled = np.empty((pixels, cout), np.float32)
    flat = pooled.reshape(-1)
    # The maximum over the taps' rows in halves (taps 4: two calls; numpy's maximum.reduce
    # over the first axis of 4 rows costs 1.2 µs where two maxima cost 0.6)
    halves, rows = [], acc.reshape(taps, pixels * cout)
    while len(rows) > 1:
        h = len(rows) // 2
        into = flat.reshape(1, -1) if h == 1 else np.empty((h, flat.size), np.float32)
        halves.append((rows[:h], rows[h:2 * h], into))
        if len(rows) % 2:
            halves.append((into[:1], rows[2 * h:], into[:1]))
        rows = into
    made = []

    def views(x):
        """The padded copy's interior and input rows (None: direct), and the windows in the
        order (window tap row, column, n, pooled row, column, kh, kw, cin)."""
        src = source.buffer if not source.direct else x
        view = win.patches(src)[:, :poh * g.kh, :pw * g.kw]
        view = view.reshape(n, poh, g.kh, pw, g.kw, kh, kw, cin).transpose(2, 4, 0, 1, 3, 5,
                                                                            6, 7)
        inner = None if source.direct else x[:, :source.rows, :source.cols]
        return (source.interior if inner is not None else None), inner, view

    # Few input channels (the first layer: 1 or 3): the bound run's patches as one take of
    # precomputed indices from a float32 padded copy with a 1.0 after it (the ones column
    # too); numpy's strided copy of runs of `cin` values costs 2x (digits CNN: 1.5 -> 0.7 µs).
    gather = None
    if cin < TAKE_BELOW_CHANNELS and not source.direct:
        shape, fill, _, (pt, pl) = source._make
        size = int(np.prod(shape))
        padded = np.full(size + 1, fill, np.float32)
        padded[size] = 1.0
        ids = win.patches(np.arange(size).reshape(shape))[:, :poh * g.kh, :pw * g.kw]
        ids = ids.reshape(n, poh, g.kh, pw, g.kw, kh, kw, cin).transpose(2, 4, 0, 1, 3, 5, 6, 7)
        index = np.empty(cols.shape, np.intp)
        index[:, :patch] = ids.reshape(len(cols), patch)
        index[:, patch] = size
        interior = padded[:size].reshape(shape)[:, pt:pt + source.rows, pl:pl + source.cols]
        gather = padded, interior, index

    def run(x, w_, b_, out):
        if not made or made[0] is not x:
            made[:] = [x, *views(x)]
        _, interior, inner, view = made
        if interior is not None:
            np.copyto(interior, inner, casting="unsafe")
        np.copyto(dest, view, casting="unsafe")
        np.dot(cols, wm, acc)
        for a, b, into in halves:
            np.maximum(a, b, out=into)
        requant.finish(pooled, out, buffers()[2:], None)

    def bind(x, w_, b_, out):
        """`run` on the plan's fixed arrays (plan.bind_step): the same calls, as a step of
        calls (int8_stage.requantized_step)."""
        if not out.flags.c_contiguous:
            return None
        interior, inner, view = views(x)
        tail = requant.bind_finish(pooled, out, buffers()[2:], False)
        if tail is None:
            return None
        dot = raw(np.dot)
        pooled_sums = (call(dot, cols, wm, acc),) + tuple(
            call((np, "maximum"), a, b, out=into) for a, b, into in halves)
        if tail.passes is not None and gather is not None:
            # the patches by one take (and the ones column with them)
            padded, interior, index = gather
            return requantized_step(None, ((interior, inner),), (call(
                padded.take, index, None, cols, "clip"),) + pooled_sums, tail)
        copies = ((interior, inner),) if interior is not None else ()
        return requantized_step(None, copies + ((dest, view),), pooled_sums, tail)
    run.bind = bind
    run.stage_out, run.stage_in = getattr(requant, "lift", 0) == 128, False
    return run


class _Phase:
    """Column phase b of the padded input (padded columns b, b + sw, ...) as a depthwise
    convolution reads it: the input's columns copied in (as float, channels repeated `mult`
    times), the border set to the input zero point (the buffer is shared, so on every run)."""

    def __init__(self, b, x_shape, need_h, need_w, sw, pad, mult):
        n, h, w, cin = x_shape
        pt, pl = pad
        width = len(range(b, need_w, sw))
        self.shape = (n, need_h, width, cin * mult)
        rows = max(0, min(h, need_h - pt))
        first = (b - pl) % sw                 # the first input column in this phase
        q0 = (pl + first) // sw               # where it lands
        count = max(0, min(len(range(first, w, sw)), width - q0))
        self.mult = mult
        self.rows = (pt, pt + rows)
        self.cols = (q0, q0 + count)
        self.source = (slice(None), slice(0, rows), slice(first, first + sw * count, sw))
        self.empty = rows == 0 or count == 0

    def bind_fill(self, plane, x, zx) -> tuple:
        """`fill(plane, x, zx)` on fixed arrays as a call (steps.call): one copy where the
        input covers the whole plane, channels not repeated."""
        (r0, r1), (q0, q1) = self.rows, self.cols
        whole = not self.empty and self.mult == 1 and (r0, q0) == (0, 0) and \
            (r1, q1) == plane.shape[1:3]
        return copy(plane, x[self.source]) if whole else call(self.fill, plane, x, zx)

    def fill(self, plane, x, zx) -> None:
        (r0, r1), (q0, q1) = self.rows, self.cols
        if self.empty:
            plane.fill(zx)
            return
        if r0:
            plane[:, :r0] = zx
        if r1 < plane.shape[1]:
            plane[:, r1:] = zx
        if q0:
            plane[:, r0:r1, :q0] = zx
        if q1 < plane.shape[2]:
            plane[:, r0:r1, q1:] = zx
        dest = plane[:, r0:r1, q0:q1]
        src = x[self.source]
        if self.mult > 1:
            dest = dest.reshape(dest.shape[:-1] + (-1, self.mult))
            src = src[..., None]
        np.copyto(dest, src, casting="unsafe")


@register("DEPTHWISE_CONV_2D", "int8", "uint8")
def depthwise_conv_2d(node):
    key = node.input(0).type_name
    x, wc, win, mult, cout, zx, zo, multiplier, shift, lo, hi = conv_setup(node, key, True)
    wc = wc[0]                                                      # (kh, kw, cout)
    kh, kw = wc.shape[:2]
    n, h, wd, cin = x.shape
    oh, ow, pad = win.oh, win.ow, (win.pt, win.pl)
    bias = integer_bias(node, 2, cout) - zx * wc.reshape(-1, cout).sum(0)
    acc_bound = np.abs(wc).reshape(-1, cout).sum(0) * (128 if key == "int8" else 255)
    # The float weights carry the requantization scale (one pass fewer), the sums then being
    # within (taps + 2) roundings of sum |x w R| of the exact product.
    # Small outputs requantize exact integer sums in float64 (requantize.TINY).
    ftype = exact_float_type(float(acc_bound.max(initial=0)))
    exact = exact_rounding(node)
    requant = Requantizer(multiplier, shift, zo, lo, hi, (n * oh * ow, cout), bias,
                          acc_bound if ftype == np.float32 else None, tile=ow, exact=exact)
    scaled = False
    if (not requant.tiny or not exact) and ftype == np.float32:
        real = multiplier.astype(np.float64) * np.exp2(shift.astype(np.float64) - 31)
        error = (kh * kw + 2) * 2.0 ** -24 * (1 + 2.0 ** -20) * acc_bound * real
        scaled_requant = Requantizer(multiplier, shift, zo, lo, hi, (n * oh * ow, cout), bias,
                                     tile=ow, scaled_error=error, exact=exact)
        scaled = scaled_requant.fast
        if scaled:
            requant = scaled_requant
    ftype, taps = (np.float32, wc * real) if scaled else (ftype, wc)
    folded = None
    if scaled and not exact and n * oh * ow == 1 and mult == 1 and (kh, kw) == (h, wd) \
            and pad == (0, 0) and (win.dh, win.dw) == (1, 1):
        # One output pixel of the whole input (a streaming model's step), not `exact`: the
        # offset as a last row of the weights times a row of ones (no add pass; its roundings
        # inside the sum, bounded as CONV_2D's ones column), one 2-d einsum over the input's
        # pixels, into buffers of its own.
        terms = acc_bound * real + np.abs(bias) * real + abs(zo) + 131
        error = (kh * kw + 3) * 2.0 ** -24 * (1 + 2.0 ** -20) * terms
        other = Requantizer(multiplier, shift, zo, lo, hi, (1, cout), bias,
                            scaled_error=error, exact=False)
        if other.fast:
            requant = other
            k = kh * kw
            plane = np.empty((k + 1, cout), np.float32)
            plane[k] = 1.0
            weights = np.concatenate([taps.reshape(k, cout).astype(np.float32),
                                      other.offset[None, :]])
            # The sums as a product pass then a ones row times it (np.dot's sgemv): 0.3 µs
            # less a step than numpy's 2-d einsum at 4 to 18 taps of 64 channels.
            folded = (plane, plane[:k].reshape(x.shape), weights, np.empty(cout, np.float32),
                      np.empty(plane.shape, np.float32), np.ones((1, k + 1), np.float32))
    sh, sw, dh, dw = win.sh, win.sw, win.dh, win.dw
    if ow == 1:
        sw = 1   # one output column: the stride (past the padding) moves nothing; no phases

    # Taps as views whose innermost axis is a whole output row (ow * cout values), so numpy runs
    # long inner loops. With stride_w > 1 consecutive outputs' pixels are sw apart: the input is
    # copied into sw column phases (phase b holds padded columns b, b + sw, ...; borders hold
    # zx; channels repeated `mult` times); tap column j * dw + sw * x is then position
    # (j * dw) // sw + x of phase (j * dw) % sw.
    need_h, need_w = win.rows, win.cols
    check_padded(node, n * need_h * need_w * cin, n * h * wd * cin)
    phases = [_Phase(b, x.shape, need_h, need_w, sw, pad, mult) for b in range(sw)]
    row = ow * cout
    tap_groups = []                   # (phase, first offset, offset step, taps weights)
    for b in range(sw):
        js = [j for j in range(kw) if (j * dw) % sw == b]
        if js:
            offsets = [(j * dw) // sw for j in js]
            step = offsets[1] - offsets[0] if len(js) > 1 else 0
            weights = np.stack([np.stack([np.tile(taps[i, j].astype(ftype), ow) for j in js])
                                for i in range(kh)])
            tap_groups.append((b, offsets[0], step, weights))
    specs = [((n, oh, row), ftype), ((n, oh, row), ftype)]
    buffers = Scratch.of(node).reserve(specs + [(p.shape, ftype) for p in phases]
                                       + requant.specs)
    item = np.dtype(ftype).itemsize
    # For the exact sums of a few outputs: each output pixel's input pixel per tap (flat over
    # n, h, w), -1 in the padding; the weights per channel.
    tap_y = np.arange(oh)[:, None] * sh + np.arange(kh) * dh - pad[0]            # (oh, kh)
    tap_x = np.arange(ow)[:, None] * sw + np.arange(kw) * dw - pad[1]            # (ow, kw)
    inside = ((tap_y >= 0) & (tap_y < h))[:, None, :, None] & \
        ((tap_x >= 0) & (tap_x < wd))[None, :, None, :]
    pixel = tap_y[:, None, :, None] * wd + tap_x[None, :, None, :]              # (oh, ow, kh, kw)
    sources = (np.arange(n)[:, None, None, None, None] * (h * wd)
               + np.where(inside, pixel, -1 - np.arange(n)[:, None, None, None, None] * (h * wd)))
    sources = sources.reshape(n * oh * ow, kh * kw).astype(np.int32)
    tap_weights = wc.reshape(kh * kw, cout).T.copy()                              # (cout, taps)
    tap_weights_f = tap_weights.astype(np.float32)
    # At stride 1 the plane is the padded input: flat offsets of each output's first tap and
    # of the taps from it.
    plane_pixels = ((np.arange(n)[:, None, None] * need_h + np.arange(oh)[None, :, None] * sh)
                    * need_w + np.arange(ow)[None, None, :]).reshape(-1) * cout
    plane_taps = ((np.arange(kh)[:, None] * dh * need_w + np.arange(kw)[None, :] * dw)
                  .reshape(-1) * cout)
    bound = []

    def bind():
        """The taps as strided views [kh, taps, n, oh, row] of the phase buffers."""
        acc, part, *rest = buffers()
        planes, work = rest[:sw], rest[sw:]
        groups = []
        for b, first, step, weights in tap_groups:
            base = planes[b].reshape(n, need_h, -1)[:, :, first * cout:]
            s0, s1, _ = base.strides
            taps = weights.shape[1]
            tap_stride = step * cout * item
            if n * oh == 1 and (taps == 1 or kh == 1 or dh * s1 == taps * tap_stride):
                # One output row: the taps as a plain (taps, row) matrix, a 2-d einsum
                # (numpy's 5-d one costs 0.3 µs a call more)
                view = as_strided(base, (kh * taps, row), (tap_stride if taps > 1 else
                                                           dh * s1, item), writeable=False)
                groups.append((ROW_SPEC, view, weights.reshape(kh * taps, row)))
                continue
            view = as_strided(base, (kh, taps, n, oh, row),
                              (dh * s1, tap_stride, s0, sh * s1, item), writeable=False)
            groups.append((SPEC, view, weights))
        if n * oh == 1:
            acc, part = acc.reshape(row), part.reshape(row)   # (either shape fits both specs)
        bound.extend([planes, groups, acc, part, acc.reshape(n * oh * ow, cout), work])

    def exact_acc(x, near):
        """The exact sums at flat output indices `near`: from the padded plane at stride 1,
        else from the input itself."""
        pix, c = np.divmod(near, cout)
        if sw == 1:
            start = np.take(plane_pixels, pix) + c
            vals = np.take(bound[0][0].reshape(-1), start[:, None] + plane_taps)
            return np.einsum("ij,ij->i", vals, np.take(tap_weights_f, c, axis=0))
        src = np.take(sources, pix, axis=0)
        flat = src * cin + ((c // mult)[:, None] if mult > 1 else c[:, None])
        vals = np.where(src < 0, zx, np.take(x.reshape(-1), flat, mode="clip").astype(np.int64))
        return np.einsum("ij,ij->i", vals, np.take(tap_weights, c, axis=0))

    def run(x, w_, b_, out):
        if not bound:
            bind()
        planes, groups, acc, part, acc2, work = bound
        if folded is not None:
            ones_plane, head, weights, acc1, products, ones = folded
            np.copyto(head, x, casting="unsafe")
            np.multiply(ones_plane, weights, out=products)
            np.dot(ones, products, acc1.reshape(1, -1))
            requant.finish(acc1, out, work, None)
            return
        for phase, plane in zip(phases, planes):
            phase.fill(plane, x, zx)
        spec, view, weights = groups[0]
        np.einsum(spec, view, weights, out=acc)
        for spec, view, weights in groups[1:]:
            np.einsum(spec, view, weights, out=part)
            np.add(acc, part, out=acc)
        if scaled:
            requant.scaled(acc2, out.reshape(acc2.shape), work, lambda near: exact_acc(x, near))
        else:
            requant(acc2, out.reshape(acc2.shape), work, lambda near: exact_acc(x, near))

    def fixed(x, w_, b_, out):
        """`run` on the plan's fixed arrays (plan.bind_step), scaled and not `exact` (nothing
        redone from the input): the same fills, einsums and requantization passes, with their
        views, reshapes and constants made once. None otherwise."""
        if not scaled or exact:
            return None
        if not bound:
            bind()
        planes, groups, acc, part, acc2, work = bound
        if folded is not None:
            ones_plane, head, weights, acc1, products, ones = folded
            finish = requant.bind_finish(acc1, out, work, False)
            if finish is None:
                return None
            return requantized_step(None, ((head, x),), (
                call((np, "multiply"), ones_plane, weights, out=products),
                call(raw(np.dot), ones, products, acc1.reshape(1, -1))), finish)
        tail = requant.bind_finish(acc2, out.reshape(acc2.shape), work, True)
        if tail is None:
            return None
        # (c_einsum looked up in this module on each call, as the tests count it)
        (spec, view, weights), rest = groups[0], groups[1:]
        return calls_step(*[phase.bind_fill(plane, x, zx) for phase, plane in zip(phases, planes)],
                          call((_MODULE, "einsum"), spec, view, weights, out=acc),
                          *[one for sp, v, w in rest
                            for one in (call((_MODULE, "einsum"), sp, v, w, out=part),
                                        call((np, "add"), acc, part, acc))],
                          *finished(tail))

    run.bind = fixed
    result = with_optional_inputs(node, run, 3)
    result.stage_out = folded is not None and scaled and not exact and \
        getattr(requant, "lift", 0) == 128
    result.stage_in = False
    return result
