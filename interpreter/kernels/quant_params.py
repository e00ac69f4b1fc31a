"""What integer kernels read from a node's quantization at prepare: a tensor's scale and zero
point, a weight's per-channel scales, the integer range a fused activation clamps to, and the
output type they compute in."""
from __future__ import annotations

import numpy as np

from edgelite.schema.ops import Activation

from .fixed_point import INT32_MAX, INT32_MIN, quantize_f32

TYPE_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767),
              "int32": (INT32_MIN, INT32_MAX)}


def expect_output_type(node, key: str) -> None:
    """Fails unless output 0 is of type `key` (integer kernels compute in one type)."""
    out = node.outputs[0]
    if out.type_name != key:
        raise node.fail(f"output is {out.type_name}; expected {key}")


def activation_range(code: int, out, node=None) -> tuple:
    """CalculateActivationRangeQuantized: the clamp bounds of a fused activation on the output's
    integer type. Other codes (TANH, SIGN_BIT) clamp to the type's range, as TFLite does."""
    lo, hi = TYPE_RANGE[out.type_name]
    code = int(code or 0)
    scale, zp = out.scale, out.zero_point
    if code == Activation.RELU:
        lo = max(lo, quantize_f32(0.0, scale, zp))
    elif code == Activation.RELU6:
        lo = max(lo, quantize_f32(0.0, scale, zp))
        hi = min(hi, quantize_f32(6.0, scale, zp))
    elif code == Activation.RELU_N1_TO_1:
        lo = max(lo, quantize_f32(-1.0, scale, zp))
        hi = min(hi, quantize_f32(1.0, scale, zp))
    return lo, hi


def quant_params(node, k: int, output: bool = False) -> tuple:
    """(scale, zero_point) of input/output `k`, failing when the tensor is not quantized."""
    t = node.outputs[k] if output else node.input(k)
    q = t.quantization
    if q is None or q.scale.size == 0:
        where = "output" if output else "input"
        raise node.fail(f"{where} {k} ({t.name!r}, {t.type_name}) has no quantization parameters")
    scale = float(q.scale[0])
    if not (np.isfinite(scale) and scale > 0):
        where = "output" if output else "input"
        raise node.fail(f"{where} {k} ({t.name!r}) has scale {scale}; a quantized tensor's "
                        "scale must be positive and finite")
    zp = int(q.zero_point[0]) if q.zero_point.size else 0
    span = TYPE_RANGE.get(t.type_name)
    if span is not None and not span[0] <= zp <= span[1]:
        where = "output" if output else "input"
        raise node.fail(f"{where} {k} ({t.name!r}) has zero point {zp}, outside the "
                        f"{t.type_name} range [{span[0]}, {span[1]}]")
    return scale, zp


def channel_scales(node, k: int, channels: int, axis: int) -> np.ndarray:
    """The float32 scales of a (per-channel or per-tensor) quantized weight, one per channel."""
    t = node.input(k)
    q = t.quantization
    if q is None or q.scale.size == 0:
        raise node.fail(f"weights (input {k}, {t.name!r}) have no quantization parameters")
    bad = ~(np.isfinite(q.scale) & (q.scale > 0))
    if bad.any():
        raise node.fail(f"weights (input {k}, {t.name!r}) have scale {float(q.scale[bad][0])} "
                        f"(channel {int(np.flatnonzero(bad)[0])}); scales must be positive and "
                        "finite")
    if q.scale.size == 1:
        return np.full(channels, q.scale[0], np.float32)
    if q.scale.size != channels or q.quantized_dimension != axis:
        raise node.fail(f"weights (input {k}) have {q.scale.size} scales along axis "
                        f"{q.quantized_dimension}; expected {channels} along axis {axis}")
    return q.scale.astype(np.float32)
