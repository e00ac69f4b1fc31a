"""What each op needs from full-integer quantization: how its output's parameters are chosen, and
which inputs must share them (TFLite's op constraints). Which inputs are data, weights (and along
which axis they are quantized per channel) or bias is the op table's (edgelite.schema.ops).

One table, `OUTPUT`; an op missing from it stays float. `rule(op)` joins it with the op's row.
`integer_kernel(op, key)` asks edgelite's registry whether the integer arithmetic `key`
("int8", "int16") has a kernel.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from edgelite.schema.ops import facts

# Output parameters fixed by the kernels (scale, zero point) per activation type.
FIXED = {
    "SOFTMAX": {"int8": (1 / 256, -128), "int16": (1 / 32768, 0)},
    "LOGISTIC": {"int8": (1 / 256, -128), "int16": (1 / 32768, 0)},
    "TANH": {"int8": (1 / 128, 0), "int16": (1 / 32768, 0)},
    "LOG_SOFTMAX": {"int8": (16 / 256, 127)},
}


@dataclass(frozen=True)
class Rule:
    """How an op quantizes.

    data: the float inputs that carry activations (the rest of its float inputs are constants
      quantized on their own range, unless `weights`/`bias` name them); None: every input.
    weights: {input: per-channel axis, or None for one symmetric scale}.
    constant_weights: the same for inputs that are weights where they are constant and data
      where they are not (BATCH_MATMUL's right-hand side).
    bias: (bias input, the data input whose scale multiplies the weights' into the bias scale).
    output: "free" (its calibrated range), "same" (input data[0]'s parameters: the kernel copies
      or compares raw values), "fixed" (FIXED above), "shared" (every data input and the output
      share one set of parameters: requantized into it where they differ) or "none" (no float
      outputs: ARG_MAX).
    """

    data: tuple | None = (0,)
    weights: dict = field(default_factory=dict)
    constant_weights: dict = field(default_factory=dict)
    bias: tuple | None = None
    output: str = "free"


# How each op's output takes its parameters.
OUTPUT = {
    **{op: "free" for op in (
        "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV", "BATCH_MATMUL",
        "ADD", "SUB", "MUL", "SQUARED_DIFFERENCE", "DIV", "PRELU",
        "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LEAKY_RELU", "HARD_SWISH", "MEAN",
        "SUM", "REDUCE_PROD", "RSQRT", "SQRT", "EXP", "LOG", "ELU", "GELU", "ABS", "NEG",
        "SQUARE")},
    **{op: "fixed" for op in FIXED},
    **{op: "same" for op in (
        "MAX_POOL_2D", "AVERAGE_POOL_2D", "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "TRANSPOSE",
        "GATHER", "GATHER_ND", "SLICE", "STRIDED_SLICE", "PAD", "PADV2", "MIRROR_PAD",
        "SPLIT", "SPLIT_V", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "RESIZE_NEAREST_NEIGHBOR",
        "RESIZE_BILINEAR", "BROADCAST_TO", "TILE", "UNPACK", "REVERSE_V2", "BATCH_TO_SPACE_ND",
        "SPACE_TO_BATCH_ND", "REDUCE_MAX", "REDUCE_MIN", "TOPK_V2")},
    **{op: "shared" for op in ("CONCATENATION", "PACK", "MAXIMUM", "MINIMUM")},
    **{op: "none" for op in ("ARG_MAX", "ARG_MIN")},
}

# Where quantization reads fewer data inputs than the op has: MAXIMUM and MINIMUM quantize with
# one activation input (the other a constant, on the shared range); of two activations they
# stay float.
DATA = {"MAXIMUM": (0,), "MINIMUM": (0,)}

# Ops whose constant float inputs other than the data take the data's parameters (the pad value
# of PADV2, the values of a shared op).
SAME_PARAMS_CONSTANTS = {"PADV2"}


@lru_cache(maxsize=None)
def rule(op: str) -> Rule | None:
    """The quantization rule of `op`: its OUTPUT kind and its row's inputs; None: it stays float."""
    output = OUTPUT.get(op)
    if output is None:
        return None
    f = facts(op)
    weights = {k: f.weight_axis for k in f.weights}
    bias = (f.bias, f.data[0]) if f.bias is not None else None
    if f.weights_when_constant:
        return Rule(DATA.get(op, f.data), {}, weights, bias, output)
    return Rule(DATA.get(op, f.data), weights, {}, bias, output)


def data_inputs(op, r: Rule) -> list:
    """Positions of the activation inputs of `op` under rule `r`."""
    if r.data is None:
        return [k for k, t in enumerate(op.inputs) if t >= 0]
    return [k for k in r.data if k < len(op.inputs) and op.inputs[k] >= 0]


def integer_kernel(op: str, key: str) -> bool:
    """Whether edgelite has a kernel for `op` on `key` ("int8", "int16", "hybrid")."""
    from edgelite.interpreter.kernels import KERNELS

    return key in KERNELS.get(op, {})
