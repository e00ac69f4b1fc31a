"""Each converter pass before and after: the graph changes as intended and computes the same
(both versions run in edgelite's interpreter on the same random inputs)."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from edgelite.converter.builder import IRBuilder
from edgelite.converter.pass_clean import dedupe_ops, remove_dead_ops
from edgelite.converter.pass_fuse import (fold_pad_into_window, fuse_activation,
                                          fuse_add_into_bias, fuse_hard_swish,
                                          fuse_mul_into_weights)
from edgelite.converter.pass_layout import (merge_reshapes, push_transposes,
                                            transposes_to_reshapes)
from edgelite.interpreter import Interpreter
from edgelite.schema import Model, Subgraph, save, validate

RNG = np.random.default_rng(3)
NHWC, NCHW = (0, 2, 3, 1), (0, 3, 1, 2)


def w(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def graph(inputs: list, build) -> tuple:
    """A model with float inputs of these shapes; `build(b, *inputs)` returns its outputs."""
    model = Model()
    sg = Subgraph(name="main")
    model.subgraphs.append(sg)
    b = IRBuilder(model, sg)
    ins = [b.tensor(f"in{k}", shape) for k, shape in enumerate(inputs)]
    sg.inputs = ins
    outs = build(b, *ins)
    sg.outputs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    return model, [w(*shape) for shape in inputs]


def outputs(model: Model, feeds: list) -> list:
    it = Interpreter(model_content=save(model))
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), feeds):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]


def ops(model: Model) -> Counter:
    return Counter(op.op for op in model.subgraphs[0].operators)


def same_after(run, model: Model, feeds: list) -> Counter:
    """Apply pass `run` (it must change the model); outputs must not change."""
    before = outputs(model, feeds)
    assert run(model) is True
    validate(model)
    after = outputs(model, feeds)
    for x, y in zip(before, after):
        np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-5)
    assert run(model) is False or run(model) is False   # settles
    return ops(model)


def conv(b, x_nhwc, cout, act=0):
    cin = b.shape(x_nhwc)[-1]
    return b.op("CONV_2D", [x_nhwc, b.const(w(cout, 3, 3, cin)), b.const(w(cout))],
                {"padding": 0, "stride_h": 1, "stride_w": 1,
                 "fused_activation_function": act})


# -- layout --------------------------------------------------------------------------------------

def test_push_transposes_cancels_through_elementwise():
    def build(b, x):
        y = b.transpose(conv(b, x, 4), NCHW)
        y = b.op("RELU", [y])
        y = b.op("ADD", [y, b.const(w(1, 4, 1, 1))])
        return conv(b, b.transpose(y, NHWC), 2)
    model, feeds = graph([(1, 5, 5, 3)], build)
    assert ops(model)["TRANSPOSE"] == 2
    after = same_after(push_transposes, model, feeds)
    assert "TRANSPOSE" not in after
    sg = model.subgraphs[0]
    add = next(op for op in sg.operators if op.op == "ADD")
    assert model.constant(sg, add.inputs[1]).shape == (1, 1, 1, 4)   # constant permuted


def test_push_transposes_through_reduce_concat_pad_softmax():
    def build(b, x):
        y = b.transpose(x, NCHW)                                       # [1, 3, 4, 5]
        y = b.op("PAD", [y, b.const(np.array([[0, 0], [0, 0], [1, 1], [2, 0]], np.int32))])
        y = b.op("CONCATENATION", [y, y], {"axis": 1})
        y = b.op("MEAN", [y, b.const(np.array([2], np.int32))], {"keep_dims": False})
        return b.op("SOFTMAX", [b.transpose(y, (0, 2, 1))], {"beta": 1.0})
    model, feeds = graph([(1, 4, 5, 3)], build)
    after = same_after(push_transposes, model, feeds)
    assert "TRANSPOSE" not in after


def test_flatten_into_fully_connected_permutes_weight_columns():
    def build(b, x):
        y = b.transpose(x, NCHW)
        y = b.reshape(y, (1, 24))
        return b.op("FULLY_CONNECTED", [y, b.const(w(5, 24)), b.const(w(5))])
    model, feeds = graph([(1, 2, 3, 4)], build)
    assert same_after(push_transposes, model, feeds) == {"RESHAPE": 1, "FULLY_CONNECTED": 1}


def test_reshape_of_ones_moves_the_transpose_past_it():
    def build(b, x):
        y = b.transpose(x, (0, 2, 1))         # [1, 6, 5]
        y = b.reshape(y, (1, 6, 1, 5))
        return b.op("RELU", [b.transpose(y, NHWC)])
    model, feeds = graph([(1, 5, 6)], build)
    after = same_after(push_transposes, model, feeds)
    assert after["TRANSPOSE"] == 1 and after["RESHAPE"] == 1


def test_transposes_to_reshapes_and_merge():
    def build(b, x):
        y = b.transpose(x, NCHW)              # [1, 1, 4, 4]: only a size-1 dim moves
        return b.op("RELU", [b.reshape(y, (16,))])
    model, feeds = graph([(1, 4, 4, 1)], build)
    assert same_after(transposes_to_reshapes, model, feeds) == {"RESHAPE": 2, "RELU": 1}
    assert same_after(merge_reshapes, model, feeds) == {"RESHAPE": 1, "RELU": 1}


# -- fusions -------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["MUL", "DIV"])
def test_fuse_mul_into_weights(op):
    def build(b, x):
        return b.op(op, [conv(b, x, 4), b.const(w(1, 1, 1, 4))])
    model, feeds = graph([(1, 5, 5, 3)], build)
    assert same_after(fuse_mul_into_weights, model, feeds) == {"CONV_2D": 1}


@pytest.mark.parametrize("op", ["ADD", "SUB"])
def test_fuse_add_into_bias_takes_the_activation(op):
    def build(b, x):
        y = b.op("FULLY_CONNECTED", [x, b.const(w(4, 6)), -1])
        return b.op(op, [y, b.const(w(4))], {"fused_activation_function": 3})
    model, feeds = graph([(2, 6)], build)
    assert same_after(fuse_add_into_bias, model, feeds) == {"FULLY_CONNECTED": 1}
    fc = model.subgraphs[0].operators[0]
    assert fc.options.fused_activation_function == 3


def test_no_fusion_when_the_output_has_other_readers():
    def build(b, x):
        y = conv(b, x, 4)
        return [b.op("ADD", [y, b.const(w(4))]), b.op("RELU", [y])]
    model, _ = graph([(1, 5, 5, 3)], build)
    assert not fuse_add_into_bias(model)
    assert not fuse_activation(model)


@pytest.mark.parametrize("act, code", [("RELU", 1), ("RELU_N1_TO_1", 2), ("RELU6", 3)])
def test_fuse_activation(act, code):
    def build(b, x):
        return b.op(act, [conv(b, x, 4)])
    model, feeds = graph([(1, 5, 5, 3)], build)
    assert same_after(fuse_activation, model, feeds) == {"CONV_2D": 1}
    assert model.subgraphs[0].operators[0].options.fused_activation_function == code


def test_no_activation_fused_into_concatenation():
    """CONCATENATION's options hold a fused activation that LiteRT ignores and edgelite refuses:
    a RELU after it stays an op (Concat -> Relu converted to a model that did not run)."""
    def build(b, x, y):
        return b.op("RELU", [b.op("CONCATENATION", [x, y], {"axis": 1})])
    model, feeds = graph([(1, 4), (1, 4)], build)
    assert not fuse_activation(model)
    assert np.all(outputs(model, feeds)[0] >= 0)


def test_tanh_is_not_fused():
    """LiteRT's float kernels ignore a fused TANH on CONV_2D and friends: keep the op."""
    def build(b, x):
        return b.op("TANH", [conv(b, x, 4)])
    model, _ = graph([(1, 5, 5, 3)], build)
    assert not fuse_activation(model)


