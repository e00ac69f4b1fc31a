"""Misuse of the Interpreter API raises what LiteRT raises: each case runs on LiteRT and on
edgelite, and edgelite's exception must be an instance of the class LiteRT raised, so that a
script's `except` clauses catch the same errors after changing one import (the messages are
edgelite's own, clearer ones)."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.schema import Model, Operator, OperatorCode, Subgraph, Tensor, default_options, save
from tests.opmodel import In, op_model

from .test_api import _mlp_model

litert = pytest.importorskip("ai_edge_litert.interpreter",
                             reason="LiteRT (ai-edge-litert) is the oracle: pip install "
                                    "-e '.[dev]'")
from edgelite import interpreter as edgelite  # noqa: E402

F = np.float32
X, B, Y = 0, 1, 4                     # _mlp_model's tensors: input x[-1, 4], constant b, output y
MLP = _mlp_model()
GATHER = op_model("GATHER", [In((4, 3)), In((2,), "int32")], options=dict(axis=0))
CUSTOM = op_model("CUSTOM", [In((2, 3))], custom_code="MyFancyOp")


def _unused_tensor_model() -> bytes:
    """a -> RELU -> b, and a tensor 2 that no operator reads or writes."""
    model = Model()
    sg = Subgraph(name="main")
    a, b = sg.add_tensor(Tensor("a", (2,))), sg.add_tensor(Tensor("b", (2,)))
    sg.add_tensor(Tensor("unused", (2,)))
    sg.inputs, sg.outputs = [a], [b]
    sg.operators = [Operator(OperatorCode("RELU", 0), [a], [b], default_options("RELU"))]
    model.subgraphs.append(sg)
    return save(model)


UNUSED = _unused_tensor_model()


def _ready(rt, content: bytes = MLP):
    it = rt.Interpreter(model_content=content)
    it.allocate_tensors()
    return it


def _resized(rt, shape):
    it = _ready(rt)
    it.resize_tensor_input(X, shape)
    return it


def _with_view(rt, then: str, index: int = X):
    """Calls `then` while an array (or a slice of one) from tensor() is alive."""
    it = _ready(rt)
    view = it.tensor(index)()[0]
    if then == "invoke":
        it.invoke()
    elif then == "allocate_tensors":
        it.allocate_tensors()
    else:
        it.resize_tensor_input(X, [2, 4])
    return view


def _gather_out_of_range(rt):
    it = _ready(rt, GATHER)
    it.set_tensor(0, np.ones((4, 3), F))
    it.set_tensor(1, np.array([0, 9], np.int32))
    it.invoke()


# Each case does one wrong thing; the line says what.
CASES = {
    "set_tensor: wrong shape": lambda rt: _ready(rt).set_tensor(X, np.zeros((1, 5), F)),
    "set_tensor: wrong rank": lambda rt: _ready(rt).set_tensor(X, np.zeros(4, F)),
    "set_tensor: wrong dtype": lambda rt: _ready(rt).set_tensor(X, np.zeros((1, 4))),
    "set_tensor: a list (float64)": lambda rt: _ready(rt).set_tensor(X, [[1.0, 2.0, 3.0, 4.0]]),
    "set_tensor: index out of range": lambda rt: _ready(rt).set_tensor(99, np.zeros((1, 4), F)),
    "set_tensor: negative index": lambda rt: _ready(rt).set_tensor(-1, np.zeros((1, 4), F)),
    "set_tensor: float index": lambda rt: _ready(rt).set_tensor(0.0, np.zeros((1, 4), F)),
    "set_tensor: before allocate_tensors":
        lambda rt: rt.Interpreter(model_content=MLP).set_tensor(X, np.zeros((1, 4), F)),
    "get_tensor: index out of range": lambda rt: _ready(rt).get_tensor(99),
    "get_tensor: str index": lambda rt: _ready(rt).get_tensor("x"),
    "get_tensor: subgraph out of range": lambda rt: _ready(rt).get_tensor(X, 5),
    "get_tensor: str subgraph": lambda rt: _ready(rt).get_tensor(X, "main"),
    "get_tensor: before allocate_tensors": lambda rt: rt.Interpreter(model_content=MLP)
        .get_tensor(Y),
    "get_tensor: after resize, before allocate_tensors": lambda rt: _resized(rt, [2, 4])
        .get_tensor(X),
    "get_tensor: a tensor with no data": lambda rt: _ready(rt, UNUSED).get_tensor(2),
    "tensor: index out of range": lambda rt: _ready(rt).tensor(99)(),
    "tensor: before allocate_tensors": lambda rt: rt.Interpreter(model_content=MLP).tensor(X)(),
    "invoke: before allocate_tensors": lambda rt: rt.Interpreter(model_content=MLP).invoke(),
    "invoke: after resize, before allocate_tensors": lambda rt: _resized(rt, [2, 4]).invoke(),
    "invoke: while a tensor() array is held": lambda rt: _with_view(rt, "invoke"),
    "invoke: while an output's tensor() array is held": lambda rt: _with_view(rt, "invoke", Y),
    "invoke: a kernel fails (gather index out of range)": _gather_out_of_range,
    "allocate_tensors: while a tensor() array is held":
        lambda rt: _with_view(rt, "allocate_tensors"),
    "allocate_tensors: shapes that do not broadcast": lambda rt: _resized(rt, [2, 5])
        .allocate_tensors(),
    "allocate_tensors: unregistered custom op": lambda rt: _ready(rt, CUSTOM),
    "resize_tensor_input: while a tensor() array is held":
        lambda rt: _with_view(rt, "resize_tensor_input"),
    "resize_tensor_input: strict, a fixed dimension":
        lambda rt: _ready(rt).resize_tensor_input(X, [1, 5], strict=True),
    "resize_tensor_input: strict, another rank":
        lambda rt: _ready(rt).resize_tensor_input(X, [1, 4, 1], strict=True),
    "resize_tensor_input: index out of range": lambda rt: _ready(rt).resize_tensor_input(99, [2]),
    "resize_tensor_input: float index": lambda rt: _ready(rt).resize_tensor_input(0.0, [2, 4]),
    "resize_tensor_input: negative size": lambda rt: _ready(rt).resize_tensor_input(X, [-2, 4]),
    "resize_tensor_input: 2-D size": lambda rt: _ready(rt).resize_tensor_input(X, [[2, 4]]),
    "resize_tensor_input: size not numbers": lambda rt: _ready(rt).resize_tensor_input(X, "ab"),
    "get_signature_runner: unknown key": lambda rt: _ready(rt).get_signature_runner("nope"),
    "get_signature_runner: int key": lambda rt: _ready(rt).get_signature_runner(5),
    "get_signature_runner: None with no signatures":
        lambda rt: _ready(rt, GATHER).get_signature_runner(),
    "signature runner: unknown input name":
        lambda rt: _ready(rt).get_signature_runner()(z=np.ones((1, 4), F)),
    "signature runner: an input missing": lambda rt: _ready(rt).get_signature_runner()(),
    "signature runner: an extra input":
        lambda rt: _ready(rt).get_signature_runner()(x=np.ones((1, 4), F), z=np.ones(4, F)),
    "signature runner: wrong dtype": lambda rt: _ready(rt).get_signature_runner()(
        x=np.ones((1, 4), np.int32)),
    "signature runner: shapes that do not broadcast": lambda rt: _ready(rt)
        .get_signature_runner()(x=np.ones((1, 5), F)),
    "Interpreter: no model": lambda rt: rt.Interpreter(),
    "Interpreter: both model_path and model_content":
        lambda rt: rt.Interpreter(model_path="m.tflite", model_content=MLP),
    "Interpreter: missing model file":
        lambda rt: rt.Interpreter(model_path="/nonexistent/m.tflite"),
    "Interpreter: a directory as model file": lambda rt: rt.Interpreter(model_path="/"),
    "Interpreter: model_path not a path": lambda rt: rt.Interpreter(model_path=123),
    "Interpreter: corrupt model bytes": lambda rt: rt.Interpreter(model_content=b"garbage" * 10),
    "Interpreter: truncated model bytes":
        lambda rt: rt.Interpreter(model_content=MLP[:len(MLP) // 2]),
    "Interpreter: empty model bytes": lambda rt: rt.Interpreter(model_content=b""),
    "Interpreter: model_content a str": lambda rt: rt.Interpreter(model_content="m.tflite"),
    "Interpreter: num_threads not an int": lambda rt: rt.Interpreter(model_content=MLP,
                                                                     num_threads="2"),
    "Interpreter: num_threads 0": lambda rt: rt.Interpreter(model_content=MLP, num_threads=0),
    "Interpreter: unknown op resolver type":
        lambda rt: rt.Interpreter(model_content=MLP, experimental_op_resolver_type=7),
    "_get_op_details: index out of range": lambda rt: _ready(rt)._get_op_details(99),
    "_get_tensor_details: index out of range": lambda rt: _ready(rt)._get_tensor_details(99, 0),
}


def _raised(case, rt) -> BaseException | None:
    try:
        case(rt)
    except Exception as e:  # noqa: BLE001  the exception is what the test compares
        return e
    return None


@pytest.mark.parametrize("name", list(CASES))
def test_misuse_raises_what_litert_raises(name):
    theirs = _raised(CASES[name], litert)
    ours = _raised(CASES[name], edgelite)
    assert theirs is not None, "LiteRT accepts this: not a misuse case"
    assert ours is not None, f"edgelite accepts it; LiteRT raises {type(theirs).__name__}: {theirs}"
    assert isinstance(ours, type(theirs)), (
        f"LiteRT raises {type(theirs).__name__} ({theirs}); edgelite raises "
        f"{type(ours).__name__} ({ours}), which `except {type(theirs).__name__}` does not catch")


# Where LiteRT crashes or fails inside its own Python wrapper, edgelite raises what LiteRT raises
# for the neighbouring misuse. Run on edgelite only: name -> (LiteRT's bug, edgelite's class).
LITERT_BUGS = {
    "_get_tensor_details: subgraph out of range":
        (lambda rt: _ready(rt)._get_tensor_details(X, 9), "LiteRT segfaults", ValueError),
    "signature runner: a list input":
        (lambda rt: _ready(rt).get_signature_runner()(x=[[1.0, 2.0, 3.0, 4.0]]),
         "LiteRT: AttributeError: 'list' object has no attribute 'shape'", ValueError),
}


@pytest.mark.parametrize("name", list(LITERT_BUGS))
def test_misuse_where_litert_has_a_bug(name):
    case, _bug, expected = LITERT_BUGS[name]
    assert isinstance(_raised(case, edgelite), expected)


@pytest.mark.parametrize("rt", [edgelite, litert], ids=["edgelite", "litert"])
def test_tensor_views_the_documented_way(rt):
    """Holding tensor()'s function (not its array) across invoke, copying, and dropping the
    array before invoke are all fine; the views see the interpreter's memory."""
    it = _ready(rt)
    x, y = it.tensor(X), it.tensor(Y)
    x().fill(1.0)
    it.invoke()
    first = y().copy()
    np.testing.assert_allclose(first, [[3.0, 0.0, 6.0, 2.0]])
    kept_copy = it.get_tensor(Y)
    view = y()
    view_sum = float(view.sum())
    del view
    x()[0, 0] = 3.0
    it.invoke()
    assert float(y().sum()) == view_sum + 4.0
    np.testing.assert_array_equal(kept_copy, first)
    it.resize_tensor_input(X, [2, 4])
    it.allocate_tensors()
    assert x().shape == (2, 4)


def test_held_view_message_counts_the_arrays():
    it = _ready(edgelite)
    views = [it.tensor(X)(), it.tensor(Y)()[0]]
    with pytest.raises(RuntimeError, match=r"2 array\(s\) from tensor\(\)"):
        it.invoke()
    del views
    it.invoke()


def test_invoke_error_is_both_kinds():
    """edgelite's own error classes catch as LiteRT's RuntimeError and as the ValueError edgelite
    raised before."""
    for case in ("allocate_tensors: shapes that do not broadcast",
                 "resize_tensor_input: strict, a fixed dimension"):
        e = _raised(CASES[case], edgelite)
        assert isinstance(e, ValueError) and isinstance(e, RuntimeError), case
