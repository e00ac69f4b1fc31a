"""TFLite_Detection_PostProcess (the custom op ending SSD detectors) against LiteRT: regular and
fast NMS, with and without a background column, float32 and uint8 inputs, the options'
defaults and coercions."""
from __future__ import annotations

import numpy as np
import pytest
from flatbuffers import flexbuffers

from edgelite.interpreter.kernels.detection import read_flexbuffer_map
from tests.opmodel import In, Out, op_model, run_edgelite, run_litert

pytest.importorskip("ai_edge_litert",
                    reason="LiteRT (ai-edge-litert) is the oracle: pip install -e '.[dev]'")

NAME = "TFLite_Detection_PostProcess"
BASE = dict(max_detections=6, max_classes_per_detection=1, detections_per_class=4,
            use_regular_nms=False, nms_score_threshold=0.3, nms_iou_threshold=0.5,
            num_classes=4, y_scale=10.0, x_scale=10.0, h_scale=5.0, w_scale=5.0)


def _inputs(n=40, classes=4, background=True, coords=4, seed=0):
    rng = np.random.default_rng(seed)
    # anchors in clusters, so that decoded boxes overlap and suppression has work to do
    centers = rng.random((5, 2))
    yx = centers[rng.integers(0, 5, n)] + rng.standard_normal((n, 2)) * 0.03
    anchors = np.concatenate([yx, 0.1 + rng.random((n, 2)) * 0.2], 1).astype(np.float32)
    enc = (rng.standard_normal((1, n, coords)) * 0.5).astype(np.float32)
    cls = rng.random((1, n, classes + int(background))).astype(np.float32)
    return enc, cls, anchors


def _model(options: dict, enc, cls, anchors, quant=None) -> bytes:
    if quant is None:
        ins = [In(enc.shape), In(cls.shape), anchors]
        const_quant = None
    else:
        ins = [In(enc.shape, "uint8", quant[0]), In(cls.shape, "uint8", quant[1]), anchors]
        const_quant = {2: quant[2]}
    return op_model("CUSTOM", ins, [Out(), Out(), Out(), Out()], custom_code=NAME,
                    custom_options=flexbuffers.Dumps(options), const_quant=const_quant)


def _compare(ours, theirs, options):
    """Same shapes; same values over the detections (fast NMS leaves LiteRT's entries past
    them unwritten, so only the written ones are compared)."""
    assert [a.shape for a in ours] == [b.shape for b in theirs]
    count = int(theirs[3][0])
    assert int(ours[3][0]) == count
    width = 1 if options.get("use_regular_nms") else options["max_classes_per_detection"]
    per_anchor = width if options.get("use_regular_nms") else \
        min(width, options["num_classes"])
    rows = [k * width + j for k in range(count) for j in range(per_anchor)]
    if options.get("use_regular_nms"):
        rows = list(range(ours[1].shape[1]))  # regular NMS zero-fills the rest
    np.testing.assert_array_equal(ours[0][0, rows], theirs[0][0, rows])
    np.testing.assert_array_equal(ours[1][0, rows], theirs[1][0, rows])
    np.testing.assert_array_equal(ours[2][0, rows], theirs[2][0, rows])
    return count


CASES = {
    "fast": {},
    "fast_two_classes_per_detection": dict(max_classes_per_detection=2),
    "fast_more_classes_than_exist": dict(max_classes_per_detection=6),
    "fast_low_threshold": dict(nms_score_threshold=0.0, max_detections=20),
    "fast_no_background": dict(background=False),
    "regular": dict(use_regular_nms=True),
    "regular_one_per_class": dict(use_regular_nms=True, detections_per_class=1),
    "regular_many": dict(use_regular_nms=True, detections_per_class=30, max_detections=25,
                         nms_score_threshold=0.05),
    "regular_no_background": dict(use_regular_nms=True, background=False),
    "regular_tight_iou": dict(use_regular_nms=True, nms_iou_threshold=0.05),
    "regular_one_class": dict(use_regular_nms=True, num_classes=1, detections_per_class=10),
    "none_above_threshold": dict(nms_score_threshold=1.5),
    "keypoint_coordinates": dict(coords=10),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("reference", [True, False], ids=["ref", "default"])
def test_detection_postprocess_matches_litert(name, reference):
    spec = dict(CASES[name])
    shape_args = {k: spec.pop(k) for k in ("background", "coords") if k in spec}
    options = {**BASE, **spec}
    enc, cls, anchors = _inputs(classes=options["num_classes"], **shape_args)
    content = _model(options, enc, cls, anchors)
    ours, theirs = run_edgelite(content, [enc, cls]), run_litert(content, [enc, cls], reference)
    count = _compare(ours, theirs, options)
    if name != "none_above_threshold":
        assert count > 0
    else:
        assert count == 0


@pytest.mark.parametrize("regular", [False, True])
def test_detection_postprocess_uint8_inputs(regular):
    enc, cls, anchors = _inputs(seed=3)
    q_enc, q_cls, q_anchor = (0.02, 128), (1 / 255, 0), (1 / 255, 0)
    enc_q = np.clip(np.round(enc / q_enc[0]) + q_enc[1], 0, 255).astype(np.uint8)
    cls_q = np.clip(np.round(cls / q_cls[0]), 0, 255).astype(np.uint8)
    anchors_q = np.clip(np.round(anchors / q_anchor[0]), 0, 255).astype(np.uint8)
    options = {**BASE, "use_regular_nms": regular}
    content = _model(options, enc_q, cls_q, anchors_q, quant=(q_enc, q_cls, q_anchor))
    ours, theirs = run_edgelite(content, [enc_q, cls_q]), run_litert(content, [enc_q, cls_q])
    assert _compare(ours, theirs, options) > 0


def test_detection_postprocess_option_defaults_and_integer_floats():
    """Absent detections_per_class / use_regular_nms take TFLite's defaults (100, fast NMS);
    scales written as integers read as floats."""
    options = {k: v for k, v in BASE.items() if k not in ("detections_per_class",
                                                          "use_regular_nms")}
    options.update(y_scale=10, x_scale=10, h_scale=5, w_scale=5)
    enc, cls, anchors = _inputs(seed=5)
    content = _model(options, enc, cls, anchors)
    ours, theirs = run_edgelite(content, [enc, cls]), run_litert(content, [enc, cls])
    assert _compare(ours, theirs, {**options, "max_classes_per_detection": 1}) > 0


def test_flexbuffer_reader():
    data = flexbuffers.Dumps({"a": 1, "b": 2.5, "c": True, "d": "text"})
    assert read_flexbuffer_map(data) == {"a": 1, "b": 2.5, "c": True, "d": "text"}
    assert read_flexbuffer_map(b"") == {}
