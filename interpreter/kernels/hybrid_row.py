"""A dynamic-range FULLY_CONNECTED on one row, as hybrid.fully_connected computes it, with the
row's quantization parameters in scalars: the fused Keras loop (rnn_loop.py) runs one such
product per time step, where the kernel's ~25 passes over one-element arrays (its per-row
statistics) cost more than the product itself.

The same numbers as the kernel, bit for bit (tests/interpreter/test_hybrid_row.py checks it on
rows of every kind): LiteRT's asymmetric or symmetric input quantization (its float32 and float64
steps where the kernel takes them, its rounding through hybrid._round_litert), the integer sums
exact (float32 while they stay below 2^24, else float64: any order of exact sums is the same),
the offset correction in float64, then the channel scales and the bias in float32.
"""
from __future__ import annotations

import numpy as np

from .fixed_point import EXACT_F32, round_half_away
from .hybrid import _round_litert

F32 = np.float32
_ZERO = F32(0)
# _round_litert's `signs` for the row (see hybrid._row_signs), made once, not per call
_POSITIVE, _NEGATIVE, _MIXED = (np.array([v], F32) for v in (1, -1, 0))


class RowProduct:
    """out[1, units] = the hybrid FULLY_CONNECTED of x[1, depth] with int8 weights w [units,
    depth] (channel scales, optional float32 bias), its input quantized as `asymmetric` says."""

    def __init__(self, w: np.ndarray, channel: np.ndarray, bias, asymmetric: bool):
        units, depth = w.shape
        bound = float(np.abs(w.astype(np.int64)).sum(axis=1).max(initial=0))
        bound *= 255 if asymmetric else 127
        self.dtype = F32 if bound < EXACT_F32 else np.float64
        self.wt = np.ascontiguousarray(w.T, self.dtype)
        self.col_sums = w.astype(np.float64).sum(axis=1).reshape(1, units)
        self.channel = np.ascontiguousarray(channel, F32).reshape(1, units)
        self.per_channel = channel.size > 1 and not np.all(channel == channel[0])
        self.bias = None if bias is None else np.ascontiguousarray(bias, F32).reshape(1, units)
        self.asymmetric = asymmetric
        self.q = np.empty((1, depth), F32)
        self.half = np.empty((1, depth), F32)
        self.acc = np.empty((1, units), self.dtype)
        self.acc64 = np.empty((1, units), np.float64)
        self.scale = np.empty((1, units), F32)

    def __call__(self, x: np.ndarray, out: np.ndarray) -> None:
        q = self.q
        lo, hi = x.min(), x.max()
        if self.asymmetric:
            row_scale, offset = self._asymmetric(x, lo, hi)
        else:
            row_scale, offset = self._symmetric(x, lo, hi)
        _round_litert(q, self.half, _POSITIVE if lo >= 0 else _NEGATIVE if hi <= 0 else _MIXED)
        if offset is not None:   # the kernel clamps where its bounds say it moves something;
            np.add(q, offset, out=q)   # clamping always gives the same numbers
            np.clip(q, F32(-128), F32(127), out=q)
        np.dot(q if self.dtype == F32 else q.astype(np.float64), self.wt, out=self.acc)
        if offset is not None:
            np.multiply(self.col_sums, float(offset), out=self.acc64)
            np.subtract(self.acc, self.acc64, out=self.acc64)
            np.copyto(out, self.acc64, casting="unsafe")
        else:
            np.copyto(out, self.acc, casting="unsafe")
        if self.per_channel:
            np.multiply(self.channel, row_scale, out=self.scale)
            np.multiply(out, self.scale, out=out)
        else:
            np.multiply(out, F32(row_scale * self.channel[0, 0]), out=out)
        if self.bias is not None:
            np.add(out, self.bias, out=out)

    def _asymmetric(self, x, lo, hi):
        """quantize_rows_asymmetric for one row: (scale, zero point), q = x / scale (before
        rounding) in self.q."""
        rmin, rmax = min(lo, _ZERO), max(hi, _ZERO)
        flat = rmin == rmax
        scale = 1.0 if flat else float(F32(rmax - rmin)) / 255.0
        r_min, r_max = float(rmin), float(rmax)
        from_min, from_max = -128.0 - r_min / scale, 127.0 - r_max / scale
        zp = from_min if 128.0 + abs(r_min / scale) < 127.0 + abs(r_max / scale) else from_max
        zp = -128.0 if zp <= -128 else 127.0 if zp >= 127 else float(round_half_away(zp))
        if flat:
            zp = 0.0
        scale32 = F32(1) if flat else F32(scale)
        offset = F32(zp)
        inv = F32(1.0 / float(scale32))
        np.multiply(x, inv, out=self.q)
        return scale32, offset

    def _symmetric(self, x, lo, hi):
        """quantize_rows_symmetric for one row: (scale, None), q = x * (127 / r) (|q| <= 127:
        no clamp, as the kernel)."""
        r = max(abs(lo), abs(hi))
        zero = r == 0
        safe = F32(1) if zero else r
        scale32 = F32(1) if zero else F32(safe / F32(127))
        inv = F32(F32(127) / safe)
        np.multiply(x, inv, out=self.q)
        return scale32, None


def row_product(node_options, w_info, bias_info):
    """A RowProduct for a FULLY_CONNECTED's weights and bias TensorInfos, or None when its
    weights are not what hybrid.fully_connected takes as int8 (int4, asymmetric weights)."""
    q = w_info.quantization
    if w_info.type_name != "int8" or w_info.data is None or q is None or q.scale.size == 0 \
            or (q.zero_point.size and np.any(q.zero_point != 0)):
        return None
    w = np.asarray(w_info.data)
    scales = np.asarray(q.scale, F32).reshape(-1)
    if scales.size not in (1, w.shape[0]):
        return None
    channel = np.full(w.shape[0], scales[0], F32) if scales.size == 1 else scales
    bias = None
    if bias_info is not None:
        if bias_info.data is None or bias_info.type_name != "float32":
            return None
        bias = np.asarray(bias_info.data, F32).reshape(-1)
    asymmetric = bool(getattr(node_options, "asymmetric_quantize_inputs", False))
    return RowProduct(w, channel, bias, asymmetric)
