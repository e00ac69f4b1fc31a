"""Shape arithmetic in the graph (dynamic dims): SHAPE of a TRANSPOSE reads the transpose's
input and gathers its dims in the transpose's order, so that no TRANSPOSE stays only to be
measured (a channels-last input read by a SHAPE)."""
from __future__ import annotations

import numpy as np

from edgelite.schema import Model

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
