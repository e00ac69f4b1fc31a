"""Which weights train: candidates, selection by pattern or `last:N`, and re-initialization.

A weight is a float32 constant an operator reads, or the float32 output of a DEQUANTIZE of a
constant (float16 or int8 weights, as in MediaPipe models): then the trainable variable holds
the dequantized values and the DEQUANTIZE is dropped from the training graph.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass

import numpy as np

from edgelite.schema import Model, Subgraph
from edgelite.schema.ops import facts

from .emit import GradientError

# The ops that count as layers (for last:N, all, and re-initialization): torch's Linear, Conv,
# ConvTranspose and MatMul. Which of their inputs are weights is the op table's to say.
LAYERS = ("FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "BATCH_MATMUL")


def layer_weights(op: str):
    """The input positions that hold a layer's weights and bias: () for an op that is no layer,
    None where any constant input may be one (a weight that may also be data)."""
    if op not in LAYERS:
        return ()
    f = facts(op)
    if f.weights_when_constant:
        return None
    return f.weights + ((f.bias,) if f.bias is not None else ())


@dataclass
class Param:
    name: str            # the variable's name (the tensor's name, made unique)
    tensor: int          # the tensor the forward graph reads
    value: np.ndarray    # its initial float32 value
    dequantize: int | None = None  # index of the DEQUANTIZE op it replaces, if any


def _dequantized(model: Model, sg: Subgraph, t: int) -> np.ndarray:
    tensor = sg.tensors[t]
    q = model.constant(sg, t)
    if tensor.dtype == "float16":
        return q.astype(np.float32)
    qp = tensor.quantization
    if qp is None or not qp.scale.size:
        raise GradientError(f"tensor {tensor.name!r} is {tensor.dtype} without quantization")
    shape = [1] * q.ndim
    if qp.per_channel:
        shape[qp.quantized_dimension] = -1
    scale = qp.scale.astype(np.float64).reshape(shape)
    zero = (qp.zero_point.reshape(shape) if qp.zero_point.size else np.zeros(shape)).astype(
        np.float64)
    return ((q.astype(np.float64) - zero) * scale).astype(np.float32)


def candidates(model: Model, sg: Subgraph) -> dict:
    """{tensor: Param} for every weight the subgraph's operators read."""
    found: dict = {}
    for i, op in enumerate(sg.operators):
        if op.opcode.builtin == "DEQUANTIZE" and op.inputs and op.inputs[0] >= 0:
            src = sg.tensors[op.inputs[0]]
            if model.constant(sg, op.inputs[0]) is not None and src.dtype in (
                    "float16", "int8", "uint8", "int16"):
                out = op.outputs[0]
                found[out] = Param(sg.tensors[out].name, out,
                                   _dequantized(model, sg, op.inputs[0]), dequantize=i)
            continue
        for t in op.inputs:
            if t < 0 or t in found:
                continue
            tensor = sg.tensors[t]
            if tensor.dtype == "float32" and not tensor.is_variable \
                    and model.constant(sg, t) is not None:
                found[t] = Param(tensor.name, t, np.array(model.constant(sg, t), np.float32))
    return found


def _upstream(sg: Subgraph, target: int) -> set:
    """Operators whose results the target depends on."""
    need, ops = {target}, set()
    for i in range(len(sg.operators) - 1, -1, -1):
        op = sg.operators[i]
        if any(t in need for t in op.outputs):
            ops.add(i)
            need.update(t for t in op.inputs if t >= 0)
    return ops


