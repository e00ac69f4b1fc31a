"""The gradient builder: a table of rules, one per op, and the reverse walk that applies them.

`backward` walks the forward ops from the loss back to the trainable tensors in reverse order and
asks each op's rule for the ops that compute its inputs' gradients, in ordinary builtin ops (so
the backward graph runs on the same kernels and in stock runtimes). Only ops between a trainable
tensor and the loss get gradient ops: frozen parts get none. Where a tensor fans out, its
gradients are summed. An op on that path without a rule is an error naming every such op at once.
"""
from __future__ import annotations

from . import grad_math, grad_nn, grad_shape
from .emit import Emitter, GradientError

# op -> rule(em, op, dys, needs) -> one gradient (or None) per input
RULES = {
    "FULLY_CONNECTED": grad_nn.fully_connected,
    "CONV_2D": grad_nn.conv_2d,
    "DEPTHWISE_CONV_2D": grad_nn.depthwise_conv_2d,
    "BATCH_MATMUL": grad_nn.batch_matmul,
    "AVERAGE_POOL_2D": grad_nn.average_pool_2d,
    "MAX_POOL_2D": grad_nn.max_pool_2d,
    "ADD": grad_math.add,
    "SUB": grad_math.sub,
    "MUL": grad_math.mul,
    "DIV": grad_math.div,
    "RELU": grad_math.relu,
    "RELU6": grad_math.relu6,
    "LEAKY_RELU": grad_math.leaky_relu,
    "LOGISTIC": grad_math.logistic,
    "TANH": grad_math.tanh,
    "GELU": grad_math.gelu,
    "HARD_SWISH": grad_math.hard_swish,
    "SOFTMAX": grad_math.softmax,
    "LOG_SOFTMAX": grad_math.log_softmax,
    "MEAN": grad_math.mean,
    "SUM": grad_math.sum_,
    "RESHAPE": grad_shape.reshape,
    "SQUEEZE": grad_shape.squeeze,
    "EXPAND_DIMS": grad_shape.expand_dims,
    "TRANSPOSE": grad_shape.transpose,
    "CONCATENATION": grad_shape.concatenation,
    "PAD": grad_shape.pad,
    "PADV2": grad_shape.padv2,
    "STRIDED_SLICE": grad_shape.strided_slice,
    "GATHER": grad_shape.gather,
    "DEQUANTIZE": grad_shape.dequantize,
}

DIFFERENTIABLE = ("float32",)


def _active(em: Emitter, ops: list, targets, wrt) -> tuple:
    """(ops between `wrt` and `targets` in order, tensors that depend on `wrt`)."""
    depends = set(wrt)
    for op in ops:
        if any(t in depends for t in op.inputs if t >= 0):
            depends.update(t for t in op.outputs if em.dtype(t) in DIFFERENTIABLE)
    reaches = set(targets)
    active = []
    for op in reversed(ops):
        if any(t in reaches and t in depends for t in op.outputs):
            if any(t in depends for t in op.inputs if t >= 0):
                active.append(op)
            reaches.update(t for t in op.inputs if t >= 0)
    return active[::-1], depends


def _describe(em: Emitter, op) -> str:
    index = em.sg.operators.index(op)
    out = em.sg.tensors[op.outputs[0]].name if op.outputs else "-"
    return f"operator {index} {op.op} (output {out!r})"


def _check_rules(em: Emitter, active: list) -> None:
    """GradientError naming every op on the path that has no rule."""
    missing = [op for op in active if op.op not in RULES]
    if missing:
        raise GradientError(
            f"no gradient rule for {len(missing)} operator(s) on the path from the trainable "
            "tensors to the loss:\n  " + "\n  ".join(_describe(em, op) for op in missing)
            + f"\nops with rules: {', '.join(sorted(RULES))}. Train fewer layers (e.g. "
            "trainable='last:1') so that the path avoids them.")


def backward(em: Emitter, ops: list, seeds: dict, wrt: list) -> dict:
    """{tensor in wrt: its gradient tensor (None if the targets do not depend on it)}: the
    gradient of sum(target * seed) over `seeds` {target: seed tensor}, through `ops` (forward
    operators already emitted into em's subgraph)."""
    active, depends = _active(em, ops, list(seeds), wrt)
    _check_rules(em, active)
    pending: dict = {t: [g] for t, g in seeds.items()}

    def total(t):
        terms = pending.get(t)
        if not terms:
            return None
        if len(terms) > 1:
            em.scope = f"grad/{em.sg.tensors[t].name}/sum"
            pending[t] = [em.add_n(terms)]
        return pending[t][0]

    for op in reversed(active):
        dys = [total(t) for t in op.outputs]
        if all(d is None for d in dys):
            continue
        needs = [t >= 0 and t in depends for t in op.inputs]
        em.scope = f"grad/{em.sg.tensors[op.outputs[0]].name}"
        grads = RULES[op.op](em, op, dys, needs)
        for t, g, need in zip(op.inputs, grads, needs):
            if need and g is not None:
                if em.sig(g) != em.sig(t):
                    raise GradientError(f"{em.scope}: the {op.op} rule gave a gradient of shape "
                                        f"{list(em.sig(g))} for input {list(em.sig(t))}")
                pending.setdefault(t, []).append(g)
    return {t: total(t) for t in wrt}
