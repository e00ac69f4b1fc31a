"""Operator versions from the features an op uses, and the oldest runtime that runs a model.

A runtime refuses an op whose version it does not know, so the version must say which kernel
features the op needs: integer arithmetic, hybrid weights, dilation, and so on. The numbers follow
TFLite's op versioning, as each op's row in ops.py gives them; an op without a row is version 1.
"""
from __future__ import annotations

from .model import Operator, Subgraph
from .ops import data_input, facts


def _per_channel(t) -> bool:
    return t is not None and t.quantization is not None and t.quantization.per_channel


# What each feature in an op's `Versions.features` means: (op, subgraph, its data input's
# tensor, that tensor's dtype) -> whether the op uses it.
FEATURES = {
    "dilation": lambda op, sg, x, dtype: op.options is not None and (
        op.options.dilation_w_factor != 1 or op.options.dilation_h_factor != 1),
    "no_bias": lambda op, sg, x, dtype: dtype in ("float32", "int8", "uint8")
    and len(op.inputs) == 2,
    "keep_num_dims": lambda op, sg, x, dtype: dtype in ("float32", "int8", "uint8")
    and op.options is not None and bool(op.options.keep_num_dims),
    "float16_input": lambda op, sg, x, dtype: dtype == "float16",
    "per_channel_input": lambda op, sg, x, dtype: dtype == "int8" and _per_channel(x),
    "per_channel_output": lambda op, sg, x, dtype: bool(op.outputs) and op.outputs[0] >= 0
    and _per_channel(sg.tensors[op.outputs[0]]),
    "int16_output": lambda op, sg, x, dtype: bool(op.outputs) and op.outputs[0] >= 0
    and sg.tensors[op.outputs[0]].dtype == "int16",
}


def op_version(op: Operator, sg: Subgraph) -> int:
    """The version an op needs for the features it uses (its row's `Versions`)."""
    name = op.opcode.builtin
    rule = facts(name).versions
    k = data_input(name)
    x = sg.tensors[op.inputs[k]] if k < len(op.inputs) and op.inputs[k] >= 0 else None
    dtype = x.dtype if x is not None else None
    second = sg.tensors[op.inputs[1]].dtype if len(op.inputs) > 1 and op.inputs[1] >= 0 \
        else None
    version = rule.minimum
    if dtype == "int8":
        version = max(version, rule.int8)
    elif dtype == "int16":
        version = max(version, rule.int16)
    elif dtype == "float32" and second in ("int8", "uint8"):
        version = max(version, rule.hybrid)
    for feature, needs in rule.features:
        if FEATURES[feature](op, sg, x, dtype):
            version = max(version, needs)
    return version


def _key(v: str) -> tuple:
    return tuple(int(x) for x in v.split("."))


def min_runtime_version(codes) -> str:
    """The oldest TFLite release that runs every (op, custom code, version) in `codes`."""
    best = "1.5.0"
    for builtin, _custom, version in codes:
        need = facts(builtin).versions.introduced
        if version >= 4:
            need = max(need, "2.3.0", key=_key)
        elif version >= 2:
            need = max(need, "1.14.0", key=_key)
        best = max(best, need, key=_key)
    return best
