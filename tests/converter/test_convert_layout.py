"""NCHW graphs become NHWC with no transposes left: small convnet patterns (residual blocks,
concatenated convs, squeeze-excite, hard-swish), inputs that reach a conv or not; whole small
models at every opset, with external data, and the caller's proto left as it was."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from edgelite.converter import TFLiteConverter
from tests.converter.onnx_cases import F, check, convert, model, node, w


# -- layouts through small convnet patterns --------------------------------------------------------

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


# -- model-level -----------------------------------------------------------------------------------

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
