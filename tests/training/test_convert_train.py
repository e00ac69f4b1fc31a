"""`tflite-convert --train` and `TFLiteConverter.training`: a converted model that fine-tunes on
the device, the same in edgelite and in LiteRT."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.converter import Optimize, TFLiteConverter, TrainingOptions
from tests.cli.helpers import invoke
from edgelite.schema import load

litert = pytest.importorskip("ai_edge_litert.interpreter",
                             reason="LiteRT (ai-edge-litert) is the oracle: "
                                    "pip install -e '.[dev]'")
from edgelite import interpreter as edgelite_interpreter  # noqa: E402


def _losses(module, content: bytes, images, labels, steps: int) -> list:
    it = module.Interpreter(model_content=content)
    train = it.get_signature_runner("train")
    return [float(train(image=images, labels=labels)["loss"]) for _ in range(steps)]


def test_cli_train_option_makes_a_training_model(models_dir, tmp_path):
    out = tmp_path / "digits_train.tflite"
    result = invoke([
        "convert", str(models_dir / "digits_cnn.onnx"), "-o", str(out), "--train",
        "--trainable", "last:2", "--loss", "sparse_softmax_cross_entropy", "--optimizer", "adam",
        "--learning-rate", "1e-3"])
    assert result.exit_code == 0, result.output
    content = out.read_bytes()
    assert {s.signature_key for s in load(content).signature_defs} == \
        {"train", "infer", "save", "restore"}
    data = np.load(models_dir / "digits.npz")
    images = data["x_train"][:16].transpose(0, 2, 3, 1).astype(np.float32)  # NHWC
    labels = data["y_train"][:16].astype(np.int32)
    ours = _losses(edgelite_interpreter, content, images, labels, 6)
    theirs = _losses(litert, content, images, labels, 6)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4)
    assert ours[-1] < ours[0]  # the same batch, step after step: its loss falls


def test_api_training_options(models_dir):
    converter = TFLiteConverter.from_onnx(str(models_dir / "digits_cnn.onnx"))
    converter.training = TrainingOptions(trainable="last:1", optimizer="sgd",
                                         learning_rate=0.1)
    model = load(converter.convert())
    assert "train" in {s.signature_key for s in model.signature_defs}


def test_training_with_quantization_is_refused(models_dir):
    converter = TFLiteConverter.from_onnx(str(models_dir / "digits_cnn.onnx"))
    converter.training = TrainingOptions()
    converter.optimizations = [Optimize.DEFAULT]
    with pytest.raises(ValueError, match="float model"):
        converter.convert()


def test_cli_bad_loss_is_one_clear_error(models_dir, tmp_path):
    result = invoke(["convert", str(models_dir / "digits_cnn.onnx"), "-o",
                                      str(tmp_path / "x.tflite"), "--train", "--loss", "nope"])
    assert result.exit_code == 2      # a usage error: --loss is a choice
    assert "'nope' is not one of" in result.output and "mean_squared_error" in result.output
