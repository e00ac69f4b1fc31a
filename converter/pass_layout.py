"""Layout: push TRANSPOSE ops toward the outputs through layout-agnostic ops, where inverse pairs
meet and cancel.

The importer wraps every NHWC op (CONV_2D, pools, ...) in TRANSPOSE ops to and from NCHW. For a
TRANSPOSE(perm) that feeds a layout-agnostic op X, X can run on the transpose's input instead
(constants permuted, axes remapped) with one TRANSPOSE after it; repeated, the transposes travel
down until one meets its inverse (the NCHW -> NHWC before the next convolution) and both vanish.

Convention: TRANSPOSE(perm) makes y from x with y.shape[i] == x.shape[perm[i]].
"""
from __future__ import annotations

import numpy as np

from edgelite.schema import Model, remove_dead

from .builder import TRANSPOSE_MAX_RANK, reshape_groups
from .editor import Editor

# Ops that apply to each element on its own (outputs have the inputs' broadcast shape).
ELEMENTWISE = frozenset({
    "ABS", "CEIL", "COS", "ELU", "EXP", "FLOOR", "GELU", "HARD_SWISH", "LEAKY_RELU", "LOG",
    "LOGISTIC", "NEG", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "ROUND", "RSQRT",
    "SIN", "SQRT", "SQUARE", "TANH", "CAST", "LOGICAL_NOT", "SIGN", "ZEROS_LIKE", "ONES_LIKE",
    "ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "POW", "SQUARED_DIFFERENCE", "FLOOR_DIV",
    "FLOOR_MOD", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL",
    "LOGICAL_AND", "LOGICAL_OR", "PRELU", "SELECT_V2", "ADD_N",
    "QUANTIZE", "DEQUANTIZE",   # per-tensor, as the QDQ import writes them (lower_qdq.py)
})
REDUCERS = frozenset({"MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD", "REDUCE_ANY",
                      "REDUCE_ALL"})


# Types TFLite's TRANSPOSE moves.
_TRANSPOSABLE = frozenset({"float32", "float16", "int8", "uint8", "int16", "int32", "int64",
                           "bool"})


def inverse(perm) -> tuple:
    return tuple(int(i) for i in np.argsort(perm))


def push_transposes(model: Model) -> bool:
    """Move TRANSPOSE ops down through layout-agnostic ops; merge and cancel them."""
    changed = False
    for sg in model.subgraphs:
        ed = Editor(model, sg)
        while _sweep(ed):
            changed = True
        remove_dead(sg)
    return changed


def _sweep(ed: Editor) -> bool:
    changed = False
    i = 0
    while i < len(ed.sg.operators):
        op = ed.sg.operators[i]
        rule = RULES.get(op.op)
        if rule is not None:
            positions, apply = rule
            perm = _shared_perm(ed, op, positions(op))
            if perm is not None and apply(ed, op, perm):   # edits through the editor's maps
                changed = True
        i += 1
    return changed


def _shared_perm(ed: Editor, op, positions) -> tuple | None:
    """The perm of the TRANSPOSE(s) feeding `op` at `positions`, when every other input there
    is a constant or a tensor of ones-only shape."""
    perm = None
    for k in positions:
        t = op.inputs[k] if k < len(op.inputs) else -1
        if t < 0:
            continue
        p = ed.transpose_perm(ed.producer(t))
        if p is not None:
            if perm is not None and p != perm:
                return None
            perm = p
        elif ed.value(t) is None and any(d != 1 for d in ed.shape(t)):
            return None
    return perm


def _source(ed: Editor, t: int) -> int:
    """The input of the TRANSPOSE that writes t."""
    return ed.producer(t).inputs[0]


