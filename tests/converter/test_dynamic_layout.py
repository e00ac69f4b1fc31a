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
from edgelite.converter.editor import Editor
from edgelite.converter.pass_attention import merge_parallel_projections
from edgelite.converter.pass_layout import push_transposes
from edgelite.converter.pass_shape import fold_gather_of_gather
from tests.converter.dynamic_models import MODELS, F, _graph, _Net
from tests.converter.test_convert_dynamic import check_sizes, convert
from tests.converter.test_convert_passes import graph, outputs, same_after, w

pytest.importorskip("ai_edge_litert.interpreter")


def svtr_attention(heads: int = 2, dh: int = 4, image: bool = False):
    """SVTR's attention as paddle2onnx writes it (PP-OCRv4's recognizer): one qkv projection,
    Reshape to [0, seq, 3, heads, dh] with seq from Shape, Transpose to [3, b, h, s, dh], a
    Slice + Squeeze each for q, k, v, q scaled, k transposed, softmax attention, heads merged by
    Transpose + Reshape to [0, seq, d]; x [batch, seq, d]. With `image`, x is a conv's NCHW
    output flattened (Reshape [b, c, -1] from Shape, Transpose to [b, h * w, c]) of an image
    [batch, 3, 8, width]."""
    d = heads * dh
    net = _Net(7)
    x = "x"
    if image:
        x = net.conv("image", 3, d, stride=2)                            # [b, d, 4, w / 2]
        x = net.op("Reshape", [x, net.vec(net.dim(x, 0), net.dim(x, 1), -1)])
        x = net.op("Transpose", [x], perm=[0, 2, 1])                     # [b, 2 w, d]
    seq = net.op("Slice", [net.op("Shape", [x]), net.const(np.array([1], np.int64)),
                           net.const(np.array([2], np.int64)),
                           net.const(np.array([0], np.int64))])
    qkv = net.op("Reshape", [net.linear(x, d, 3 * d), net.vec(0, seq, 3, heads, dh)])
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
    if image:
        proto = _graph("svtr_attention", net.nodes, [("image", ["batch", 3, 8, "width"], F)],
                       ["y"], net.inits)
        return proto, [[(1, 3, 8, 32)], [(2, 3, 8, 48)], [(3, 3, 8, 96)]]
    proto = _graph("svtr_attention", net.nodes, [("x", ["batch", "seq", d], F)], ["y"],
                   net.inits)
    return proto, [[(1, 7, d)], [(2, 33, d)], [(3, 64, d)]]


