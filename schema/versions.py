"""Operator versions from the features an op uses, and the oldest runtime that runs a model.

A runtime refuses an op whose version it does not know, so the version must say which kernel
features the op needs: integer arithmetic, hybrid weights, dilation, and so on. The numbers follow
TFLite's op versioning; ops and features not listed here are version 1.
"""
from __future__ import annotations

from .model import Operator, Subgraph

_INT8 = {
    "CONV_2D": 3, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": 4, "ADD": 2, "SUB": 2, "MUL": 2,
    "AVERAGE_POOL_2D": 2, "MAX_POOL_2D": 2, "SOFTMAX": 2, "LOGISTIC": 2, "TANH": 2,
    "CONCATENATION": 2, "MEAN": 2, "SUM": 2, "PAD": 2, "PADV2": 2, "TRANSPOSE": 2,
    "STRIDED_SLICE": 2, "SLICE": 2, "SPLIT": 2, "SPLIT_V": 2, "GATHER": 2,
    "RESIZE_BILINEAR": 2, "RESIZE_NEAREST_NEIGHBOR": 2, "ARG_MAX": 2, "ARG_MIN": 2,
    "DEQUANTIZE": 2, "MAXIMUM": 2, "MINIMUM": 2, "RELU": 2, "RELU6": 2,
    "LEAKY_RELU": 2, "PACK": 2, "UNPACK": 2, "TOPK_V2": 2, "BATCH_MATMUL": 2,
    "TRANSPOSE_CONV": 2, "REDUCE_MAX": 2, "REDUCE_MIN": 2, "LOG_SOFTMAX": 2,
    "SPACE_TO_DEPTH": 2, "DEPTH_TO_SPACE": 2, "SQUEEZE": 1, "RESHAPE": 1,
}
_INT16 = {"CONV_2D": 4, "DEPTHWISE_CONV_2D": 5, "FULLY_CONNECTED": 7, "ADD": 3, "SUB": 3,
          "MUL": 4, "SOFTMAX": 3, "LOGISTIC": 3, "TANH": 3, "CONCATENATION": 3, "MEAN": 3,
          "AVERAGE_POOL_2D": 3, "MAX_POOL_2D": 3, "DEQUANTIZE": 3, "SPLIT": 4}
_HYBRID = {"CONV_2D": 2, "DEPTHWISE_CONV_2D": 4, "FULLY_CONNECTED": 3, "BATCH_MATMUL": 4,
           "UNIDIRECTIONAL_SEQUENCE_LSTM": 2}

# Ops whose first registered kernel version is above 1 (LiteRT refuses version 1 of these).
_MIN_VERSION = {"BROADCAST_TO": 2}

# The TFLite release that first ran each op at version 1 where later than 1.5.0.
_INTRODUCED = {"GELU": "2.9.0", "HARD_SWISH": "1.15.0", "BATCH_MATMUL": "2.3.0",
               "CUMSUM": "2.4.0", "BROADCAST_TO": "2.5.0", "CALL_ONCE": "2.5.0",
               "VAR_HANDLE": "2.6.0", "READ_VARIABLE": "2.6.0", "ASSIGN_VARIABLE": "2.6.0",
               "UNIDIRECTIONAL_SEQUENCE_LSTM": "1.14.0", "RELU_0_TO_1": "2.13.0",
               "WHILE": "1.15.0", "IF": "1.15.0", "SELECT_V2": "2.2.0", "DENSIFY": "2.2.0"}


def op_version(op: Operator, sg: Subgraph) -> int:
    """The version an op needs for the features it uses."""
    name = op.opcode.builtin
    dtypes = [sg.tensors[t].dtype if t >= 0 else None for t in op.inputs]
    first = dtypes[0] if dtypes else None
    if name == "SPLIT":  # input 0 is the axis; the data is input 1
        first = dtypes[1] if len(dtypes) > 1 else None
    version = _MIN_VERSION.get(name, 1)
    if first == "int8":
        version = max(version, _INT8.get(name, 1))
    elif first == "int16":
        version = max(version, _INT16.get(name, 1))
    elif first == "float32" and len(dtypes) > 1 and dtypes[1] in ("int8", "uint8"):
        version = _HYBRID.get(name, 1)
    if name == "DEQUANTIZE" and op.inputs and op.inputs[0] >= 0:
        q = sg.tensors[op.inputs[0]].quantization
        if first == "float16":
            version = 3
        elif first == "int8" and q is not None and q.per_channel:
            version = 5
    if name == "QUANTIZE" and op.outputs and op.outputs[0] >= 0:  # decided by the output
        out = sg.tensors[op.outputs[0]]
        if out.quantization is not None and out.quantization.per_channel:
            version = 3
        elif out.dtype == "int16":
            version = 2
    opts = op.options
    if name == "DEPTHWISE_CONV_2D" and opts is not None and \
            (opts.dilation_w_factor != 1 or opts.dilation_h_factor != 1):
        version = max(version, 2)
    if name == "FULLY_CONNECTED" and first in ("float32", "int8", "uint8"):
        if len(op.inputs) == 2:  # no bias input at all
            version = max(version, 6)
        elif opts is not None and opts.keep_num_dims:
            version = max(version, 5)
    return version


def _key(v: str) -> tuple:
    return tuple(int(x) for x in v.split("."))


def min_runtime_version(codes) -> str:
    """The oldest TFLite release that runs every (op, custom code, version) in `codes`."""
    best = "1.5.0"
    for builtin, _custom, version in codes:
        need = _INTRODUCED.get(builtin, "1.5.0")
        if version >= 4:
            need = max(need, "2.3.0", key=_key)
        elif version >= 2:
            need = max(need, "1.14.0", key=_key)
        best = max(best, need, key=_key)
    return best
