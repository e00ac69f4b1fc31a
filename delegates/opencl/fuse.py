"""Fusions over a partition's nodes before its kernels are built: fewer launches, fewer passes
over memory. On a CPU OpenCL device (PoCL) every launch costs microseconds and every pass
streams a tensor through the caches, so small elementwise kernels cost more than their work.

- A RELU-family node folds into the clamp of the node that produces its input.
- ADD(conv, r) folds into the CONV_2D's epilogue: the conv adds `r` before its clamp, which
  becomes the ADD's, and writes the ADD's output. `r` may be a PAD that only appends zero
  channels (BlazeFace's residuals): the epilogue reads the unpadded tensor, zeros beyond it.
- A zero PAD of height and width folds into the CONV_2D / DEPTHWISE_CONV_2D reading it: the
  convolution reads the unpadded tensor with its padding offsets grown (taps outside it add 0).
- On a CPU device, a DEPTHWISE_CONV_2D (depth multiplier 1) folds into the 1x1 CONV_2D that
  reads its output (MobileNet's and BlazeFace's blocks): the depthwise tensor stays in L1.
- On a CPU device, the 1x1 CONV_2D that expands a block's input folds in too, where that
  depthwise is 3x3 (stride 1 or 2, dilation 1) and the expanded tensor is large (EXPAND_MIN
  elements): the whole inverted-residual block is one launch, the expanded tensor never in
  memory (gemm.cl's expand_depthwise_then_conv_2d).

A node is fused only when nothing else reads the tensor that disappears, it is not needed
outside the partition, and every tensor the epilogue reads is written before the conv runs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edgelite.schema.ops import OPS

from .helpers import INF, clamp

# Ops whose OpenCL kernels end in a clamp (this delegate's epilogues: more ops than take a fused
# activation in the format), and the RELU family a following node can fold into it: each op's
# clamp range is the op table's.
CLAMPING = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV", "MAX_POOL_2D",
            "AVERAGE_POOL_2D", "CONCATENATION", "ADD", "SUB", "MUL", "DIV", "MAXIMUM",
            "MINIMUM", "PRELU", "SQUARED_DIFFERENCE", "POW"}
RELUS = {op: f.clamp for op, f in OPS.items() if f.clamp is not None}
PADDED_CONVS = ("CONV_2D", "DEPTHWISE_CONV_2D")


@dataclass
class Fusion:
    """What the builders of a partition's nodes do differently."""

    clamps: dict = field(default_factory=dict)     # node -> (lo, hi) narrowing its clamp
    aliased: set = field(default_factory=set)      # RELU nodes: output = input's buffer
    skipped: set = field(default_factory=set)      # nodes folded into another: nothing to do
    residual: dict = field(default_factory=dict)   # conv node -> (tensor, channels) to add
    output: dict = field(default_factory=dict)     # conv node -> the tensor it writes instead
    input_pad: dict = field(default_factory=dict)  # conv node -> (unpadded input, top, left)
    depthwise: dict = field(default_factory=dict)  # 1x1 conv node -> depthwise node before it
    expand: dict = field(default_factory=dict)     # such a 1x1 conv -> the 1x1 conv expanding
    residual_int: dict = field(default_factory=dict)  # integer 1x1 product -> (tensor, AddParams)


class _Graph:
    """Producers, readers and positions of a partition's tensors."""

    def __init__(self, nodes, outputs):
        self.position = {n.index: k for k, n in enumerate(nodes)}
        self.producer = {t.index: n for n in nodes for t in n.outputs}
        self.readers: dict = {}
        for n in nodes:
            for t in n.inputs:
                if t is not None:
                    self.readers.setdefault(t.index, []).append(n)
        self.needed = {t.index for t in outputs}

    def only_reader(self, info, node) -> bool:
        """`node` is the one reader of `info`, which is not needed outside the partition."""
        return info.index not in self.needed and \
            [r.index for r in self.readers.get(info.index, [])] == [node.index]

    def written_before(self, info, node) -> bool:
        p = self.producer.get(info.index)
        return p is None or self.position[p.index] < self.position[node.index]


def plan(nodes: list, outputs: list, cpu: bool = False, integer=frozenset()) -> Fusion:
    """The fusions of a partition's nodes (in execution order); `outputs`: its output tensors;
    `cpu`: the device is a CPU (PoCL); `integer`: nodes with integer arithmetic (quant_int.py),
    whose requantized outputs take no float residual ADD."""
    graph = _Graph(nodes, outputs)
    f = Fusion()
    _activations(nodes, graph, f)
    _residual_adds([n for n in nodes if n.index not in integer], graph, f)
    _spatial_pads(nodes, graph, f)
    if cpu:
        _depthwise_into_pointwise(nodes, graph, f)
        _expand_into_block(graph, f, integer)
    return f


def _activations(nodes, graph, f) -> None:
    for n in nodes:
        if n.op not in RELUS or n.inputs[0] is None:
            continue
        t = n.inputs[0]
        p = graph.producer.get(t.index)
        if p is None or p.op not in CLAMPING or not graph.only_reader(t, n) \
                or p.index in f.clamps or len(p.outputs) != 1:
            continue
        f.clamps[p.index] = RELUS[n.op]
        f.aliased.add(n.index)


def _zero_pad(node):
    """The [rank, 2] paddings of a PAD / PADV2 that fills with 0, else None."""
    if node.op not in ("PAD", "PADV2") or node.inputs[1] is None or node.inputs[1].data is None:
        return None
    if node.op == "PADV2" and len(node.inputs) > 2 and node.inputs[2] is not None:
        value = node.inputs[2].data
        if value is None or np.any(np.asarray(value) != 0):
            return None
    pads = np.asarray(node.inputs[1].data).reshape(-1, 2)
    if node.inputs[0].type_name != "float32" or np.any(pads < 0):
        return None
    return pads