@pytest.mark.parametrize("form", ["relu6_div", "relu6_mul", "hard_sigmoid"])
def test_fuse_hard_swish(form):
    def build(b, x):
        c = lambda v: b.const(np.array(v, np.float32))  # noqa: E731
        if form == "hard_sigmoid":
            s = b.op("RELU_0_TO_1", [b.op("ADD", [b.op("MUL", [x, c(1 / 6)]), c(0.5)])])
            return b.op("MUL", [x, s])
        s = b.op("ADD", [x, c(3.0)], {"fused_activation_function": 3})
        y = b.op("MUL", [x, s])
        return b.op("DIV", [y, c(6.0)]) if form == "relu6_div" else b.op("MUL", [y, c(1 / 6)])
    model, feeds = graph([(2, 7)], build)
    feeds = [f * 4 for f in feeds]
    assert same_after(fuse_hard_swish, model, feeds) == {"HARD_SWISH": 1}


@pytest.mark.parametrize("op, value", [("CONV_2D", None),
                                       ("MAX_POOL_2D", float(np.finfo(np.float32).min))])
def test_fold_pad_into_same(op, value):
    def build(b, x):
        pads = b.const(np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32))
        if value is None:
            p = b.op("PAD", [x, pads])
            return b.op(op, [p, b.const(w(2, 3, 3, 3)), b.const(w(2))],
                        {"padding": 1, "stride_h": 1, "stride_w": 1})
        p = b.op("PADV2", [x, pads, b.const(np.array(value, np.float32))])
        return b.op(op, [p], {"padding": 1, "stride_h": 1, "stride_w": 1,
                              "filter_height": 3, "filter_width": 3})
    model, feeds = graph([(1, 6, 6, 3)], build)
    after = same_after(fold_pad_into_window, model, feeds)
    assert after == {op: 1}
    assert next(o for o in model.subgraphs[0].operators if o.op == op).options.padding == 0


def test_pad_that_is_not_same_stays():
    def build(b, x):
        p = b.op("PAD", [x, b.const(np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32))])
        return b.op("CONV_2D", [p, b.const(w(2, 3, 3, 3)), b.const(w(2))],
                    {"padding": 1, "stride_h": 2, "stride_w": 2})
    model, _ = graph([(1, 6, 6, 3)], build)
    assert not fold_pad_into_window(model)


# -- clean-up ------------------------------------------------------------------------------------

def test_dedupe_and_remove_dead():
    def build(b, x):
        a = b.op("RELU", [x])
        c = b.op("RELU", [x])
        b.op("EXP", [x])                      # nobody reads it
        return b.op("ADD", [a, c])
    model, feeds = graph([(3, 4)], build)
    assert same_after(remove_dead_ops, model, feeds) == {"RELU": 2, "ADD": 1}
    assert same_after(dedupe_ops, model, feeds)["RELU"] == 1
