"""Where a tensor's dims come from: `source(ed, t, axes)` follows dims of `t` back through the
ops that pass them on unchanged (elementwise ops, a FULLY_CONNECTED's leading dims, a
BATCH_MATMUL's rows and columns, transposes, reductions' kept axes, gathers, splits and whole
slices, reshapes that only add or drop size-1 dims or keep the leading ones...) to the earliest
tensor that has them, so that a SHAPE measures that tensor (often a graph input: one SHAPE of
it, not one per use). Structural rules only, so the answer is the same at every size of the
dynamic dims; a nominal size is compared only where broadcasting decides which operand a dim
comes from (a dynamic dim is never 1 in the graphs that compute shapes: a size-1 dim is a
fixed one)."""
from __future__ import annotations

import numpy as np

SAME_SHAPE = frozenset({
    "ABS", "CAST", "CEIL", "COS", "DEQUANTIZE", "ELU", "EXP", "FLOOR", "GELU", "HARD_SWISH",
    "L2_NORMALIZATION", "LEAKY_RELU", "LOG", "LOGICAL_NOT", "LOGISTIC", "LOG_SOFTMAX", "NEG",
    "QUANTIZE", "RELU", "RELU6", "RELU_N1_TO_1", "ROUND", "RSQRT", "SIGN", "SIN", "SOFTMAX",
    "SQRT", "SQUARE", "TANH", "ZEROS_LIKE", "ONES_LIKE", "LOCAL_RESPONSE_NORMALIZATION",
})
BROADCASTING = frozenset({
    "ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "FLOOR_MOD", "FLOOR_DIV", "POW",
    "SQUARED_DIFFERENCE", "EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER",
    "GREATER_EQUAL", "LOGICAL_AND", "LOGICAL_OR", "SELECT", "SELECT_V2", "PRELU",
})
REDUCERS = frozenset({"MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD", "REDUCE_ANY",
                      "REDUCE_ALL"})
MAX_STEPS = 10_000   # a chain longer than any graph's depth: stop there


def source(ed, t: int, axes) -> tuple:
    """(tensor, axes): the earliest tensor whose dims `axes` are tensor t's dims `axes`, all
    from the same tensor (t itself when no op passes them on)."""
    axes = tuple(int(a) for a in axes)
    for _ in range(MAX_STEPS):
        step = _one_step(ed, t, axes)
        if step is None:
            return t, axes
        t, axes = step
    return t, axes


def _one_step(ed, t: int, axes: tuple):
    op = ed.producer(t)
    if op is not None and op.op in ("SPLIT", "SPLIT_V"):
        return _split(ed, op, t, axes)
    if op is None or len(op.outputs) != 1 or op.outputs[0] != t:
        return None
    shape = ed.shape(t)
    rank = len(shape)
    if any(not 0 <= a < rank for a in axes):
        return None
    inputs = [k for k in op.inputs if k >= 0]
    kind = op.op
    if kind in SAME_SHAPE:
        return (inputs[0], axes) if inputs and tuple(ed.shape(inputs[0])) == tuple(shape) \
            else None
    if kind in BROADCASTING:
        return _broadcast_source(ed, inputs, shape, axes)
    if kind == "FULLY_CONNECTED":
        return _fully_connected(ed, op, shape, axes)
    if kind == "BATCH_MATMUL":
        return _batch_matmul(ed, op, shape, axes)
    if kind == "TRANSPOSE":
        perm = ed.transpose_perm(op)
        return None if perm is None else (op.inputs[0], tuple(perm[a] for a in axes))
    if kind in REDUCERS:
        return _reduced(ed, op, shape, axes)
    if kind == "CONCATENATION":
        axis = op.options.axis % rank
        return None if axis in axes else (op.inputs[0], axes)
    if kind == "GATHER":
        return _gather(ed, op, shape, axes)
    if kind == "STRIDED_SLICE":
        return _whole_dims(ed, op, axes)
    if kind in ("RESHAPE", "SQUEEZE", "EXPAND_DIMS"):
        moved = _ones_moved(ed, op.inputs[0], shape, axes)
        if moved is None and kind == "RESHAPE" and len(op.inputs) > 1:
            moved = _computed_target(ed, op.inputs[1], axes)
        if moved is None and kind == "RESHAPE":
            moved = _kept_prefix(ed, op.inputs[0], shape, axes)
        return moved
    return None


def _split(ed, op, t: int, axes: tuple):
    """A SPLIT's or SPLIT_V's parts have its input's dims but along the split axis."""
    x, axis_t = (op.inputs[1], op.inputs[0]) if op.op == "SPLIT" else (op.inputs[0],
                                                                       op.inputs[2])
    axis = ed.value(axis_t)
    rank = len(ed.shape(x))
    if axis is None or axis.size != 1 or len(ed.shape(t)) != rank:
        return None
    axis = int(axis.reshape(-1)[0]) % rank
    return None if axis in axes else (x, axes)