def _channel_pad_source(info, add, graph):
    """(tensor, channels) when `info` is a zero PAD's output that only appends channels and
    only `add` reads: the epilogue reads the PAD's input instead."""
    pad = graph.producer.get(info.index)
    pads = None if pad is None else _zero_pad(pad)
    if pads is None or not graph.only_reader(info, add) or len(pads) < 2 \
            or np.any(pads[:-1] != 0) or pads[-1, 0] != 0:
        return None
    return pad, pad.inputs[0]


def _residual_adds(nodes, graph, f) -> None:
    for add in nodes:
        if add.op != "ADD" or len(add.inputs) != 2 or None in add.inputs:
            continue
        out = add.outputs[0]
        for k in (0, 1):
            a, r = add.inputs[k], add.inputs[1 - k]
            conv = graph.producer.get(a.index)
            if conv is None or conv.op != "CONV_2D" or a.index == r.index \
                    or not graph.only_reader(a, add) or conv.index in f.clamps \
                    or conv.index in f.residual or clamp(conv) != (-INF, INF) \
                    or tuple(a.shape) != tuple(out.shape) or r.data is not None:
                continue
            if tuple(r.shape) != tuple(out.shape):
                continue
            pad, source = None, r
            found = _channel_pad_source(r, add, graph)
            if found is not None:
                pad, source = found
            if not graph.written_before(source, conv):
                continue
            lo, hi = clamp(add)
            flo, fhi = f.clamps.get(add.index, (-INF, INF))
            f.clamps[conv.index] = (max(lo, flo), min(hi, fhi))
            f.residual[conv.index] = (source, int(source.shape[-1]))
            f.output[conv.index] = out
            f.skipped.add(add.index)
            if pad is not None:
                f.skipped.add(pad.index)
            break


def _spatial_pads(nodes, graph, f) -> None:
    for conv in nodes:
        if conv.op not in PADDED_CONVS or conv.inputs[0] is None:
            continue
        x = conv.inputs[0]
        pad = graph.producer.get(x.index)
        pads = None if pad is None or pad.index in f.skipped else _zero_pad(pad)
        if pads is None or len(pads) != 4 or np.any(pads[0] != 0) or np.any(pads[3] != 0) \
                or not graph.only_reader(x, conv):
            continue
        f.input_pad[conv.index] = (pad.inputs[0], int(pads[1, 0]), int(pads[2, 0]))
        f.skipped.add(pad.index)


def _pointwise(node) -> bool:
    """A CONV_2D that is a plain matrix product: 1x1, stride 1, no dilation."""
    o = node.options
    return node.op == "CONV_2D" and tuple(node.inputs[1].shape[1:3]) == (1, 1) \
        and int(o.stride_h or 1) == int(o.stride_w or 1) == 1 \
        and int(o.dilation_h_factor or 1) == int(o.dilation_w_factor or 1) == 1


def _depthwise_into_pointwise(nodes, graph, f) -> None:
    for conv in nodes:
        if not _pointwise(conv) or conv.index in f.input_pad or conv.inputs[1].shape[0] <= 8:
            continue
        x = conv.inputs[0]
        dw = graph.producer.get(x.index)
        if dw is None or dw.op != "DEPTHWISE_CONV_2D" or not graph.only_reader(x, conv) \
                or dw.inputs[1].shape[3] != dw.inputs[0].shape[3]:
            continue
        f.depthwise[conv.index] = dw
        f.skipped.add(dw.index)


# The smallest expanded tensor (elements a batch) whose block becomes one launch. Measured on
# PoCL (Zen 5, 1 thread, fp32, benchmarks/ab_opencl_block_fusion.py, fused / two launches):
# MobileNetV2's 112x112x96 (stride 2) 0.83, 56x56x144 0.87 and (stride 2) 0.91, 28x28x192
# 0.96 / 1.08 (stride 2), 14x14x384 1.02 and smaller 1.07-1.5 (the halo's recomputed
# expansion outweighs the tensor saved).
EXPAND_MIN = 56 * 56 * 144


def block_expansion(graph, f, dw, smallest: int | None = None):
    """The 1x1 CONV_2D expanding the input of `dw` (a depthwise folded into its 1x1
    projection) where the three can be one launch: a 3x3 depthwise of stride 1 or 2, no
    dilation or fused pad, the expansion's output read by `dw` alone and `smallest` elements
    a batch or more (EXPAND_MIN: fuse.py's float blocks); else None."""
    o = dw.options
    x = dw.inputs[0]
    ex = graph.producer.get(x.index)
    stride = int(o.stride_h or 1)
    if ex is None or not _pointwise(ex) or tuple(dw.inputs[1].shape[1:3]) != (3, 3) \
            or stride not in (1, 2) or int(o.stride_w or 1) != stride \
            or int(o.dilation_h_factor or 1) != 1 or int(o.dilation_w_factor or 1) != 1 \
            or dw.index in f.input_pad or ex.index in f.input_pad \
            or ex.index in f.residual or ex.index in f.depthwise \
            or len(ex.outputs) != 1 or not graph.only_reader(x, dw) \
            or int(np.prod(x.shape[1:])) < (EXPAND_MIN if smallest is None else smallest):
        return None
    return ex


def _expand_into_block(graph, f, integer) -> None:
    for conv, dw in list(f.depthwise.items()):
        ex = block_expansion(graph, f, dw)
        if ex is None or conv in integer or ex.index in integer or dw.index in integer:
            continue
        f.expand[conv] = ex
        f.skipped.add(ex.index)
