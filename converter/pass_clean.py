"""Clean-up passes: dead ops, duplicate ops, and unused tensors and buffers."""
from __future__ import annotations

from edgelite.schema import Model, drop_unused_buffers, has_side_effects, remove_dead, replace_uses


def remove_dead_ops(model: Model) -> bool:
    """Drop operators whose outputs nobody reads."""
    return sum(remove_dead(sg) for sg in model.subgraphs) > 0


def dedupe_ops(model: Model) -> bool:
    """Merge ops that compute the same thing: same op, options and inputs (e.g. two TRANSPOSEs
    of one tensor left by the layout pass)."""
    changed = False
    for sg in model.subgraphs:
        seen: dict = {}
        for op in list(sg.operators):
            if has_side_effects(op) or op.intermediates:
                continue
            key = (op.opcode, tuple(op.inputs), repr(op.options), op.custom_options)
            first = seen.get(key)
            if first is None:
                seen[key] = op
                continue
            if any(t in sg.outputs for t in op.outputs):
                continue
            for old, new in zip(op.outputs, first.outputs):
                replace_uses(sg, old, new)
            sg.operators.remove(op)
            changed = True
    return changed


def compact(model: Model) -> None:
    """Renumber tensors and buffers so that only used ones remain (buffer 0 stays empty)."""
    for sg in model.subgraphs:
        used = set(sg.inputs) | set(sg.outputs)
        for op in sg.operators:
            used.update(t for t in op.inputs if t >= 0)
            used.update(op.outputs)
            used.update(op.intermediates)
        kept = [i for i in range(len(sg.tensors)) if i in used]
        new_index = {old: new for new, old in enumerate(kept)}

        def remap(ids, new_index=new_index):
            return [new_index[t] if t >= 0 else t for t in ids]
        for op in sg.operators:
            op.inputs, op.outputs = remap(op.inputs), remap(op.outputs)
            op.intermediates = remap(op.intermediates)
        sg.inputs, sg.outputs = remap(sg.inputs), remap(sg.outputs)
        sg.tensors = [sg.tensors[i] for i in kept]
        for sig in model.signature_defs:
            if model.subgraphs[sig.subgraph_index] is sg:
                sig.inputs = {k: new_index[v] for k, v in sig.inputs.items()}
                sig.outputs = {k: new_index[v] for k, v in sig.outputs.items()}
    drop_unused_buffers(model)
