"""The taps of sliding windows (convolutions and pools) as strided views of NHWC input, and the
padded copies they read.

`Window` holds the taps that im2col and the pools read: views straight into the input, or, when
the windows reach outside it, into a `PaddedInput` (the input copied into the interior of a
buffer whose border holds the padding's value). `TapGrid` lays a depthwise convolution's taps
out for `einsum`: views whose innermost axis is a whole output row.

Padded inputs, column phases and im2col buffers are work buffers shared by all the kernels of an
interpreter (`Scratch`): one block that the previous layer left in cache instead of one cold
buffer per layer (MobileNetV2: ~17 MB less memory touched per invoke, ~5% faster).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .geometry import Windows
from .scratch import Scratch

F32 = np.dtype(np.float32)


def check_padded(node, padded: int, size: int, itemsize: int = 4) -> None:
    """Refuse a padded copy of `padded` values (of an input of `size`) that does not fit the
    interpreter's allocation budget: the bytes it takes decide, not its ratio to the input (a
    real dilated convolution pads a small input a lot; a stride or dilation that only a hostile
    file has makes one of gigabytes)."""
    from .. import budget  # the budget module imports the kernels' registry
    budget.check(node, int(padded) * itemsize,
                 f"a padded input of {padded} values for {size} input values")


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

    def fill_from(self, x, scale=None) -> np.ndarray:
        """Copy `x` in (times `scale` when given: a hybrid kernel's quantization writes its
        first pass here), refill the border; the buffer."""
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
        if scale is None:
            for region, src in copies:
                np.copyto(region, x[src][..., None] if self.repeat > 1 else x[src])
        else:
            for region, src in copies:
                np.multiply(x[src][..., None] if self.repeat > 1 else x[src], scale, region)
        return buffer

    @property
    def buffer(self) -> np.ndarray:
        """The whole buffer (border and interior) the last fill_from wrote."""
        return self._bound[0]


class Window:
    """The taps of a kh x kw window sliding over NHWC input, as strided views.

    When the window reaches outside the input (SAME padding), the input is copied into the
    interior of a buffer whose border holds `fill` (a PaddedInput); otherwise the views look
    straight at the input array. Views are built once per array they look at."""

    def __init__(self, node, shape, g: Windows, fill=0.0):
        n, h, w, c = shape
        self.kh, self.kw, self.sh, self.sw, self.dh, self.dw = g.kh, g.kw, g.sh, g.sw, g.dh, g.dw
        self.ho, self.wo, self.pt, self.pl = g.oh, g.ow, g.pt, g.pl
        self.shape = (n, self.ho, self.wo, c)
        self.padded = None
        if g.padded(h, w):
            self.padded = PaddedInput(node, shape, max(g.rows, self.pt + 1),
                                      max(g.cols, self.pl + 1), self.pt, self.pl, fill=fill)
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
            self._items = opaque_items(base, (self.kh,) + self.shape[:3],
                                 (sy * self.dh, sn, sy * self.sh, sx * self.sw),
                                 self.kw * self.shape[3] * base.itemsize)
        return self._items


def opaque_items(base, shape, strides, nbytes):
    """A view of `base` (C-contiguous) whose elements are the `nbytes` bytes at `strides`."""
    raw = as_strided(base.reshape(-1).view(np.uint8), tuple(shape) + (nbytes,),
                     tuple(strides) + (1,))
    return raw.view(np.dtype((np.void, nbytes)))[..., 0]


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
    def bands(cls, node, shape, g: Windows, repeat) -> list:
        """One grid for the whole output, or (phases above BAND_BYTES) one per band of rows."""
        whole = cls(node, shape, g, repeat, reserve=False)
        per_row = g.sh * whole.cols * whole.c * 4          # phase bytes per output row
        if g.sw == 1 or whole.end * per_row <= cls.BAND_BYTES * 4 // 3:
            return [cls(node, shape, g, repeat)]
        step = max(1, cls.BAND_BYTES // per_row)
        return [cls(node, shape, g, repeat, band=(y, min(y + step, whole.end)))
                for y in range(0, whole.end, step)]

    def __init__(self, node, shape, g: Windows, repeat, band=None, reserve=True):
        n, h, w, c = shape
        kh, kw, sh, sw, dh, dw = g.kh, g.kw, g.sh, g.sw, g.dh, g.dw
        ho, pt, self.wo, pl = g.oh, g.pt, g.ow, g.pl
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

    def views(self, x, scale=None):
        """Copy `x` (times `scale` when given: PaddedInput.fill_from) into the phase buffer if
        there is one; the views [kh, taps, N, Ho, Wo*C] and a work buffer for the einsum of the
        views after the first."""
        base = x[None] if self.padded is None else self.padded.fill_from(x, scale)
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


# -- TRANSPOSE_CONV: patches scattered into an accumulator -------------------------------------

def patch_accumulator(x_shape, w_shape, out_shape, strides, pads, dtype) -> np.ndarray:
    """The accumulator a transposed convolution scatters into: it covers every input pixel's
    kh x kw patch and the output's window at (pt, pl)."""
    (n, h, w, _), (o, kh, kw, _), (sh, sw), (pt, pl) = x_shape, w_shape, strides, pads
    return np.zeros((n, max((h - 1) * sh + kh, pt + out_shape[1]),
                     max((w - 1) * sw + kw, pl + out_shape[2]), o), dtype)


def scatter_patches(acc: np.ndarray, patches: np.ndarray, strides) -> None:
    """acc = the sum of every input pixel's patch (patches [N, H, W, kh, kw, O]) placed at the
    pixel times the strides: kh * kw strided adds."""
    _, h, w, kh, kw, _ = patches.shape
    sh, sw = strides
    acc.fill(0)
    for i in range(kh):
        for j in range(kw):
            dst = acc[:, i:i + (h - 1) * sh + 1:sh, j:j + (w - 1) * sw + 1:sw]
            np.add(dst, patches[:, :, :, i, j], out=dst)

