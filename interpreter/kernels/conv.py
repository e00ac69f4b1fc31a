"""CONV_2D, DEPTHWISE_CONV_2D and TRANSPOSE_CONV on float32 NHWC data.

Convolutions run as BLAS matmuls: a 1x1 convolution is one matmul on the (N*H*W, C) view, a
kxk one copies its windows into an im2col buffer (strided views of a padded input buffer
allocated once) whose extra column of ones multiplies a bias row of the weights. A depthwise
convolution is an `einsum` over strided views of all its taps whose innermost axis is a whole
output row (Wo*C contiguous values; for stride_w > 1 the input is first split into column
phases), weights tiled along the row in prepare: numpy's multiply-add loop then runs over long
contiguous rows (per-tap multiply and add passes are slower; see TapGrid). `Window` holds the
padded buffer and tap views that im2col and the pools read.

Padded inputs, column phases and im2col buffers are work buffers shared by all the kernels of an
interpreter (`PaddedInput`, `Scratch`): one block that the previous layer left in cache instead
of one cold buffer per layer (MobileNetV2: ~17 MB less memory touched per invoke, ~5% faster).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .common import RELU, RELU6, RELU_N1_TO_1, conv_output, fused_activation
from .scratch import Scratch
from .registry import register

F32 = np.dtype(np.float32)
CLAMPS = (RELU, RELU_N1_TO_1, RELU6)


# -- sliding windows -------------------------------------------------------------------------

def check_padded(node, padded: int, size: int) -> None:
    """Refuse a padded copy far larger than the input it holds: a stride or dilation that only
    a hostile file has (real layers pad by less than the window) would make one of gigabytes."""
    if padded > 4 * size + (1 << 22):
        raise node.fail(f"the windows' padding and dilation make a padded input of {padded} "
                        f"values for {size} input values")


class PaddedInput:
    """An NHWC input copied into the interior of a padded work buffer [phases, N, rows, cols,
    C*repeat], the rest of which holds `fill`. Phase b holds the padded columns b, b + phases,
    ... (strided windows then read contiguous rows); `repeat` > 1 repeats each channel (a
    depthwise channel multiplier).

    The buffer is shared by the kernels of one interpreter (they run one at a time: the
    padded inputs of all layers are one block that stays in cache), so `fill_from` rewrites
    the border on every run, which costs a few small fills."""

    def __init__(self, node, shape, rows, cols, pt, pl, phases=1, repeat=1, fill=0.0,
                 first_row=0):
        """`rows` x `cols` of the padded input (`pt` rows and `pl` columns of padding before
        the input), from padded row `first_row` on (a band of a larger window)."""
        n, h, w, c = shape
        wq = -(-cols // phases)                       # columns of a phase
        check_padded(node, phases * n * rows * wq * c, n * h * w * c)
        self.shape = (phases, n, rows, wq, c * repeat)
        self.fill, self.repeat = fill, repeat
        self.copies = []       # (phase, the region the input fills, input slices)
        self.borders = []      # (phase, a region around it)
        top0 = max(pt - first_row, 0)                 # buffer row of the first input row
        y0 = first_row + top0 - pt                    # that input row
        hi = min(h - y0, rows - top0)
        for b in range(phases):
            first = (b - pl) % phases                 # first input column of phase b
            q0 = (pl + first) // phases
            count = max(min(len(range(first, w, phases)), wq - q0), 0)
            top, bottom = (top0, top0 + hi) if hi > 0 and count > 0 else (rows, rows)
            if top < bottom:
                self.copies.append((b, (slice(top, bottom), slice(q0, q0 + count)),
                                    (slice(None), slice(y0, y0 + hi),
                                     slice(first, first + phases * count, phases))))
            for region in ((slice(0, top), slice(None)), (slice(bottom, rows), slice(None)),
                           (slice(top, bottom), slice(0, q0)),
                           (slice(top, bottom), slice(q0 + count, wq))):
                if all(len(range(*r.indices(size))) for r, size in zip(region, (rows, wq))):
                    self.borders.append((b, region))
        self._scratch = Scratch.of(node)
        self._get = self._scratch.reserve([(self.shape, F32)])
        self._bound = None

    def reserve(self, specs: list):
        """More work buffers [(shape, dtype)] beside the padded input, in the same block (a
        kernel's other scratch must not overlap it); returns get() -> those arrays."""
        get = self._get = self._scratch.reserve([(self.shape, F32)] + list(specs))
        return lambda: get()[1:]

    def fill_from(self, x) -> np.ndarray:
        """Copy `x` in, refill the border; the buffer."""
        if self._bound is None:
            buffer = self._get()[0]
            copies = []
            for b, (rows, cols), src in self.copies:
                region = buffer[b, :, rows, cols]
                if self.repeat > 1:  # [..., C, repeat]: a view, the last axis is contiguous
                    region = region.reshape(region.shape[:-1] + (-1, self.repeat))
                copies.append((region, src))
            self._bound = buffer, copies, [buffer[b, :, r, c] for b, (r, c) in self.borders]
        buffer, copies, borders = self._bound
        for region in borders:
            region.fill(self.fill)
        for region, src in copies:
            np.copyto(region, x[src][..., None] if self.repeat > 1 else x[src])
        return buffer


class Window:
    """The taps of a kh x kw window sliding over NHWC input, as strided views.

    When the window reaches outside the input (SAME padding), the input is copied into the
    interior of a buffer whose border holds `fill` (a PaddedInput); otherwise the views look
    straight at the input array. Views are built once per array they look at."""

    def __init__(self, node, shape, kh, kw, sh, sw, dh, dw, padding, fill=0.0):
        n, h, w, c = shape
        self.kh, self.kw, self.sh, self.sw, self.dh, self.dw = kh, kw, sh, sw, dh, dw
        self.ho, self.pt = conv_output(padding, h, kh, sh, dh)
        self.wo, self.pl = conv_output(padding, w, kw, sw, dw)
        if self.ho <= 0 or self.wo <= 0:
            raise node.fail(f"a {kh}x{kw} window (dilation {dh}x{dw}) does not fit the "
                            f"{h}x{w} input")
        rows = (self.ho - 1) * sh + (kh - 1) * dh + 1   # padded rows the windows read
        cols = (self.wo - 1) * sw + (kw - 1) * dw + 1
        self.shape = (n, self.ho, self.wo, c)
        self.padded = None
        if self.pt or self.pl or rows > h or cols > w:
            self.padded = PaddedInput(node, shape, max(rows, self.pt + 1),
                                      max(cols, self.pl + 1), self.pt, self.pl, fill=fill)
        self.buffer = None   # the padded input, set by copy_in
        self._padded = None
        self._base = self._tap_base = self._item_base = None
        self._view = self._taps = self._items = None

    def reserve(self, node, specs: list):
        """Work buffers [(shape, dtype)] that do not overlap the padded input: get() -> them."""
        if self.padded is not None:
            return self.padded.reserve(specs)
        return Scratch.of(node).reserve(specs)

    @property
    def copy_in(self):
        """None when the windows read the input itself, else a function copying the input into
        the padded buffer (call it before `view` or `tap_list`)."""
        return None if self.padded is None else self._copy_in

    def _copy_in(self, x):
        buffer = self.padded.fill_from(x)
        if self._padded is not buffer:   # the same array on every run: views of it are kept
            self._padded, self.buffer = buffer, buffer[0]

    def view(self, x):
        """All taps: a view [kh, kw, N, Ho, Wo, C] of `x` or of the padded buffer."""
        base = self.buffer if self.buffer is not None else x
        if base is not self._base:
            sn, sy, sx, sc = base.strides
            self._base = base
            self._view = as_strided(base, (self.kh, self.kw) + self.shape,
                                    (sy * self.dh, sx * self.dw, sn, sy * self.sh,
                                     sx * self.sw, sc), writeable=False)
        return self._view

    def tap_list(self, x):
        """The taps one by one, in the layout of `out_view`: [N, Ho, Wo*C] when stride_w is 1
        (rows of a window are contiguous), else [N, Ho, Wo, C]."""
        base = self.buffer if self.buffer is not None else x
        if base is not self._tap_base:
            taps = self.view(x)
            if self.sw == 1:  # merge (Wo, C): the same memory as its strides say
                n, ho, wo, c = self.shape
                sy_, sx_, sn, sy, sx, sc = taps.strides
                taps = as_strided(base, (self.kh, self.kw, n, ho, wo * c),
                                  (sy_, sx_, sn, sy, sc), writeable=False)
            self._tap_base = base
            self._taps = [taps[i, j] for i in range(self.kh) for j in range(self.kw)]
        return self._taps

    def out_view(self, out):
        n, ho, wo, c = self.shape
        return out if self.sw != 1 else out.reshape(n, ho, wo * c)

    def row_items(self, x):
        """Each window row (kw pixels x C channels, contiguous when dilation_w is 1) as one
        opaque item: [kh, N, Ho, Wo]. Copying such items moves kw*C floats at a time (im2col:
        ~1.5x faster than copying C floats at a time when C is small)."""
        base = self.buffer if self.buffer is not None else x
        if base is not self._item_base:
            sn, sy, sx, _ = base.strides
            self._item_base = base
            self._items = _items(base, (self.kh,) + self.shape[:3],
                                 (sy * self.dh, sn, sy * self.sh, sx * self.sw),
                                 self.kw * self.shape[3] * base.itemsize)
        return self._items


def _items(base, shape, strides, nbytes):
    """A view of `base` (C-contiguous) whose elements are the `nbytes` bytes at `strides`."""
    raw = as_strided(base.reshape(-1).view(np.uint8), tuple(shape) + (nbytes,),
                     tuple(strides) + (1,))
    return raw.view(np.dtype((np.void, nbytes)))[..., 0]


def _options(node):
    o = node.options
    stride_h, stride_w = int(o.stride_h or 1), int(o.stride_w or 1)
    dil_h = int(getattr(o, "dilation_h_factor", 1) or 1)
    dil_w = int(getattr(o, "dilation_w_factor", 1) or 1)
    return stride_h, stride_w, dil_h, dil_w, int(o.padding or 0)


def clamp_activation(code, node):
    """The fused activation of TFLite's float conv, fully-connected and pool kernels: a clamp
    to the range of RELU, RELU_N1_TO_1 or RELU6; the other codes (TANH, SIGN_BIT, SIGMOID)
    clamp to the whole float range there, i.e. do nothing."""
    code = int(code or 0)
    return fused_activation(code, node) if code in CLAMPS else None


def _with_optional_last(node, run, count):
    """`run` takes all `count` inputs (None for omitted ones) then the output; adapt it to the
    number of inputs the operator has."""
    have = len(node.inputs)
    if have == count:
        return run
    missing = (None,) * (count - have)
    return lambda *args: run(*args[:have], *missing, *args[have:])


def _check_float(node, *infos):
    for t in infos:
        if t is not None and t.dtype != F32:
            raise node.fail(f"tensor {t.name!r} is {t.type_name}; this kernel takes float32")


def _epilogue(bias_info, act, out_rows, tile):
    """`tail(out, bias)`: adds the bias (tiled `tile` times to fill the rows of the
    `out_rows`-shaped view of the output: one long inner loop instead of a broadcast) and
    applies the fused activation; None when there is nothing to do."""
    if bias_info is None and act is None:
        return None
    tiled = None
    if bias_info is not None:
        tiled = np.empty((tile, bias_info.shape[0]), F32)
        if bias_info.data is not None:
            tiled[:] = bias_info.data
    runtime_bias = bias_info is not None and bias_info.data is None
    tiled_flat = None if tiled is None else tiled.reshape(-1)

    def tail(out, bias):
        rows = out.reshape(out_rows)
        if runtime_bias:
            np.copyto(tiled, bias)
        if tiled_flat is not None:
            np.add(rows, tiled_flat, out=rows)
        if act is not None:
            act(rows)
    return tail


# -- CONV_2D ---------------------------------------------------------------------------------

@register("CONV_2D", "float32")
def conv_2d(node):
    node.expect_inputs(2, 3)
    x, w = node.input(0), node.input(1)
    b = node.optional_input(2)
    _check_float(node, x, w, b)
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise node.fail(f"input {list(x.shape)} and filter {list(w.shape)} must be 4-D")
    n, h, wd, c = x.shape
    o, kh, kw, cg = w.shape
    if cg <= 0 or c % cg or o % (c // cg):
        raise node.fail(f"input has {c} channels, filter {list(w.shape)} takes {cg}: channels "
                        f"must be a multiple of the filter's, and the {o} filters divisible "
                        "into the groups")
    if b is not None and tuple(b.shape) != (o,):
        raise node.fail(f"bias shape {list(b.shape)} does not match {o} output channels")
    sh, sw, dh, dw, padding = _options(node)
    win = Window(node, x.shape, kh, kw, sh, sw, dh, dw, padding)
    ho, wo, groups = win.ho, win.wo, c // cg
    node.outputs[0].shape = (n, ho, wo, o)
    act = clamp_activation(node.options.fused_activation_function, node)
    if kh == kw == 1 and win.padded is None:
        run = _conv_1x1(node, win, groups, cg, o, b, act)
    else:
        run = _conv_im2col(node, win, groups, cg, o, kh, kw, act)
    return _with_optional_last(node, run, 3)


def _grouped_weights(w, groups, with_bias_row=None):
    """Filter [O, kh, kw, Cg] as [G, K(+1), O/G] matmul operands (a bias row appended)."""
    o = w.shape[0]
    k = w.size // o
    wg = w.reshape(groups, o // groups, k).transpose(0, 2, 1)
    if with_bias_row is None:
        return wg
    bias = np.asarray(with_bias_row, F32).reshape(groups, 1, o // groups)
    return np.ascontiguousarray(np.concatenate([wg, bias], axis=1))


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
    else:
        tail = _epilogue(b, act, (n * ho, wo * o), wo)
    gather = strided or with_ones
    width = groups * cg + with_ones
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
            np.matmul(x.reshape(p, width), wg[0], out=out.reshape(p, og))
        else:
            np.matmul(x.reshape(p, groups, cg).transpose(1, 0, 2), wg,
                      out=out.reshape(p, groups, og).transpose(1, 0, 2))
        if tail is not None:
            tail(out, bias)
    return run


def _conv_im2col(node, win, groups, cg, o, kh, kw, act):
    """A kxk convolution: windows copied into an im2col buffer [P, G, kh*kw*Cg + 1] whose
    last column is ones, times the weights with the bias as their last row."""
    n, ho, wo = win.shape[:3]
    p, og, k = n * ho * wo, o // groups, kh * kw * cg
    # A shared work buffer (see PaddedInput): run rewrites its column of ones.
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
            rows = _items(cols, (kh, n, ho, wo), (row, ho * wo * (k + 1) * 4, wo * (k + 1) * 4,
                                                  (k + 1) * 4), row)
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
    return run


def _im2col_weights(w, bias, groups):
    o = w.shape[0]
    return _grouped_weights(w, groups, np.zeros(o, F32) if bias is None else bias)


# -- DEPTHWISE_CONV_2D -----------------------------------------------------------------------

@register("DEPTHWISE_CONV_2D", "float32")
def depthwise_conv_2d(node):
    node.expect_inputs(2, 3)
    x, w = node.input(0), node.input(1)
    b = node.optional_input(2)
    _check_float(node, x, w, b)
    if len(x.shape) != 4 or len(w.shape) != 4 or w.shape[0] != 1:
        raise node.fail(f"input {list(x.shape)} must be 4-D and the filter {list(w.shape)} "
                        "[1, kh, kw, channels]")
    n, h, wd, c = x.shape
    _, kh, kw, o = w.shape
    if o % c:
        raise node.fail(f"filter has {o} channels, not a multiple of the input's {c}")
    mult = o // c  # the depth_multiplier option is redundant with the shapes; they win
    if b is not None and tuple(b.shape) != (o,):
        raise node.fail(f"bias shape {list(b.shape)} does not match {o} output channels")
    sh, sw, dh, dw, padding = _options(node)
    grids = TapGrid.bands(node, x.shape, kh, kw, sh, sw, dh, dw, padding, mult)
    ho, wo = grids[-1].end, grids[0].wo
    node.outputs[0].shape = (n, ho, wo, o)
    act = clamp_activation(node.options.fused_activation_function, node)
    tail = _epilogue(b, act, (n * ho, wo * o), wo)
    weights = [np.empty((kh, len(cols), wo * o), F32) for cols in grids[0].columns]
    const_w = w.data
    if const_w is not None:
        grids[0].tile_weights(weights, const_w)
    rest = list(range(1, len(weights)))

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
    return _with_optional_last(node, run, 3)


class TapGrid:
    """A depthwise convolution's taps as strided views whose innermost axis is a whole output
    row (Wo*C contiguous values), so that `einsum` multiply-adds every tap in long inner loops.

    With stride_w 1 the taps are one view [kh, kw, N, Ho, Wo*C] of the (padded) input. With
    stride_w s > 1 a row's values for consecutive outputs are s pixels apart: the input is
    copied into s column phases (phase b holds padded columns b, b+s, ...); the window columns
    j whose offset j*dilation falls in phase b are one view of that phase. `columns` lists the
    window columns of each view. A grid covers the output rows [start, end): a large layer
    with phases runs in bands whose phases stay in cache between the copy and the einsum.
    """

    BAND_BYTES = 1280 << 10  # phase buffer of a band

    @classmethod
    def bands(cls, node, shape, kh, kw, sh, sw, dh, dw, padding, repeat) -> list:
        """One grid for the whole output, or (phases above BAND_BYTES) one per band of rows."""
        whole = cls(node, shape, kh, kw, sh, sw, dh, dw, padding, repeat, reserve=False)
        per_row = sh * whole.cols * whole.c * 4            # phase bytes per output row
        if sw == 1 or whole.end * per_row <= cls.BAND_BYTES * 4 // 3:
            return [cls(node, shape, kh, kw, sh, sw, dh, dw, padding, repeat)]
        step = max(1, cls.BAND_BYTES // per_row)
        return [cls(node, shape, kh, kw, sh, sw, dh, dw, padding, repeat,
                    band=(y, min(y + step, whole.end))) for y in range(0, whole.end, step)]

    def __init__(self, node, shape, kh, kw, sh, sw, dh, dw, padding, repeat, band=None,
                 reserve=True):
        n, h, w, c = shape
        ho, pt = conv_output(padding, h, kh, sh, dh)
        self.wo, pl = conv_output(padding, w, kw, sw, dw)
        if ho <= 0 or self.wo <= 0:
            raise node.fail(f"a {kh}x{kw} window (dilation {dh}x{dw}) does not fit the "
                            f"{h}x{w} input")
        if self.wo == 1:
            sw = 1   # one output column: the stride (past the padding) moves nothing; no phases
        self.start, self.end = band or (0, ho)
        self.ho = self.end - self.start
        self.kh, self.sh, self.dh = kh, sh, dh
        self.c = c * repeat
        rows = (self.ho - 1) * sh + (kh - 1) * dh + 1
        self.cols = cols = (self.wo - 1) * sw + (kw - 1) * dw + 1
        phases = {}                                   # phase -> [(window column, shift)]
        for j in range(kw):
            phases.setdefault(j * dw % sw, []).append((j, j * dw // sw))
        # Per view: its phase, first shift and shift step (in phase columns), window columns.
        self.layout = [(b, taps[0][1], taps[1][1] - taps[0][1] if len(taps) > 1 else 1)
                       for b, taps in sorted(phases.items())]
        self.columns = [[j for j, _ in taps] for _, taps in sorted(phases.items())]
        direct = sw == 1 and band is None and not (pt or pl or rows > h or cols > w or
                                                   repeat > 1)
        self.padded = None
        self._work = None
        if not reserve:
            return
        partial = [((n, self.ho, self.wo * self.c), F32)] if len(self.layout) > 1 else []
        if direct:
            self._work = Scratch.of(node).reserve(partial)
        else:
            self.padded = PaddedInput(node, shape, rows, cols, pt, pl, sw, repeat,
                                      first_row=self.start * sh)
            self._work = self.padded.reserve(partial)
        self._base = None
        self._views = None

    def views(self, x):
        """Copy `x` into the phase buffer if there is one; the views [kh, taps, N, Ho, Wo*C]
        and a work buffer for the einsum of the views after the first."""
        base = x[None] if self.padded is None else self.padded.fill_from(x)
        key = x if self.padded is None else base
        if key is not self._base:
            self._base = key
            work = self._work()
            self._views = ([self._view(base, *spec, len(cols))
                            for spec, cols in zip(self.layout, self.columns)],
                           work[0] if work else None)
        return self._views

    def _view(self, base, phase, shift, step, taps):
        sp, sn, sy, sx, sc = base.strides
        plane = base[phase, :, :, shift:]
        return as_strided(plane, (self.kh, taps, base.shape[1], self.ho, self.wo * self.c),
                          (sy * self.dh, sx * step, sn, sy * self.sh, sc), writeable=False)

    def tile_weights(self, weights, w):
        """Filter [1, kh, kw, C] into each view's weights [kh, taps, Wo*C]."""
        kh, c = w.shape[1], w.shape[3]
        for tiled, cols in zip(weights, self.columns):
            np.copyto(tiled.reshape(kh, len(cols), self.wo, c), w[0][:, cols, None, :])


# -- TRANSPOSE_CONV --------------------------------------------------------------------------

@register("TRANSPOSE_CONV", "float32")
def transpose_conv(node):
    node.expect_inputs(3, 4)
    shape_info, w, x = node.input(0), node.input(1), node.input(2)
    b = node.optional_input(3)
    _check_float(node, w, x, b)
    if shape_info.type_name != "int32":
        raise node.fail(f"the output shape is {shape_info.type_name}, not int32")
    if shape_info.data is None:
        raise node.fail("the output shape (input 0) must be a constant tensor")
    out_shape = tuple(int(d) for d in np.asarray(shape_info.data).reshape(-1))
    if len(out_shape) != 4 or len(x.shape) != 4 or len(w.shape) != 4:
        raise node.fail(f"output shape {list(out_shape)}, input {list(x.shape)} and filter "
                        f"{list(w.shape)} must be 4-D")
    n, h, wd, c = x.shape
    o, kh, kw, wc = w.shape
    if wc != c or out_shape[0] != n or out_shape[3] != o:
        raise node.fail(f"filter {list(w.shape)} does not fit input {list(x.shape)} and "
                        f"output shape {list(out_shape)}")
    if b is not None and tuple(b.shape) != (o,):
        raise node.fail(f"bias shape {list(b.shape)} does not match {o} output channels")
    o_ = node.options
    sh, sw, padding = int(o_.stride_h or 1), int(o_.stride_w or 1), int(o_.padding or 0)
    ho, wo = out_shape[1], out_shape[2]
    pt = transpose_padding(padding, ho, kh, sh)
    pl = transpose_padding(padding, wo, kw, sw)
    node.outputs[0].shape = out_shape
    act = clamp_activation(getattr(o_, "fused_activation_function", 0), node)
    tail = _epilogue(b, act, (n * ho, wo * o), wo)
    # Every input pixel scatters a kh x kw x O patch into an accumulator that covers all
    # patches; the output is its window at (pt, pl).
    acc = np.zeros((n, max((h - 1) * sh + kh, pt + ho), max((wd - 1) * sw + kw, pl + wo), o), F32)
    cols = np.empty((n, h, wd, kh, kw, o), F32)
    const_w = w.data
    wm_const = None if const_w is None else np.ascontiguousarray(_patch_weights(const_w))

    def run(_shape, w, x, bias, out):
        wm = wm_const if wm_const is not None else _patch_weights(w)
        np.matmul(x.reshape(n * h * wd, c), wm, out=cols.reshape(n * h * wd, kh * kw * o))
        acc.fill(0.0)
        for i in range(kh):
            for j in range(kw):
                dst = acc[:, i:i + (h - 1) * sh + 1:sh, j:j + (wd - 1) * sw + 1:sw]
                np.add(dst, cols[:, :, :, i, j], out=dst)
        np.copyto(out, acc[:, pt:pt + ho, pl:pl + wo])
        if tail is not None:
            tail(out, bias)
    return _with_optional_last(node, run, 4)



def _patch_weights(w):
    """Filter [O, kh, kw, C] as the [C, kh*kw*O] matrix mapping a pixel to its patch."""
    o, kh, kw, c = w.shape
    return w.transpose(3, 1, 2, 0).reshape(c, kh * kw * o)


def transpose_padding(padding, out_size, kernel, stride):
    """TFLite's padding of a transposed convolution: that of the forward convolution from the
    output size."""
    conv_out, _ = conv_output(padding, out_size, kernel, stride)
    return max(((conv_out - 1) * stride + kernel - out_size) // 2, 0)