def _permute_input(ed: Editor, op, k: int, perm) -> bool:
    """Input k of `op` in the source layout: the transpose's input, or a permuted constant."""
    t = op.inputs[k]
    if t < 0:
        return True
    if ed.transpose_perm(ed.producer(t)) == perm:
        ed.set_input(op, k, _source(ed, t))
        return True
    shape = ed.shape(t)
    r = len(perm)
    if len(shape) > r:
        return False
    if all(d == 1 for d in shape):
        return True  # broadcasts the same in any layout
    value = ed.value(t)
    full = value.reshape((1,) * (r - value.ndim) + value.shape)
    ed.set_input(op, k, ed.const(np.ascontiguousarray(full.transpose(inverse(perm))),
                                 f"{ed.sg.tensors[t].name}/permuted"))
    return True


# -- rules: (data input positions, apply(ed, op, perm) -> bool) ----------------------------------

def _all(op):
    return range(len(op.inputs))


def _first(op):
    return (0,)


def push_elementwise(ed: Editor, op, perm) -> bool:
    r = len(perm)
    if any(len(ed.shape(t)) != r for t in op.outputs):
        return False
    if any(ed.sg.tensors[t].dtype not in _TRANSPOSABLE for t in op.outputs):
        return False  # a CAST to a type no TRANSPOSE kernel moves (float64)
    if any(t >= 0 and len(ed.shape(t)) > r for t in op.inputs):
        return False
    for k in range(len(op.inputs)):
        _permute_input(ed, op, k, perm)
    for k in range(len(op.outputs)):
        ed.transpose_after(op, k, perm)
    return True


def push_softmax(ed: Editor, op, perm) -> bool:
    """Softmax runs over the last axis: only a transpose that keeps it last passes."""
    if perm[-1] != len(perm) - 1:
        return False
    return push_elementwise(ed, op, perm)


def push_transpose(ed: Editor, op, perm) -> bool:
    """TRANSPOSE(q) after TRANSPOSE(perm): one TRANSPOSE, or none when they cancel."""
    q = ed.transpose_perm(op)
    if q is None or len(q) != len(perm):
        return False
    source = _source(ed, op.inputs[0])
    combined = tuple(perm[i] for i in q)
    out = op.outputs[0]
    if combined == tuple(range(len(combined))):
        if ed.is_output(out) and (source in ed.sg.inputs or ed.is_output(source)):
            return False
        ed.replace_uses(out, source)
        ed.remove(op)
        return True
    ed.set_inputs(op, [source, ed.const(np.array(combined, np.int32),
                                        f"{ed.sg.tensors[out].name}/perm")])
    return True


def push_concat(ed: Editor, op, perm) -> bool:
    r = len(perm)
    if any(len(ed.shape(t)) != r for t in op.inputs):
        return False
    axis = op.options.axis % r
    for k in range(len(op.inputs)):
        _permute_input(ed, op, k, perm)
    op.options = op.options.replace(axis=perm[axis])
    ed.transpose_after(op, 0, perm)
    return True


def push_pad(ed: Editor, op, perm) -> bool:
    paddings = ed.value(op.inputs[1])
    if paddings is None or paddings.shape != (len(perm), 2):
        return False
    ed.set_inputs(op, [_source(ed, op.inputs[0]), ed.const(
        np.ascontiguousarray(paddings[list(inverse(perm))]),
        f"{ed.sg.tensors[op.inputs[1]].name}/permuted")] + list(op.inputs[2:]))
    ed.transpose_after(op, 0, perm)
    return True


def _reduced_output_perm(perm, axes, keep: bool) -> tuple:
    """The perm that takes the reduced source-layout output to the reduced original one."""
    if keep:
        return tuple(perm)
    remaining = [i for i in range(len(perm)) if i not in axes]
    kept = sorted(perm[i] for i in remaining)
    return tuple(kept.index(perm[i]) for i in remaining)


def push_reduce(ed: Editor, op, perm) -> bool:
    r = len(perm)
    axes_value = ed.value(op.inputs[1])
    if axes_value is None:
        return False
    axes = sorted({int(a) % r for a in axes_value.reshape(-1)})
    keep = bool(op.options.keep_dims)
    ed.set_inputs(op, [_source(ed, op.inputs[0]), ed.const(
        np.array(sorted(perm[a] for a in axes), np.int32),
        f"{ed.sg.tensors[op.inputs[1]].name}/permuted")] + list(op.inputs[2:]))
    out_perm = _reduced_output_perm(perm, axes, keep)
    if out_perm != tuple(range(len(out_perm))):  # else the kept axes keep their order
        ed.transpose_after(op, 0, out_perm)
    return True


