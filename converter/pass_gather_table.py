"""A TRANSPOSE that moves the rows of a GATHER from a constant table to the front: the table
transposed and gathered along its columns instead. T5's relative-position bias (GATHER of a
[buckets, heads] table by the [q, k] buckets, RESHAPE to [1, q, k, heads], TRANSPOSE to [1,
heads, q, k]) is GATHER([heads, buckets], buckets, axis 1) and one EXPAND_DIMS: no TRANSPOSE
(with fixed shapes the bias is a constant; with a dynamic length it is computed)."""
from __future__ import annotations

import numpy as np

from edgelite.schema import Model, remove_dead

from .editor import Editor
from .pass_shape import dropped_ones


def gather_from_transposed_table(model: Model) -> bool:
    changed = False
    for sg in model.subgraphs:
        ed = Editor(model, sg)
        for op in list(sg.operators):
            if ed.has(op) and ed.transpose_perm(op) is not None:
                changed |= _rewrite(ed, op)
        if changed:
            remove_dead(sg)
    return changed


def _table_gather(ed: Editor, t: int):
    """(gather op, reshape op or None) when t is GATHER(2-D constant table, indices) along axis
    0, maybe through a RESHAPE that only adds or drops size-1 dims, each read only there."""
    op = ed.producer(t)
    reshape = None
    if op is not None and op.op == "RESHAPE":
        inner = op.inputs[0]
        if [d for d in ed.shape(inner) if d != 1] != [d for d in ed.shape(t) if d != 1] or \
                not ed.only_read_by(inner, op):
            return None
        reshape, op = op, ed.producer(inner)
    if op is None or op.op != "GATHER" or op.options.axis != 0 or op.options.batch_dims:
        return None
    table = ed.value(op.inputs[0])
    tensor = ed.sg.tensors[op.inputs[0]]
    if table is None or table.ndim != 2 or tensor.quantization is not None or \
            tensor.dtype != "float32" or ed.value(op.inputs[1]) is not None:
        return None
    return op, reshape


def _rewrite(ed: Editor, transpose) -> bool:
    x = transpose.inputs[0]
    found = _table_gather(ed, x) if ed.only_read_by(x, transpose) else None
    if found is None:
        return False
    gather, reshape = found
    g_shape = ed.shape(gather.outputs[0])
    x_shape, out_shape = ed.shape(x), ed.shape(transpose.outputs[0])
    perm = ed.transpose_perm(transpose)
    x_axes = [i for i, d in enumerate(x_shape) if d != 1]
    g_axes = [i for i, d in enumerate(g_shape) if d != 1]
    to_g = dict(zip(x_axes, g_axes))
    order = [to_g[perm[a]] for a in range(len(out_shape)) if out_shape[a] != 1]
    rows = len(g_shape) - 1
    if not order or order[0] != rows or order[1:] != [a for a in g_axes if a != rows]:
        return False
    indices = gather.inputs[1]
    new_shape = (g_shape[-1],) + tuple(ed.shape(indices))
    inserted = dropped_ones(tuple(out_shape), new_shape)   # the ones inserted into new_shape
    if inserted is None:
        return False
    sg = ed.sg
    name = sg.tensors[transpose.outputs[0]].name
    table = ed.const(np.ascontiguousarray(ed.value(gather.inputs[0]).T), f"{name}/table")
    t = transpose.outputs[0] if not inserted else ed.tensor(f"{name}/gathered", new_shape,
                                                            "float32")
    new_ops = [ed.new_op("GATHER", [table, indices], [t], {"axis": 1})]
    for k, axis in enumerate(inserted):
        shape = _with_ones(new_shape, tuple(inserted[:k + 1]))
        out = transpose.outputs[0] if k == len(inserted) - 1 else ed.tensor(
            f"{name}/expanded{k}", shape, "float32")
        new_ops.append(ed.new_op("EXPAND_DIMS", [t, ed.const(np.array(axis, np.int32),
                                                             f"{name}/axis{k}")], [out]))
        t = out
    for new in new_ops:
        ed.insert_before(transpose, new)
    ed.remove(transpose)
    for op in (reshape, gather):
        if op is not None:
            ed.remove(op)
    for new in new_ops:   # the editor's maps: the new ops write the transpose's output now
        ed.set_outputs(new, new.outputs)
    return True


def _with_ones(shape: tuple, axes: tuple) -> tuple:
    out = list(shape)
    for a in axes:
        out.insert(a, 1)
    return tuple(out)
