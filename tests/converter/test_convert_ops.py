"""One small ONNX model per op form, built with onnx.helper, converted and run in edgelite's
interpreter and in LiteRT, both checked against onnxruntime (max abs error <= 1e-4 x max |ref|,
exact for integer and boolean outputs)."""
from __future__ import annotations

import numpy as np
import pytest
import onnx
from onnx import TensorProto, helper, numpy_helper

from edgelite.converter import TFLiteConverter
from edgelite.converter.check import compare

F = np.float32
RNG = np.random.default_rng(7)
_ELEM = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
         np.dtype(np.int32): TensorProto.INT32, np.dtype(np.bool_): TensorProto.BOOL}


def model(nodes, inputs, outputs, inits=None, opset=18):
    """inputs: [(name, shape)] or [(name, shape, dtype)]; outputs: names or (name, dtype)."""
    ins = [helper.make_tensor_value_info(i[0], _ELEM[np.dtype(i[2] if len(i) > 2 else F)],
                                         i[1]) for i in inputs]
    outs = [helper.make_tensor_value_info(*((o, TensorProto.FLOAT) if isinstance(o, str) else
                                            (o[0], _ELEM[np.dtype(o[1])])), None)
            for o in outputs]
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()]
    graph = helper.make_graph(nodes, "case", ins, outs, inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    proto.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(proto)   # outputs get their shapes
    del proto.graph.output[:]
    proto.graph.output.extend(inferred.graph.output)
    return proto


def node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, **attrs)


def w(*shape, scale=0.5):
    return (RNG.standard_normal(shape) * scale).astype(F)


def convert(proto, shapes=None, keep_io_layout=False):
    converter = TFLiteConverter.from_onnx(proto, shapes)
    converter.keep_io_layout = keep_io_layout
    converter.convert()
    return converter.last_conversion


def check(proto, feeds=None, shapes=None, keep_io_layout=False):
    """Convert, compare both runtimes with onnxruntime; returns the conversion."""
    conversion = convert(proto, shapes, keep_io_layout)
    if feeds is not None:
        feeds = [feeds[e["name"]] for e in conversion.io_layout["inputs"]]
    rows = compare(conversion, proto, feeds)
    for row in rows:
        assert row["reference"] == "onnxruntime"
        assert set(row["errors"]) == {"edgelite", "LiteRT"}, row
        assert row["ok"], row
    return conversion


# -- Conv ----------------------------------------------------------------------------------------