def _whole_dims(ed, op, axes: tuple):
    """A STRIDED_SLICE's dims that it takes whole (from 0 or masked, to the masked end, stride
    1: how the converter slices a dynamic dim it keeps) are its input's."""
    o = op.options
    if len(op.inputs) != 4 or o.ellipsis_mask or o.new_axis_mask or o.shrink_axis_mask or \
            o.offset or len(ed.shape(op.inputs[0])) != len(ed.shape(op.outputs[0])):
        return None
    begin, strides = ed.value(op.inputs[1]), ed.value(op.inputs[3])
    if begin is None or strides is None or strides.ndim != 1 or begin.shape != strides.shape:
        return None
    for a in axes:
        if a >= strides.size or int(strides[a]) != 1 or not (o.end_mask >> a) & 1 or \
                not ((o.begin_mask >> a) & 1 or int(begin[a]) == 0):
            return None
    return op.inputs[0], axes


def _kept_prefix(ed, x: int, shape: tuple, axes: tuple):
    """A reshape that keeps x's first dims and regroups the rest ([b, s, 64] to [b, s, 4, 16]:
    the -1 of [b, -1, 4, 16] is s): the kept dims are x's. Sizes compared at the conversion's
    two sizes alike (else the graphs differ and `mark_dynamic_dims` refuses them)."""
    in_shape = ed.shape(x)
    j = 0
    while j < min(len(in_shape), len(shape)) and in_shape[j] == shape[j]:
        j += 1
    if any(a >= j for a in axes) or \
            int(np.prod(in_shape[j:], dtype=np.int64)) != int(np.prod(shape[j:], dtype=np.int64)):
        return None
    return x, axes


def _computed_target(ed, target: int, axes: tuple):
    """A RESHAPE's dims read from its computed target where each is a dim of one tensor
    (CONCATENATION of GATHERs of a SHAPE, and constants for the other dims)."""
    found = [element_source(ed, target, a) for a in axes]
    if any(f is None for f in found) or len({t for t, _ in found}) != 1:
        return None
    return found[0][0], tuple(axis for _, axis in found)


def element_source(ed, vector: int, k: int):
    """(tensor, axis) when element k of the int `vector` (0-D or 1-D) is that dim of the
    tensor."""
    found = _element(ed, vector, k)
    return found if isinstance(found, tuple) else None


def constant_element(ed, vector: int, k: int):
    """Element k of the int `vector` where it is a constant (the vector's, or its piece's in a
    CONCATENATION...), else None."""
    found = _element(ed, vector, k)
    return found if isinstance(found, int) else None


def _element(ed, vector: int, k: int, depth: int = 0):
    """Where element k of the int `vector` comes from, through the ops that pass vector
    elements on (CAST, GATHER by constant indices, RESHAPE of a vector, STRIDED_SLICE,
    CONCATENATION): (tensor, axis) when it is that dim of the tensor (a SHAPE of it), an int
    when it is a constant, None when it is computed otherwise."""
    op = ed.producer(vector)
    if op is None:
        value = ed.value(vector)
        if value is None or value.ndim > 1 or not 0 <= k < value.size:
            return None
        return int(value.reshape(-1)[k])
    if depth > 8:
        return None
    if op.op == "SHAPE":
        return op.inputs[0], k
    if op.op == "CAST":
        return _element(ed, op.inputs[0], k, depth + 1)
    if op.op == "GATHER" and not op.options.batch_dims and op.options.axis == 0:
        index = ed.value(op.inputs[1])
        if index is None or index.ndim > 1 or not 0 <= k < index.size:
            return None
        return _element(ed, op.inputs[0], int(index.reshape(-1)[k]), depth + 1)
    if op.op in ("RESHAPE", "SQUEEZE", "EXPAND_DIMS") and len(ed.shape(op.inputs[0])) <= 1:
        return _element(ed, op.inputs[0], k, depth + 1)   # the same order
    if op.op == "STRIDED_SLICE":
        picked = vector_slice(ed, op)
        return None if picked is None or not 0 <= k < len(picked) else \
            _element(ed, op.inputs[0], picked[k], depth + 1)
    if op.op == "CONCATENATION" and op.options.axis in (0, -1):
        for piece in op.inputs:
            shape = ed.shape(piece)
            if len(shape) != 1:
                return None
            if k < shape[0]:
                return _element(ed, piece, k, depth + 1)
            k -= shape[0]
    return None


def _broadcast_source(ed, inputs: list, shape: tuple, axes: tuple, trailing: int = 0):
    """The first non-constant operand that holds every dim in `axes` (the others have 1 there,
    or the same size, or no such axis). `trailing`: the operands' last dims that are not
    broadcast (a BATCH_MATMUL's matrices), not in `shape`."""
    rank = len(shape)
    for k in inputs:
        if ed.value(k) is not None:
            continue
        own = ed.shape(k)[:len(ed.shape(k)) - trailing]
        lead = rank - len(own)
        if any(a - lead < 0 or own[a - lead] != shape[a] for a in axes):
            continue
        if all(_fits(ed.shape(j)[:len(ed.shape(j)) - trailing], shape, a)
               for j in inputs if j != k for a in axes):
            return k, tuple(a - lead for a in axes)
    return None


