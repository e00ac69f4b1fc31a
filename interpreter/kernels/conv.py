"""CONV_2D, DEPTHWISE_CONV_2D and TRANSPOSE_CONV on float32 NHWC data.

Convolutions run as BLAS matmuls: a 1x1 convolution is one matmul on the (N*H*W, C) view, a
kxk one copies its windows into an im2col buffer (strided views of a padded input buffer
allocated once) whose extra column of ones multiplies a bias row of the weights. A depthwise
convolution is an `einsum` over strided views of all its taps whose innermost axis is a whole
output row (Wo*C contiguous values; for stride_w > 1 the input is first split into column
phases), weights tiled along the row in prepare: numpy's multiply-add loop then runs over long
contiguous rows (per-tap multiply and add passes are slower). The tap views and the padded
buffers they read are taps.py's `Window` and `TapGrid`; the shapes and checks geometry.py's.
"""
from __future__ import annotations

import numpy as np

from .common import (F32, activation_code, bias_epilogue, bound_on_call, check_float,
                     clamp_activation, clip, fixed_view, raw, reference_resolver,
                     with_optional_inputs)
from .steps import call, calls_step
from .geometry import (conv_2d_groups, conv_windows, depthwise_multiplier, pool_windows,
                       transpose_conv_shape)
from . import reference_order
from .registry import register
from .scratch import Scratch
from .taps import TapGrid, Window, opaque_items, patch_accumulator, scatter_patches


# -- CONV_2D ---------------------------------------------------------------------------------

@register("CONV_2D", "float32")
def conv_2d(node):
    x, w, b = _float_inputs(node)
    groups = conv_2d_groups(node, x.shape, w.shape)
    n, o, (kh, kw), cg = x.shape[0], w.shape[0], w.shape[1:3], w.shape[3]
    _check_bias(node, b, o)
    if reference_order.applies(node, x.shape, w.shape, depthwise=False):   # BUILTIN_REF
        return with_optional_inputs(node, reference_order.prepare(node, x, w, b, False), 3)
    win = Window(node, x.shape, conv_windows(node, x.shape, kh, kw))
    node.outputs[0].shape = (n, win.ho, win.wo, o)
    act = clamp_activation(node.options.fused_activation_function, node, _xnnpack(node, w))
    if kh == kw == 1 and win.padded is None:
        run = _conv_1x1(node, win, groups, cg, o, b, act)
    else:
        run = _conv_im2col(node, win, groups, cg, o, kh, kw, act)
    adapted = with_optional_inputs(node, run, 3)
    if hasattr(run, "gather"):
        adapted.gather, adapted.input_tail = run.gather, run.input_tail
    return adapted


def _xnnpack(node, w) -> bool:
    """Whether LiteRT's default resolver runs this convolution in XNNPACK (constant weights),
    whose range is unbounded (no +-FLT_MAX clamp): as in whole models (mp_face_detection's inf
    stays inf there), though a one-op model's convolution comes out clamped."""
    return w.data is not None and not reference_resolver(node)


def _float_inputs(node):
    """A convolution's float32 input, filter and optional bias (None when omitted)."""
    node.expect_inputs(2, 3)
    x, w, b = node.input(0), node.input(1), node.optional_input(2)
    check_float(node, x, w, b)
    return x, w, b


def _check_bias(node, b, channels: int) -> None:
    if b is not None and tuple(b.shape) != (channels,):
        raise node.fail(f"bias shape {list(b.shape)} does not match {channels} output channels")


