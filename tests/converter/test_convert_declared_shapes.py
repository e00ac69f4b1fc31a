"""A tensor whose shape depends on run-time values (a RANGE over a model input) takes the declared
shape of a tensor provably of its shape: through shape-preserving ops and through broadcasting
ops whose other input is a scalar or of the same shape (ONNX's window functions, expanded). Where
nothing proves it, conversion still says that the shape is undeclared."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from edgelite.converter.convert import convert_onnx  # noqa: E402
from edgelite.converter.errors import ConversionError  # noqa: E402
from edgelite.interpreter import Interpreter  # noqa: E402


def window(second_range: bool = False):
    """y = 0.5 - 0.5 cos(range(n) * 2pi / n) + 0.1 cos(2 range(n) ...), y declared [n] = [8]."""
    c = lambda name, v: helper.make_node("Constant", [], [name],  # noqa: E731
                                         value=helper.make_tensor(name, TensorProto.FLOAT, [], [v]))
    nodes = [c("zero", 0.0), c("one", 1.0), c("two", 2.0), c("half", 0.5), c("tau", 6.2831855),
             helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
             helper.make_node("Div", ["tau", "nf"], ["step"]),
             helper.make_node("Range", ["zero", "nf", "one"], ["r"]),
             helper.make_node("Mul", ["r", "step"], ["angle"]),
             helper.make_node("Cos", ["angle"], ["cos1"]),
             helper.make_node("Mul", ["half", "cos1"], ["a1"]),
             helper.make_node("Sub", ["half", "a1"], ["t0"])]
    if second_range:    # another RANGE's length: nothing says it equals the first one's
        nodes += [helper.make_node("Range", ["zero", "nf", "two"], ["r2"]),
                  helper.make_node("Add", ["t0", "r2"], ["t1"])]
    else:
        nodes += [helper.make_node("Mul", ["angle", "two"], ["angle2"]),
                  helper.make_node("Cos", ["angle2"], ["cos2"]),
                  helper.make_node("Mul", ["cos2", "half"], ["a2"]),
                  helper.make_node("Add", ["t0", "a2"], ["t1"])]
    nodes.append(helper.make_node("Identity", ["t1"], ["y"]))
    graph = helper.make_graph(nodes, "window", [helper.make_tensor_value_info(
        "n", TensorProto.INT32, [])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_range_length_from_the_declared_output():
    proto = window()
    n = np.array(8, np.int32)
    expected = ReferenceEvaluator(proto).run(None, {"n": n})[0]
    it = Interpreter(model_content=convert_onnx(proto, {"n": ()}).content)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], n)
    it.invoke()
    got = it.get_tensor(it.get_output_details()[0]["index"])
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_no_guess_where_nothing_proves_the_shape():
    with pytest.raises(ConversionError, match="depends on values known only at run time"):
        convert_onnx(window(second_range=True), {"n": ()})
