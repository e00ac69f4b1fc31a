"""ONNX parameters given as graph inputs (axes, shapes, pads, repeats, k, ...): they stay inputs of
the .tflite model, which computes with dynamic kernels; edgelite and LiteRT both match
onnxruntime. Also TopK, CumSum and GatherElements."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgelite.converter.check import compare
from tests.converter.onnx_cases import convert, node
from tests.oracles import onnxruntime_run

F = np.float32
I64 = np.int64
RNG = np.random.default_rng(11)
_ELEM = {np.dtype(F): TensorProto.FLOAT, np.dtype(I64): TensorProto.INT64,
         np.dtype(np.int32): TensorProto.INT32}


def declared(nodes, feeds: dict, inits=None, opset=18):
    """A model whose inputs are `feeds` and whose outputs declare the shapes onnxruntime gives
    on them (as ONNX's test cases do: shape inference cannot know them)."""
    ins = [helper.make_tensor_value_info(k, _ELEM[v.dtype], v.shape) for k, v in feeds.items()]
    names = [o for n in nodes[-1:] for o in n.output]
    graph = helper.make_graph(nodes, "case", ins, [],
                              [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    proto.ir_version = 8
    inferred = {vi.name: vi for vi in onnx.shape_inference.infer_shapes(proto).graph.value_info}
    proto.graph.output.extend(inferred[name] for name in names)
    results = onnxruntime_run(proto, feeds)
    del proto.graph.output[:]
    for name, value in zip(names, results):
        proto.graph.output.append(helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape))
    onnx.checker.check_model(proto)
    return proto


def check(proto, feeds: dict):
    conversion = convert(proto, {k: v.shape for k, v in feeds.items()})
    names = [e["name"] for e in conversion.io_layout["inputs"]]
    assert names == list(feeds), "every input stays a graph input"
    rows = compare(conversion, proto, [feeds[k] for k in names])
    for row in rows:
        assert set(row["errors"]) == {"edgelite", "LiteRT"}, row
        assert row["ok"], row
    return conversion


def x(*shape):
    return RNG.standard_normal(shape).astype(F)


CASES = {
    "reshape": ([node("Reshape", ["x", "s"], ["y"])],
                {"x": x(2, 3, 4), "s": np.array([0, -1, 2], I64)}),
    "reshape_allowzero": ([node("Reshape", ["x", "s"], ["y"], allowzero=1)],
                          {"x": x(2, 3, 4), "s": np.array([4, 6], I64)}),
    "tile": ([node("Tile", ["x", "r"], ["y"])], {"x": x(2, 3), "r": np.array([2, 1], I64)}),
    "expand": ([node("Expand", ["x", "s"], ["y"])],
               {"x": x(3, 1), "s": np.array([2, 1, 4], I64)}),
    "slice": ([node("Slice", ["x", "b", "e", "a", "s"], ["y"])],
              {"x": x(5, 6, 4), "b": np.array([1, -1], I64), "e": np.array([4, -100], I64),
               "a": np.array([0, 2], I64), "s": np.array([2, -1], I64)}),
    "slice_to_end": ([node("Slice", ["x", "b", "e"], ["y"])],
                     {"x": x(5, 6), "b": np.array([2], I64),
                      "e": np.array([2**63 - 1], I64)}),
    "split": ([node("Split", ["x", "s"], ["y0", "y1"], axis=1)],
              {"x": x(2, 5), "s": np.array([2, 3], I64)}),
    "unsqueeze": ([node("Unsqueeze", ["x", "a"], ["y"])],
                  {"x": x(3, 4), "a": np.array([0, -1], I64)}),
    "reduce_sum": ([node("ReduceSum", ["x", "a"], ["y"], keepdims=0)],
                   {"x": x(2, 3, 4), "a": np.array([0, -1], I64)}),
    "reduce_max_keep": ([node("ReduceMax", ["x", "a"], ["y"])],
                        {"x": x(2, 3, 4), "a": np.array([1], I64)}),
    "pad_constant": ([node("Pad", ["x", "p", "v"], ["y"])],
                     {"x": x(2, 3), "p": np.array([0, 1, 2, 0], I64), "v": np.array(1.5, F)}),
    "pad_reflect_axes": ([node("Pad", ["x", "p", "", "a"], ["y"], mode="reflect")],
                         {"x": x(2, 3, 4), "p": np.array([1, 2, 0, 1], I64),
                          "a": np.array([2, 1], I64)}),
    "pad_edge": ([node("Pad", ["x", "p"], ["y"], mode="edge")],
                 {"x": x(3, 4), "p": np.array([1, 0, 2, 3], I64)}),
    "pad_wrap": ([node("Pad", ["x", "p"], ["y"], mode="wrap")],
                 {"x": x(3, 4), "p": np.array([2, 1, 0, 3], I64)}),
    "constant_of_shape": ([node("ConstantOfShape", ["s"], ["y"],
                                value=numpy_helper.from_array(np.array([2.5], F)))],
                          {"s": np.array([2, 3], I64)}),
    "range": ([node("Range", ["a", "b", "c"], ["y"])],
              {"a": np.array(1, I64), "b": np.array(10, I64), "c": np.array(3, I64)}),
    "top_k": ([node("TopK", ["x", "k"], ["v", "i"], axis=0)],
              {"x": x(5, 3), "k": np.array([2], I64)}),
    "cumsum_axis": ([node("CumSum", ["x", "a"], ["y"], exclusive=1)],
                    {"x": x(3, 4), "a": np.array(1, I64)}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_runtime_parameter(name):
    nodes, feeds = CASES[name]
    check(declared(nodes, feeds), feeds)


@pytest.mark.parametrize("axis, largest", [(-1, 1), (0, 0), (1, 1)])
def test_top_k(axis, largest):
    feeds = {"x": np.round(x(4, 6) * 2).astype(F)}    # ties: the lower index first
    nodes = [node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)]
    conversion = check(declared(nodes, feeds, {"k": np.array([3], I64)}), feeds)
    assert "TOPK_V2" in conversion.ops_out


@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum(exclusive, reverse):
    feeds = {"x": x(3, 5)}
    nodes = [node("CumSum", ["x", "a"], ["y"], exclusive=exclusive, reverse=reverse)]
    conversion = check(declared(nodes, feeds, {"a": np.array(-1, I64)}), feeds)
    assert conversion.ops_out == {"CUMSUM": 1}


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_gather_elements(axis):
    feeds = {"x": x(3, 4, 5), "i": RNG.integers(-3, 3, (3, 2, 5)).astype(I64)}
    if axis != 1:
        feeds["i"] = RNG.integers(-3, 3, (2, 4, 5) if axis == 0 else (3, 4, 2)).astype(I64)
    check(declared([node("GatherElements", ["x", "i"], ["y"], axis=axis)], feeds), feeds)


RESIZES = {
    "cubic_scales": (dict(mode="cubic"), "scales", np.array([1, 1, 0.6, 1.7], F)),
    "cubic_antialias_exclude": (dict(mode="cubic", antialias=1, exclude_outside=1,
                                     cubic_coeff_a=-0.5), "scales", np.array([1, 1, 0.5, 0.7], F)),
    "linear_antialias_sizes": (dict(mode="linear", antialias=1), "sizes",
                               np.array([1, 2, 3, 4], I64)),
    "linear_symmetric": (dict(mode="linear", coordinate_transformation_mode="half_pixel_symmetric"),
                         "scales", np.array([1, 1, 2.2, 0.8], F)),
    "nearest_not_larger": (dict(mode="nearest", axes=[2, 3], keep_aspect_ratio_policy="not_larger"),
                           "sizes", np.array([9, 8], I64)),
    "nearest_channels": (dict(mode="nearest"), "scales", np.array([1, 2, 1, 1], F)),
}


@pytest.mark.parametrize("given", ["constant", "input"])
@pytest.mark.parametrize("name", list(RESIZES))
def test_resize_by_weights(name, given):
    """Resizes TFLite has no op for: one matrix per axis (BATCH_MATMUL), with the scales or
    sizes constant (weights folded in float64) or a graph input (computed while running)."""
    attrs, kind, value = RESIZES[name]
    inputs = ["x", "", "p"] if kind == "scales" else ["x", "", "", "p"]
    feeds = {"x": x(1, 2, 5, 6)}
    if given == "input":
        feeds["p"] = value
        proto = declared([node("Resize", inputs, ["y"], **attrs)], feeds)
    else:
        proto = declared([node("Resize", inputs, ["y"], **attrs)], feeds, {"p": value})
    conversion = check(proto, feeds)
    assert "BATCH_MATMUL" in conversion.ops_out


def test_resize_crop_and_resize_runtime_roi():
    feeds = {"x": x(1, 1, 4, 5), "roi": np.array([0.1, -0.2, 0.8, 1.3], F)}
    nodes = [node("Resize", ["x", "roi", "", "s"], ["y"], mode="linear", axes=[2, 3],
                  coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=3.0)]
    check(declared(nodes, feeds, {"s": np.array([3, 6], I64)}), feeds)
