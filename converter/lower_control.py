"""ONNX control flow: If.

An If whose condition is known while converting is its chosen branch, lowered in place. Otherwise
it becomes TFLite's IF with one subgraph per branch; the tensors a branch reads from outside are
the IF's inputs (outer constants are copied into the branch instead).
"""
from __future__ import annotations

import numpy as np

from .errors import ConversionError
from .lower import lowers


@lowers("If")
def if_(b, n):
    cond = n.input(0)
    value = b.value(cond)
    branches = n.attr("then_branch"), n.attr("else_branch")
    if value is not None:
        chosen = branches[0] if bool(np.asarray(value).reshape(-1)[0]) else branches[1]
        return n.scope.inline(chosen)
    try:
        (then_index, then_reads, then_outs), (else_index, else_reads, else_outs) = \
            (_branch(n, g) for g in branches)
    except ConversionError as e:
        raise n.fail(f"a branch cannot be converted: {e}") from None
    model = b.model
    then_sg, else_sg = model.subgraphs[then_index], model.subgraphs[else_index]
    shapes = [then_sg.tensors[t].shape for t in then_outs]
    other = [else_sg.tensors[t].shape for t in else_outs]
    if shapes != other:
        raise n.fail(f"the branches give outputs of different shapes {shapes} and {other}")
    dtypes = [then_sg.tensors[t].dtype for t in then_outs]
    if dtypes != [else_sg.tensors[t].dtype for t in else_outs]:
        raise n.fail("the branches give outputs of different types")
    # Both branches take the same inputs: the outer tensors either reads, in one order.
    reads = list(dict.fromkeys(then_reads + else_reads))
    for sg, own in ((then_sg, then_reads), (else_sg, else_reads)):
        _take_inputs(b, sg, own, reads)
    if b.rank(cond) != 0 or b.dtype(cond) != "bool":
        cond = b.reshape(b.cast(cond, "bool"), ())
    return b.emit("IF", [cond] + reads, {"then_subgraph_index": then_index,
                                         "else_subgraph_index": else_index}, shapes, dtypes)


def _branch(n, graph) -> tuple:
    """`Scope.subgraph` of a branch, with the index of the branch's own subgraph: the first one
    it appends (an If inside the branch appends its own after it)."""
    index = len(n.scope.b.model.subgraphs)
    _, reads, outs = n.scope.subgraph(graph)
    return index, reads, outs


def _take_inputs(b, sg, own: list, reads: list) -> None:
    """Give subgraph `sg` (whose inputs are the outer tensors `own`) one input per tensor in
    `reads`, in that order; the ones it does not read are unused inputs."""
    from edgelite.schema import Tensor

    by_outer = dict(zip(own, sg.inputs))
    inputs = []
    for outer in reads:
        t = by_outer.get(outer)
        if t is None:
            tensor = b.sg.tensors[outer]
            t = sg.add_tensor(Tensor(f"{tensor.name}/unused", tensor.shape, tensor.dtype))
        inputs.append(t)
    sg.inputs = inputs
