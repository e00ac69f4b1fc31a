"""NonMaxSuppression with no classes (or no batches) fixed by the input shapes selects nothing:
ONNX's empty [0, 3], in edgelite and LiteRT as in onnxruntime (it was refused, naming an
internal CONCATENATION of no inputs); a constant IoU threshold outside [0, 1] is refused, as
onnxruntime refuses it (a negative one was clamped, keeping boxes ONNX suppresses)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the converter needs onnx: pip install -e '.[dev]'")
from onnx import TensorProto, helper  # noqa: E402

from edgelite.converter.convert import convert_onnx  # noqa: E402
from edgelite.converter.errors import ConversionError  # noqa: E402
from edgelite.interpreter import Interpreter  # noqa: E402
from tests.oracles import onnxruntime_run  # noqa: E402

litert = pytest.importorskip("ai_edge_litert.interpreter")


def _nms_model(iou=0.5):
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("NonMaxSuppression", ["boxes", "scores", "most", "iou"], ["sel"])],
        "g", [helper.make_tensor_value_info("boxes", f, ["b", 4, 4]),
              helper.make_tensor_value_info("scores", f, ["b", "c", 4])],
        [helper.make_tensor_value_info("sel", TensorProto.INT64, ["n", 3])],
        [helper.make_tensor("most", TensorProto.INT64, [1], [3]),
         helper.make_tensor("iou", f, [1], [iou])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("batches, classes", [(1, 0), (0, 2)])
def test_no_classes_or_batches_select_nothing(batches, classes):
    proto = _nms_model()
    boxes = np.random.default_rng(0).uniform(0, 1, (batches, 4, 4)).astype(np.float32)
    scores = np.zeros((batches, classes, 4), np.float32)
    expected = onnxruntime_run(proto, {"boxes": boxes, "scores": scores}, ["sel"])[0]
    assert expected.shape == (0, 3)
    content = convert_onnx(proto, {"boxes": boxes.shape, "scores": scores.shape}).content
    for cls in (Interpreter, litert.Interpreter):
        it = cls(model_content=content)
        it.allocate_tensors()
        for d in it.get_input_details():
            it.set_tensor(d["index"], boxes if d["name"] == "boxes" else scores)
        it.invoke()
        got = it.get_tensor(it.get_output_details()[0]["index"])
        assert got.shape == expected.shape and got.dtype == expected.dtype, cls


@pytest.mark.parametrize("iou", [-0.5, 1.5, float("nan")])
def test_an_iou_threshold_outside_onnx_range_is_refused(iou):
    with pytest.raises(ConversionError, match=r"NonMaxSuppression.*iou_threshold .* is outside "
                       r"ONNX's range \[0, 1\]"):
        convert_onnx(_nms_model(iou), {"boxes": (1, 4, 4), "scores": (1, 2, 4)})
