"""ONNX QDQ graphs (QuantizeLinear / DequantizeLinear) convert to integer .tflite models with the
QDQ model's own parameters: small graphs built with onnx.helper run bit-identically in edgelite
and LiteRT, within 2 output LSB of onnxruntime; TFLite's "same" and fixed output parameters are
requantized to the QDQ model's. The import half: the pairs as QUANTIZE / DEQUANTIZE (a float
model with fake quantization), identity pairs dropped, quantized constants folded, int16 pairs
kept as fake quantization."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("ai_edge_litert", reason="LiteRT is the oracle")

from onnx import TensorProto, numpy_helper  # noqa: E402

from edgelite.converter.convert import convert_onnx  # noqa: E402
from edgelite.converter.lowerings import supported_ops  # noqa: E402
from edgelite.converter.lower_qdq import dequantize_array, quantize_array  # noqa: E402
from tests.oracles import onnxruntime_run  # noqa: E402

from .graphs import run_edgelite, run_litert  # noqa: E402
from .qdq_graphs import (F, Graph, add_model, concat_model, conv_model,  # noqa: E402
                         convert, dequantized_outputs, float_ops, gemm_model, integer_ops, ops_of,
                         output_scale, pool_reshape_model, random_feeds, to_tflite)


# -- small QDQ graphs ----------------------------------------------------------------------------

CASES = {
    "conv per-channel": (lambda: conv_model(True), {"CONV_2D": 1}),
    "conv per-tensor + relu": (lambda: conv_model(False, relu=True), {"CONV_2D": 1}),
    "depthwise per-channel": (lambda: conv_model(True, depthwise=True),
                              {"DEPTHWISE_CONV_2D": 1}),
    "conv uint8 activations": (lambda: conv_model(True, act=TensorProto.UINT8),
                               {"CONV_2D": 1}),
    "gemm per-channel": (lambda: gemm_model(True), {"FULLY_CONNECTED": 2}),
    "gemm per-tensor": (lambda: gemm_model(False), {"FULLY_CONNECTED": 2}),
    "add": (add_model, {"ADD": 2}),
    "add uint8": (lambda: add_model(TensorProto.UINT8), {"ADD": 2}),
    "concat": (concat_model, {"CONCATENATION": 1, "CONV_2D": 1}),
    "dynamic batch": (lambda: concat_model("N"), {"CONCATENATION": 1, "CONV_2D": 1}),
    "pool reshape softmax sin": (pool_reshape_model,
                                 {"CONV_2D": 1, "MAX_POOL_2D": 1, "RESHAPE": 1,
                                  "FULLY_CONNECTED": 1, "SOFTMAX": 1}),
}


def test_same_and_fixed_outputs_requantized_to_the_qdq_parameters():
    """MAX_POOL_2D, RESHAPE and SOFTMAX keep TFLite's output parameters (their input's, or
    1/256 and -128); a QUANTIZE after each requantizes to the QDQ model's; SIN stays float."""
    c = convert(pool_reshape_model())
    sg = c.model.subgraphs[0]
    producer = {t: op for op in sg.operators for t in op.outputs}
    params = lambda t: (float(sg.tensors[t].quantization.scale[0]),  # noqa: E731
                        int(sg.tensors[t].quantization.zero_point[0]))
    for op in sg.operators:
        if op.op in ("MAX_POOL_2D", "RESHAPE"):
            assert params(op.outputs[0]) == params(op.inputs[0])
        if op.op == "SOFTMAX":
            assert params(op.outputs[0]) == (1 / 256, -128)
    requantized = [producer[op.inputs[0]].op for op in sg.operators
                   if op.op == "QUANTIZE" and sg.tensors[op.inputs[0]].dtype == "int8"]
    assert requantized == ["MAX_POOL_2D", "RESHAPE", "SOFTMAX"]
    assert c.quantization.requantized == 3
    assert float_ops(c) == ["SIN"]
    assert "SIN" in " ".join(c.quantization.lines())


def test_concatenation_keeps_the_qdq_output_grid():
    """Its inputs are requantized onto the output's QDQ grid (not onto the union of ranges)."""
    c = convert(concat_model())
    sg = c.model.subgraphs[0]
    cat = next(op for op in sg.operators if op.op == "CONCATENATION")
    out = sg.tensors[cat.outputs[0]].quantization
    assert np.isclose(out.scale[0], 2.6 / 255)
    assert all(sg.tensors[t].quantization.scale[0] == out.scale[0] for t in cat.inputs)
    assert c.quantization.requantized == 2    # one per input, none after