def select(model: Model, sg: Subgraph, trainable, target: int) -> list:
    """The Params `trainable` names: "last:N" (the weights and biases of the last N layers with
    weights before `target`), "all" (of every such layer), or glob patterns of tensor names,
    which may name any float weight (a list, or comma-separated)."""
    found = candidates(model, sg)
    upstream = _upstream(sg, target)
    layers = _layers(sg, found, upstream)
    on_path = {t for i in upstream for t in sg.operators[i].inputs}
    chosen: list = []
    spec = trainable if isinstance(trainable, (list, tuple)) else \
        [p.strip() for p in str(trainable).split(",") if p.strip()]
    for pattern in spec:
        if pattern.startswith("last:"):
            try:
                n = int(pattern.split(":", 1)[1])
            except ValueError:
                raise GradientError(f"bad trainable spec {pattern!r}: use last:N, N a "
                                    "number") from None
            if not layers:
                raise GradientError("the model has no layer with float weights before the loss "
                                    "(integer layers do not train: fine-tune the float model, "
                                    "then quantize it)")
            if not 1 <= n <= len(layers):
                raise GradientError(
                    f"trainable {pattern!r}: N counts the layers that train, from the last: "
                    f"use last:1 to last:{len(layers)} (the model has {len(layers)} layer"
                    f"{'s' if len(layers) > 1 else ''} with weights before the loss), or all")
            chosen += [t for weights in layers[-n:] for t in weights]
        elif pattern == "all":
            chosen += [t for weights in layers for t in weights]
        else:
            hits = [t for t, p in found.items() if fnmatch.fnmatchcase(p.name, pattern)]
            if not hits:
                names = ", ".join(repr(p.name) for t, p in found.items() if t in on_path)
                raise GradientError(f"trainable pattern {pattern!r} matches no weight; the "
                                    f"weights before the loss are: {names}")
            chosen += hits
    params, seen, names = [], set(), set()
    for t in chosen:
        if t in seen:
            continue
        seen.add(t)
        p = found[t]
        base, k = p.name or f"weight_{t}", 1
        while p.name in names or not p.name:
            p.name, k = f"{base}_{k}", k + 1
        names.add(p.name)
        params.append(p)
    if not params:
        raise GradientError(f"nothing to train: {trainable!r} selects no weight")
    return params


def _layers(sg: Subgraph, found: dict, upstream: set) -> list:
    """The weights of each layer with weights before the target, in execution order."""
    layers = []
    for i in sorted(upstream):
        op = sg.operators[i]
        positions = layer_weights(op.opcode.builtin)
        if positions is None:
            positions = range(len(op.inputs))
        weights = [op.inputs[k] for k in positions if k < len(op.inputs)
                   and op.inputs[k] in found]
        if weights:
            layers.append(weights)
    return layers


def torch_default_init(shape: tuple, fan_in: int, rng: np.random.Generator) -> np.ndarray:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)): what torch's Linear and Conv layers start from
    (kaiming_uniform with a=sqrt(5) for weights, and the same bound for biases)."""
    bound = 1.0 / np.sqrt(fan_in)
    return rng.uniform(-bound, bound, shape).astype(np.float32)


def reinitialize(model: Model, names, seed: int = 0, subgraph: int = 0) -> None:
    """Give the layers that read the named weights fresh weights and biases, as torch
    initializes a new layer (in place: new buffers, the old ones are left unused)."""
    sg = model.subgraphs[subgraph]
    rng = np.random.default_rng(seed)
    by_name = {t.name: i for i, t in enumerate(sg.tensors)}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise GradientError(f"no tensors named {missing}")
    targets = {by_name[n] for n in names}
    for op in sg.operators:
        positions = layer_weights(op.opcode.builtin)
        if not positions or not any(t in targets for t in op.inputs):
            continue
        w = sg.tensors[op.inputs[positions[0]]]
        fan_in = int(np.prod(w.shape[1:3] if op.opcode.builtin == "DEPTHWISE_CONV_2D"
                             else w.shape[1:]))
        for k in positions:
            if k < len(op.inputs) and op.inputs[k] >= 0:
                tensor = sg.tensors[op.inputs[k]]
                tensor.buffer = model.add_buffer(torch_default_init(tensor.shape, fan_in, rng))
