"""The training model's API: run-time extension of any .tflite, batch sizes, the optimizers
against a reference, losses from a final SOFTMAX, checkpoints and their atomic writes, and the
package's light dependencies."""
from __future__ import annotations


import numpy as np
import pytest

from edgelite.interpreter import Interpreter
from edgelite.interpreter.training import (SGD, GradientError, export_frozen, extend,
                                           make_trainable, restore_checkpoint, save_checkpoint,
                                           training_facts)
from edgelite.interpreter.training import checkpoint as checkpoint_module
from edgelite.schema import load, save
from tests.blocked import assert_runs_blocked
from tests.training import reference as ref
from tests.training.test_builder import _graph

litert = pytest.importorskip("ai_edge_litert.interpreter")


def _head(rng, final=None) -> bytes:
    """x [B, 6] -> FC(4, RELU) -> FC(3) [-> final op]: a small model to train."""
    ops = [("FULLY_CONNECTED", ["x", "w1", "b1"], ["h"], dict(fused_activation_function=1)),
           ("FULLY_CONNECTED", ["h", "w2", "b2"], ["z"], {})]
    tensors = [("x", (1, 6)), ("w1", (4, 6)), ("b1", (4,)), ("h", (1, 4)), ("w2", (3, 4)),
               ("b2", (3,)), ("z", (1, 3))]
    out = "z"
    if final:
        ops.append((final, ["z"], ["y"], {"beta": 1.0} if final == "SOFTMAX" else {}))
        tensors.append(("y", (1, 3)))
        out = "y"
    consts = {n: (rng.standard_normal(s) * 0.5).astype(np.float32)
              for n, s in tensors if n[0] in "wb"}
    return save(_graph(ops, ["x"], [out], tensors, consts))


def test_extend_fine_tunes_a_mediapipe_head(models_dir):
    """BlazeFace's last classifier conv, float16 weights behind DEQUANTIZE, trained at run time
    on an interpreter loaded from the file."""
    path = models_dir / "mp_face_detection.tflite"
    it = extend(Interpreter(model_path=str(path)), trainable="last:1", learning_rate=1e-2,
                loss="binary_cross_entropy", output="classificators")
    facts = training_facts(it._model)
    assert facts["trainable"] == ["classificator_16/Kernel_dequantize",
                                  "classificator_16/Bias_dequantize"]
    rng = np.random.default_rng(0)
    x = rng.random((2, 128, 128, 3), dtype=np.float32)
    original = Interpreter(model_path=str(path))
    original.allocate_tensors()
    original.set_tensor(original.get_input_details()[0]["index"], x[:1])
    original.invoke()
    before = it.get_signature_runner("infer")(input=x[:1])
    for d in original.get_output_details():  # the variables start from the dequantized weights
        np.testing.assert_array_equal(before[d["name"]], original.get_tensor(d["index"]))
    labels = (rng.random((2, 896, 1)) < 0.1).astype(np.float32)
    step = it.get_signature_runner("train")
    losses = [float(step(input=x, labels=labels)["loss"]) for _ in range(4)]
    assert losses == sorted(losses, reverse=True) and losses[-1] < losses[0]
    frozen = export_frozen(it)
    ours = it.get_signature_runner("infer")(input=x)
    theirs = litert.Interpreter(model_content=frozen).get_signature_runner()(input=x)
    for name in ours:
        np.testing.assert_allclose(ours[name], theirs[name], rtol=1e-4, atol=2e-4)


def test_train_takes_any_batch_size_in_both_runtimes():
    content = save(make_trainable(_head(np.random.default_rng(1)), trainable="all",
                                  optimizer=SGD(0.05)))
    ours = Interpreter(model_content=content).get_signature_runner("train")
    theirs = litert.Interpreter(model_content=content).get_signature_runner("train")
    rng = np.random.default_rng(2)
    for n in (1, 5, 3, 5):
        feed = dict(x=rng.standard_normal((n, 6)).astype(np.float32),
                    labels=rng.integers(0, 3, n).astype(np.int32))
        np.testing.assert_allclose(ours(**feed)["loss"], theirs(**feed)["loss"], rtol=1e-5)


