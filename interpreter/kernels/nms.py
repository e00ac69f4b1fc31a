"""NON_MAX_SUPPRESSION_V4 (hard) and NON_MAX_SUPPRESSION_V5 (soft, Gaussian-weighted) on float32
boxes [N, 4] = (y1, x1, y2, x2) and scores [N].

As TFLite defines them, the outputs are padded: selected indices (and V5's scores) have
max_output_size entries, zero past the valid count, which is the last output (an int32 scalar).
The size is static when max_output_size is constant, else the kernel is dynamic.

The selection follows TFLite's reference loop step by step, including its priority queue (a
binary heap laid out as libstdc++'s std::priority_queue, which decides the order of equal
scores) and its quirk of pushing a selected candidate back into the queue (it is then
suppressed by itself, unless its box is empty).
"""
from __future__ import annotations

import math

import numpy as np

from .registry import register


# -- std::priority_queue (libstdc++'s push_heap / pop_heap), ordered by score ---------------

def _sift_up(heap: list, hole: int, item) -> None:
    """__push_heap: `item` goes up from `hole` past every parent that scores lower."""
    parent = (hole - 1) // 2
    while hole > 0 and heap[parent][0] < item[0]:
        heap[hole] = heap[parent]
        hole = parent
        parent = (hole - 1) // 2
    heap[hole] = item


def _push(heap: list, item) -> None:
    heap.append(item)
    _sift_up(heap, len(heap) - 1, item)


def _pop(heap: list):
    top = heap[0]
    value = heap.pop()
    n = len(heap)
    if n == 0:
        return top
    hole, child = 0, 0
    while child < (n - 1) // 2:
        child = 2 * (child + 1)
        if heap[child][0] < heap[child - 1][0]:
            child -= 1
        heap[hole] = heap[child]
        hole = child
    if n % 2 == 0 and child == (n - 2) // 2:
        child = 2 * (child + 1)
        heap[hole] = heap[child - 1]
        hole = child - 1
    _sift_up(heap, hole, value)
    return top


# -- the selection ---------------------------------------------------------------------------

def _box_table(boxes: np.ndarray):
    y1, x1, y2, x2 = (boxes[:, k] for k in range(4))
    ymin, ymax = np.minimum(y1, y2), np.maximum(y1, y2)
    xmin, xmax = np.minimum(x1, x2), np.maximum(x1, x2)
    area = (ymax - ymin) * (xmax - xmin)
    return ymin, xmin, ymax, xmax, area


def _ious(table, i: int, js: np.ndarray) -> np.ndarray:
    """float32 IoU of box i with boxes js, as TFLite's ComputeIou (0 for empty boxes)."""
    ymin, xmin, ymax, xmax, area = table
    inter = np.maximum(np.minimum(ymax[i], ymax[js]) - np.maximum(ymin[i], ymin[js]),
                       np.float32(0)) * \
        np.maximum(np.minimum(xmax[i], xmax[js]) - np.maximum(xmin[i], xmin[js]), np.float32(0))
    union = area[i] + area[js] - inter
    empty = (area[i] <= 0) | (area[js] <= 0) | (union == 0)
    with np.errstate(all="ignore"):
        iou = inter / union
    return np.where(empty, np.float32(0), iou).astype(np.float32)


