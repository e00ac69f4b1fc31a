"""int8 models on the OpenCL delegate: "int8": "dequantize" (the GPU delegates' practice).

An int8 (or uint8) node runs as its float counterpart on real values: every quantized tensor
of the partition is stored on the device as the real numbers it stands for (scale * (q - zero
point), float32 or half as the precision says), constant weights and int32 biases are
dequantized once when the partition is prepared, and each op's output is clamped to what its
int8 type can represent (a quantized ReLU6 is its range). Only the partition's own inputs and
outputs are integers: they are dequantized on their way to the device and quantized (rounded,
saturated) on their way back. The ops then round once, in float32, where the integer kernels
requantize after every op: outputs differ from BUILTIN_REF by a few steps of the output's
scale (tests/delegates/test_opencl_int8.py states how many), not bit for bit.

`view(node)` is that float counterpart: a copy of the node whose quantized tensors read as
float32 (constants holding their real values), each with `host` (the model's tensor, for the
partition's conversions) and `qrange` (the real interval its integer type covers).

Hybrid (dynamic-range) CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED (float32 activations,
int8 weights with per-tensor or per-channel scales; the delegate's "hybrid": "dequantize", its
default) run the same way, as GPU delegates run them: `hybrid_reason` says whether a node can,
and its `Views().node(node)` is the float node on weights dequantized once, at prepare, which
the float convolution kernels run. LiteRT's and the CPU kernels' hybrid path quantizes each
input to int8 on the fly (per batch row) and sums integers; the delegate sums the float inputs
times the dequantized weights, so it rounds less. Max abs difference from LiteRT over max
|LiteRT output| (its XNNPACK; its builtin kernels): 5.3e-3; 9.6e-3 on the test's model
(tests/delegates/test_opencl_hybrid.py, which allows 3e-2), 5.9e-3; 5.7e-3 on the corpus's
DenseNet121 and 1.6e-2; 1.7e-2 on EfficientNetB0 (benchmarks/bench_hybrid.py --delegate; the
CPU kernels are 4.6e-3; 3.9e-3 and 2.5e-2; 3.0e-2 from them). "hybrid": "cpu" leaves them to
the CPU kernels.
"""
from __future__ import annotations

import dataclasses

import numpy as np

# Ops whose result on real values is the int8 op's (up to its requantization's rounding).
INT8_OPS = frozenset({
    "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "SUB", "MUL", "MEAN",
    "SOFTMAX", "MAX_POOL_2D", "AVERAGE_POOL_2D", "RESHAPE", "SQUEEZE", "EXPAND_DIMS",
    "CONCATENATION", "LOGISTIC", "TANH", "RELU", "RELU6", "RELU_N1_TO_1", "HARD_SWISH",
    "MAXIMUM", "MINIMUM", "PAD"})
ACTIVATION_TYPES = {"int8": (-128, 127), "uint8": (0, 255)}
BIAS_TYPES = {"int32"}


# Ops a hybrid (dynamic-range) node runs as on the device: float ops on dequantized weights.
HYBRID_OPS = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"})
HYBRID_WEIGHTS = ("int8", "uint8", "int4")  # registry.arithmetic's "hybrid" weight types
CLAMPED = (0, 1, 2, 3)  # fused NONE, RELU, RELU_N1_TO_1, RELU6: what helpers.clamp applies


def _quantized(t) -> bool:
    q = t.quantization
    return q is not None and np.asarray(q.scale).size > 0


def reason(node) -> str | None:
    """Why `node` cannot run dequantized (None: it can). Only nodes with a quantized tensor
    get here; integer tensors without quantization (shapes, axes) may be constants."""
    if node.op == "DEQUANTIZE":  # real values in, the same real values out
        x = node.inputs[0]
        if x.data is not None or x.type_name not in ACTIVATION_TYPES or \
                np.asarray(x.quantization.scale).size != 1 or \
                node.outputs[0].type_name != "float32":
            return "DEQUANTIZE of a constant, per-channel or non-int8 input"
        return None
    if node.op not in INT8_OPS:
        return f"int8 {node.op} has no dequantized OpenCL kernel"
    outputs = {t.index for t in node.outputs}
    for t in list(node.inputs) + list(node.outputs):
        if t is None:
            continue
        what = f"tensor {t.name!r}"
        if t.type_name == "float32":
            return f"{what} is float32 beside int8 ones (a hybrid op; see the \"hybrid\" option)"
        if t.data is None or t.index in outputs:
            if t.type_name not in ACTIVATION_TYPES or not _quantized(t):
                return f"{what} is {t.type_name}; int8/uint8 quantized activations expected"
            if np.asarray(t.quantization.scale).size != 1:
                return f"{what} is quantized per channel; activations must be per tensor"
        elif _quantized(t) and t.type_name not in set(ACTIVATION_TYPES) | BIAS_TYPES:
            return f"{what} is a {t.type_name} constant"
    return None