@pytest.mark.parametrize("name", list(CASES))
def test_small_qdq_graphs(name):
    make, expected = CASES[name]
    proto = make()
    c = convert(proto)
    for op, n in expected.items():
        assert integer_ops(c).get(op, 0) >= n, (name, ops_of(c))
    assert not {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"} & set(float_ops(c))
    _assert_qdq_weight_scales(proto, c)
    names = [i.name for i in proto.graph.input]
    worst = 0.0
    for feeds in random_feeds(proto, n=8):
        tflite_feeds = to_tflite(feeds, c)
        ours = run_edgelite(c.content, tflite_feeds)
        theirs = run_litert(c.content, tflite_feeds)
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(a, b)          # bit-identical
        ref = onnxruntime_run(proto, dict(zip(names, feeds)))
        for y, r in zip(dequantized_outputs(c, ours), ref):
            worst = max(worst, float(np.abs(y - r).max()))
    out_scale = output_scale(proto)
    print(f"\n{name}: max |edgelite - onnxruntime| {worst:.4g} = {worst / out_scale:.2f} LSB")
    assert worst <= 2 * out_scale + 1e-6


def _assert_qdq_weight_scales(proto, conversion) -> None:
    """Every weight keeps the scales of its DequantizeLinear, along TFLite's channel axis."""
    inits = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
    weights = {tuple(inits[n.input[1]].reshape(-1)) for n in proto.graph.node
               if n.op_type == "DequantizeLinear" and inits.get(n.input[0], np.zeros(0)).dtype
               == np.int8}
    sg = conversion.model.subgraphs[0]
    for op in sg.operators:
        if op.op in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
            q = sg.tensors[op.inputs[1]].quantization
            assert tuple(q.scale) in weights, op.op
            if q.scale.size > 1:
                assert q.quantized_dimension == (3 if op.op == "DEPTHWISE_CONV_2D" else 0)


# -- the import half: the pairs as QUANTIZE / DEQUANTIZE ------------------------------------------

def test_the_pairs_are_the_converters_ops():
    assert {"QuantizeLinear", "DequantizeLinear"} <= set(supported_ops())


def test_float_import_keeps_fake_quantization():
    """convert_onnx alone gives the float graph with QUANTIZE / DEQUANTIZE pairs: it computes
    what onnxruntime does (up to QUANTIZE's rounding of halves), and the pairs after MaxPool and
    Reshape that repeat their input's grid are gone."""
    proto = conv_model(True)
    c = convert_onnx(proto)
    assert c.ops_out == {"QUANTIZE": 2, "DEQUANTIZE": 2, "CONV_2D": 1}
    feeds = random_feeds(proto)[0]
    ours = run_edgelite(c.content, to_tflite(feeds, c))
    ref = onnxruntime_run(proto, {"x": feeds[0]})
    np.testing.assert_allclose(dequantized_outputs(c, ours)[0], ref[0], atol=1e-6)


def test_identity_pairs_after_value_moving_ops_go():
    g = Graph(5)
    x = g.qdq(g.input("x", [1, 2, 4, 4]), -1.0, 1.0)
    p = g.node("MaxPool", [x], "pool", kernel_shape=[2, 2], strides=[2, 2])
    same = g.qdq(p, -1.0, 1.0)                    # the same grid: an identity
    other = g.qdq(g.node("Relu", [same], "relu"), 0.0, 1.0)
    c = convert_onnx(g.model([other]))
    assert c.ops_out["QUANTIZE"] == 2 and c.ops_out["DEQUANTIZE"] == 2


def test_constants_quantized_in_the_graph():
    """Float weights behind QuantizeLinear -> DequantizeLinear fold into the same weights."""
    w = np.random.default_rng(0).normal(0, 0.5, (3, 4)).astype(F)
    scale = (np.abs(w).max(1) / 127).astype(F)
    q = quantize_array(w, scale, np.zeros(3, np.int8), 0)
    np.testing.assert_array_equal(
        dequantize_array(q, scale, np.zeros(3, np.int8), 0),
        q.astype(F) * scale[:, None])
    g = Graph(6)
    x = g.qdq(g.input("x", [2, 4]), -1.0, 1.0)
    g.const("w", w.T.copy())
    g.const("ws", scale)
    g.const("wz", np.zeros(3, np.int8))
    g.node("QuantizeLinear", ["w", "ws", "wz"], "wq", axis=1)
    g.node("DequantizeLinear", ["wq", "ws", "wz"], "wdq", axis=1)
    y = g.qdq(g.node("MatMul", [x, "wdq"], "y"), -2.0, 2.0)
    c = convert(g.model([y]))
    assert integer_ops(c) == {"FULLY_CONNECTED": 1}
    sg = c.model.subgraphs[0]
    fc = next(op for op in sg.operators if op.op == "FULLY_CONNECTED")
    np.testing.assert_array_equal(c.model.constant(sg, fc.inputs[1]), q)
    np.testing.assert_array_equal(sg.tensors[fc.inputs[1]].quantization.scale, scale)


def test_int16_pairs_stay_fake_quantization():
    """16-bit QDQ (opset 21) converts, with its pairs as float QUANTIZE / DEQUANTIZE ops around
    float ops: what onnxruntime computes, no integer op."""
    g = Graph(10, TensorProto.INT16)
    x = g.qdq(g.input("x", [1, 4, 9, 9]), -1.0, 1.5)
    w, ws = g.weight("w", g.rng.normal(0, 0.4, (6, 4, 3, 3)), 0)
    y = g.qdq(g.node("Conv", [x, w], "conv", pads=[1, 1, 1, 1]), -4.0, 4.0)
    proto = g.model([y], opset=21)
    c = convert(proto)
    assert integer_ops(c) == {} and "CONV_2D" in float_ops(c)
    feeds = random_feeds(proto)[0]
    ours = run_edgelite(c.content, to_tflite(feeds, c))
    np.testing.assert_array_equal(run_litert(c.content, to_tflite(feeds, c))[0], ours[0])
    ref = onnxruntime_run(proto, {"x": feeds[0]})[0]
    np.testing.assert_allclose(dequantized_outputs(c, ours)[0], ref, atol=4 / 32767 * 1.01)
