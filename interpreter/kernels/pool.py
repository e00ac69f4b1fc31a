"""AVERAGE_POOL_2D, MAX_POOL_2D and L2_POOL_2D on float32 NHWC data.

Each pool combines its window's taps one strided view at a time (taps.py's `Window`;
ufunc.reduce over all taps of a strided view is several times slower). Padding never counts:
MAX_POOL pads with -inf, the averages divide by the number of in-bounds taps.
"""
from __future__ import annotations

import numpy as np

from numpy.lib.stride_tricks import as_strided

from .common import (F32, NONE, RELU, RELU6, RELU_N1_TO_1, bounds, check_float,
                     clamp_activation, raw, reference_resolver)
from .steps import call, calls_step
from .geometry import pool_windows
from .registry import register
from .taps import Window


# nan_to_low's fmax against a lower bound of the array's own shape up to this many elements:
# against a 0-d one numpy broadcasts, 0.78 vs 0.35 µs a call on 1352 values.
FULL_BOUND_ELEMENTS = 1 << 16


def nan_to_low(lo, hi):
    """An in-place clamp max(x, lo) then min(x, hi) that takes NaN to `lo` (XNNPACK's, and
    TFLite's max pool, whose max starts at lowest); carries its 0-d `bounds`."""
    lo, hi = bounds(lo, hi)
    fmax, minimum, upper = np.fmax, np.minimum, bool(hi != np.inf)

    def clamp(x):
        fmax(x, lo, x)
        if upper:
            minimum(x, hi, out=x)

    def calls_on(x):
        low = np.full(x.shape, lo) if 1 < x.size <= FULL_BOUND_ELEMENTS else lo
        return ((fmax, (x, low, x), {}), (minimum, (x, hi), {"out": x}) if upper else None)
    clamp.bounds = lo, hi
    clamp.calls_on = calls_on   # its calls on a fixed x (steps.calls_step)
    return clamp



def _delegated(node) -> bool:
    """Whether LiteRT's default resolver runs this pool in XNNPACK."""
    code = int(node.options.fused_activation_function or 0)
    return node.op != "L2_POOL_2D" and not reference_resolver(node) \
        and code in (NONE, RELU, RELU_N1_TO_1, RELU6)


def _window(node):
    win = pool_windows(node)
    x = node.input(0)
    check_float(node, x)
    fill = -np.inf if node.op == "MAX_POOL_2D" else 0.0
    code = int(node.options.fused_activation_function or 0)
    # XNNPACK takes AVERAGE_POOL_2D and MAX_POOL_2D with these activations under LiteRT's
    # default resolver: its clamp is max(x, lo) then min(x, hi), a NaN comes out lo (-inf
    # without an activation); the optimized and reference kernels clamp to the activation's
    # range or [-FLT_MAX, FLT_MAX] (NaN stays NaN)
    delegated = _delegated(node)
    act = clamp_activation(code, node, delegated)
    if delegated and node.op == "AVERAGE_POOL_2D":
        act = nan_to_low(*(act.bounds if act is not None else (-np.inf, np.inf)))
    elif node.op == "MAX_POOL_2D" and act is None:
        # XNNPACK's: a window of NaN alone gives -inf; a 1x1 pool it copies (NaN stays)
        act = None if win.kh * win.kw == 1 else nan_to_low(-np.inf, np.inf)
    elif node.op == "MAX_POOL_2D":
        # TFLite's max starts at lowest and compares with >: a NaN never wins, a window of
        # NaN alone gives lowest, then the clamp (XNNPACK's: NaN to lo, the same)
        act = nan_to_low(*act.bounds)
    return Window(node, x.shape, win, fill=fill), act


def _in_bounds_counts(win, shape):
    """How many taps of each output's window fall inside the input, as a scalar when all
    agree, else an array in the layout of `win.out_view`."""
    n, h, w, c = shape

    def along(size, out, kernel, stride, pad):
        start = np.arange(out) * stride - pad
        return np.minimum(start + kernel, size) - np.maximum(start, 0)

    counts = np.multiply.outer(along(h, win.ho, win.kh, win.sh, win.pt),
                               along(w, win.wo, win.kw, win.sw, win.pl)).astype(F32)
    if (counts == counts.flat[0]).all():
        return F32.type(counts.flat[0])
    full = np.ascontiguousarray(np.broadcast_to(counts[None, :, :, None], win.shape))
    return win.out_view(full)


def _reduce_taps(win, x, out, ufunc):
    """The window's taps of `x` folded with `ufunc` (add, maximum) into `out`'s view; returns
    that view."""
    if win.copy_in is not None:
        win.copy_in(x)
    o = win.out_view(out)
    for function, args, keywords in _fold_calls(win, x, o, ufunc):
        function(*args, **keywords)
    return o


def _is_global(win, shape) -> bool:
    """Whether the pool is one window over the whole unpadded input."""
    return win.copy_in is None and win.ho == win.wo == 1 and \
        (win.kh, win.kw, win.dh, win.dw) == (shape[1], shape[2], 1, 1)


