"""Quantization through the ONNX converter: TFLiteConverter's TensorFlow-style settings and
tflite-convert's --quantize flags, end to end on digits_cnn.onnx."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.converter.api import Optimize, OpsSet, TFLiteConverter
from edgelite.converter.errors import ConversionError

from .test_models import accuracy, predict

pytest.importorskip("ai_edge_litert", reason="LiteRT is the oracle")
pytest.importorskip("onnx")


@pytest.fixture(scope="module")
def digits(models_dir):
    d = np.load(models_dir / "digits.npz")
    onnx_path = models_dir / "digits_cnn.onnx"
    float_bytes = TFLiteConverter.from_onnx(onnx_path).convert()
    x_test = d["x_test"].transpose(0, 2, 3, 1).astype(np.float32)   # the .tflite takes NHWC
    return {"onnx": onnx_path, "float": float_bytes, "calib": d["x_calib"], "x": x_test,
            "y": d["y_test"], "float_out": predict(float_bytes, x_test)}


def converter(digits, **settings) -> TFLiteConverter:
    c = TFLiteConverter.from_onnx(digits["onnx"])
    c.optimizations = [Optimize.DEFAULT]
    for name, value in settings.items():
        if name in ("supported_ops", "supported_types"):
            setattr(c.target_spec, name, value)
        else:
            setattr(c, name, value)
    return c


def representative(digits):
    def samples():      # as TensorFlow's: lists of arrays in the ONNX model's layout (NCHW)
        for x in digits["calib"]:
            yield [x[None]]
    return samples


def test_full_int8(digits):
    content = converter(digits, representative_dataset=representative(digits)).convert()
    ours = predict(content, digits["x"])
    assert accuracy(ours, digits["y"]) >= accuracy(digits["float_out"], digits["y"]) - 0.005
    np.testing.assert_array_equal(predict(content, digits["x"], litert=True), ours)
    assert len(content) <= 0.35 * len(digits["float"])


def test_full_int8_with_int8_io_and_strict_ops(digits):
    c = converter(digits, representative_dataset=representative(digits),
                  supported_ops={OpsSet.TFLITE_BUILTINS_INT8},
                  inference_input_type=np.int8, inference_output_type=np.int8)
    content = c.convert()
    assert len(content) <= 0.35 * len(digits["float"])
    assert set(c.last_conversion.ops_out) == {"CONV_2D", "FULLY_CONNECTED", "MAX_POOL_2D",
                                              "RESHAPE"}
    ours = predict(content, digits["x"])
    assert ours.dtype == np.int8
    assert accuracy(ours, digits["y"]) >= accuracy(digits["float_out"], digits["y"]) - 0.005
    np.testing.assert_array_equal(predict(content, digits["x"], litert=True), ours)


def test_float16_and_dynamic(digits):
    content = converter(digits, supported_types={np.float16}).convert()
    assert len(content) <= 0.55 * len(digits["float"])
    np.testing.assert_array_equal(predict(content, digits["x"]).argmax(axis=1),
                                  digits["float_out"].argmax(axis=1))
    c = converter(digits)
    content = c.convert()
    assert c.last_conversion.quantization.mode == "dynamic range"
    ours = predict(content, digits["x"])
    assert accuracy(ours, digits["y"]) >= accuracy(digits["float_out"], digits["y"]) - 0.005
    np.testing.assert_allclose(predict(content, digits["x"], litert=True), ours, rtol=1e-5,
                               atol=1e-5)
    # edgelite's own setting: int4 weights for the fully-connected and convolution layers.
    c = converter(digits, supported_types={"int4"})
    content = c.convert()
    assert c.last_conversion.quantization.mode == "dynamic range, int4 weights"
    assert len(content) < 0.3 * len(digits["float"])
    ours = predict(content, digits["x"])
    assert accuracy(ours, digits["y"]) >= accuracy(digits["float_out"], digits["y"]) - 0.02


def test_int16x8(digits):
    c = converter(digits, representative_dataset={"image": digits["calib"]},
                  supported_ops={OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8})
    content = c.convert()
    assert c.last_conversion.quantization.mode == "int16x8"
    ours = predict(content, digits["x"])
    np.testing.assert_array_equal(predict(content, digits["x"], litert=True), ours)
    assert accuracy(ours, digits["y"]) >= accuracy(digits["float_out"], digits["y"]) - 0.005


@pytest.mark.parametrize("settings, message", [
    (dict(optimizations=[], representative_dataset=lambda: []),
     "need optimizations=\\[Optimize.DEFAULT\\]"),
    (dict(supported_ops={OpsSet.TFLITE_BUILTINS_INT8}), "needs a representative_dataset"),
    (dict(inference_input_type=np.int8), "does not fit dynamic"),
    (dict(representative_dataset=lambda: [], inference_output_type=np.int16),
     "does not fit int8"),
    (dict(supported_ops={OpsSet.SELECT_TF_OPS}), "SELECT_TF_OPS"),
])
def test_inconsistent_settings(digits, settings, message):
    with pytest.raises(ConversionError, match=message):
        converter(digits, **settings).convert()


def test_cli(digits, tmp_path):
    from tests.cli.helpers import invoke

    calib = tmp_path / "calib.npz"
    np.savez(calib, image=digits["calib"])
    out = tmp_path / "digits_int8.tflite"
    result = invoke(["convert", str(digits["onnx"]), "-o", str(out),
                                      "--quantize", "int8", "--calibration-data", str(calib),
                                      "--int8-io", "--check"])
    assert result.exit_code == 0, result.output
    assert "quantization (int8): CONV_2D 2, FULLY_CONNECTED 2" in result.output
    assert "input    image: int8 [1, 8, 8, 1]" in result.output
    assert "identical to LiteRT" in result.output
    assert predict(out.read_bytes(), digits["x"][:5]).dtype == np.int8
    result = invoke(["convert", str(digits["onnx"]), "-o", str(out),
                                      "--quantize", "int8", "--calibration-data", str(calib),
                                      "--calibration", "percentile"])
    assert result.exit_code == 0 and "(percentile)" in result.output, result.output
    for args, message in ((["--quantize", "int8"], "needs --calibration-data"),
                          (["--quantize", "dynamic", "--int8-io"], "--int8-io needs")):
        result = invoke(["convert", str(digits["onnx"]), "-o", str(out), *args])
        assert result.exit_code == 1 and message in result.output, result.output
    for args, choices in ((["--calibration", "best"], "'minmax', 'percentile', 'mse'"),
                          (["--quantize", "int4"], "'dynamic', 'dynamic-int4', 'int8'")):
        result = invoke(["convert", str(digits["onnx"]), "-o", str(out), *args])
        assert result.exit_code == 2 and choices in result.output, result.output   # usage


def test_calibration_data_in_either_layout(digits, tmp_path):
    """--calibration-data in the .tflite's layout (NHWC) is transposed, said so, and quantizes
    exactly as the same samples in ONNX's layout (NCHW)."""
    from tests.cli.helpers import invoke

    files = []
    nhwc = digits["calib"].transpose(0, 2, 3, 1)
    for layout, samples in (("nchw", digits["calib"]), ("nhwc", nhwc)):
        np.savez(tmp_path / f"{layout}.npz", image=samples)
        out = tmp_path / f"{layout}.tflite"
        result = invoke(["convert", digits["onnx"], "-o", out, "--quantize", "int8",
                         "--calibration-data", tmp_path / f"{layout}.npz"])
        assert result.exit_code == 0, result.output
        moved = "calibration input 'image' (the .tflite's layout, transposed to ONNX layout)"
        assert (moved in result.stdout) == (layout == "nhwc"), result.stdout
        files.append(out.read_bytes())
    assert files[0] == files[1]
