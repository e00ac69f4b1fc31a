"""A dynamic-range FULLY_CONNECTED on one row, as the default resolver's hybrid.fully_connected
computes it, for the fused Keras loop (rnn_loop.py), which runs one such product per time step:
the row quantized and dequantized with its statistics in Python scalars (hybrid.dequantize_rows),
one float32 GEMV with the weights dequantized once, here, and the loop's column scale (its 0.5
on the sigmoid gates: a power of two, exact) folded into the weights and the bias.

The kernel's numbers times the column scale, bit for bit (tests/interpreter/test_hybrid_row.py
checks it on rows of every kind).
"""
from __future__ import annotations

import math
import struct

import numpy as np

from .common import clip_
from .hybrid import (_HIGH, _LOW, _to_f32, dequantize_row, dequantize_rows,
                     dequantized_weights)
from .rnn_cells import StackedGru, _copyto

F32 = np.float32


class RowProduct:
    """out[rows, units] = column_scale * (the default resolver's hybrid FULLY_CONNECTED of
    x[rows, depth] (rows: 1 unless given) with int8 weights w [units, depth], channel scales and
    optional float32 bias), its input quantized per row as `asymmetric` says. `column_scale`:
    [units], powers of two."""

    def __init__(self, w: np.ndarray, channel: np.ndarray, bias, asymmetric: bool,
                 column_scale=None, rows: int = 1):
        units, depth = w.shape
        scale = np.ones(units, F32) if column_scale is None else np.asarray(column_scale, F32)
        self.wt = np.ascontiguousarray(dequantized_weights(w, channel, 0).T * scale, F32)
        self.bias = None if bias is None else \
            np.ascontiguousarray(np.asarray(bias, F32).reshape(1, units) * scale, F32)
        self.asymmetric = asymmetric
        self.q = np.empty((rows, depth), F32)
        self.rows = rows
        self.scalars = (np.zeros((), F32), np.zeros((), F32))   # one row's scale, 1/scale

    def __call__(self, x: np.ndarray, out: np.ndarray) -> None:
        if self.rows == 1:   # the bounds by argmin/argmax: a quarter of min/max's call cost
            dequantize_row(x, self.q, self.asymmetric, x.item(x.argmin()), x.item(x.argmax()),
                           self.scalars)
        else:
            dequantize_rows(x, self.q, self.asymmetric)
        self.q.dot(self.wt, out)   # the method: no dispatcher frame
        if self.bias is not None:
            np.add(out, self.bias, out)


def row_product(node_options, w_info, bias_info, column_scale=None):
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
    bias = None
    if bias_info is not None:
        if bias_info.data is None or bias_info.type_name != "float32":
            return None
        bias = np.asarray(bias_info.data, F32).reshape(-1)
    asymmetric = bool(getattr(node_options, "asymmetric_quantize_inputs", False))
    return RowProduct(w, scales, bias, asymmetric, column_scale)


_F32 = struct.Struct("f")


class QuantizedStackedGru(StackedGru):
    """rnn_cells.StackedGru (batch 1, reset_after) for a dynamic-range Keras GRU: its product
    takes h quantized and dequantized (v's h, as the body's hybrid FULLY_CONNECTED of h), the
    blend [z h, (1 - z) c] reads h in float32 (own_h: the body's MUL does), x's rows come
    dequantized. h's quantization is hybrid.dequantize_row's numbers inline in the step loop,
    as hybrid_lstm.QuantizedStackedLstm's (no frame a step)."""

    def __init__(self, m: np.ndarray, n: int, steps: int, asymmetric: bool):
        super().__init__(m, n, steps, None, own_h=True)
        self.asymmetric = asymmetric
        self.scalars = (np.zeros((), np.float32), np.zeros((), np.float32))   # scale, 1/scale

    def _start(self, h0: np.ndarray) -> None:
        _copyto(self.hc_rows[0, :self.n], h0)
        dequantize_row(h0, self.v[0, self.h_slot], self.asymmetric, h0.min(), h0.max(),
                       self.scalars)

    def _steps(self) -> None:
        gates, pair, r, hc, xc = self.views
        k, half, r2, n, y = self.k, self.half, self.r2, self.n, self.y
        r2_a, r2_b = r2[:n], r2[n:]
        tanh, mul, add, rint = np.tanh, np.multiply, np.add, np.rint
        scale32, inv32 = self.scalars
        asymmetric, pack, unpack, trunc = self.asymmetric, _F32.pack, _F32.unpack, math.trunc
        zp = 0.0
        for d1, o1, _, _, _, hq, c, row, v_next in self.loop:
            d1(o1, y)
            tanh(gates, gates)
            mul(gates, k, gates)
            add(gates, half, gates)     # [z, 1 - z, r]
            mul(r, hc, c)               # r * (h U_c + b)
            add(c, xc, c)
            tanh(c, c)
            mul(pair, hq, r2)           # [z h, (1 - z) c]
            add(r2_a, r2_b, row)
            # hybrid.dequantize_row(row, v_next, asymmetric, lo, hi), inline (as
            # QuantizedStackedLstm's; h_t mixes h_{t-1} and c: a huge first h can overflow
            # float32's range in rmax - rmin)
            lo, hi = row.item(row.argmin()), row.item(row.argmax())
            if asymmetric:
                rmin, rmax = 0.0 if 0.0 < lo else lo, 0.0 if 0.0 > hi else hi
                if rmin == rmax:
                    scale = f_inv = 1.0
                    zp = 0.0
                else:
                    try:
                        wide = unpack(pack(rmax - rmin))[0] / 255.0
                        scale = unpack(pack(wide))[0]
                    except OverflowError:   # past float32's range: IEEE's rounding
                        wide = _to_f32(rmax - rmin) / 255.0
                        scale = _to_f32(wide)
                    f_inv = 1.0 / scale
                    a, b = rmin / wide, rmax / wide
                    zp = -128.0 - a if 128.0 - a < 127.0 + b else 127.0 - b
                    if zp <= -128:
                        zp = -128.0
                    elif zp >= 127:
                        zp = 127.0
                    elif zp != zp:   # a NaN in h: NaN out, no exception
                        zp = 0.0
                    else:
                        whole = float(trunc(zp))
                        zp = whole + (zp - whole >= 0.5) - (zp - whole <= -0.5)
            else:
                r_ = max(-lo, hi)
                scale, f_inv = (1.0, 127.0) if r_ == 0 else (r_ / 127.0, 127.0 / r_)
            scale32[()], inv32[()] = scale, f_inv
            mul(row, inv32, v_next)
            rint(v_next, v_next)
            if asymmetric and (lo * f_inv + zp < _LOW or hi * f_inv + zp > _HIGH):
                clip_(v_next, -128.0 - zp, 127.0 - zp)
            mul(v_next, scale32, v_next)
