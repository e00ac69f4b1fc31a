"""Elementwise ops: arithmetic with broadcasting, unary math, activations, Clip, comparisons,
logic, Where and Cast. One small ONNX model per op form, converted and checked in edgelite's
interpreter and in LiteRT against onnxruntime (onnx_cases.check)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

from tests.converter.onnx_cases import RNG, F, check, model, node, w


# -- arithmetic and math ---------------------------------------------------------------------------

BINARY = ["Add", "Sub", "Mul", "Div", "Max", "Min"]


@pytest.mark.parametrize("op", BINARY)
def test_binary_broadcast(op):
    proto = model([node(op, ["a", "b"], ["y"])], [("a", [2, 3, 4]), ("b", [3, 1])], ["y"])
    check(proto)


@pytest.mark.parametrize("op", ["Sum", "Max", "Min", "Mean"])
def test_variadic(op):
    proto = model([node(op, ["a", "b", "c"], ["y"])],
                  [("a", [2, 3]), ("b", [2, 3]), ("c", [3])], ["y"])
    check(proto)


UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Neg", "Floor", "Ceil", "Round", "Sign",
         "Sin", "Cos", "Softplus", "HardSwish"]


@pytest.mark.parametrize("op", UNARY)
def test_unary(op):
    proto = model([node(op, ["x"], ["y"])], [("x", [2, 3, 5])], ["y"], opset=14)
    check(proto)


@pytest.mark.parametrize("op", ["Sqrt", "Log", "Reciprocal"])
def test_unary_positive(op):
    proto = model([node(op, ["x"], ["y"])], [("x", [2, 7])], ["y"])
    check(proto, {"x": RNG.random((2, 7)).astype(F) + 0.1})


@pytest.mark.parametrize("op, attrs", [("LeakyRelu", dict(alpha=0.2)), ("Elu", {}),
                                       ("Elu", dict(alpha=0.5)), ("Selu", {}),
                                       ("HardSigmoid", {}),
                                       ("HardSigmoid", dict(alpha=0.25, beta=0.4))])
def test_activation_attrs(op, attrs):
    proto = model([node(op, ["x"], ["y"], **attrs)], [("x", [2, 3, 5])], ["y"])
    check(proto, {"x": (RNG.standard_normal((2, 3, 5)) * 4).astype(F)})


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate):
    proto = model([node("Gelu", ["x"], ["y"], approximate=approximate)], [("x", [2, 9])],
                  ["y"], opset=20)
    assert check(proto).ops_out == {"GELU": 1}


def test_prelu_channel_slope_after_conv():
    proto = model([node("Conv", ["x", "W"], ["c"]), node("PRelu", ["c", "slope"], ["y"])],
                  [("x", [1, 3, 5, 5])], ["y"], {"W": w(4, 3, 1, 1), "slope": w(4, 1, 1)})
    conversion = check(proto)
    assert conversion.transposes == 0


@pytest.mark.parametrize("exponent", [2.0, 0.5, 3.0])
def test_pow(exponent):
    proto = model([node("Pow", ["x", "e"], ["y"])], [("x", [2, 5])], ["y"],
                  {"e": np.array(exponent, F)})
    check(proto, {"x": RNG.random((2, 5)).astype(F) + 0.5})


def test_pow_mixed_types():
    proto = model([node("Pow", ["x", "e"], ["y"])], [("x", [2, 5]), ("e", [5], np.int64)],
                  ["y"], opset=15)
    check(proto, {"x": RNG.random((2, 5)).astype(F) + 0.5,
                  "e": np.array([0, 1, 2, 3, 1], np.int64)})


# -- Clip ------------------------------------------------------------------------------------------

CLIPS = {"relu6": (0.0, 6.0, "RELU6"), "n1_to_1": (-1.0, 1.0, "RELU_N1_TO_1"),
         "0_to_1": (0.0, 1.0, "RELU_0_TO_1"), "min_only": (0.0, None, "RELU"),
         "other": (-2.0, 3.0, "MINIMUM")}


@pytest.mark.parametrize("case", list(CLIPS))
def test_clip(case):
    lo, hi, op = CLIPS[case]
    inits = {"lo": np.array(lo, F)}
    inputs = ["x", "lo"]
    if hi is not None:
        inits["hi"] = np.array(hi, F)
        inputs.append("hi")
    proto = model([node("Clip", inputs, ["y"])], [("x", [3, 4])], ["y"], inits)
    conversion = check(proto, {"x": (RNG.standard_normal((3, 4)) * 5).astype(F)})
    assert op in conversion.ops_out


def test_clip_opset_11_attributes_are_inputs():
    proto = model([node("Clip", ["x", "lo", "hi"], ["y"])], [("x", [3, 4])], ["y"],
                  {"lo": np.array(0, F), "hi": np.array(6, F)}, opset=11)
    assert check(proto).ops_out == {"RELU6": 1}


# -- comparisons, logic, Cast ----------------------------------------------------------------------

@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_compare(op):
    proto = model([node(op, ["a", "b"], ["y"])], [("a", [2, 4]), ("b", [4])],
                  [("y", np.bool_)])
    a = RNG.integers(0, 3, (2, 4)).astype(F)
    check(proto, {"a": a, "b": RNG.integers(0, 3, (4,)).astype(F)})


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logic(op):
    proto = model([node(op, ["a", "b"], ["y"])], [("a", [6], np.bool_), ("b", [6], np.bool_)],
                  [("y", np.bool_)])
    check(proto)


def test_not_and_where():
    proto = model([node("Not", ["c"], ["n"]), node("Where", ["n", "a", "b"], ["y"])],
                  [("c", [2, 3], np.bool_), ("a", [2, 3]), ("b", [3])], ["y"])
    check(proto)


@pytest.mark.parametrize("to, dtype", [(TensorProto.INT32, np.int32),
                                       (TensorProto.INT64, np.int64)])
def test_cast(to, dtype):
    proto = model([node("Cast", ["x"], ["y"], to=to)], [("x", [2, 5])], [("y", dtype)])
    check(proto, {"x": (RNG.standard_normal((2, 5)) * 10).astype(F)})
