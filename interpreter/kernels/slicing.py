"""Ops that select or pad parts of a tensor: SLICE STRIDED_SLICE GATHER GATHER_ND
EMBEDDING_LOOKUP TOPK_V2 PAD PADV2 MIRROR_PAD.

Index tensors that are data (GATHER's indices, ...) are checked in run: TFLite fails at run time
on an out-of-range index, and so do we. Parameters that set the output shape (SLICE's begin and
size, STRIDED_SLICE's begin, end and strides, TOPK_V2's k, the paddings) are read at prepare when
constant; when they arrive while running, the kernel is dynamic (`node.dynamic`: `run(*inputs)`
returns the outputs, shaped by the values).
"""
from __future__ import annotations

import numpy as np

from .common import DATA_TYPES, constant_value, normalize_axis
from .registry import register

INDEX_TYPES = ("int16", "int32", "int64")


def _int_vector(node, k: int, what: str, value=None) -> list:
    """Input k's constant value as ints, or `value` (its value while running)."""
    t = node.input(k)
    if t.type_name not in ("int32", "int64"):
        raise node.fail(f"{what} must be int32 or int64, got {t.type_name}")
    value = constant_value(node, k, what) if value is None else value
    return [int(v) for v in np.asarray(value).reshape(-1)]


def _at_run_time(node, *ks: int) -> bool:
    """True when any of these inputs is known only while running (not a constant, not empty)."""
    return any(node.input(k).data is None and 0 not in node.input(k).shape for k in ks)


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
    if _at_run_time(node, 2) or (_at_run_time(node, 1) and -1 in _int_vector(node, 2, "the size")):
        node.dynamic = True  # the output shape depends on the values

        def run_values(x, begin, size):
            index = _slice_index(node, x.shape, _int_vector(node, 1, "the begin", begin),
                                 _int_vector(node, 2, "the size", size))
            return [x[index].copy()]
        return run_values
    size = _int_vector(node, 2, "the size")
    if node.input(1).data is not None:
        begin = _int_vector(node, 1, "the begin")
        index = _slice_index(node, in_shape, begin, size)
        node.outputs[0].shape = tuple(s.stop - s.start for s in index)

        def run(x, _, __, out):
            np.copyto(out, x[index])
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
                raise IndexError(f"shrunk axis {i}: index {start} is out of range for size {n}")
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
    if _at_run_time(node, 2, 3) or (_at_run_time(node, 1) and not offset):
        node.dynamic = True  # the output shape depends on the values

        def run_values(x, begin, end, strides):
            p = _strided_params(opts, x.shape, begin.tolist(), end.tolist(), strides.tolist())
            shape = _strided_shape(node, p, offset)
            return [x.reshape(p[0])[_strided_index(p, offset)].reshape(shape).copy()]
        return run_values
    end = _int_vector(node, 2, "the end")
    strides = _int_vector(node, 3, "the strides")
    begin_known = node.input(1).data is not None
    begin = _int_vector(node, 1, "the begin") if begin_known else [0] * count
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
        return run

    def run_dynamic(x, begin, _, __, out):
        p = _strided_params(opts, in_shape, begin.tolist(), end, strides)
        np.copyto(out, x.reshape(eff_shape)[_strided_index(p, offset)])
    return run_dynamic


# -- GATHER / GATHER_ND / EMBEDDING_LOOKUP -------------------------------------------------------

def _check_indices(idx: np.ndarray, n: int, what: str) -> None:
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = idx[(idx < 0) | (idx >= n)].reshape(-1)[0]
        raise IndexError(f"{what} index {bad} is out of range [0, {n})")