CONVS = {
    "same_pads": dict(w=(8, 4, 3, 3), attrs=dict(pads=[1, 1, 1, 1])),
    "stride2_pads1": dict(w=(8, 4, 3, 3), attrs=dict(pads=[1, 1, 1, 1], strides=[2, 2])),
    "same_upper_s2": dict(w=(8, 4, 3, 3), attrs=dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    "same_lower_s2": dict(w=(8, 4, 4, 4), attrs=dict(auto_pad="SAME_LOWER", strides=[2, 2])),
    "valid": dict(w=(8, 4, 3, 3), attrs=dict(auto_pad="VALID")),
    "dilated": dict(w=(8, 4, 3, 3), attrs=dict(pads=[2, 2, 2, 2], dilations=[2, 2])),
    "asymmetric": dict(w=(8, 4, 2, 3), attrs=dict(pads=[0, 1, 1, 0])),
    "depthwise": dict(w=(4, 1, 3, 3), attrs=dict(pads=[1, 1, 1, 1], group=4)),
    "depth_multiplier": dict(w=(8, 1, 3, 3), attrs=dict(pads=[1, 1, 1, 1], group=4)),
    "grouped": dict(w=(6, 2, 3, 3), attrs=dict(pads=[1, 1, 1, 1], group=2)),
    "no_bias": dict(w=(8, 4, 1, 1), attrs={}, bias=False),
    "rect_stride": dict(w=(8, 4, 3, 1), attrs=dict(strides=[2, 1], pads=[1, 0, 1, 0])),
}


@pytest.mark.parametrize("case", list(CONVS))
def test_conv(case):
    spec = CONVS[case]
    inits = {"W": w(*spec["w"])}
    inputs = ["x", "W"]
    if spec.get("bias", True):
        inits["B"] = w(spec["w"][0])
        inputs.append("B")
    proto = model([node("Conv", inputs, ["y"], **spec["attrs"])], [("x", [1, 4, 9, 10])],
                  ["y"], inits)
    conversion = check(proto)
    assert conversion.transposes == 0
    convs = {"CONV_2D", "DEPTHWISE_CONV_2D"} & set(conversion.ops_out)
    assert convs


def test_conv_1d():
    proto = model([node("Conv", ["x", "W", "B"], ["y"], pads=[1, 1], strides=[2])],
                  [("x", [1, 3, 16])], ["y"], {"W": w(5, 3, 3), "B": w(5)})
    conversion = check(proto)
    assert conversion.io_layout["inputs"][0]["perm"] == [0, 2, 1]   # NCL -> NLC
    assert conversion.transposes == 0


def test_conv_keep_io_layout():
    proto = model([node("Conv", ["x", "W"], ["y"], pads=[1, 1, 1, 1])], [("x", [1, 3, 6, 6])],
                  ["y"], {"W": w(4, 3, 3, 3)})
    conversion = check(proto, keep_io_layout=True)
    assert conversion.io_layout["inputs"][0]["perm"] == [0, 1, 2, 3]
    assert conversion.io_layout["outputs"][0]["perm"] == [0, 1, 2, 3]
    assert conversion.transposes == 2


def test_conv_batchnorm_relu_fuse_into_one_op():
    c = 6
    proto = model([node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
                   node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"], epsilon=1e-3),
                   node("Relu", ["n"], ["y"])],
                  [("x", [1, 3, 8, 8])], ["y"],
                  {"W": w(c, 3, 3, 3), "B": w(c), "s": w(c) + 1, "b": w(c), "m": w(c),
                   "v": np.abs(w(c)) + 0.5})
    conversion = check(proto)
    assert conversion.ops_out == {"CONV_2D": 1}


def test_pad_then_conv_folds_into_same():
    proto = model([node("Pad", ["x", "pads"], ["p"]),
                   node("Conv", ["p", "W"], ["y"])],
                  [("x", [1, 3, 8, 8])], ["y"],
                  {"W": w(4, 3, 3, 3), "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)})
    assert check(proto).ops_out == {"CONV_2D": 1}


def test_pad_then_strided_conv_keeps_pad():
    proto = model([node("Pad", ["x", "pads"], ["p"]),
                   node("Conv", ["p", "W"], ["y"], strides=[2, 2])],
                  [("x", [1, 3, 8, 8])], ["y"],
                  {"W": w(4, 3, 3, 3), "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)})
    assert check(proto).ops_out == {"CONV_2D": 1, "PAD": 1}


# -- pools ---------------------------------------------------------------------------------------

POOLS = {
    "max_k2s2": ("MaxPool", dict(kernel_shape=[2, 2], strides=[2, 2])),
    "max_k3s2p1": ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    "max_k3s1p1_same": ("MaxPool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    "max_ceil": ("MaxPool", dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),
    "max_same_upper": ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2],
                                       auto_pad="SAME_UPPER")),
    "avg_k2s2": ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2])),
    "avg_same_exclude_pad": ("AveragePool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    "avg_include_pad": ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2],
                                            pads=[1, 1, 1, 1], count_include_pad=1)),
}


@pytest.mark.parametrize("case", list(POOLS))
def test_pool(case):
    op, attrs = POOLS[case]
    proto = model([node(op, ["x"], ["y"], **attrs)], [("x", [1, 3, 7, 9])], ["y"])
    assert check(proto).transposes == 0


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool(op):
    proto = model([node(op, ["x"], ["y"])], [("x", [2, 5, 4, 6])], ["y"])
    check(proto)


def test_max_pool_1d():
    proto = model([node("MaxPool", ["x"], ["y"], kernel_shape=[3], strides=[2])],
                  [("x", [1, 4, 11])], ["y"])
    check(proto)


