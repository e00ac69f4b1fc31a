"""The graph helper: the only mutation API that passes need.

Operators run in list order. Ops with side effects (resource variables, CALL_ONCE, control flow:
their rows in ops.py say so; anything with no outputs) are barriers: `order` never moves an op
across one and `remove_dead` never removes one.
"""
from __future__ import annotations

from .model import Buffer, Model, Operator, Subgraph
from .ops import facts


def has_side_effects(op: Operator) -> bool:
    """Whether `op` is a barrier: its row says it has side effects, or it has no outputs."""
    return facts(op.opcode.builtin).side_effects or not op.outputs


def producers(sg: Subgraph) -> dict:
    """tensor index -> index of the operator that writes it."""
    return {t: i for i, op in enumerate(sg.operators) for t in op.outputs if t >= 0}


def consumers(sg: Subgraph) -> dict:
    """tensor index -> indices of the operators that read it (in order, once each)."""
    out: dict = {}
    for i, op in enumerate(sg.operators):
        for t in dict.fromkeys(op.inputs):
            if t >= 0:
                out.setdefault(t, []).append(i)
    return out


def replace_uses(sg: Subgraph, old: int, new: int) -> int:
    """Make every reader of tensor `old` (ops and graph outputs) read `new`; returns the count."""
    n = 0
    for op in sg.operators:
        for k, t in enumerate(op.inputs):
            if t == old:
                op.inputs[k] = new
                n += 1
    for k, t in enumerate(sg.outputs):
        if t == old:
            sg.outputs[k] = new
            n += 1
    return n


def remove_dead(sg: Subgraph) -> int:
    """Drop operators whose outputs nobody reads (barriers are never dead); returns the count."""
    live = set(sg.outputs)
    keep = []
    for op in reversed(sg.operators):
        if has_side_effects(op) or any(t in live for t in op.outputs):
            keep.append(op)
            live.update(t for t in op.inputs if t >= 0)
    removed = len(sg.operators) - len(keep)
    sg.operators = keep[::-1]
    return removed


def order(sg: Subgraph) -> None:
    """Sort operators so each runs after the producers of its inputs, keeping the original order
    where it is free, and never moving an op across a barrier. ValueError on a cycle."""
    prod = producers(sg)
    ops = sg.operators
    result: list = []
    segment: list = []  # indices of ordinary ops since the last barrier

    def flush():
        placed = set()
        pending = list(segment)
        while pending:
            progress = False
            rest = []
            for i in pending:
                deps = {prod[t] for t in ops[i].inputs if t in prod and prod[t] in segment_set}
                if deps <= placed:
                    result.append(ops[i])
                    placed.add(i)
                    progress = True
                else:
                    rest.append(i)
            if not progress:
                names = ", ".join(f"#{i} {ops[i].op}" for i in rest[:5])
                raise ValueError(f"the graph has a cycle through operators {names}")
            pending = rest
        segment.clear()

    segment_set: set = set()
    for i, op in enumerate(ops):
        if has_side_effects(op):
            flush()
            segment_set = set()
            result.append(op)
        else:
            segment.append(i)
            segment_set.add(i)
    flush()
    _check_order(result)
    sg.operators = result


def _check_order(ops: list) -> None:
    """ValueError when an op reads a tensor that a later op writes (a barrier stands between)."""
    written_later = {t: i for i, op in enumerate(ops) for t in op.outputs if t >= 0}
    for i, op in enumerate(ops):
        for t in op.inputs:
            j = written_later.get(t)
            if j is not None and j >= i:
                raise ValueError(f"operator #{i} {op.op} reads tensor {t}, which operator #{j} "
                                 f"{ops[j].op} writes later, across a side-effect barrier that "
                                 "no pass may reorder")


def drop_unused_buffers(model: Model) -> int:
    """Renumber the buffers so that only those a tensor or a metadata entry uses remain (buffer
    0, the format's empty one, stays); returns how many went."""
    used = {0} | {t.buffer for sg in model.subgraphs for t in sg.tensors} | \
        {m.buffer for m in model.metadata}
    remap, kept = {}, []
    for i, b in enumerate(model.buffers):
        if i in used:
            remap[i] = len(kept)
            kept.append(b)
    removed = len(model.buffers) - len(kept)
    model.buffers = kept or [Buffer()]
    for sg in model.subgraphs:
        for t in sg.tensors:
            t.buffer = remap[t.buffer]
    for m in model.metadata:
        m.buffer = remap[m.buffer]
    return removed
