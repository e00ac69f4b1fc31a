"""The gradient builder's walk: fan-out sums, ties in max pools, frozen parts untouched, and one
error that names every op without a rule."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import Interpreter
from edgelite.interpreter.training import GradientError, gradient_model, make_trainable
from edgelite.schema import Model, Operator, OperatorCode, Subgraph, Tensor, default_options, save
from tests.opmodel import run_interpreter
from tests.training.test_gradients import finite_differences


def _graph(ops: list, inputs: list, outputs: list, tensors: list,
           consts: dict | None = None) -> Model:
    """A one-subgraph model: `tensors` [(name, shape)], ops [(op, ins, outs, options)] by name."""
    consts = consts or {}
    model = Model()
    sg = Subgraph(name="main")
    index = {}
    for name, shape in tensors:
        value = consts.get(name)
        buffer = model.add_buffer(value) if value is not None else 0
        dtype = "float32" if value is None else str(value.dtype)
        sig = (-1,) + tuple(shape[1:]) if name in inputs else None
        index[name] = sg.add_tensor(Tensor(name, shape, dtype, buffer=buffer,
                                           shape_signature=sig))
    for op, ins, outs, opts in ops:
        sg.operators.append(Operator(OperatorCode(op, 0), [index[t] for t in ins],
                                     [index[t] for t in outs], default_options(op, **opts)))
    sg.inputs = [index[t] for t in inputs]
    sg.outputs = [index[t] for t in outputs]
    model.subgraphs = [sg]
    return model


def test_fan_out_gradients_are_summed():
    """h = x W^T feeds ADD once and MUL twice: y = h + h*h."""
    rng = np.random.default_rng(0)
    model = _graph([("FULLY_CONNECTED", ["x", "w"], ["h"], {}),
                    ("MUL", ["h", "h"], ["hh"], {}), ("ADD", ["h", "hh"], ["y"], {})],
                   ["x", "w"], ["y"], [("x", (1, 3)), ("w", (4, 3)), ("h", (1, 4)),
                                       ("hh", (1, 4)), ("y", (1, 4))])
    model.subgraphs[0].tensors[1].shape_signature = None  # w is not batched
    it = Interpreter(model_content=save(gradient_model(model, ["x", "w"])))
    x, w, seed = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3), (4, 3), (2, 4)))
    _, gx, gw = run_interpreter(it, [x, w, seed])

    def f(feeds):
        h = feeds[0] @ feeds[1].T
        return float(np.sum((h + h * h) * seed))
    feeds64 = [x.astype(np.float64), w.astype(np.float64)]
    np.testing.assert_allclose(gx, finite_differences(f, feeds64, 0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gw, finite_differences(f, feeds64, 1), rtol=1e-4, atol=1e-5)


def test_max_pool_ties_go_to_the_first_maximum():
    model = _graph([("MAX_POOL_2D", ["x"], ["y"], dict(filter_height=2, filter_width=2,
                                                        stride_h=2, stride_w=2, padding=1))],
                   ["x"], ["y"], [("x", (1, 4, 4, 1)), ("y", (1, 2, 2, 1))])
    it = Interpreter(model_content=save(gradient_model(model, ["x"])))
    x = np.zeros((2, 4, 4, 1), np.float32)  # after a ReLU: whole windows of zeros
    x[1, 1, 1, 0] = 1.0
    _, gx = run_interpreter(it, [x, np.ones((2, 2, 2, 1), np.float32)])
    expect = np.zeros_like(x)
    expect[:, ::2, ::2] = 1.0
    expect[1, 0, 0, 0], expect[1, 1, 1, 0] = 0.0, 1.0
    np.testing.assert_array_equal(gx, expect)


def _digits_like(consts) -> Model:
    """conv -> relu -> reshape -> fc -> (op) -> fc: a small stand-in with named weights."""
    return _graph([("CONV_2D", ["x", "cw", "cb"], ["c"], dict(padding=1, stride_h=1, stride_w=1,
                                                             fused_activation_function=1)),
                   ("RESHAPE", ["c", "shape"], ["f"], {}),
                   ("FULLY_CONNECTED", ["f", "w1", "b1"], ["h"], {}),
                   ("EXP", ["h"], ["e"], {}), ("SQUARE", ["e"], ["s"], {}),
                   ("FULLY_CONNECTED", ["s", "w2", "b2"], ["y"], {})],
                  ["x"], ["y"],
                  [("x", (1, 4, 4, 1)), ("cw", (2, 3, 3, 1)), ("cb", (2,)), ("c", (1, 2, 2, 2)),
                   ("shape", (2,)), ("f", (1, 8)), ("w1", (5, 8)), ("b1", (5,)), ("h", (1, 5)),
                   ("e", (1, 5)), ("s", (1, 5)), ("w2", (3, 5)), ("b2", (3,)), ("y", (1, 3))],
                  consts)


def _consts():
    rng = np.random.default_rng(1)
    return {"cw": rng.standard_normal((2, 3, 3, 1)).astype(np.float32),
            "cb": np.zeros(2, np.float32), "shape": np.array([1, 8], np.int32),
            "w1": rng.standard_normal((5, 8)).astype(np.float32), "b1": np.zeros(5, np.float32),
            "w2": rng.standard_normal((3, 5)).astype(np.float32), "b2": np.zeros(3, np.float32)}


def test_every_op_without_a_rule_is_named_at_once():
    with pytest.raises(GradientError) as e:
        make_trainable(_digits_like(_consts()), trainable="last:2")
    message = str(e.value)
    assert "2 operator(s)" in message and "EXP" in message and "SQUARE" in message
    assert "last:1" in message  # what to do about it


def test_frozen_parts_get_no_gradient_ops():
    model = make_trainable(_digits_like(_consts()), trainable="last:1")
    train = model.subgraphs[model.signature_defs[0].subgraph_index]
    grads = [t.name for t in train.tensors if t.name.startswith("grad/")]
    assert grads and all(n.startswith("grad/y") for n in grads), grads
    # the opened RESHAPE ([1, 8] stated the batch) lets the train step run at any batch
    it = Interpreter(model_content=save(model))
    step = it.get_signature_runner("train")
    for n in (5, 2):
        loss = step(x=np.ones((n, 4, 4, 1), np.float32), labels=np.zeros(n, np.int32))["loss"]
        assert np.isfinite(loss)


def test_errors_name_what_is_available():
    model = _digits_like(_consts())
    with pytest.raises(GradientError, match="losses: sparse_softmax_cross_entropy"):
        make_trainable(model, trainable="last:1", loss="hinge")
    with pytest.raises(GradientError, match="'w2'"):
        make_trainable(model, trainable="nothing_*")
    with pytest.raises(GradientError, match="3 layers with weights"):
        make_trainable(model, trainable="last:4")
    with pytest.raises(GradientError, match="optimizers: sgd, adam"):
        make_trainable(model, trainable="last:1", optimizer="lbfgs")


def test_variable_tensors_stay_variables():
    """Op state (`is_variable` tensors, as LSTM cells keep) is copied as state, not constant."""
    rng = np.random.default_rng(2)
    model = _graph([("ADD", ["x", "state"], ["s"], {}),
                    ("FULLY_CONNECTED", ["s", "w", "b"], ["y"], {})],
                   ["x"], ["y"], [("x", (1, 6)), ("state", (1, 6)), ("s", (1, 6)),
                                  ("w", (3, 6)), ("b", (3,)), ("y", (1, 3))],
                   {"w": rng.standard_normal((3, 6)).astype(np.float32),
                    "b": np.zeros(3, np.float32)})
    model.subgraphs[0].tensors[1].is_variable = True
    trained = make_trainable(model, trainable="last:1")
    for sg in trained.subgraphs[:1] + trained.subgraphs[-3:-2]:  # infer, train
        assert [t.name for t in sg.tensors if t.is_variable] == ["state"]
    content = save(trained)
    feed = dict(x=np.ones((1, 6), np.float32), labels=np.array([1], np.int32))
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    losses = [it.get_signature_runner("train")(**feed)["loss"]
              for it in (Interpreter(model_content=content), LiteRT(model_content=content))]
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-6)
