"""UNIDIRECTIONAL_SEQUENCE_LSTM with int8 weights and float activations (a dynamic-range LSTM),
as LiteRT's lstm_eval LstmStepHybrid computes it: x_t and h_{t-1} quantized per batch row (skipped
when all zero), each gate = bias + (x . W) * (sf_x * w_scale) + (h . R) * (sf_h * r_scale)
+ (peephole int8 * scale) * c, then its activation; the cell update and output in float; the
projection quantizes its input the same way. Weights take one scale each (per tensor).

The row quantization and the exact integer sums are hybrid.py's.
"""
from __future__ import annotations

import math
import struct

import numpy as np

from .common import TANH, activation_code, clip as _clip, clip_, sigmoid_
from .eigen_math import eigen_logistic_, eigen_tanh_
from .hybrid import (_HIGH, _LOW, F32, _activation, _int8_weights, _IntegerMatmul, dequantize_row,
                     dequantize_rows, dequantized_weights, quantize_rows_asymmetric,
                     quantize_rows_symmetric)
from .lstm import (B, C_STATE, H_STATE, LN, P, PROJ_B, PROJ_W, R, STACKED, W, X, lstm_shape,
                   stacked_weights)
from .hybrid_row import RowProduct
from .registry import register
from .requantize import exact_rounding
from .rnn_cells import LstmSteps, OutputRows, StackedLstm, narrow

class _RowQuantizedMatmul:
    """Accumulates (q . W^T) * (row_scale * weight_scale) into a float result, for rows
    quantized by BatchQuantizeFloats (one weight scale: LSTM weights are per tensor)."""

    def __init__(self, w: np.ndarray, scale: float, asymmetric: bool):
        self.matmul = _IntegerMatmul(w.T, (0,), 255 if asymmetric else 127)
        self.col_sums = w.astype(np.float64).sum(axis=1)
        self.scale = np.float32(scale)
        self.asymmetric = asymmetric

    def accumulate(self, q, row_scales, offsets, acc, result) -> None:
        self.matmul(q, acc, offsets if self.asymmetric else None, self.col_sums)
        np.multiply(acc, (row_scales * self.scale)[:, None], out=acc)
        np.add(result, acc, out=result)