def push_reshape(ed: Editor, op, perm) -> bool:
    """A reshape reads memory order: it passes a transpose whose moved dims it splits or merges
    only in groups that keep their source order (the reshape then runs on the source), and a
    flatten that feeds only FULLY_CONNECTED ops (whose weight columns are permuted instead). A
    transpose to channels-first that cannot pass is split in two: the part that orders the
    merged dims stays, the channels-first part passes (toward the next NHWC op)."""
    y, z = op.inputs[0], op.outputs[0]
    source = _source(ed, y)
    through = reshape_through(ed.shape(source), perm, ed.shape(z))
    if through is not None and len(through[1]) > TRANSPOSE_MAX_RANK:
        return False    # the transpose after the reshape would have more dims than LiteRT takes
    if through is not None:
        new_shape, out_perm = through
        if _computed_target(ed, op):
            ed.set_inputs(op, [source, _permuted_target(ed, op, inverse(out_perm))])
            if not _identity(out_perm):
                ed.transpose_after(op, 0, out_perm)
            return True
        ed.set_inputs(op, [source, ed.const(np.array(new_shape, np.int32),
                                            f"{ed.sg.tensors[z].name}/shape")])
        if op.options is not None and "new_shape" in op.options.fields:
            op.options = op.options.replace(new_shape=tuple(new_shape))
        if out_perm != tuple(range(len(out_perm))):
            ed.transpose_after(op, 0, out_perm)
        return True
    return _flatten_into_fc(ed, op, perm, source) or _split_for_reshape(ed, op, perm, source)


def _computed_target(ed: Editor, op) -> bool:
    """A RESHAPE whose target the graph computes while running (it follows dynamic dims)."""
    return len(op.inputs) > 1 and op.inputs[1] >= 0 and ed.value(op.inputs[1]) is None


def _permuted_target(ed: Editor, op, order) -> int:
    """The computed target of RESHAPE `op` with its entries in `order` (new[i] = old[order[i]]):
    the CONCATENATION of one-entry parts that makes it rebuilt in that order when the reshape is
    its one reader, else a GATHER of it."""
    target = op.inputs[1]
    order = tuple(int(i) for i in order)
    if _identity(order):
        return target
    concat = ed.producer(target)
    tensor = ed.sg.tensors[target]
    if concat is not None and concat.op == "CONCATENATION" and ed.only_read_by(target, op) and \
            concat.options.fused_activation_function == 0 and \
            [ed.shape(t) for t in concat.inputs] == [(1,)] * len(order):
        parts = [concat.inputs[i] for i in order]
        out = ed.tensor(f"{tensor.name}/permuted", tensor.shape, tensor.dtype)
        ed.insert_before(op, ed.new_op("CONCATENATION", parts, [out], {"axis": 0}))
        return out
    out = ed.tensor(f"{tensor.name}/permuted", tensor.shape, tensor.dtype)
    ed.insert_before(op, ed.new_op("GATHER", [target, ed.const(
        np.array(order, np.int32), f"{tensor.name}/order")], [out], {"axis": 0}))
    return out


