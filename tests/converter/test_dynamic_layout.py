"""Transposes and run-time reshapes (issue 12): with dynamic dims a RESHAPE's target is computed
while running (SHAPE -> GATHER -> CONCATENATION), and the layout and attention passes still
leave <= 2 transposes per attention block; merged head slices of such a reshape give the right
numbers (a target built group by group had a size-1 dim out of place: SVTR's q, k, v slices,
PP-OCRv4's recognizer 0.47 x max|ref| off)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from edgelite.converter.builder import regroup
from tests.converter.dynamic_models import F, _graph, _Net
from tests.converter.test_convert_dynamic import check_sizes, convert

pytest.importorskip("ai_edge_litert.interpreter")


def svtr_attention(heads: int = 2, dh: int = 4):
    """SVTR's attention as paddle2onnx writes it (PP-OCRv4's recognizer): one qkv projection,
    Reshape to [0, seq, 3, heads, dh] with seq from Shape, Transpose to [3, b, h, s, dh], a
    Slice + Squeeze each for q, k, v, q scaled, k transposed, softmax attention, heads merged by
    Transpose + Reshape to [0, seq, d]; x [batch, seq, d]."""
    d = heads * dh
    net = _Net(7)
    seq = net.op("Slice", [net.op("Shape", ["x"]), net.const(np.array([1], np.int64)),
                           net.const(np.array([2], np.int64)),
                           net.const(np.array([0], np.int64))])
    qkv = net.op("Reshape", [net.linear("x", d, 3 * d), net.vec(0, seq, 3, heads, dh)])
    qkv = net.op("Transpose", [qkv], perm=[2, 0, 3, 1, 4])

    def part(i):
        s = net.op("Slice", [qkv, net.const(np.array([i], np.int64)),
                             net.const(np.array([i + 1], np.int64)),
                             net.const(np.array([0], np.int64)),
                             net.const(np.array([1], np.int64))])
        return net.op("Squeeze", [s, net.const(np.array([0], np.int64))])

    q = net.op("Mul", [part(0), net.const(np.array(dh ** -0.5, F))])
    k, v = part(1), part(2)
    scores = net.op("MatMul", [q, net.op("Transpose", [k], perm=[0, 1, 3, 2])])
    attn = net.op("MatMul", [net.op("Softmax", [scores], axis=-1), v])      # [b, h, s, dh]
    merged = net.op("Reshape", [net.op("Transpose", [attn], perm=[0, 2, 1, 3]),
                                net.vec(0, seq, d)])
    net.nodes.append(helper.make_node("Identity", [net.linear(merged, d, d)], ["y"]))
    proto = _graph("svtr_attention", net.nodes, [("x", ["batch", "seq", d], F)], ["y"],
                   net.inits)
    return proto, [[(1, 7, d)], [(2, 33, d)], [(3, 64, d)]]


def test_regroup_keeps_output_order():
    """A size-1 output dim inside a group's run belongs to that group, so a target assembled
    group by group lists the dims in order."""
    groups = regroup((2, 128, 24), (2, 128, 3, 1, 8))
    assert [j for _, outs in groups for j in outs] == [0, 1, 2, 3, 4]
    assert groups[2] == ([2], [2, 3, 4])
    assert regroup((1, 6), (1, 2, 1, 3, 1)) == [([], [0]), ([1], [1, 2, 3]), ([], [4])]


def test_svtr_head_slices_merge_and_match():
    """q, k and v sliced from one run-time reshape merge into one RESHAPE + TRANSPOSE (2 per
    block with the context's), and match onnxruntime at three sizes in both runtimes."""
    proto, sizes = svtr_attention()
    conversion = convert(proto)
    assert not conversion.warnings
    assert conversion.transposes <= 2
    check_sizes(proto, conversion, sizes)
