"""Single-shot detectors' post-processing: SSD anchors as MediaPipe's SsdAnchorsCalculator makes
them, raw box regressions decoded against them, and non-maximum suppression (hard, and MediaPipe's
weighted form that averages the boxes it suppresses)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class AnchorOptions:
    """SsdAnchorsCalculatorOptions' fields that the MediaPipe detectors use."""
    input_height: int
    input_width: int
    min_scale: float
    max_scale: float
    strides: tuple
    aspect_ratios: tuple = (1.0,)
    anchor_offset: float = 0.5
    interpolated_scale_aspect_ratio: float = 1.0
    reduce_boxes_in_lowest_layer: bool = False
    fixed_anchor_size: bool = True


# BlazeFace short range (mediapipe/modules/face_detection/face_detection_short_range.pbtxt)
FACE_SHORT_RANGE = AnchorOptions(128, 128, 0.1484375, 0.75, (8, 16, 16, 16))
# BlazePose detector (mediapipe/modules/pose_detection/pose_detection_cpu.pbtxt)
POSE_DETECTION = AnchorOptions(224, 224, 0.1484375, 0.75, (8, 16, 32, 32, 32))


def _scale(options: AnchorOptions, index: int) -> float:
    n = len(options.strides)
    if n == 1:
        return (options.min_scale + options.max_scale) / 2
    return options.min_scale + (options.max_scale - options.min_scale) * index / (n - 1)


def ssd_anchors(options: AnchorOptions) -> np.ndarray:
    """The anchors, float32 (N, 4) as (x_centre, y_centre, width, height), normalized to [0, 1],
    in the order the model's outputs list them."""
    anchors, layer, strides = [], 0, options.strides
    while layer < len(strides):
        ratios, scales = [], []
        last = layer
        while last < len(strides) and strides[last] == strides[layer]:
            scale = _scale(options, last)
            if last == 0 and options.reduce_boxes_in_lowest_layer:
                ratios += [1.0, 2.0, 0.5]
                scales += [0.1, scale, scale]
            else:
                for ratio in options.aspect_ratios:
                    ratios.append(ratio)
                    scales.append(scale)
                if options.interpolated_scale_aspect_ratio > 0:
                    following = 1.0 if last == len(strides) - 1 else _scale(options, last + 1)
                    scales.append(math.sqrt(scale * following))
                    ratios.append(options.interpolated_scale_aspect_ratio)
            last += 1
        sizes = [(s * math.sqrt(r), s / math.sqrt(r)) for r, s in zip(ratios, scales)]
        rows = math.ceil(options.input_height / strides[layer])
        cols = math.ceil(options.input_width / strides[layer])
        for y in range(rows):
            for x in range(cols):
                for width, height in sizes:
                    if options.fixed_anchor_size:
                        width = height = 1.0
                    anchors.append(((x + options.anchor_offset) / cols,
                                    (y + options.anchor_offset) / rows, width, height))
        layer = last
    return np.asarray(anchors, np.float32)


def decode_boxes(raw: np.ndarray, anchors: np.ndarray, scale: float,
                 num_keypoints: int = 0) -> tuple:
    """Raw regressions (N, 4 + 2k): x, y, w, h offsets then keypoint x, y pairs, in input pixels
    of a `scale`-sized input, decoded against the anchors. Returns (boxes (N, 4) as
    x0, y0, x1, y1, keypoints (N, k, 2) as x, y), normalized to [0, 1]."""
    raw = np.asarray(raw, np.float32).reshape(len(anchors), -1)
    if raw.shape[1] < 4 + 2 * num_keypoints:
        raise ValueError(f"{raw.shape[1]} values a box; {4 + 2 * num_keypoints} expected")
    ax, ay, aw, ah = anchors.T
    cx = raw[:, 0] / scale * aw + ax
    cy = raw[:, 1] / scale * ah + ay
    w = raw[:, 2] / scale * aw
    h = raw[:, 3] / scale * ah
    boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)
    k = raw[:, 4:4 + 2 * num_keypoints].reshape(len(anchors), num_keypoints, 2)
    keypoints = np.stack([k[..., 0] / scale * aw[:, None] + ax[:, None],
                          k[..., 1] / scale * ah[:, None] + ay[:, None]], axis=-1)
    return boxes, keypoints


def sigmoid(x: np.ndarray, clip: float = 100.0) -> np.ndarray:
    """Scores from logits, clipped as MediaPipe's score_clipping_thresh does."""
    x = np.clip(np.asarray(x, np.float64), -clip, clip)
    return (1.0 / (1.0 + np.exp(-x))).astype(np.float32)


def iou(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """Intersection over union of one (x0, y0, x1, y1) box with each of `boxes` (N, 4)."""
    x0 = np.maximum(box[0], boxes[:, 0])
    y0 = np.maximum(box[1], boxes[:, 1])
    x1 = np.minimum(box[2], boxes[:, 2])
    y1 = np.minimum(box[3], boxes[:, 3])
    inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    union = area + areas - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float,
        max_boxes: int | None = None) -> list:
    """Hard non-maximum suppression: the indices kept, best score first."""
    order = list(np.argsort(-np.asarray(scores), kind="stable"))
    kept = []
    while order and (max_boxes is None or len(kept) < max_boxes):
        best = order.pop(0)
        kept.append(int(best))
        if order:
            overlaps = iou(boxes[best], boxes[order])
            order = [i for i, o in zip(order, overlaps) if o <= iou_threshold]
    return kept


def weighted_nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float,
                 keypoints: np.ndarray | None = None) -> list:
    """MediaPipe's WEIGHTED suppression: each kept detection is the score-weighted mean of the
    boxes (and keypoints) that overlap the best remaining one by more than the threshold, with
    the best one's score. Returns [(box (4,), score, keypoints (k, 2) or None)], best first."""
    boxes = np.asarray(boxes, np.float64)
    scores = np.asarray(scores, np.float64)
    remaining = np.argsort(-scores, kind="stable")
    out = []
    while len(remaining):
        best = remaining[0]
        overlaps = iou(boxes[best], boxes[remaining])
        close = overlaps > iou_threshold
        close[0] = True            # the best one itself (even with no area)
        group = remaining[close]
        weights = scores[group] / scores[group].sum()
        box = weights @ boxes[group]
        points = None
        if keypoints is not None:
            points = np.tensordot(weights, np.asarray(keypoints, np.float64)[group], axes=1)
        out.append((box, float(scores[best]), points))
        remaining = remaining[~close]
    return out
