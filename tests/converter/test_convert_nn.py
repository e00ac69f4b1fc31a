"""The layers of a network: Conv, pools, Gemm / MatMul, Softmax, normalizations and GELU's Erf.
One small ONNX model per op form, converted and checked in edgelite's interpreter and in LiteRT
against onnxruntime (onnx_cases.check)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.converter.onnx_cases import F, check, model, node, w


# -- Conv ------------------------------------------------------------------------------------------

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


# -- pools -----------------------------------------------------------------------------------------

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


# -- Gemm / MatMul ---------------------------------------------------------------------------------

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


# -- softmax ---------------------------------------------------------------------------------------

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


# -- normalizations, erf, GELU ---------------------------------------------------------------------

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


def test_batch_norm_with_runtime_statistics():
    proto = model([node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])],
                  [("x", [2, 3, 4]), ("s", [3]), ("b", [3]), ("m", [3]), ("v", [3])], ["y"])
    check(proto, {"x": w(2, 3, 4), "s": w(3), "b": w(3), "m": w(3),
                  "v": np.abs(w(3)) + 0.1})


def test_layer_norm_mean_and_inv_std_dev_outputs():
    proto = model([node("LayerNormalization", ["x", "s"], ["y", "mean", "inv"], axis=1)],
                  [("x", [2, 3, 4])], ["y", "mean", "inv"], {"s": w(3, 4)})
    check(proto)
