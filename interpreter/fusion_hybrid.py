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

import numpy as np

from .fusion import F32, _only_reader
from .kernels.common import activation_code

class _Between:
    """The chains' intermediate tensors (a 1x1 convolution's output before the 3x3 one reads
    it): one block per interpreter, apart from the kernels' work buffers (Scratch: those
    overlap each other), held in the interpreter's budget under a key of its own."""

    _pools = weakref.WeakKeyDictionary()

    def __init__(self, budget):
        self.size, self.block, self.budget = 0, None, budget

    @classmethod
    def of(cls, node) -> "_Between":
        owner = node.runtime
        if owner is None:
            return cls(None)
        pool = cls._pools.get(owner)
        if pool is None:
            pool = cls._pools[owner] = cls(getattr(owner, "budget", None))
        return pool

    def reserve(self, shape):
        """get() -> a float32 array of `shape` in the block (the same one on every call)."""
        nbytes = 4 * int(np.prod(shape, dtype=np.int64))
        if self.budget is not None:
            self.budget.hold(("fusion_hybrid",), max(self.size, nbytes),
                             f"a fused hybrid chain's intermediate tensor {list(shape)}")
        self.size = max(self.size, nbytes)
        bound = []

        def get() -> np.ndarray:
            if not bound:
                if self.block is None or self.block.nbytes < self.size:
                    self.block = np.empty(self.size, np.uint8)
                bound.append(self.block[:nbytes].view(F32).reshape(shape))
            return bound[0]
        return get


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
    from .kernels.hybrid_conv import Pre, pointwise_applies
    first = ctx.link(i)
    if first is None:
        return None
    pre, k, x = None, i, None
    if first.node.op == "MUL":
        found = _channel_mul(first)
        if found is None:
            return None
        x, channel, lims = found
        pre, k = Pre(channel, lims), i + 1
    links = []
    while k < len(ctx.specs) and len(links) < 2:
        link = ctx.link(k)
        if link is None or not _hybrid_conv(link):
            break
        feed = first.outs[0] if not links and pre is not None else \
            links[-1].outs[0] if links else None
        if feed is not None and (link.ins[0] != feed or not _only_reader(ctx, feed)
                                 or feed in link.ins[1:]):
            break
        links.append(link)
        k += 1
    if pre is None and links:
        x = links[0].ins[0]
    if not links or (pre is None and (len(links) < 2
                                      or not activation_code(links[0].node.options))):
        return None
    from .kernels.hybrid_conv import _clamp
    second = None
    a = links[0].node
    if len(links) == 2 and pointwise_applies(a, a.inputs[0].shape, a.inputs[1].shape,
                                             a.outputs[0].shape):
        # the second convolution takes the first's clamp only from a 1x1 (its sums then go
        # to the buffer unclamped); another form keeps its own
        lims = _clamp(a) if activation_code(a.options) else None
        second = conv_2d_default(links[1].node, None if lims is None else Pre(None, lims))
    if second is None:
        links = links[:1]
        if pre is None:
            return None
    runs = [conv_2d_default(a, pre, clamp_output=second is None or not activation_code(
        a.options))]
    if runs[0] is None:
        return None
    if second is not None:
        runs.append(second)
    return _finish(first, x, runs, links)


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
    get = _Between.of(node).reserve(tuple(node.outputs[0].shape))

    def run2(x, out):
        y = get()
        r1(x, None, None, y)
        r2(y, None, None, out)
    return (first.oi, run2, [x], out), count
