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

from edgelite.schema import Model, remove_dead, replace_uses

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
            if perm is not None and apply(ed, op, perm):
                ed.refresh()
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
        op.inputs[k] = _source(ed, t)
        return True
    shape = ed.shape(t)
    r = len(perm)
    if len(shape) > r:
        return False
    if all(d == 1 for d in shape):
        return True  # broadcasts the same in any layout
    value = ed.value(t)
    full = value.reshape((1,) * (r - value.ndim) + value.shape)
    op.inputs[k] = ed.const(np.ascontiguousarray(full.transpose(inverse(perm))),
                            f"{ed.sg.tensors[t].name}/permuted")
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
        replace_uses(ed.sg, out, source)
        ed.remove(op)
        return True
    op.inputs = [source, ed.const(np.array(combined, np.int32),
                                  f"{ed.sg.tensors[out].name}/perm")]
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
    op.inputs[0] = _source(ed, op.inputs[0])
    op.inputs[1] = ed.const(np.ascontiguousarray(paddings[list(inverse(perm))]),
                            f"{ed.sg.tensors[op.inputs[1]].name}/permuted")
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
    op.inputs[0] = _source(ed, op.inputs[0])
    op.inputs[1] = ed.const(np.array(sorted(perm[a] for a in axes), np.int32),
                            f"{ed.sg.tensors[op.inputs[1]].name}/permuted")
    out_perm = _reduced_output_perm(perm, axes, keep)
    if out_perm != tuple(range(len(out_perm))):  # else the kept axes keep their order
        ed.transpose_after(op, 0, out_perm)
    return True


def push_reshape(ed: Editor, op, perm) -> bool:
    """A reshape reads memory order: it passes a transpose that moves only size-1 dims, and a
    flatten that feeds only FULLY_CONNECTED ops (whose weight columns are permuted instead)."""
    y = op.inputs[0]
    source = _source(ed, y)
    y_shape = ed.shape(y)
    moved = [perm[i] for i in range(len(perm)) if y_shape[i] != 1]
    if moved == sorted(moved):
        op.inputs[0] = source
        return True
    return _reshape_of_ones(ed, op, perm, source) or _flatten_into_fc(ed, op, perm, source)


def _reshape_of_ones(ed: Editor, op, perm, source) -> bool:
    """A reshape that only inserts or removes size-1 dims: reshape the source so its non-1
    dims keep the source's order, then one TRANSPOSE puts them where the old output had them."""
    y_shape, z = ed.shape(op.inputs[0]), op.outputs[0]
    z_shape = ed.shape(z)
    y_dims = [i for i, d in enumerate(y_shape) if d != 1]
    z_dims = [j for j, d in enumerate(z_shape) if d != 1]
    if [y_shape[i] for i in y_dims] != [z_shape[j] for j in z_dims]:
        return False
    source_axes = [perm[i] for i in y_dims]            # where each non-1 dim sits in the source
    order = sorted(range(len(z_dims)), key=lambda k: source_axes[k])
    rank_of = {k: r for r, k in enumerate(order)}
    new_shape = list(z_shape)
    for r, k in enumerate(order):
        new_shape[z_dims[r]] = z_shape[z_dims[k]]
    out_perm = list(range(len(z_shape)))
    for k, j in enumerate(z_dims):
        out_perm[j] = z_dims[rank_of[k]]
    op.inputs[0] = source
    op.inputs[1:] = [ed.const(np.array(new_shape, np.int32), f"{ed.sg.tensors[z].name}/shape")]
    if op.options is not None and "new_shape" in op.options.fields:
        op.options = op.options.replace(new_shape=tuple(new_shape))
    ed.transpose_after(op, 0, tuple(out_perm))
    return True


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
        reader.inputs[1] = ed.const(np.ascontiguousarray(w[:, index]),
                                    f"{ed.sg.tensors[reader.inputs[1]].name}/permuted")
    op.inputs[0] = source
    return True


RULES = {name: (_all, push_elementwise) for name in ELEMENTWISE}
RULES.update({name: (_first, push_reduce) for name in REDUCERS})
RULES.update({
    "SOFTMAX": (_first, push_softmax), "LOG_SOFTMAX": (_first, push_softmax),
    "TRANSPOSE": (_first, push_transpose), "CONCATENATION": (_all, push_concat),
    "PAD": (_first, push_pad), "PADV2": (_first, push_pad), "MIRROR_PAD": (_first, push_pad),
    "RESHAPE": (_first, push_reshape),
})


def moves_data(perm, shape) -> bool:
    """False for a TRANSPOSE that moves only size-1 dims (then it is a RESHAPE)."""
    moved = [p for p in perm if shape[p] != 1]
    return moved != sorted(moved)


def merge_reshapes(model: Model) -> bool:
    """RESHAPE of a RESHAPE's output reads the first one's input."""
    changed = False
    for sg in model.subgraphs:
        ed = Editor(model, sg)
        for op in sg.operators:
            inner = ed.producer(op.inputs[0]) if op.op == "RESHAPE" else None
            if inner is not None and inner.op == "RESHAPE":
                op.inputs[0] = inner.inputs[0]
                changed = True
        if changed:
            remove_dead(sg)
    return changed


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