def is_hybrid(node) -> bool:
    """Whether `node` is a hybrid CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED: a float32
    input and output, integer weights (input 1)."""
    if node.is_custom or node.op not in HYBRID_OPS or len(node.inputs) < 2:
        return False
    x, w = node.inputs[0], node.inputs[1]
    return x is not None and w is not None and x.type_name == "float32" and \
        w.type_name in HYBRID_WEIGHTS and bool(node.outputs) and \
        node.outputs[0].type_name == "float32"


def hybrid_reason(node) -> str | None:
    """Why the hybrid node `node` cannot run on dequantized weights (None: it can)."""
    w = node.inputs[1]
    what = f"hybrid {node.op}: weights {w.name!r}"
    if w.data is None:
        return f"{what} are not a constant"
    if not _quantized(w):
        return f"{what} are {w.type_name} without scales"
    if tuple(np.shape(w.data)) != tuple(w.shape):
        return f"{what} hold {np.shape(w.data)} values for shape {tuple(w.shape)}"
    scales = np.asarray(w.quantization.scale).size
    dim = int(w.quantization.quantized_dimension or 0)
    if scales > 1 and (dim >= len(w.shape) or w.shape[dim] != scales):
        return (f"{what} have {scales} scales along dimension {dim} of shape "
                f"{tuple(w.shape)}")
    for t in list(node.inputs[2:]) + list(node.outputs):
        if t is not None and t.type_name != "float32":
            return f"hybrid {node.op}: tensor {t.name!r} is {t.type_name}; float32 expected"
    act = int(getattr(node.options, "fused_activation_function", 0) or 0) \
        if node.options is not None else 0
    if act not in CLAMPED:  # the hybrid CPU kernels also apply TANH, SIGN_BIT; the float ones clamp
        return f"hybrid {node.op}: fused activation {act} (the float kernels only clamp)"
    return None


def real_value(t) -> np.ndarray:
    """The real numbers a quantized constant stands for, as float32 (per-channel scales and
    zero points along its quantized dimension)."""
    q = t.quantization
    data = np.asarray(t.data, np.float64)
    scale = np.asarray(q.scale, np.float64).reshape(-1)
    zero = np.asarray(q.zero_point, np.float64).reshape(-1)
    if zero.size == 0:
        zero = np.zeros(1)
    if scale.size > 1 and data.ndim:
        shape = [1] * data.ndim
        shape[int(q.quantized_dimension or 0)] = -1
        scale = scale.reshape(shape)
        zero = zero.reshape(shape) if zero.size > 1 else zero[0]
    else:
        scale, zero = scale[0], zero[0]
    return ((data - zero) * scale).astype(np.float32)


def real_range(t) -> tuple:
    """The real interval an int8/uint8 tensor's integers cover."""
    lo, hi = ACTIVATION_TYPES[t.type_name]
    s, z = float(t.quantization.scale[0]), int(t.quantization.zero_point[0])
    return (lo - z) * s, (hi - z) * s


class Views:
    """Float views of one partition's tensors, one per tensor index (nodes that share a tensor
    share its view)."""

    def __init__(self):
        self.of: dict = {}

    def tensor(self, t):
        if t is None or not _quantized(t) or t.type_name == "float32":
            return t
        v = self.of.get(t.index)
        if v is None:
            data = None if t.data is None else real_value(t)
            v = dataclasses.replace(t, dtype=np.dtype(np.float32), type_name="float32",
                                    data=data)
            v.host = t
            v.qrange = real_range(t) if t.type_name in ACTIVATION_TYPES else None
            self.of[t.index] = v
        return v

    def node(self, n):
        if not any(t is not None and _quantized(t) and t.type_name != "float32"
                   for t in list(n.inputs) + list(n.outputs)):
            return n
        return dataclasses.replace(n, inputs=[self.tensor(t) for t in n.inputs],
                                   outputs=[self.tensor(t) for t in n.outputs])


def has_quantized(node) -> bool:
    return any(t is not None and _quantized(t) and t.type_name in ACTIVATION_TYPES
               for t in list(node.inputs) + list(node.outputs))


def to_device(host: np.ndarray, staging: np.ndarray, info) -> None:
    """The device's values of `info`'s integers `host` into `staging` (the device's type):
    `info` is a view (Views: the real values; quant_int.IntViews: scale 1, q - zero point)."""
    s, z = float(info.quantization.scale[0]), float(info.quantization.zero_point[0])
    np.multiply(np.subtract(host, z, dtype=np.float32), np.float32(s), out=staging,
                casting="unsafe")


def to_host(staging: np.ndarray, host: np.ndarray, info) -> None:
    """`staging`'s values quantized into the integers `host` of the view `info` (rounded to
    nearest, ties away from zero as TFLite's quantize, then saturated)."""
    s, z = float(info.quantization.scale[0]), float(info.quantization.zero_point[0])
    lo, hi = ACTIVATION_TYPES[info.host.type_name]
    q = staging.astype(np.float32) / np.float32(s)
    q = np.trunc(q + np.copysign(np.float32(0.5), q)) + np.float32(z)
    np.copyto(host, np.clip(q, lo, hi), casting="unsafe")