@register("GATHER", *DATA_TYPES)
def gather(node):
    node.expect_inputs(2)
    params, indices = node.input(0), node.input(1)
    if indices.type_name not in INDEX_TYPES:
        raise node.fail(f"indices must be int16, int32 or int64, got {indices.type_name}")
    p_shape, i_shape = tuple(params.shape), tuple(indices.shape)
    axis = normalize_axis(node, node.options.axis, len(p_shape))
    batch = int(node.options.batch_dims)
    if batch < 0:
        batch += len(i_shape)
    if not (0 <= batch <= axis and batch <= len(i_shape)) or p_shape[:batch] != i_shape[:batch]:
        raise node.fail(f"batch_dims {node.options.batch_dims} does not fit params "
                        f"{list(p_shape)}, indices {list(i_shape)} and axis {axis}")
    node.outputs[0].shape = p_shape[:axis] + i_shape[batch:] + p_shape[axis + 1:]
    n = p_shape[axis]
    B = int(np.prod(p_shape[:batch], dtype=np.int64))
    outer = int(np.prod(p_shape[batch:axis], dtype=np.int64))
    inner = int(np.prod(p_shape[axis + 1:], dtype=np.int64))
    K = int(np.prod(i_shape[batch:], dtype=np.int64))
    p_view, i_view, o_view = (B, outer, n, inner), (B, K), (B, outer, K, inner)

    def run(x, idx, out):
        _check_indices(idx, n, "gather")
        xs, ids, outs = x.reshape(p_view), idx.reshape(i_view), out.reshape(o_view)
        for b in range(B):
            np.take(xs[b], ids[b], axis=1, out=outs[b])
    return run


@register("GATHER_ND", *DATA_TYPES)
def gather_nd(node):
    node.expect_inputs(2)
    params, indices = node.input(0), node.input(1)
    if indices.type_name not in INDEX_TYPES:
        raise node.fail(f"indices must be int16, int32 or int64, got {indices.type_name}")
    p_shape, i_shape = tuple(params.shape), tuple(indices.shape)
    if not i_shape or not 1 <= i_shape[-1] <= len(p_shape):
        raise node.fail(f"indices of shape {list(i_shape)} do not index params of shape "
                        f"{list(p_shape)}")
    nd = i_shape[-1]
    node.outputs[0].shape = i_shape[:-1] + p_shape[nd:]
    bounds = np.array(p_shape[:nd], np.int64)
    strides = np.array([int(np.prod(p_shape[d + 1:nd], dtype=np.int64)) for d in range(nd)],
                       np.int64)
    count = int(np.prod(p_shape[:nd], dtype=np.int64))
    inner = int(np.prod(p_shape[nd:], dtype=np.int64))
    n_slices = int(np.prod(i_shape[:-1], dtype=np.int64))

    def run(x, idx, out):
        coords = idx.reshape(n_slices, nd)
        if coords.size and ((coords < 0).any() or (coords >= bounds).any()):
            raise IndexError(f"gather_nd index out of bounds for params of shape {list(p_shape)}")
        flat = coords @ strides if nd > 1 else coords[:, 0]
        np.take(x.reshape(count, inner), flat, axis=0, out=out.reshape(n_slices, inner))
    return run


@register("EMBEDDING_LOOKUP", "int32")
def embedding_lookup(node):
    node.expect_inputs(2)
    ids, value, out_info = node.input(0), node.input(1), node.outputs[0]
    if len(ids.shape) != 1:
        raise node.fail(f"the ids must be a vector, got shape {list(ids.shape)}")
    if len(value.shape) < 2:
        raise node.fail(f"the table must have at least 2 dimensions, got {list(value.shape)}")
    out_info.shape = (ids.shape[0],) + tuple(value.shape[1:])
    rows = value.shape[0]
    hybrid = value.type_name in ("int8", "uint8") and out_info.type_name in ("float32", "float16")
    if not hybrid:
        if value.type_name != out_info.type_name:
            raise node.fail(f"the table is {value.type_name} but the output is "
                            f"{out_info.type_name}")

        def run(i, table, out):
            _check_indices(i, rows, "embedding_lookup")
            np.take(table, i, axis=0, out=out)
        return run
    q = value.quantization
    if q is None or not q.scale.size:
        raise node.fail("an int8 table with a float output needs a quantization scale")
    if np.any(np.asarray(q.zero_point) != 0):
        raise node.fail("an int8 table with a float output must be symmetric (zero point 0)")
    scales = np.asarray(q.scale, np.float32)
    if scales.size > 1 and scales.size != rows:
        raise node.fail(f"{scales.size} scales for a table of {rows} rows")
    per_row = scales.reshape((-1,) + (1,) * (len(value.shape) - 1))
    acc = np.empty(out_info.shape, np.float32) if out_info.type_name == "float16" else None

    def run_hybrid(i, table, out):
        _check_indices(i, rows, "embedding_lookup")
        # TFLite reads a uint8 table as int8 bytes too.
        q8 = table.view(np.int8)[i]
        s = per_row[i] if scales.size > 1 else per_row[0]
        np.multiply(q8, s, out=out if acc is None else acc)
        if acc is not None:
            np.copyto(out, acc, casting="unsafe")
    return run_hybrid


