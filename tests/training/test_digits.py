"""Fine-tuning the digits CNN on real data, end to end.

`digits_cnn.onnx` converted, both FULLY_CONNECTED layers re-initialized (torch's default init),
only they trainable (`last:2`), Adam lr 1e-3, batch 32 over `x_train` (1437 images: the 45th batch
of each epoch holds 29), 10 epochs in edgelite. The first 20 losses must match a float64 numpy
reference of the same steps; the same training file must train in LiteRT with the same losses;
the frozen convolutions must stay bit-for-bit; checkpoints must round-trip exactly; the frozen
export must give the trained accuracy in edgelite and LiteRT.
"""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import Interpreter
from edgelite.interpreter.training import (evaluate, export_frozen, make_trainable, predict,
                                           reinitialize, restore_checkpoint, save_checkpoint)
from edgelite.schema import load, save
from tests.training import reference as ref

EPOCHS, BATCH, LR, SEED = 10, 32, 1e-3, 0
REFERENCE_STEPS = 20


def _source(models_dir):
    """The digits CNN converted from ONNX by edgelite's converter (the .tflite twin when onnx is
    not installed)."""
    try:
        from edgelite.converter import TFLiteConverter
        return load(TFLiteConverter.from_onnx(str(models_dir / "digits_cnn.onnx")).convert())
    except ImportError:
        return load(models_dir / "digits_cnn.tflite")


def _layers(model):
    sg = model.subgraphs[0]
    return [op for op in sg.operators if op.opcode.builtin in ("CONV_2D", "FULLY_CONNECTED")]


def _constant(model, t):
    return np.array(model.constant(model.subgraphs[0], t))


def _batches(n, rng):
    order = rng.permutation(n)
    return [order[i:i + BATCH] for i in range(0, n, BATCH)]


class Run:
    """One 10-epoch training run, shared by the tests of this module."""

    def __init__(self, models_dir):
        data = np.load(models_dir / "digits.npz")
        self.x = np.ascontiguousarray(data["x_train"].transpose(0, 2, 3, 1))  # NCHW -> NHWC
        self.y = data["y_train"].astype(np.int32)
        self.x_test = np.ascontiguousarray(data["x_test"].transpose(0, 2, 3, 1))
        self.y_test = data["y_test"]
        self.source = _source(models_dir)
        fcs = [op for op in _layers(self.source) if op.opcode.builtin == "FULLY_CONNECTED"]
        sg = self.source.subgraphs[0]
        reinitialize(self.source, [sg.tensors[op.inputs[1]].name for op in fcs], seed=SEED)
        self.content = save(make_trainable(self.source, trainable="last:2", optimizer="adam",
                                           learning_rate=LR))
        self.it = Interpreter(model_content=self.content)
        self.input = next(iter(self.it.get_signature_runner("infer").get_input_details()))
        step = self.it.get_signature_runner("train")
        save_vars = self.it.get_signature_runner("save")
        rng = np.random.default_rng(SEED)
        self.steps, self.losses, self.epoch_loss, self.accuracy = [], [], [], []
        self.last_batch_changed = []
        for _ in range(EPOCHS):
            batches = _batches(len(self.y), rng)
            epoch = []
            for k, idx in enumerate(batches):
                before = save_vars() if k == len(batches) - 1 else None
                loss = float(step(**{self.input: self.x[idx], "labels": self.y[idx]})["loss"])
                if before is not None:
                    after = save_vars()
                    self.last_batch_changed.append(
                        (len(idx), all(not np.array_equal(before[n], after[n]) for n in before)))
                self.steps.append(idx)
                epoch.append(loss)
            self.losses += epoch
            self.epoch_loss.append(float(np.mean(epoch)))
            self.accuracy.append(evaluate(self.it, {self.input: self.x_test}, self.y_test))


@pytest.fixture(scope="module")
def run(models_dir):
    return Run(models_dir)


def test_fine_tuning_reaches_97_percent(run):
    print("\nepoch  mean loss  test accuracy")
    for e, (loss, acc) in enumerate(zip(run.epoch_loss, run.accuracy), 1):
        print(f"{e:5d}  {loss:9.4f}  {acc:.4f}")
    assert run.accuracy[-1] >= 0.97, run.accuracy
    assert run.epoch_loss[-1] < run.epoch_loss[0] / 5


def test_the_last_smaller_batch_of_each_epoch_trains(run):
    assert run.last_batch_changed == [(len(run.y) % BATCH, True)] * EPOCHS


