"""What every kernel assumes of its op, checked at prepare (plan._prepare_node): outputs exist,
data-moving and elementwise ops write their input's type, a kernel's `run` takes as many
tensors as the op has. Kept out of plan.py: `import edgelite.interpreter` compiles only what an
import needs (test_import_budget)."""
from __future__ import annotations

import inspect

from .kernels import registry
from .kernels.registry import Node


# Builtin ops that may have no outputs (they act through resources or subgraphs).
_NO_OUTPUT_OPS = frozenset({"ASSIGN_VARIABLE", "CALL_ONCE", "IF", "WHILE"})
# Ops whose output 0 has the type of their data input (LiteRT checks it, TF_LITE_ENSURE_TYPES_EQ):
# data movement, reductions that keep values, and elementwise arithmetic.
_SAME_TYPE_OPS = frozenset({
    "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "TRANSPOSE", "CONCATENATION", "PACK", "UNPACK",
    "SPLIT", "SPLIT_V", "GATHER", "GATHER_ND", "TILE", "PAD", "PADV2", "MIRROR_PAD", "SLICE",
    "STRIDED_SLICE", "REVERSE_V2", "BROADCAST_TO", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD",
    "REDUCE_ANY", "REDUCE_ALL", "SUM", "MEAN", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH",
    "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "ZEROS_LIKE", "RELU", "RELU6", "RELU_N1_TO_1",
    "RELU_0_TO_1", "ABS", "NEG", "SIGN", "SQUARE", "ADD", "SUB", "MUL", "DIV", "MAXIMUM",
    "MINIMUM", "FLOOR_DIV", "FLOOR_MOD", "POW", "SQUARED_DIFFERENCE", "EXP", "LOG", "SIN",
    "COS", "SQRT", "RSQRT", "FLOOR", "CEIL", "ROUND", "TANH", "LOGISTIC", "HARD_SWISH",
    "LEAKY_RELU", "ELU", "GELU", "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT", "SELECT",
    "SELECT_V2", "REVERSE_SEQUENCE", "BITWISE_XOR", "RIGHT_SHIFT", "LEFT_SHIFT"})


def check_signature(node: Node) -> None:
    """What every kernel assumes of its op, checked before it runs: outputs exist, and the
    data-moving and elementwise ops write their input's type."""
    if not node.outputs and not node.is_custom and node.op not in _NO_OUTPUT_OPS:
        raise node.fail(f"has no outputs; {node.op} writes at least one")
    k = registry.DATA_INPUT.get(node.op, 0)
    if not node.is_custom and k < len(node.inputs) and node.inputs[k] is None:
        raise node.fail(f"its data input {k} is omitted (-1)")
    if node.op in _SAME_TYPE_OPS and node.outputs:
        k = 1 if node.op in ("SELECT", "SELECT_V2") else registry.DATA_INPUT.get(node.op, 0)
        x = node.inputs[k] if k < len(node.inputs) else None
        for j, out in enumerate(node.outputs):
            if x is not None and out.type_name != x.type_name and x.type_name != "int4":
                raise node.fail(f"output {j} {out.name!r} is {out.type_name}, but {node.op} "
                                f"gives its input {k}'s type, {x.type_name}")


def check_arity(node: Node, run) -> None:
    """The tensors the model gives an op are as many as its kernel's `run` takes (a second
    output no kernel writes, a missing input): refused at prepare, never a TypeError while
    running."""
    if run is None or not callable(run):
        return
    try:
        params = list(inspect.signature(run).parameters.values())
    except (TypeError, ValueError):
        return
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = sum(p.default is p.empty for p in positional)
    given = len(node.inputs) + (0 if node.dynamic else len(node.outputs))
    if not required <= given <= len(positional):
        raise node.fail(f"has {len(node.inputs)} inputs and {len(node.outputs)} outputs; its "
                        f"kernel reads and writes {len(positional)} tensors in all (inputs "
                        "then outputs)" if not node.dynamic else
                        f"has {len(node.inputs)} inputs; its kernel reads {len(positional)}")