# -- TOPK_V2 -------------------------------------------------------------------------------------

@register("TOPK_V2", "float32", "int8", "uint8", "int16", "int32", "int64", "uint64", "float16")
def topk_v2(node):
    node.expect_inputs(2)
    in_shape = node.input(0).shape
    if not in_shape:
        raise node.fail("the input must have at least one dimension")
    if len(node.outputs) != 2:
        raise node.fail(f"expected 2 outputs (values, indices), got {len(node.outputs)}")
    index_type = node.outputs[1].dtype
    if _at_run_time(node, 1):
        node.dynamic = True  # the output shape depends on k

        def run_values(x, k_value):
            k = _top_k(node, x.shape, _int_vector(node, 1, "k", k_value))
            shape = x.shape[:-1] + (k,)
            values, indices = np.empty(shape, x.dtype), np.empty(shape, index_type)
            _top(x, k, values, indices)
            return [values, indices]
        return run_values
    k = _top_k(node, in_shape, _int_vector(node, 1, "k"))
    shape = tuple(in_shape[:-1]) + (k,)
    node.outputs[0].shape = node.outputs[1].shape = shape

    def run(x, _, values, indices):
        _top(x, k, values, indices)
    return run


def _top_k(node, in_shape: tuple, k_values: list) -> int:
    if len(k_values) != 1:
        raise node.fail(f"k must hold one value, got {len(k_values)}")
    k, n = k_values[0], in_shape[-1]
    if not 0 <= k <= n:
        raise node.fail(f"k {k} is out of range for a last dimension of {n}")
    return k


def _top(x, k: int, values, indices) -> None:
    # Largest first; among equal values the lower index first (TFLite's order): a stable
    # ascending sort of the reversed row, read backwards.
    n = x.shape[-1]
    order = np.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1][..., :k]
    np.subtract(n - 1, order, out=indices, casting="unsafe")
    np.copyto(values, np.take_along_axis(x, indices, axis=-1))


# -- PAD / PADV2 / MIRROR_PAD --------------------------------------------------------------------

def _paddings(node, rank: int, values=None) -> list:
    """The paddings: input 1's constant value, or `values` (its value while running)."""
    t = node.input(1)
    values = np.asarray(constant_value(node, 1, "the paddings") if values is None else values)
    if t.type_name not in ("int32", "int64") or values.shape != (rank, 2):
        raise node.fail(f"the paddings must be an int32 or int64 [{rank}, 2] tensor, got "
                        f"{t.type_name} {list(values.shape)}")
    if (values < 0).any():
        raise node.fail(f"the paddings {values.tolist()} must not be negative")
    return [(int(a), int(b)) for a, b in values]


def _pad_prepare(node):
    in_shape = tuple(node.input(0).shape)
    pads = _paddings(node, len(in_shape))
    node.outputs[0].shape = tuple(a + n + b for n, (a, b) in zip(in_shape, pads))
    return tuple(slice(a, a + n) for n, (a, _) in zip(in_shape, pads))


def _pad_at_run_time(node, value_of):
    """PAD and PADV2 with paddings that arrive while running: run(x, paddings[, value])
    returns the padded array; `value_of(inputs)` gives the fill."""
    node.dynamic = True
    dtype = node.outputs[0].dtype

    def run(x, paddings, *rest):
        pads = _paddings(node, x.ndim, paddings)
        out = np.full(tuple(a + n + b for n, (a, b) in zip(x.shape, pads)), value_of(rest),
                      dtype)
        out[tuple(slice(a, a + n) for n, (a, _) in zip(x.shape, pads))] = x
        return [out]
    return run


