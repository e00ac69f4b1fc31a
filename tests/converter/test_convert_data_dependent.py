"""Sizes that follow the values (NonZero's count, the boxes NonMaxSuppression keeps), with no
shape the model declares: SSDlite's per-class score filters (NonZero -> GatherND -> TopK with
k = min(count, K)) and its batched NMS. The converted file runs at every count, zero included,
in edgelite and in LiteRT, against onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from edgelite.converter.convert import convert_onnx  # noqa: E402
from edgelite.interpreter import Interpreter  # noqa: E402
from tests.oracles import onnxruntime_run  # noqa: E402

litert = pytest.importorskip("ai_edge_litert.interpreter")
INT64_MAX = 2**63 - 1


def _const(name, value, dtype=TensorProto.INT64):
    value = np.asarray(value)
    return helper.make_tensor(name, dtype, value.shape, value.reshape(-1).tolist())


def _model(nodes, inputs, outputs, inits):
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(proto)
    return proto


def score_filter():
    """scores > 0 -> NonZero -> GatherND -> TopK(min(count, 3)) -> x2, then [:2] of that."""
    f = TensorProto.FLOAT
    nodes = [helper.make_node("Greater", ["x", "zero"], ["keep"]),
             helper.make_node("NonZero", ["keep"], ["nz"]),
             helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
             helper.make_node("GatherND", ["x", "idx"], ["picked"]),
             helper.make_node("Shape", ["picked"], ["count"]),
             helper.make_node("Concat", ["count", "limit"], ["both"], axis=0),
             helper.make_node("ReduceMin", ["both"], ["k"], keepdims=1),
             helper.make_node("TopK", ["picked", "k"], ["top", "where"]),
             helper.make_node("Mul", ["top", "two"], ["doubled"]),
             helper.make_node("Slice", ["doubled", "start", "end"], ["first"])]
    return _model(nodes, [helper.make_tensor_value_info("x", f, [12])],
                  [helper.make_tensor_value_info("first", f, ["m"]),
                   helper.make_tensor_value_info("where", TensorProto.INT64, ["n"])],
                  [_const("zero", 0.0, f), _const("limit", [3]), _const("two", 2.0, f),
                   _const("start", [0]), _const("end", [2])])


def filtered_nms():
    """Boxes whose score is above 0 -> NonMaxSuppression (all of them, IoU 0.3) -> the kept
    boxes: torchvision's batched_nms after its score filter."""
    f = TensorProto.FLOAT
    nodes = [helper.make_node("Greater", ["s", "zero"], ["keep"]),
             helper.make_node("NonZero", ["keep"], ["nz"]),
             helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
             helper.make_node("GatherND", ["s", "idx"], ["s2"]),
             helper.make_node("GatherND", ["b", "idx"], ["b2"]),
             helper.make_node("Unsqueeze", ["b2", "axis0"], ["b3"]),
             helper.make_node("Unsqueeze", ["s2", "axis0"], ["s3"]),
             helper.make_node("Unsqueeze", ["s3", "axis0"], ["s4"]),
             helper.make_node("NonMaxSuppression", ["b3", "s4", "all", "iou"], ["selected"]),
             helper.make_node("Gather", ["selected", "two"], ["column"], axis=1),
             helper.make_node("Squeeze", ["column", "axis1"], ["kept"]),
             helper.make_node("Gather", ["b2", "kept"], ["boxes"], axis=0)]
    return _model(nodes, [helper.make_tensor_value_info("b", f, [16, 4]),
                          helper.make_tensor_value_info("s", f, [16])],
                  [helper.make_tensor_value_info("boxes", f, ["n", 4]),
                   helper.make_tensor_value_info("kept", TensorProto.INT64, ["n"])],
                  [_const("zero", 0.0, f), _const("axis0", [0]), _const("axis1", [1]),
                   _const("all", [INT64_MAX]), _const("iou", [0.3], f), _const("two", [2])])


def _run(content: bytes, cls, feeds: list) -> list:
    it = cls(model_content=content)
    it.allocate_tensors()
    for detail, x in zip(it.get_input_details(), feeds):
        it.set_tensor(detail["index"], x)
    it.invoke()
    return [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]