def test_frozen_convolutions_stay_bit_for_bit(run):
    trained = load(export_frozen(run.it))
    convs = [op for op in _layers(run.source) if op.opcode.builtin == "CONV_2D"]
    after = [op for op in _layers(trained) if op.opcode.builtin == "CONV_2D"]
    assert len(convs) == len(after) == 2
    for a, b in zip(convs, after):
        for k in (1, 2):
            before = _constant(run.source, a.inputs[k])
            assert before.tobytes() == _constant(trained, b.inputs[k]).tobytes()


def _features(source, x):
    """The frozen convolutional part in float64: conv, pool, conv, pool, flatten (NHWC)."""
    convs = [op for op in _layers(source) if op.opcode.builtin == "CONV_2D"]
    h = x.astype(np.float64)
    for op in convs:
        w, b = (_constant(source, op.inputs[k]).astype(np.float64) for k in (1, 2))
        h = ref.conv_2d(h, w, b, same=op.options.padding == 0, code=1)
        h = ref.max_pool_2d(h, (2, 2), (2, 2), same=False)
    return h.reshape(len(x), -1)


def test_first_steps_match_a_float64_reference(run):
    """The same 20 Adam steps (torch's arithmetic) in float64 numpy."""
    fc1, fc2 = [op for op in _layers(run.source) if op.opcode.builtin == "FULLY_CONNECTED"]
    params = [_constant(run.source, op.inputs[k]).astype(np.float64)
              for op in (fc1, fc2) for k in (1, 2)]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    losses = []
    for t, idx in enumerate(run.steps[:REFERENCE_STEPS], 1):
        w1, b1, w2, b2 = params
        f = _features(run.source, run.x[idx])
        h = np.maximum(f @ w1.T + b1, 0)
        z = h @ w2.T + b2
        y = run.y[idx]
        losses.append(ref.sparse_softmax_cross_entropy(z, y))
        dz = ref.softmax(z)
        dz[np.arange(len(y)), y] -= 1
        dz /= len(y)
        dh = (dz @ w2) * (h > 0)
        grads = [dh.T @ f, dh.sum(0), dz.T @ h, dz.sum(0)]
        for k, g in enumerate(grads):
            m[k] = 0.9 * m[k] + 0.1 * g
            v[k] = 0.999 * v[k] + 0.001 * g * g
            denom = np.sqrt(v[k]) / np.sqrt(1 - 0.999 ** t) + 1e-8
            params[k] = params[k] - LR / (1 - 0.9 ** t) * m[k] / denom
    np.testing.assert_allclose(run.losses[:REFERENCE_STEPS], losses, rtol=1e-5)


def test_litert_trains_the_same_file(run, tmp_path):
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    it = LiteRT(model_content=run.content)
    step = it.get_signature_runner("train")
    details = step.get_input_details()
    assert details[run.input]["shape_signature"][0] == -1 == details["labels"]["shape_signature"][0]
    theirs = [float(step(**{run.input: run.x[idx], "labels": run.y[idx]})["loss"])
              for idx in run.steps[:REFERENCE_STEPS]]
    ours = np.array(run.losses[:REFERENCE_STEPS])
    assert np.max(np.abs(np.array(theirs) - ours) / ours) <= 1e-4
    # a checkpoint moves between the runtimes unchanged
    saved = save_checkpoint(it, tmp_path / "litert.npz")
    ours_now = Interpreter(model_content=run.content)
    restore_checkpoint(ours_now, tmp_path / "litert.npz")
    for name, value in ours_now.get_signature_runner("save")().items():
        assert value.tobytes() == saved[name].tobytes(), name


def test_checkpoint_round_trips_exactly(run, tmp_path):
    path = tmp_path / "digits.ckpt.npz"
    saved = save_checkpoint(run.it, path)
    fresh = Interpreter(model_content=run.content)
    restore_checkpoint(fresh, path)
    again = fresh.get_signature_runner("save")()
    assert saved.keys() == again.keys()
    for name in saved:
        assert saved[name].tobytes() == again[name].tobytes(), name
    feed = {run.input: run.x_test[:50]}
    np.testing.assert_array_equal(predict(fresh, feed), predict(run.it, feed))


def test_frozen_export_keeps_the_trained_accuracy(run):
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    frozen = export_frozen(run.it)
    model = load(frozen)
    assert [s.signature_key for s in model.signature_defs] == ["serving_default"]
    assert not any(op.opcode.builtin in ("VAR_HANDLE", "READ_VARIABLE", "CALL_ONCE")
                   for sg in model.subgraphs for op in sg.operators)
    feed = {run.input: run.x_test}
    trained = predict(run.it, feed)
    for it in (Interpreter(model_content=frozen), LiteRT(model_content=frozen)):
        scores = predict(it, feed, signature="serving_default")
        np.testing.assert_allclose(scores, trained, rtol=1e-4, atol=1e-4)
        accuracy = float(np.mean(scores.argmax(-1) == run.y_test))
        assert accuracy == run.accuracy[-1]