@register("UNIDIRECTIONAL_SEQUENCE_LSTM", "hybrid")
def unidirectional_sequence_lstm(node):
    time_major, batch, n_cell, n_output, cifg = lstm_shape(node)
    opts = node.options
    gates = "fco" if cifg else "ifco"
    asymmetric = bool(getattr(opts, "asymmetric_quantize_inputs", False))

    def weights(k):
        w, scales, _ = _int8_weights(node, k)
        if scales.size != 1:
            raise node.fail(f"hybrid LSTM weights (input {k}) take one scale, got "
                            f"{scales.size}")
        return w, float(scales[0])

    x_mm = {g: _RowQuantizedMatmul(*weights(W[g]), asymmetric) for g in gates}
    h_mm = {g: _RowQuantizedMatmul(*weights(R[g]), asymmetric) for g in gates}
    n_input = node.input(W["f"]).shape[1]
    peephole = {}
    for g, k in P.items():
        if g in gates and node.optional_input(k) is not None:
            w, scale = weights(k)     # VectorScalarMultiply: int8 * scale in float32
            peephole[g] = dequantized_weights(w, np.float32(scale), 0)
    bias = {g: _lstm_float(node, B[g]) for g in gates}
    use_ln = len(node.inputs) == 24 and node.optional_input(LN["f"]) is not None
    ln = {g: _lstm_float(node, LN[g]) for g in gates} if use_ln else {}
    proj = None
    if node.optional_input(PROJ_W) is not None:
        proj = _RowQuantizedMatmul(*weights(PROJ_W), asymmetric)
    proj_bias = _lstm_float(node, PROJ_B) if node.optional_input(PROJ_B) is not None else None
    act = _activation(node, opts.fused_activation_function, True) or (lambda v: None)
    cell_clip, proj_clip = float(opts.cell_clip), float(opts.proj_clip)
    sigmoid = {g: sigmoid_ for g in gates}
    layer_norm = _lstm_layer_norm
    if exact_rounding(node):   # LiteRT's activations: Eigen's (eigen_math.py)
        act, sigmoid = _reference_activations(node, gates, batch * n_cell, act, time_major)
        layer_norm = _reference_layer_norm
    if not exact_rounding(node) and not peephole and not use_ln and proj is None and \
            int(opts.fused_activation_function or 0) == TANH:
        return _default_sequence(node, gates, {g: weights(W[g]) for g in gates},
                                 {g: weights(R[g]) for g in gates}, bias, asymmetric,
                                 time_major, batch, n_cell, cell_clip)

    def quantized(rows: np.ndarray, width: int):
        q, half = np.empty((batch, width), F32), np.empty((batch, width), F32)
        sf, zp = np.empty(batch, F32), np.zeros(batch, F32)
        if asymmetric:
            quantize_rows_asymmetric(rows, q, sf, zp, half)
        else:
            quantize_rows_symmetric(rows, q, sf, half)
        return q, sf, zp

    def run(*arrays):
        ins, out = arrays[:len(node.inputs)], arrays[-1]
        xs = ins[X] if time_major else ins[X].transpose(1, 0, 2)
        outs = out if time_major else out.transpose(1, 0, 2)
        h, c = ins[H_STATE], ins[C_STATE]
        acc = np.empty((batch, n_cell), F32)
        for t in range(xs.shape[0]):
            xq = quantized(np.ascontiguousarray(xs[t]), n_input) if np.any(xs[t]) else None
            hq = quantized(h, n_output) if np.any(h) else None
            value = {}
            for g in gates:
                gate = np.zeros((batch, n_cell), F32) if use_ln else \
                    np.broadcast_to(bias[g], (batch, n_cell)).copy()
                if xq is not None:
                    x_mm[g].accumulate(xq[0], xq[1], xq[2], acc, gate)
                if hq is not None:
                    h_mm[g].accumulate(hq[0], hq[1], hq[2], acc, gate)
                if g == "o":        # the cell state is updated before the output gate
                    _lstm_cell(value, c, cifg, cell_clip)
                if g in peephole:
                    gate += peephole[g] * c
                if use_ln:
                    layer_norm(gate, ln[g])
                    gate += bias[g]
                (act if g == "c" else sigmoid[g])(gate)
                value[g] = gate
            hidden = c.copy()
            act(hidden)
            hidden *= value["o"]
            if proj is not None:
                state = np.zeros((batch, proj.col_sums.size), F32) if proj_bias is None else \
                    np.broadcast_to(proj_bias, (batch, proj.col_sums.size)).copy()
                if np.any(hidden):
                    q, sf, zp = quantized(hidden, n_cell)
                    proj.accumulate(q, sf, zp, np.empty_like(state), state)
                if proj_clip > 0:
                    clip_(state, -proj_clip, proj_clip)
                hidden = state
            h[...] = hidden
            outs[t] = hidden
    return run


def _reference_activations(node, gates: str, size: int, act, time_major: bool) -> tuple:
    """(the cell's activation, each sigmoid gate's) as LiteRT's LstmStepHybrid applies them
    (BUILTIN_REF): Eigen's tanh (ApplyTanhToVector) and logistic (ApplySigmoidToVector) over
    the gate's values in the scratch buffer, laid out gate after gate (i, c, f, o; c, f, o with
    CIFG) [batch * n_cell] apart from an aligned start: each gate's offset decides which of its
    values Eigen takes by the scalar path. A batch-major LSTM steps one batch row at a time
    (n_batch = 1, row b at its gate's offset + b * n_cell: each row its own Eigen vector), a
    time-major one all rows at once."""
    if activation_code(node.options) == TANH:
        act = eigen_tanh_
    order = "cfo" if gates == "fco" else "icfo"
    offsets = {g: order.index(g) * size for g in gates}

    def sigmoid(offset):
        if time_major:
            return lambda v: eigen_logistic_(v, offset)

        def rows(v):
            for b, row in enumerate(v):
                eigen_logistic_(row, offset + b * row.size)
        return rows
    return act, {g: sigmoid(offsets[g]) for g in gates}


def _reference_layer_norm(x: np.ndarray, coef: np.ndarray) -> None:
    """MeanStddevNormalization in the reference kernel's order, then the coefficients: per row
    the sum and the squared deviations summed from 0 in column order, divided by the size,
    (x - mean) * (1 / sqrt(variance + 1e-8))."""
    n = x.shape[-1]
    total = np.zeros(x.shape[:-1], F32)
    for i in range(n):
        total += x[..., i]
    mean = (total / np.float32(n)).astype(F32)
    diff = (x - mean[..., None]).astype(F32)
    sq = np.zeros(x.shape[:-1], F32)
    for i in range(n):
        sq += diff[..., i] * diff[..., i]
    variance = (sq / np.float32(n)).astype(F32)
    inv = (np.float32(1) / np.sqrt(variance + np.float32(1e-8))).astype(F32)
    np.multiply(diff, inv[..., None], out=x)
    x *= coef


