"""uint64 arithmetic and comparisons (ONNX's Add, Sub, Mul, Div, Max, Min, Equal, Less, ...):
LiteRT has no uint64 kernels, so edgelite's results are checked against ONNX's reference
evaluator (numpy's wrapping uint64 arithmetic), on values past 2**63 where a signed view would
go wrong."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from edgelite.converter.convert import convert_onnx  # noqa: E402
from edgelite.interpreter import Interpreter  # noqa: E402

U64 = np.uint64
RNG = np.random.default_rng(11)
BIG = np.iinfo(U64).max


def operands():
    """Small and huge values, zeros and equal pairs, with broadcasting (3, 4) against (4,)."""
    a = RNG.integers(0, BIG, (3, 4), dtype=U64, endpoint=True)
    a[0] = [0, 5, BIG, 2 ** 63]
    b = np.array([7, 5, BIG, 3], U64)
    a[1, 1] = b[1]
    return a, b


@pytest.mark.parametrize("op,out_type", [
    ("Add", TensorProto.UINT64), ("Sub", TensorProto.UINT64), ("Mul", TensorProto.UINT64),
    ("Div", TensorProto.UINT64), ("Max", TensorProto.UINT64), ("Min", TensorProto.UINT64),
    ("Equal", TensorProto.BOOL), ("Less", TensorProto.BOOL), ("LessOrEqual", TensorProto.BOOL),
    ("Greater", TensorProto.BOOL), ("GreaterOrEqual", TensorProto.BOOL)])
def test_uint64_binary_op_as_onnx_defines_it(op, out_type):
    a, b = operands()
    graph = helper.make_graph(
        [helper.make_node(op, ["a", "b"], ["y"])], "uint64",
        [helper.make_tensor_value_info("a", TensorProto.UINT64, a.shape),
         helper.make_tensor_value_info("b", TensorProto.UINT64, b.shape)],
        [helper.make_tensor_value_info("y", out_type, (3, 4))])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    expected = ReferenceEvaluator(proto).run(None, {"a": a, "b": b})[0]
    conversion = convert_onnx(proto, {"a": a.shape, "b": b.shape})
    it = Interpreter(model_content=conversion.content)
    it.allocate_tensors()
    for detail, value in zip(it.get_input_details(), (a, b)):
        assert detail["dtype"] == U64
        it.set_tensor(detail["index"], value)
    it.invoke()
    got = it.get_tensor(it.get_output_details()[0]["index"])
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