def _pad_value(node) -> object:
    """PAD's fill: the output zero point for quantized tensors, else 0."""
    out = node.outputs[0]
    if out.type_name in ("int8", "uint8", "int16") and out.quantization is not None:
        return out.zero_point
    return 0


@register("PAD", *DATA_TYPES)
def pad(node):
    node.expect_inputs(2)
    value = _pad_value(node)
    if _at_run_time(node, 1):
        return _pad_at_run_time(node, lambda rest: value)
    center = _pad_prepare(node)

    def run(x, _, out):
        out.fill(value)
        out[center] = x
    return run


@register("PADV2", *DATA_TYPES)
def padv2(node):
    node.expect_inputs(2, 3)
    const = node.inputs[2] if len(node.inputs) == 3 else None
    if _at_run_time(node, 1):
        value = _pad_value(node)
        return _pad_at_run_time(node, lambda rest: rest[0].reshape(()) if rest and
                                rest[0] is not None else value)
    center = _pad_prepare(node)
    if const is None:
        value = _pad_value(node)

        def run(x, _, out):
            out.fill(value)
            out[center] = x
        return run
    if const.type_name != node.input(0).type_name or int(np.prod(const.shape)) != 1:
        raise node.fail(f"the constant value must be one {node.input(0).type_name}, got "
                        f"{const.type_name} {list(const.shape)}")
    out = node.outputs[0]
    if out.type_name in ("int8", "uint8", "int16") and out.quantization is not None and \
            (const.zero_point != out.zero_point or const.scale != out.scale):
        raise node.fail("the constant value must have the output's scale and zero point")

    def run_value(x, _, v, out):
        out.fill(v.reshape(()))
        out[center] = x
    return run_value


@register("MIRROR_PAD", *DATA_TYPES)
def mirror_pad(node):
    node.expect_inputs(2)
    in_shape = tuple(node.input(0).shape)
    mode = int(node.options.mode)  # 0 REFLECT, 1 SYMMETRIC
    if mode not in (0, 1):
        raise node.fail(f"unknown mirror pad mode {mode}")
    if _at_run_time(node, 1):
        node.dynamic = True  # the output shape depends on the paddings
        dtype = node.outputs[0].dtype

        def run_values(x, paddings):
            pads = _paddings(node, x.ndim, paddings)
            center, fills = _mirror_plan(node, x.shape, pads, mode)
            out = np.empty(tuple(a + n + b for n, (a, b) in zip(x.shape, pads)), dtype)
            _mirror(x, center, fills, out)
            return [out]
        return run_values
    center = _pad_prepare(node)
    _, fills = _mirror_plan(node, in_shape, _paddings(node, len(in_shape)), mode)

    def run(x, _, out):
        _mirror(x, center, fills, out)
    return run


def _mirror_plan(node, in_shape: tuple, pads: list, mode: int):
    """(center index, [(border index, mirror source index)]) of a mirror pad."""
    center = tuple(slice(a, a + n) for n, (a, _) in zip(in_shape, pads))
    skip = 1 if mode == 0 else 0
    # The center is copied first; then axis by axis, each border copies its mirror image from
    # the region already written (full extent along earlier axes, center along later ones).
    fills = []
    for d, (n, (a, b)) in enumerate(zip(in_shape, pads)):
        if a + b == 0:
            continue
        if max(a, b) > n - skip:
            raise node.fail(f"paddings {a}, {b} of dimension {d} exceed its size {n}"
                            + (" - 1 (REFLECT)" if skip else ""))
        dst = list(range(a)) + list(range(a + n, a + n + b))
        src = [a + (a - i) - 1 + skip for i in range(a)] \
            + [a + n - 1 - j - skip for j in range(b)]
        region = (slice(None),) * d
        after = center[d + 1:]
        fills.append((region + (np.array(dst),) + after, region + (np.array(src),) + after))
    return center, fills


def _mirror(x, center, fills, out) -> None:
    out[center] = x
    for dst, src in fills:
        out[dst] = out[src]
