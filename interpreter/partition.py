"""Partitioning: a plan's steps -> maximal supported subsets, each one delegate step.

`delegate_steps(...)` is what the plan calls after its kernels prepared (and constant folding
ran): for each delegate in order, it asks which nodes it supports, groups them into
partitions, lets the delegate make one kernel per partition, and returns the new step specs
and where each operator runs. Tensors cross between the host and a delegate only at partition
edges: a partition's inputs are the tensors its nodes read and do not write (constants
excluded: the delegate takes them at prepare), its outputs the tensors it writes that a CPU
step, another partition or the caller reads.

Grouping follows TFLite's graph partitioning: repeatedly take every node of the current kind
(supported or not) whose inputs are ready, then switch kinds. Independent branches therefore
join one partition even when a CPU node sits between them in file order. Nodes with side
effects are barriers: nothing moves across them.
"""
from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass

from edgelite.schema.graph import has_side_effects

from .delegation import Partition, Placement
from .kernels.registry import PURE_CUSTOM_OPS

log = logging.getLogger("edgelite.delegates")  # the name users configure: kept from before


@dataclass
class _Subgraph:
    """What partitioning reads of a subgraph's plan."""

    index: int
    sg: object            # schema Subgraph: its operators and outputs
    infos: list           # TensorInfo per tensor, as the kernels prepared them
    keep_all: bool        # experimental_preserve_all_tensors: every tensor is read outside


def delegate_steps(delegates, index: int, sg, infos: list, specs: list, nodes: dict,
                   keep_all: bool = False) -> tuple:
    """(step specs, placement): `specs` with each delegate's partitions replaced by one step
    each, and a Placement per operator of subgraph `index`.

    `specs`: [(op index, run, input tensors, output tensors)]; `nodes`: op index -> Node;
    `keep_all`: every tensor must stay readable on the host (preserve_all_tensors)."""
    plan = _Subgraph(index, sg, infos, keep_all)
    ops = sg.operators
    placement = {oi: Placement(index, oi, op.opcode.name, "folded") for oi, op in enumerate(ops)}
    for oi, *_ in specs:
        placement[oi].where = "CPU"
    for delegate in delegates:
        specs = _apply(plan, delegate, specs, nodes, placement)
    return specs, [placement[oi] for oi in range(len(ops))]


def _apply(plan, delegate, specs, nodes, placement) -> list:
    ops = plan.sg.operators
    supported = []
    for oi, *_ in specs:
        node = nodes.get(oi) if placement[oi].where == "CPU" else None
        reason = "not a node (a partition of another delegate)" if node is None else \
            "has side effects" if _barrier(ops[oi]) else _ask(delegate, node)
        if node is not None:
            placement[oi].reason = reason
        supported.append(reason is None)
    groups = _group(specs, supported, ops)
    parts = [g for g, kind in groups if kind]
    keep = [g for g in parts if len(g) >= delegate.min_nodes_per_partition]
    if delegate.max_partitions > 0 and len(keep) > delegate.max_partitions:
        keep = sorted(keep, key=len, reverse=True)[:delegate.max_partitions]
    keep_ids = {id(g) for g in keep}
    for g in parts:
        if id(g) not in keep_ids:
            for s in g:
                placement[specs[s][0]].reason = (
                    f"its partition has {len(g)} node(s), fewer than "
                    f"min_nodes_per_partition={delegate.min_nodes_per_partition}"
                    if len(g) < delegate.min_nodes_per_partition else
                    f"only the {delegate.max_partitions} largest partitions are delegated")
    readers = _readers(specs)
    out_specs, k = [], 0
    for g, kind in groups:
        if not kind or id(g) not in keep_ids:
            out_specs.extend(specs[s] for s in g)
            continue
        members = set(g)
        part = _partition(plan, specs, nodes, g, members, readers, k)
        try:
            run = delegate.prepare(part)
        except Exception as e:  # the CPU kernels are prepared: fall back to them, loudly
            reason = f"{delegate.name} failed to prepare it: {type(e).__name__}: {e}"
            log.warning("subgraph %d: %s", plan.index, reason)
            for s in g:
                placement[specs[s][0]].reason = reason
            out_specs.extend(specs[s] for s in g)
            continue
        out_specs.append((specs[g[0]][0], run, [t.index for t in part.inputs],
                          [t.index for t in part.outputs]))
        for s in g:
            placement[specs[s][0]].where = delegate.name
            placement[specs[s][0]].partition = k
        k += 1
    delegate.placement[plan.index] = [placement[oi] for oi in range(len(ops))]
    log.info("subgraph %d: %s", plan.index,
             summary(delegate.placement[plan.index], delegate.name, delegate.device_name()))
    return out_specs