def _lstm_float(node, k: int):
    t = node.input(k)
    if t.type_name != "float32" or t.data is None:
        raise node.fail(f"input {k} ({t.name!r}) must be a constant float32 tensor in a hybrid "
                        "LSTM")
    return t.data.astype(F32)


def _lstm_cell(value: dict, c: np.ndarray, cifg: bool, clip: float) -> None:
    """UpdateLstmCellFloat: c = f * c + g * i (i = 1 - f with CIFG), clipped."""
    np.multiply(value["f"], c, out=c)
    i_gate = (np.float32(1) - value["f"]) if cifg else value["i"]
    c += value["c"] * i_gate
    if clip > 0:
        clip_(c, -clip, clip)


def _lstm_layer_norm(x: np.ndarray, coef: np.ndarray) -> None:
    mean = x.mean(axis=-1, keepdims=True)
    x -= mean
    var = (x * x).mean(axis=-1, keepdims=True)
    x /= np.sqrt(var + 1e-8)
    x *= coef


def _default_sequence(node, gates, w_x, w_h, bias, asymmetric, time_major, batch, n_cell,
                      cell_clip):
    """The default resolver's dynamic-range LSTM (no peepholes, projection or layer norm; TANH),
    with the float LSTM's structure: the input projection of every step in one GEMM (all the
    rows quantized and dequantized at once: LiteRT quantizes each step's rows alone, the same
    numbers), then per step one product with the recurrent weights (hybrid_row.RowProduct: h's
    rows quantized and dequantized) and rnn_cells.LstmSteps' cell. Weights dequantized once,
    here, the sigmoid gates' columns scaled by 0.5 (its LOGISTIC as 0.5 + 0.5 tanh). Float32
    rounding from LstmStepHybrid's (whose integer sums are exact, then scaled), as the default
    hybrid kernels; BUILTIN_REF runs the exact loop."""
    x = node.input(X).shape
    steps, n_input = (x[0] if time_major else x[1]), x[2]
    if batch == 1 and len(gates) == 4 and narrow(n_input, n_cell):
        return _stacked(w_x, w_h, bias, asymmetric, steps, n_input, n_cell, cell_clip,
                        time_major)
    half = np.concatenate([np.full(n_cell, 1.0 if g == "c" else 0.5, F32) for g in gates])

    def stacked(ws):   # the gates' int8 weights one above the other, each row's scale
        w = np.concatenate([ws[g][0] for g in gates])
        return w, np.repeat(np.array([ws[g][1] for g in gates], F32), n_cell)
    wx, sx = stacked(w_x)
    w_in = np.ascontiguousarray(dequantized_weights(wx, sx, 0).T * half, F32)   # [in, G*n]
    b_in = (np.concatenate([bias[g] for g in gates]) * half).astype(F32)
    wh, sh = stacked(w_h)
    recurrent = RowProduct(wh, sh, None, asymmetric, half, rows=batch)
    width = len(gates) * n_cell
    rows = steps * batch
    xq = np.empty((rows, n_input), F32)
    xw = np.zeros(tuple(x[:2]) + (width,), F32)   # the input's layout: [time, batch] or back
    xw_rows = [xw[t] if time_major else xw[:, t] for t in range(steps)]
    recurrence = LstmSteps.stacked(gates, n_cell, batch, half, cell_clip)
    out_rows = OutputRows(time_major)

    def run(*arrays):
        dequantize_rows(np.ascontiguousarray(arrays[X], F32).reshape(rows, n_input), xq,
                        asymmetric)
        np.matmul(xq, w_in, out=xw.reshape(rows, width))   # every step's input product
        np.add(xw, b_in, out=xw)
        h = arrays[H_STATE]
        np.copyto(h, recurrence(h, arrays[C_STATE], out_rows(arrays[-1]), xw_rows,
                                recurrent=recurrent))
    return run


