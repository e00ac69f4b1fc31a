"""Fusion of operator chains into one plan step (issue 17): tiny models pay per numpy call, so
a chain whose intermediate tensors nothing else reads runs as one kernel that never writes
them (a convolution and the max pool after it: one matmul and one reduction).

A rule is (the ops of the chain, a function of its `Link`s giving the fused run or None); the
fused run takes the first op's inputs, the later ops' other inputs, and the last op's outputs.
The plan fuses only what cannot be observed: not with delegates, nor `preserve_all`, nor
BUILTIN_REF (its kernels are the spec, each op on its own).
"""
from __future__ import annotations

from collections import Counter
from typing import NamedTuple

from .kernels import conv


class Link(NamedTuple):
    """One operator of a chain: its index, prepared kernel and node, tensors read and written."""
    oi: int
    run: object
    node: object
    ins: list
    outs: list


def _conv_max_pool(conv_2d: Link, max_pool: Link):
    return conv.max_pool_fusion(conv_2d, max_pool)


# (ops, fuser): each op after the first reads the previous one's only output as its input 0.
RULES = [
    (("CONV_2D", "MAX_POOL_2D"), _conv_max_pool),
]


def fuse(sg, specs: list, nodes: dict) -> list:
    """The plan's specs [(op index, run, inputs, outputs)] with every chain a rule fuses
    replaced by one spec; `nodes` maps op index -> prepared Node (the static steps)."""
    readers = Counter(t for _, _, ins, _ in specs for t in ins if t >= 0)
    kept = set(sg.outputs) | {i for i, t in enumerate(sg.tensors) if t.is_variable}
    out, i = [], 0
    while i < len(specs):
        for ops, fuser in RULES:
            chain = _chain(sg, specs, i, ops, nodes, readers, kept)
            fused = fuser(*chain) if chain else None
            if fused is not None:
                first, last = chain[0], chain[-1]
                extra = [t for link in chain[1:] for t in link.ins[1:]]
                out.append((first.oi, fused, list(first.ins) + extra, list(last.outs)))
                i += len(ops)
                break
        else:
            out.append(specs[i])
            i += 1
    return out


def _chain(sg, specs, i, ops, nodes, readers, kept) -> list | None:
    """The Links of specs[i:i+len(ops)] when they are the chain `ops`, each intermediate
    tensor read by the next op alone (as its input 0) and kept by nothing else."""
    if i + len(ops) > len(specs):
        return None
    links = []
    for k, name in enumerate(ops):
        oi, run, ins, outs = specs[i + k]
        if oi not in nodes or sg.operators[oi].opcode.name != name:
            return None
        if k:
            t = links[-1].outs[0]
            if not ins or ins[0] != t or readers[t] != 1 or t in kept:
                return None
        if k < len(ops) - 1 and len(outs) != 1:
            return None
        links.append(Link(oi, run, nodes[oi], list(ins), list(outs)))
    return links
