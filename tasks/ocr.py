"""PP-OCR around its networks: text regions from the detector's probability map (DB
post-processing, axis-aligned boxes: no OpenCV contours), a recognizer input from each region,
and CTC greedy decoding of the recognizer's per-step probabilities."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .image import resize


@dataclass(frozen=True)
class TextBox:
    """A detected text region in the detector map's pixels: x0, y0, x1, y1 (x1, y1 exclusive),
    and the mean probability inside it."""
    x0: int
    y0: int
    x1: int
    y1: int
    score: float


def _runs(mask: np.ndarray) -> tuple:
    """The horizontal runs of True in a 2-D mask: (row, start, end) arrays, end exclusive, in
    row-major order."""
    padded = np.zeros((mask.shape[0], mask.shape[1] + 2), np.int8)
    padded[:, 1:-1] = mask
    edges = np.diff(padded, axis=1)
    rows, starts = np.nonzero(edges == 1)
    _, ends = np.nonzero(edges == -1)
    return rows, starts, ends


def label_components(mask: np.ndarray) -> tuple:
    """8-connected components of a 2-D boolean mask, by runs: (rows, starts, ends, label) with
    one label per run, labels 0..n-1."""
    rows, starts, ends = _runs(mask)
    parent = list(range(len(rows)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    row_start = np.searchsorted(rows, np.arange(mask.shape[0] + 1))
    for r in range(mask.shape[0] - 1):
        a, a_end = row_start[r], row_start[r + 1]
        b, b_end = row_start[r + 1], row_start[r + 2]
        while a < a_end and b < b_end:          # two runs touch when they overlap by a diagonal
            if starts[a] <= ends[b] and starts[b] <= ends[a]:
                ra, rb = find(a), find(b)
                if ra != rb:
                    parent[max(ra, rb)] = min(ra, rb)
            if ends[a] < ends[b]:
                a += 1
            else:
                b += 1
    roots = np.array([find(i) for i in range(len(rows))], np.int64)
    _, labels = np.unique(roots, return_inverse=True)
    return rows, starts, ends, labels.reshape(-1)


def text_boxes(prob: np.ndarray, threshold: float = 0.3, box_threshold: float = 0.5,
               unclip_ratio: float = 1.6, min_size: int = 3, dilate: bool = True,
               max_boxes: int = 1000) -> list:
    """DB post-processing of a (H, W) text probability map: pixels above `threshold` (dilated by
    2x2 as PP-OCR's use_dilation), their 8-connected regions' bounding boxes, kept where the mean
    probability inside is at least `box_threshold`, grown by DB's unclip distance
    (area * unclip_ratio / perimeter) on each side. Boxes in reading order (top to bottom, then
    left to right)."""
    prob = np.asarray(prob, np.float32)
    if prob.ndim != 2:
        raise ValueError(f"text_boxes takes a (H, W) map, not shape {prob.shape}")
    mask = prob > threshold
    if dilate:
        grown = mask.copy()
        grown[1:] |= mask[:-1]
        grown[:, 1:] |= mask[:, :-1]
        grown[1:, 1:] |= mask[:-1, :-1]
        mask = grown
    rows, starts, ends, labels = label_components(mask)
    if not len(rows):
        return []
    n = labels.max() + 1
    top, bottom = np.full(n, mask.shape[0]), np.zeros(n, np.int64)
    left, right = np.full(n, mask.shape[1]), np.zeros(n, np.int64)
    np.minimum.at(top, labels, rows)
    np.maximum.at(bottom, labels, rows + 1)
    np.minimum.at(left, labels, starts)
    np.maximum.at(right, labels, ends)
    integral = np.zeros((prob.shape[0] + 1, prob.shape[1] + 1), np.float64)
    integral[1:, 1:] = prob.cumsum(0).cumsum(1)
    boxes = []
    height, width = prob.shape
    for k in range(n):
        w, h = right[k] - left[k], bottom[k] - top[k]
        if min(w, h) < min_size:
            continue
        total = (integral[bottom[k], right[k]] - integral[top[k], right[k]]
                 - integral[bottom[k], left[k]] + integral[top[k], left[k]])
        score = total / (w * h)
        if score < box_threshold:
            continue
        grow = w * h * unclip_ratio / (2 * (w + h))
        boxes.append(TextBox(int(max(0, np.floor(left[k] - grow))),
                             int(max(0, np.floor(top[k] - grow))),
                             int(min(width, np.ceil(right[k] + grow))),
                             int(min(height, np.ceil(bottom[k] + grow))), float(score)))
    return reading_order(boxes)[:max_boxes]


def reading_order(boxes: list) -> list:
    """Boxes as lines top to bottom (a box whose centre lies within the line's first box's
    height joins that line), each line left to right."""
    lines = []
    for box in sorted(boxes, key=lambda b: (b.y0 + b.y1, b.x0)):
        if lines and lines[-1][0].y0 <= (box.y0 + box.y1) / 2 < lines[-1][0].y1:
            lines[-1].append(box)
        else:
            lines.append([box])
    return [box for line in lines for box in sorted(line, key=lambda b: b.x0)]


def recognizer_input(image: np.ndarray, box, height: int = 48, width: int = 320) -> np.ndarray:
    """The crop `box` (x0, y0, x1, y1 in the image's pixels) of a uint8 RGB image as PP-OCR's
    recognizer takes it: scaled to `height` with its aspect ratio kept (at most `width` wide),
    normalized to [-1, 1], zero-padded on the right: float32 (height, width, 3)."""
    x0, y0, x1, y1 = (int(round(v)) for v in box)
    crop = image[max(y0, 0):y1, max(x0, 0):x1]
    if crop.size == 0:
        raise ValueError(f"empty crop {box} of a {image.shape[1]}x{image.shape[0]} image")
    scaled_w = min(width, max(1, int(np.ceil(height * crop.shape[1] / crop.shape[0]))))
    out = np.zeros((height, width, 3), np.float32)
    out[:, :scaled_w] = resize(crop, height, scaled_w) / 127.5 - 1.0
    return out


def ppocr_charset(characters: str) -> list:
    """PP-OCR's recognizer classes from its character list (one per line, as the model's
    `character` metadata or its dictionary file): the CTC blank first, then the characters, then
    the space."""
    return ["<blank>"] + characters.splitlines() + [" "]


def ctc_greedy_decode(probs: np.ndarray, charset: list, blank: int = 0) -> tuple:
    """Best path decoding of (T, classes) per-step probabilities: the most likely class at each
    step, repeats merged, blanks dropped. Returns (text, mean probability of the kept steps)."""
    probs = np.asarray(probs)
    if probs.ndim != 2 or probs.shape[1] != len(charset):
        raise ValueError(f"probabilities of shape {probs.shape}: (steps, {len(charset)}) expected "
                         "for this character set")
    best = probs.argmax(axis=1)
    keep = (best != blank) & np.concatenate([[True], best[1:] != best[:-1]])
    text = "".join(charset[i] for i in best[keep])
    confidence = float(probs[np.nonzero(keep)[0], best[keep]].mean()) if keep.any() else 0.0
    return text, confidence
