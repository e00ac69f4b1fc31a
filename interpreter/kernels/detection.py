"""TFLite_Detection_PostProcess, the custom op that ends SSD detectors (TensorFlow's Object
Detection API, MediaPipe, Model Maker): decode box encodings against anchors, then non-max
suppression over the classes, as TFLite's detection_postprocess.cc.

Inputs: box encodings [1, N, >=4] (y, x, h, w relative to the anchor), class scores
[1, N, classes (+1 background)], anchors [N, 4] (y, x, h, w); float32, or uint8 with their
quantization. Outputs (float32): boxes [1, D, 4] (ymin, xmin, ymax, xmax), classes [1, D],
scores [1, D] and the number of detections [1], where D = max_detections (regular NMS: per
class, then the best over all classes) or max_detections * max_classes_per_detection (fast
NMS: one suppression over each anchor's best class). Entries past the detections are zero.
The options are a FlexBuffer map in the operator's custom_options.
"""
from __future__ import annotations

import numpy as np

from .registry import register_custom_op

NAME = "TFLite_Detection_PostProcess"


def read_flexbuffer_map(data: bytes | None) -> dict:
    """A custom op's FlexBuffer options as a dict ({} when there are none)."""
    if not data:
        return {}
    from flatbuffers import flexbuffers
    value = flexbuffers.Loads(bytes(data))
    if not isinstance(value, dict):
        raise ValueError(f"custom options are a FlexBuffer {type(value).__name__}, not a map")
    return value


def _options(node) -> dict:
    """The op's options with TFLite's coercions and defaults (absent numbers read as 0)."""
    try:
        m = read_flexbuffer_map(node.custom_options)
    except Exception as e:  # noqa: BLE001  (a malformed buffer: say so, naming the op)
        raise node.fail(f"cannot read the custom options: {e}") from e

    def num(key, kind, default=0):
        v = m.get(key)
        return kind(default if v is None else v)
    return dict(max_detections=num("max_detections", int),
                max_classes_per_detection=num("max_classes_per_detection", int),
                detections_per_class=num("detections_per_class", int, 100),
                use_regular_nms=bool(m.get("use_regular_nms") or False),
                score_threshold=np.float32(num("nms_score_threshold", float)),
                iou_threshold=np.float32(num("nms_iou_threshold", float)),
                num_classes=num("num_classes", int),
                scales=[num(k, float) for k in ("y_scale", "x_scale", "h_scale", "w_scale")])


def _dequantize(info, x):
    if x.dtype == np.float32:
        return x
    return (x.astype(np.float32) - np.float32(info.zero_point)) * np.float32(info.scale)


def decode_boxes(encodings, anchors, scales) -> np.ndarray:
    """[N, 4] corner boxes from center-size encodings; in double precision as TFLite, then the
    corners in float32."""
    e = encodings[:, :4].astype(np.float64)
    a = anchors.astype(np.float64)
    ys, xs, hs, ws = (np.float64(np.float32(s)) for s in scales)
    yc = (e[:, 0] / ys * a[:, 2] + a[:, 0]).astype(np.float32)
    xc = (e[:, 1] / xs * a[:, 3] + a[:, 1]).astype(np.float32)
    half_h = (0.5 * np.exp(e[:, 2] / hs) * a[:, 2]).astype(np.float32)
    half_w = (0.5 * np.exp(e[:, 3] / ws) * a[:, 3]).astype(np.float32)
    return np.stack([yc - half_h, xc - half_w, yc + half_h, xc + half_w], axis=1)


def _ious(table, i: int, js) -> np.ndarray:
    """float32 IoU of box i with boxes js (TFLite's ComputeIntersectionOverUnion; symmetric,
    0 when either box is empty). `table`: (ymin, xmin, ymax, xmax, area) columns."""
    ymin, xmin, ymax, xmax, area = table
    inter = np.maximum(np.minimum(ymax[i], ymax[js]) - np.maximum(ymin[i], ymin[js]),
                       np.float32(0)) * \
        np.maximum(np.minimum(xmax[i], xmax[js]) - np.maximum(xmin[i], xmin[js]), np.float32(0))
    with np.errstate(all="ignore"):
        iou = inter / (area[i] + area[js] - inter)
    return np.where((area[i] <= 0) | (area[js] <= 0), np.float32(0), iou)


def suppression_matrix(table, iou_threshold) -> np.ndarray:
    """[N, N] bool: IoU(i, j) > threshold, every pair at once (the same float32 arithmetic)."""
    ymin, xmin, ymax, xmax, area = table
    inter = np.maximum(np.minimum(ymax[:, None], ymax) - np.maximum(ymin[:, None], ymin),
                       np.float32(0))
    inter *= np.maximum(np.minimum(xmax[:, None], xmax) - np.maximum(xmin[:, None], xmin),
                        np.float32(0))
    with np.errstate(all="ignore"):
        iou = inter / (area[:, None] + area - inter)
    empty = area <= 0
    return (iou > iou_threshold) & ~empty[:, None] & ~empty[None, :]


def single_class_nms(table, scores, max_detections: int, score_threshold, iou_threshold,
                     suppress=None) -> list:
    """Indices kept by greedy NMS: scores >= threshold, best first (stable for equal scores),
    a box dropped when its IoU with a kept one exceeds the threshold. `suppress`: the
    precomputed suppression_matrix, when many classes share the boxes."""
    keep = np.flatnonzero(scores >= score_threshold)
    order = keep[np.argsort(-scores[keep], kind="stable")]
    limit = min(len(order), max_detections)
    active = np.ones(len(order), bool)
    selected: list = []
    for i in range(len(order)):
        if len(selected) >= limit:
            break
        if not active[i]:
            continue
        box = int(order[i])
        selected.append(box)
        later = order[i + 1:]
        if later.size:
            hit = suppress[box, later] if suppress is not None else \
                _ious(table, box, later) > iou_threshold
            active[i + 1:] &= ~hit
    return selected


