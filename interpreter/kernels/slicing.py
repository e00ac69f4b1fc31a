"""Ops that cut a part out of a tensor: SLICE and STRIDED_SLICE.

Parameters that set the output shape (begin, size, end, strides) are read at prepare when
constant; when they arrive while running, the kernel is dynamic (`node.dynamic`: `run(*inputs)`
returns the outputs, shaped by the values).
"""
from __future__ import annotations

import numpy as np

from .common import DATA_TYPES, int_vector, known_at_run_time
from .errors import IndexOutOfRange
from .registry import register


# -- SLICE ---------------------------------------------------------------------------------------

def _slice_index(node, in_shape, begin, size) -> tuple:
    index = []
    for d, (n, b, s) in enumerate(zip(in_shape, begin, size)):
        if s == -1:
            s = n - b
        if b < 0 or s < 0 or b + s > n:
            raise node.fail(f"begin {list(begin)} and size {list(size)} leave dimension {d} "
                            f"of size {n}")
        index.append(slice(b, b + s))
    return tuple(index)


@register("SLICE", *DATA_TYPES)
def slice_(node):
    node.expect_inputs(3)
    in_shape = node.input(0).shape
    if len(node.input(1).shape) != 1 or node.input(1).shape[0] != len(in_shape) or \
            len(node.input(2).shape) != 1 or node.input(2).shape[0] != len(in_shape):
        raise node.fail(f"begin and size must hold {len(in_shape)} values each")
    if known_at_run_time(node, 2) or \
            (known_at_run_time(node, 1) and -1 in int_vector(node, 2, "the size")):
        node.dynamic = True  # the output shape depends on the values

        def run_values(x, begin, size):
            index = _slice_index(node, x.shape, int_vector(node, 1, "the begin", begin),
                                 int_vector(node, 2, "the size", size))
            return [x[index].copy()]
        return run_values
    size = int_vector(node, 2, "the size")
    if node.input(1).data is not None:
        begin = int_vector(node, 1, "the begin")
        index = _slice_index(node, in_shape, begin, size)
        node.outputs[0].shape = tuple(s.stop - s.start for s in index)

        def run(x, _, __, out):
            np.copyto(out, x[index])
        run.view = lambda x: x[index]    # the plan may read the output as this view (views.py)
        return run
    node.outputs[0].shape = tuple(size)

    def run_dynamic(x, begin, _, out):
        np.copyto(out, x[_slice_index(node, in_shape, begin.tolist(), size)])
    return run_dynamic


# -- STRIDED_SLICE -------------------------------------------------------------------------------

def _bit(mask: int, i: int) -> bool:
    return bool(mask >> i & 1)


def _strided_params(opts, in_shape, begin, end, strides):
    """TFLite's BuildStridedSliceParams: expands the ellipsis and new axes into per-axis
    (start index, stop index, stride, begin/end/shrink bits) over the effective input shape."""
    count = len(begin)
    rank = len(in_shape)
    num_add = sum(1 for i in range(count)
                  if not _bit(opts.ellipsis_mask, i) and _bit(opts.new_axis_mask, i))
    dims = rank + num_add
    ell_mask = new_mask = 0
    ell_start, expanded = dims, 0
    i = 0
    while i < dims:
        if _bit(opts.ellipsis_mask, i):
            ell_start = i
            ell_end = max(i + 1, min(i + 1 + num_add + rank - count, dims))
            expanded = ell_end - ell_start - 1
            while i < ell_end:
                ell_mask |= 1 << i
                i += 1
            continue
        if _bit(opts.new_axis_mask, i - expanded):
            new_mask |= 1 << i
        i += 1
    starts, stops, steps = [0] * dims, [0] * dims, [1] * dims
    bmask = emask = smask = 0
    eff_shape = [0] * dims
    added_ell = added_axes = 0
    for i in range(dims):
        if _bit(ell_mask, i):
            added_ell = max(0, i - ell_start)
            bmask |= 1 << i
            emask |= 1 << i
            eff_shape[i] = in_shape[i - added_axes]
        elif _bit(new_mask, i):
            stops[i] = 1
            eff_shape[i] = 1
            added_axes += 1
        elif i >= count + expanded:
            bmask |= 1 << i
            emask |= 1 << i
            eff_shape[i] = in_shape[i - added_axes]
        else:
            j = i - added_ell
            starts[i], stops[i], steps[i] = begin[j], end[j], strides[j]
            if _bit(opts.begin_mask, j):
                bmask |= 1 << i
            if _bit(opts.end_mask, j):
                emask |= 1 << i
            if _bit(opts.shrink_axis_mask, j):
                smask |= 1 << i
            eff_shape[i] = in_shape[i - added_axes]
    return eff_shape, starts, stops, steps, bmask, emask, smask


