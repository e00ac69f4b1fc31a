"""Fusion of operator chains into one plan step (issue 17): tiny models pay per numpy call, so
a chain whose intermediate tensors nothing else reads runs as one kernel that never writes
them. The rules:

- CONV_2D then the MAX_POOL_2D whose windows tile its output: one matmul and one reduction
  (kernels/conv.py, `max_pool_fusion`); int8, the default resolver's, the pool on the float
  sums before the requantization (kernels/conv_int8.py, `max_pool_fusion`).
- LOGISTIC then the MUL of its input and its output (swish, SiLU: EfficientNet's activation):
  x * sigmoid(x) in four passes (kernels/unary.py, `swish`); in three after the CONV_2D or
  DEPTHWISE_CONV_2D that feeds it, prepared again to write x / 2.
- LOGISTIC of a per-channel gate, then the MUL of a tensor by it (squeeze-excite): the product
  against the gate tiled along a pixel row (kernels/unary.py, `channel_gate`).
- A hybrid (dynamic-range) CONV_2D after the per-channel MUL (and clamp) that feeds it, and a
  hybrid CONV_2D after a clamped hybrid 1x1 one (DenseNet's batch norm + ReLU + 1x1 + ReLU +
  3x3): the producers' products and clamps done in the convolution's quantization
  (fusion_hybrid.py).
- TensorFlow's lowering of LayerNormalization (ten ops: MEAN, SQUARED_DIFFERENCE, MEAN, ADD,
  RSQRT, MULs, ADD), with the FULLY_CONNECTED feeding it when it feeds nothing else
  (kernels/layer_norm.py).

A rule is a function (ctx, i) -> (fused spec, how many specs it replaces) or None; the fused
spec is (first op's index, run, the chain's inputs from outside it, its outputs). The plan
fuses only what cannot be observed: not with delegates, nor `preserve_all`, nor BUILTIN_REF
(its kernels are the spec, each op on its own).
"""
from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import numpy as np

from edgelite.schema.ops import ACTIVATION_BOUNDS

from .kernels.common import activation_code

F32 = np.dtype(np.float32)
# The kernels are imported where a rule matches: a model loads only its ops' kernel families.


class Link(NamedTuple):
    """One operator of a chain: its index, prepared kernel and node, tensors read and written."""
    oi: int
    run: object
    node: object
    ins: list
    outs: list


class Context(NamedTuple):
    sg: object
    specs: list
    nodes: dict
    readers: Counter   # tensor -> how many inputs of steps read it
    kept: set          # tensors seen from outside the steps (subgraph outputs, variables)

    def link(self, i: int) -> Link | None:
        oi, run, ins, outs = self.specs[i]
        node = self.nodes.get(oi)
        return None if node is None else Link(oi, run, node, list(ins), list(outs))


class Fused(NamedTuple):
    """The node of a fused step, for the rules of a later pass: op "FUSED", the outputs of
    the chain's last op."""
    outputs: list
    op: str = "FUSED"


def fuse(sg, specs: list, nodes: dict) -> tuple:
    """(specs, absorbed): the plan's specs [(op index, run, inputs, outputs)] with every chain
    a rule fuses replaced by one spec, and the indices of the ops now run inside another's
    step; `nodes` maps op index -> prepared Node (the static steps). Passes
    run until none fuses more (a fused step may feed a later rule: conv + pool, then the
    FULLY_CONNECTED it feeds)."""
    nodes = dict(nodes)
    kept = set(sg.outputs) | {i for i, t in enumerate(sg.tensors) if t.is_variable}
    before = {oi for oi, *_ in specs}
    for rules in PASSES:
        specs = _fixed_point(sg, specs, nodes, kept, rules)
    return specs, sorted(before - {oi for oi, *_ in specs})


def _fixed_point(sg, specs, nodes, kept, rules) -> list:
    while True:
        ctx = Context(sg, specs, nodes,
                      Counter(t for _, _, ins, _ in specs for t in ins if t >= 0), kept)
        out, i = [], 0
        while i < len(specs):
            for rule in rules:
                fused = rule(ctx, i)
                if fused is not None:
                    spec, count = fused
                    last = specs[i + count - 1][0]
                    nodes[spec[0]] = Fused(nodes[last].outputs)
                    out.append(spec)
                    i += count
                    break
            else:
                out.append(specs[i])
                i += 1
        if len(out) == len(specs):
            return out
        specs = out


def _chain(ctx, i, ops) -> list | None:
    """The Links of specs[i:i+len(ops)] when they are the chain `ops`, each intermediate
    tensor read by the next op alone (as its input 0) and kept by nothing else."""
    if i + len(ops) > len(ctx.specs):
        return None
    links = []
    for k, name in enumerate(ops):
        link = ctx.link(i + k)
        if link is None or link.node.op != name:
            return None
        if k:
            t = links[-1].outs[0]
            if not link.ins or link.ins[0] != t or not _only_reader(ctx, t):
                return None
        if k < len(ops) - 1 and len(link.outs) != 1:
            return None
        links.append(link)
    return links


