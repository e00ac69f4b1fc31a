"""Ops whose output sizes follow the *values* of their inputs (NonZero's count of true elements,
the boxes NonMaxSuppression keeps), with no size the model declares.

Such a size is dynamic from there on, like an open input dim: the builder's shadow (other sizes
of the dynamic dims, `IRBuilder.shadow_shapes`) carries it. The op's output gets a nominal size
(NOMINAL) in the graph and another one (SHADOW) in the shadow, so that every op that follows
sees a dynamic dim there: its shape arithmetic stays in the graph (SHAPE ...) and reshape
targets follow it (-1), instead of the nominal size being folded into constants. The shadow is
switched on for that even in a model whose inputs are all fixed.

Both sizes are small and above 1 (a dim of 1 broadcasts, and `min(count, 300)` must follow the
count at both): what LiteRT and edgelite need is only that nothing downstream writes them into a
constant, since both runtimes resize these tensors while running (the kernels of WHERE, TOPK_V2
with a computed k, SLICE with a computed size, NON_MAX_SUPPRESSION_V4 with a computed
max_output_size mark their outputs dynamic).
"""
from __future__ import annotations

NOMINAL = 2
SHADOW = 3


def data_dependent_ops(b, op: str, inputs: list, shapes: list, options=None,
                       dtypes=None) -> list:
    """Emit `op`, whose outputs have `shapes`: None in the dims that follow the values, which
    get NOMINAL (SHADOW in the shadow). Folds as any op when its inputs are constant."""
    nominal = [tuple(NOMINAL if d is None else int(d) for d in s) for s in shapes]
    shadow = [tuple(SHADOW if d is None else int(d) for d in s) for s in shapes]
    was_off = b.shadow_shapes is None
    if was_off:
        b.shadow_shapes = {}
    before = len(b.shadow_problems)
    outs = b.ops(op, inputs, options, len(shapes), dtypes, shapes=nominal)
    if all(b.value(t) is not None for t in outs):      # constant inputs: folded
        if was_off:
            b.shadow_shapes = None
        return outs
    # The shadow's kernel cannot size these outputs either: they get SHADOW instead.
    del b.shadow_problems[before:]
    for t, size, other in zip(outs, nominal, shadow):
        b.sg.tensors[t].shape = size
        b.shadow_shapes[t] = other
    return outs


def data_dependent(b, op: str, inputs: list, shape, options=None, dtype=None) -> int:
    """`data_dependent_ops` for an op with one output."""
    return data_dependent_ops(b, op, inputs, [shape], options,
                              None if dtype is None else [dtype])[0]
