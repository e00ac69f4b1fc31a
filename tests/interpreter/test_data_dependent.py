"""Data-dependent shapes: ops whose output shape depends on input values (a RESHAPE to a shape
the model computes, WHERE), and the ops downstream of them, prepared while running."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.schema import Model, Operator, OperatorCode, Subgraph, Tensor, default_options, save
from tests.opmodel import assert_close, run_steps

litert = pytest.importorskip("ai_edge_litert.interpreter",
                             reason="LiteRT (ai-edge-litert) is the oracle: "
                                    "pip install -e '.[dev]'")
from edgelite import interpreter as edgelite_interpreter  # noqa: E402


def _op(name, ins, outs, **options):
    return Operator(OperatorCode(name, 0), list(ins), list(outs), default_options(name, **options))


def _model(build) -> bytes:
    model = Model()
    sg = Subgraph(name="main")
    build(model, sg)
    model.subgraphs.append(sg)
    return save(model)


def _reshape_then_add(model, sg):
    """y = reshape(x, shape) + 1, then the mean over the last axis; shape is a model input."""
    x = sg.add_tensor(Tensor("x", (2, 6)))
    shape = sg.add_tensor(Tensor("shape", (3,), "int32"))
    one = sg.add_tensor(Tensor("one", (), buffer=model.add_buffer(np.float32(1))))
    axis = sg.add_tensor(Tensor("axis", (1,), "int32", buffer=model.add_buffer(np.int32([-1]))))
    r = sg.add_tensor(Tensor("r", (1, 1, 1)))
    y = sg.add_tensor(Tensor("y", (1, 1, 1)))
    m = sg.add_tensor(Tensor("m", (1, 1)))
    sg.inputs, sg.outputs = [x, shape], [y, m]
    sg.operators = [_op("RESHAPE", [x, shape], [r]), _op("ADD", [r, one], [y]),
                    _op("MEAN", [y, axis], [m])]


def _where(model, sg):
    c = sg.add_tensor(Tensor("c", (3, 4), "bool"))
    w = sg.add_tensor(Tensor("w", (1, 2), "int64"))
    sg.inputs, sg.outputs = [c], [w]
    sg.operators = [_op("WHERE", [c], [w])]


def test_reshape_to_a_computed_shape_like_litert():
    content = _model(_reshape_then_add)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    feeds = [[x, np.int32([3, 2, 2])], [x, np.int32([1, -1, 4])], [x, np.int32([3, 2, 2])]]
    ours, theirs = run_steps(edgelite_interpreter, content, feeds), \
        run_steps(litert, content, feeds)
    for a, b in zip(ours, theirs):
        assert_close(a, b)
    assert ours[1][0].shape == (1, 3, 4) and ours[1][1].shape == (1, 3)


def test_where_like_litert():
    content = _model(_where)
    rng = np.random.default_rng(0)
    feeds = [[rng.random((3, 4)) > p] for p in (0.5, 0.7, 0.0)]
    assert all(f[0].any() for f in feeds)  # LiteRT cannot return an empty tensor
    ours = run_steps(edgelite_interpreter, content, feeds)
    theirs = run_steps(litert, content, feeds)
    for a, b in zip(ours, theirs):
        assert_close(a, b)
    assert ours[2][0].shape == (12, 2)
