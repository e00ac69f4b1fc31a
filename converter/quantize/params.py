"""Quantization parameters from ranges, and quantized constants (weights, biases, operands).

Activations: int8 asymmetric over [min(lo, 0), max(hi, 0)] (zero exactly representable, as
TFLite's kernels assume for padding and ReLU), int16 symmetric with zero point 0. Weights:
symmetric int8 over [-127, 127] (narrow range), per channel along the op's axis. Biases: int32
(int64 for 16x8) with scale input_scale x weight_scale, zero point 0.
"""
from __future__ import annotations

import numpy as np

from edgelite.interpreter.kernels.fixed_point import round_half_away
from edgelite.schema import QuantizationParameters
from edgelite.schema.validate import INT32_MAX

QRANGE = {"int8": (-128, 127), "int16": (-32768, 32767)}


def activation_params(lo: float, hi: float, dtype: str) -> tuple:
    """(scale float32, zero point) of an activation with range [lo, hi] as `dtype`."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    qmin, qmax = QRANGE[dtype]
    if dtype == "int16":
        bound = max(-lo, hi)
        scale = np.float32(bound / qmax if bound > 0 else 1.0 / qmax)
        return scale, 0
    if hi - lo <= 0:
        return np.float32(1.0 / 255), qmin
    scale = np.float32((hi - lo) / (qmax - qmin))
    zero_point = int(np.clip(round_half_away(qmin - lo / float(scale)), qmin, qmax))
    return scale, zero_point


def qparams(scale, zero_point, axis: int = 0) -> QuantizationParameters:
    scale = np.atleast_1d(np.asarray(scale, np.float32))
    zero_point = np.broadcast_to(np.atleast_1d(np.asarray(zero_point, np.int64)), scale.shape)
    return QuantizationParameters(scale=scale, zero_point=zero_point.copy(),
                                  quantized_dimension=int(axis))


def quantize_values(x: np.ndarray, scale, zero_point, dtype: str) -> np.ndarray:
    """round(x / scale) + zero_point, saturated to `dtype` (halves away from zero)."""
    lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
    q = round_half_away(np.asarray(x, np.float64) / np.float64(scale)) + zero_point
    return np.clip(q, lo, hi).astype(dtype)


def weight_scales(w: np.ndarray, axis: int | None, level: int = 127) -> np.ndarray:
    """Symmetric scales: max|w| / `level` (127: int8, 7: int4) per channel along `axis` (one
    scale for None)."""
    w = np.asarray(w, np.float64)
    if axis is None:
        bound = np.array([np.abs(w).max(initial=0.0)])
    else:
        bound = np.abs(np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)).max(axis=1,
                                                                               initial=0.0)
    return np.where(bound > 0, bound / float(level), 1.0).astype(np.float32)


def quantize_weights(w: np.ndarray, scales: np.ndarray, axis: int | None,
                     level: int = 127) -> np.ndarray:
    """int8 values of the weights for the given symmetric scales, clamped to [-level, level]."""
    w = np.asarray(w, np.float64)
    shape = [1] * w.ndim
    if axis is not None:
        shape[axis] = -1
    s = scales.astype(np.float64).reshape(shape) if axis is not None else float(scales[0])
    return np.clip(round_half_away(w / s), -level, level).astype(np.int8)


def bias_scales(input_scale, weight_scales_: np.ndarray) -> np.ndarray:
    """input_scale x weight_scale in float32, as TFLite's kernels check it."""
    return (np.float32(input_scale) * weight_scales_.astype(np.float32)).astype(np.float32)


def fit_bias(bias: np.ndarray, input_scale, scales: np.ndarray, dtype: str) -> np.ndarray:
    """Weight scales raised where an int32 bias would overflow: |bias| / (s_in s_w) must fit
    (TFLite's converter widens those channels' weight scales the same way)."""
    if dtype != "int32":
        return scales
    bias = np.abs(np.asarray(bias, np.float64)).reshape(-1)
    needed = bias / (float(input_scale) * (INT32_MAX * 0.999))
    if scales.size == 1 and bias.size > 1:
        needed = needed.max(initial=0.0)
    return np.maximum(scales.astype(np.float64), needed).astype(np.float32)


def constant_params(value: np.ndarray, dtype: str) -> tuple:
    """(scale, zero point) of a constant operand (not weights): its own value range."""
    v = np.asarray(value, np.float64)
    return activation_params(v.min(initial=0.0), v.max(initial=0.0), dtype)