# -- Gemm / MatMul -------------------------------------------------------------------------------

GEMMS = {
    "transB_bias": (dict(transB=1), (5, 8), (5,)),
    "plain_bias_row": ({}, (8, 5), (1, 5)),
    "alpha_beta": (dict(alpha=0.5, beta=2.0), (8, 5), (5,)),
    "transA": (dict(transA=1), (8, 5), (5,)),
    "scalar_c": ({}, (8, 5), ()),
    "matrix_c": ({}, (8, 5), (3, 5)),
    "no_c": ({}, (8, 5), None),
}


@pytest.mark.parametrize("case", list(GEMMS))
def test_gemm(case):
    attrs, b_shape, c_shape = GEMMS[case]
    a_shape = [8, 3] if attrs.get("transA") else [3, 8]
    inits = {"B": w(*b_shape)}
    inputs = ["a", "B"]
    if c_shape is not None:
        inits["C"] = w(*c_shape)
        inputs.append("C")
    proto = model([node("Gemm", inputs, ["y"], **attrs)], [("a", a_shape)], ["y"], inits)
    conversion = check(proto)
    assert "FULLY_CONNECTED" in conversion.ops_out


def test_gemm_variable_b():
    proto = model([node("Gemm", ["a", "b"], ["y"], transB=1, alpha=2.0)],
                  [("a", [3, 4]), ("b", [5, 4])], ["y"])
    check(proto)


def test_matmul_constant_b_is_fully_connected():
    proto = model([node("MatMul", ["a", "B"], ["m"]), node("Add", ["m", "bias"], ["y"])],
                  [("a", [2, 3, 8])], ["y"], {"B": w(8, 5), "bias": w(5)})
    assert check(proto).ops_out == {"FULLY_CONNECTED": 1}


@pytest.mark.parametrize("shapes", [([2, 3, 4], [2, 4, 5]), ([3, 4], [4]), ([4], [4, 2]),
                                    ([2, 1, 3, 4], [3, 4, 2])])
def test_matmul(shapes):
    a, b = shapes
    proto = model([node("MatMul", ["a", "b"], ["y"])], [("a", a), ("b", b)], ["y"])
    check(proto)


# -- elementwise ---------------------------------------------------------------------------------

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


@pytest.mark.parametrize("exponent", [2.0, 0.5, 3.0])
def test_pow(exponent):
    proto = model([node("Pow", ["x", "e"], ["y"])], [("x", [2, 5])], ["y"],
                  {"e": np.array(exponent, F)})
    check(proto, {"x": RNG.random((2, 5)).astype(F) + 0.5})


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


# -- softmax -------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis, opset", [(-1, 13), (1, 13), (1, 11), (2, 11)])
def test_softmax(op, axis, opset):
    proto = model([node(op, ["x"], ["y"], axis=axis)], [("x", [2, 3, 4])], ["y"], opset=opset)
    check(proto)


def test_softmax_over_channels_after_conv():
    proto = model([node("Conv", ["x", "W"], ["c"]), node("Softmax", ["c"], ["y"], axis=1)],
                  [("x", [1, 3, 4, 5])], ["y"], {"W": w(6, 3, 1, 1)})
    conversion = check(proto)
    assert conversion.transposes == 0


# -- shapes, slicing, data movement --------------------------------------------------------------

def test_reshape_zero_and_minus_one():
    proto = model([node("Reshape", ["x", "s"], ["y"])], [("x", [2, 3, 4])], ["y"],
                  {"s": np.array([0, -1], np.int64)})
    check(proto)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_flatten(axis):
    proto = model([node("Flatten", ["x"], ["y"], axis=axis)], [("x", [2, 3, 4])], ["y"])
    check(proto)


@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_unsqueeze(opset):
    if opset >= 13:
        nodes = [node("Unsqueeze", ["x", "ua"], ["u"]), node("Squeeze", ["u", "sa"], ["y"])]
        inits = {"ua": np.array([0, 3], np.int64), "sa": np.array([0], np.int64)}
    else:
        nodes = [node("Unsqueeze", ["x"], ["u"], axes=[0, 3]),
                 node("Squeeze", ["u"], ["y"], axes=[0])]
        inits = {}
    proto = model(nodes, [("x", [2, 3, 4])], ["y"], inits, opset=opset)
    check(proto)


