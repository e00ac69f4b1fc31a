"""A FULLY_CONNECTED between a flatten and its undo, with dynamic dims: RESHAPE(x, [-1, k]) ->
FULLY_CONNECTED -> RESHAPE(y, x's leading dims + [n]) is one FULLY_CONNECTED with
keep_num_dims; an undo that also splits n (into heads) stays after it. GPT-2's Conv1D
(`x.view(-1, d)`, addmm, `view(x.size()[:-1] + (n,))`), torch's MultiheadAttention's out
projection on `view(L * N, E)`. The undo's target is computed in the graph (`dim_source`: each
of its leading elements is a dim of a tensor whose dims are x's); with fixed shapes
`pass_permute` composes such chains."""
from __future__ import annotations

import numpy as np

from edgelite.schema import Model, remove_dead

from .dim_source import constant_element, element_source, source
from .editor import Editor


def fold_flatten_around_fc(model: Model) -> bool:
    changed = False
    for sg in model.subgraphs:
        ed = Editor(model, sg)
        for fc in list(sg.operators):
            if fc.op == "FULLY_CONNECTED" and ed.has(fc):
                changed |= _fold(ed, fc)
        if changed:
            remove_dead(sg)
    return changed


def _fold(ed: Editor, fc) -> bool:
    flat = fc.inputs[0]
    flatten = ed.producer(flat)
    out = fc.outputs[0]
    readers = ed.readers(out)
    if flatten is None or flatten.op != "RESHAPE" or len(fc.outputs) != 1 or \
            len(readers) != 1 or readers[0].op != "RESHAPE" or ed.is_output(out) or \
            not ed.only_read_by(flat, fc) or fc.options.keep_num_dims:
        return False
    undo = readers[0]
    x = flatten.inputs[0]
    x_shape, flat_shape = ed.shape(x), ed.shape(flat)
    target = ed.value(flatten.inputs[1]) if len(flatten.inputs) > 1 else None
    if len(x_shape) < 3 or len(flat_shape) != 2 or flat_shape[1] != x_shape[-1] or \
            target is None or [int(v) for v in target.reshape(-1)] != [-1, x_shape[-1]]:
        return False
    y_shape = ed.shape(undo.outputs[0])
    units = ed.shape(out)[-1]
    rank = len(x_shape)
    if len(y_shape) < rank or tuple(y_shape[:rank - 1]) != tuple(x_shape[:-1]) or \
            int(np.prod(y_shape[rank - 1:])) != units or not _leading_dims_of(ed, undo, x):
        return False
    ed.set_inputs(fc, [x] + list(fc.inputs[1:]))
    fc.options = fc.options.replace(keep_num_dims=True)
    ed.remove(flatten)
    if len(y_shape) == rank:
        ed.set_outputs(fc, [undo.outputs[0]])
        ed.remove(undo)
    else:   # the undo splits the units too (heads): it stays, on the kept dims
        ed.sg.tensors[out].shape = tuple(x_shape[:-1]) + (units,)
    return True


def _leading_dims_of(ed: Editor, undo, x: int) -> bool:
    """Whether the undo's target gives x's dims but the last, in order (each a dim of a tensor
    whose dim it is, or its fixed size; a -1 may stand for one of them), then constants."""
    if len(undo.inputs) < 2:
        return False
    rank = len(ed.shape(x))
    target = undo.inputs[1]
    if ed.value(target) is not None:
        return False   # fixed dims: pass_permute's
    y_shape = ed.shape(undo.outputs[0])
    open_dims = 0
    for j in range(rank - 1):
        found = element_source(ed, target, j)
        if found is None:
            value = constant_element(ed, target, j)
            if value == -1:
                open_dims += 1
                continue
            if value != y_shape[j]:   # a fixed dim, written as a constant
                return False
        elif source(ed, found[0], (found[1],)) != source(ed, x, (j,)):
            return False
    trailing = [constant_element(ed, target, j) for j in range(rank - 1, len(y_shape))]
    return open_dims <= 1 and trailing == list(y_shape[rank - 1:])
