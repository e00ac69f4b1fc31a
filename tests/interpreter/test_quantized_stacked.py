"""hybrid_lstm.QuantizedStackedLstm's and hybrid_row.QuantizedStackedGru's inline quantization of
h against hybrid.dequantize_row (the default resolver's one-row quantize-dequantize, itself
tested against LiteRT's arithmetic): the same numbers bit for bit, symmetric and asymmetric,
with and without cell clipping, over weights and inputs of several scales (rows of one sign,
clamped rows, all-zero rows), and a NaN in h gives NaN, not an exception."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter.kernels.hybrid import dequantize_row
from edgelite.interpreter.kernels.hybrid_lstm import QuantizedStackedLstm
from edgelite.interpreter.kernels.hybrid_row import QuantizedStackedGru
from edgelite.interpreter.kernels.rnn_cells import StackedGru, StackedLstm


class _Reference(QuantizedStackedLstm):
    """The float step loop, then hybrid.dequantize_row on each step's h (the code before the
    statistics went inline)."""

    def _steps(self) -> None:
        for dot, operand, row, v_next in self.loop:
            self.loop_one(dot, operand, row)
            dequantize_row(row, v_next, self.asymmetric, row.item(row.argmin()),
                           row.item(row.argmax()), self.scalars)

    def loop_one(self, dot, operand, row) -> None:
        saved = self.loop
        self.loop = [(dot, operand, row, None)]
        try:
            StackedLstm._steps(self)
        finally:
            self.loop = saved


@pytest.mark.parametrize("asymmetric", [False, True])
@pytest.mark.parametrize("cell_clip", [0.0, 0.4])
@pytest.mark.parametrize("scale", [0.05, 0.5, 3.0])
def test_inline_quantization_is_dequantize_row(asymmetric, cell_clip, scale):
    rng = np.random.default_rng(int(scale * 100) + asymmetric)
    n, n_in, steps = 12, 5, 9
    m = (rng.standard_normal((n + n_in + 1, 4 * n)) * scale).astype(np.float32)
    m[:, 3 * n:] += np.float32(scale)   # the g columns shifted: h rows mostly of one sign
    x = (rng.standard_normal((steps, 1, n_in)) * 2).astype(np.float32)
    x[3] = 0   # a zero input row
    got, want = (cls(m, n, steps, cell_clip, asymmetric) for cls in (QuantizedStackedLstm,
                                                                     _Reference))
    outs = []
    for lstm in (got, want):
        h = (np.random.default_rng(7).standard_normal((1, n)) * 0.3).astype(np.float32)
        c = np.zeros((1, n), np.float32)
        out = np.zeros((steps, 1, n), np.float32)
        lstm(x, h, c, out)
        outs.append((out, h, c, lstm.v.copy()))
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)


class _ReferenceGru(QuantizedStackedGru):
    """StackedGru's float steps, then hybrid.dequantize_row on each step's h."""

    def _steps(self) -> None:
        saved = self.loop
        try:
            for step in saved:
                self.loop = [step]
                StackedGru._steps(self)
                row, v_next = step[7], step[8]
                dequantize_row(row, v_next, self.asymmetric, row.item(row.argmin()),
                               row.item(row.argmax()), self.scalars)
        finally:
            self.loop = saved


def _gru_outputs(cls, m, n, steps, asymmetric, x, h0):
    gru = cls(m, n, steps, asymmetric)
    out, h_out = np.zeros((steps, 1, n), np.float32), np.zeros((1, n), np.float32)
    gru(x, h0, out, h_out)
    return out, h_out, gru.v.copy()


@pytest.mark.parametrize("asymmetric", [False, True])
@pytest.mark.parametrize("scale", [0.05, 0.5, 3.0])
def test_gru_inline_quantization_is_dequantize_row(asymmetric, scale):
    rng = np.random.default_rng(int(scale * 100) + asymmetric)
    n, n_in, steps = 12, 5, 9
    m = (rng.standard_normal((n_in + 1 + n, 5 * n)) * scale).astype(np.float32)
    m[:, 2 * n:3 * n] += np.float32(scale)   # r mostly open
    x = (rng.standard_normal((steps, 1, n_in)) * 2).astype(np.float32)
    x[3] = 0
    h0 = (np.random.default_rng(7).standard_normal((1, n)) * 0.3).astype(np.float32)
    got, want = (_gru_outputs(cls, m, n, steps, asymmetric, x, h0)
                 for cls in (QuantizedStackedGru, _ReferenceGru))
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_nan_h_gives_nan_not_an_exception():
    """A NaN in h (a NaN input): the inline zero point stays a number, the outputs NaN."""
    n, n_in, steps = 4, 3, 3
    m = np.full((n + n_in + 1, 4 * n), 0.1, np.float32)
    x = np.zeros((steps, 1, n_in), np.float32)
    x[1, 0, 0] = np.nan
    lstm = QuantizedStackedLstm(m, n, steps, 0.0, True)
    out = np.zeros((steps, 1, n), np.float32)
    lstm(x, np.zeros((1, n), np.float32), np.zeros((1, n), np.float32), out)
    assert np.isnan(out[1:]).all() and np.isfinite(out[0]).all()
