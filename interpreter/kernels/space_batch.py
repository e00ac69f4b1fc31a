"""SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND: spatial blocks moved into (or out of) the batch,
with padding (or cropping). Inputs are [batch, spatial..., rest...] with one block size per
spatial dimension; TFLite takes ranks 3 and 4. Quantized tensors pad with their zero point."""
from __future__ import annotations

import numpy as np

from .common import DATA_TYPES
from .registry import register


def _block_and_pairs(node, what: str):
    """(block sizes, [[before, after], ...]) from inputs 1 and 2 (None when not constant)."""
    x, block_t, pairs_t = node.input(0), node.input(1), node.input(2)
    if not 3 <= len(x.shape) <= 4:
        raise node.fail(f"input must have rank 3 or 4, got shape {list(x.shape)}")
    if len(block_t.shape) != 1 or tuple(pairs_t.shape) != (block_t.shape[0], 2):
        raise node.fail(f"block_shape must be 1-D [M] and {what} [M, 2], got "
                        f"{list(block_t.shape)} and {list(pairs_t.shape)}")
    if not 1 <= block_t.shape[0] <= len(x.shape) - 1:
        raise node.fail(f"block_shape has {block_t.shape[0]} sizes for a rank-{len(x.shape)} "
                        "input")
    if block_t.data is None or pairs_t.data is None:
        return None, None
    return [int(b) for b in block_t.data], [[int(p) for p in row] for row in pairs_t.data]


def _kernel(node, what: str, out_shape, compute):
    """run(x, block, pairs, out) = compute(x, block, pairs, out) with the output shaped by
    out_shape(x shape, block, pairs, error); dynamic when block sizes or pairs (`what`) arrive
    while running."""
    block, pairs = _block_and_pairs(node, what)
    if block is None:
        node.dynamic = True

        def run_dynamic(a, block_v, pairs_v):
            b, p = [int(v) for v in block_v], [[int(v) for v in row] for row in pairs_v]
            out = np.empty(out_shape(a.shape, b, p, ValueError), a.dtype)
            compute(a, b, p, out)
            return [out]
        return run_dynamic
    node.outputs[0].shape = out_shape(tuple(node.input(0).shape), block, pairs)
    return lambda a, _b, _p, out: compute(a, block, pairs, out)


def _pad_value(node):
    q = node.outputs[0]
    return q.zero_point if q.dtype.kind in "iu" else 0


@register("SPACE_TO_BATCH_ND", *DATA_TYPES)
def space_to_batch_nd(node):
    node.expect_inputs(3)
    pad_value = _pad_value(node)

    def out_shape(shape, block, pads, error=node.fail):
        m = len(block)
        spatial = []
        for d, (b, (lo, hi)) in enumerate(zip(block, pads)):
            size = shape[1 + d] + lo + hi
            if b < 1 or lo < 0 or hi < 0 or size % b:
                raise error(f"padded size {size} of dimension {1 + d} is not a multiple of "
                                f"its block size {b} (or a size or padding is negative)")
            spatial.append(size // b)
        return (shape[0] * int(np.prod(block)),) + tuple(spatial) + tuple(shape[1 + m:])

    def compute(a, block, pads, out):
        m = len(block)
        widths = [(0, 0)] + [tuple(p) for p in pads] + [(0, 0)] * (a.ndim - 1 - m)
        padded = np.pad(a, widths, constant_values=pad_value) if any(map(any, pads)) else a
        # [b, s1/b1, b1, s2/b2, b2, rest] -> [b1, b2, b, s1/b1, s2/b2, rest]
        split = [a.shape[0]]
        for d, b in enumerate(block):
            split += [padded.shape[1 + d] // b, b]
        rest = a.shape[1 + m:]
        v = padded.reshape(split + list(rest))
        order = [2 + 2 * d for d in range(m)] + [0] + [1 + 2 * d for d in range(m)] + \
            list(range(1 + 2 * m, 1 + 2 * m + len(rest)))
        out[...] = v.transpose(order).reshape(out.shape)

    return _kernel(node, "paddings", out_shape, compute)


@register("BATCH_TO_SPACE_ND", *DATA_TYPES)
def batch_to_space_nd(node):
    node.expect_inputs(3)

    def out_shape(shape, block, crops, error=node.fail):
        m = len(block)
        n = int(np.prod(block))
        if min(block) < 1 or shape[0] % n:
            raise error(f"batch {shape[0]} is not a multiple of the block sizes' product "
                            f"{n}")
        spatial = []
        for d, (b, (lo, hi)) in enumerate(zip(block, crops)):
            size = shape[1 + d] * b - lo - hi
            if lo < 0 or hi < 0 or size < 0:
                raise error(f"crops {crops} must be >= 0 and leave dimension {1 + d} "
                                "non-negative")
            spatial.append(size)
        return (shape[0] // n,) + tuple(spatial) + tuple(shape[1 + m:])

    def compute(a, block, crops, out):
        m = len(block)
        rest = list(a.shape[1 + m:])
        batch = a.shape[0] // int(np.prod(block))
        # [b1, b2, b, s1, s2, rest] -> [b, s1, b1, s2, b2, rest]
        v = a.reshape(list(block) + [batch] + list(a.shape[1:1 + m]) + rest)
        order = [m]
        for d in range(m):
            order += [m + 1 + d, d]
        order += list(range(2 * m + 1, 2 * m + 1 + len(rest)))
        full = v.transpose(order).reshape([batch] + [a.shape[1 + d] * block[d] for d in range(m)]
                                          + rest)
        where = (slice(None),) + tuple(slice(lo, full.shape[1 + d] - hi)
                                       for d, (lo, hi) in enumerate(crops))
        out[...] = full[where]

    return _kernel(node, "crops", out_shape, compute)
