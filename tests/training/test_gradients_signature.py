"""The `gradients` and `apply` signatures (make_trainable(..., gradients=True)): the loss and one
gradient per trainable weight with nothing updated, and the optimizer step given gradients.

Checked on the digits CNN (its two FULLY_CONNECTED layers trainable) against the `train` step
(SGD: w_after = w - lr * g exactly, so g = (w - w_after) / lr), against central finite
differences of the loss, in stock LiteRT (same numbers), and gradients + apply against train
(Adam: the same variables after three steps).
"""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import Interpreter
from edgelite.interpreter.training import make_trainable, training_facts
from edgelite.schema import load, save

LR = 0.5


@pytest.fixture(scope="module")
def digits(models_dir):
    data = np.load(models_dir / "digits.npz")
    x = np.ascontiguousarray(data["x_train"][:48].transpose(0, 2, 3, 1))
    return load(models_dir / "digits_cnn.tflite"), x, data["y_train"][:48].astype(np.int32)


def _content(source, optimizer="sgd", lr=LR):
    return save(make_trainable(source, trainable="last:2", optimizer=optimizer,
                               learning_rate=lr, gradients=True))


def _feeds(it, x, y):
    name = next(iter(it.get_signature_runner("infer").get_input_details()))
    return {name: x, "labels": y}


def test_signatures_and_facts(digits):
    model = load(_content(digits[0]))
    facts = training_facts(model)
    sigs = {s.signature_key: s for s in model.signature_defs}
    assert set(sigs) == {"train", "infer", "save", "restore", "gradients", "apply"}
    grads = [f"grad:{n}" for n in facts["trainable"]]
    assert list(sigs["gradients"].outputs) == ["loss", *grads]
    assert list(sigs["gradients"].inputs) == list(sigs["train"].inputs)
    assert list(sigs["apply"].inputs) == grads and not sigs["apply"].outputs
    assert facts["subgraphs"]["gradients"] == sigs["gradients"].subgraph_index
    assert all(op.opcode.custom_code is None for sg in model.subgraphs for op in sg.operators)
    # without the flag the model is as before
    plain = load(save(make_trainable(digits[0], trainable="last:2")))
    assert {s.signature_key for s in plain.signature_defs} == {"train", "infer", "save",
                                                               "restore"}


def test_gradients_equal_the_sgd_update_and_change_nothing(digits):
    source, x, y = digits
    it = Interpreter(model_content=_content(source))
    feeds = _feeds(it, x, y)
    before = it.get_signature_runner("save")()
    out = it.get_signature_runner("gradients")(**feeds)
    assert all(np.array_equal(v, before[k]) for k, v in it.get_signature_runner("save")().items())
    loss = it.get_signature_runner("train")(**feeds)["loss"]
    after = it.get_signature_runner("save")()
    assert float(out["loss"]) == pytest.approx(float(loss), rel=1e-6)
    for name in before:
        g = out[f"grad:{name}"]
        assert g.shape == before[name].shape and np.abs(g).max() > 0
        step = (before[name] - after[name]) / LR
        np.testing.assert_allclose(g, step, atol=1e-6 * max(1.0, np.abs(g).max()) + 2e-6)


def test_gradients_match_finite_differences(digits):
    source, x, y = digits
    it = Interpreter(model_content=_content(source))
    feeds = _feeds(it, x, y)
    grads = it.get_signature_runner("gradients")
    restore = it.get_signature_runner("restore")
    values = {k: np.array(v) for k, v in it.get_signature_runner("save")().items()}
    g = grads(**feeds)
    rng = np.random.default_rng(0)
    eps, checked = 1e-2, 0
    for name, w in values.items():
        for flat in rng.choice(w.size, size=3, replace=False):
            losses = []
            for sign in (1, -1):
                moved = {k: v.copy() for k, v in values.items()}
                moved[name].flat[flat] += sign * eps
                restore(**moved)
                losses.append(float(grads(**feeds)["loss"]))
            fd = (losses[0] - losses[1]) / (2 * eps)
            want = float(g[f"grad:{name}"].flat[flat])
            assert fd == pytest.approx(want, rel=5e-2, abs=2e-4), (name, flat)
            checked += 1
    assert checked == 3 * len(values)


def test_litert_gives_the_same_gradients(digits):
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    source, x, y = digits
    content = _content(source)
    ours = Interpreter(model_content=content)
    feeds = _feeds(ours, x, y)
    want = ours.get_signature_runner("gradients")(**feeds)
    theirs = LiteRT(model_content=content)
    got = theirs.get_signature_runner("gradients")(**feeds)
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6)
    # and `apply` there updates as train does here
    theirs.get_signature_runner("apply")(**{k: v for k, v in got.items() if k != "loss"})
    ours.get_signature_runner("train")(**feeds)
    a, b = theirs.get_signature_runner("save")(), ours.get_signature_runner("save")()
    for k in b:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-5, atol=1e-6)


def test_gradients_then_apply_equal_train_with_adam(digits):
    source, x, y = digits
    content = _content(source, optimizer="adam", lr=1e-2)
    one, two = Interpreter(model_content=content), Interpreter(model_content=content)
    feeds = _feeds(one, x, y)
    for k in range(3):
        part = {n: v[16 * k:16 * k + 16] for n, v in feeds.items()}
        one.get_signature_runner("train")(**part)
        out = two.get_signature_runner("gradients")(**part)
        two.get_signature_runner("apply")(**{n: v for n, v in out.items() if n != "loss"})
    a, b = one.get_signature_runner("save")(), two.get_signature_runner("save")()
    assert set(a) == set(b) and any(n.endswith("/m") for n in a)
    for n in a:
        np.testing.assert_allclose(b[n], a[n], rtol=1e-6, atol=1e-7)


def test_save_input_is_opt_in_and_runs_in_litert(digits, tmp_path):
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    from edgelite.interpreter.training import export_frozen, save_checkpoint

    source, x, y = digits
    plain = load(save(make_trainable(source, trainable="last:2")))
    (sig,) = [s for s in plain.signature_defs if s.signature_key == "save"]
    assert sig.inputs == {}  # the default: as before (LiteRT's Python runner calls save())
    content = save(make_trainable(source, trainable="last:2", optimizer="sgd",
                                  save_input="unused"))
    ours, theirs = Interpreter(model_content=content), LiteRT(model_content=content)
    feeds = _feeds(ours, x, y)
    ours.get_signature_runner("train")(**feeds)
    theirs.get_signature_runner("train")(**feeds)
    zero = np.zeros(1, np.float32)
    a = ours.get_signature_runner("save")(unused=zero)
    b = theirs.get_signature_runner("save")(unused=zero)
    assert set(a) == set(b) == set(training_facts(load(content))["variables"])
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-5, atol=1e-6)
    values = save_checkpoint(ours, tmp_path / "c.npz")  # feeds the unused input itself
    assert all(np.array_equal(values[k], a[k]) for k in a)
    assert export_frozen(ours)
