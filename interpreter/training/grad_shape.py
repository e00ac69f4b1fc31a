"""Gradient rules of data movement: RESHAPE SQUEEZE EXPAND_DIMS TRANSPOSE CONCATENATION PAD PADV2
STRIDED_SLICE GATHER, and DEQUANTIZE (frozen: its input is a constant).

`rule(em, op, dys, needs) -> grads`, as in grad_nn.py.
"""
from __future__ import annotations

import numpy as np

from .emit import Emitter, GradientError
from .grad_math import fused_activation_grad


def _rest(op, first) -> list:
    return [first] + [None] * (len(op.inputs) - 1)


def reshape(em: Emitter, op, dys, needs):
    return _rest(op, em.reshape_like(dys[0], op.inputs[0]))


squeeze = expand_dims = reshape


def dequantize(em: Emitter, op, dys, needs):
    return [None]


def _constant(em: Emitter, op, k: int, what: str) -> np.ndarray:
    value = em.value(op.inputs[k])
    if value is None:
        raise GradientError(f"{em.scope}: {op.op} needs a constant {what} for its gradient")
    return np.asarray(value)


def transpose(em: Emitter, op, dys, needs):
    perm = _constant(em, op, 1, "permutation").reshape(-1) % len(em.sig(op.inputs[0]))
    return _rest(op, em.op("TRANSPOSE", [dys[0], em.i32(np.argsort(perm))]))


def concatenation(em: Emitter, op, dys, needs):
    dy = fused_activation_grad(em, op, dys[0])
    rank = len(em.sig(dy))
    axis = int(op.options.axis) % rank
    sizes = [em.sig(t)[axis] for t in op.inputs]
    if -1 in sizes:
        raise GradientError(f"{em.scope}: CONCATENATION along axis {axis}, which follows the "
                            "batch, has no gradient rule")
    if len(sizes) == 1:
        return [dy]
    parts = em.op("SPLIT_V", [dy, em.i32(sizes), em.i32(axis)], outputs=len(sizes),
                  num_splits=len(sizes))
    return [p if need else None for p, need in zip(parts, needs)]


def pad(em: Emitter, op, dys, needs):
    pads = _constant(em, op, 1, "paddings").reshape(-1, 2)
    if not pads.any():
        return _rest(op, dys[0])
    end_mask = sum(1 << i for i, after in enumerate(pads[:, 1]) if after == 0)
    begin = em.i32(pads[:, 0])
    end = em.i32([-int(after) for after in pads[:, 1]])
    strides = em.i32(np.ones(len(pads), np.int32))
    return _rest(op, em.op("STRIDED_SLICE", [dys[0], begin, end, strides], end_mask=end_mask))


padv2 = pad


def _lines(em: Emitter, op) -> list:
    """Per input axis: (first index, step, count) of the elements the slice takes, learned by
    running the op's own kernel on an index grid; GradientError if it is not one per axis."""
    x = op.inputs[0]
    shape = em.shape(x)
    probe = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    (picked,) = em.evaluate(op, {0: probe})
    if picked.size == 0:
        raise GradientError(f"{em.scope}: STRIDED_SLICE takes nothing; no gradient to give")
    coords = np.unravel_index(picked.reshape(-1), shape)
    counts = tuple(len(np.unique(c)) for c in coords)
    if int(np.prod(counts)) != picked.size:
        raise GradientError(f"{em.scope}: this STRIDED_SLICE repeats elements; no rule for it")
    lines = []
    for d, c in enumerate(coords):
        grid = c.reshape(counts)
        line = grid[tuple(slice(None) if k == d else 0 for k in range(len(shape)))]
        step = int(line[1] - line[0]) if len(line) > 1 else 1
        if step == 0 or not (np.diff(line) == step).all() or not (
                grid == line.reshape([-1 if k == d else 1 for k in range(len(shape))])).all():
            raise GradientError(f"{em.scope}: STRIDED_SLICE axis {d} is not a strided range")
        if em.sig(x)[d] == -1 and (step != 1 or line[0] != 0 or len(line) != shape[d]):
            raise GradientError(f"{em.scope}: STRIDED_SLICE cuts axis {d}, which follows the "
                                "batch; only whole batches have a gradient rule")
        lines.append((int(line[0]), step, len(line)))
    return lines


def _upsample_axis(em: Emitter, g: int, d: int, step: int) -> int:
    """g spread along axis d with step-1 zeros after each element."""
    gs = em.sig(g)
    pre = -1 if -1 in gs[:d] else int(np.prod(gs[:d], dtype=np.int64))
    post = gs[d + 1:]
    if -1 in post:
        raise GradientError(f"{em.scope}: a strided axis before one that follows the batch")
    flat = em.reshape(g, (pre, gs[d], 1, int(np.prod(post, dtype=np.int64))))
    flat = em.op("PAD", [flat, em.i32([[0, 0], [0, 0], [0, step - 1], [0, 0]])])
    return em.reshape(flat, gs[:d] + (gs[d] * step,) + post)


def strided_slice(em: Emitter, op, dys, needs):
    x = op.inputs[0]
    xs, shape = em.sig(x), em.shape(x)
    lines = _lines(em, op)
    g = em.reshape_to(dys[0], tuple(-1 if s == -1 else n for s, (_, _, n) in zip(xs, lines)), x)
    starts, ends, end_mask, trim = [], [], 0, False
    for d, (first, step, n) in enumerate(lines):
        if step < 0:
            g = em.op("REVERSE_V2", [g, em.i32([d])])
            first, step = first + step * (n - 1), -step
        if step > 1:
            g = _upsample_axis(em, g, d, step)
            trim = True
        length = (n - 1) * step + 1
        starts.append((first, shape[d] - first - length))
        ends.append(length)
        if xs[d] == -1 or step == 1:
            end_mask |= 1 << d
    if trim:
        g = em.op("STRIDED_SLICE", [g, em.i32([0] * len(lines)), em.i32(ends),
                                    em.i32([1] * len(lines))], end_mask=end_mask)
    if any(a or b for a, b in starts):
        g = em.op("PAD", [g, em.i32(starts)])
    return _rest(op, g)


def gather(em: Emitter, op, dys, needs):
    """dParams = one_hot(indices)^T @ dy: a matmul that sums repeated indices."""
    params, indices = op.inputs[0], op.inputs[1]
    if not needs[0]:
        return [None, None]
    if int(getattr(op.options, "batch_dims", 0) or 0):
        raise GradientError(f"{em.scope}: GATHER with batch_dims has no gradient rule")
    ps = em.sig(params)
    if -1 in ps:
        raise GradientError(f"{em.scope}: GATHER params {list(ps)} follow the batch; no rule")
    axis = int(op.options.axis) % len(ps)
    n = ps[axis]
    pre = int(np.prod(ps[:axis], dtype=np.int64))
    post = int(np.prod(ps[axis + 1:], dtype=np.int64))
    flat = em.reshape(indices, (-1, 1))
    rows = em.const(np.arange(n).astype(em.sg.tensors[indices].np_dtype))
    hot = em.cast(em.op("EQUAL", [flat, rows], dtype="bool"), "float32")  # [K, n]
    g = em.reshape(dys[0], (-1, post) if pre == 1 else (pre, -1, post))
    return [em.reshape(em.op("BATCH_MATMUL", [hot, g], adj_x=True), ps), None]
