"""Resource variables, CALL_ONCE, IF and WHILE: models built with the IR, run in edgelite and
LiteRT side by side over several invokes."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.schema import Model, Subgraph, Tensor, save
from tests.opmodel import assert_close, run_steps
from tests.opmodel import const_tensor as _const
from tests.opmodel import operator as _op

litert = pytest.importorskip("ai_edge_litert.interpreter",
                             reason="LiteRT (ai-edge-litert) is the oracle: "
                                    "pip install -e '.[dev]'")
from edgelite import interpreter as edgelite_interpreter  # noqa: E402


def _accumulator_model() -> bytes:
    """y = acc + x; acc = y. The variable starts at [1, 2, 3] through a CALL_ONCE initializer."""
    model = Model()
    init = Subgraph(name="init")
    h0 = init.add_tensor(Tensor("h", (), "resource"))
    start = _const(model, init, "start", np.array([1, 2, 3], np.float32))
    init.operators = [_op("VAR_HANDLE", [], [h0], shared_name="acc"),
                      _op("ASSIGN_VARIABLE", [h0, start], [])]
    main = Subgraph(name="main")
    x = main.add_tensor(Tensor("x", (3,)))
    h = main.add_tensor(Tensor("h", (), "resource"))
    acc = main.add_tensor(Tensor("acc", (3,)))
    y = main.add_tensor(Tensor("y", (3,)))
    main.inputs, main.outputs = [x], [y]
    main.operators = [_op("CALL_ONCE", [], [], init_subgraph_index=1),
                      _op("VAR_HANDLE", [], [h], shared_name="acc"),
                      _op("READ_VARIABLE", [h], [acc]),
                      _op("ADD", [acc, x], [y]),
                      _op("ASSIGN_VARIABLE", [h, y], [])]
    model.subgraphs = [main, init]
    return save(model)


def _while_model() -> bytes:
    """Doubles x while i < 5, counting i up from the input."""
    model = Model()
    main = Subgraph(name="main")
    i, x = main.add_tensor(Tensor("i", (), "int32")), main.add_tensor(Tensor("x", (2,)))
    i_out = main.add_tensor(Tensor("i_out", (), "int32"))
    x_out = main.add_tensor(Tensor("x_out", (2,)))
    main.inputs, main.outputs = [i, x], [i_out, x_out]
    main.operators = [_op("WHILE", [i, x], [i_out, x_out], cond_subgraph_index=1,
                          body_subgraph_index=2)]
    cond = Subgraph(name="cond")
    ci, cx = cond.add_tensor(Tensor("i", (), "int32")), cond.add_tensor(Tensor("x", (2,)))
    five = _const(model, cond, "five", np.int32(5))
    c = cond.add_tensor(Tensor("c", (), "bool"))
    cond.inputs, cond.outputs = [ci, cx], [c]
    cond.operators = [_op("LESS", [ci, five], [c])]
    body = Subgraph(name="body")
    bi, bx = body.add_tensor(Tensor("i", (), "int32")), body.add_tensor(Tensor("x", (2,)))
    one = _const(model, body, "one", np.int32(1))
    two = _const(model, body, "two", np.float32(2))
    bi2, bx2 = body.add_tensor(Tensor("i2", (), "int32")), body.add_tensor(Tensor("x2", (2,)))
    body.inputs, body.outputs = [bi, bx], [bi2, bx2]
    body.operators = [_op("ADD", [bi, one], [bi2]), _op("MUL", [bx, two], [bx2])]
    model.subgraphs = [main, cond, body]
    return save(model)


def _if_model() -> bytes:
    """x + 1 if c else x * 3."""
    model = Model()
    main = Subgraph(name="main")
    c, x = main.add_tensor(Tensor("c", (), "bool")), main.add_tensor(Tensor("x", (2,)))
    y = main.add_tensor(Tensor("y", (2,)))
    main.inputs, main.outputs = [c, x], [y]
    main.operators = [_op("IF", [c, x], [y], then_subgraph_index=1, else_subgraph_index=2)]
    branches = []
    for name, op, k in (("then", "ADD", 1.0), ("else", "MUL", 3.0)):
        sg = Subgraph(name=name)
        bx, by = sg.add_tensor(Tensor("x", (2,))), sg.add_tensor(Tensor("y", (2,)))
        kt = _const(model, sg, "k", np.float32(k))
        sg.inputs, sg.outputs = [bx], [by]
        sg.operators = [_op(op, [bx, kt], [by])]
        branches.append(sg)
    model.subgraphs = [main, *branches]
    return save(model)


def test_resource_variable_accumulates_like_litert():
    content = _accumulator_model()
    steps = [[np.array([1, 1, 1], np.float32) * k] for k in range(1, 5)]
    ours = run_steps(edgelite_interpreter, content, steps)
    theirs = run_steps(litert, content, steps)
    for a, b in zip(ours, theirs):
        assert_close(a, b)
    np.testing.assert_array_equal(ours[-1][0], np.array([11, 12, 13], np.float32))
    # reset_all_variables starts over from the initializer.
    ours_it = edgelite_interpreter.Interpreter(model_content=content)
    ours_it.allocate_tensors()
    for (x,) in steps:
        ours_it.set_tensor(ours_it.get_input_details()[0]["index"], x)
        ours_it.invoke()
    ours_it.reset_all_variables()
    ours_it.set_tensor(ours_it.get_input_details()[0]["index"], steps[0][0])
    ours_it.invoke()
    np.testing.assert_array_equal(
        ours_it.get_tensor(ours_it.get_output_details()[0]["index"]), ours[0][0])


def test_while_loop_like_litert():
    content = _while_model()
    steps = [[np.int32(0), np.array([1, -2], np.float32)],
             [np.int32(3), np.array([0.5, 4], np.float32)],
             [np.int32(9), np.array([7, 7], np.float32)]]
    ours = run_steps(edgelite_interpreter, content, steps)
    theirs = run_steps(litert, content, steps)
    for a, b in zip(ours, theirs):
        assert_close(a, b)
    np.testing.assert_array_equal(ours[0][1], np.array([32, -64], np.float32))


@pytest.mark.parametrize("runtime", [edgelite_interpreter, litert], ids=["edgelite", "litert"])
def test_get_tensor_reads_other_subgraphs(runtime):
    """get_tensor(index, subgraph_index): the body's constant 2.0 is tensor 3 of subgraph 2,
    while tensor 3 of the main subgraph is the loop's output; a subgraph that does not exist
    is a ValueError."""
    it = runtime.Interpreter(model_content=_while_model())
    it.allocate_tensors()
    it.set_tensor(0, np.int32(0))
    it.set_tensor(1, np.array([1, 2], np.float32))
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(3), [32, 64])
    np.testing.assert_array_equal(it.get_tensor(3, 0), [32, 64])
    assert float(it.get_tensor(3, 2)) == 2.0
    for bad in (3, -1):
        with pytest.raises(ValueError, match="subgraph index"):
            it.get_tensor(0, bad)
    with pytest.raises(ValueError, match="tensor index"):
        it.get_tensor(9, 2)


def test_if_like_litert():
    content = _if_model()
    steps = [[np.bool_(True), np.array([1, 2], np.float32)],
             [np.bool_(False), np.array([1, 2], np.float32)]]
    ours = run_steps(edgelite_interpreter, content, steps)
    theirs = run_steps(litert, content, steps)
    for a, b in zip(ours, theirs):
        assert_close(a, b)
    np.testing.assert_array_equal(ours[1][0], np.array([3, 6], np.float32))


def _growing_while_model() -> bytes:
    """Concatenates x with itself while i < 3: the loop variable changes shape every step."""
    model = Model()
    main = Subgraph(name="main")
    i, x = main.add_tensor(Tensor("i", (), "int32")), main.add_tensor(Tensor("x", (1, 2)))
    i_out, x_out = main.add_tensor(Tensor("i_out", (), "int32")), \
        main.add_tensor(Tensor("x_out", (1, 2)))
    one_main = _const(model, main, "one", np.float32(1))
    y = main.add_tensor(Tensor("y", (1, 2)))
    main.inputs, main.outputs = [i, x], [i_out, y]
    main.operators = [_op("WHILE", [i, x], [i_out, x_out], cond_subgraph_index=1,
                          body_subgraph_index=2),
                      _op("ADD", [x_out, one_main], [y])]  # downstream of a dynamic shape
    cond = Subgraph(name="cond")
    ci, cx = cond.add_tensor(Tensor("i", (), "int32")), cond.add_tensor(Tensor("x", (1, 2)))
    three = _const(model, cond, "three", np.int32(3))
    c = cond.add_tensor(Tensor("c", (), "bool"))
    cond.inputs, cond.outputs = [ci, cx], [c]
    cond.operators = [_op("LESS", [ci, three], [c])]
    body = Subgraph(name="body")
    bi, bx = body.add_tensor(Tensor("i", (), "int32")), body.add_tensor(Tensor("x", (1, 2)))
    one = _const(model, body, "one", np.int32(1))
    bi2, bx2 = body.add_tensor(Tensor("i2", (), "int32")), body.add_tensor(Tensor("x2", (2, 2)))
    body.inputs, body.outputs = [bi, bx], [bi2, bx2]
    body.operators = [_op("ADD", [bi, one], [bi2]),
                      _op("CONCATENATION", [bx, bx], [bx2], axis=0)]
    model.subgraphs = [main, cond, body]
    return save(model)


def test_while_with_growing_loop_variables_like_litert():
    content = _growing_while_model()
    steps = [[np.int32(0), np.array([[1, 2]], np.float32)],
             [np.int32(2), np.array([[3, 4]], np.float32)],
             [np.int32(5), np.array([[5, 6]], np.float32)]]
    ours = run_steps(edgelite_interpreter, content, steps)
    theirs = run_steps(litert, content, steps)
    for a, b in zip(ours, theirs):
        assert_close(a, b)
    assert ours[0][1].shape == (8, 2) and ours[2][1].shape == (1, 2)