def _stacked(w_x, w_h, bias, asymmetric, steps, n_input, n_cell, cell_clip, time_major):
    """The batch-1 default dynamic-range LSTM over a narrow input: QuantizedStackedLstm over
    the weights dequantized once, x's rows quantized and dequantized at once per invoke, h's
    each step, as _default_sequence computes them."""
    def dequantized(ws):
        return {g: dequantized_weights(ws[g][0], np.float32(ws[g][1]), 0) for g in STACKED}
    m = stacked_weights(dequantized(w_x), dequantized(w_h), bias, n_cell)
    recurrence = QuantizedStackedLstm(m, n_cell, steps, cell_clip, asymmetric)
    xq = np.empty((steps, n_input), F32)
    xq_rows = xq[:, None]   # [steps, 1, n_input]: time-major

    def run(*arrays):
        dequantize_rows(np.ascontiguousarray(arrays[X], F32).reshape(steps, n_input), xq,
                        asymmetric)
        out = arrays[-1]
        recurrence(xq_rows, arrays[H_STATE], arrays[C_STATE],
                   out if time_major else out.swapaxes(0, 1))
    return run


_F32 = struct.Struct("f")


class QuantizedStackedLstm(StackedLstm):
    """rnn_cells.StackedLstm (batch 1) whose h goes into v's next row quantized and dequantized
    as the default resolver's hybrid product takes it: hybrid.dequantize_row's numbers, inline
    in the step loop (its two frames a step, the statistics' conversions and branches: ~0.6 µs
    of a step's ~4): the bounds by argmin/argmax, the scale, 1/scale (and the asymmetric zero
    point) in Python floats, then x * inv, rint, (a clamp where the rounded bounds pass the
    range), * scale (h = o tanh(c) lies in [-1, 1]: rmax - rmin never overflows float32)."""

    def __init__(self, m: np.ndarray, n_cell: int, steps: int, cell_clip: float,
                 asymmetric: bool):
        super().__init__(m, n_cell, steps, cell_clip, own_h=True)
        self.asymmetric = asymmetric
        self.scalars = (np.zeros((), F32), np.zeros((), F32))   # scale, 1/scale

    def _start(self, h0: np.ndarray) -> None:
        dequantize_row(h0, self.v[0, :self.n], self.asymmetric, h0.min(), h0.max(),
                       self.scalars)

    def _steps(self) -> None:
        p, tc, half = self.p, self.tc, self.half
        zg, zs, fi, gc, o, cz, p_ig, p_fc = self.views
        tanh, mul, add, rint, clip = np.tanh, np.multiply, np.add, np.rint, self.clip
        scale32, inv32 = self.scalars
        asymmetric, pack, unpack, trunc = self.asymmetric, _F32.pack, _F32.unpack, math.trunc
        zp = 0.0
        for dot, operand, row, v_next in self.loop:
            dot(operand, zg)
            tanh(zg, zg)
            mul(zs, half, zs)
            add(zs, half, zs)
            mul(fi, gc, p)           # [i * g, f * c]
            add(p_ig, p_fc, cz)      # c = f * c + i * g
            if clip is not None:
                _clip(cz, clip[0], clip[1], cz)
            tanh(cz, tc)
            mul(o, tc, row)
            # hybrid.dequantize_row(row, v_next, asymmetric, lo, hi), inline
            lo, hi = row.item(row.argmin()), row.item(row.argmax())
            if asymmetric:
                # min(lo, 0.0), max(hi, 0.0), as the builtins take them (a NaN stays)
                rmin, rmax = 0.0 if 0.0 < lo else lo, 0.0 if 0.0 > hi else hi
                if rmin == rmax:
                    scale = f_inv = 1.0
                    zp = 0.0
                else:
                    wide = unpack(pack(rmax - rmin))[0] / 255.0
                    scale = unpack(pack(wide))[0]
                    f_inv = 1.0 / scale
                    # hybrid._zero_point(rmin, rmax, wide); |rmin / wide| = -(rmin / wide),
                    # |rmax / wide| = rmax / wide (rmin <= 0 <= rmax)
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
                r = max(-lo, hi)
                scale, f_inv = (1.0, 127.0) if r == 0 else (r / 127.0, 127.0 / r)
            scale32[()], inv32[()] = scale, f_inv
            mul(row, inv32, v_next)
            rint(v_next, v_next)
            if asymmetric and (lo * f_inv + zp < _LOW or hi * f_inv + zp > _HIGH):
                clip_(v_next, -128.0 - zp, 127.0 - zp)
            mul(v_next, scale32, v_next)
