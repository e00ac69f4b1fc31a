"""MixConv as one DEPTHWISE_CONV_2D: a channel split whose parts each go (through an optional
row slice) into a depthwise convolution of its own kernel height, the results concatenated
back along the channels, as micro-wake-word's streaming blocks are:

    x -> SPLIT_V(channels) -> [STRIDED_SLICE(rows a_i..b_i)] -> DEPTHWISE_CONV_2D(k_i) -> CONCAT

is one depthwise convolution of x whose kernel, K = H - OH + 1 rows high, holds branch i's taps
in rows a_i .. a_i + k_i of its channels and zeros elsewhere. The integer sums are the same sums
(the zero taps add 0), every channel keeps its weight scale, bias, input and output
quantization, so the result is the same bits, under BUILTIN_REF too; one kernel step instead of
2 + 2 m (a split, its copies, m convolutions and their requantizations).

Not under BUILTIN_REF, whose kernels are the spec, each op on its own (`UNDER_REFERENCE`: the
tests turn it on to check the fused step against LiteRT's reference kernels, bit for bit).
Only int8 VALID convolutions at stride and dilation 1, depth multiplier 1, with one shared fused
activation, whose intermediate tensors no one else reads (no subgraph output, no other reader):
otherwise the ops run as they are.
"""
from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np

from edgelite.schema.model import QuantizationParameters

from .kernels import registry
from .kernels.common import activation_code
from .kernels.registry import Node, TensorInfo

VALID = 1
UNDER_REFERENCE = False


def _readers(specs: list) -> dict:
    readers: dict = {}
    for s, (_, _, ins, _) in enumerate(specs):
        for t in ins:
            if t >= 0:
                readers.setdefault(t, []).append(s)
    return readers


def _only_reader(readers: dict, t: int):
    r = readers.get(t, [])
    return r[0] if len(r) == 1 else None


def _rows(view, info) -> tuple | None:
    """(first row, rows) when `view` (a slice kernel's run.view) takes whole rows [a, b) of a
    4-D tensor of `info`'s shape, all else whole; None otherwise."""
    n, h, w, c = info.shape
    probe = np.arange(n * h * w * c).reshape(info.shape)
    try:
        v = view(probe)
    except (ValueError, IndexError, TypeError):
        return None
    if v.ndim != 4 or v.shape[0] != n or v.shape[2:] != (w, c) or v.size == 0:
        return None
    a = int(v.reshape(-1)[0]) // (w * c)
    if not np.array_equal(v, probe[:, a:a + v.shape[1]]):
        return None
    return a, v.shape[1]


def _plain_depthwise(op, infos, ins) -> bool:
    o = op.options
    if o is None or len(ins) < 2 or ins[1] < 0 or infos[ins[1]].data is None:
        return False
    if (int(o.padding), int(o.stride_h), int(o.stride_w), int(o.dilation_h_factor or 1),
            int(o.dilation_w_factor or 1), int(o.depth_multiplier or 1)) != (VALID, 1, 1, 1, 1, 1):
        return False
    w, b = infos[ins[1]], (infos[ins[2]] if len(ins) > 2 and ins[2] >= 0 else None)
    if w.type_name != "int8" or len(w.shape) != 4 or w.quantization is None or \
            np.any(w.quantization.zero_point != 0):
        return False
    return b is None or (b.type_name == "int32" and b.data is not None)


def _branches(plan, specs, readers, s, own):
    """The branches [(slice spec or None, depthwise spec, first row, rows)] and the concat spec
    of the split at spec `s`, or None when it is no MixConv."""
    infos, ops = plan.infos, plan.sg.operators
    oi, _, ins, outs = specs[s]
    name = ops[oi].opcode.name
    if name not in ("SPLIT", "SPLIT_V") or len(outs) < 2:
        return None
    axis_t, x = (ins[0], ins[1]) if name == "SPLIT" else (ins[2], ins[0])
    if axis_t < 0 or infos[axis_t].data is None or x < 0 or len(infos[x].shape) != 4:
        return None
    if int(np.asarray(infos[axis_t].data).reshape(-1)[0]) % 4 != 3:
        return None
    xi = infos[x]
    if xi.type_name != "int8":
        return None
    branches, concat = [], None
    for p in outs:
        pi = infos[p]
        if p in own or pi.quantization != xi.quantization:
            return None
        r = _only_reader(readers, p)
        if r is None:
            return None
        first, rows, cut = 0, pi.shape[1], None
        if ops[specs[r][0]].opcode.name == "STRIDED_SLICE":
            view = getattr(specs[r][1], "view", None)
            sliced = specs[r][3][0] if len(specs[r][3]) == 1 else -1
            span = None if view is None or sliced in own else _rows(view, pi)
            if span is None or infos[sliced].quantization != xi.quantization:
                return None
            (first, rows), cut = span, r
            r = _only_reader(readers, sliced)
            if r is None:
                return None
        doi, _, dins, douts = specs[r]
        if ops[doi].opcode.name != "DEPTHWISE_CONV_2D" or len(douts) != 1 or \
                not _plain_depthwise(ops[doi], infos, dins) or douts[0] in own:
            return None
        c = _only_reader(readers, douts[0])
        if c is None or (concat is not None and c != concat):
            return None
        concat = c
        branches.append((cut, r, first, rows))
    coi, _, cins, couts = specs[concat]
    if ops[coi].opcode.name != "CONCATENATION" or len(couts) != 1 or \
            cins != [specs[r][3][0] for _, r, _, _ in branches]:
        return None
    o = ops[coi].options
    out = infos[couts[0]]
    if activation_code(o) or int(o.axis) % 4 != 3 or \
            any(infos[t].quantization != out.quantization for t in cins):
        return None
    return x, branches, concat


