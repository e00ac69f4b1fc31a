"""Float convolutions summed in the order of TFLite's reference kernels, for
OpResolverType.BUILTIN_REF where that is cheap: DEPTHWISE_CONV_2D always (kh * kw passes), a
CONV_2D whose window holds few products (kh * kw * C <= ORDERED_CONV_TERMS: a stem conv over
RGB, 27 terms).

TFLite's reference_ops Conv / DepthwiseConv sum each output as `total += input * filter` over
filter_y, filter_x (then in_channel for CONV_2D) from 0, in float32 with no fused multiply-add,
then add the bias and clamp. The same passes here (one multiply, one add per term, each rounded
to float32) give LiteRT's BUILTIN_REF results bit for bit, where the BLAS and einsum kernels
differ by a few ulps. Why it matters: a dynamic-range (hybrid) layer after a float one quantizes
its input on the fly, and a 1-ulp difference that moves a value across a rounding boundary
becomes a whole quantization step (issue 13, item 4).
"""
from __future__ import annotations

import numpy as np

from .common import F32, clamp_activation
from .geometry import conv_windows

ORDERED_CONV_TERMS = 32


def applies(node, x_shape, w_shape, depthwise: bool) -> bool:
    """Whether `node` runs under BUILTIN_REF in an interpreter and the ordered sum is cheap."""
    if not getattr(getattr(node, "runtime", None), "reference", False):
        return False
    if depthwise:
        return True
    _, kh, kw, c = w_shape
    return c == x_shape[3] and kh * kw * c <= ORDERED_CONV_TERMS   # groups: the fast kernel


def prepare(node, x, w, b, depthwise: bool):
    """run(x, w, bias, out) summing each output in the reference kernel's order."""
    n, h, wd, c = x.shape
    _, kh, kw, wc = w.shape
    o = wc if depthwise else w.shape[0]
    mult = o // c if depthwise else 1
    win = conv_windows(node, x.shape, kh, kw)
    ho, wo = win.oh, win.ow
    node.outputs[0].shape = (n, ho, wo, o)
    act = clamp_activation(node.options.fused_activation_function, node)
    ph = max(h + win.pt, (ho - 1) * win.sh + (kh - 1) * win.dh + 1)
    pw = max(wd + win.pl, (wo - 1) * win.sw + (kw - 1) * win.dw + 1)
    padded = np.zeros((n, ph, pw, c), F32)
    inner = padded[:, win.pt:win.pt + h, win.pl:win.pl + wd]
    acc = np.empty((n, ho, wo, o), F32)
    term = np.empty_like(acc)
    wide = np.empty((n, ho, wo, o), F32) if mult > 1 else None

    def taps():
        for fy in range(kh):
            for fx in range(kw):
                y0, x0 = fy * win.dh, fx * win.dw
                yield fy, fx, padded[:, y0:y0 + (ho - 1) * win.sh + 1:win.sh,
                                     x0:x0 + (wo - 1) * win.sw + 1:win.sw]

    def run(x, w, bias, out):
        np.copyto(inner, x)
        acc.fill(0)
        for fy, fx, tap in taps():
            if depthwise:
                src = tap
                if wide is not None:
                    np.copyto(wide, np.repeat(tap, mult, axis=-1))
                    src = wide
                np.multiply(src, w[0, fy, fx], out=term)
                np.add(acc, term, out=acc)
            else:
                for ic in range(c):
                    np.multiply(tap[..., ic:ic + 1], w[:, fy, fx, ic], out=term)
                    np.add(acc, term, out=acc)
        if bias is not None:
            np.add(acc, bias, out=acc)
        if act is not None:
            act(acc)
        np.copyto(out, acc)
    return run