def _conv_max_pool(ctx, i):
    chain = _chain(ctx, i, ("CONV_2D", "MAX_POOL_2D"))
    if not chain:
        return None
    from .kernels import conv, conv_int8
    run = conv.max_pool_fusion(*chain) or conv_int8.max_pool_fusion(*chain)
    return None if not run else ((chain[0].oi, run, chain[0].ins, chain[1].outs), 2)


# -- activations: swish, a convolution's swish, squeeze-excite's gate ------------------------
# The rules live in fusion_activations.py, imported when a chain could start with their ops
# (`import edgelite.interpreter` compiles this module: test_import_budget).

def _lazy_rule(name: str, first_ops: tuple, module: str = "fusion_activations"):
    def rule(ctx, i):
        link = ctx.link(i)
        if link is None or link.node.op not in first_ops:
            return None
        import importlib
        return getattr(importlib.import_module(f".{module}", __package__), name)(ctx, i)
    rule.__name__ = rule.__qualname__ = name
    return rule


_conv_swish = _lazy_rule("conv_swish", ("CONV_2D", "DEPTHWISE_CONV_2D"))
_swish = _lazy_rule("swish", ("LOGISTIC",))
_channel_gate = _lazy_rule("channel_gate", ("LOGISTIC",))
# a hybrid CONV_2D taking its producer's per-channel MUL and clamps (fusion_hybrid.py)
_hybrid_chain = _lazy_rule("hybrid_chain", ("MUL", "CONV_2D"), "fusion_hybrid")


# -- layer normalization ---------------------------------------------------------------------

def _layer_norm(ctx, i):
    fc = ctx.link(i)
    if fc is not None and fc.node.op == "FULLY_CONNECTED":
        i += 1
    else:
        fc = None
    found = _match_layer_norm(ctx, i)
    if found is None:
        return None
    from .kernels.layer_norm import centered_weights, layer_norm
    links, x, y, eps, gamma, beta, lims = found
    node_x = links[0].node.inputs[0]
    depth = node_x.shape[-1]
    rows = int(np.prod(node_x.shape[:-1], dtype=np.int64))
    weights = bias = None
    if fc is not None:
        reads = sum(link.ins.count(x) for link in links)
        w, b = fc.node.inputs[1], fc.node.optional_input(2)
        if (fc.outs != [x] or ctx.readers[x] != reads or x in ctx.kept
                or w.data is None or (b is not None and b.data is None)
                or activation_code(fc.node.options)
                or w.shape[0] != depth or w.dtype != F32):
            return None   # the FC stays a step of its own: the layer norm matches from its MEAN
        else:
            weights, bias = centered_weights(w.data, None if b is None else b.data)
    run = layer_norm(rows, depth, eps, gamma, beta, lims, weights, bias)
    first = fc if fc is not None else links[0]
    return (first.oi, run, [first.ins[0]], [y]), len(links) + (fc is not None)


def _match_layer_norm(ctx, i):
    """(links, x, y, eps, gamma, beta, clamp bounds) when specs[i:] begin with the ops of a
    layer normalization of x over its last axis (any order TensorFlow gives them), else None."""
    window = [ctx.link(k) for k in range(i, min(i + 12, len(ctx.specs)))]
    if not window or window[0] is None or window[0].node.op != "MEAN":
        return None
    window = window[:next((k for k, link in enumerate(window) if link is None), len(window))]

    def users(t):
        return [link for link in window if t in link.ins]

    def only(t, op):
        found = users(t)
        return found[0] if len(found) == 1 and found[0].node.op == op else None

    def other(link, t):
        ins = [u for u in link.ins if u >= 0]
        return ins[1] if len(ins) == 2 and ins[0] == t else ins[0] if len(ins) == 2 else None

    mean = window[0]
    x, m = mean.ins[0], mean.outs[0]
    if not _last_axis_mean(mean.node):
        return None
    sd = next((u for u in users(m) if u.node.op == "SQUARED_DIFFERENCE"
               and sorted(u.ins) == sorted([x, m])), None)
    var = sd and only(sd.outs[0], "MEAN")
    add = var and _last_axis_mean(var.node) and only(var.outs[0], "ADD")
    eps = add and _constant(add.node, other(add, var.outs[0]), 1)
    rsqrt = eps is not None and add and not activation_code(add.node.options) and \
        only(add.outs[0], "RSQRT")
    if not rsqrt:
        return None
    r = rsqrt.outs[0]
    links = [mean, sd, var, add, rsqrt]
    gamma, s = None, r
    scale = only(r, "MUL")
    depth = mean.node.inputs[0].shape[-1]
    if scale is not None and not activation_code(scale.node.options):
        gamma = _constant(scale.node, other(scale, r), depth)
        if gamma is None:
            return None
        links.append(scale)
        s = scale.outs[0]
    muls = users(s)
    if len(muls) != 2 or any(u.node.op != "MUL" or activation_code(u.node.options) for u in muls):
        return None
    xs = next((u for u in muls if other(u, s) == x), None)
    ms = next((u for u in muls if u is not xs), None)
    if xs is None or ms is None:
        return None
    centre, beta = other(ms, s), None
    links += [xs, ms]
    if centre == m:                        # x*s + (beta - m*s)
        sub = only(ms.outs[0], "SUB")
        if sub is None or sub.ins[1] != ms.outs[0] or activation_code(sub.node.options):
            return None
        beta = _constant(sub.node, sub.ins[0], depth)
        if beta is None:
            return None
        links.append(sub)
        shift = sub.outs[0]
    else:                                  # x*s + (-m)*s
        neg = next((u for u in users(m) if u.node.op == "NEG" and u.outs == [centre]), None)
        if neg is None:
            return None
        links.append(neg)
        shift = ms.outs[0]
    last = only(xs.outs[0], "ADD")
    if last is None or sorted(last.ins) != sorted([xs.outs[0], shift]):
        return None
    links.append(last)
    code = activation_code(last.node.options)
    if code and code not in ACTIVATION_BOUNDS:
        return None
    y = last.outs[0]
    # the ops are exactly specs[i:i+len(links)], their tensors read by nothing else
    if sorted(link.oi for link in links) != [link.oi for link in window[:len(links)]]:
        return None
    for link in links:
        if len(link.outs) != 1 or link.node.outputs[0].dtype != F32:
            return None
        t = link.outs[0]
        if t != y and (t in ctx.kept or ctx.readers[t] != sum(u.ins.count(t) for u in links)):
            return None
    if tuple(last.node.outputs[0].shape) != tuple(mean.node.inputs[0].shape):
        return None
    links.sort(key=lambda link: link.oi)
    lims = None if not code else tuple(np.array(v, F32) for v in ACTIVATION_BOUNDS[code])
    return links, x, y, eps, gamma, beta, lims


