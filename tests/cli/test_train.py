"""`edgelite train`: fine-tunes any .tflite from an .npz, with per-epoch loss, steps/s and
accuracy; checkpoints, resume, frozen export and the training model as files; one error line
for what users get wrong."""
from __future__ import annotations

import numpy as np
import pytest

from tests.cli.helpers import invoke
from edgelite.interpreter import Interpreter
from edgelite.interpreter.training import evaluate, training_facts
from edgelite.schema import load


def _invoke(*args):
    return invoke(["train", *map(str, args)])


def _data(models_dir, tmp_path):
    d = np.load(models_dir / "digits.npz")
    train, test = tmp_path / "train.npz", tmp_path / "test.npz"
    np.savez(train, image=d["x_train"].transpose(0, 2, 3, 1), labels=d["y_train"])
    np.savez(test, image=d["x_test"].transpose(0, 2, 3, 1), labels=d["y_test"])
    return train, test, d


def test_train_extends_exports_and_resumes(models_dir, tmp_path):
    train, test, d = _data(models_dir, tmp_path)
    ckpt, out, training = tmp_path / "ckpt.npz", tmp_path / "out.tflite", tmp_path / "t.tflite"
    result = _invoke(models_dir / "digits_cnn.tflite", "--data", train, "--epochs", 2,
                     "--trainable", "last:2", "--learning-rate", "5e-4", "--eval", test,
                     "--checkpoint", ckpt, "--export", out, "--save-training", training)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("training 4 weights (8,906 values): "
                               "sparse_softmax_cross_entropy, adam lr 0.0005; 1437 samples")
    assert lines[1].startswith("epoch 1/2  loss ") and "steps/s  accuracy " in lines[1]
    assert lines[2].startswith("epoch 2/2  loss ")
    frozen = Interpreter(model_path=str(out))
    accuracy = evaluate(frozen, {"image": d["x_test"].transpose(0, 2, 3, 1)}, d["y_test"],
                        signature="serving_default")
    assert accuracy >= 0.95 and f"accuracy {accuracy:.2%}" in lines[2]
    assert training_facts(load(training))["trainable"] == ["MatMul", "Relu_2;add_2", "MatMul_1",
                                                            "add_3"]
    again = _invoke(training, "--data", train, "--epochs", 1, "--checkpoint", ckpt, "--resume")
    assert again.exit_code == 0, again.output
    assert f"resumed from {ckpt}" in again.stdout


def test_train_errors_are_one_line(models_dir, tmp_path):
    train, _, _ = _data(models_dir, tmp_path)
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.zeros((3, 8, 8, 1), np.float32))
    training = tmp_path / "t.tflite"
    assert _invoke(models_dir / "digits_cnn.tflite", "--data", train, "--save-training",
                   training).exit_code == 0
    for args, expect in (
            ((models_dir / "digits_cnn.tflite", "--data", bad),
             "has no labels: an array 'labels' or 'y' of numbers (it has: x)"),
            ((models_dir / "digits_cnn.tflite", "--data", train, "--trainable", "last:0"),
             "last:0"),
            ((training, "--data", train, "--loss", "mean_squared_error"),
             "already a training model")):
        result = _invoke(*args)
        assert result.exit_code == 1, result.output
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and expect in lines[0], lines


@pytest.mark.parametrize("frontend", ["typer", "argparse"])
def test_choices_are_checked_before_anything_runs(frontend, tmp_path):
    """--loss and --optimizer are enums: a value outside them is a usage error (exit 2) that
    lists the choices, under either front-end."""
    result = invoke(["train", tmp_path / "none.tflite", "--data", tmp_path / "none.npz",
                     "--loss", "hinge"], frontend=frontend)
    assert result.exit_code == 2
    assert "sparse_softmax_cross_entropy" in result.stderr and "hinge" in result.stderr
