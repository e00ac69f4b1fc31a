"""Gradient rules of the layers: FULLY_CONNECTED BATCH_MATMUL CONV_2D DEPTHWISE_CONV_2D
AVERAGE_POOL_2D MAX_POOL_2D.

Each rule is `rule(em, op, dys, needs) -> grads`: `dys` the gradients of the op's outputs, `needs`
which inputs want one; it returns one gradient (or None) per input. Matmuls contract over the
batch, so weight gradients sum the batch at any batch size; windows are handled tap by tap
(window.py), so the backward ops are STRIDED_SLICE, PAD, RESHAPE and matmuls only.
"""
from __future__ import annotations

import numpy as np

from . import window
from .emit import Emitter, GradientError
from .grad_math import fused_activation_grad

FLOAT_MIN = float(np.finfo(np.float32).min)


def _has(op, k: int) -> bool:
    return len(op.inputs) > k and op.inputs[k] >= 0


def fully_connected(em: Emitter, op, dys, needs):
    x, w = op.inputs[0], op.inputs[1]
    dy = fused_activation_grad(em, op, dys[0])
    units, depth = em.sig(w)
    dy2 = em.reshape(dy, (-1, units))
    grads = [None] * len(op.inputs)
    if needs[0]:
        grads[0] = em.reshape_like(em.op("BATCH_MATMUL", [dy2, w]), x)
    if needs[1]:
        x2 = em.reshape(x, (-1, depth))
        grads[1] = em.op("BATCH_MATMUL", [dy2, x2], adj_x=True)
    if _has(op, 2) and needs[2]:
        grads[2] = em.reshape_like(em.sum(dy2, [0]), op.inputs[2])
    return grads


def batch_matmul(em: Emitter, op, dys, needs):
    a, b = op.inputs[:2]
    dc = dys[0]
    adj_x, adj_y = bool(op.options.adj_x), bool(op.options.adj_y)

    def mm(p, q, tp, tq):
        return em.op("BATCH_MATMUL", [p, q], adj_x=tp, adj_y=tq)

    # C = op(A) @ op(B): each case's dA and dB, as matmuls of what is at hand.
    if not adj_x and not adj_y:
        da, db = (lambda: mm(dc, b, False, True)), (lambda: mm(a, dc, True, False))
    elif adj_x and not adj_y:
        da, db = (lambda: mm(b, dc, False, True)), (lambda: mm(a, dc, False, False))
    elif not adj_x and adj_y:
        da, db = (lambda: mm(dc, b, False, False)), (lambda: mm(dc, a, True, False))
    else:
        da, db = (lambda: mm(b, dc, True, True)), (lambda: mm(dc, a, True, True))
    return [em.unbroadcast(da(), a) if needs[0] else None,
            em.unbroadcast(db(), b) if needs[1] else None]


def _dilation(opts) -> tuple:
    return int(opts.dilation_h_factor or 1), int(opts.dilation_w_factor or 1)


def _bias_grad(em: Emitter, op, dy, needs, grads) -> None:
    if _has(op, 2) and needs[2]:
        grads[2] = em.reshape_like(em.sum(dy, [0, 1, 2]), op.inputs[2])


def conv_2d(em: Emitter, op, dys, needs):
    x, w = op.inputs[0], op.inputs[1]
    dy = fused_activation_grad(em, op, dys[0])
    o, kh, kw, i = em.sig(w)
    h, v = window.spatial(em, x, op.outputs[0], kh, kw, op.options, _dilation(op.options))
    taps = window.taps(h, v)
    grads = [None] * len(op.inputs)
    if needs[1]:  # dW[o, tap, i] = sum over positions of dy[o] * x at the tap: one matmul
        xp = window.padded(em, x, h, v)
        cols = [window.gather(em, xp, h, v, a, b) for a, b in taps]
        col = cols[0] if len(cols) == 1 else em.op("CONCATENATION", cols, axis=3)
        dw = em.op("BATCH_MATMUL", [em.reshape(dy, (-1, o)),
                                    em.reshape(col, (-1, kh * kw * i))], adj_x=True)
        grads[1] = em.reshape(dw, (o, kh, kw, i))
    if needs[0]:  # dx = sum over taps of dy scattered back, times that tap's weights
        u = window.upsample(em, dy, h.stride, v.stride)
        placed, used = [], []
        for k, (a, b) in enumerate(taps):
            p = window.place(em, u, h, v, a, b)
            if p is not None:
                placed.append(p)
                used.append(k)
        z = placed[0] if len(placed) == 1 else em.op("CONCATENATION", placed, axis=3)
        wt = em.reshape(em.op("TRANSPOSE", [w, em.i32([3, 1, 2, 0])]), (i, kh * kw, o))
        if len(used) < len(taps):
            wt = em.op("GATHER", [wt, em.i32(used)], axis=1)
        wt = em.reshape(wt, (i, len(used) * o))
        grads[0] = em.op("FULLY_CONNECTED", [z, wt, -1], keep_num_dims=True)
    _bias_grad(em, op, dy, needs, grads)
    return grads


