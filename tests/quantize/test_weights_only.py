"""Dynamic-range and float16 quantization on small graphs, and `edgelite compare`."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.cli.helpers import invoke
from edgelite.converter.quantize import quantize
from edgelite.schema import save

from .graphs import calibration, content, new_graph, run_edgelite, run_litert

pytest.importorskip("ai_edge_litert", reason="LiteRT is the oracle")


def hybrid_graph(conv_bias: bool = False):
    """CONV_2D (without a bias: LiteRT needs one, the quantizer adds it), DEPTHWISE_CONV_2D,
    FULLY_CONNECTED."""
    rng = np.random.default_rng(3)
    model, b, ins = new_graph({"x": (1, 8, 8, 4)})
    w = b.const(rng.normal(0, 0.3, (8, 3, 3, 4)).astype(np.float32))
    bias = [b.const(rng.normal(0, 0.1, 8).astype(np.float32))] if conv_bias else []
    c = b.op("CONV_2D", [ins["x"], w, *bias], dict(padding=0, stride_w=1, stride_h=1,
                                             fused_activation_function=1,
                                             dilation_w_factor=1, dilation_h_factor=1))
    dw = b.const(rng.normal(0, 0.3, (1, 3, 3, 8)).astype(np.float32))
    d = b.op("DEPTHWISE_CONV_2D", [c, dw, b.const(np.zeros(8, np.float32))],
             dict(padding=0, stride_w=2, stride_h=2, depth_multiplier=1,
                  fused_activation_function=0, dilation_w_factor=1, dilation_h_factor=1))
    r = b.op("RESHAPE", [d, b.const(np.array([1, -1], np.int32))])
    fc = b.const(rng.normal(0, 0.1, (6, 128)).astype(np.float32))
    y = b.op("FULLY_CONNECTED", [r, fc, b.const(np.zeros(6, np.float32))])
    b.sg.outputs = [y]
    return model


def test_dynamic_range_hybrid_ops():
    model = hybrid_graph()
    q = quantize(model, "dynamic", min_weight_elements=0)
    sg = q.model.subgraphs[0]
    kinds = {op.op: [sg.tensors[t].dtype for t in op.inputs] for op in sg.operators}
    assert kinds["CONV_2D"] == ["float32", "int8", "float32"]       # a zero bias added
    assert kinds["DEPTHWISE_CONV_2D"][1] == "int8"
    assert kinds["FULLY_CONNECTED"][1] == "int8"
    conv = next(op for op in sg.operators if op.op == "CONV_2D")
    assert sg.tensors[conv.inputs[1]].quantization.scale.size == 8     # per channel
    fc = next(op for op in sg.operators if op.op == "FULLY_CONNECTED")
    assert fc.options.asymmetric_quantize_inputs
    feeds = calibration(model, 1, seed=1)[0]
    data = save(q.model)
    ours, theirs = run_edgelite(data, feeds)[0], run_litert(data, feeds)[0]
    np.testing.assert_array_equal(ours, theirs)
    reference = run_edgelite(content(model), feeds)[0]
    assert np.abs(ours - reference).max() < 0.05 * np.abs(reference).max()


def test_dynamic_range_skips_small_weights():
    q = quantize(hybrid_graph(), "dynamic")
    assert [op for _, op, _ in q.report.float_ops] == ["CONV_2D", "DEPTHWISE_CONV_2D",
                                                       "FULLY_CONNECTED"]
    assert q.report.quantized_ops == {}
    assert "fewer than 1024" in q.report.lines()[1]


def test_float16_weights():
    model = hybrid_graph(conv_bias=True)
    sg0 = model.subgraphs[0]
    big = next(op for op in sg0.operators if op.op == "DEPTHWISE_CONV_2D").inputs[2]
    model.buffers[sg0.tensors[big].buffer].data = \
        np.full(8, 1e6, np.float32).view(np.uint8)          # outside float16's range
    q = quantize(model, "float16")
    sg = q.model.subgraphs[0]
    halves = [t for t in sg.tensors if t.dtype == "float16"]
    assert len(halves) == 5 and q.report.quantized_ops == {"DEQUANTIZE": 5}
    assert any("outside float16" in n for n in q.report.notes)
    feeds = calibration(model, 1, seed=1)[0]
    data = save(q.model)
    ours, reference = run_edgelite(data, feeds)[0], run_edgelite(content(model), feeds)[0]
    np.testing.assert_allclose(ours, reference, atol=2e-3 * np.abs(reference).max())
    np.testing.assert_allclose(ours, run_litert(data, feeds)[0], rtol=1e-5,
                               atol=1e-5 * np.abs(reference).max())


def test_compare_command(tmp_path, models_dir):
    float_path = models_dir / "digits_cnn.tflite"
    quant_path = tmp_path / "digits_int8.tflite"
    from edgelite.schema import load
    d = np.load(models_dir / "digits.npz")
    calib = d["x_calib"].transpose(0, 2, 3, 1)
    quant_path.write_bytes(save(quantize(load(float_path), "int8",
                                         [[x[None]] for x in calib], progress=False).model))
    result = invoke(["compare", str(float_path), str(quant_path), "--data",
                                      str(models_dir / "digits.npz"), "--key", "x_test",
                                      "--samples", "16"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "7 shared op outputs, 16 samples" in lines[0]
    assert "(NCHW, transposed to NHWC)" in lines[1]
    assert sum("CONV_2D" in ln for ln in lines) == 2
    result = invoke(["compare", str(float_path), str(quant_path), "--json",
                                      "--worst", "2", "--data", str(models_dir / "digits.npz"),
                                      "--key", "x_test"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["layers"]
    assert len(rows) == 2 and all(r["snr_db"] > 20 and r["cosine"] > 0.99 for r in rows)
    result = invoke(["compare", str(float_path), str(quant_path), "--data",
                                      str(models_dir / "digits.npz")])
    assert result.exit_code == 1 and "--key" in result.output


@pytest.mark.parametrize("kwargs", [
    {}, {"peephole": True}, {"projection": True, "n_out": 5}, {"time_major": True},
    {"cell_clip": 0.3}, {"peephole": True, "projection": True, "n_out": 3},
], ids=lambda k: ",".join(k) or "plain")
@pytest.mark.parametrize("asymmetric", [True, False])
def test_dynamic_range_lstm_matches_litert(kwargs, asymmetric):
    """Hybrid UNIDIRECTIONAL_SEQUENCE_LSTM: per-tensor int8 weights, inputs and the recurrent
    state quantized per step; three invokes (the state carries over) against LiteRT."""
    from ai_edge_litert import interpreter as litert

    from edgelite import interpreter as edgelite_interpreter
    from edgelite.schema import load
    from tests.interpreter.test_lstm import _lstm_model, _run

    settings = dict(n_in=20, n_cell=16, n_out=16)
    settings.update(kwargs)
    float_model = _lstm_model(**settings)
    q = quantize(load(float_model), "dynamic", min_weight_elements=0)
    assert q.report.quantized_ops == {"UNIDIRECTIONAL_SEQUENCE_LSTM": 1}
    op = q.model.subgraphs[0].operators[0]
    op.options = op.options.replace(asymmetric_quantize_inputs=asymmetric)
    data = save(q.model)
    rng = np.random.default_rng(1)
    shape = (3, 2, 20) if kwargs.get("time_major") else (2, 3, 20)
    xs = [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]
    ours, theirs = _run(edgelite_interpreter, data, xs), _run(litert, data, xs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    reference = _run(edgelite_interpreter, float_model, xs)
    assert max(float(np.abs(a - b).max()) for a, b in zip(ours, reference)) < 0.1


def test_dynamic_range_leaves_cifg_lstm_float():
    from edgelite.schema import load
    from tests.interpreter.test_lstm import _lstm_model

    q = quantize(load(_lstm_model(cifg=True, n_in=20, n_cell=16, n_out=16)), "dynamic",
                 min_weight_elements=0)
    assert q.report.quantized_ops == {}
    assert "CIFG" in q.report.float_ops[0][2]
