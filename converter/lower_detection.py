"""Detection post-processing: NonMaxSuppression."""
from __future__ import annotations

import numpy as np

from .data_dependent import data_dependent, data_dependent_ops
from .lower import lowers
from .runtime_params import INT32_MAX, as_int32, is_runtime, scalar

# Classes x batches unrolled into one NON_MAX_SUPPRESSION_V4 each, at most.
MAX_SELECTIONS = 256


@lowers("NonMaxSuppression")
def non_max_suppression(b, n):
    """One NON_MAX_SUPPRESSION_V4 per (batch, class), in ONNX's order, each one's selected box
    indices cut to its valid count (a data-dependent size, `_first`) beside its batch and
    class: ONNX's [selected, 3] (int64). TFLite takes max_output_size as int32 and sizes its
    output by it: ONNX's INT64_MAX ("all") becomes the box count. No score threshold is
    -FLT_MAX (TFLite keeps the scores above it). Center-point boxes become corners first (IoU
    takes any diagonal)."""
    boxes, scores = n.input(0), n.input(1)
    if b.rank(boxes) != 3 or b.shape(boxes)[2] != 4 or b.rank(scores) != 3:
        raise n.fail(f"boxes {list(b.shape(boxes))} and scores {list(b.shape(scores))} must "
                     "be [batch, boxes, 4] and [batch, classes, boxes]")
    batches, classes = b.shape(scores)[0], b.shape(scores)[1]
    if batches in b.dynamic_axes(scores) or classes in b.dynamic_axes(scores):
        raise n.fail("a dynamic batch or class count is not supported")
    if batches * classes > MAX_SELECTIONS:
        raise n.fail(f"{batches} batches x {classes} classes: at most {MAX_SELECTIONS} "
                     "suppressions are unrolled")
    if b.dtype(boxes) != "float32" or b.dtype(scores) != "float32":
        raise n.fail("boxes and scores must be float32")
    if batches * classes == 0:   # nothing to select from: ONNX's empty [0, 3]
        return b.const(np.zeros((0, 3), np.int64))
    if int(n.attr("center_point_box", 0)):
        boxes = _corners(b, boxes)
    boxes = _no_empty_boxes(b, boxes)
    max_out = _max_output(b, n, boxes)
    iou = _float_scalar(b, n.input(3), 0.0)
    known = b.value(iou)
    if known is not None and not 0 <= float(known) <= 1:
        raise n.fail(f"iou_threshold {float(known)} is outside ONNX's range [0, 1] "
                     "(onnxruntime refuses it too)")
    iou = _above(b, iou)
    floor = _float_scalar(b, n.input(4), float(np.finfo(np.float32).min))
    parts = []
    for i in range(batches):
        box_i = b.reshape(_pick(b, boxes, i), (b.shape(boxes)[1], 4))
        for c in range(classes):
            score_ic = _pick(b, _pick(b, scores, i), c)
            ins = [box_i, score_ic, max_out, iou, floor]
            if is_runtime(b, max_out) and max_out not in b.world:   # a size of the values
                selected, valid = data_dependent_ops(b, "NON_MAX_SUPPRESSION_V4", ins,
                                                     [(None,), ()], dtypes=["int32", "int32"])
            else:
                selected, valid = b.ops("NON_MAX_SUPPRESSION_V4", ins, n_out=2,
                                        dtypes=["int32", "int32"])
            kept = _first(b, selected, valid)
            kept = b.cast(kept, "int64")
            zero = b.op("MUL", [kept, b.const(np.array(0, np.int64))])
            columns = [zero if v == 0 else b.op("ADD", [zero, b.const(np.array(v, np.int64))])
                       for v in (i, c)] + [kept]
            columns = [b.op("EXPAND_DIMS", [t, b.const(np.array(-1, np.int32))])
                       for t in columns]
            parts.append(b.op("CONCATENATION", columns, {"axis": 1}))
    out = parts[0] if len(parts) == 1 else b.op("CONCATENATION", parts, {"axis": 0})
    declared = n.out_shape(0)
    if declared is not None:   # the count the model declares (for its example: recorded)
        b.sg.tensors[out].shape = declared
        b.shadow_shapes.pop(out, None)
    return out


def _first(b, t: int, count: int) -> int:
    """t[:count], count an int32 scalar known while running: a data-dependent size. As
    STRIDED_SLICE: LiteRT's SLICE with a computed size fails when its input is dynamic too
    (slice.cc: "output_shape_vector[idx] != SizeOfDimension(output, idx)"), its output not
    resized."""
    end = b.op("EXPAND_DIMS", [count, b.const(np.array(0, np.int32))])
    one = b.const(np.array([1], np.int32))
    return data_dependent(b, "STRIDED_SLICE", [t, b.const(np.array([0], np.int32)), end, one],
                          (None,))


def _pick(b, t: int, index: int) -> int:
    """t[index] along its first axis."""
    if b.shape(t)[0] == 1:
        return b.reshape(t, b.shape(t)[1:])
    return b.op("GATHER", [t, b.const(np.array(index, np.int32))], {"axis": 0})