def _barrier(op) -> bool:
    """Whether no delegate may take `op`: it has side effects. A custom op does, unless it is
    one of the kernels' pure custom ops (registry.PURE_CUSTOM_OPS: MediaPipe's)."""
    if op.opcode.builtin == "CUSTOM" and op.outputs and op.opcode.custom_code in PURE_CUSTOM_OPS:
        return False
    return has_side_effects(op)


def _ask(delegate, node) -> str | None:
    try:
        return delegate.support(node)
    except Exception as e:  # a delegate's bug must not break the CPU path
        return f"{delegate.name} failed to check it: {type(e).__name__}: {e}"


def _group(specs, supported, ops) -> list:
    """[(step indices, supported?)] in a valid execution order, maximal groups of one kind."""
    producer = {}
    for s, (_, _, _, outs) in enumerate(specs):
        for t in outs:
            producer[t] = s
    deps = [{producer[t] for t in ins if t in producer and producer[t] != s}
            for s, (_, _, ins, _) in enumerate(specs)]
    barrier = [_barrier(ops[oi]) for oi, *_ in specs]
    done: set = set()
    remaining = list(range(len(specs)))
    groups = []
    kind = supported[0] if specs else False
    idle = 0
    while remaining:
        group = []
        progress = True
        while progress:
            progress = False
            first_barrier = next((s for s in remaining if barrier[s]), None)
            for s in list(remaining):
                if supported[s] != kind or not deps[s] <= done:
                    continue
                if first_barrier is not None and s > first_barrier:
                    continue  # nothing moves across a barrier
                if barrier[s] and any(r < s for r in remaining):
                    continue  # a barrier waits for everything before it
                group.append(s)
                done.add(s)
                remaining.remove(s)
                progress = True
                if barrier[s]:
                    break
        if group:
            groups.append((group, kind))
        idle = 0 if group else idle + 1
        if idle > 2:
            raise RuntimeError("the plan's steps have a dependency cycle")
        kind = not kind
    return groups


def _readers(specs) -> dict:
    out: dict = {}
    for s, (_, _, ins, _) in enumerate(specs):
        for t in ins:
            if t >= 0:
                out.setdefault(t, set()).add(s)
    return out


def _partition(plan, specs, nodes, group, members, readers, k) -> Partition:
    infos = plan.infos
    written = {t for s in group for t in specs[s][3]}
    inputs, seen = [], set()
    for s in group:
        for t in specs[s][2]:
            if t >= 0 and t not in written and t not in seen and infos[t].data is None:
                seen.add(t)
                inputs.append(infos[t])
    graph_outs = set(plan.sg.outputs)
    keep_all = plan.keep_all
    outputs = []
    for s in group:
        for t in specs[s][3]:
            if t in graph_outs or keep_all or infos[t].is_variable \
                    or readers.get(t, set()) - members:
                outputs.append(infos[t])
    return Partition(k, plan.index, [nodes[specs[s][0]] for s in group],
                     [specs[s][1] for s in group], inputs, outputs)


def summary(placements: list, delegate_name: str, device: str) -> str:
    """The placement log line for a list of Placement."""
    entries = [p for p in placements if p.where != "folded"]
    on = [p for p in entries if p.where == delegate_name]
    cpu = [p for p in entries if p.where == "CPU"]
    parts = len({(p.subgraph, p.partition) for p in on})
    types = ", ".join(f"{op} x{n}" if n > 1 else op
                      for op, n in sorted(Counter(p.op for p in cpu).items()))
    return f"{len(on)} ops in {parts} partitions on {device}, {len(cpu)} ops on CPU: [{types}]"
