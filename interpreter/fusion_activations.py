"""Fusion rules for activation chains (fusion.py imports this module when a chain could start
with their ops): swish (LOGISTIC, then the MUL of its input by its output), a convolution
whose output only a swish reads (prepared again on halved weights: the swish from h = x / 2),
and squeeze-excite's gate (LOGISTIC of a [1, ..., 1, C] tensor, then the MUL of x by it).
Each rule is (ctx, i) -> (fused spec, how many specs it replaces) or None, as fusion.py's."""
from __future__ import annotations

import numpy as np

from edgelite.schema.ops import ACTIVATION_BOUNDS

from .fusion import F32, _only_reader
from .kernels.common import activation_code


def swish_pair(ctx, i):
    """(LOGISTIC link, MUL link, the MUL's clamp or None) when specs[i:i+2] are x * sigmoid(x)
    of a float32 x (same shapes: no broadcast), the sigmoid read by that MUL only."""
    if i + 2 > len(ctx.specs):
        return None
    sig, mul = ctx.link(i), ctx.link(i + 1)
    if sig is None or mul is None or sig.node.op != "LOGISTIC" or mul.node.op != "MUL" \
            or len(sig.ins) != 1 or len(sig.outs) != 1:
        return None
    x, s = sig.ins[0], sig.outs[0]     # the sigmoid read by this MUL only, as either input
    if sorted(mul.ins) != sorted([x, s]) or x == s or not _only_reader(ctx, s):
        return None
    shape = tuple(sig.node.inputs[0].shape)
    code = activation_code(mul.node.options)
    if code and code not in ACTIVATION_BOUNDS:
        return None
    if any(t.dtype != F32 or tuple(t.shape) != shape
           for t in (sig.node.inputs[0], mul.node.inputs[0], mul.node.inputs[1],
                     mul.node.outputs[0])):
        return None
    return sig, mul, ACTIVATION_BOUNDS[code] if code else None


def swish(ctx, i):
    pair = swish_pair(ctx, i)
    if pair is None:
        return None
    sig, mul, clamp = pair
    from .kernels.unary import swish
    run = swish(mul.node, tuple(sig.node.inputs[0].shape), clamp)
    return (sig.oi, run, [sig.ins[0]], list(mul.outs)), 2


def channel_gate(ctx, i):
    """LOGISTIC of a [1, ..., 1, C] gate, then the MUL of a float32 x [..., C] by it
    (squeeze-excite): one step, the sigmoid by the LOGISTIC's own kernel into a buffer, the
    product over rows of whole pixel rows against the gate tiled along one row (a broadcast
    over the channels alone runs C values to an inner loop)."""
    if i + 2 > len(ctx.specs):
        return None
    sig, mul = ctx.link(i), ctx.link(i + 1)
    if sig is None or mul is None or sig.node.op != "LOGISTIC" or mul.node.op != "MUL" \
            or len(sig.ins) != 1 or len(sig.outs) != 1 or len(mul.ins) != 2:
        return None
    s = sig.outs[0]
    if s not in mul.ins or mul.ins[0] == mul.ins[1] or not _only_reader(ctx, s):
        return None
    k = 1 - mul.ins.index(s)
    x, gate, out = mul.node.inputs[k], sig.node.outputs[0], mul.node.outputs[0]
    code = activation_code(mul.node.options)
    if code and code not in ACTIVATION_BOUNDS:
        return None
    shape = tuple(x.shape)
    if len(shape) < 2 or any(t.dtype != F32 for t in (x, gate, out)) \
            or tuple(out.shape) != shape or tuple(gate.shape) == shape \
            or int(np.prod(gate.shape)) != shape[-1] or tuple(gate.shape)[-1:] != shape[-1:]:
        return None
    from .kernels.unary import channel_gate
    run = channel_gate(sig.run, tuple(gate.shape), shape,
                       ACTIVATION_BOUNDS[code] if code else None)
    return (sig.oi, run, [sig.ins[0], mul.ins[k]], list(mul.outs)), 2


SWISH_PRODUCERS = ("CONV_2D", "DEPTHWISE_CONV_2D")


def conv_swish(ctx, i):
    """A convolution (no fused activation) whose output only a swish reads: the convolution
    prepared again on halved weights and bias writes h = x / 2 exactly (a power of two scales
    every product and sum without rounding), and the swish runs from h (unary.swish's
    `halved`: one pass fewer)."""
    conv = ctx.link(i)
    if conv is None or conv.node.op not in SWISH_PRODUCERS or len(conv.outs) != 1 \
            or activation_code(conv.node.options):
        return None
    pair = swish_pair(ctx, i + 1)
    t = conv.outs[0]
    if pair is None or pair[0].ins[0] != t or ctx.readers[t] != 2 or t in ctx.kept:
        return None
    sig, mul, clamp = pair
    halved = halved_conv(conv.node)
    if halved is None:
        return None
    from .kernels.unary import swish
    shape = tuple(sig.node.inputs[0].shape)
    finish = swish(mul.node, shape, clamp, halved=True)

    def run(*arrays):
        out = arrays[-1]
        halved(*arrays[:-1], out)
        finish(out, out)
    return (conv.oi, run, list(conv.ins), list(mul.outs)), 3


def halved_conv(node):
    """The convolution's kernel prepared again with its weights and bias halved (float32
    constants, or a hybrid op's int8 weights with halved scales), or None."""
    import dataclasses
    from .kernels import registry
    w, b = node.inputs[1], node.optional_input(2)
    if w is None or w.data is None or (b is not None and (b.data is None or b.dtype != F32)):
        return None
    half = np.float32(0.5)
    if w.dtype == F32:
        w2 = dataclasses.replace(w, data=(w.data * half).astype(F32))
    elif w.type_name == "int8" and w.quantization is not None \
            and w.quantization.scale.size and node.inputs[0].dtype == F32:
        q = w.quantization
        w2 = dataclasses.replace(w, quantization=dataclasses.replace(
            q, scale=(q.scale * half).astype(np.float32)))
    else:
        return None
    rest = list(node.inputs[2:])           # an omitted bias stays omitted (None)
    if b is not None:
        rest[0] = dataclasses.replace(b, data=(b.data * half).astype(F32))
    again = dataclasses.replace(node, inputs=[node.inputs[0], w2] + rest,
                                outputs=[dataclasses.replace(t) for t in node.outputs],
                                state={})
    prepare = registry.lookup(again)
    if prepare is None:
        return None
    try:
        run = prepare(again)
    except Exception:   # (a budget refusing a second copy): the convolution runs as prepared
        return None
    if tuple(again.outputs[0].shape) != tuple(node.outputs[0].shape):
        return None
    return run