def _check(proto, feeds: dict) -> None:
    content = convert_onnx(proto).content
    names = [o.name for o in proto.graph.output]
    expected = onnxruntime_run(proto, feeds, names)
    for cls in (Interpreter, litert.Interpreter):
        got = _run(content, cls, list(feeds.values()))
        for g, e in zip(got, expected):
            assert g.shape == e.shape, (cls, g.shape, e.shape)
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6, err_msg=str(cls))


@pytest.mark.parametrize("passing", [12, 5, 2, 1, 0])
def test_score_filter_at_every_count(passing):
    rng = np.random.default_rng(passing)
    x = -np.abs(rng.standard_normal(12)).astype(np.float32)
    x[rng.permutation(12)[:passing]] *= -1
    _check(score_filter(), {"x": x})


def test_litert_sizes_the_outputs_by_the_values():
    """The file's nominal count (2) shows nowhere at run time: 6 values pass, TopK keeps 3,
    the slice 2 of them."""
    content = convert_onnx(score_filter()).content
    x = np.linspace(-1, 1, 12, dtype=np.float32)    # 6 above 0: top 3, first 2
    got = _run(content, litert.Interpreter, [x])
    assert [g.shape for g in got] == [(2,), (3,)]
    np.testing.assert_allclose(got[0], 2 * x[::-1][:2], rtol=1e-6)


def _boxes(rng, count: int = 16, empty=(), line=()):
    corner = rng.uniform(0, 10, (count, 2)).astype(np.float32)
    boxes = np.concatenate([corner, corner + rng.uniform(1, 4, (count, 2))], 1)
    for k in empty:          # a box clipped to nothing: x1 == x2
        boxes[k, 3] = boxes[k, 1]
    for k in line:           # boxes clipped to the edge y = 0, overlapping along it
        boxes[k] = [0, 1 + 0.1 * k, 0, 6 + 0.1 * k]
    return boxes.astype(np.float32)


@pytest.mark.parametrize("case", ["random", "empty_box", "edge_line", "none_pass"])
def test_nms_after_a_score_filter(case):
    rng = np.random.default_rng(7)
    boxes = _boxes(rng, empty=(3, 9) if case == "empty_box" else (),
                   line=(2, 5, 11) if case == "edge_line" else ())
    scores = rng.standard_normal(16).astype(np.float32)
    if case == "empty_box":
        scores[[3, 9]] = [5.0, 4.0]        # selected first: TFLite would repeat them
    if case == "edge_line":
        scores[[2, 5, 11]] = [5.0, 4.0, 3.0]   # onnxruntime keeps all three
    if case == "none_pass":
        scores = -np.abs(scores)
    _check(filtered_nms(), {"b": boxes, "s": scores})


def test_nms_of_several_batches_and_classes_center_boxes():
    """[2 batches, 3 classes] unrolled in ONNX's order (batch, class); center-point boxes;
    a score threshold and a max of 2 per class."""
    f = TensorProto.FLOAT
    proto = _model([helper.make_node("NonMaxSuppression", ["b", "s", "most", "iou", "floor"],
                                     ["selected"], center_point_box=1)],
                   [helper.make_tensor_value_info("b", f, [2, 10, 4]),
                    helper.make_tensor_value_info("s", f, [2, 3, 10])],
                   [helper.make_tensor_value_info("selected", TensorProto.INT64, ["n", 3])],
                   [_const("most", [2]), _const("iou", [0.2], f), _const("floor", [0.3], f)])
    rng = np.random.default_rng(3)
    centers = rng.uniform(0, 8, (2, 10, 2))
    boxes = np.concatenate([centers, rng.uniform(1, 4, (2, 10, 2))], -1).astype(np.float32)
    scores = rng.uniform(0, 1, (2, 3, 10)).astype(np.float32)
    _check(proto, {"b": boxes, "s": scores})


@pytest.mark.parametrize("runtime", ["edgelite", "litert"])
def test_onnx_backend_cases(runtime, conformance_tool):
    """ONNX's backend node cases of NonMaxSuppression (their thresholds and max count are graph
    inputs: known only while running) and NonZero, with onnx's own expected outputs."""
    from edgelite.converter import conformance

    module = conformance_tool
    cases = [c for c in module.iter_cases(conformance.case_root(module))
             if c.name.startswith(("test_nonmaxsuppression_", "test_nonzero"))]
    assert len(cases) >= 11
    result = conformance.score(module, cases, runtime)
    failed = {name: v for name, v in result["cases"].items() if v[0] != "pass"}
    assert not failed
