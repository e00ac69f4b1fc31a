"""Shape arithmetic with dynamic dims (issue 12): the SHAPE -> GATHER -> CONCATENATION chains
each layer of an export repeats (GPT-2's Conv1D: `x.view(-1, d)`, addmm, `view(x.size()[:-1] +
(d,))`; attention heads' `view(b, s, h, dh)` from the projection's size) are computed once: a
SHAPE measures the graph input the dims come from (`dim_source.source`), equal chains merge,
and the int64 -> int32 clamps of their values go. Checked against onnxruntime in edgelite and
LiteRT at three sizes."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from onnx import helper

from edgelite.converter.dim_source import source
from edgelite.converter.editor import Editor
from edgelite.converter.pass_shape import drop_shape_clamps
from tests.converter.dynamic_models import F, _graph, _Net
from tests.converter.test_convert_dynamic import check_sizes, convert

pytest.importorskip("ai_edge_litert.interpreter")

D, HEADS = 8, 2
SIZES = [[(1, 5, D)], [(2, 17, D)], [(3, 40, D)]]


def conv1d_blocks(layers: int):
    """`layers` GPT-2 style blocks on x [batch, seq, D]: Conv1D (flatten to [-1, D], MatMul +
    Add, reshape back to Shape(x)[:-1] + [D]), heads' reshape [b, s, HEADS, D / HEADS] from the
    projection's Shape and back, a residual Add and a Relu."""
    net = _Net(3)
    x = "x"
    for _ in range(layers):
        flat = net.op("Reshape", [x, net.const(np.array([-1, D], np.int64))])
        proj = net.op("Add", [net.op("MatMul", [flat, net.const(
            (net.rng.standard_normal((D, D)) / np.sqrt(D)).astype(F))]),
            net.const((net.rng.standard_normal(D) * 0.1).astype(F))])
        front = net.op("Slice", [net.op("Shape", [x]), net.const(np.array([0], np.int64)),
                                 net.const(np.array([-1], np.int64))])
        y = net.op("Reshape", [proj, net.op("Concat", [front, net.const(
            np.array([D], np.int64))], axis=0)])
        heads = net.op("Reshape", [y, net.vec(net.dim(y, 0), net.dim(y, 1), HEADS,
                                              D // HEADS)])
        y = net.op("Reshape", [net.op("Relu", [heads]), net.vec(net.dim(heads, 0),
                                                               net.dim(heads, 1), D)])
        x = net.op("Add", [x, y])
    net.nodes[-1].output[0] = "y"
    return _graph("conv1d_blocks", net.nodes, [("x", ["batch", "seq", D], F)], ["y"],
                  net.inits)


@pytest.fixture(scope="module")
def converted():
    return {layers: (conv1d_blocks(layers), convert(conv1d_blocks(layers)))
            for layers in (2, 4)}


def test_shape_arithmetic_is_computed_once(converted):
    """Two more blocks add only their own data ops (MATMUL/FC, reshapes, RELU, ADD): no SHAPE,
    GATHER, CONCATENATION, SELECT_V2, MAXIMUM, MINIMUM or CAST per block; one SHAPE of x in all."""
    counts = {layers: Counter(op.op for op in conv.model.subgraphs[0].operators)
              for layers, (_, conv) in converted.items()}
    per_two = counts[4] - counts[2]
    shape_ops = {"SHAPE", "GATHER", "CONCATENATION", "SELECT_V2", "MAXIMUM", "MINIMUM", "CAST",
                 "STRIDED_SLICE", "SLICE"}
    assert not shape_ops & set(per_two), per_two
    assert sum(per_two.values()) <= 2 * 5, per_two
    assert counts[4]["SHAPE"] <= 1, counts[4]
    sg = converted[4][1].model.subgraphs[0]
    measured = {sg.tensors[op.inputs[0]].name for op in sg.operators if op.op == "SHAPE"}
    assert measured <= {"x"}, measured


@pytest.mark.parametrize("layers", [2, 4])
def test_matches_onnxruntime_at_three_sizes(converted, layers):
    proto, conversion = converted[layers]
    assert not conversion.warnings
    check_sizes(proto, conversion, SIZES)


def mha_out_projection(layers: int = 2):
    """torch's MultiheadAttention out projection as a TorchScript export writes it, on x [batch,
    seq, D] (batch_first): Transpose to [seq, batch, D], `view(seq * batch, D)`, MatMul + Add,
    `view(seq, batch, D)` from the Shape of the transposed tensor, Transpose back, residual Add."""
    net = _Net(5)
    x = "x"
    for _ in range(layers):
        t = net.op("Transpose", [x], perm=[1, 0, 2])
        flat = net.op("Reshape", [t, net.const(np.array([-1, D], np.int64))])
        proj = net.op("Add", [net.op("MatMul", [flat, net.const(
            (net.rng.standard_normal((D, D)) / np.sqrt(D)).astype(F))]),
            net.const((net.rng.standard_normal(D) * 0.1).astype(F))])
        y = net.op("Reshape", [proj, net.vec(net.dim(t, 0), net.dim(t, 1), D)])
        x = net.op("Add", [x, net.op("Relu", [net.op("Transpose", [y], perm=[1, 0, 2])])])
    net.nodes[-1].output[0] = "y"
    return _graph("mha_out_projection", net.nodes, [("x", ["batch", "seq", D], F)], ["y"],
                  net.inits)


def test_flatten_around_fully_connected_keeps_no_transpose():
    """The flatten -> FULLY_CONNECTED -> undo becomes one FULLY_CONNECTED keeping its dims, so
    the transposes around it cancel as with fixed shapes (dynamic GPT-2's Conv1Ds: 147 -> 131
    ops)."""
    proto = mha_out_projection()
    conversion = convert(proto)
    fixed = convert(proto, {"x": (2, 17, D)})
    assert conversion.transposes == fixed.transposes == 0
    ops = Counter(op.op for op in conversion.model.subgraphs[0].operators)
    assert ops["RESHAPE"] == 0 and ops["FULLY_CONNECTED"] == 2, ops
    assert not conversion.warnings
    check_sizes(proto, conversion, SIZES)


def t5_attention(heads: int = HEADS, buckets: int = 9):
    """T5's self-attention with its relative-position bias on x [batch, seq, D]: q, k and v
    projections split into heads ([b, -1, heads, dh] from Shape, Transpose), the key length
    read from q's heads (Shape of the transposed q), Range -> relative positions -> clipped
    buckets -> Gather of a [buckets, heads] table -> Unsqueeze -> Transpose to [1, heads, q, k],
    added to the scores; softmax, context, heads merged, out projection."""
    net = _Net(9)
    dh = D // heads

    def split(t):
        r = net.op("Reshape", [net.linear("x", D, D), net.vec(net.dim("x", 0), -1, heads, dh)])
        return net.op("Transpose", [r], perm=[0, 2, 1, 3])

    q, k, v = split("q"), split("k"), split("v")
    length = net.op("Gather", [net.op("Shape", [q]), net.const(np.array(2, np.int64))], axis=0)
    pos = net.op("Range", [net.const(np.array(0, np.int64)), length,
                           net.const(np.array(1, np.int64))])
    rel = net.op("Sub", [net.op("Unsqueeze", [pos, net.const(np.array([0], np.int64))]),
                         net.op("Unsqueeze", [pos, net.const(np.array([1], np.int64))])])
    half = buckets // 2
    bucket = net.op("Add", [net.op("Clip", [rel, net.const(np.array(-half, np.int64)),
                                            net.const(np.array(half, np.int64))]),
                            net.const(np.array(half, np.int64))])
    table = net.const(net.rng.standard_normal((buckets, heads)).astype(F))
    bias = net.op("Transpose", [net.op("Unsqueeze", [net.op("Gather", [table, bucket], axis=0),
                                                     net.const(np.array([0], np.int64))])],
                  perm=[0, 3, 1, 2])
    scores = net.op("Add", [net.op("MatMul", [q, net.op("Transpose", [k], perm=[0, 1, 3, 2])]),
                            bias])
    context = net.op("MatMul", [net.op("Softmax", [scores], axis=-1), v])
    merged = net.op("Reshape", [net.op("Transpose", [context], perm=[0, 2, 1, 3]),
                                net.vec(net.dim("x", 0), -1, D)])
    net.nodes.append(helper.make_node("Identity", [net.linear(merged, D, D)], ["y"]))
    return _graph("t5_attention", net.nodes, [("x", ["batch", "seq", D], F)], ["y"], net.inits)


def test_t5_attention_keeps_two_transposes():
    """q's heads measured for the position bias no longer keep q's projection apart (the SHAPE
    measures x), and the bias is gathered from the transposed table: 2 transposes, as with
    fixed shapes (dynamic T5 encoder: 6 -> 4 in 2 blocks)."""
    proto = t5_attention()
    conversion = convert(proto)
    assert not conversion.warnings
    assert conversion.transposes <= 2, conversion.ops_out
    check_sizes(proto, conversion, SIZES)


def _manual(inputs: list, build):
    """A model whose ops `build(ed, *inputs)` appends as they are (no folding by the builder)."""
    from tests.converter.test_convert_passes import graph

    def make(b, *ins):
        ed = Editor(b.model, b.sg)
        outs, ops = build(ed, *ins)
        b.sg.operators.extend(ops)
        return outs
    return graph(inputs, make)


def test_source_of_batch_matmul_batch_dims():
    """A BATCH_MATMUL's batch dim comes from its operands' batch dims, not their matrices',
    where sizes coincide (wav2vec2 at batch 2 and 2 frames: a batch read as a length)."""
    def build(ed, a, v):
        y = ed.tensor("y", (2, 4, 2, 16), "float32")
        return y, [ed.new_op("BATCH_MATMUL", [a, v], [y])]
    model, _ = _manual([(2, 4, 2, 2), (2, 4, 2, 16)], build)
    sg = model.subgraphs[0]
    ed = Editor(model, sg)
    y = sg.outputs[0]
    assert source(ed, y, (0,)) == (sg.inputs[0], (0,))
    assert source(ed, y, (2,)) == (sg.inputs[0], (2,))     # rows: a's rows
    assert source(ed, y, (3,)) == (sg.inputs[1], (3,))     # columns: v's
    assert source(ed, y, (2, 3)) == (y, (2, 3))            # not one operand's


def test_clamps_of_shape_values_go_by_their_bounds():
    """MAXIMUM(SHAPE(x), -7) cannot change a dim (>= 0): it goes; MAXIMUM(SHAPE(x), 3) can: it
    stays; the outputs are the same."""
    from tests.converter.test_convert_passes import same_after

    def build(ed, x):
        s = ed.tensor("s", (2,), "int32")
        low, high = ed.tensor("low", (2,), "int32"), ed.tensor("high", (2,), "int32")
        out = ed.tensor("out", (4,), "int32")
        return out, [ed.new_op("SHAPE", [x], [s], {"out_type": 2}),
                     ed.new_op("MAXIMUM", [s, ed.const(np.array(-7, np.int32), "m7")], [low]),
                     ed.new_op("MAXIMUM", [s, ed.const(np.array(3, np.int32), "p3")], [high]),
                     ed.new_op("CONCATENATION", [low, high], [out], {"axis": 0})]
    model, feeds = _manual([(2, 5)], build)
    ops = same_after(drop_shape_clamps, model, feeds)
    assert ops["MAXIMUM"] == 1, ops


def test_channel_shuffles_measure_the_image_once():
    """ShuffleNetV2 units (Split, convs, Concat, shuffle reshapes from the Concat's Shape):
    height and width are read through the concat, the split and the reshapes to one SHAPE, and
    each unit's shuffle targets are the first unit's (dynamic ShuffleNetV2: 285 -> 169 ops,
    fixed 157)."""
    from tests.converter.test_dynamic_layout import shufflenet_units

    counts = {}
    for units in (3, 5):
        proto, sizes = shufflenet_units(units=units)
        conversion = convert(proto)
        assert not conversion.warnings
        counts[units] = Counter(op.op for op in conversion.model.subgraphs[0].operators)
    assert counts[5]["SHAPE"] == counts[3]["SHAPE"] == 1, counts
    more = counts[5] - counts[3]
    assert not {"SHAPE", "GATHER"} & set(more) and more["CONCATENATION"] == 2, more
    check_sizes(proto, conversion, sizes)
