"""A dynamic-range FULLY_CONNECTED on one row, as the default resolver's hybrid.fully_connected
computes it, for the fused Keras loop (rnn_loop.py), which runs one such product per time step:
the row quantized and dequantized with its statistics in Python scalars (hybrid.dequantize_rows),
one float32 GEMV with the weights dequantized once, here, and the loop's column scale (its 0.5
on the sigmoid gates: a power of two, exact) folded into the weights and the bias.

The kernel's numbers times the column scale, bit for bit (tests/interpreter/test_hybrid_row.py
checks it on rows of every kind).
"""
from __future__ import annotations

import numpy as np

from .hybrid import dequantize_row, dequantize_rows, dequantized_weights

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