def _fits(own: tuple, shape: tuple, a: int) -> bool:
    i = a - (len(shape) - len(own))
    return i < 0 or own[i] == 1 or own[i] == shape[a]


def _fully_connected(ed, op, shape: tuple, axes: tuple):
    rank = len(shape)
    x = op.inputs[0]
    in_rank = len(ed.shape(x))
    if rank - 1 in axes:
        return None
    if op.options.keep_num_dims and in_rank == rank:
        return x, axes
    if rank == 2 and in_rank == 2:
        return x, axes
    return None


def _batch_matmul(ed, op, shape: tuple, axes: tuple):
    """Rows come from x, columns from y, batch dims by broadcasting: all from one operand."""
    x, y = op.inputs[0], op.inputs[1]
    rank = len(shape)
    rx, ry = len(ed.shape(x)), len(ed.shape(y))
    adj_x, adj_y = op.options.adj_x, op.options.adj_y
    mapped = {}
    for a in axes:
        if a == rank - 2:
            mapped.setdefault(x, []).append(rx - 1 if adj_x else rx - 2)
        elif a == rank - 1:
            mapped.setdefault(y, []).append(ry - 2 if adj_y else ry - 1)
        else:
            batch = _broadcast_source(ed, [x, y], shape[:-2], (a,), trailing=2)
            if batch is None:
                return None
            mapped.setdefault(batch[0], []).append(batch[1][0])
    if len(mapped) != 1:
        return None
    (t, new_axes), = mapped.items()
    return (t, tuple(new_axes)) if ed.value(t) is None else None


def _reduced(ed, op, shape: tuple, axes: tuple):
    x = op.inputs[0]
    reduced = ed.value(op.inputs[1]) if len(op.inputs) > 1 else None
    if reduced is None:
        return None
    in_rank = len(ed.shape(x))
    gone = sorted({int(r) % in_rank for r in reduced.reshape(-1)})
    if op.options.keep_dims:
        return None if any(a in gone for a in axes) else (x, axes)
    kept = [i for i in range(in_rank) if i not in gone]
    return (x, tuple(kept[a] for a in axes)) if len(kept) == len(shape) else None


def _gather(ed, op, shape: tuple, axes: tuple):
    if op.options.batch_dims:
        return None
    params, indices = op.inputs[0], op.inputs[1]
    p_rank, n_idx = len(ed.shape(params)), len(ed.shape(indices))
    axis = op.options.axis % p_rank
    if len(shape) != p_rank - 1 + n_idx:
        return None
    mapped = {}
    for a in axes:
        if a < axis:
            mapped.setdefault(params, []).append(a)
        elif a < axis + n_idx:
            mapped.setdefault(indices, []).append(a - axis)
        else:
            mapped.setdefault(params, []).append(a - n_idx + 1)
    if len(mapped) != 1:
        return None
    (t, new_axes), = mapped.items()
    return (t, tuple(new_axes)) if ed.value(t) is None else None


def _ones_moved(ed, x: int, shape: tuple, axes: tuple):
    """A reshape that only adds or drops size-1 dims: its other dims in order are x's."""
    moved = moved_ones(ed.shape(x), shape)
    if moved is None or any(shape[a] == 1 for a in axes):
        return None
    return x, tuple(moved[0][a] for a in axes)


def moved_ones(in_shape, out_shape):
    """A reshape from `in_shape` to `out_shape` that only adds or drops size-1 dims, read left
    to right: ({out axis: in axis} for the dims it keeps, the in axes it drops, the out axes it
    adds); None when it moves other dims."""
    kept, dropped, added = {}, [], []
    i = j = 0
    while i < len(in_shape) or j < len(out_shape):
        d = in_shape[i] if i < len(in_shape) else None
        e = out_shape[j] if j < len(out_shape) else None
        if d is not None and d == e:
            kept[j] = i
            i, j = i + 1, j + 1
        elif d == 1:
            dropped.append(i)
            i += 1
        elif e == 1:
            added.append(j)
            j += 1
        else:
            return None
    return kept, dropped, added


def vector_slice(ed, op):
    """The elements a STRIDED_SLICE of a 1-D tensor with constant parameters keeps, in order,
    or None for other slices."""
    o = op.options
    if len(op.inputs) != 4 or len(ed.shape(op.inputs[0])) != 1 or o.ellipsis_mask or \
            o.new_axis_mask or o.shrink_axis_mask or o.offset:
        return None
    begin, end, stride = (ed.value(t) for t in op.inputs[1:])
    if begin is None or end is None or stride is None or begin.size != 1 or \
            end.size != 1 or stride.size != 1 or int(stride.reshape(-1)[0]) == 0:
        return None
    n = ed.shape(op.inputs[0])[0]
    picked = list(range(n))[slice(None if o.begin_mask & 1 else int(begin.reshape(-1)[0]),
                                  None if o.end_mask & 1 else int(end.reshape(-1)[0]),
                                  int(stride.reshape(-1)[0]))]
    return picked if (len(picked),) == tuple(ed.shape(op.outputs[0])) else None
