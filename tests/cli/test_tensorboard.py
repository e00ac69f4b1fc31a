"""TensorBoard scalars of on-device training, read back with TensorBoard's own event reader:
`edgelite train --logdir` and the writer the Python training loop takes as its callback."""
from __future__ import annotations

import re

import numpy as np
import pytest

from tests.cli.helpers import invoke

event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator")


def read(logdir) -> dict:
    acc = event_accumulator.EventAccumulator(str(logdir))
    acc.Reload()
    return {tag: [(s.step, s.value) for s in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_train_logdir_scalars(models_dir, tmp_path):
    d = np.load(models_dir / "digits.npz")
    train, test = tmp_path / "train.npz", tmp_path / "test.npz"
    np.savez(train, image=d["x_train"].transpose(0, 2, 3, 1), labels=d["y_train"])
    np.savez(test, image=d["x_test"].transpose(0, 2, 3, 1), labels=d["y_test"])
    logdir = tmp_path / "runs" / "a"
    result = invoke(["train", models_dir / "digits_cnn.tflite", "--data", train, "--epochs", 2,
                     "--batch-size", 256, "--learning-rate", "5e-4", "--eval", test,
                     "--logdir", logdir])
    assert result.exit_code == 0, result.output
    epochs = re.findall(r"^epoch (\d)/2  loss ([\d.]+) .*accuracy ([\d.]+)%$", result.stdout,
                        re.M)
    assert len(epochs) == 2
    scalars = read(logdir)
    steps = -(-1437 // 256)
    assert [s for s, _ in scalars["loss"]] == list(range(1, 2 * steps + 1))
    assert all(np.isfinite(v) and v > 0 for _, v in scalars["loss"])
    assert [s for s, _ in scalars["accuracy"]] == [steps, 2 * steps]
    for (_, loss, accuracy), (_, logged), (_, logged_loss) in zip(
            epochs, scalars["accuracy"], scalars["epoch_loss"]):
        assert logged * 100 == pytest.approx(float(accuracy), abs=0.006)
        assert logged_loss == pytest.approx(float(loss), abs=6e-5)
    assert [v for _, v in scalars["learning_rate"]] == pytest.approx([5e-4, 5e-4])
    assert re.search(r"^wrote .*events\.out\.tfevents\.", result.stdout, re.M)


def test_writer_as_the_training_loops_callback(models_dir, tmp_path):
    from edgelite.cli.tensorboard import SummaryWriter, crc32c
    from edgelite.interpreter import Interpreter
    from edgelite.interpreter.training import fit, make_trainable
    from edgelite.schema import load, save

    assert crc32c(b"123456789") == 0xE3069283        # the CRC-32C check value
    d = np.load(models_dir / "digits.npz")
    it = Interpreter(model_content=save(make_trainable(load(models_dir / "digits_cnn.tflite"))))
    seen = []
    with SummaryWriter(tmp_path / "py") as tb:
        callback = tb.step_callback("train/loss", then=lambda e, s, loss: seen.append(loss))
        fit(it, {"image": d["x_train"][:300].transpose(0, 2, 3, 1)}, d["y_train"][:300],
            epochs=2, batch_size=100, callback=callback)
        tb.add_scalar("val/custom", 0.25, step=callback.global_step())
    scalars = read(tmp_path / "py")
    assert [s for s, _ in scalars["train/loss"]] == list(range(1, 7))
    assert [v for _, v in scalars["train/loss"]] == pytest.approx(seen, rel=1e-6)
    assert scalars["val/custom"] == [(6, 0.25)]