def reshape_through(x_shape, perm, z_shape):
    """(new shape, out perm) with reshape(transpose(x, perm), z_shape) ==
    transpose(reshape(x, new shape), out perm), or None when the reshape splits or merges
    dims that the transpose does not keep together and in order."""
    y_shape = tuple(x_shape[p] for p in perm)
    groups = reshape_groups(y_shape, z_shape)
    if groups is None:
        return None
    rank = {a: k for k, a in enumerate(i for i, d in enumerate(x_shape) if d != 1)}
    starts = []
    for gi, _ in groups:
        at = [rank[perm[i]] for i in gi]
        if at != list(range(at[0], at[0] + len(at))):
            return None
        starts.append(at[0])
    z_dims = [j for j, d in enumerate(z_shape) if d != 1]
    new_shape, slot, k = list(z_shape), {}, 0
    for g in sorted(range(len(groups)), key=lambda g: starts[g]):
        for j in groups[g][1]:
            new_shape[z_dims[k]] = z_shape[j]
            slot[j] = z_dims[k]
            k += 1
    out_perm = tuple(slot.get(j, j) for j in range(len(z_shape)))
    return new_shape, out_perm


def _split_for_reshape(ed: Editor, op, perm, source) -> bool:
    """TRANSPOSE(perm) = TRANSPOSE(q) then TRANSPOSE(rest), where q orders each group of dims
    the reshape merges and rest passes the reshape as a transpose to channels-first."""
    x_shape, y_shape, z_shape = ed.shape(source), ed.shape(op.inputs[0]), ed.shape(op.outputs[0])
    groups = reshape_groups(y_shape, z_shape)
    if groups is None or len(z_shape) not in _TO_CHANNELS_FIRST:
        return False
    x_dims = [i for i, d in enumerate(x_shape) if d != 1]
    order = []
    for gi, _ in sorted(groups, key=lambda g: min(perm[i] for i in g[0])):
        order += [perm[i] for i in gi]
    q = list(range(len(x_shape)))
    for k, axis in enumerate(x_dims):
        q[x_dims[k]] = order[k] if k < len(order) else axis
    q = tuple(q)
    if q == tuple(range(len(q))) or q == tuple(perm):
        return False
    rest = tuple(inverse(q)[p] for p in perm)
    through = reshape_through(tuple(x_shape[i] for i in q), rest, z_shape)
    if through is None or through[1] != _TO_CHANNELS_FIRST[len(z_shape)]:
        return False
    t, z = op.inputs[0], op.outputs[0]
    name = ed.sg.tensors[t].name
    ordered = ed.tensor(f"{name}/ordered", tuple(x_shape[i] for i in q), ed.sg.tensors[t].dtype)
    ed.insert_before(op, ed.new_op("TRANSPOSE", [source, ed.const(np.array(q, np.int32),
                                                                  f"{name}/perm_q")], [ordered]))
    new_shape, out_perm = through
    if _computed_target(ed, op):
        ed.set_inputs(op, [ordered, _permuted_target(ed, op, inverse(out_perm))])
    else:
        ed.set_inputs(op, [ordered, ed.const(np.array(new_shape, np.int32),
                                             f"{ed.sg.tensors[z].name}/shape")])
    if op.options is not None and "new_shape" in op.options.fields:
        op.options = op.options.replace(new_shape=tuple(new_shape))
    ed.transpose_after(op, 0, out_perm)
    return True


_TO_CHANNELS_FIRST = {4: (0, 3, 1, 2), 5: (0, 4, 1, 2, 3)}   # image and video layouts


def _flatten_into_fc(ed: Editor, op, perm, source) -> bool:
    y_shape, z = ed.shape(op.inputs[0]), op.outputs[0]
    z_shape = ed.shape(z)
    readers = ed.readers(z)
    if (perm[0] != 0 or len(z_shape) != 2 or z_shape[0] != y_shape[0] or ed.is_output(z)
            or not readers):
        return False
    k = z_shape[1]
    for reader in readers:
        if reader.op != "FULLY_CONNECTED" or reader.inputs[0] != z or z in reader.inputs[1:]:
            return False
        w = ed.value(reader.inputs[1])
        if w is None or w.ndim != 2 or w.shape[1] != k or reader.options.keep_num_dims:
            return False
    # Column j of the source-layout flatten holds column index[j] of the original one.
    index = np.arange(k).reshape((1,) + tuple(y_shape[1:])).transpose(inverse(perm)).reshape(-1)
    for reader in readers:
        w = ed.value(reader.inputs[1])
        ed.set_input(reader, 1, ed.const(np.ascontiguousarray(w[:, index]),
                                         f"{ed.sg.tensors[reader.inputs[1]].name}/permuted"))
    ed.set_input(op, 0, source)
    return True


