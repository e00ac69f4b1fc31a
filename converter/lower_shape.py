"""ONNX ops that move data or make tensors from shapes: Reshape, Flatten, Squeeze, Unsqueeze,
Transpose, Concat, Split, Slice, Gather, Expand, Tile, Shape, Size, ConstantOfShape, Range,
Constant, Identity, Dropout (Pad: `lower_pad.py`).

Shapes are static at conversion, so Shape and Size are constants; whatever computes on them folds
through the kernels as it is emitted (Shape -> Gather -> Concat -> Reshape leaves one RESHAPE).
Parameters known only while running (a Reshape's shape, a Slice's starts, a Tile's repeats that
are graph inputs or computed) become parameter tensors of dynamic TFLite ops (`runtime_params`),
which record the output shape ONNX declares.
"""
from __future__ import annotations

import math

import numpy as np

from edgelite.schema import dtype_name

from .builder import TRANSPOSE_MAX_RANK, regroup, shadow_target
from .lower import axis_of, const_input, lowers, optional_const
from .runtime_params import INT32_MAX, as_int32, is_runtime, scalar, scatter_to_axes

# -- aliases and constants -----------------------------------------------------------------------


@lowers("Identity")
def identity(b, n):
    return n.input(0)


@lowers("Dropout")
def dropout(b, n):
    """Inference: the input itself; a mask output is all ones."""
    training = optional_const(b, n, 2, "training_mode")
    if training is not None and bool(training.reshape(-1)[0]):
        raise n.fail("training_mode=True is not supported")
    x = n.input(0)
    outs = [x]
    if len(n.proto.output) > 1 and n.proto.output[1]:
        outs.append(b.const(np.ones(b.shape(x), np.bool_)))
    return outs


@lowers("Constant")
def constant(b, n):
    attrs = n.attrs
    if "value" in attrs:
        value = np.asarray(attrs["value"])
    elif "value_float" in attrs:
        value = np.array(attrs["value_float"], np.float32)
    elif "value_floats" in attrs:
        value = np.array(attrs["value_floats"], np.float32)
    elif "value_int" in attrs:
        value = np.array(attrs["value_int"], np.int64)
    elif "value_ints" in attrs:
        value = np.array(attrs["value_ints"], np.int64)
    else:
        raise n.fail(f"attribute {', '.join(attrs) or '(none)'} is not supported "
                     "(strings and sparse tensors have no .tflite form)")
    if value.dtype.kind in "OSU":
        raise n.fail("string constants are not supported")
    return b.const(value)


@lowers("Shape")
def shape(b, n):
    x = n.input(0)
    dims = b.shape(x)
    start, end = int(n.attr("start", 0)), n.attr("end", None)
    picked = range(len(dims))[slice(start, None if end is None else int(end))]
    if not b.dynamic_axes(x) & set(picked):
        return b.const(np.array([dims[i] for i in picked], np.int64))
    whole = b.dims_of(x)
    if list(picked) == list(range(len(dims))):
        return whole
    return b.op("GATHER", [whole, b.const(np.array(list(picked), np.int32))], {"axis": 0})


@lowers("Size")
def size(b, n):
    x = n.input(0)
    if not b.dynamic_axes(x):
        return b.const(np.array(math.prod(b.shape(x)), np.int64))
    return b.op("REDUCE_PROD", [b.dims_of(x), b.const(np.array([0], np.int32))],
                {"keep_dims": False})


