"""If: a known condition inlines its branch; a runtime one becomes TFLite's IF with a subgraph per
branch. Against onnxruntime, through edgelite and LiteRT."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.converter.onnx_cases import check, model, node

F = np.float32


def branch(name, nodes, out, shape):
    return helper.make_graph(nodes, name, [],
                             [helper.make_tensor_value_info(out, TensorProto.FLOAT, shape)])


def if_model(cond_input: bool, cond_value: bool = True):
    """y = If(c, then: x * 2 + w, else: relu(x) - w) with w an outer constant."""
    then_b = branch("then", [node("Mul", ["x", "two"], ["t0"]), node("Add", ["t0", "w"], ["t1"])],
                    "t1", [2, 3])
    else_b = branch("else", [node("Relu", ["x"], ["e0"]), node("Sub", ["e0", "w"], ["e1"])],
                    "e1", [2, 3])
    nodes = [node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b)]
    inits = {"two": np.array(2, F), "w": np.arange(6, dtype=F).reshape(2, 3)}
    inputs = [("x", [2, 3])]
    if cond_input:
        inputs.append(("c", [], np.bool_))
    else:
        inits["c"] = np.array(cond_value)
    return model(nodes, inputs, ["y"], inits, opset=13)


@pytest.mark.parametrize("cond", [True, False])
def test_if_with_runtime_condition(cond):
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(F)
    conversion = check(if_model(True), {"x": x, "c": np.array(cond)})
    main, then_sg, else_sg = conversion.model.subgraphs
    assert [op.op for op in main.operators] == ["IF"]
    assert sorted(op.op for op in then_sg.operators) == ["ADD", "MUL"]
    assert sorted(op.op for op in else_sg.operators) == ["RELU", "SUB"]


@pytest.mark.parametrize("cond", [True, False])
def test_if_with_known_condition_is_inlined(cond):
    conversion = check(if_model(False, cond))
    assert "IF" not in conversion.ops_out
    assert len(conversion.model.subgraphs) == 1


def test_if_branch_returning_a_constant():
    then_b = branch("then", [node("Constant", [], ["k"], value=numpy_helper.from_array(
        np.ones(3, F)))], "k", [3])
    else_b = branch("else", [node("Neg", ["x"], ["n"])], "n", [3])
    proto = model([node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b)],
                  [("x", [3]), ("c", [], np.bool_)], ["y"], opset=13)
    for cond in (True, False):
        check(proto, {"x": np.array([1, -2, 3], F), "c": np.array(cond)})