def depthwise_conv_2d(em: Emitter, op, dys, needs):
    x, w = op.inputs[0], op.inputs[1]
    dy = fused_activation_grad(em, op, dys[0])
    _, kh, kw, cm = em.sig(w)
    c = em.sig(x)[3]
    if c <= 0 or cm % c:
        raise GradientError(f"{em.scope}: {cm} output channels are not a multiple of the "
                            f"{c} input channels")
    m = cm // c
    h, v = window.spatial(em, x, op.outputs[0], kh, kw, op.options, _dilation(op.options))
    taps = window.taps(h, v)
    # Channel c feeds outputs c*m .. c*m+m-1: `spread` copies it there, its transpose sums back.
    spread = np.kron(np.eye(c, dtype=np.float32), np.ones((m, 1), np.float32))  # [cm, c]
    grads = [None] * len(op.inputs)
    if needs[1]:
        xr = x if m == 1 else em.op("FULLY_CONNECTED", [x, em.const(spread), -1],
                                    keep_num_dims=True)
        xp = window.padded(em, xr, h, v)
        sums = [em.sum(em.mul(window.gather(em, xp, h, v, a, b), dy), [0, 1, 2])
                for a, b in taps]
        stacked = sums[0] if len(sums) == 1 else em.op("PACK", sums, axis=0,
                                                         values_count=len(sums))
        grads[1] = em.reshape(stacked, (1, kh, kw, cm))
    if needs[0]:
        u = window.upsample(em, dy, h.stride, v.stride)
        w2 = em.reshape(w, (kh * kw, cm))
        terms = []
        for k, (a, b) in enumerate(taps):
            p = window.place(em, u, h, v, a, b)
            if p is None:
                continue
            wk = em.op("STRIDED_SLICE", [w2, em.i32([k, 0]), em.i32([k + 1, 0]), em.i32([1, 1])],
                       end_mask=0b10)
            terms.append(em.mul(p, wk))
        dx = em.add_n(terms)
        grads[0] = dx if m == 1 else em.op("FULLY_CONNECTED", [dx, em.const(spread.T.copy()), -1],
                                           keep_num_dims=True)
    _bias_grad(em, op, dy, needs, grads)
    return grads


def _in_bounds_counts(h: window.Axis, v: window.Axis) -> np.ndarray:
    """How many taps of each output's window fall inside the input: what the average divides
    by (padding never counts)."""
    def along(a: window.Axis):
        start = np.arange(a.out) * a.stride - a.before
        return np.minimum(start + a.kernel, a.size) - np.maximum(start, 0)
    return np.multiply.outer(along(h), along(v)).astype(np.float32)


def _pool_window(em: Emitter, op):
    o = op.options
    return window.spatial(em, op.inputs[0], op.outputs[0], int(o.filter_height),
                          int(o.filter_width), o)


def average_pool_2d(em: Emitter, op, dys, needs):
    dy = fused_activation_grad(em, op, dys[0])
    h, v = _pool_window(em, op)
    counts = _in_bounds_counts(h, v)
    if (counts == counts.flat[0]).all():
        dy = em.scale(dy, float(1.0 / counts.flat[0]))
    else:
        dy = em.mul(dy, em.const((1.0 / counts)[None, :, :, None].astype(np.float32)))
    u = window.upsample(em, dy, h.stride, v.stride)
    terms = [p for p in (window.place(em, u, h, v, a, b) for a, b in window.taps(h, v))
             if p is not None]
    return [em.add_n(terms)]


def max_pool_2d(em: Emitter, op, dys, needs):
    """The gradient goes to the first maximum of each window (row-major), as TensorFlow's
    and torch's max-pool gradients do."""
    x, y = op.inputs[0], op.outputs[0]
    dy = fused_activation_grad(em, op, dys[0])
    h, v = _pool_window(em, op)
    xp = window.padded(em, x, h, v, fill=FLOAT_MIN)
    taps = window.taps(h, v)
    free = None  # 1 where no earlier tap of the window was the maximum
    terms = []
    for k, (a, b) in enumerate(taps):
        hit = em.cast(em.op("EQUAL", [window.gather(em, xp, h, v, a, b), y], dtype="bool"),
                      "float32")
        first = hit if free is None else em.mul(hit, free)
        if k + 1 < len(taps):
            free = em.sub(em.scalar(1.0), first) if free is None else em.sub(free, first)
        p = window.place(em, window.upsample(em, em.mul(dy, first), h.stride, v.stride),
                         h, v, a, b)
        if p is not None:
            terms.append(p)
    return [em.add_n(terms)]
