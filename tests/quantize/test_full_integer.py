"""Full-integer quantization on small graphs: the op rules (fixed, same, shared parameters),
float fallback, integer inputs and outputs, bias fitting, 16x8; every result runs in edgelite
and LiteRT's reference kernels with identical bits."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.converter.quantize import quantize, quantize_model
from edgelite.schema import Tensor, load, save

from .graphs import (branchy_model, calibration, content, conv, fallback_model, new_graph,
                     run_edgelite, run_litert)

pytest.importorskip("ai_edge_litert", reason="LiteRT is the oracle")

rng = np.random.default_rng(11)


def tensor(model, name):
    sg = model.subgraphs[0]
    return next(t for t in sg.tensors if t.name == name)


def ops(model) -> list:
    return [op.op for op in model.subgraphs[0].operators]


def assert_same_bits(model, feeds):
    data = save(model)
    ours, theirs = run_edgelite(data, feeds, True), run_litert(data, feeds, True)
    for key, value in theirs.items():
        if key in ours:
            np.testing.assert_array_equal(ours[key], value, err_msg=f"tensor {key}")


def test_branchy_model_rules_and_bits():
    model = branchy_model()
    q = quantize(model, "int8", calibration(model), progress=False)
    m = q.model
    assert set(ops(m)) - {"QUANTIZE", "DEQUANTIZE"} == set(ops(model))
    sg = m.subgraphs[0]
    by_op = {op.op: op for op in sg.operators}
    # Fixed output parameters.
    for op, (scale, zp) in {"SOFTMAX": (1 / 256, -128), "LOGISTIC": (1 / 256, -128),
                            "TANH": (1 / 128, 0)}.items():
        out = sg.tensors[by_op[op].outputs[0]]
        assert out.dtype == "int8"
        assert np.float32(out.quantization.scale[0]) == np.float32(scale)
        assert out.quantization.zero_point[0] == zp
    # MAX_POOL keeps its input's parameters; CONCATENATION's inputs share its output's.
    pool = by_op["MAX_POOL_2D"]
    cat = by_op["CONCATENATION"]
    qp = lambda t: (float(sg.tensors[t].quantization.scale[0]),  # noqa: E731
                    int(sg.tensors[t].quantization.zero_point[0]))
    assert qp(pool.inputs[0]) == qp(pool.outputs[0])
    assert all(qp(t) == qp(cat.outputs[0]) for t in cat.inputs)
    # The ReLU convolution is also read by TANH, so it is requantized for the concatenation;
    # the other convolution feeds only the concatenation and was calibrated onto its range.
    assert q.report.requantized == 1
    # Weights per channel, bias int32 on input x weight scales.
    conv_op = by_op["CONV_2D"]
    w, b = sg.tensors[conv_op.inputs[1]], sg.tensors[conv_op.inputs[2]]
    assert w.dtype == "int8" and w.quantization.scale.size == 4
    assert b.dtype == "int32"
    np.testing.assert_allclose(b.quantization.scale, sg.tensors[conv_op.inputs[0]]
                               .quantization.scale[0] * w.quantization.scale, rtol=1e-6)
    feeds = calibration(model, 1, 1.5)[0]
    assert_same_bits(m, feeds)


def test_quantized_outputs_track_float():
    model = branchy_model()
    m = quantize_model(model, "int8", calibration(model, 64), progress=False)
    feeds = calibration(model, 1, seed=5)[0]
    f = run_edgelite(content(model), feeds)
    q = run_edgelite(content(m), feeds)
    for a, b in zip(f, q):     # SOFTMAX, TANH, ADD
        assert b.dtype == np.float32
        rms_error = np.sqrt(np.mean((b - a) ** 2))
        assert rms_error < 0.05 * np.sqrt(np.mean(a ** 2)), rms_error


def test_op_without_integer_kernel_stays_float(monkeypatch):
    from edgelite.converter.quantize import full_integer

    has_kernel = full_integer.integer_kernel       # EXP is treated as having no int8 kernel
    monkeypatch.setattr(full_integer, "integer_kernel",
                        lambda op, key: op != "EXP" and has_kernel(op, key))
    model = fallback_model()
    q = quantize(model, "int8", calibration(model), progress=False)
    assert [(op, reason) for _, op, reason in q.report.float_ops] == \
        [("EXP", "edgelite has no int8 kernel")]
    names = ops(q.model)
    assert names == ["QUANTIZE", "CONV_2D", "DEQUANTIZE", "EXP", "QUANTIZE", "CONV_2D",
                     "DEQUANTIZE"]
    assert any("kept float: EXP" in line for line in q.report.lines())
    feeds = calibration(model, 1)[0]
    data = save(q.model)
    np.testing.assert_allclose(run_edgelite(data, feeds)[0], run_litert(data, feeds)[0],
                               atol=0.05)


def test_integer_inputs_and_outputs():
    model = branchy_model()
    m = quantize_model(model, "int8", calibration(model), progress=False,
                       inference_input_type=np.int8, inference_output_type="int8")
    sg = m.subgraphs[0]
    assert [sg.tensors[t].dtype for t in sg.inputs] == ["int8"]
    assert [sg.tensors[t].dtype for t in sg.outputs] == ["int8"] * 3
    assert "QUANTIZE" not in ops(m)[:1] and "DEQUANTIZE" not in ops(m)
    assert [sg.tensors[t].name for t in sg.outputs] == \
        [model.subgraphs[0].tensors[t].name for t in model.subgraphs[0].outputs]
    x = rng.integers(-128, 128, sg.tensors[sg.inputs[0]].shape).astype(np.int8)
    assert_same_bits(m, [x])


def test_bias_too_large_for_int32_widens_weight_scales():
    model, b, ins = new_graph({"x": (1, 4)})
    w = b.const(np.full((2, 4), 1e-4, np.float32))
    y = b.op("FULLY_CONNECTED", [ins["x"], w, b.const(np.array([1e6, 0.5], np.float32))])
    b.sg.outputs = [y]
    q = quantize(model, "int8", [[np.full((1, 4), v, np.float32)] for v in (-1e-3, 1e-3)],
                 progress=False)
    assert any("widened" in n for n in q.report.notes)
    sg = q.model.subgraphs[0]
    fc = next(op for op in sg.operators if op.op == "FULLY_CONNECTED")
    bias = load(save(q.model)).constant(load(save(q.model)).subgraphs[0], fc.inputs[2])
    assert abs(int(bias[0])) < 2**31 - 1
    x = [np.full((1, 4), 1e-3, np.float32)]
    np.testing.assert_allclose(run_edgelite(save(q.model), x)[0][0, 0], 1e6, rtol=0.01)


def test_int16x8():
    model, b, ins = new_graph({"x": (1, 6, 6, 3)})
    a = conv(b, ins["x"], 4, act=1)
    s = b.op("ADD", [a, conv(b, ins["x"], 4)])
    y = b.op("FULLY_CONNECTED", [b.op("RESHAPE", [s, b.const(np.array([1, -1], np.int32))]),
                                 b.const(rng.normal(0, 0.1, (3, 144)).astype(np.float32)),
                                 b.const(np.zeros(3, np.float32))])
    b.sg.outputs = [b.op("SOFTMAX", [y], dict(beta=1.0))]
    q = quantize(model, "int16x8", calibration(model), progress=False)
    sg = q.model.subgraphs[0]
    acts = [sg.tensors[op.outputs[0]] for op in sg.operators if op.op != "DEQUANTIZE"]
    assert {t.dtype for t in acts} == {"int16"}
    assert all(t.quantization.zero_point[0] == 0 for t in acts)
    conv_op = next(op for op in sg.operators if op.op == "CONV_2D")
    assert sg.tensors[conv_op.inputs[1]].dtype == "int8"
    assert sg.tensors[conv_op.inputs[2]].dtype == "int64"
    assert_same_bits(q.model, calibration(model, 1)[0])


def test_percentile_calibration_clips_an_outlier():
    model, b, ins = new_graph({"x": (1, 256)})
    b.sg.outputs = [b.op("RELU", [ins["x"]])]
    data = [[rng.normal(0, 1, (1, 256)).astype(np.float32)] for _ in range(16)]
    data[3][0][0, 7] = 100.0
    x = ins["x"]
    assert quantize(model, "int8", data, progress=False).ranges[x][1] == pytest.approx(100.0)
    lo, hi = quantize(model, "int8", data, progress=False, calibration="percentile",
                      percentile=99.9).ranges[x]
    assert -5.0 < lo < -1.0 and 1.0 < hi < 5.0


def test_mse_calibration_clips_long_tails():
    """Laplace values: the extremes of 262144 samples lie beyond the range whose 8-bit
    rounding plus clipping error is smallest (about 10 scale units)."""
    model, b, ins = new_graph({"x": (1, 4096)})
    b.sg.outputs = [b.op("RELU", [ins["x"]])]
    data = [[rng.laplace(0, 1, (1, 4096)).astype(np.float32)] for _ in range(64)]
    x = ins["x"]
    wide = quantize(model, "int8", data, progress=False).ranges[x]
    narrow = quantize(model, "int8", data, progress=False, calibration="mse").ranges[x]
    assert wide[0] < narrow[0] < -8 and 8 < narrow[1] < wide[1]
    assert narrow[1] - narrow[0] < 0.9 * (wide[1] - wide[0])


def test_dataset_forms_and_errors():
    model = fallback_model()
    arrays = np.stack([s[0] for s in calibration(model, 8)])[:, 0]
    by_dict = quantize(model, "int8", {"x": arrays}, progress=False).ranges
    by_callable = quantize(model, "int8", lambda: ([a[None]] for a in arrays),
                           progress=False).ranges
    by_name = quantize(model, "int8", [{"x": a} for a in arrays], progress=False).ranges
    assert by_dict == by_callable == by_name
    with pytest.raises(ValueError, match="no array for input 'x'"):
        quantize(model, "int8", {"y": arrays, "z": arrays}, progress=False)
    with pytest.raises(ValueError, match="shape"):
        quantize(model, "int8", [[np.zeros((3, 3), np.float32)]], progress=False)
    with pytest.raises(ValueError, match="representative dataset"):
        quantize(model, "int8")
    with pytest.raises(ValueError, match="unknown quantization mode"):
        quantize(model, "int4")
    with pytest.raises(ValueError, match="does not fit"):
        quantize(model, "int8", {"x": arrays}, inference_input_type="int16", progress=False)


def test_convolution_without_bias_gets_one():
    """LiteRT's CONV_2D refuses to run without a bias input: a zero int32 bias is added."""
    model, b, ins = new_graph({"x": (1, 5, 5, 3)})
    w = b.const(rng.normal(0, 0.3, (4, 3, 3, 3)).astype(np.float32))
    b.sg.outputs = [b.op("CONV_2D", [ins["x"], w], dict(
        padding=0, stride_w=1, stride_h=1, fused_activation_function=0, dilation_w_factor=1,
        dilation_h_factor=1))]
    m = quantize_model(model, "int8", calibration(model), progress=False)
    conv_op = next(op for op in m.subgraphs[0].operators if op.op == "CONV_2D")
    assert m.subgraphs[0].tensors[conv_op.inputs[2]].dtype == "int32"
    assert_same_bits(m, calibration(model, 1, seed=3)[0])