def non_max_suppression(boxes, scores, max_output: int, iou_threshold, score_threshold,
                        sigma) -> tuple:
    """(selected indices, their scores): TFLite's reference NonMaxSuppression on float32."""
    iou_threshold, score_threshold = np.float32(iou_threshold), np.float32(score_threshold)
    sigma = np.float32(sigma)
    heap: list = []
    for i in np.flatnonzero(scores > score_threshold):
        _push(heap, (scores[i], int(i), 0))  # (score, box, suppress_begin_index)
    num_outputs = min(len(heap), max_output)
    selected: list = []
    selected_scores: list = []
    if num_outputs == 0:
        return selected, selected_scores
    table = _box_table(boxes)
    scale = np.float32(-0.5) / sigma if sigma > 0 else np.float32(0)
    while len(selected) < num_outputs and heap:
        original, box, begin = _pop(heap)
        score = original
        hard = False
        if len(selected) > begin:
            js = np.asarray(selected[begin:][::-1])
            ious = _ious(table, box, js)
            if sigma > 0:
                for iou in ious:
                    if iou >= iou_threshold:
                        hard = True
                        break
                    score = np.float32(score * np.float32(math.exp(scale * iou * iou)))
                    if score <= score_threshold:
                        break
            else:
                hard = bool((ious >= iou_threshold).any())
        if not hard:
            if score == original:
                selected.append(box)
                selected_scores.append(score)
            if score > score_threshold:
                _push(heap, (score, box, len(selected) - (score == original)))
    return selected, selected_scores


@register("NON_MAX_SUPPRESSION_V4", "float32")
@register("NON_MAX_SUPPRESSION_V5", "float32")
def non_max_suppression_v4_v5(node):
    """V4: hard suppression, selected indices and their count; V5 also takes a soft-NMS sigma
    and returns the selected scores."""
    soft = node.op == "NON_MAX_SUPPRESSION_V5"
    node.expect_inputs(6 if soft else 5)
    boxes, scores, max_out = node.input(0), node.input(1), node.input(2)
    if len(boxes.shape) != 2 or boxes.shape[1] != 4:
        raise node.fail(f"boxes must have shape [N, 4], got {list(boxes.shape)}")
    if tuple(scores.shape) != (boxes.shape[0],):
        raise node.fail(f"scores must have shape [{boxes.shape[0]}], got {list(scores.shape)}")
    if max_out.type_name != "int32" or len(max_out.shape) != 0:
        raise node.fail("max_output_size must be an int32 scalar")
    for k in range(3, len(node.inputs)):
        t = node.input(k)
        if t.type_name != "float32" or len(t.shape) != 0:
            raise node.fail(f"input {k} must be a float32 scalar")
    n_outs = 3 if soft else 2
    if len(node.outputs) != n_outs:
        raise node.fail(f"expected {n_outs} outputs, got {len(node.outputs)}")
    node.outputs[-1].shape = ()

    def compute(b, s, size, iou_t, score_t, sigma, outs):
        if sigma < 0:
            raise ValueError(f"soft_nms_sigma must be >= 0, got {float(sigma)}")
        chosen, chosen_scores = non_max_suppression(b, s, size, iou_t.reshape(()),
                                                    score_t.reshape(()), sigma)
        n = len(chosen)
        outs[0].fill(0)
        outs[0][:n] = chosen
        if soft:
            outs[1].fill(0)
            outs[1][:n] = chosen_scores
        outs[-1][...] = n

    def split(args):
        if soft:
            return args[:6], np.float32(args[5].reshape(())), args[6:]
        return args[:5], np.float32(0), args[5:]

    if max_out.data is None:
        node.dynamic = True

        def run_dynamic(*args):
            ins, sigma, _ = split(args + (None,) * n_outs)
            size = int(ins[2].reshape(()))
            if size < 0:
                raise ValueError(f"max_output_size must be >= 0, got {size}")
            outs = [np.empty(size, np.int32)] + ([np.empty(size, np.float32)] if soft else []) \
                + [np.empty((), np.int32)]
            compute(ins[0], ins[1], size, ins[3], ins[4], sigma, outs)
            return outs
        return run_dynamic
    size = int(max_out.data.reshape(()))
    if size < 0:
        raise node.fail(f"max_output_size must be >= 0, got {size}")
    for out in node.outputs[:-1]:
        out.shape = (size,)

    def run(*args):
        ins, sigma, outs = split(args)
        compute(ins[0], ins[1], size, ins[3], ins[4], sigma, outs)
    return run