def _fold_calls(win, x, o, ufunc) -> list:
    """The calls (steps.call) folding the window's taps of `x` with `ufunc` into its output
    view `o`: a global pool (one window over the whole unpadded input) is one reduce, adding
    its taps in the fold's order (selfie segmentation's 128x128x16 pool was 16383 calls of 16
    values: 6.8 ms)."""
    if _is_global(win, x.shape):
        n, h, w, c = x.shape
        return [call(ufunc.reduce, x.reshape(n, h * w, c), axis=1, out=o.reshape(n, c))]
    taps = win.tap_list(x)
    first = call(raw(np.copyto), o, taps[0]) if len(taps) == 1 else \
        call(ufunc, taps[0], taps[1], out=o)   # (np.maximum's positional out is deprecated)
    return [first, *[call(ufunc, o, t, out=o) for t in taps[2:]]]


def _summing_pool(node, square: bool):
    win, act = _window(node)
    x_shape = node.input(0).shape
    counts = _in_bounds_counts(win, x_shape)
    squares = np.empty(x_shape, F32) if square else None

    def run(x, out):
        if square:
            np.square(x, out=squares)
            x = squares
        o = _reduce_taps(win, x, out, np.add)
        np.divide(o, counts, out=o)
        if square:
            np.sqrt(o, out=o)
        if act is not None:
            act(o)

    def bind(x, out):
        """`run`'s calls on the plan's fixed arrays (plan.bind_step), the taps' views made once;
        unpadded windows only (None: the plan keeps `run`)."""
        if win.copy_in is not None:
            return None
        o = win.out_view(out)
        return calls_step(call(np.square, x, squares) if square else None,
                          *_fold_calls(win, squares if square else x, o, np.add),
                          call(np.divide, o, counts, o),
                          call(np.sqrt, o, o) if square else None,
                          *(() if act is None else act.calls_on(o)))
    run.bind = bind
    return run


@register("AVERAGE_POOL_2D", "float32")
def average_pool_2d(node):
    return _summing_pool(node, square=False)


@register("L2_POOL_2D", "float32")
def l2_pool_2d(node):
    return _summing_pool(node, square=True)


@register("MAX_POOL_2D", "float32")
def max_pool_2d(node):
    win, act = _window(node)
    # a NaN tap skipped, as TFLite's; XNNPACK's (default resolver): the window's max NaN, which
    # its clamp takes to the lower bound (-inf without an activation). XNNPACK keeps a NaN only
    # in some tap positions (one per window: its last tap, e.g. a 2x2 window's top left), skips
    # or half-skips it in others; not followed: a finite max where LiteRT's is -inf would hide
    # the NaN from the rest of the model (keras_resnet50: all NaN in LiteRT)
    fold = np.maximum if _delegated(node) else np.fmax

    def run(x, out):
        o = _reduce_taps(win, x, out, fold)
        if act is not None:
            act(o)
    run.bind = lambda x, out: _separable_max(win, x, out, act, fold)
    return run


def _separable_max(win, x, out, act, fold):
    """MAX_POOL_2D on the plan's fixed arrays (plan.bind_step): the window's rows folded into a
    scratch [N, Ho, W, C] first, then its columns into `out`: kh + kw - 2 maxima instead of
    kh * kw - 1 (2 instead of 3 for a 2x2 pool, 4 instead of 8 for 3x3), each over contiguous
    rows. Max is exact in any order. Unpadded windows only (None: the plan keeps `run`)."""
    if _is_global(win, x.shape):   # one reduce (max is exact in any order)
        return calls_step(*_fold_calls(win, x, win.out_view(out), fold),
                          *(() if act is None else act.calls_on(out)))
    if win.copy_in is not None or not x.flags.c_contiguous or not out.flags.c_contiguous:
        return None
    n, ho, wo, c = win.shape
    sn, sy, sx, sc = x.strides
    width = (wo - 1) * win.sw + (win.kw - 1) * win.dw + 1     # input columns the taps read
    # one column per window (kw 1): the rows read every sw-th column, no column fold follows
    width, step = (wo, sx * win.sw) if win.kw == 1 else (width, sx)
    rows = [as_strided(x[:, i * win.dh:], (n, ho, width, c), (sn, sy * win.sh, step, sc),
                       writeable=False) for i in range(win.kh)]
    if win.kw == 1:
        folded, cols = out, None
    else:
        folded = rows[0] if win.kh == 1 else np.empty((n, ho, width, c), np.float32)
        tn, ty, tx, tc = folded.strides
        cols = [as_strided(folded[:, :, j * win.dw:], (n, ho, wo, c), (tn, ty, tx * win.sw, tc),
                           writeable=False) for j in range(win.kw)]
    steps = []   # (a, b, into): into = maximum(a, b)
    if win.kh > 1:
        steps += [(rows[0], rows[1], folded)] + [(folded, r, folded) for r in rows[2:]]
    elif cols is None:
        steps.append((rows[0], rows[0], out))    # a 1x1 window: a copy
    if cols is not None:
        steps += [(cols[0], cols[1], out)] + [(out, col, out) for col in cols[2:]]

    return calls_step(*[call(fold, a, b, into) if fold is np.fmax else
                        call(fold, a, b, out=into) for a, b, into in steps],
                      *(() if act is None else act.calls_on(out)))