def test_sgd_with_momentum_follows_torch_arithmetic():
    rng = np.random.default_rng(3)
    content = _head(rng)
    model = load(content)
    params = [np.array(model.constant(model.subgraphs[0], t), np.float64)
              for t in (1, 2, 4, 5)]  # w1 b1 w2 b2
    it = Interpreter(model_content=save(make_trainable(
        model, trainable="all", loss="mean_squared_error", optimizer=SGD(0.1, momentum=0.9))))
    step = it.get_signature_runner("train")
    velocity = [np.zeros_like(p) for p in params]
    for _ in range(5):
        x = rng.standard_normal((4, 6))
        t = rng.standard_normal((4, 3))
        loss = step(x=x.astype(np.float32), labels=t.astype(np.float32))["loss"]
        w1, b1, w2, b2 = params
        h = np.maximum(x @ w1.T + b1, 0)
        z = h @ w2.T + b2
        np.testing.assert_allclose(loss, ref.mean_squared_error(z, t), rtol=1e-5)
        dz = 2 * (z - t) / z.size
        dh = (dz @ w2) * (h > 0)
        for k, g in enumerate([dh.T @ x, dh.sum(0), dz.T @ h, dz.sum(0)]):
            velocity[k] = 0.9 * velocity[k] + g
            params[k] = params[k] - 0.1 * velocity[k]
    saved = it.get_signature_runner("save")()
    np.testing.assert_allclose(saved["w2"], params[2], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(saved["w2/momentum"], velocity[2], rtol=1e-4, atol=1e-6)


def test_cross_entropy_starts_from_the_logits_of_a_final_softmax():
    rng = np.random.default_rng(4)
    content = _head(rng, final="SOFTMAX")
    model = make_trainable(content, trainable="last:1")
    assert training_facts(model)["logits"] == "z"
    it = Interpreter(model_content=save(model))
    x = rng.standard_normal((4, 6)).astype(np.float32)
    labels = np.array([0, 2, 1, 2], np.int32)
    z = it.get_signature_runner("infer")(x=x)["y"]  # probabilities: the model's output
    loss = it.get_signature_runner("train")(x=x, labels=labels)["loss"]
    np.testing.assert_allclose(loss, -np.mean(np.log(z[np.arange(4), labels])), rtol=1e-5)


def test_checkpoint_writes_are_atomic(tmp_path, monkeypatch):
    it = Interpreter(model_content=save(make_trainable(_head(np.random.default_rng(5)),
                                                       trainable="all")))
    path = tmp_path / "head.npz"
    first = save_checkpoint(it, path)
    original = path.read_bytes()
    it.get_signature_runner("train")(x=np.ones((2, 6), np.float32),
                                     labels=np.zeros(2, np.int32))

    def crash(f, **values):  # a crash half-way through writing
        f.write(b"PK\x03\x04 partial")
        raise KeyboardInterrupt
    monkeypatch.setattr(checkpoint_module.np, "savez", crash)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(it, path)
    monkeypatch.undo()
    assert path.read_bytes() == original
    assert [p.name for p in tmp_path.iterdir()] == ["head.npz"]  # no temporary left behind
    restore_checkpoint(it, path)
    for name, value in it.get_signature_runner("save")().items():
        assert value.tobytes() == first[name].tobytes()


def test_restore_names_every_problem(tmp_path):
    it = Interpreter(model_content=save(make_trainable(_head(np.random.default_rng(6)),
                                                       trainable="last:1")))
    values = it.get_signature_runner("save")()
    values.pop("b2")
    values["w2"] = np.zeros((2, 2), np.float32)
    values["extra"] = np.zeros(1, np.float32)
    with pytest.raises(GradientError) as e:
        restore_checkpoint(it, values)
    message = str(e.value)
    assert "missing 'b2'" in message and "unknown 'extra'" in message and "'w2'" in message


def test_training_runs_with_numpy_and_flatbuffers_only(tmp_path):
    path = tmp_path / "head.tflite"
    path.write_bytes(_head(np.random.default_rng(7)))
    assert_runs_blocked(f"""
        import numpy as np
        from edgelite.interpreter.training import extend, export_frozen
        it = extend({str(path)!r}, trainable="all")
        loss = it.get_signature_runner("train")(x=np.ones((3, 6), np.float32),
                                                labels=np.zeros(3, np.int32))["loss"]
        assert np.isfinite(loss) and export_frozen(it)
    """)


@pytest.mark.parametrize("name, output, layers", [
    ("mp_face_detection.tflite", "regressors", 8),   # PAD MAX_POOL_2D RELU ADD RESHAPE CONCAT...
    ("mp_hand_landmark.tflite", "Identity", 6),      # residual ADDs, MEAN, depthwise convs
])
def test_deep_fine_tuning_of_real_models_agrees_with_litert(models_dir, name, output, layers):
    """Many layers of a real model trainable: the backward graph crosses most rules, and both
    runtimes take the same steps."""
    model = make_trainable(models_dir / name, trainable=f"last:{layers}", output=output,
                           loss="mean_squared_error", learning_rate=1e-4)
    train = model.subgraphs[training_facts(model)["subgraphs"]["train"]]
    backward_ops = {op.op for op in train.operators
                    if op.outputs and train.tensors[op.outputs[0]].name.startswith("grad/")}
    assert {"CONV_2D", "DEPTHWISE_CONV_2D"} & {op.op for op in train.operators}
    assert len(backward_ops) >= 8, backward_ops
    content = save(model)
    ours = Interpreter(model_content=content).get_signature_runner("train")
    theirs = litert.Interpreter(model_content=content).get_signature_runner("train")
    rng = np.random.default_rng(8)
    feed = {}
    for key, d in ours.get_input_details().items():
        feed[key] = rng.random((2, *d["shape"][1:]), dtype=np.float32)
    for _ in range(3):
        np.testing.assert_allclose(ours(**feed)["loss"], theirs(**feed)["loss"], rtol=1e-5)
