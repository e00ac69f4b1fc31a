"""Clean-up passes: dead ops, duplicate ops, and unused tensors and buffers."""
from __future__ import annotations

from edgelite.schema import Model, has_side_effects, remove_dead, replace_uses


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
    used_buffers = {0}
    for m in model.metadata:
        used_buffers.add(m.buffer)
    for sg in model.subgraphs:
        used = set(sg.inputs) | set(sg.outputs)
        for op in sg.operators:
            used.update(t for t in op.inputs if t >= 0)
            used.update(op.outputs)
            used.update(op.intermediates)
        new_index = {}
        tensors = []
        for i, t in enumerate(sg.tensors):
            if i in used:
                new_index[i] = len(tensors)
                tensors.append(t)
                used_buffers.add(t.buffer)
        remap = lambda ids: [new_index[t] if t >= 0 else t for t in ids]  # noqa: E731
        for op in sg.operators:
            op.inputs, op.outputs = remap(op.inputs), remap(op.outputs)
            op.intermediates = remap(op.intermediates)
        sg.inputs, sg.outputs, sg.tensors = remap(sg.inputs), remap(sg.outputs), tensors
        for sig in model.signature_defs:
            if model.subgraphs[sig.subgraph_index] is sg:
                sig.inputs = {k: new_index[v] for k, v in sig.inputs.items()}
                sig.outputs = {k: new_index[v] for k, v in sig.outputs.items()}
    order = sorted(used_buffers)
    buffer_index = {b: i for i, b in enumerate(order)}
    model.buffers = [model.buffers[b] for b in order]
    for sg in model.subgraphs:
        for t in sg.tensors:
            t.buffer = buffer_index[t.buffer]
    for m in model.metadata:
        m.buffer = buffer_index[m.buffer]