def shufflenet_units(units: int = 3, c: int = 8):
    """ShuffleNetV2 stride-1 units as torchvision exports them with open batch, height and
    width: Split, a branch of convs, Concat, the channel shuffle as Reshape [b, 2, c / 2, h, w]
    from Shape, Transpose, Reshape [b, -1, h, w]."""
    net = _Net(8)
    x = net.conv("image", 3, c, k=1)
    for _ in range(units):
        a, b = net.op("Split", [x, net.const(np.array([c // 2, c // 2], np.int64))], n_out=2,
                      axis=1)
        b = net.conv(net.conv(b, c // 2, c // 2, k=1), c // 2, c // 2, groups=c // 2,
                     relu=False)
        cat = net.op("Concat", [a, b], axis=1)
        n, h, w = net.dim(cat, 0), net.dim(cat, 2), net.dim(cat, 3)
        y = net.op("Transpose", [net.op("Reshape", [cat, net.vec(n, 2, c // 2, h, w)])],
                   perm=[0, 2, 1, 3, 4])
        x = net.op("Reshape", [y, net.vec(n, -1, h, w)])
    net.nodes.append(helper.make_node("Identity", [net.conv(x, c, 4, k=1, relu=False)], ["y"]))
    proto = _graph("shufflenet_units", net.nodes,
                   [("image", ["batch", 3, "height", "width"], F)], ["y"], net.inits)
    return proto, [[(1, 3, 8, 12)], [(2, 3, 16, 16)], [(3, 3, 5, 7)]]


def whisper_attention(heads: int = 2, dh: int = 4):
    """Whisper's self-attention as torch exports it: q = (x Wq + bq) * dh^-0.5 before its heads
    are split, k a projection with no bias, v with one; heads by Reshape [b, s, h, dh] from
    Shape, k transposed to [b, h, dh, s]; x [batch, seq, d]."""
    d = heads * dh
    net = _Net(9)
    split = net.vec(net.dim("x", 0), net.dim("x", 1), heads, dh)

    def heads_of(t, perm):
        return net.op("Transpose", [net.op("Reshape", [t, split])], perm=perm)

    wk = (net.rng.standard_normal((d, d)) / np.sqrt(d)).astype(F)
    q = heads_of(net.op("Mul", [net.linear("x", d, d), net.const(np.array(dh ** -0.5, F))]),
                 [0, 2, 1, 3])
    k = heads_of(net.op("MatMul", ["x", net.const(wk, "wk")]), [0, 2, 3, 1])
    v = heads_of(net.linear("x", d, d), [0, 2, 1, 3])
    attn = net.op("MatMul", [net.op("Softmax", [net.op("MatMul", [q, k])], axis=-1), v])
    merged = net.op("Reshape", [net.op("Transpose", [attn], perm=[0, 2, 1, 3]),
                                net.vec(net.dim("x", 0), net.dim("x", 1), d)])
    net.nodes.append(helper.make_node("Identity", [net.linear(merged, d, d)], ["y"]))
    proto = _graph("whisper_attention", net.nodes, [("x", ["batch", "seq", d], F)], ["y"],
                   net.inits)
    return proto, [[(1, 5, d)], [(2, 19, d)], [(3, 40, d)]]


def gpt2_attention(heads: int = 2, dh: int = 4):
    """GPT-2's attention as torch exports it: c_attn on the tokens flattened (Reshape [-1, d],
    MatMul, Add, Reshape [b, s, 3 d] from Shape), Split into q, k and v, each Reshape
    [b, s, h, dh] from Shape and Transpose, k to [b, h, dh, s]; x [batch, seq, d]."""
    d = heads * dh
    net = _Net(10)
    b, s = net.dim("x", 0), net.dim("x", 1)
    flat = net.op("Reshape", ["x", net.const(np.array([-1, d], np.int64))])
    qkv = net.op("Reshape", [net.linear(flat, d, 3 * d), net.vec(b, s, 3 * d)])
    parts = net.op("Split", [qkv, net.const(np.array([d] * 3, np.int64))], n_out=3, axis=2)
    q, k, v = (net.op("Transpose", [net.op("Reshape", [t, net.vec(b, s, heads, dh)])],
                      perm=perm)
               for t, perm in zip(parts, ([0, 2, 1, 3], [0, 2, 3, 1], [0, 2, 1, 3])))
    attn = net.op("MatMul", [net.op("Softmax", [net.op("MatMul", [q, k])], axis=-1), v])
    merged = net.op("Reshape", [net.op("Transpose", [attn], perm=[0, 2, 1, 3]),
                                net.vec(b, s, d)])
    net.nodes.append(helper.make_node("Identity", [net.linear(merged, d, d)], ["y"]))
    proto = _graph("gpt2_attention", net.nodes, [("x", ["batch", "seq", d], F)], ["y"],
                   net.inits)
    return proto, [[(1, 6, d)], [(2, 23, d)], [(3, 47, d)]]


def test_regroup_keeps_output_order():
    """A size-1 output dim inside a group's run belongs to that group, so a target assembled
    group by group lists the dims in order."""
    groups = regroup((2, 128, 24), (2, 128, 3, 1, 8))
    assert [j for _, outs in groups for j in outs] == [0, 1, 2, 3, 4]
    assert groups[2] == ([2], [2, 3, 4])
    assert regroup((1, 6), (1, 2, 1, 3, 1)) == [([], [0]), ([1], [1, 2, 3]), ([], [4])]


@pytest.mark.parametrize("image", [False, True])
def test_svtr_head_slices_merge_and_match(image):
    """q, k and v sliced from one run-time reshape merge into one RESHAPE + TRANSPOSE (2 per
    block with the context's; an NCHW conv's output flattened to a sequence by a run-time
    reshape adds none), and match onnxruntime at three sizes in both runtimes."""
    proto, sizes = svtr_attention(image=image)
    conversion = convert(proto)
    assert not conversion.warnings
    assert conversion.transposes <= 2, conversion.ops_out
    check_sizes(proto, conversion, sizes)


def test_dynamic_attention_keeps_two_transposes():
    """torch's per-head Reshape [b, s, h, d] from Shape for q, k and v: the projections merge
    and one TRANSPOSE splits the heads of all three, one merges the context's."""
    proto, sizes = MODELS["attention_encoder"]()
    conversion = convert(proto)
    assert not conversion.warnings
    assert conversion.transposes <= 2, conversion.ops_out
    assert conversion.ops_out["FULLY_CONNECTED"] == 4    # q, k and v as one
    check_sizes(proto, conversion, sizes)


def test_dynamic_channel_shuffle_keeps_one_transpose():
    """The shuffle's run-time reshapes take the NHWC layout (their targets permuted), so each
    shuffle keeps one TRANSPOSE, on NHWC data, as with fixed shapes."""
    units = 3
    proto, sizes = shufflenet_units(units)
    conversion = convert(proto)
    assert not conversion.warnings
    assert conversion.transposes <= units, conversion.ops_out
    assert conversion.io_layout["inputs"][0]["perm"] == [0, 2, 3, 1]
    check_sizes(proto, conversion, sizes)


def test_gathers_of_gathers_of_shapes_compose():
    """A dim of a SHAPE read through a transpose (GATHER of a GATHER by the permutation) is
    one GATHER of the SHAPE (pass_shape.fold_gather_of_gather): no GATHER of the shuffle's
    shape arithmetic reads another, and each reshape target gathers from a SHAPE."""
    proto, _ = shufflenet_units(2)
    sg = convert(proto).model.subgraphs[0]
    producer = {t: op for op in sg.operators for t in op.outputs}
    gathers = [op for op in sg.operators if op.op == "GATHER"]
    assert gathers
    assert all(producer[op.inputs[0]].op == "SHAPE" for op in gathers)


@pytest.mark.parametrize("shape", [None, (2, 19, 8)])
def test_projections_merge_with_and_without_bias(shape):
    """q scaled before its reshape and a k with no bias still merge with v into one projection
    (a zero bias for k): one TRANSPOSE for q, k and v, one for the context, with the sizes open
    or fixed."""
    proto, sizes = whisper_attention()
    conversion = convert(proto, shape and {"x": shape})
    assert not conversion.warnings
    assert conversion.transposes <= 2, conversion.ops_out
    assert conversion.ops_out["FULLY_CONNECTED"] == 2
    check_sizes(proto, conversion, [[shape]] if shape else sizes)


def test_projection_merges_through_reshapes_in_a_row():
    """A head split reached through two RESHAPEs in a row (T5's dynamo export, before
    merge_reshapes has run) merges with the others: one FULLY_CONNECTED, same outputs."""
    weights = [w(8, 8) for _ in range(3)]

    def build(b, x):
        outs = []
        for k, weight in enumerate(weights):
            y = b.op("FULLY_CONNECTED", [x, b.const(weight), -1], {"keep_num_dims": True})
            if k == 1:
                y = b.reshape(y, (16, 8))
            outs.append(b.transpose(b.reshape(y, (1, 16, 2, 4)), (0, 2, 1, 3)))
        return outs
    model, feeds = graph([(1, 16, 8)], build)
    after = same_after(merge_parallel_projections, model, feeds)
    assert after["FULLY_CONNECTED"] == 1


@pytest.mark.parametrize("built", ["concatenation", "shape"])
def test_transpose_passes_a_computed_reshape_target(built):
    """NHWC -> TRANSPOSE(NCHW) -> RESHAPE [b, c, h * w] -> TRANSPOSE [b, h * w, c], the target
    computed while running: the reshape runs on the NHWC tensor with its target permuted (a
    CONCATENATION of one-entry parts rebuilt in the new order; another producer gathered) and
    both transposes go; the outputs stay the same."""
    model, feeds = graph([(1, 4, 6, 8), (1, 8, 24)], lambda b, x, s: x)
    sg = model.subgraphs[0]
    ed = Editor(model, sg)
    x, s = sg.inputs
    nchw, dims, target = (ed.tensor("nchw", (1, 8, 4, 6), "float32"),
                          ed.tensor("dims", (3,), "int32"), ed.tensor("target", (3,), "int32"))
    flat, y = ed.tensor("flat", (1, 8, 24), "float32"), ed.tensor("y", (1, 24, 8), "float32")
    new = [ed.new_op("TRANSPOSE", [x, ed.const(np.array([0, 3, 1, 2], np.int32), "p")], [nchw]),
           ed.new_op("SHAPE", [s], [dims], {"out_type": 2})]
    if built == "concatenation":
        parts = [ed.tensor(f"part{i}", (1,), "int32") for i in range(3)]
        new += [ed.new_op("GATHER", [dims, ed.const(np.array([i], np.int32), f"i{i}")],
                          [parts[i]], {"axis": 0}) for i in range(3)]
        new.append(ed.new_op("CONCATENATION", parts, [target], {"axis": 0}))
    else:
        target = dims
    new += [ed.new_op("RESHAPE", [nchw, target], [flat]),
            ed.new_op("TRANSPOSE", [flat, ed.const(np.array([0, 2, 1], np.int32), "q")], [y])]
    sg.operators, sg.outputs = new, [y]
    after = same_after(push_transposes, model, feeds)
    assert "TRANSPOSE" not in after
    assert after["CONCATENATION" if built == "concatenation" else "GATHER"] == 1


def test_split_heads_of_flattened_tokens_stay_dynamic():
    """GPT-2's q, k and v split from one projection of [b * s, d] tokens: merged into one
    RESHAPE + TRANSPOSE, whose target is computed from the [b, s, 3 d] reshape it reads (that
    reshape stays: its computed target is what knows b and s), so the dims stay dynamic."""
    proto, sizes = gpt2_attention()
    conversion = convert(proto)
    assert not conversion.warnings
    assert conversion.transposes <= 2, conversion.ops_out
    check_sizes(proto, conversion, sizes)


@pytest.mark.parametrize("index", [np.array(1, np.int32), np.array([2, 1], np.int32)])
def test_gather_of_gather_keeps_the_index_shape(index):
    """GATHER(GATHER(SHAPE, perm), j) is GATHER(SHAPE, perm[j]) with j's shape: a scalar j
    stays a scalar (T5's RANGE reads one as its limit)."""
    model, feeds = graph([(2, 3, 5)], lambda b, x: x)
    sg = model.subgraphs[0]
    ed = Editor(model, sg)
    dims, moved = ed.tensor("dims", (3,), "int32"), ed.tensor("moved", (3,), "int32")
    y = ed.tensor("y", index.shape, "int32")
    sg.operators = [
        ed.new_op("SHAPE", [sg.inputs[0]], [dims], {"out_type": 2}),
        ed.new_op("GATHER", [dims, ed.const(np.array([2, 0, 1], np.int32), "perm")], [moved],
                  {"axis": 0}),
        ed.new_op("GATHER", [moved, ed.const(index, "j")], [y], {"axis": 0})]
    sg.outputs = [y]
    assert same_after(fold_gather_of_gather, model, feeds) == {"SHAPE": 1, "GATHER": 1}
    (got,) = outputs(model, feeds)
    assert got.shape == index.shape
    np.testing.assert_array_equal(got, np.array([5, 2, 3])[index])


@pytest.mark.parametrize("shape", [None, (2, 9, 8)])
def test_transpose_passes_a_fully_connected_on_the_last_axis(shape):
    """nn.MultiheadAttention's batch-first transposes around a projection: [b, s, d] ->
    [s, b, d] -> Linear -> ReLU -> [b, s, d]. The projection reads the last axis alone, so the
    transpose passes it and meets its inverse: no TRANSPOSE left, the dims open or fixed."""
    net = _Net(11)
    y = net.op("Transpose", ["x"], perm=[1, 0, 2])
    y = net.op("Relu", [net.linear(y, 8, 12)])
    net.nodes.append(helper.make_node("Transpose", [y], ["y"], perm=[1, 0, 2]))
    proto = _graph("batch_first", net.nodes, [("x", ["batch", "seq", 8], F)], ["y"], net.inits)
    conversion = convert(proto, shape and {"x": shape})
    assert not conversion.warnings
    assert "TRANSPOSE" not in conversion.ops_out, conversion.ops_out
    check_sizes(proto, conversion, [[shape]] if shape else [[(1, 5, 8)], [(2, 9, 8)],
                                                            [(3, 4, 8)]])