def test_transpose():
    proto = model([node("Transpose", ["x"], ["y"], perm=[2, 0, 1])], [("x", [2, 3, 4])], ["y"])
    check(proto)


def test_concat_and_split():
    proto = model([node("Concat", ["a", "b"], ["c"], axis=1),
                   node("Split", ["c", "sizes"], ["y0", "y1", "y2"], axis=1)],
                  [("a", [2, 3, 2]), ("b", [2, 4, 2])], ["y0", "y1", "y2"],
                  {"sizes": np.array([2, 2, 3], np.int64)})
    check(proto)


def test_split_num_outputs():
    proto = model([node("Split", ["x"], ["y0", "y1"], axis=-1, num_outputs=2)],
                  [("x", [2, 3, 6])], ["y0", "y1"])
    check(proto)


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([1], [3], [1], [1]),
    ([0, -2], [2, 100], [0, 2], [1, 1]),
    ([-1], [-100], [2], [-1]),
    ([4, 1], [0, 3], [2, 0], [-2, 1]),
])
def test_slice(starts, ends, axes, steps):
    inits = {k: np.array(v, np.int64) for k, v in
             dict(starts=starts, ends=ends, axes=axes, steps=steps).items()}
    proto = model([node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])],
                  [("x", [3, 4, 5])], ["y"], inits)
    check(proto)


@pytest.mark.parametrize("axis, indices", [(0, [2, 0]), (1, [-1, 1, 0]), (1, 2),
                                           (2, [[0, 1], [3, 3]])])
def test_gather(axis, indices):
    proto = model([node("Gather", ["x", "i"], ["y"], axis=axis)], [("x", [3, 4, 5])], ["y"],
                  {"i": np.array(indices, np.int64)})
    check(proto)


def test_gather_runtime_indices():
    proto = model([node("Gather", ["x", "i"], ["y"], axis=0)],
                  [("x", [5, 3]), ("i", [4], np.int64)], ["y"])
    check(proto, {"x": w(5, 3), "i": np.array([4, 0, 2, 2], np.int64)})


def test_expand_and_tile():
    proto = model([node("Expand", ["x", "shape"], ["e"]), node("Tile", ["e", "reps"], ["y"])],
                  [("x", [3, 1])], ["y"], {"shape": np.array([2, 3, 4], np.int64),
                                           "reps": np.array([1, 2, 1], np.int64)})
    check(proto)


@pytest.mark.parametrize("mode, value", [("constant", None), ("constant", 1.5),
                                         ("reflect", None)])
def test_pad(mode, value):
    inits = {"pads": np.array([0, 1, 2, 0, 2, 1], np.int64)}
    inputs = ["x", "pads"]
    if value is not None:
        inits["v"] = np.array(value, F)
        inputs.append("v")
    proto = model([node("Pad", inputs, ["y"], mode=mode)], [("x", [2, 4, 5])], ["y"], inits)
    check(proto)


