"""Shape arithmetic in the graph (dynamic dims): SHAPE of a TRANSPOSE reads the transpose's
input and gathers its dims in the transpose's order, so that no TRANSPOSE stays only to be
measured (a channels-last input read by a SHAPE)."""
from __future__ import annotations

import numpy as np

from edgelite.schema import Model, remove_dead

from .editor import Editor


def shape_through_transpose(model: Model) -> bool:
    changed = False
    for sg in model.subgraphs:
        ed = Editor(model, sg)
        for op in list(sg.operators):
            if op.op != "SHAPE" or not ed.has(op):
                continue
            producer = ed.producer(op.inputs[0])
            perm = ed.transpose_perm(producer)
            if perm is None:
                continue
            out = op.outputs[0]
            dtype = sg.tensors[out].dtype
            measured = ed.tensor(f"{sg.tensors[out].name}/unpermuted", sg.tensors[out].shape,
                                 dtype)
            ed.set_inputs(op, [producer.inputs[0]])
            ed.set_outputs(op, [measured])
            index = ed.const(np.array(perm, np.int32), f"{sg.tensors[out].name}/perm")
            gather = ed.new_op("GATHER", [measured, index], [out], {"axis": 0})
            ed.insert_after(op, gather)
            changed = True
    return changed


def squeeze_through_transpose(model: Model) -> bool:
    """A RESHAPE that only drops size-1 dims, its target computed while running (it follows
    dynamic dims), reading a TRANSPOSE: a SQUEEZE of the transpose's input, then what is left of
    the permutation (often nothing: NHWC [b, 1, w, c] to a sequence [b, w, c] keeps no TRANSPOSE).
    In the graphs that compute shapes a dynamic dim is never 1 (a batch starts at 2), so a
    size-1 dim here is a fixed one."""
    changed = False
    for sg in model.subgraphs:
        ed = Editor(model, sg)
        for op in list(sg.operators):
            if op.op != "RESHAPE" or not ed.has(op) or len(op.inputs) < 2 or \
                    ed.value(op.inputs[1]) is not None:
                continue
            producer = ed.producer(op.inputs[0])
            perm = ed.transpose_perm(producer)
            if perm is None:
                continue
            dropped = _dropped_ones(ed.shape(op.inputs[0]), ed.shape(op.outputs[0]))
            if not dropped:
                continue
            source = producer.inputs[0]
            gone = sorted(perm[a] for a in dropped)
            left = [p for a, p in enumerate(perm) if a not in dropped]
            order = sorted(left)
            rest = [order.index(p) for p in left]
            out = op.outputs[0]
            tensor = sg.tensors[out]
            squeezed = out if rest == sorted(rest) else ed.tensor(
                f"{tensor.name}/squeezed", tuple(ed.shape(source)[p] for p in order),
                tensor.dtype)
            sg.tensors[squeezed].quantization = sg.tensors[source].quantization
            new_ops = [ed.new_op("SQUEEZE", [source], [squeezed], {"squeeze_dims": tuple(gone)})]
            if squeezed != out:
                new_ops.append(ed.new_op("TRANSPOSE", [squeezed, ed.const(
                    np.array(rest, np.int32), f"{tensor.name}/perm")], [out]))
            for new in new_ops:
                ed.insert_before(op, new)
            ed.remove(op)
            for new in new_ops:   # the editor's maps: the new ops write `out` now
                ed.set_outputs(new, new.outputs)
            changed = True
    return changed


def _dropped_ones(in_shape, out_shape) -> list:
    """The axes of `in_shape` a reshape to `out_shape` drops, when it only drops size-1 dims
    (the others in order); else []."""
    dropped, j = [], 0
    for i, d in enumerate(in_shape):
        if j < len(out_shape) and out_shape[j] == d:
            j += 1
        elif d == 1:
            dropped.append(i)
        else:
            return []
    return dropped if j == len(out_shape) else []


def fold_gather_of_gather(model: Model) -> bool:
    """GATHER(GATHER(v, i), j) of a vector v along axis 0, i and j constants: GATHER(v, i[j])
    (a SHAPE read through a transpose, then one dim of it, is one GATHER of the SHAPE)."""
    changed = False
    for sg in model.subgraphs:
        ed = Editor(model, sg)
        for op in sg.operators:
            inner = ed.producer(op.inputs[0]) if op.op == "GATHER" else None
            if inner is None or inner.op != "GATHER" or len(ed.shape(inner.inputs[0])) != 1 or \
                    op.options.axis != 0 or inner.options.axis != 0 or \
                    op.options.batch_dims or inner.options.batch_dims:
                continue
            i, j = ed.value(inner.inputs[1]), ed.value(op.inputs[1])
            if i is None or j is None or i.ndim != 1 or j.size == 0 or \
                    j.min() < 0 or j.max() >= i.size:
                continue
            index = np.array(i[j], np.int32)   # 0-d for a scalar j (ascontiguousarray: 1-d)
            ed.set_inputs(op, [inner.inputs[0], ed.const(
                index, f"{sg.tensors[op.inputs[1]].name}/composed")])
            changed = True
        if changed:
            remove_dead(sg)
    return changed
