"""ONNX Einsum as TRANSPOSE, RESHAPE, SUM, GATHER (diagonals) and BATCH_MATMUL.

Each operand first loses its repeated labels (diagonals) and the labels no one else uses (summed);
then operands combine left to right, two at a time, as one BATCH_MATMUL of
[batch, kept-left, contracted] x [batch, contracted, kept-right]; the last result is summed and
transposed into the output's order. An ellipsis stands for the same right-aligned dims in every
operand.
"""
from __future__ import annotations

import math

import numpy as np

from .lower import lowers

_ELLIPSIS_LABELS = "0123456789"   # never letters, so never a user's label


def parse(equation: str, ranks: list) -> tuple:
    """([labels of each operand], output labels) with every ellipsis spelled out."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"{len(terms)} operand terms for {len(ranks)} inputs")
    widest = 0
    for term, rank in zip(terms, ranks):
        if "..." in term:
            widest = max(widest, rank - (len(term) - 3))
    ellipsis = _ELLIPSIS_LABELS[:widest]
    spelled = []
    for term, rank in zip(terms, ranks):
        if "..." in term:
            count = rank - (len(term) - 3)
            term = term.replace("...", ellipsis[widest - count:])
        if len(term) != rank:
            raise ValueError(f"term {term!r} does not match an input of rank {rank}")
        spelled.append(term)
    if arrow:
        out = rhs.replace("...", ellipsis)
    else:  # implicit: the ellipsis, then the labels used once, alphabetically
        counts = {}
        for term in spelled:
            for c in term:
                counts[c] = counts.get(c, 0) + 1
        out = ellipsis + "".join(sorted(c for c, k in counts.items()
                                        if k == 1 and c not in ellipsis))
    return spelled, out


@lowers("Einsum")
def einsum(b, n):
    inputs = [t for t in n.inputs if t >= 0]
    try:
        terms, out = parse(n.attr("equation"), [b.rank(t) for t in inputs])
    except ValueError as e:
        raise n.fail(f"equation {n.attr('equation')!r}: {e}") from None
    dtype = b.dtype(inputs[0])
    compute = "float32" if dtype in ("float16", "float64") else dtype
    operands = [(_diagonals(b, b.cast(t, compute), term)) for t, term in zip(inputs, terms)]
    operands = _broadcast_sizes(b, operands)
    while len(operands) > 1:
        rest = operands[2:]
        needed = set(out).union(*(set(labels) for _, labels in rest))
        operands = [_contract(b, operands[0], operands[1], needed)] + rest
    (t, labels), = operands
    t, labels = _sum_out(b, t, labels, set(out))
    t = b.transpose(t, [labels.index(c) for c in out])
    return b.cast(t, dtype)


def _diagonals(b, t, labels: str) -> tuple:
    """(t, labels) with each repeated label taken once: the diagonal of its two axes."""
    while len(set(labels)) < len(labels):
        c = next(c for c in labels if labels.count(c) > 1)
        first = labels.index(c)
        second = labels.index(c, first + 1)
        rest = [i for i in range(len(labels)) if i not in (first, second)]
        t = b.transpose(t, rest + [first, second])
        shape = b.shape(t)
        size = shape[-1]
        t = b.reshape(t, shape[:-2] + (size * size,))
        index = b.const(np.arange(size, dtype=np.int32) * (size + 1))
        t = b.op("GATHER", [t, index], {"axis": len(shape) - 2})
        labels = "".join(labels[i] for i in rest) + c
    return t, labels


def _sizes(b, operands) -> dict:
    sizes = {}
    for t, labels in operands:
        for c, d in zip(labels, b.shape(t)):
            sizes[c] = max(sizes.get(c, 1), d)
    return sizes


def _broadcast_sizes(b, operands):
    """A label of size 1 in one operand and larger in another is broadcast first."""
    sizes = _sizes(b, operands)
    out = []
    for t, labels in operands:
        want = tuple(sizes[c] for c in labels)
        if b.shape(t) != want:
            t = b.op("BROADCAST_TO", [t, b.const(np.array(want, np.int32))])
        out.append((t, labels))
    return out


def _sum_out(b, t, labels: str, keep: set) -> tuple:
    """Sum over the labels not in `keep`."""
    axes = [i for i, c in enumerate(labels) if c not in keep]
    if not axes:
        return t, labels
    t = b.op("SUM", [t, b.const(np.array(axes, np.int32))], {"keep_dims": False})
    return t, "".join(c for c in labels if c in keep)


def _contract(b, left, right, needed: set) -> tuple:
    """Two operands as one BATCH_MATMUL; `needed`: labels used after this step."""
    (a, la), (c, lc) = left, right
    a, la = _sum_out(b, a, la, needed | set(lc))
    c, lc = _sum_out(b, c, lc, needed | set(la))
    batch = [x for x in la if x in lc and x in needed]
    summed = [x for x in la if x in lc and x not in needed]
    only_a = [x for x in la if x not in lc]
    only_c = [x for x in lc if x not in la]
    sizes = dict(zip(la, b.shape(a))) | dict(zip(lc, b.shape(c)))
    size = lambda labels: math.prod(sizes[x] for x in labels)  # noqa: E731
    a = b.transpose(a, [la.index(x) for x in batch + only_a + summed])
    c = b.transpose(c, [lc.index(x) for x in batch + summed + only_c])
    a = b.reshape(a, (size(batch), size(only_a), size(summed)))
    c = b.reshape(c, (size(batch), size(summed), size(only_c)))
    y = b.op("BATCH_MATMUL", [a, c])
    labels = batch + only_a + only_c
    return b.reshape(y, tuple(sizes[x] for x in labels)), "".join(labels)