def test_shape_chain_folds_to_one_reshape():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape on static shapes: one RESHAPE."""
    nodes = [node("Shape", ["x"], ["s"]),
             node("Gather", ["s", "zero"], ["n"], axis=0),
             node("Unsqueeze", ["n", "ax"], ["n1"]),
             node("Concat", ["n1", "minus_one"], ["target"], axis=0),
             node("Reshape", ["x", "target"], ["y"])]
    proto = model(nodes, [("x", [2, 3, 4])], ["y"],
                  {"zero": np.array(0, np.int64), "ax": np.array([0], np.int64),
                   "minus_one": np.array([-1], np.int64)})
    assert check(proto).ops_out == {"RESHAPE": 1}


def test_constant_ops_fold():
    nodes = [node("Constant", [], ["c"], value=numpy_helper.from_array(w(3), "c")),
             node("ConstantOfShape", ["shape"], ["ones"],
                  value=numpy_helper.from_array(np.array([1.0], F))),
             node("Range", ["start", "limit", "delta"], ["r"]),
             node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
             node("Add", ["c", "rf"], ["k"]),
             node("Mul", ["ones", "k"], ["k2"]),
             node("Identity", ["x"], ["xi"]),
             node("Dropout", ["xi"], ["xd"]),
             node("Add", ["xd", "k2"], ["y"])]
    proto = model(nodes, [("x", [2, 3])], ["y"],
                  {"shape": np.array([2, 3], np.int64), "start": np.array(0, np.int64),
                   "limit": np.array(3, np.int64), "delta": np.array(1, np.int64)})
    assert check(proto).ops_out == {"ADD": 1}


REDUCERS = ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2",
            "ReduceSumSquare"]


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("op", REDUCERS)
def test_reduce(op, keepdims):
    proto = model([node(op, ["x", "axes"], ["y"], keepdims=keepdims)], [("x", [2, 3, 4])],
                  ["y"], {"axes": np.array([-1, 1], np.int64)})
    check(proto)


def test_reduce_opset_13_attribute_axes():
    proto = model([node("ReduceMean", ["x"], ["y"], axes=[2, 3], keepdims=0)],
                  [("x", [1, 3, 4, 4])], ["y"], opset=13)
    check(proto)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_arg(op, keepdims):
    proto = model([node(op, ["x"], ["y"], axis=1, keepdims=keepdims)], [("x", [2, 5, 3])],
                  [("y", np.int64)])
    check(proto)


# -- layouts through small convnet patterns ------------------------------------------------------

def test_residual_block_has_no_transposes():
    nodes = [node("Conv", ["x", "W1", "B1"], ["a"], pads=[1, 1, 1, 1]),
             node("Relu", ["a"], ["r"]),
             node("Conv", ["r", "W2", "B2"], ["b"], pads=[1, 1, 1, 1]),
             node("Add", ["b", "x"], ["s"]),
             node("Mul", ["s", "scale"], ["y"])]
    proto = model(nodes, [("x", [1, 4, 6, 6])], ["y"],
                  {"W1": w(4, 4, 3, 3), "B1": w(4), "W2": w(4, 4, 3, 3), "B2": w(4),
                   "scale": w(4, 1, 1)})
    conversion = check(proto)
    assert conversion.transposes == 0
    assert conversion.io_layout["outputs"][0]["perm"] == [0, 2, 3, 1]


def test_concat_of_convs_on_channels():
    nodes = [node("Conv", ["x", "W1"], ["a"]), node("Conv", ["x", "W2"], ["b"]),
             node("Concat", ["a", "b"], ["c"], axis=1),
             node("ReduceMean", ["c", "axes"], ["y"], keepdims=0)]
    proto = model(nodes, [("x", [1, 3, 5, 5])], ["y"],
                  {"W1": w(2, 3, 1, 1), "W2": w(4, 3, 1, 1),
                   "axes": np.array([2, 3], np.int64)})
    conversion = check(proto)
    assert conversion.transposes == 0


def test_squeeze_excite_block():
    c = 8
    nodes = [node("GlobalAveragePool", ["x"], ["g"]),
             node("Conv", ["g", "W1", "B1"], ["a"]), node("Relu", ["a"], ["r"]),
             node("Conv", ["r", "W2", "B2"], ["b"]),
             node("HardSigmoid", ["b"], ["s"], alpha=0.2, beta=0.5),
             node("Mul", ["x", "s"], ["y"])]
    proto = model(nodes, [("x", [1, c, 5, 5])], ["y"],
                  {"W1": w(2, c, 1, 1), "B1": w(2), "W2": w(c, 2, 1, 1), "B2": w(c)})
    conversion = check(proto)
    assert conversion.ops_out == {"CONV_2D": 2, "MEAN": 1, "MUL": 1, "RELU_0_TO_1": 1}


@pytest.mark.parametrize("form", ["clip_div", "clip_mul", "hardsigmoid"])
def test_hard_swish_patterns(form):
    x = ["c"]
    if form == "hardsigmoid":
        nodes = [node("HardSigmoid", x, ["s"], alpha=1 / 6, beta=0.5),
                 node("Mul", ["c", "s"], ["y"])]
    else:
        nodes = [node("Add", ["c", "three"], ["a"]), node("Clip", ["a", "lo", "hi"], ["r"]),
                 node("Mul", ["c", "r"], ["m"])]
        nodes.append(node("Div", ["m", "six"], ["y"]) if form == "clip_div"
                     else node("Mul", ["m", "sixth"], ["y"]))
    nodes.insert(0, node("Conv", ["x", "W"], ["c"]))
    proto = model(nodes, [("x", [1, 3, 4, 4])], ["y"],
                  {"W": w(4, 3, 1, 1, scale=3.0), "three": np.array(3, F),
                   "lo": np.array(0, F), "hi": np.array(6, F), "six": np.array(6, F),
                   "sixth": np.array(1 / 6, F)})
    assert check(proto).ops_out == {"CONV_2D": 1, "HARD_SWISH": 1}


def test_input_that_reaches_no_conv_keeps_its_layout():
    proto = model([node("Relu", ["x"], ["y"])], [("x", [1, 3, 4, 4])], ["y"])
    conversion = check(proto)
    assert conversion.io_layout["inputs"][0]["perm"] == [0, 1, 2, 3]
    assert conversion.ops_out == {"RELU": 1}


def test_input_through_elementwise_to_conv_becomes_nhwc():
    nodes = [node("Sub", ["x", "mean"], ["a"]), node("Mul", ["a", "std"], ["b"]),
             node("Conv", ["b", "W"], ["y"])]
    proto = model(nodes, [("x", [1, 3, 4, 4])], ["y"],
                  {"mean": w(1, 3, 1, 1), "std": w(1, 3, 1, 1), "W": w(2, 3, 3, 3)})
    conversion = check(proto)
    assert conversion.io_layout["inputs"][0]["perm"] == [0, 2, 3, 1]
    assert conversion.transposes == 0


# -- normalizations, erf, GELU -------------------------------------------------------------------

def test_layer_norm():
    proto = model([node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1, epsilon=1e-3)],
                  [("x", [2, 5, 8])], ["y"], {"s": w(8) + 1, "b": w(8)})
    check(proto)


def test_layer_norm_two_axes_no_bias():
    proto = model([node("LayerNormalization", ["x", "s"], ["y"], axis=1)],
                  [("x", [2, 3, 4])], ["y"], {"s": w(3, 4) + 1})
    check(proto)


def test_instance_norm_after_conv():
    proto = model([node("Conv", ["x", "W"], ["c"]),
                   node("InstanceNormalization", ["c", "s", "b"], ["y"], epsilon=1e-4)],
                  [("x", [2, 3, 5, 6])], ["y"], {"W": w(4, 3, 1, 1), "s": w(4), "b": w(4)})
    assert check(proto).transposes == 0


def test_erf():
    proto = model([node("Erf", ["x"], ["y"])], [("x", [4, 50])], ["y"])
    check(proto, {"x": np.linspace(-4, 4, 200, dtype=F).reshape(4, 50)})


@pytest.mark.parametrize("form", ["half_last", "half_first", "x_first", "mul_sqrt_half"])
def test_erf_gelu_pattern_is_one_gelu(form):
    scale = (node("Mul", ["x", "r2"], ["u"]) if form == "mul_sqrt_half"
             else node("Div", ["x", "sqrt2"], ["u"]))
    nodes = [scale, node("Erf", ["u"], ["e"]), node("Add", ["e", "one"], ["a"])]
    if form in ("half_last", "mul_sqrt_half"):
        nodes += [node("Mul", ["half", "a"], ["h"]), node("Mul", ["x", "h"], ["y"])]
    elif form == "half_first":
        nodes += [node("Mul", ["x", "half"], ["h"]), node("Mul", ["h", "a"], ["y"])]
    else:
        nodes += [node("Mul", ["x", "a"], ["h"]), node("Mul", ["h", "half"], ["y"])]
    proto = model(nodes, [("x", [2, 16])], ["y"],
                  {"sqrt2": np.array(np.sqrt(2), F), "r2": np.array(1 / np.sqrt(2), F),
                   "one": np.array(1, F), "half": np.array(0.5, F)})
    conversion = check(proto)
    assert conversion.ops_out == {"GELU": 1}
    assert conversion.ops_in["Erf"] == 1


# -- ConvTranspose, Resize, DepthToSpace, SpaceToDepth -------------------------------------------

CONV_TRANSPOSES = {
    "s2_k3_p1_op1": dict(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]),
    "s2_k3_valid": dict(strides=[2, 2]),
    "s1_k3_p1": dict(pads=[1, 1, 1, 1]),
    "s2_output_shape": dict(strides=[2, 2], output_shape=[10, 12]),
    "s2_same_upper": dict(strides=[2, 2], auto_pad="SAME_UPPER"),
}


@pytest.mark.parametrize("case", list(CONV_TRANSPOSES))
def test_conv_transpose(case):
    proto = model([node("ConvTranspose", ["x", "W", "B"], ["y"], **CONV_TRANSPOSES[case])],
                  [("x", [1, 4, 5, 6])], ["y"], {"W": w(4, 3, 3, 3), "B": w(3)})
    assert check(proto).transposes == 0


RESIZES = {
    "nearest_asym_floor_x2": dict(mode="nearest", coordinate_transformation_mode="asymmetric",
                                  nearest_mode="floor"),
    "nearest_default_x2": dict(mode="nearest"),
    "nearest_half_pixel_ceil": dict(mode="nearest", nearest_mode="round_prefer_ceil"),
    "linear_half_pixel": dict(mode="linear"),
    "linear_pytorch": dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
    "linear_align_corners": dict(mode="linear", coordinate_transformation_mode="align_corners"),
    "linear_asymmetric": dict(mode="linear", coordinate_transformation_mode="asymmetric"),
}


@pytest.mark.parametrize("case", list(RESIZES))
def test_resize_scales(case):
    proto = model([node("Resize", ["x", "", "scales"], ["y"], **RESIZES[case])],
                  [("x", [1, 3, 4, 5])], ["y"], {"scales": np.array([1, 1, 2, 2], F)})
    assert check(proto).transposes == 0


def test_resize_sizes_after_conv():
    proto = model([node("Conv", ["x", "W"], ["c"]),
                   node("Resize", ["c", "", "", "sizes"], ["y"], mode="linear")],
                  [("x", [1, 3, 4, 5])], ["y"],
                  {"W": w(2, 3, 1, 1), "sizes": np.array([1, 2, 7, 9], np.int64)})
    assert check(proto).transposes == 0


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode):
    proto = model([node("DepthToSpace", ["x"], ["y"], blocksize=2, mode=mode)],
                  [("x", [1, 8, 3, 4])], ["y"])
    check(proto)


def test_space_to_depth():
    proto = model([node("SpaceToDepth", ["x"], ["y"], blocksize=2)], [("x", [1, 3, 4, 6])],
                  ["y"])
    check(proto)


# -- model-level ---------------------------------------------------------------------------------

@pytest.mark.parametrize("opset", range(11, onnx.defs.onnx_opset_version() + 1))
def test_small_convnet_at_every_opset(opset):
    nodes = [node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
             node("Relu", ["c"], ["r"]),
             node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Flatten", ["p"], ["f"]),
             node("Gemm", ["f", "G", "C"], ["g"], transB=1),
             node("Softmax", ["g"], ["y"], axis=1)]
    proto = model(nodes, [("x", [1, 2, 4, 4])], ["y"],
                  {"W": w(3, 2, 3, 3), "B": w(3), "G": w(5, 12), "C": w(5)}, opset=opset)
    conversion = check(proto)
    assert conversion.transposes == 0


def test_external_data(tmp_path):
    nodes = [node("Conv", ["x", "W"], ["c"]), node("Relu", ["c"], ["y"])]
    proto = model(nodes, [("x", [1, 3, 8, 8])], ["y"], {"W": w(64, 3, 3, 3)})
    path = tmp_path / "ext.onnx"
    expected = convert(proto).content
    onnx.save(proto, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
              location="ext.bin", size_threshold=0)
    assert (tmp_path / "ext.bin").stat().st_size == 64 * 27 * 4
    assert TFLiteConverter.from_onnx(path).convert() == expected


def test_the_callers_model_proto_is_not_changed():
    nodes = [node("Div", ["x", "sqrt2"], ["u"]), node("Erf", ["u"], ["e"]),
             node("Add", ["e", "one"], ["a"]), node("Mul", ["x", "a"], ["h"]),
             node("Mul", ["h", "half"], ["y"])]
    proto = model(nodes, [("x", [2, 3])], ["y"], {"sqrt2": np.array(np.sqrt(2), F),
                                                 "one": np.array(1, F),
                                                 "half": np.array(0.5, F)})
    before = proto.SerializeToString()
    assert convert(proto).ops_out == {"GELU": 1}
    assert proto.SerializeToString() == before


AVERAGE_DIVISORS = {
    "pads_exclude": dict(kernel_shape=[3, 3], pads=[2, 2, 2, 2]),
    "same_lower": dict(kernel_shape=[2, 2], auto_pad="SAME_LOWER"),
    "ceil_exclude": dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    "ceil_include_pads": dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                              ceil_mode=1, count_include_pad=1),
    "ceil_exclude_pads": dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 0],
                              ceil_mode=1),
}


@pytest.mark.parametrize("case", list(AVERAGE_DIVISORS))
def test_average_pool_divisors(case):
    proto = model([node("AveragePool", ["x"], ["y"], **AVERAGE_DIVISORS[case])],
                  [("x", [1, 2, 6, 7])], ["y"])
    check(proto)


def test_batch_norm_with_runtime_statistics():
    proto = model([node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])],
                  [("x", [2, 3, 4]), ("s", [3]), ("b", [3]), ("m", [3]), ("v", [3])], ["y"])
    check(proto, {"x": w(2, 3, 4), "s": w(3), "b": w(3), "m": w(3),
                  "v": np.abs(w(3)) + 0.1})


def test_layer_norm_mean_and_inv_std_dev_outputs():
    proto = model([node("LayerNormalization", ["x", "s"], ["y", "mean", "inv"], axis=1)],
                  [("x", [2, 3, 4])], ["y", "mean", "inv"], {"s": w(3, 4)})
    check(proto)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_select_last_index(op):
    proto = model([node(op, ["x"], ["y"], axis=1, select_last_index=1, keepdims=0)],
                  [("x", [2, 5, 3])], [("y", np.int64)])
    check(proto, {"x": RNG.integers(0, 3, (2, 5, 3)).astype(F)})


def test_space_to_depth_crd():
    proto = model([node("SpaceToDepth", ["x"], ["y"], blocksize=2, mode="CRD")],
                  [("x", [1, 3, 4, 6])], ["y"], opset=onnx.defs.onnx_opset_version())
    check(proto)


def test_pow_mixed_types():
    proto = model([node("Pow", ["x", "e"], ["y"])], [("x", [2, 5]), ("e", [5], np.int64)],
                  ["y"], opset=15)
    check(proto, {"x": RNG.random((2, 5)).astype(F) + 0.5,
                  "e": np.array([0, 1, 2, 3, 1], np.int64)})


def test_gather_negative_runtime_indices():
    proto = model([node("Gather", ["x", "i"], ["y"], axis=1)],
                  [("x", [2, 5]), ("i", [3], np.int64)], ["y"])
    check(proto, {"x": w(2, 5), "i": np.array([-1, 0, -5], np.int64)})


def test_conv_transpose_output_shape_beyond_full():
    proto = model([node("ConvTranspose", ["x", "W"], ["y"], strides=[3, 2],
                        output_shape=[10, 8])],
                  [("x", [1, 1, 3, 3])], ["y"], {"W": w(1, 2, 3, 3)})
    check(proto)