def _start_for_axis(n, start, stride, begin_bit) -> int:
    if start < 0:
        start += n
    start = min(max(start, 0), n) if stride > 0 else min(max(start, -1), n - 1)
    if begin_bit:
        start = 0 if stride > 0 else n - 1
    return start


def _stop_for_axis(n, stop, stride, start, end_bit, shrink_bit, offset) -> int:
    if shrink_bit:
        return start if start >= n else start + 1
    if offset:
        stop += start
    if stop < 0:
        stop += n
    stop = min(max(stop, 0), n) if stride > 0 else min(max(stop, -1), n - 1)
    if end_bit:
        stop = n if stride > 0 else -1
    return stop


def _strided_index(params, offset) -> tuple:
    """The numpy index (ints for shrunk axes) of TFLite's strided slice."""
    eff_shape, starts, stops, steps, bmask, emask, smask = params
    index = []
    for i, n in enumerate(eff_shape):
        start = _start_for_axis(n, starts[i], steps[i], _bit(bmask, i))
        stop = _stop_for_axis(n, stops[i], steps[i], start, _bit(emask, i), _bit(smask, i),
                              offset)
        if _bit(smask, i):
            if not 0 <= start < n:
                raise IndexOutOfRange(f"shrunk axis {i}: index {start} is out of range for "
                                      f"size {n}")
            index.append(start)
        elif start < 0 or (steps[i] < 0 and stop >= start) or (steps[i] > 0 and stop <= start):
            index.append(slice(0, 0))
        else:
            index.append(slice(start, stop if stop >= 0 else None, steps[i]))
    return tuple(index)


def _strided_shape(node, params, offset) -> tuple:
    """TFLite's output shape (ResizeOutputTensor)."""
    eff_shape, starts, stops, steps, bmask, emask, smask = params
    shape = []
    for i, n in enumerate(eff_shape):
        stride = steps[i]
        if stride == 0:
            raise node.fail("stride value has to be non-zero")
        if _bit(smask, i):
            continue
        if offset:
            size = stops[i]
        else:
            start = _start_for_axis(n, starts[i], stride, _bit(bmask, i))
            size = _stop_for_axis(n, stops[i], stride, start, _bit(emask, i), False, False) - start
        if (size < 0) != (stride < 0):
            size = 0
        elif stride < 0:
            size = (-(size + 1)) // (-stride) + 1  # C++'s truncating (size + 1) / stride + 1
        else:
            size = 0 if size == 0 else (size - 1) // stride + 1
        shape.append(size)
    return tuple(shape)


@register("STRIDED_SLICE", *DATA_TYPES)
def strided_slice(node):
    node.expect_inputs(4)
    opts = node.options
    in_shape = node.input(0).shape
    for k, what in ((1, "begin"), (2, "end"), (3, "strides")):
        t = node.input(k)
        if t.type_name not in ("int32", "int64") or len(t.shape) != 1:
            raise node.fail(f"the {what} must be an int32 vector")
    count = node.input(1).shape[0]
    if node.input(2).shape[0] != count or node.input(3).shape[0] != count:
        raise node.fail("begin, end and strides must have the same length")
    offset = bool(opts.offset)
    if known_at_run_time(node, 2, 3) or (known_at_run_time(node, 1) and not offset):
        node.dynamic = True  # the output shape depends on the values

        def run_values(x, begin, end, strides):
            p = _strided_params(opts, x.shape, begin.tolist(), end.tolist(), strides.tolist())
            shape = _strided_shape(node, p, offset)
            return [x.reshape(p[0])[_strided_index(p, offset)].reshape(shape).copy()]
        return run_values
    end = int_vector(node, 2, "the end")
    strides = int_vector(node, 3, "the strides")
    begin_known = node.input(1).data is not None
    begin = int_vector(node, 1, "the begin") if begin_known else [0] * count
    params = _strided_params(opts, in_shape, begin, end, strides)
    node.outputs[0].shape = _strided_shape(node, params, offset)
    eff_shape = tuple(params[0])
    if begin_known:
        try:
            index = _strided_index(params, offset)
        except IndexError as e:
            raise node.fail(str(e)) from None

        def run(x, _, __, ___, out):
            np.copyto(out, x.reshape(eff_shape)[index])
        run.view = lambda x: x.reshape(eff_shape)[index]   # (views.py)
        return run

    def run_dynamic(x, begin, _, __, out):
        p = _strided_params(opts, in_shape, begin.tolist(), end, strides)
        np.copyto(out, x.reshape(eff_shape)[_strided_index(p, offset)])
    return run_dynamic