@lowers("ConstantOfShape")
def constant_of_shape(b, n):
    value = n.attr("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    if is_runtime(b, n.input(0)):
        return b.op("FILL", [as_int32(b, n.input(0)), b.const(value.reshape(()))],
                    dtype=dtype_name(value.dtype), shape=n.out_shape(0))
    dims = [int(d) for d in const_input(b, n, 0, "shape").reshape(-1)]
    return b.const(np.full(dims, value[0], value.dtype))


@lowers("Range")
def range_(b, n):
    bounds = [scalar(b, n.input(k)) for k in range(3)]
    return b.op("RANGE", bounds, shape=n.out_shape(0))


# -- reshapes ------------------------------------------------------------------------------------

def _requested_shape(b, n) -> list | None:
    """Input 1, a shape: its constant value as ints, or None when it is known only while
    running."""
    if is_runtime(b, n.input(1)):
        return None
    return [int(d) for d in const_input(b, n, 1, "shape").reshape(-1)]


@lowers("Reshape")
def reshape(b, n):
    x, request = n.input(0), _requested_shape(b, n)
    if request is None:
        return _reshape_by_sizes(b, n, x) or _reshape_at_run_time(b, n, x)
    sizes = _resolved(n, b.shape(x), request)
    # The model's own -1 (or 0) says which dim follows the dynamic ones (Swin's windows
    # reshaped back, [-1, 8, 8, 7, 7, 96] of [64 * batch, 49, 96]): the request at the shadow
    # sizes, by ONNX's rule.
    shadow = _resolved(n, b.shadow_shape(x), request) \
        if (-1 in request or 0 in request) and b.dynamic_axes(x) else None
    return b.reshape(x, sizes, shadow)


def _resolved(n, in_shape, request) -> list:
    """ONNX's requested shape as sizes: 0 copies the input's dim (unless allowzero), -1 takes
    the rest."""
    request = list(request)
    if not int(n.attr("allowzero", 0)):
        request = [in_shape[i] if d == 0 and i < len(in_shape) else d
                   for i, d in enumerate(request)]
    if request.count(-1) > 1:
        raise n.fail(f"shape {request} has more than one -1")
    if -1 in request:
        known = math.prod(d for d in request if d != -1)
        request[request.index(-1)] = math.prod(in_shape) // known if known else 0
    if math.prod(request) != math.prod(in_shape):
        raise n.fail(f"cannot reshape {list(in_shape)} to {request}")
    return request


def _reshape_by_sizes(b, n, x):
    """A shape computed from dynamic dims (Shape -> Gather -> Concat): when its values at this
    conversion's sizes and at the shadow's differ in at most one place, a constant target with
    -1 there (a static RESHAPE the runtimes plan ahead); else None."""
    shape = n.input(1)
    here, there = b.world.get(shape), b.shadow_value(shape)
    if here is None or there is None or here.shape != there.shape:
        return None
    sizes = _resolved(n, b.shape(x), [int(d) for d in here.reshape(-1)])
    other = _resolved(n, b.shadow_shape(x), [int(d) for d in there.reshape(-1)])
    differ = [j for j, (p, q) in enumerate(zip(sizes, other)) if p != q]
    if len(differ) > 1:
        # the builder's target from x's own SHAPE, when it follows the dims as this one does
        groups = regroup(b.shape(x), sizes)
        if groups is not None and shadow_target(b.shadow_shape(x), sizes, groups) == other:
            return b.reshape(x, sizes)
        return None
    target = [-1 if j in differ else d for j, d in enumerate(sizes)]
    return b.op("RESHAPE", [x, b.const(np.array(target, np.int32))], {"new_shape": tuple(target)})


def _reshape_at_run_time(b, n, x):
    """RESHAPE to a shape tensor; ONNX's 0 (copy the input's dim) resolved by a SELECT."""
    shape = n.input(1)
    if not int(n.attr("allowzero", 0)):
        count = b.shape(shape)[0]
        dtype = b.sg.tensors[shape].np_dtype
        copied = _dims_padded(b, x, count, dtype.name)
        zero = b.op("EQUAL", [shape, b.const(np.zeros((), dtype))], dtype="bool")
        shape = b.op("SELECT_V2", [zero, copied, shape], dtype=b.dtype(shape))
    return b.op("RESHAPE", [x, as_int32(b, shape)], shape=n.out_shape(0))


def _dims_padded(b, x, count: int, dtype: str) -> int:
    """x's shape as a `count`-long vector (cut, or padded with zeros)."""
    rank = b.rank(x)
    if not b.dynamic_axes(x):
        dims = list(b.shape(x))
        return b.const(np.array([dims[i] if i < rank else 0 for i in range(count)], dtype))
    dims = b.dims_of(x, dtype)
    if count < rank:
        return b.op("GATHER", [dims, b.const(np.arange(count, dtype=np.int32))], {"axis": 0})
    if count > rank:
        return b.op("CONCATENATION", [dims, b.const(np.zeros(count - rank, dtype))],
                    {"axis": 0})
    return dims


@lowers("Flatten")
def flatten(b, n):
    x = n.input(0)
    shape = b.shape(x)
    axis = int(n.attr("axis", 1))
    axis = axis + len(shape) if axis < 0 else axis
    return b.reshape(x, (math.prod(shape[:axis]), math.prod(shape[axis:])))


def _axes(b, n, k: int):
    """Axes from input k (opset 13+) or the `axes` attribute; None when absent."""
    if n.opset >= 13:
        value = optional_const(b, n, k, "axes")
        return None if value is None else [int(a) for a in value.reshape(-1)]
    axes = n.attr("axes")
    return None if axes is None else [int(a) for a in axes]


def _declared_reshape(b, n):
    """Squeeze and Unsqueeze with axes known only while running move no data: a RESHAPE to
    the shape the model declares."""
    shape = n.out_shape(0)
    if shape is None:
        raise n.fail("the axes are known only while running and the model does not declare "
                     "the output shape")
    return b.reshape(n.input(0), shape)


@lowers("Squeeze")
def squeeze(b, n):
    x = n.input(0)
    if n.opset >= 13 and is_runtime(b, n.input(1)):
        return _declared_reshape(b, n)
    shape = b.shape(x)
    axes = _axes(b, n, 1)
    drop = {d for d, s in enumerate(shape) if s == 1} if axes is None else \
        {axis_of(n, a, len(shape)) for a in axes}
    if any(shape[d] != 1 for d in drop):
        raise n.fail(f"cannot squeeze axes {sorted(drop)} of shape {list(shape)}")
    return b.reshape(x, [s for d, s in enumerate(shape) if d not in drop])


@lowers("Unsqueeze")
def unsqueeze(b, n):
    x = n.input(0)
    if n.opset >= 13 and is_runtime(b, n.input(1)):
        return _declared_reshape(b, n)
    shape = list(b.shape(x))
    axes = _axes(b, n, 1)
    if axes is None:
        raise n.fail("needs axes")
    rank = len(shape) + len(axes)
    for a in sorted(axis_of(n, a, rank) for a in axes):
        shape.insert(a, 1)
    return b.reshape(x, shape)


@lowers("Transpose")
def transpose(b, n):
    x = n.input(0)
    perm = [int(p) for p in n.attr("perm", list(range(b.rank(x)))[::-1])]
    if len(perm) <= TRANSPOSE_MAX_RANK:
        return b.transpose(x, perm)
    return _transpose_high_rank(b, x, perm)


def _transpose_high_rank(b, x, perm):
    """A TRANSPOSE of more dims than LiteRT takes: input dims that stay neighbours merge (one
    RESHAPE -> TRANSPOSE -> RESHAPE); where that still leaves too many, one dim at a time moves
    to its place, each move a TRANSPOSE of a 4-D view."""
    shape = list(b.shape(x))
    out_shape = [shape[p] for p in perm]
    runs = [[perm[0]]]                      # output-order runs of consecutive input dims
    for p in perm[1:]:
        if p == runs[-1][-1] + 1:
            runs[-1].append(p)
        else:
            runs.append([p])
    if len(runs) <= TRANSPOSE_MAX_RANK:
        by_input = sorted(range(len(runs)), key=lambda k: runs[k][0])
        merged = [math.prod(shape[d] for d in runs[k]) for k in by_input]
        position = {k: i for i, k in enumerate(by_input)}
        y = b.transpose(b.reshape(x, merged), [position[k] for k in range(len(runs))])
        return b.reshape(y, out_shape)
    order = list(range(len(shape)))         # input dim at each position of the current tensor
    for j, want in enumerate(perm):
        i = order.index(want)
        if i == j:
            continue
        sizes = [shape[d] for d in order]
        view = [math.prod(sizes[:j]), math.prod(sizes[j:i]), sizes[i], math.prod(sizes[i + 1:])]
        x = b.transpose(b.reshape(x, view), [0, 2, 1, 3])
        order.insert(j, order.pop(i))
    return b.reshape(x, out_shape)


# -- joining and splitting -----------------------------------------------------------------------

@lowers("Concat")
def concat(b, n):
    inputs = [t for t in n.inputs if t >= 0 and math.prod(b.shape(t)) > 0]
    if not inputs:
        raise n.fail("all inputs are empty")
    axis = axis_of(n, n.attr("axis"), b.rank(inputs[0]))
    if len(inputs) == 1:
        return inputs[0]
    return b.op("CONCATENATION", inputs, {"axis": axis})


@lowers("Split")
def split(b, n):
    x = n.input(0)
    shape = b.shape(x)
    axis = axis_of(n, n.attr("axis", 0), len(shape))
    count = len(n.proto.output)
    if n.opset >= 13 and is_runtime(b, n.input(1)):
        return b.ops("SPLIT_V", [x, as_int32(b, n.input(1)), b.const(np.array(axis, np.int32))],
                     {"num_splits": count}, n_out=count,
                     shapes=[n.out_shape(k) for k in range(count)])
    sizes = optional_const(b, n, 1, "split") if n.opset >= 13 else n.attr("split")
    if sizes is None:
        parts = int(n.attr("num_outputs", count))
        chunk = -(-shape[axis] // parts)
        sizes = [min(chunk, shape[axis] - k * chunk) for k in range(parts)]
    sizes = [int(s) for s in np.asarray(sizes).reshape(-1)]
    if sum(sizes) != shape[axis] or len(sizes) != count:
        raise n.fail(f"split sizes {sizes} do not cover axis {axis} of {list(shape)} "
                     f"in {count} outputs")
    axis_t = b.const(np.array(axis, np.int32))
    if len(set(sizes)) == 1:
        return b.ops("SPLIT", [axis_t, x], {"num_splits": count}, n_out=count)
    return b.ops("SPLIT_V", [x, b.const(np.array(sizes, np.int32)), axis_t],
                 {"num_splits": count}, n_out=count)


# -- slicing and gathering -----------------------------------------------------------------------

@lowers("Slice")
def slice_(b, n):
    x = n.input(0)
    shape = b.shape(x)
    rank = len(shape)
    if any(is_runtime(b, n.input(k)) for k in range(1, 5)):
        return _slice_at_run_time(b, n, x)
    starts = const_input(b, n, 1, "starts").reshape(-1)
    ends = const_input(b, n, 2, "ends").reshape(-1)
    axes = optional_const(b, n, 3, "axes")
    steps = optional_const(b, n, 4, "steps")
    axes = list(range(len(starts))) if axes is None else [axis_of(n, a, rank) for a in
                                                              axes.reshape(-1)]
    steps = [1] * len(starts) if steps is None else [int(s) for s in steps.reshape(-1)]
    # ONNX's bounds as given (clamped to int32): TFLite resolves negative and out-of-range
    # bounds as ONNX (Python slicing) does, and the constants do not depend on the dims. Axes
    # not sliced take the whole dim by end_mask.
    begin, end, strides = [0] * rank, [0] * rank, [1] * rank
    end_mask = (1 << rank) - 1
    whole = True
    for a, s, e, st in zip(axes, starts, ends, steps):
        if st == 0:
            raise n.fail("a step of 0")
        if a in b.dynamic_axes(x):   # whole at any size: from the start to the end
            if st != 1 or not (s == 0 or s <= -INT32_MAX) or e < INT32_MAX:
                whole = False
        elif slice(int(s), int(e), st).indices(shape[a]) != (0, shape[a], 1):
            whole = False
        begin[a], end[a], strides[a] = (int(np.clip(v, -INT32_MAX, INT32_MAX)) for v in (s, e, st))
        end_mask &= ~(1 << a)
    if whole:
        return x
    return b.op("STRIDED_SLICE", [x, b.const(np.array(begin, np.int32)),
                                  b.const(np.array(end, np.int32)),
                                  b.const(np.array(strides, np.int32))], {"end_mask": end_mask})


def _slice_at_run_time(b, n, x):
    """STRIDED_SLICE with begin, end and strides made from the ONNX inputs by ops; TFLite's
    clamping of out-of-range bounds is ONNX's."""
    shape = b.shape(x)
    rank = len(shape)
    starts, ends = n.input(1), n.input(2)
    count = b.shape(starts)[0]
    axes = list(range(count))
    if n.input(3) >= 0 and n.input(3) not in b.empty:
        value = b.value(n.input(3))
        axes = n.input(3) if value is None else [axis_of(n, a, rank) for a in value.reshape(-1)]
    steps = n.input(4)
    if steps < 0 or steps in b.empty:
        steps = b.const(np.ones(count, b.sg.tensors[starts].np_dtype))
    dtype = b.sg.tensors[starts].np_dtype
    begin = scatter_to_axes(b, starts, axes, rank, np.zeros(rank, dtype))
    # axes not sliced: the whole dim (end_mask when the axes are known; else an end past any
    # dim, which TFLite clamps, as ONNX does)
    mask = 0
    if isinstance(axes, list):
        mask = sum(1 << a for a in range(rank) if a not in axes)
    end = scatter_to_axes(b, b.cast(ends, dtype.name), axes, rank,
                          np.full(rank, 0 if mask else INT32_MAX, dtype))
    strides = scatter_to_axes(b, b.cast(steps, dtype.name), axes, rank, np.ones(rank, dtype))
    return b.op("STRIDED_SLICE", [x, as_int32(b, begin), as_int32(b, end),
                                  as_int32(b, strides)], {"end_mask": mask},
                shape=n.out_shape(0))


@lowers("Gather")
def gather(b, n):
    x, indices = n.input(0), n.input(1)
    shape = b.shape(x)
    axis = axis_of(n, n.attr("axis", 0), len(shape))
    value = b.value(indices)
    if value is not None and (value < 0).any():  # TFLite's GATHER takes no negative indices
        indices = b.const(np.where(value < 0, value + shape[axis], value).astype(value.dtype))
    elif value is None:  # known only at run time: wrap negatives, FLOOR_MOD is exact here
        dtype = b.sg.tensors[indices].np_dtype
        size = b.const(np.array(shape[axis], dtype))
        if axis in b.dynamic_axes(x):   # at least 1: LiteRT's FLOOR_MOD refuses a 0 divisor
            size = b.op("MAXIMUM", [b.reshape(b.op("GATHER", [b.dims_of(x, dtype.name), b.const(
                np.array([axis], np.int32))], {"axis": 0}), ()), b.const(np.array(1, dtype))])
        indices = b.op("FLOOR_MOD", [indices, size])
    return b.op("GATHER", [x, indices], {"axis": axis})


@lowers("Expand")
def expand(b, n):
    x, request = n.input(0), _requested_shape(b, n)
    if request is None:
        return _expand_at_run_time(b, n, x)
    try:
        out = tuple(np.broadcast_shapes(b.shape(x), tuple(request)))
    except ValueError:
        raise n.fail(f"cannot broadcast {list(b.shape(x))} to {request}") from None
    if out == b.shape(x):
        return x
    return b.op("BROADCAST_TO", [x, b.const(np.array(out, np.int32))])


def _expand_at_run_time(b, n, x):
    """BROADCAST_TO the elementwise maximum of the requested shape and the input's (both
    padded to one rank): ONNX's two-way broadcast, where a requested 1 keeps the input's dim."""
    shape = n.input(1)
    dtype = b.sg.tensors[shape].np_dtype
    count, in_shape = b.shape(shape)[0], b.shape(x)
    rank = max(count, len(in_shape))
    if count < rank:
        shape = b.op("CONCATENATION", [b.const(np.ones(rank - count, dtype)), shape],
                     {"axis": 0})
    if b.dynamic_axes(x):
        padded = b.dims_of(x, dtype.name)
        if rank > len(in_shape):
            padded = b.op("CONCATENATION", [b.const(np.ones(rank - len(in_shape), dtype)),
                                            padded], {"axis": 0})
    else:
        padded = b.const(np.array((1,) * (rank - len(in_shape)) + tuple(in_shape), dtype))
    target = b.op("MAXIMUM", [shape, padded])
    return b.op("BROADCAST_TO", [x, as_int32(b, target)], shape=n.out_shape(0))


@lowers("Tile")
def tile(b, n):
    if is_runtime(b, n.input(1)):
        return b.op("TILE", [n.input(0), as_int32(b, n.input(1))], shape=n.out_shape(0))
    repeats = const_input(b, n, 1, "repeats").reshape(-1).astype(np.int32)
    if (repeats == 1).all():
        return n.input(0)
    return b.op("TILE", [n.input(0), b.const(repeats)])