def _last_axis_mean(node) -> bool:
    """A float32 MEAN over the last axis only, keeping the dims."""
    x, axes = node.inputs[0], node.inputs[1] if len(node.inputs) > 1 else None
    if x is None or x.dtype != F32 or not x.shape or axes is None or axes.data is None \
            or not getattr(node.options, "keep_dims", False):
        return False
    values = {int(a) % len(x.shape) for a in np.asarray(axes.data).reshape(-1)}
    return values == {len(x.shape) - 1}


def _constant(node, t, size):
    """The float32 constant tensor `t` of `node` with `size` values along its last axis (1 for
    a scalar), all other dims 1; None otherwise. A scalar comes back as a float."""
    info = next((u for u in node.inputs if u is not None and u.index == t), None)
    if info is None or info.data is None or info.dtype != F32:
        return None
    data = np.asarray(info.data)
    if data.size != size or any(d != 1 for d in data.shape[:-1]):
        return None
    return float(data.reshape(-1)[0]) if size == 1 else data.reshape(-1)


# -- a one-row FULLY_CONNECTED and the op before it ---------------------------------------

def _fully_connected_with_producer(ctx, i):
    """Any op (or fused step) whose only output only a one-row FULLY_CONNECTED reads (through a
    RESHAPE or not): the producer writes into the FC's [x..., 1] (kernels/fully_connected.py)."""
    from .plan import ALIAS_OPS   # (plan imports this module)
    producer = ctx.link(i)
    if producer is None or len(producer.outs) != 1 or producer.node.op in ALIAS_OPS:
        return None
    links, t = [producer], producer.outs[0]
    nxt = ctx.link(i + 1) if i + 1 < len(ctx.specs) else None
    if nxt is not None and nxt.node.op in ALIAS_OPS and nxt.ins[:1] == [t]:
        links.append(nxt)
        if not _only_reader(ctx, t):
            return None
        t = nxt.outs[0]
        nxt = ctx.link(i + 2) if i + 2 < len(ctx.specs) else None
    if nxt is None or nxt.node.op != "FULLY_CONNECTED" or nxt.ins[:1] != [t] \
            or not _only_reader(ctx, t) or any(u == t for u in nxt.ins[1:]):
        return None
    from .kernels.fully_connected import with_producer
    out = producer.node.outputs[0]
    if out.dtype != F32:
        return None
    run = with_producer(producer.run, tuple(out.shape), nxt.node)
    if run is None:
        return None
    return (producer.oi, run, list(producer.ins), list(nxt.outs)), len(links) + 1


def _only_reader(ctx, t) -> bool:
    return ctx.readers[t] == 1 and t not in ctx.kept



def _int8_chain(ctx, i):
    """int8 producers writing their consumers' float patches (fusion_int8.py)."""
    link = ctx.link(i)
    if link is None or not getattr(link.run, "stage_out", False):
        return None
    from . import fusion_int8
    return fusion_int8.int8_chain(ctx, i)


# Rule sets, each run to a fixed point in turn: the chains first, then the FULLY_CONNECTEDs
# absorbing their producers, innermost first (conv + pool -> FC -> FC: the first FC takes the
# fused convolution in, then the second FC that step).
PASSES = [[_conv_max_pool, _conv_swish, _swish, _channel_gate, _layer_norm, _hybrid_chain],
          [_fully_connected_with_producer, _int8_chain]]   # (int8: after conv + pool)