def _identity(perm) -> bool:
    return tuple(perm) == tuple(range(len(perm)))


def _permuted_const(ed: Editor, t: int, values, name: str) -> int:
    return ed.const(np.array(values, np.int32), f"{ed.sg.tensors[t].name}/{name}")


def push_gather(ed: Editor, op, perm) -> bool:
    """GATHER along axis a of the transposed tensor is GATHER along perm[a] of its source. A
    scalar index drops the axis; the gather passes when no transpose is left after it (else a
    shared transpose would become one per gather), a 1-D index when it is the one reader."""
    indices = op.inputs[1]
    if ed.value(indices) is None or op.options.batch_dims != 0:
        return False
    r = len(perm)
    axis = op.options.axis % r
    if len(ed.shape(indices)) == 0:
        out_perm = _reduced_output_perm(perm, [axis], False)
        source_shape = ed.shape(_source(ed, op.inputs[0]))
        if moves_data(out_perm, source_shape[:perm[axis]] + source_shape[perm[axis] + 1:]):
            return False
    elif len(ed.shape(indices)) == 1 and ed.only_read_by(op.inputs[0], op):
        out_perm = tuple(perm)
    else:
        return False
    ed.set_input(op, 0, _source(ed, op.inputs[0]))
    op.options = op.options.replace(axis=perm[axis])
    if not _identity(out_perm):
        ed.transpose_after(op, 0, out_perm)
    return True


def push_strided_slice(ed: Editor, op, perm) -> bool:
    """Begin, end, strides and the begin/end masks follow their axes; shrunk axes drop out."""
    o = op.options
    r = len(perm)
    values = [ed.value(t) for t in op.inputs[1:4]]
    if o.ellipsis_mask or o.new_axis_mask or o.offset or any(
            v is None or v.shape != (r,) for v in values):
        return False
    inv = list(inverse(perm))
    bits = lambda mask: sum(1 << perm[i] for i in range(r) if mask >> i & 1)  # noqa: E731
    shrunk = [i for i in range(r) if o.shrink_axis_mask >> i & 1]
    inputs = [_source(ed, op.inputs[0])] + [
        _permuted_const(ed, t, v[inv], "permuted") for t, v in zip(op.inputs[1:4], values)]
    ed.set_inputs(op, inputs)
    op.options = o.replace(begin_mask=bits(o.begin_mask), end_mask=bits(o.end_mask),
                           shrink_axis_mask=bits(o.shrink_axis_mask))
    out_perm = _reduced_output_perm(perm, shrunk, False) if shrunk else tuple(perm)
    if not _identity(out_perm):
        ed.transpose_after(op, 0, out_perm)
    return True


def push_slice(ed: Editor, op, perm) -> bool:
    begin, size = ed.value(op.inputs[1]), ed.value(op.inputs[2])
    r = len(perm)
    if begin is None or size is None or begin.shape != (r,) or size.shape != (r,):
        return False
    inv = list(inverse(perm))
    ed.set_inputs(op, [_source(ed, op.inputs[0]),
                       _permuted_const(ed, op.inputs[1], begin[inv], "permuted"),
                       _permuted_const(ed, op.inputs[2], size[inv], "permuted")])
    ed.transpose_after(op, 0, perm)
    return True


def push_fully_connected(ed: Editor, op, perm) -> bool:
    """A FULLY_CONNECTED that keeps its input's dims reads the last axis alone: a transpose
    that keeps that axis last passes it (nn.MultiheadAttention's batch-first transposes)."""
    r = len(perm)
    if not op.options.keep_num_dims or perm[-1] != r - 1 or \
            len(ed.shape(op.outputs[0])) != r or op.inputs[0] in op.inputs[1:]:
        return False
    ed.set_input(op, 0, _source(ed, op.inputs[0]))
    ed.transpose_after(op, 0, perm)
    return True


