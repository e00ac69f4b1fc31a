"""Float kernels as TFLite's reference kernels compute, for OpResolverType.BUILTIN_REF where
that is cheap: convolutions summed in their order (DEPTHWISE_CONV_2D always, kh * kw passes; a
CONV_2D whose window holds few products, kh * kw * C <= ORDERED_CONV_TERMS: a stem conv over
RGB, 27 terms; or with few outputs: squeeze-excite convs), and LOGISTIC's reference formula
(the swish of EfficientNet).

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


ORDERED_STACK_VALUES = 1 << 22   # products held at once by the stacked form (16 MB)


def applies(node, x_shape, w_shape, depthwise: bool) -> bool:
    """Whether `node` runs under BUILTIN_REF in an interpreter and the ordered sum is cheap."""
    if not getattr(getattr(node, "runtime", None), "reference", False):
        return False
    if depthwise:
        return True
    o, kh, kw, c = w_shape
    if c != x_shape[3]:
        return False                                                # groups: the fast kernel
    return kh * kw * c <= ORDERED_CONV_TERMS or \
        kh * kw * c * o * _outputs(node, x_shape, kh, kw) <= ORDERED_STACK_VALUES


def _outputs(node, x_shape, kh, kw) -> int:
    win = conv_windows(node, x_shape, kh, kw)
    return x_shape[0] * win.oh * win.ow


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

    def finish(bias, out):
        """out = act(acc + bias): the epilogue of both sums."""
        if bias is not None:
            np.add(acc, bias, out=acc)
        if act is not None:
            act(acc)
        np.copyto(out, acc)

    terms = kh * kw * c
    if not depthwise and terms > ORDERED_CONV_TERMS:
        # Many terms, few outputs (a squeeze-excite conv on a pooled vector): every product at
        # once, [terms, outputs, O], then added along the first axis, which numpy does row
        # after row, in order.
        m = n * ho * wo
        cols = np.empty((kh, kw, c, m), F32)
        stack = np.empty((terms, m, o), F32)

        def run_stacked(x, w, bias, out):
            np.copyto(inner, x)
            for fy, fx, tap in taps():
                np.copyto(cols[fy, fx], tap.reshape(m, c).T)
            np.multiply(cols.reshape(terms, m, 1),
                        np.asarray(w, F32).reshape(o, terms).T[:, None, :], out=stack)
            np.add.reduce(stack, axis=0, out=acc.reshape(m, o))
            finish(bias, out)
        return run_stacked

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
        finish(bias, out)
    return run


# -- LOGISTIC --------------------------------------------------------------------------------------
# TFLite's reference Logistic: 1 above 16.619047, expf(x) below -9, else 1 / (1 + expf(-x)), in
# float32, with libm's expf. glibc's expf is not correctly rounded (within 0.502 ulp: rounding a
# float64 exp differs on about 3 inputs in 10^4, numpy's float32 exp on 1 in 4), so its
# algorithm is followed here in float64, step by step: x * 32/ln2 split into k + r, 2^(k/32)
# from a table of 32, a cubic in r. Equal to glibc's expf on every input tried (150000, both
# its FMA and plain builds); below -87.3 (subnormal results) a rounded float64 exp.
_N = 32
_EXP2_TABLE = np.array([np.float64(2.0 ** (i / _N)).view(np.uint64) - np.uint64(i << 47)
                        for i in range(_N)], np.uint64)
_INV_LN2_N = float.fromhex("0x1.71547652b82fep+0") * _N
_C0 = float.fromhex("0x1.c6af84b912394p-5") / _N ** 3
_C1 = float.fromhex("0x1.ebfce50fac4f3p-3") / _N ** 2
_C2 = float.fromhex("0x1.62e42ff0c52d6p-1") / _N
_SHIFT = float.fromhex("0x1.8p+52")
_LOGISTIC_UPPER, _LOGISTIC_LOWER = np.float32(16.619047164916992188), np.float32(-9.0)


def expf(x: np.ndarray) -> np.ndarray:
    """glibc's expf of float32 `x` (|x| <= 88), as float32."""
    z = _INV_LN2_N * x.astype(np.float64)
    kd = z + _SHIFT
    ki = kd.view(np.uint64)
    r = z - (kd - _SHIFT)
    s = (_EXP2_TABLE[(ki % np.uint64(_N)).astype(np.intp)] + (ki << np.uint64(47))) \
        .view(np.float64)
    y = (_C0 * r + _C1) * (r * r) + (_C2 * r + 1.0)
    return (y * s).astype(F32)


def logistic(x, out):
    middle = np.clip(x, _LOGISTIC_LOWER, _LOGISTIC_UPPER)
    np.divide(np.float32(1), np.float32(1) + expf(-middle), out=out)
    below = x < _LOGISTIC_LOWER
    if below.any():
        low = x[below]
        tiny = low < np.float32(-87.0)
        value = expf(np.maximum(low, np.float32(-87.0)))
        with np.errstate(under="ignore"):
            value[tiny] = np.exp(low[tiny].astype(np.float64)).astype(F32)
        out[below] = value
    np.copyto(out, np.float32(1), where=x > _LOGISTIC_UPPER)