def test_relu_range_pulled_into_its_producer():
    """An unfused RELU (here behind a RESHAPE) lends its range to the convolution made only for
    it: the negatives it removes saturate to zero, the rest get its finer steps."""
    model, b, ins = new_graph({"x": (1, 6, 6, 3)})
    c = conv(b, ins["x"], 4, r=np.random.default_rng(4))
    flat = b.op("RESHAPE", [c, b.const(np.array([1, -1], np.int32))])
    b.sg.outputs = [b.op("RELU", [flat])]
    m = quantize_model(model, "int8", calibration(model), progress=False)
    sg = m.subgraphs[0]
    conv_out = next(sg.tensors[op.outputs[0]] for op in sg.operators if op.op == "CONV_2D")
    relu_out = next(sg.tensors[op.outputs[0]] for op in sg.operators if op.op == "RELU")
    assert conv_out.quantization == relu_out.quantization
    assert conv_out.quantization.zero_point[0] == -128
    feeds = calibration(model, 1, seed=9)[0]
    assert_same_bits(m, feeds)
    f, q = run_edgelite(content(model), feeds)[0], run_edgelite(save(m), feeds)[0]
    assert np.abs(q - f).max() <= float(relu_out.quantization.scale[0]) * 4


def test_gather_of_a_constant_table():
    model, b, ins = new_graph({})
    ids = b.sg.add_tensor(Tensor("ids", (1, 3), "int32"))
    b.sg.inputs.append(ids)
    table = b.const(rng.normal(0, 1, (10, 4)).astype(np.float32))
    b.sg.outputs = [b.op("GATHER", [table, ids], dict(axis=0))]
    samples = [[np.array([[1, 2, 3]], np.int32)]]
    m = quantize_model(model, "int8", samples, progress=False)
    gather = next(op for op in m.subgraphs[0].operators if op.op == "GATHER")
    assert m.subgraphs[0].tensors[gather.inputs[0]].dtype == "int8"
    assert_same_bits(m, [np.array([[0, 9, 4]], np.int32)])
