"""Models quantized by onnxruntime convert to integer .tflite models with their own parameters:
the digits CNN (accuracy and outputs against onnxruntime's, bits against LiteRT's reference
kernels, weights carried over exactly, the command line's --check) and a small convnet through
onnxruntime's quantize_static (int8 and uint8 activations, per tensor and per channel)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("ai_edge_litert", reason="LiteRT is the oracle")

from onnx import numpy_helper  # noqa: E402

from edgelite.converter.errors import ConversionError  # noqa: E402
from tests.oracles import onnxruntime_run  # noqa: E402

from .graphs import run_edgelite, run_litert  # noqa: E402
from .qdq_graphs import (F, convert, dequantized_outputs, float_convnet, float_ops,  # noqa: E402
                         integer_ops, ops_of, output_scale, to_tflite)


# -- the digits CNN quantized by onnxruntime -----------------------------------------------------

@pytest.fixture(scope="module")
def digits(models_dir):
    d = np.load(models_dir / "digits.npz")
    path = models_dir / "digits_cnn_int8_qdq.onnx"
    x = d["x_test"].astype(F)
    ort_out = np.concatenate([onnxruntime_run(str(path), {"image": x[i:i + 1]})[0]
                              for i in range(len(x))])
    return {"path": path, "x": x, "y": d["y_test"], "ort": ort_out,
            "conversion": convert(path)}


def predict(conversion, images, litert=False) -> np.ndarray:
    run = run_litert if litert else run_edgelite
    return np.concatenate([run(conversion.content, to_tflite([x[None]], conversion))[0]
                           for x in images])


def accuracy(outputs, labels) -> float:
    return float(np.mean(np.argmax(outputs, axis=1) == labels))


def test_digits_converts_to_integer_ops(digits):
    c = digits["conversion"]
    assert integer_ops(c) == {"CONV_2D": 2, "FULLY_CONNECTED": 2, "MAX_POOL_2D": 2,
                              "RESHAPE": 1}
    assert float_ops(c) == []                       # no float convolution left
    assert c.ops_out == {"CONV_2D": 2, "FULLY_CONNECTED": 2, "MAX_POOL_2D": 2, "RESHAPE": 1,
                         "QUANTIZE": 1, "DEQUANTIZE": 1}   # at the float input and output
    assert c.transposes == 0
    assert c.quantization.lines()[0] == \
        "quantization (int8): CONV_2D 2, FULLY_CONNECTED 2, MAX_POOL_2D 2, RESHAPE 1"
    assert not any("match no" in n for n in c.quantization.notes)


def test_digits_weights_scales_and_zero_points_are_the_qdq_models(digits):
    proto = onnx.load(str(digits["path"]))
    inits = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
    sg = digits["conversion"].model.subgraphs[0]
    convs = [op for op in sg.operators if op.op in ("CONV_2D", "FULLY_CONNECTED")]
    for op, layer in zip(convs, ("0", "3", "7", "9")):
        w, b = sg.tensors[op.inputs[1]], sg.tensors[op.inputs[2]]
        model = digits["conversion"].model
        qw, qb = model.constant(sg, op.inputs[1]), model.constant(sg, op.inputs[2])
        onnx_w = inits[f"{layer}.weight_quantized"]
        if onnx_w.ndim == 4:
            onnx_w = onnx_w.transpose(0, 2, 3, 1)          # OIHW -> OHWI
        assert qw.dtype == np.int8 and w.quantization.quantized_dimension == 0
        # the first FULLY_CONNECTED's columns are permuted (flatten of NHWC, not NCHW)
        np.testing.assert_array_equal(np.sort(qw.reshape(len(qw), -1), axis=1),
                                      np.sort(onnx_w.reshape(len(onnx_w), -1), axis=1))
        if layer != "7":
            np.testing.assert_array_equal(qw, onnx_w)
        np.testing.assert_array_equal(w.quantization.scale, inits[f"{layer}.weight_scale"])
        np.testing.assert_array_equal(qb, inits[f"{layer}.bias_quantized"])
        np.testing.assert_array_equal(b.quantization.scale,
                                      inits[f"{layer}.bias_quantized_scale"])
    logits = sg.tensors[sg.operators[-1].inputs[0]].quantization
    assert float(logits.scale[0]) == float(inits["logits_scale"])
    assert int(logits.zero_point[0]) == int(inits["logits_zero_point"])


def test_digits_accuracy_bits_and_error_against_onnxruntime(digits):
    c = digits["conversion"]
    ours = predict(c, digits["x"])
    np.testing.assert_array_equal(predict(c, digits["x"], litert=True), ours)  # all 360
    ort_accuracy = accuracy(digits["ort"], digits["y"])
    assert accuracy(ours, digits["y"]) >= ort_accuracy - 0.003
    scale = float(c.model.subgraphs[0].tensors[c.model.subgraphs[0].operators[-1].inputs[0]]
                  .quantization.scale[0])
    error = np.abs(ours - digits["ort"]).max()
    print(f"\ndigits QDQ: accuracy {accuracy(ours, digits['y']):.4f} (onnxruntime "
          f"{ort_accuracy:.4f}); max |edgelite - onnxruntime| {error:.4g} = "
          f"{error / scale:.2f} output LSB; argmax agrees on "
          f"{np.mean(ours.argmax(1) == digits['ort'].argmax(1)):.4f}")
    assert error <= 2 * scale + 1e-6    # onnxruntime's integer kernels round their own way


def test_digits_int8_io(digits):
    c = convert(digits["path"], inference_input_type=np.int8, inference_output_type=np.int8)
    assert c.ops_out == {"CONV_2D": 2, "FULLY_CONNECTED": 2, "MAX_POOL_2D": 2, "RESHAPE": 1}
    sg = c.model.subgraphs[0]
    assert [sg.tensors[t].dtype for t in (*sg.inputs, *sg.outputs)] == ["int8", "int8"]
    assert [sg.tensors[t].name for t in (*sg.inputs, *sg.outputs)] == ["image", "logits"]
    raw = [run_edgelite(c.content, to_tflite([x[None]], c))[0] for x in digits["x"][:40]]
    assert all(r.dtype == np.int8 for r in raw)
    ours = np.concatenate(dequantized_outputs(c, [np.concatenate(raw)]))
    np.testing.assert_allclose(ours, predict(digits["conversion"], digits["x"][:40]), atol=1e-5)


def test_digits_cli_check(digits, tmp_path):
    from tests.cli.helpers import invoke

    out = tmp_path / "out.tflite"
    result = invoke(["convert", str(digits["path"]), "-o", str(out),
                                      "--check"])
    assert result.exit_code == 0, result.output
    assert "quantization (int8): CONV_2D 2, FULLY_CONNECTED 2" in result.output
    assert "QuantizeLinear / DequantizeLinear" in result.output
    assert "identical to LiteRT" in result.output
    assert out.read_bytes() == digits["conversion"].content


def test_settings_that_would_quantize_again_fail(digits):
    with pytest.raises(ConversionError, match="already quantized.*representative_dataset"):
        convert(digits["path"], representative_dataset=lambda: [])
    with pytest.raises(ConversionError, match="inference_input_type=int16"):
        convert(digits["path"], inference_input_type=np.int16)


# -- a small convnet quantized by onnxruntime's quantize_static ----------------------------------

@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("activations", ["QInt8", "QUInt8"])
def test_onnxruntime_quantized_convnet(tmp_path, per_channel, activations):
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)

    rng = np.random.default_rng(9)
    calibration = [rng.uniform(0, 1, (1, 3, 12, 12)).astype(F) for _ in range(16)]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.samples = iter({"x": x} for x in calibration)

        def get_next(self):
            return next(self.samples, None)

    src, dst = tmp_path / "float.onnx", tmp_path / "qdq.onnx"
    onnx.save(float_convnet(), str(src))
    quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=per_channel, activation_type=getattr(QuantType, activations),
                    weight_type=QuantType.QInt8)
    c = convert(dst)
    assert float_ops(c) == [], ops_of(c)
    assert {"CONV_2D": 3, "FULLY_CONNECTED": 1, "ADD": 1} .items() <= integer_ops(c).items()
    assert not any("match no" in n for n in c.quantization.notes), c.quantization.notes
    worst, scale = 0.0, output_scale(onnx.load(str(dst)))
    for x in [rng.uniform(0, 1, (1, 3, 12, 12)).astype(F) for _ in range(8)]:
        feeds = to_tflite([x], c)
        ours = run_edgelite(c.content, feeds)
        np.testing.assert_array_equal(run_litert(c.content, feeds)[0], ours[0])
        ref = onnxruntime_run(str(dst), {"x": x})[0]
        worst = max(worst, float(np.abs(dequantized_outputs(c, ours)[0] - ref).max()))
    print(f"\nonnxruntime-quantized convnet ({activations}, per channel {per_channel}): "
          f"max |edgelite - onnxruntime| {worst:.4g} = {worst / scale:.2f} LSB")
    assert worst <= 3 * scale + 1e-6
