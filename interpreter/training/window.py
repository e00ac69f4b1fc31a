"""Sliding windows in builtin ops, for the gradients of convolutions and pools.

A k x k window over NHWC input is k*k taps: tap (i, j) reads the padded input at rows
i*dilation + y*stride. `gather` is that strided read (one STRIDED_SLICE); its adjoint, `scatter`,
puts a value of the output grid back where the tap read it: `upsample` spreads the output grid to
the input's spacing (zeros between, by RESHAPE and PAD only), `place` shifts and crops it onto the
input. Every op keeps the batch open, so the same graph runs at any batch size.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..kernels.common import conv_output
from .emit import Emitter, GradientError

BATCH_AND_CHANNELS = 0b1001  # begin/end mask bits: the whole batch and channel axes


@dataclass(frozen=True)
class Axis:
    """One spatial axis of a window: input size, output size, kernel, stride, dilation, padding
    before and after (what the kernels use: TFLite's SAME/VALID arithmetic)."""

    size: int
    out: int
    kernel: int
    stride: int
    dilation: int
    before: int
    after: int

    def offset(self, tap: int) -> int:
        """Where tap `tap` starts, in unpadded input coordinates."""
        return tap * self.dilation - self.before


def axis(size: int, kernel: int, stride: int, dilation: int, padding: int) -> Axis:
    out, before = conv_output(padding, size, kernel, stride, dilation)
    need = (out - 1) * stride + (kernel - 1) * dilation + 1
    return Axis(size, out, kernel, stride, dilation, before, max(need - size - before, 0))


def spatial(em: Emitter, x: int, y: int, kh: int, kw: int, opts, dilation=(1, 1)) -> tuple:
    """The two Axis of a window op from x [N,H,W,C] to y [N,OH,OW,C']; checks the output size."""
    xs, ys = em.sig(x), em.sig(y)
    if len(xs) != 4 or -1 in xs[1:3]:
        raise GradientError(f"{em.scope}: the input {list(xs)} must be NHWC with static height "
                            "and width")
    pad = int(opts.padding or 0)
    h = axis(xs[1], kh, int(opts.stride_h or 1), dilation[0], pad)
    w = axis(xs[2], kw, int(opts.stride_w or 1), dilation[1], pad)
    if (h.out, w.out) != tuple(ys[1:3]):
        raise GradientError(f"{em.scope}: output {list(ys)} is not what the window gives "
                            f"({h.out}x{w.out})")
    return h, w


def padded(em: Emitter, x: int, h: Axis, w: Axis, fill: float | None = None) -> int:
    """x with the window's padding (zeros, or `fill` through PADV2)."""
    if not (h.before or h.after or w.before or w.after):
        return x
    pads = em.i32([[0, 0], [h.before, h.after], [w.before, w.after], [0, 0]])
    if fill is None:
        return em.op("PAD", [x, pads])
    return em.op("PADV2", [x, pads, em.scalar(fill)])


def gather(em: Emitter, xp: int, h: Axis, w: Axis, i: int, j: int) -> int:
    """Tap (i, j) of the padded input: [N, OH, OW, C]."""
    top, left = i * h.dilation, j * w.dilation
    begin = em.i32([0, top, left, 0])
    end = em.i32([0, top + (h.out - 1) * h.stride + 1, left + (w.out - 1) * w.stride + 1, 0])
    strides = em.i32([1, h.stride, w.stride, 1])
    return em.op("STRIDED_SLICE", [xp, begin, end, strides], begin_mask=BATCH_AND_CHANNELS,
                 end_mask=BATCH_AND_CHANNELS)


def upsample(em: Emitter, g: int, sh: int, sw: int) -> int:
    """g [N, OH, OW, C] spread to [N, OH*sh, OW*sw, C] with g at every (sh, sw)-th place."""
    _, oh, ow, c = em.sig(g)
    if sw > 1:
        g = em.reshape(g, (-1, ow, 1, c))
        g = em.op("PAD", [g, em.i32([[0, 0], [0, 0], [0, sw - 1], [0, 0]])])
        g = em.reshape(g, (-1, oh, ow * sw, c))
        ow *= sw
    if sh > 1:
        g = em.reshape(g, (-1, oh, 1, ow * c))
        g = em.op("PAD", [g, em.i32([[0, 0], [0, 0], [0, sh - 1], [0, 0]])])
        g = em.reshape(g, (-1, oh * sh, ow, c))
    return g


def _fit(length: int, offset: int, size: int) -> tuple | None:
    """(begin, end, pad before, pad after) that move a length-`length` row to start at `offset`
    on a row of `size`; None when nothing of it lands inside."""
    begin = max(-offset, 0)
    before = max(offset, 0)
    keep = min(length - begin, size - before)
    if keep <= 0:
        return None
    return begin, begin + keep, before, size - before - keep


def place(em: Emitter, u: int, h: Axis, w: Axis, i: int, j: int) -> int | None:
    """The upsampled grid `u` shifted to where tap (i, j) read the input and cropped to the
    input's height and width; None when the tap only ever read padding."""
    _, lh, lw, _ = em.sig(u)
    fh = _fit(lh, h.offset(i), h.size)
    fw = _fit(lw, w.offset(j), w.size)
    if fh is None or fw is None:
        return None
    if fh[0] or fh[1] < lh or fw[0] or fw[1] < lw:
        u = em.op("STRIDED_SLICE", [u, em.i32([0, fh[0], fw[0], 0]), em.i32([0, fh[1], fw[1], 0]),
                                    em.i32([1, 1, 1, 1])],
                  begin_mask=BATCH_AND_CHANNELS, end_mask=BATCH_AND_CHANNELS)
    if fh[2] or fh[3] or fw[2] or fw[3]:
        u = em.op("PAD", [u, em.i32([[0, 0], [fh[2], fh[3]], [fw[2], fw[3]], [0, 0]])])
    return u


def taps(h: Axis, w: Axis) -> list:
    return [(i, j) for i in range(h.kernel) for j in range(w.kernel)]
