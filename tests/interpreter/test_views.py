"""Tensors the plan makes views (interpreter/views.py): a slice of its input, the inputs of a
CONCATENATION parts of its output. Models built with the IR run in edgelite and LiteRT side by
side over several invokes (streaming state in a resource variable), and the ops that became
views run no step."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite import interpreter as edgelite_interpreter
from edgelite.interpreter import Interpreter
from edgelite.schema import Model, Subgraph, Tensor, save
from tests.opmodel import assert_close, run_steps
from tests.opmodel import const_tensor as _const
from tests.opmodel import operator as _op

litert = pytest.importorskip("ai_edge_litert.interpreter",
                             reason="LiteRT (ai-edge-litert) is the oracle: "
                                    "pip install -e '.[dev]'")


def _ring_model() -> bytes:
    """A streaming ring buffer as micro-wake-word's: c = concat(state, x + 1) along time,
    state = c[:, 1:] (STRIDED_SLICE), out = 2 * c[:, :2] (SLICE)."""
    model = Model()
    init = Subgraph(name="init")
    h0 = init.add_tensor(Tensor("h", (), "resource"))
    start = _const(model, init, "start", np.arange(12, dtype=np.float32).reshape(1, 3, 4))
    init.operators = [_op("VAR_HANDLE", [], [h0], shared_name="ring"),
                      _op("ASSIGN_VARIABLE", [h0, start], [])]
    main = Subgraph(name="main")
    x = main.add_tensor(Tensor("x", (1, 1, 4)))
    h = main.add_tensor(Tensor("h", (), "resource"))
    state = main.add_tensor(Tensor("state", (1, 3, 4)))
    one = _const(model, main, "one", np.float32(1))
    two = _const(model, main, "two", np.float32(2))
    new = main.add_tensor(Tensor("new", (1, 1, 4)))
    c = main.add_tensor(Tensor("c", (1, 4, 4)))
    begin = _const(model, main, "begin", np.array([0, 1, 0], np.int32))
    end = _const(model, main, "end", np.array([1, 4, 4], np.int32))
    strides = _const(model, main, "strides", np.array([1, 1, 1], np.int32))
    tail = main.add_tensor(Tensor("tail", (1, 3, 4)))
    s_begin = _const(model, main, "s_begin", np.array([0, 0, 0], np.int32))
    s_size = _const(model, main, "s_size", np.array([1, 2, 4], np.int32))
    head = main.add_tensor(Tensor("head", (1, 2, 4)))
    out = main.add_tensor(Tensor("out", (1, 2, 4)))
    main.inputs, main.outputs = [x], [out]
    main.operators = [
        _op("CALL_ONCE", [], [], init_subgraph_index=1),
        _op("VAR_HANDLE", [], [h], shared_name="ring"),
        _op("READ_VARIABLE", [h], [state]),
        _op("ADD", [x, one], [new]),
        _op("CONCATENATION", [state, new], [c], axis=1),
        _op("STRIDED_SLICE", [c, begin, end, strides], [tail]),
        _op("ASSIGN_VARIABLE", [h, tail], []),
        _op("SLICE", [c, s_begin, s_size], [head]),
        _op("MUL", [head, two], [out])]
    model.subgraphs = [main, init]
    return save(model)


def _channel_concat_model() -> bytes:
    """concat(x + 1, x * 2) along the last axis of [1, 3, 2] tensors: its parts are not
    contiguous, so it stays a copy."""
    model = Model()
    main = Subgraph(name="main")
    x = main.add_tensor(Tensor("x", (1, 3, 2)))
    one = _const(model, main, "one", np.float32(1))
    two = _const(model, main, "two", np.float32(2))
    a = main.add_tensor(Tensor("a", (1, 3, 2)))
    b = main.add_tensor(Tensor("b", (1, 3, 2)))
    c = main.add_tensor(Tensor("c", (1, 3, 4)))
    out = main.add_tensor(Tensor("out", (1, 3, 4)))
    main.inputs, main.outputs = [x], [out]
    main.operators = [_op("ADD", [x, one], [a]), _op("MUL", [x, two], [b]),
                      _op("CONCATENATION", [a, b], [c], axis=2),
                      _op("MUL", [c, two], [out])]
    model.subgraphs = [main]
    return save(model)


def _view_ops(content: bytes, **kwargs) -> list:
    """The operators of subgraph 0 that run no step (views)."""
    it = Interpreter(model_content=content, **kwargs)
    it.allocate_tensors()
    plan = it._runtime.subgraph(0)
    return [plan.sg.operators[oi].opcode.name for oi, (run, _) in zip(plan.step_ops, plan.steps)
            if run.__name__ == "_view_step"]


def test_ring_buffer_runs_as_views_and_matches_litert():
    content = _ring_model()
    assert sorted(_view_ops(content)) == ["CONCATENATION", "SLICE", "STRIDED_SLICE"]
    assert _view_ops(content, experimental_preserve_all_tensors=True) == []
    rng = np.random.default_rng(0)
    feeds = [[rng.standard_normal((1, 1, 4)).astype(np.float32)] for _ in range(6)]
    ours = run_steps(edgelite_interpreter, content, feeds)
    theirs = run_steps(litert, content, feeds)
    for step, (a, b) in enumerate(zip(ours, theirs)):
        assert_close(a, b)
        if step >= 3:   # the ring holds frames of this run only: 2 * (x + 1) of 3 and 2 ago
            np.testing.assert_allclose(a[0][0], 2 * (np.concatenate(
                [feeds[step - 3][0], feeds[step - 2][0]], axis=1)[0] + 1), rtol=1e-6)


def test_noncontiguous_concat_parts_stay_a_copy():
    content = _channel_concat_model()
    assert _view_ops(content) == []
    x = np.arange(6, dtype=np.float32).reshape(1, 3, 2)
    ours = run_steps(edgelite_interpreter, content, [[x]])
    expected = 2 * np.concatenate([x + 1, x * 2], axis=2)
    np.testing.assert_array_equal(ours[0][0], expected)


def _input_concat_model() -> bytes:
    """out = 2 * concat(x, x + 1) along axis 1: x, the subgraph's input, cannot be a view of
    the concatenation; x + 1 can."""
    model = Model()
    main = Subgraph(name="main")
    x = main.add_tensor(Tensor("x", (1, 1, 4)))
    one = _const(model, main, "one", np.float32(1))
    two = _const(model, main, "two", np.float32(2))
    y = main.add_tensor(Tensor("y", (1, 1, 4)))
    c = main.add_tensor(Tensor("c", (1, 2, 4)))
    out = main.add_tensor(Tensor("out", (1, 2, 4)))
    main.inputs, main.outputs = [x], [out]
    main.operators = [_op("ADD", [x, one], [y]), _op("CONCATENATION", [x, y], [c], axis=1),
                      _op("MUL", [c, two], [out])]
    model.subgraphs = [main]
    return save(model)


def _kernels(content: bytes) -> list:
    it = Interpreter(model_content=content)
    it.allocate_tensors()
    plan = it._runtime.subgraph(0)
    return [(plan.sg.operators[oi].opcode.name, run.__name__)
            for oi, (run, _) in zip(plan.step_ops, plan.steps)]


@pytest.mark.parametrize("make", [_input_concat_model, _channel_concat_model])
def test_concat_copies_only_what_is_no_view(make):
    """The CONCATENATION step left copies the inputs that are no views of its output (bound
    copies); its result is LiteRT's."""
    content = make()
    assert ("CONCATENATION", "concatenation_parts") in _kernels(content)
    rng = np.random.default_rng(1)
    shape = (1, 1, 4) if make is _input_concat_model else (1, 3, 2)
    feeds = [[rng.standard_normal(shape).astype(np.float32)] for _ in range(3)]
    for a, b in zip(run_steps(edgelite_interpreter, content, feeds),
                    run_steps(litert, content, feeds)):
        assert_close(a, b)