def _grouped_weights(w, groups, with_bias_row=None):
    """Filter [O, kh, kw, Cg] as [G, K(+1), O/G] matmul operands (a bias row appended)."""
    o = w.shape[0]
    k = w.size // o
    wg = w.reshape(groups, o // groups, k).transpose(0, 2, 1)
    if with_bias_row is None:
        return wg
    bias = np.asarray(with_bias_row, F32).reshape(groups, 1, o // groups)
    return np.ascontiguousarray(np.concatenate([wg, bias], axis=1))


# The most elements of a 1x1 convolution's output that get its bias tiled over all of them
# (a float32 copy of that size kept for the step).
BIAS_TILE_ELEMENTS = 1 << 14
# The most multiply-adds of a 1x1 convolution run through np.dot rather than np.matmul.
DOT_MACS = 1 << 17


def _conv_1x1(node, win, groups, cg, o, b, act):
    """A 1x1 convolution: one matmul per group on the (N*H*W, C) view.

    A strided input is first gathered into a work buffer with a column of ones, times the
    weights with the bias as their last row (the bias then costs one more multiply-add per
    output instead of a pass over the output). A large output from a narrow input (an
    expansion: C <= O/2) copies its input there too: the copy is cheaper than the pass."""
    n, ho, wo = win.shape[:3]
    p, og = n * ho * wo, o // groups
    strided = win.sh > 1 or win.sw > 1
    const_w = node.inputs[1].data
    # Contiguous [G, C, O/G] (not the transposed view): OpenBLAS's AVX-512 kernels are up to
    # 1.45x slower on the view for few pixels (MobileNetV2's 7x7 layers: 49 rows).
    wg_const = None if const_w is None else \
        np.ascontiguousarray(_grouped_weights(const_w, groups))
    with_ones = (groups == 1 and b is not None and b.data is not None and const_w is not None
                 and (strided or (2 * cg <= o and p * o >= 1 << 18)))
    if with_ones:
        wg_const = _grouped_weights(const_w, 1, b.data)      # [1, C + 1, O]
        tail = None if act is None else (lambda out, bias: act(out.reshape(n * ho, wo * o)))
        if tail is not None:
            def calls_on(out, _bias):
                rows = fixed_view(out, (n * ho, wo * o))
                return None if rows is None else getattr(act, "calls_on", lambda _: None)(rows)
            tail.calls_on = calls_on
    elif p * o <= BIAS_TILE_ELEMENTS:
        # A small output gets the bias tiled over all of it: one add of equal shapes (a 14x896
        # output 2.9 -> 0.9 us, 1x1152 1.25 -> 0.42: broadcasting a row costs numpy ~0.5 us
        # more, and its inner loop restarts each row).
        tail = bias_epilogue(b, act, (p * o,), p)
    else:
        tail = bias_epilogue(b, act, (n * ho, wo * o), wo)
    gather = strided or with_ones
    width = groups * cg + with_ones
    # np.dot's C function (raw: no dispatcher): the same sgemm as np.matmul (bit for bit),
    # 0.4-0.6 us less a call on small products (a squeeze-excite's 1x1152 by 1152x48: 3.3 ->
    # 2.9 us; 16x32 by 32x64: 2.3 -> 1.8), but 2.4x slower on 196x64 by 64x384: only up to
    # DOT_MACS multiply-adds.
    product = raw(np.dot) if p * width * og <= DOT_MACS else np.matmul
    get = Scratch.of(node).reserve([((n, ho, wo, width), F32)]) if gather else None
    bound = []

    def bind(x):
        """The pixels of `x` the windows read and where they go, as opaque items of C floats
        (copied ~2x faster than C floats at a time)."""
        buffer = get()[0]
        item = np.dtype((np.void, groups * cg * 4))
        src = x[:, ::win.sh, ::win.sw][:, :ho, :wo]
        dest = buffer[..., :groups * cg]
        if src.strides[-1] == 4:
            src, dest = src.view(item)[..., 0], dest.view(item)[..., 0]
        bound[:] = [x, src, dest, buffer, buffer[..., -1] if with_ones else None]

    def run(x, w, bias, out):
        if gather:
            if not bound or bound[0] is not x:
                bind(x)
            _, src, dest, x, ones = bound
            np.copyto(dest, src)
            if ones is not None:
                ones.fill(1.0)
        wg = wg_const if wg_const is not None else _grouped_weights(w, groups)
        if groups == 1:
            product(x.reshape(p, width), wg[0], out=out.reshape(p, og))
        else:
            np.matmul(x.reshape(p, groups, cg).transpose(1, 0, 2), wg,
                      out=out.reshape(p, groups, og).transpose(1, 0, 2))
        if tail is not None:
            tail(out, bias)

    def fixed(x, w, bias, out):
        """`run` on the plan's fixed arrays as its calls (plan.bind_step): constant weights,
        one group only."""
        if wg_const is None or groups != 1:
            return None
        gathers = ()
        if gather:
            bind(x)
            _, src, dest, x, ones = bound
            gathers = (call(raw(np.copyto), dest, src),
                       None if ones is None else call(ones.fill, 1.0))
        x2, out2 = fixed_view(x, (p, width)), fixed_view(out, (p, og))
        tails = () if tail is None else getattr(tail, "calls_on", lambda *_: None)(out, bias)
        if x2 is None or out2 is None or tails is None or not out2.flags.c_contiguous:
            return None
        return calls_step(*gathers, call(product, x2, wg_const[0], out2), *tails)
    run.bind = fixed
    return run


def _conv_im2col(node, win, groups, cg, o, kh, kw, act):
    """A kxk convolution: windows copied into an im2col buffer [P, G, kh*kw*Cg + 1] whose
    last column is ones, times the weights with the bias as their last row."""
    n, ho, wo = win.shape[:3]
    p, og, k = n * ho * wo, o // groups, kh * kw * cg
    # A shared work buffer (see taps.PaddedInput): run rewrites its column of ones.
    get_cols = win.reserve(node, [((p, groups, k + 1), F32)])
    by_rows = groups == 1 and win.dw == 1   # window rows are contiguous in the input
    bound = []
    w_info, b_info = node.inputs[1], node.optional_input(2)
    const = w_info.data is not None and (b_info is None or b_info.data is not None)
    wg_const = _im2col_weights(w_info.data, b_info and b_info.data, groups) if const else None
    act_rows = (n * ho, wo * o)

    def bind():
        cols = get_cols()[0]
        # cols[..., :k] as (kh, kw, N, Ho, Wo, G, Cg), the layout of the window view.
        dest = cols[:, :, :k].reshape(n, ho, wo, groups, kh, kw, cg) \
            .transpose(4, 5, 0, 1, 2, 3, 6)
        assert np.shares_memory(dest, cols)  # a view, so copies into it fill `cols`
        rows = None
        if by_rows:   # [kh, N, Ho, Wo] items of kw*Cg floats
            row = kw * cg * 4
            rows = opaque_items(cols, (kh, n, ho, wo),
                                (row, ho * wo * (k + 1) * 4, wo * (k + 1) * 4, (k + 1) * 4), row)
        bound.extend([cols, dest, rows, cols[:, :, k]])

    def run(x, w, bias, out):
        if not bound:
            bind()
        cols, dest, rows, ones = bound
        if win.copy_in is not None:
            win.copy_in(x)
        if rows is not None and (win.buffer is not None or x.flags.c_contiguous):
            np.copyto(rows, win.row_items(x))
        else:
            np.copyto(dest, win.view(x).reshape(kh, kw, n, ho, wo, groups, cg))
        ones.fill(1.0)
        wg = wg_const if const else _im2col_weights(w, bias, groups)
        if groups == 1:
            np.matmul(cols[:, 0], wg[0], out=out.reshape(p, og))
        else:
            np.matmul(cols.transpose(1, 0, 2), wg,
                      out=out.reshape(p, groups, og).transpose(1, 0, 2))
        if act is not None:
            act(out.reshape(act_rows))

    def fixed(x, w, bias, out):
        """`run` on the plan's fixed arrays (plan.bind_step): views, weights and the clamp's
        bounds found once; one frame a call. Constant weights, one group only."""
        if not const or groups != 1:
            return None
        out2, out_rows = fixed_view(out, (p, og)), fixed_view(out, act_rows)
        if p * (k + 1) <= TAKE_ELEMENTS and x.flags.c_contiguous and out2 is not None:
            return _gather_run(x, win, kh, kw, cg, wg_const[0], out2, out_rows, act)
        if not bound:
            bind()
        cols, dest, rows, ones = bound
        copy_in = win.copy_in
        if copy_in is not None:
            copy_in(x)
        if rows is not None and (win.buffer is not None or x.flags.c_contiguous):
            src, dst = win.row_items(x), rows
        else:
            src, dst = fixed_view(win.view(x), (kh, kw, n, ho, wo, groups, cg)), dest
        if src is None or out2 is None or out_rows is None:
            return None
        return _im2col_run(copy_in, x, dst, src, ones, cols[:, 0], wg_const[0], out2,
                           out_rows, act)
    run.bind = fixed
    if const and groups == 1 and p * (k + 1) <= TAKE_ELEMENTS:   # what fusion.py may fuse
        run.gather = win, kh, kw, cg, wg_const[0], act
        run.input_tail = 0, gather_tail(cg)   # x allocated before its 0 and 1 (plan._tails)
    return run


# A small convolution (at most this many im2col elements) gathers its im2col matrix in one
# take from its input plus a 0 (padding) and a 1 (the bias column): one call instead of the
# padded copy, the window copy and the ones column (digits CNN: ~1.5 µs less a convolution).
TAKE_ELEMENTS = 4096


def gather_item(cg: int) -> int:
    """Floats per item the im2col take moves: 4 (16 bytes) where the channels allow, else 2
    or 1. numpy's take costs per item, about the same for 4, 8 or 16 bytes: digits CNN's
    second convolution (16 channels) takes 592 items in 0.44 µs instead of 2320 floats in
    0.95 µs; the matmul's extra zero rows (the bias row's item) cost 0.04 µs."""
    return 4 if cg % 4 == 0 else 2 if cg % 2 == 0 else 1


def gather_tail(cg: int) -> np.ndarray:
    """What a gathering convolution's source holds after x: a zero item, a one item."""
    q = gather_item(cg)
    tail = np.zeros(2 * q, F32)
    tail[q] = 1.0
    return tail


def _take_in_place(x, cg):
    """The take of x's own buffer, items of gather_item(cg) floats, when the plan allocated x
    before its gather_tail (plan._tails): the source with nothing to copy in; else None."""
    tail, base = gather_tail(cg), x.base
    if base is None or base.dtype != F32 or base.ndim != 1 or not x.flags.c_contiguous \
            or base.size < x.size + tail.size or base.ctypes.data != x.ctypes.data \
            or not np.array_equal(base[x.size:x.size + tail.size], tail):
        return None
    q = gather_item(cg)
    return base[:x.size + tail.size].view(np.dtype((np.void, 4 * q)) if q > 1 else F32).take


def _gather_table(shape, win, kh, kw, cg, weights, order=None):
    """A gathering convolution's tables on input `shape`, its im2col rows `order`'s rows of
    the output pixels (None: in order), `weights` [K + 1, O] (the bias the last row):
    (index [rows, K/q + 1] of items, the head (x's place) of the source [x..., a zero item, a
    one item], cols [rows, (K/q + 1) * q] and its items, the weights with q - 1 zero rows after
    the bias row, the take over the source's items)."""
    q = gather_item(cg)
    index = _gather_index(shape, win, kh, kw, cg, q)
    if order is not None:
        index = np.ascontiguousarray(order(index))
    size = int(np.prod(shape))
    source = np.concatenate([np.zeros(size, F32), gather_tail(cg)])
    width = index.shape[1] * q
    padded = np.zeros((width, weights.shape[1]), F32)
    padded[:weights.shape[0]] = weights      # the filter rows, the bias row, q - 1 zero rows
    cols = np.empty((index.shape[0], width), F32)
    item = np.dtype((np.void, 4 * q)) if q > 1 else F32
    return index, source[:size], cols, cols.view(item), padded, source.view(item).take


def _gather_index(shape, win, kh, kw, cg, q=1):
    """The im2col matrix [N*Ho*Wo, kh*kw*C + 1] as indices into [x..., 0, 1] (x flat, of
    `shape`): a tap outside the input reads the 0, the last column the 1 (the bias row); in
    items of q floats (C a multiple of q): [N*Ho*Wo, kh*kw*C/q + 1] into x's items, a zero
    item and a one item."""
    n, h, w, c = shape
    size = n * h * w * c // q
    ny, nx = np.arange(win.ho) * win.sh - win.pt, np.arange(win.wo) * win.sw - win.pl
    ys = ny[:, None] + np.arange(kh)[None, :] * win.dh           # [Ho, kh]
    xs = nx[:, None] + np.arange(kw)[None, :] * win.dw           # [Wo, kw]
    inside = ((ys >= 0) & (ys < h))[None, :, None, :, None, None] \
        & ((xs >= 0) & (xs < w))[None, None, :, None, :, None]
    index = (np.arange(n)[:, None, None, None, None, None] * (h * w * c // q)
             + ys[None, :, None, :, None, None] * (w * c // q)
             + xs[None, None, :, None, :, None] * (c // q)
             + np.arange(cg // q)[None, None, None, None, None, :])   # [N, Ho, Wo, kh, kw, C/q]
    index = np.where(inside, index, size).reshape(n * win.ho * win.wo, kh * kw * cg // q)
    return np.ascontiguousarray(np.concatenate(
        [index, np.full((index.shape[0], 1), size + 1)], axis=1), dtype=np.intp)


def _gather_run(x, win, kh, kw, cg, weights, out, out_rows, act):
    """im2col by one take over an index table made here, then the matmul and the clamp."""
    index, head, cols, items, weights, take = _gather_table(x.shape, win, kh, kw, cg, weights)
    # np.dot's C function: the same sgemm as np.matmul, 0.5 µs less a call on these sizes
    copyto, dot = raw(np.copyto), raw(np.dot)
    flat = x.reshape(-1)
    lo, hi = (None, None) if act is None else act.bounds
    in_place = _take_in_place(x, cg)

    # every index is in range: "wrap" checks nothing
    step = calls_step(call(copyto, head, flat) if in_place is None else None,
                      call(take if in_place is None else in_place, index, out=items,
                           mode="wrap"),
                      call(dot, cols, weights, out),
                      None if lo is None else call(clip, out_rows, lo, hi, out_rows))
    step.taken = index.size    # items its take moves an invoke (tests/.../test_conv_gather.py)
    step.copies = in_place is None    # whether it copies x into its source first
    return step


def max_pool_fusion(conv, pool) -> object | None:
    """CONV_2D then MAX_POOL_2D (plan fusion, issue 17), for a small convolution (the gather
    path) followed by a pool whose windows tile its output (filter = stride, no padding):
    run(x, w, bias, pooled) or None. The im2col rows are gathered in the order (window tap,
    pooled pixel), so the matmul's output is [taps, pooled pixels * O] and the pool is one
    maximum.reduce over its first axis; the convolution's clamp commutes with the maximum, so
    it runs on the pooled values (a RELU unbounded above as the reduction's initial 0; RELU's
    bound is FLT_MAX now: the clip). The convolution's output
    is never written: 4 numpy calls instead of the two kernels' 6."""
    prepared = getattr(conv.run, "gather", None)
    if prepared is None or conv.node.runtime is not None and conv.node.runtime.reference:
        return None
    win, kh, kw, cg, weights, act = prepared
    g = pool_windows(pool.node)
    if activation_code(pool.node.options) \
            or (g.kh, g.kw) != (g.sh, g.sw) or g.pt or g.pl or g.kh * g.kw == 1 \
            or g.oh * g.kh > win.ho or g.ow * g.kw > win.wo:
        return None
    x_shape, o = conv.node.inputs[0].shape, weights.shape[1]
    n, taps = x_shape[0], g.kh * g.kw

    def by_window_tap(index):   # rows (tap, pooled pixel) of the pixels the pool reads
        index = index.reshape(n, win.ho, win.wo, -1)[:, :g.oh * g.kh, :g.ow * g.kw]
        return index.reshape(n, g.oh, g.kh, g.ow, g.kw, -1).transpose(2, 4, 0, 1, 3, 5) \
            .reshape(taps * n * g.oh * g.ow, -1)
    index, head, cols, items, weights, take = _gather_table(
        x_shape, win, kh, kw, cg, weights, by_window_tap)
    product = np.empty((index.shape[0], o), F32)
    by_tap = product.reshape(taps, -1)
    pooled_shape = (n * g.oh * g.ow * o,)
    lo, hi = (None, None) if act is None else act.bounds
    initial = lo if lo is not None and hi == np.inf else None   # a RELU: max(0, taps...)
    if initial is not None:
        lo = None
    # XNNPACK's pool (the default resolver's; no fusion under BUILTIN_REF) after the
    # convolution's clamp (which keeps NaN): its clamp takes a NaN max to -inf (a NaN it skips
    # in some window positions: not followed here, see test_nonfinite_clamp.py)
    # (-inf as a whole array: fmax against a 0-d one broadcasts, ~0.6 us more a call on the
    # digits CNN's pooled rows, a quarter of its invoke's fixed costs)
    copyto, dot, fold, fmax = raw(np.copyto), raw(np.dot), np.maximum.reduce, np.fmax
    nan_low = np.full(pooled_shape, -np.inf, F32)

    def bind(x, _w, _b, out):
        flat, pooled = fixed_view(x, (head.size,)), fixed_view(out, pooled_shape)
        if flat is None or pooled is None:
            return None

        in_place = _take_in_place(x, cg)
        step = calls_step(call(copyto, head, flat) if in_place is None else None,
                          call(take if in_place is None else in_place, index, out=items,
                               mode="wrap"),
                          call(dot, cols, weights, product),
                          call(fold, by_tap, 0, None, pooled, False, initial),
                          None if lo is None else call(clip, pooled, lo, hi, pooled),
                          call(fmax, pooled, nan_low, pooled))
        step.taken, step.copies = index.size, in_place is None
        return step
    fused = bound_on_call(bind, "the fused CONV_2D+MAX_POOL_2D")
    fused.input_tail = 0, gather_tail(cg)
    return fused


def _im2col_run(copy_in, x, dst, src, ones, cols, weights, out, out_rows, act):
    """One im2col convolution on fixed arrays: pad, gather, the ones column (the work buffer
    is shared), the matmul, the clamp."""
    copyto, matmul, fill = raw(np.copyto), np.matmul, ones.fill
    lo, hi = (None, None) if act is None else act.bounds

    return calls_step(None if copy_in is None else call(copy_in, x),
                      call(copyto, dst, src), call(fill, 1.0), call(matmul, cols, weights, out),
                      None if lo is None else call(clip, out_rows, lo, hi, out_rows))


def _im2col_weights(w, bias, groups):
    o = w.shape[0]
    return _grouped_weights(w, groups, np.zeros(o, F32) if bias is None else bias)


# -- DEPTHWISE_CONV_2D -----------------------------------------------------------------------

@register("DEPTHWISE_CONV_2D", "float32")
def depthwise_conv_2d(node):
    x, w, b = _float_inputs(node)
    mult = depthwise_multiplier(node, x.shape, w.shape)
    n, (_, kh, kw, o) = x.shape[0], w.shape
    _check_bias(node, b, o)
    if reference_order.applies(node, x.shape, w.shape, depthwise=True):    # BUILTIN_REF
        return with_optional_inputs(node, reference_order.prepare(node, x, w, b, True), 3)
    grids = TapGrid.bands(node, x.shape, conv_windows(node, x.shape, kh, kw), mult)
    ho, wo = grids[-1].end, grids[0].wo
    node.outputs[0].shape = (n, ho, wo, o)
    act = clamp_activation(node.options.fused_activation_function, node, _xnnpack(node, w))
    tail = bias_epilogue(b, act, (n * ho, wo * o), wo)
    weights = [np.empty((kh, len(cols), wo * o), F32) for cols in grids[0].columns]
    const_w = w.data
    if const_w is not None:
        grids[0].tile_weights(weights, const_w)
    rest = list(range(1, len(weights)))
    want = getattr(node.runtime, "num_threads", 1) or 1
    if want > 1:   # rows in parts on the worker threads, when large enough
        from .depthwise_rows import SPLIT_MACS, depthwise_rows
        if n * ho * wo * o * kh * kw >= SPLIT_MACS:
            return with_optional_inputs(node, depthwise_rows(
                grids, weights, const_w, b, act, (n, ho, wo, o), want, node.runtime), 3)

    def run(x, w, bias, out):
        if const_w is None:
            grids[0].tile_weights(weights, w)
        acc = out.reshape(n, ho, wo * o)
        for grid in grids:
            views, partial = grid.views(x)
            band = acc[:, grid.start:grid.end]
            np.einsum("ijnyk,ijk->nyk", views[0], weights[0], out=band)
            for g in rest:
                np.einsum("ijnyk,ijk->nyk", views[g], weights[g], out=partial)
                np.add(band, partial, out=band)
        if tail is not None:
            tail(out, bias)
    return with_optional_inputs(node, run, 3)


# -- TRANSPOSE_CONV --------------------------------------------------------------------------

@register("TRANSPOSE_CONV", "float32")
def transpose_conv(node):
    node.expect_inputs(3, 4)
    w, x, b = node.input(1), node.input(2), node.optional_input(3)
    check_float(node, w, x, b)
    out_shape, (sh, sw), (pt, pl) = transpose_conv_shape(node, x.shape, w.shape)
    n, h, wd, c = x.shape
    o, kh, kw, _ = w.shape
    _check_bias(node, b, o)
    ho, wo = out_shape[1], out_shape[2]
    act = clamp_activation(activation_code(node.options), node, _xnnpack(node, w))
    tail = bias_epilogue(b, act, (n * ho, wo * o), wo)
    # Every input pixel scatters a kh x kw x O patch into an accumulator that covers all
    # patches; the output is its window at (pt, pl).
    acc = patch_accumulator(x.shape, w.shape, out_shape, (sh, sw), (pt, pl), F32)
    cols = np.empty((n, h, wd, kh, kw, o), F32)
    const_w = w.data
    wm_const = None if const_w is None else np.ascontiguousarray(_patch_weights(const_w))

    def run(_shape, w, x, bias, out):
        wm = wm_const if wm_const is not None else _patch_weights(w)
        np.matmul(x.reshape(n * h * wd, c), wm, out=cols.reshape(n * h * wd, kh * kw * o))
        scatter_patches(acc, cols, (sh, sw))
        np.copyto(out, acc[:, pt:pt + ho, pl:pl + wo])
        if tail is not None:
            tail(out, bias)

    def bind(_shape, w, x, bias, out):   # run's calls on the plan's arrays (constant weights)
        x2 = fixed_view(x, (n * h * wd, c))
        tails = () if tail is None else tail.calls_on(out, bias)
        if wm_const is None or x2 is None or tails is None:
            return None
        return calls_step(call(np.matmul, x2, wm_const, cols.reshape(n * h * wd, kh * kw * o)),
                          call(scatter_patches, acc, cols, (sh, sw)),
                          call(raw(np.copyto), out, acc[:, pt:pt + ho, pl:pl + wo]), *tails)
    run.bind = bind
    return with_optional_inputs(node, run, 4)


def _patch_weights(w):
    """Filter [O, kh, kw, C] as the [C, kh*kw*O] matrix mapping a pixel to its patch."""
    o, kh, kw, c = w.shape
    return w.transpose(3, 1, 2, 0).reshape(c, kh * kw * o)