def _no_empty_boxes(b, boxes: int) -> int:
    """Boxes with no area moved far away, each to a unit box of its own ([batch, N, 4]). TFLite
    pushes a selected box back into its queue, where its IoU with itself suppresses it; an empty
    box's IoU is 0, so TFLite selects it again and again (every output past it is that box),
    where onnxruntime selects it once, and never lets it suppress or be suppressed. A box apart
    from every other one does the same. (A thin box instead would suppress the other empty
    boxes on its line: detections clipped at an image's edge.) Only the selection sees this:
    the kept boxes are read from the model's own tensor."""
    last = b.rank(boxes) - 1
    low = b.op("GATHER", [boxes, b.const(np.array([0, 1], np.int32))], {"axis": last})
    high = b.op("GATHER", [boxes, b.const(np.array([2, 3], np.int32))], {"axis": last})
    side = b.op("REDUCE_MIN", [b.op("ABS", [b.op("SUB", [high, low])]),
                               b.const(np.array([last], np.int32))], {"keep_dims": True})
    empty = b.op("EQUAL", [side, b.const(np.float32(0))], dtype="bool")          # [B, N, 1]
    every = b.const(np.arange(b.rank(boxes), dtype=np.int32))
    unit = b.op("MAXIMUM", [b.op("REDUCE_MAX", [b.op("ABS", [boxes]), every],
                                 {"keep_dims": False}), b.const(np.float32(1))])
    count = b.op("GATHER", [b.dims_of(boxes, "int32"), b.const(np.array(1, np.int32))],
                 {"axis": 0})
    place = b.cast(b.op("RANGE", [b.const(np.array(0, np.int32)), count,
                                  b.const(np.array(1, np.int32))]), "float32")
    place = b.reshape(place, (1, b.shape(boxes)[1], 1))
    start = b.op("MUL", [b.op("ADD", [b.op("MUL", [place, b.const(np.float32(3))]),
                                      b.const(np.float32(2))]), unit])         # [1, N, 1]
    far = b.op("ADD", [start, b.op("MUL", [unit, b.const(
        np.array([0, 0, 1, 1], np.float32))])])                                 # [1, N, 4]
    return b.op("SELECT_V2", [empty, far, boxes], dtype="float32")


def _corners(b, boxes: int) -> int:
    """[x_center, y_center, width, height] as [x1, y1, x2, y2]."""
    last = b.rank(boxes) - 1
    centers = b.op("GATHER", [boxes, b.const(np.array([0, 1, 0, 1], np.int32))],
                   {"axis": last})
    sizes = b.op("GATHER", [boxes, b.const(np.array([2, 3, 2, 3], np.int32))], {"axis": last})
    half = b.op("MUL", [sizes, b.const(np.array([-0.5, -0.5, 0.5, 0.5], np.float32))])
    return b.op("ADD", [centers, half])


def _max_output(b, n, boxes: int) -> int:
    """max_output_boxes_per_class as an int32 scalar of at most the box count (0 when
    omitted, as ONNX's default)."""
    t = n.input(2)
    count_axis = 1
    if t < 0 or (not is_runtime(b, t) and b.value(t).size == 0):
        return b.const(np.array(0, np.int32))
    if not is_runtime(b, t):
        wanted = int(min(int(b.value(t).reshape(-1)[0]), INT32_MAX))
        if count_axis not in b.dynamic_axes(boxes):
            return b.const(np.array(max(0, min(wanted, b.shape(boxes)[count_axis])), np.int32))
        wanted_t = b.const(np.array(max(0, wanted), np.int32))
    else:
        wanted_t = b.op("MAXIMUM", [scalar(b, as_int32(b, t)), b.const(np.array(0, np.int32))])
    count = b.op("GATHER", [b.dims_of(boxes, "int32"),
                            b.const(np.array(count_axis, np.int32))], {"axis": 0})
    return b.op("MINIMUM", [wanted_t, count])


def _above(b, iou: int) -> int:
    """The IoU threshold one step up: ONNX suppresses a box whose IoU is above it, TFLite one
    whose IoU is at it too (ONNX's default 0 would suppress every box that does not overlap).
    The next float when it is known (at least the smallest normal one: a runtime that flushes
    denormals would read 0), else x (1 + 2^-23), one or two floats up."""
    tiny = np.float32(np.finfo(np.float32).tiny)
    value = b.value(iou)
    if value is not None:
        return b.const(np.maximum(np.nextafter(value, np.float32(np.inf)), tiny))
    up = b.op("MUL", [iou, b.const(np.float32(1 + 2.0**-23))])
    return b.op("MAXIMUM", [up, b.const(tiny)])


def _float_scalar(b, t: int, default: float) -> int:
    if t < 0:
        return b.const(np.array(default, np.float32))
    return scalar(b, b.cast(t, "float32"))
