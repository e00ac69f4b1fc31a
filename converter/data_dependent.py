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

In the file those dims are -1 in `shape_signature` (the outputs', and every tensor's that
follows them): the model is converted twice, the second time with the two sizes swapped
(`other_sizes`), and the dims that differ are marked as the dims that follow an open input dim
are (`convert.mark_dynamic_dims`), with no per-op rule. Swapped, not both larger: a
`min(count, 3)` follows the count at 2 and 3 but not at 3 and 4.
"""
from __future__ import annotations

import contextlib
import contextvars

from .lower import body_graphs

NOMINAL = 2
SHADOW = 3
OPS = frozenset({"NonZero", "NonMaxSuppression"})   # the ONNX ops lowered through this

_swapped = contextvars.ContextVar("data_dependent_swapped", default=False)


@contextlib.contextmanager
def other_sizes():
    """Data-dependent dims at SHADOW in the graph and NOMINAL in the shadow while converting
    the model that a conversion is compared with: they then differ, and are marked -1."""
    token = _swapped.set(True)
    try:
        yield
    finally:
        _swapped.reset(token)


def present(graph) -> bool:
    """Whether an ONNX graph (or a body of one of its nodes) has an op whose output sizes may
    follow the values."""
    for node in graph.node:
        if node.op_type in OPS and node.domain in ("", "ai.onnx"):
            return True
        if any(present(body) for _, body in body_graphs(node)):
            return True
    return False


def data_dependent_ops(b, op: str, inputs: list, shapes: list, options=None,
                       dtypes=None) -> list:
    """Emit `op`, whose outputs have `shapes`: None in the dims that follow the values, which
    get NOMINAL (SHADOW in the shadow). Folds as any op when its inputs are constant."""
    size, other = (SHADOW, NOMINAL) if _swapped.get() else (NOMINAL, SHADOW)
    nominal = [tuple(size if d is None else int(d) for d in s) for s in shapes]
    shadow = [tuple(other if d is None else int(d) for d in s) for s in shapes]
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


def mark_declared_outputs(model, outputs: list, perms: list) -> None:
    """Graph outputs' dims the ONNX model leaves open (`IoSpec.dynamic`) -1 in shape_signature
    too, in a model with data-dependent ops: a `[:2]` of a count is 2 at both sizes the
    conversions compare (2 and 3) and less at a count of 1, which only the declaration says.
    `perms`: the io layout's, tflite = numpy.transpose(onnx, perm)."""
    sg = model.subgraphs[0]
    for spec, t, perm in zip(outputs, sg.outputs, perms):
        tensor = sg.tensors[t]
        if not spec.dynamic or len(perm) != len(tensor.shape):
            continue
        signature = tensor.shape_signature or tuple(tensor.shape)
        tensor.shape_signature = tuple(-1 if perm[k] in spec.dynamic else int(d)
                                       for k, d in enumerate(signature))