def _split_model(op: str) -> bytes:
    """out = a * 2 + b for [a, b] = SPLIT/SPLIT_V/UNPACK of x + 1 along axis 1 of [1, 2, 3]:
    both pieces are contiguous views."""
    model = Model()
    main = Subgraph(name="main")
    x = main.add_tensor(Tensor("x", (1, 2, 3)))
    one = _const(model, main, "one", np.float32(1))
    two = _const(model, main, "two", np.float32(2))
    y = main.add_tensor(Tensor("y", (1, 2, 3)))
    piece = (1, 3) if op == "UNPACK" else (1, 1, 3)
    a, b = (main.add_tensor(Tensor(n, piece)) for n in ("a", "b"))
    a2 = main.add_tensor(Tensor("a2", piece))
    out = main.add_tensor(Tensor("out", piece))
    if op == "SPLIT":
        axis = _const(model, main, "axis", np.array([1], np.int32))
        split = _op("SPLIT", [axis, y], [a, b], num_splits=2)
    elif op == "SPLIT_V":
        sizes = _const(model, main, "sizes", np.array([1, -1], np.int32))
        axis = _const(model, main, "axis", np.array([1], np.int32))
        split = _op("SPLIT_V", [y, sizes, axis], [a, b], num_splits=2)
    else:
        split = _op("UNPACK", [y], [a, b], num=2, axis=1)
    main.inputs, main.outputs = [x], [out]
    main.operators = [_op("ADD", [x, one], [y]), split, _op("MUL", [a, two], [a2]),
                      _op("ADD", [a2, b], [out])]
    model.subgraphs = [main]
    return save(model)


@pytest.mark.parametrize("op", ["SPLIT", "SPLIT_V", "UNPACK"])
def test_split_pieces_are_views(op):
    content = _split_model(op)
    assert _view_ops(content) == [op]
    rng = np.random.default_rng(2)
    feeds = [[rng.standard_normal((1, 2, 3)).astype(np.float32)] for _ in range(2)]
    for (a,), (b,), (x,) in zip(run_steps(edgelite_interpreter, content, feeds),
                                run_steps(litert, content, feeds), feeds):
        assert_close([a], [b])
        np.testing.assert_allclose(a.reshape(-1), (2 * (x[0, 0] + 1) + x[0, 1] + 1), rtol=1e-6)
