"""Shapes, slicing and data movement (Reshape ... Pad, shape arithmetic folded), reductions and
ArgMax / ArgMin. One small ONNX model per op form, converted and checked in edgelite's
interpreter and in LiteRT against onnxruntime (onnx_cases.check)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, numpy_helper

from tests.converter.onnx_cases import RNG, F, check, model, node, w


# -- shapes, slicing, data movement ----------------------------------------------------------------

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


def test_gather_negative_runtime_indices():
    proto = model([node("Gather", ["x", "i"], ["y"], axis=1)],
                  [("x", [2, 5]), ("i", [3], np.int64)], ["y"])
    check(proto, {"x": w(2, 5), "i": np.array([-1, 0, -5], np.int64)})


# -- reductions ------------------------------------------------------------------------------------

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


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_select_last_index(op):
    proto = model([node(op, ["x"], ["y"], axis=1, select_last_index=1, keepdims=0)],
                  [("x", [2, 5, 3])], [("y", np.int64)])
    check(proto, {"x": RNG.integers(0, 3, (2, 5, 3)).astype(F)})
