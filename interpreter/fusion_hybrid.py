"""Fusion of dynamic-range (hybrid) convolution chains (fusion.py imports this module when a
chain could start with their ops; issue 17, goal 6): DenseNet's batch norm and ReLU before
each 1x1 convolution (a MUL by per-channel constants with a fused RELU), and the ReLU of that
convolution before the 3x3 one. A hybrid convolution quantizes its whole input on the fly, so
it reads every value anyway: the producer's per-channel product and clamp are done there
(hybrid_conv.Pre: the product written into the quantization buffer, the clamp merged with the
quantization's, a lower bound >= 0 sparing the min pass), bit for bit the values the ops gave
one by one. The rule is (ctx, i) -> (fused spec, how many specs it replaces) or None, as
fusion.py's."""
from __future__ import annotations

import weakref
from itertools import takewhile

import numpy as np

from .fusion import F32, _chain
from .kernels.common import activation_code
from .kernels.scratch import Scratch

class _Between(Scratch):
    """The chains' intermediate tensors (a 1x1 convolution's output before the 3x3 one reads
    it): a Scratch block of their own per interpreter, apart from the kernels' work buffers
    (those overlap each other), held in the budget under a key of its own."""

    _pools = weakref.WeakKeyDictionary()
    key = ("fusion_hybrid",)


def _hybrid_conv(link) -> bool:
    """A CONV_2D of float32 input and int8 constant weights (the hybrid kernel's)."""
    node = link.node
    if node.op != "CONV_2D" or len(link.outs) != 1 or not link.ins:
        return False
    x, w = node.inputs[0], node.inputs[1]
    return x is not None and x.dtype == F32 and w is not None and w.type_name == "int8" \
        and w.data is not None and node.outputs[0].dtype == F32


def _channel_mul(link):
    """(x's tensor, the [C] float32 multipliers, the MUL's clamp bounds or None) when `link`
    is a float32 MUL of a [1, H, W, C] tensor by constants [1, 1, 1, C] (or [C]), else None."""
    node = link.node
    if node.op != "MUL" or len(link.ins) != 2 or len(link.outs) != 1:
        return None
    a, b = node.inputs
    k = 1 if b.data is not None else 0 if a.data is not None else None
    if k is None or node.inputs[1 - k].data is not None:
        return None
    x, s = node.inputs[1 - k], node.inputs[k]
    shape = tuple(x.shape)
    if len(shape) != 4 or shape[0] != 1 or any(t.dtype != F32 for t in (x, s, node.outputs[0])) \
            or tuple(node.outputs[0].shape) != shape or s.data.size != shape[3] \
            or any(d != 1 for d in tuple(s.shape)[:-1]):
        return None
    from .kernels.elementwise import activation_bounds
    lims = activation_bounds(node, F32)
    return link.ins[1 - k], np.ascontiguousarray(np.reshape(s.data, -1), F32), lims


def hybrid_chain(ctx, i):
    """[a MUL by per-channel constants, then] a hybrid CONV_2D [, then a hybrid CONV_2D], each
    intermediate tensor read by the next op alone: one step, the first convolution taking the
    MUL's product and clamp into its quantization, the second the first one's clamp (the
    first then writes its sums unclamped into a buffer between them). At least two ops."""
    from .kernels.hybrid import conv_2d_default
    from .kernels.hybrid_conv import Pre, _clamp, pointwise_applies
    first = ctx.link(i)
    if first is None:
        return None
    head, pre = ("MUL",) if first.node.op == "MUL" else (), None
    if head:
        found = _channel_mul(first)
        if found is None:
            return None
        x, channel, lims = found
        pre = Pre(channel, lims)
    chain = _chain(ctx, i, head + ("CONV_2D",) * 2) or _chain(ctx, i, head + ("CONV_2D",))
    links = list(takewhile(_hybrid_conv, (chain or [])[len(head):]))
    if not links:
        return None
    a = links[0].node
    if not head:    # two convolutions, the first's clamp taken by the second
        x = links[0].ins[0]
        if len(links) < 2 or not activation_code(a.options):
            return None
    second = None
    if len(links) == 2 and pointwise_applies(a, a.inputs[0].shape, a.inputs[1].shape,
                                             a.outputs[0].shape):
        # the second convolution takes the first's clamp only from a 1x1 (its sums then go
        # to the buffer unclamped); another form keeps its own
        lims = _clamp(a)
        second = conv_2d_default(links[1].node, None if lims is None else Pre(None, lims))
    links = links[:1 + (second is not None)]
    if len(head) + len(links) < 2:
        return None
    first_run = conv_2d_default(a, pre, clamp_output=second is None)
    if first_run is None:
        return None
    return _finish(first, x, [first_run] + [second] * (second is not None), links)


def _finish(first, x, runs, links):
    """The fused spec of the MUL (if any) and the convolutions `links` with their runs."""
    count = len(links) + (first.node.op == "MUL")
    if count < 2:
        return None
    out = list(links[-1].outs)
    if len(runs) == 1:
        r1, = runs

        def run(x, out):
            r1(x, None, None, out)
        return (first.oi, run, [x], out), count
    r1, r2 = runs
    node = links[0].node
    get = _Between.of(node).reserve([(tuple(node.outputs[0].shape), F32)])

    def run2(x, out):
        y, = get()
        r1(x, None, None, y)
        r2(y, None, None, out)
    return (first.oi, run2, [x], out), count