# Up to this many boxes, regular NMS precomputes every pair's suppression (N^2 bytes).
PAIRWISE_LIMIT = 4096


def _prepare(node):
    opts = _options(node)
    if len(node.inputs) != 3 or len(node.outputs) != 4:
        raise node.fail(f"expected 3 inputs and 4 outputs, got {len(node.inputs)} and "
                        f"{len(node.outputs)}")
    enc, cls, anchors = (node.input(k) for k in range(3))
    if len(enc.shape) != 3 or len(cls.shape) != 3 or len(anchors.shape) != 2:
        raise node.fail(f"box encodings and class predictions must be rank 3 and anchors rank "
                        f"2, got {list(enc.shape)}, {list(cls.shape)}, {list(anchors.shape)}")
    for t in (enc, cls, anchors):
        if t.type_name not in ("float32", "uint8"):
            raise node.fail(f"{t.name!r} must be float32 or uint8, got {t.type_name}")
    n = enc.shape[1]
    if enc.shape[0] != 1 or enc.shape[2] < 4 or tuple(cls.shape[:2]) != (1, n) \
            or tuple(anchors.shape) != (n, 4):
        raise node.fail(f"shapes {list(enc.shape)}, {list(cls.shape)}, {list(anchors.shape)} "
                        "do not describe one batch of N boxes and their anchors")
    num_classes = opts["num_classes"]
    with_background = cls.shape[2]
    label_offset = with_background - num_classes
    if label_offset not in (0, 1):
        raise node.fail(f"class predictions have {with_background} columns for {num_classes} "
                        "classes (at most one background column)")
    if not 0 < opts["iou_threshold"] <= 1:
        raise node.fail(f"nms_iou_threshold must be in (0, 1], got {opts['iou_threshold']}")
    max_det = opts["max_detections"]
    regular = opts["use_regular_nms"]
    per_det = opts["max_classes_per_detection"]
    if max_det < 0:
        raise node.fail(f"max_detections must be >= 0, got {max_det}")
    if regular and min(opts["detections_per_class"], max_det) <= 0:
        raise node.fail("detections_per_class and max_detections must be positive")
    if not regular and per_det <= 0:
        raise node.fail(f"max_classes_per_detection must be positive, got {per_det}")
    total = max_det * per_det
    for out in node.outputs:
        if out.type_name != "float32":
            raise node.fail(f"output {out.name!r} must be float32, got {out.type_name}")
    node.outputs[0].shape = (1, total, 4)
    node.outputs[1].shape = (1, total)
    node.outputs[2].shape = (1, total)
    node.outputs[3].shape = (1,)
    score_t, iou_t = opts["score_threshold"], opts["iou_threshold"]
    per_class = min(opts["detections_per_class"], max_det)
    per_anchor = min(per_det, num_classes)

    def regular_nms(table, scores):
        found: list = []  # (score, flat index), best first
        suppress = suppression_matrix(table, iou_t) if 1 < num_classes and n <= PAIRWISE_LIMIT \
            else None
        for col in range(num_classes):
            column = np.ascontiguousarray(scores[:, col + label_offset])
            chosen = single_class_nms(table, column, per_class, score_t, iou_t, suppress)
            new = [(column[k], k * with_background + col + label_offset) for k in chosen]
            # in-place merge: equal scores keep the earlier classes first
            found = sorted(found + new, key=lambda p: -p[0])[:max_det]
        return [(idx // with_background, idx % with_background - label_offset, s)
                for s, idx in found]

    def fast_nms(table, scores):
        cols = scores[:, label_offset:]
        if per_anchor == 1:
            best = np.argmax(cols, axis=1)[:, None]
        else:
            best = np.argsort(-cols, axis=1, kind="stable")[:, :per_anchor]
        top = cols[np.arange(n), best[:, 0]]
        chosen = single_class_nms(table, top, max_det, score_t, iou_t)
        return [[(k, int(c), cols[k, c]) for c in best[k]] for k in chosen]

    def run(e, c, a, out_boxes, out_classes, out_scores, out_count):
        boxes = decode_boxes(_dequantize(enc, e[0]), _dequantize(anchors, a), opts["scales"])
        if np.any(boxes[:, 0] > boxes[:, 2]) or np.any(boxes[:, 1] > boxes[:, 3]):
            raise ValueError("decoded boxes have min corners above their max corners "
                            "(negative anchor sizes?)")
        ymin, xmin, ymax, xmax = (np.ascontiguousarray(boxes[:, k]) for k in range(4))
        table = (ymin, xmin, ymax, xmax, (ymax - ymin) * (xmax - xmin))
        scores = _dequantize(cls, c[0])
        for o in (out_boxes, out_classes, out_scores):
            o.fill(0)
        if regular:
            rows = regular_nms(table, scores)
            for k, (anchor, label, s) in enumerate(rows):
                out_boxes[0, k] = boxes[anchor]
                out_classes[0, k] = label
                out_scores[0, k] = s
            out_count[0] = len(rows)
        else:
            groups = fast_nms(table, scores)
            for k, group in enumerate(groups):
                for j, (anchor, label, s) in enumerate(group):
                    out_boxes[0, k * per_det + j] = boxes[anchor]
                    out_classes[0, k * per_det + j] = label
                    out_scores[0, k * per_det + j] = s
            out_count[0] = len(groups)
    return run


register_custom_op(NAME, _prepare)
