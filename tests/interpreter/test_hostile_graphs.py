"""Graphs only a corrupt or hostile file has, found by the fuzz test: each is a named error or
runs, never a bare ValueError from deep inside."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import Interpreter, KernelError
from edgelite.schema import Model, Operator, OperatorCode, Subgraph, Tensor, default_options, save


def _op(name, ins, outs):
    return Operator(OperatorCode(name, 0), ins, outs, default_options(name))


@pytest.mark.parametrize("target", ["input", "constant"])
def test_an_op_writing_an_input_or_a_constant_is_named(target):
    """DEQUANTIZE of a constant writes the graph's input (folded, it would make the input a
    constant that set_tensor refuses); ADD writes the weights MUL reads as a constant (whose
    value would be read with the shape the ADD gave it)."""
    model = Model()
    sg = Subgraph(name="main")
    x = sg.add_tensor(Tensor("x", (2,)))
    c = sg.add_tensor(Tensor("c", (2,), "float16", buffer=model.add_buffer(np.float16([1, 2]))))
    y = sg.add_tensor(Tensor("y", (2,)))
    sg.inputs, sg.outputs = [x], [y]
    if target == "input":
        sg.operators = [_op("DEQUANTIZE", [c], [x]), _op("ADD", [x, x], [y])]
        message = r"operator 0 \(DEQUANTIZE\): writes tensor 0 \('x'\), an input of the subgraph"
    else:
        sg.operators = [_op("ADD", [x, x], [c]), _op("MUL", [x, c], [y])]
        message = r"operator 0 \(ADD\): writes tensor 1 \('c'\), a constant"
    model.subgraphs.append(sg)
    it = Interpreter(model_content=save(model))
    with pytest.raises(KernelError, match=message):
        it.allocate_tensors()


def test_a_resource_tensor_with_a_buffer_is_still_a_handle():
    """A resource tensor's buffer (12 bytes here) is not data: VAR_HANDLE still makes it."""
    model = Model()
    sg = Subgraph(name="main")
    x = sg.add_tensor(Tensor("x", (3,)))
    h = sg.add_tensor(Tensor("h", (), "resource",
                             buffer=model.add_buffer(np.zeros(3, np.int32))))
    v = sg.add_tensor(Tensor("v", (3,)))
    y = sg.add_tensor(Tensor("y", (3,)))
    sg.inputs, sg.outputs = [x], [y]
    sg.operators = [Operator(OperatorCode("VAR_HANDLE", 0), [], [h],
                             default_options("VAR_HANDLE", shared_name="acc")),
                    Operator(OperatorCode("ASSIGN_VARIABLE", 0), [h, x], [],
                             default_options("ASSIGN_VARIABLE")),
                    Operator(OperatorCode("READ_VARIABLE", 0), [h], [v],
                             default_options("READ_VARIABLE")),
                    Operator(OperatorCode("ADD", 0), [v, x], [y], default_options("ADD"))]
    model.subgraphs.append(sg)
    it = Interpreter(model_content=save(model))
    it.allocate_tensors()
    it.set_tensor(0, np.float32([1, 2, 3]))
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(3), [2, 4, 6])
