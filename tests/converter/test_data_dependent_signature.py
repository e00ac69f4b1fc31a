"""Sizes that follow the values are -1 in the file's shape_signature: the outputs' (as
`get_output_details()` reports them, in edgelite and in LiteRT) and every tensor's between the
op that makes such a size and the outputs; the dims that follow nothing stay fixed. The files
still load, allocate and run in both runtimes, matching onnxruntime at several counts."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from edgelite.converter.convert import convert_onnx  # noqa: E402
from edgelite.interpreter import Interpreter  # noqa: E402
from tests.converter.test_convert_data_dependent import (  # noqa: E402
    _boxes, _model, filtered_nms, score_filter)
from tests.opmodel import run_interpreter  # noqa: E402
from tests.oracles import onnxruntime_run  # noqa: E402

litert = pytest.importorskip("ai_edge_litert.interpreter")
RUNTIMES = (Interpreter, litert.Interpreter)


def _signatures(content: bytes, cls) -> list:
    it = cls(model_content=content)
    it.allocate_tensors()
    return [tuple(int(d) for d in o["shape_signature"]) for o in it.get_output_details()]


def _tensor_signature(model, op_name: str) -> list:
    sg = model.subgraphs[0]
    return [sg.tensors[op.outputs[0]].shape_signature for op in sg.operators
            if op.op == op_name]


def _matches(proto, content, feeds: dict) -> None:
    names = [o.name for o in proto.graph.output]
    expected = onnxruntime_run(proto, feeds, names)
    for cls in RUNTIMES:
        got_all = run_interpreter(cls(model_content=content), list(feeds.values()))
        for got, want in zip(got_all, expected):
            assert got.shape == want.shape, (cls, got.shape, want.shape)
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_score_filter_outputs_and_intermediates_are_minus_one():
    conversion = convert_onnx(score_filter())
    assert not conversion.warnings
    for cls in RUNTIMES:
        # TopK's values after the [:2] slice, TopK's indices: both follow the count.
        assert _signatures(conversion.content, cls) == [(-1,), (-1,)], cls
    assert _tensor_signature(conversion.model, "WHERE") == [(-1, 1)]   # [count, rank]
    assert _tensor_signature(conversion.model, "GREATER") == [None]    # follows no value
    for passing in (12, 3, 1, 0):
        x = -np.ones(12, np.float32)
        x[:passing] = np.arange(1, passing + 1)
        _matches(score_filter(), conversion.content, {"x": x})


def test_nms_outputs_are_minus_one_with_their_fixed_dims_kept():
    conversion = convert_onnx(filtered_nms())
    for cls in RUNTIMES:
        assert _signatures(conversion.content, cls) == [(-1, 4), (-1,)], cls
    # its boxes come through the score filter: a count of the values
    assert _tensor_signature(conversion.model, "NON_MAX_SUPPRESSION_V4") == [(-1,)]
    rng = np.random.default_rng(1)
    for case in range(3):
        scores = rng.standard_normal(16).astype(np.float32) - case
        _matches(filtered_nms(), conversion.content, {"b": _boxes(rng), "s": scores})


def dynamic_nms():
    """NonMaxSuppression of [1, n, 4] boxes, n an open input dim, at most 3 kept."""
    f = TensorProto.FLOAT
    most = helper.make_tensor("most", TensorProto.INT64, [1], [3])
    iou = helper.make_tensor("iou", f, [1], [0.4])
    return _model([helper.make_node("NonMaxSuppression", ["b", "s", "most", "iou"],
                                    ["selected"])],
                  [helper.make_tensor_value_info("b", f, [1, "n", 4]),
                   helper.make_tensor_value_info("s", f, [1, 1, "n"])],
                  [helper.make_tensor_value_info("selected", TensorProto.INT64, ["k", 3])],
                  [most, iou])


def test_a_data_dependent_dim_beside_an_open_input_dim():
    conversion = convert_onnx(dynamic_nms())
    assert not conversion.warnings
    for cls in RUNTIMES:
        assert _signatures(conversion.content, cls) == [(-1, 3)], cls
        it = cls(model_content=conversion.content)
        assert [tuple(d["shape_signature"]) for d in it.get_input_details()] == \
            [(1, -1, 4), (1, 1, -1)]
    rng = np.random.default_rng(2)
    for n in (16, 5, 40):
        boxes = _boxes(rng, n)[None]
        scores = rng.uniform(0, 1, (1, 1, n)).astype(np.float32)
        _matches(dynamic_nms(), conversion.content, {"b": boxes, "s": scores})


def _corpus_file(name: str) -> Path:
    root = Path(os.environ.get("EDGELITE_TORCH_CORPUS", "/tmp/corpus/fixed"))
    path = root / name
    if not path.exists():
        pytest.skip(f"{path} not found: export it with `python tools/torch_corpus.py {root} "
                    "--only tv_ssdlite` (needs torchvision), or set $EDGELITE_TORCH_CORPUS")
    return path


def test_ssdlite_detections_are_minus_one():
    """torchvision's SSDlite (random weights, tools/torch_corpus.py): boxes [n, 4], scores [n]
    and labels [n], n the detections its score filters and NMS keep."""
    path = _corpus_file("tv_ssdlite.torchscript.onnx")
    conversion = convert_onnx(str(path))
    assert not conversion.warnings
    for cls in RUNTIMES:
        assert _signatures(conversion.content, cls) == [(-1, 4), (-1,), (-1,)], cls
    feeds = dict(np.load(path.with_suffix(".npz")))
    proto = onnx.load(str(path))
    names = [o.name for o in proto.graph.output]
    expected = onnxruntime_run(str(path), feeds, names)
    x = np.transpose(feeds["x"], conversion.io_layout["inputs"][0]["perm"])
    for cls in RUNTIMES:
        got = run_interpreter(cls(model_content=conversion.content), [x])
        assert [g.shape for g in got] == [e.shape for e in expected], cls
        assert len(got[1]) > 2    # more detections than the file's nominal 2


def test_the_litert_guard_covers_a_module_that_imported_convert_onnx_by_name():
    """tests/conftest.py wraps convert_onnx before test modules import it (this one imported it
    at collection): every file converted here also went through LiteRT's allocate_tensors."""
    if os.environ.get("EDGELITE_LITERT_GUARD") == "0":
        pytest.skip("EDGELITE_LITERT_GUARD=0 turns the guard off")
    assert getattr(convert_onnx, "__wrapped__", None) is not None
