"""What each op needs from full-integer quantization: which inputs are weights or bias, how its
output's parameters are chosen, and which inputs must share them (TFLite's op constraints).

One table, `RULES`; an op missing from it stays float. `integer_kernel(op, key)` asks edgelite's
registry whether the integer arithmetic `key` ("int8", "int16") has a kernel.
"""
from __future__ import annotations

from dataclasses import dataclass, field

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
      quantized on their own range, unless `weights`/`bias` name them).
    weights: {input: per-channel axis, or None for one symmetric scale}.
    bias: (bias input, the data input whose scale multiplies the weights' into the bias scale).
    output: "free" (its calibrated range), "same" (input data[0]'s parameters: the kernel copies
      or compares raw values), "fixed" (FIXED above) or "shared" (every data input and the output
      share one set of parameters: requantized into it where they differ).
    """

    data: tuple = (0,)
    weights: dict = field(default_factory=dict)
    bias: tuple | None = None
    output: str = "free"    # or "none": no float outputs (ARG_MAX)


CONV = Rule(weights={1: 0}, bias=(2, 0))
RULES = {
    "CONV_2D": CONV,
    "DEPTHWISE_CONV_2D": Rule(weights={1: 3}, bias=(2, 0)),
    "FULLY_CONNECTED": CONV,
    "TRANSPOSE_CONV": Rule(data=(2,), weights={1: 0}, bias=(3, 2)),
    "BATCH_MATMUL": Rule(data=(0, 1)),  # a constant right-hand side becomes weights (builder)
    **{op: Rule(output="fixed") for op in FIXED},
    **{op: Rule(output="same") for op in (
        "MAX_POOL_2D", "AVERAGE_POOL_2D", "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "TRANSPOSE",
        "GATHER", "GATHER_ND", "SLICE", "STRIDED_SLICE", "PAD", "PADV2", "MIRROR_PAD",
        "SPLIT_V", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "RESIZE_NEAREST_NEIGHBOR",
        "RESIZE_BILINEAR", "BROADCAST_TO", "TILE", "UNPACK", "REVERSE_V2", "BATCH_TO_SPACE_ND",
        "SPACE_TO_BATCH_ND", "REDUCE_MAX", "REDUCE_MIN", "TOPK_V2")},
    "SPLIT": Rule(data=(1,), output="same"),
    **{op: Rule(output="shared") for op in ("MAXIMUM", "MINIMUM")},
    "CONCATENATION": Rule(data=None, output="shared"),   # data=None: every input
    "PACK": Rule(data=None, output="shared"),
    **{op: Rule(data=(0, 1)) for op in ("ADD", "SUB", "MUL", "SQUARED_DIFFERENCE", "DIV")},
    **{op: Rule() for op in (
        "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LEAKY_RELU", "HARD_SWISH", "MEAN",
        "SUM", "REDUCE_PROD", "RSQRT", "SQRT", "EXP", "LOG", "ELU", "GELU", "ABS", "NEG",
        "SQUARE")},
    "PRELU": Rule(data=(0,)),
    **{op: Rule(output="none") for op in ("ARG_MAX", "ARG_MIN")},
}

# Ops whose constant float inputs other than the data take the data's parameters (the pad value
# of PADV2, the values of a shared op).
SAME_PARAMS_CONSTANTS = {"PADV2"}


def rule(op: str) -> Rule | None:
    return RULES.get(op)


def data_inputs(op, r: Rule) -> list:
    """Positions of the activation inputs of `op` under rule `r`."""
    if r.data is None:
        return [k for k, t in enumerate(op.inputs) if t >= 0]
    return [k for k in r.data if k < len(op.inputs) and op.inputs[k] >= 0]


def integer_kernel(op: str, key: str) -> bool:
    """Whether edgelite has a kernel for `op` on `key` ("int8", "int16", "hybrid")."""
    from edgelite.interpreter.kernels import KERNELS

    return key in KERNELS.get(op, {})