def push_split(ed: Editor, op, perm) -> bool:
    """SPLIT (axis, x) and SPLIT_V (x, sizes, axis) split the source along perm[axis]."""
    data, at = (1, 0) if op.op == "SPLIT" else (0, 2)
    axis = ed.value(op.inputs[at])
    if axis is None or axis.size != 1:
        return False
    inputs = list(op.inputs)
    inputs[data] = _source(ed, op.inputs[data])
    inputs[at] = _permuted_const(ed, op.inputs[at], perm[int(axis.reshape(-1)[0]) % len(perm)],
                                 "permuted")
    ed.set_inputs(op, inputs)
    for k in range(len(op.outputs)):
        ed.transpose_after(op, k, perm)
    return True


RULES = {name: (_all, push_elementwise) for name in ELEMENTWISE}
RULES.update({name: (_first, push_reduce) for name in REDUCERS})
RULES.update({
    "SOFTMAX": (_first, push_softmax), "LOG_SOFTMAX": (_first, push_softmax),
    "TRANSPOSE": (_first, push_transpose), "CONCATENATION": (_all, push_concat),
    "PAD": (_first, push_pad), "PADV2": (_first, push_pad), "MIRROR_PAD": (_first, push_pad),
    "RESHAPE": (_first, push_reshape), "GATHER": (_first, push_gather),
    "STRIDED_SLICE": (_first, push_strided_slice), "SLICE": (_first, push_slice),
    "SPLIT": (lambda op: (1,), push_split), "SPLIT_V": (_first, push_split),
    "FULLY_CONNECTED": (_first, push_fully_connected),
})


def moves_data(perm, shape) -> bool:
    """False for a TRANSPOSE that moves only size-1 dims (then it is a RESHAPE)."""
    moved = [p for p in perm if shape[p] != 1]
    return moved != sorted(moved)


def merge_reshapes(model: Model) -> bool:
    """RESHAPE of a RESHAPE's output reads the first one's input, unless only the first one's
    target is computed and it splits a dim of its input (GPT-2's [b * s, 3 d] -> [b, s, 3 d]:
    a constant target written at this conversion's sizes is made to follow the dynamic dims
    from its own input's SHAPE later, which [b * s, ...] could not give)."""
    changed = False
    for sg in model.subgraphs:
        ed = Editor(model, sg)
        for op in sg.operators:
            inner = ed.producer(op.inputs[0]) if op.op == "RESHAPE" else None
            if inner is not None and inner.op == "RESHAPE" and not (
                    _computed_target(ed, inner) and not _computed_target(ed, op) and
                    _splits(ed.shape(inner.inputs[0]), ed.shape(inner.outputs[0]))):
                op.inputs[0] = inner.inputs[0]
                changed = True
        if changed:
            remove_dead(sg)
    return changed


def _splits(in_shape, out_shape) -> bool:
    """Whether a reshape from in_shape to out_shape splits a dim into several (or its dims
    cannot be grouped)."""
    groups = reshape_groups(in_shape, out_shape)
    return groups is None or any(len(outs) > 1 for _, outs in groups)


def transposes_to_reshapes(model: Model) -> bool:
    """A TRANSPOSE that moves only size-1 dims keeps memory order: it is a RESHAPE."""
    changed = False
    for sg in model.subgraphs:
        ed = Editor(model, sg)
        for k, op in enumerate(sg.operators):
            perm = ed.transpose_perm(op)
            if perm is None:
                continue
            if moves_data(perm, ed.shape(op.inputs[0])):
                continue
            out_shape = ed.shape(op.outputs[0])
            new_shape = ed.const(np.array(out_shape, np.int32),
                                 f"{sg.tensors[op.outputs[0]].name}/shape")
            sg.operators[k] = ed.new_op("RESHAPE", [op.inputs[0], new_shape], op.outputs,
                                        {"new_shape": tuple(out_shape)})
            changed = True
    return changed