def _fused_node(plan, specs, x, branches, concat) -> Node | None:
    infos, ops = plan.infos, plan.sg.operators
    xi = infos[x]
    n, h, w, _ = xi.shape
    convs = [specs[r] for _, r, _, _ in branches]
    opts = [ops[oi].options for oi, *_ in convs]
    weights = [infos[ins[1]] for _, _, ins, _ in convs]
    kw = weights[0].shape[2]
    if any(activation_code(o) != activation_code(opts[0]) for o in opts) or \
            any(wi.shape[0] != 1 or wi.shape[2] != kw for wi in weights):
        return None
    oh = {rows - wi.shape[1] + 1 for (_, _, _, rows), wi in zip(branches, weights)}
    if len(oh) != 1 or min(oh) < 1:
        return None
    k = h - oh.pop() + 1
    cout = sum(wi.shape[3] for wi in weights)
    taps = np.zeros((1, k, kw, cout), np.int8)
    scales, biases, at = [], [], 0
    for (_, _, first, _), wi, (_, _, ins, _) in zip(branches, weights, convs):
        ci, ki = wi.shape[3], wi.shape[1]
        taps[0, first:first + ki, :, at:at + ci] = wi.data
        scale = wi.quantization.scale
        scales.append(np.broadcast_to(scale if scale.size == ci else scale[:1], (ci,)))
        b = infos[ins[2]] if len(ins) > 2 and ins[2] >= 0 else None
        biases.append(np.zeros(ci, np.int32) if b is None else b.data.reshape(-1))
        at += ci
    scale = np.concatenate(scales).astype(np.float32)
    wq = QuantizationParameters(scale, np.zeros(cout, np.int64), 3)
    bq = QuantizationParameters(scale * np.float32(xi.scale), np.zeros(cout, np.int64), 0)
    coi, _, _, couts = specs[concat]
    winfo = TensorInfo(-1, "mixconv weights", taps.shape, np.dtype(np.int8), "int8", wq, taps)
    bias = np.concatenate(biases).astype(np.int32)
    binfo = TensorInfo(-1, "mixconv bias", bias.shape, np.dtype(np.int32), "int32", bq, bias)
    out = dataclasses.replace(infos[couts[0]])
    return Node(op="DEPTHWISE_CONV_2D", index=coi, inputs=[xi, winfo, binfo], outputs=[out],
                options=opts[0], subgraph=plan.index, runtime=plan.runtime)


def fuse(plan, specs: list, own: set, reshapes: dict) -> list:
    """`specs` with every MixConv block as one depthwise step (at its concat's place)."""
    if plan.runtime.reference and not UNDER_REFERENCE:
        return specs
    rooted = set(reshapes.values())      # tensors a reshape view reads: not intermediates
    made = {}                            # the fused steps' runs -> their nodes
    done = True
    while done:
        done = False
        readers = _readers(specs)
        for s in range(len(specs)):
            found = _branches(plan, specs, readers, s, own | rooted)
            if found is None:
                continue
            x, branches, concat = found
            node = _fused_node(plan, specs, x, branches, concat)
            if node is None:
                continue
            try:
                run = registry.lookup(node)(node)
            except Exception:          # the ops run as they are (their own checks passed)
                continue
            c = specs[concat][3][0]
            if tuple(node.outputs[0].shape) != tuple(plan.infos[c].shape):
                continue
            gone = {s, concat} | {r for _, r, _, _ in branches} | \
                {cut for cut, _, _, _ in branches if cut is not None}
            specs = [(specs[concat][0], run, [x, -1, -1], [c]) if i == concat else spec
                     for i, spec in enumerate(specs) if i not in gone or i == concat]
            made[run] = node
            done = True
            break
    return _chains(plan, specs, made, own | rooted) if made else specs


def _chains(plan, specs: list, made: dict, own: set) -> list:
    """Each fused block chained with the 1x1 CONV_2D or FULLY_CONNECTED that reads it alone
    (fusion_int8.py; fusion.fuse ran before the blocks were one step): the ops' own nodes for
    the steps that are one op each."""
    from . import fusion, fusion_int8
    from .plan import _node
    sg = plan.sg
    kept = set(sg.outputs) | {t for t, info in enumerate(sg.tensors) if info.is_variable} | own
    k = 0
    while k < len(specs):
        node = made.get(specs[k][1])
        if node is None or not getattr(specs[k][1], "stage_out", False):
            k += 1
            continue
        nodes = {specs[k][0]: node}
        for oi, _, ins, outs in specs[k + 1:k + 4]:
            op = sg.operators[oi]
            if list(ins) == list(op.inputs) and list(outs) == list(op.outputs):
                nodes[oi] = _node(plan.runtime, plan.index, sg, oi, op, plan.infos)
        readers = Counter(t for _, _, ins, _ in specs for t in ins if t >= 0)
        found = fusion_int8.int8_chain(fusion.Context(sg, specs, nodes, readers, kept), k)
        if found is not None:
            spec, count = found
            specs = specs[:k] + [spec] + specs[k + count:]
        k += 1
    return specs
