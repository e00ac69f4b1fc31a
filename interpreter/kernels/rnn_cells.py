"""What the recurrent sequence kernels share (UNIDIRECTIONAL_SEQUENCE_LSTM/RNN in lstm.py and
rnn.py, the fused Keras loop in rnn_loop.py): the LSTM's steps, one copy (LstmSteps; StackedLstm
over a narrow input, any batch), the Keras GRU's over a narrow input (StackedGru), and the
output rows each time step writes its h into. Small on purpose: lstm.py and rnn.py import it
without loading the Keras-loop matcher or the hybrid kernels.
"""
from __future__ import annotations

import numpy as np

from .common import bounds, clip as _clip, raw
from .geometry import batch_major

_copyto = raw(np.copyto)   # no dispatcher frame


def narrow(n_input: int, units: int) -> bool:
    """Whether a sequence's step runs stacked, one product of [h, x_t, 1] with both
    projections' weights (StackedLstm, StackedGru, rnn._stacked_tanh), rather than the input
    projection of every step in one GEMM and a product of h and a sum a step: measured faster
    up to twice as many inputs as units (batch 1 and 4, 20 steps, 16-64 inputs, 24-32 units: a
    call saved a step outweighs the wider product on rows this small)."""
    return n_input <= 2 * units


class OutputRows:
    """The [batch, units] views of a sequence output [batch, time, units] (time-major: [time,
    batch, units]) step t writes its h into, made once per output array (the plan's arrays
    stay from invoke to invoke): no slicing and no copy per step."""

    def __init__(self, time_major: bool):
        self.time_major = time_major
        self.out, self.rows = None, ()

    def __call__(self, out: np.ndarray) -> tuple:
        if out is not self.out:
            self.out = out
            self.rows = tuple(batch_major(out, self.time_major)[:, t] for t in range(
                out.shape[0 if self.time_major else 1]))
        return self.rows


class LstmSteps:
    """The recurrence of a sequence LSTM whose input projections are made (UNIDIRECTIONAL_
    SEQUENCE_LSTM float in lstm.py, dynamic-range in hybrid_lstm.py, the fused Keras loop in
    rnn_loop.py): the cell's buffers, made once for `batch` rows of the gates z
    [batch, width] (`columns`: each gate's (lo, hi) columns, i None with CIFG; `half`: [width],
    0.5 on the sigmoid gates, 1 on g), then per step one recurrent product into z, the step's
    input projection added, then the cell (inline: no frame a step): LOGISTIC as 0.5 + 0.5
    tanh(x / 2) (the sigmoid columns of z come scaled by 0.5), one tanh for every gate, z * mul
    + add; c = f * c + i * g (i = 1 - f with CIFG; clipped to cell_clip), h = o * tanh(c) into
    the step's output row, read by the next. `hard`: Keras's hard_sigmoid gates instead,
    relu6(z + shift) * scale (z unscaled; per-column arrays shift, low, high, scale, identities
    on g's columns). (Outputs as positional arguments: a tenth of a ufunc's call cost on rows
    this small, against out=.)"""

    def __init__(self, columns: dict, batch: int, half: np.ndarray, cell_clip: float = 0.0,
                 hard=None):
        width = len(half)
        n_cell = columns["f"][1] - columns["f"][0]
        # Full-shape operands: broadcasting a [width] vector costs more than these rows'
        # arithmetic.
        self.mul = np.ascontiguousarray(np.broadcast_to(half, (batch, width)), np.float32)
        self.add = np.where(self.mul == 0.5, 0.5, 0.0).astype(np.float32)
        self.ones = np.ones((batch, n_cell), np.float32)
        self.tmp = np.zeros((batch, n_cell), np.float32)
        self.z = np.zeros((batch, width), np.float32)
        self.views = tuple(None if columns.get(g) is None else self.z[:, slice(*columns[g])]
                           for g in "ifgo")
        # clamps' bounds as 0-d arrays: half a numpy scalar's call cost (common.bounds)
        self.clip = None if cell_clip <= 0 else bounds(-cell_clip, cell_clip)
        self.hard = hard

    @classmethod
    def stacked(cls, gates, n_cell: int, batch: int, half: np.ndarray, cell_clip: float):
        """For gates one above the other in the order `gates` (of "ifco"; "c" is g)."""
        columns = {"g" if g == "c" else g: (k * n_cell, (k + 1) * n_cell)
                   for k, g in enumerate(gates)}
        return cls(columns, batch, half, cell_clip)

    def __call__(self, h, c, rows, xw_rows, r=None, recurrent=None):
        """The steps from h (read only) and c (updated) into `rows` (one [batch, n] array a
        step, each read by the next); returns the last. z = h r (the array's dot method: a
        fifth of np.matmul's call cost on one row) where r is given, else recurrent(h, z)."""
        z, mul, add, tmp, ones, clip, hard = (self.z, self.mul, self.add, self.tmp, self.ones,
                                              self.clip, self.hard)
        i, f, g, o = self.views
        tanh, multiply, plus = np.tanh, np.multiply, np.add
        prev = h
        for h_next, xt in zip(rows, xw_rows):
            if r is not None:
                prev.dot(r, z)
            else:
                recurrent(prev, z)
            plus(z, xt, z)
            if hard is None:   # LOGISTIC as 0.5 + 0.5 tanh: one tanh for every gate
                tanh(z, z)
                multiply(z, mul, z)
                plus(z, add, z)
            else:   # hard_sigmoid gates: relu6(z + shift) * scale, then tanh(g)
                plus(z, hard[0], z)
                _clip(z, hard[1], hard[2], z)
                multiply(z, hard[3], z)
                tanh(g, g)
            multiply(f, c, c)
            if i is None:
                np.subtract(ones, f, tmp)
                multiply(tmp, g, tmp)
            else:
                multiply(i, g, tmp)
            plus(c, tmp, c)
            if clip is not None:
                _clip(c, clip[0], clip[1], c)
            tanh(c, tmp)
            multiply(o, tmp, h_next)
            prev = h_next
        return prev


class StackedRnn:
    """A simple RNN, h_t = act(h_{t-1} R + x_t W + b) with TANH or RELU (the Keras SimpleRNN
    loop; UNIDIRECTIONAL_SEQUENCE_RNN has rnn._stacked_tanh, views in its op's layouts): row t
    of v [steps + 1, batch, width] is [h_{t-1}, x_t, 1], one product with `m` = [[R], [W],
    [b]] and the activation into v's next row: two calls a step (the loop's own: three)."""

    def __init__(self, m: np.ndarray, n: int, steps: int, relu: bool, batch: int = 1):
        width = m.shape[0]
        self.n, self.steps, self.m, self.relu = n, steps, m, relu
        self.v = np.zeros((steps + 1, batch, width), np.float32)
        self.v[..., -1] = 1
        self.x, self.h = self.v[:steps, :, n:width - 1], self.v[1:, :, :n]
        self.product = np.zeros((batch, n), np.float32)
        self.zero = np.zeros((), np.float32)
        self.loop = [(self.v[t].dot, self.v[t + 1, :, :n]) for t in range(steps)]

    def __call__(self, x: np.ndarray, h: np.ndarray, out, h_out: np.ndarray) -> None:
        """x [steps, batch, n_in] (time-major), h [batch, n] (read) into out [steps, batch, n]
        (None: only the state) and h_out."""
        if self.steps == 0:
            _copyto(h_out, h)
            return
        _copyto(self.x, x)
        _copyto(self.v[0, :, :self.n], h)
        m, product = self.m, self.product
        if self.relu:
            maximum, zero = np.maximum, self.zero
            for dot, row in self.loop:
                dot(m, product)
                maximum(product, zero, out=row)   # (positional out: deprecated for maximum)
        else:
            tanh = np.tanh
            for dot, row in self.loop:
                dot(m, product)
                tanh(product, row)
        if out is not None:
            _copyto(out, self.h)
        _copyto(h_out, self.h[-1])


class StackedLstm:
    """A sequence LSTM (no CIFG, projection or peepholes; TANH) whose step is one product and
    seven ufuncs (LstmSteps: nine besides the product and the input projection's sum). Row t
    of v is [h_{t-1}, x_t, 1], so one product with `m` = [[R^T], [W^T], [b]] (the columns in
    the order o, i, f, g, the sigmoid gates' scaled by 0.5: LOGISTIC as 0.5 + 0.5 tanh) gives
    every pre-activation; the input projection and the bias are no pass of their own (the sum's
    order is BLAS's). z holds [o, i, f, g, c]: one multiply makes [i * g, f * c] from its
    neighbouring pairs, one add the new c in place. Batch 1 keeps v [steps + 1, width] and z
    [5n] (a GEMV v_t m); a batch keeps them gate-major, v [steps + 1, width, batch] and z
    [5n, batch] (the product m^T v_t): every gate a contiguous block for every batch row (the
    batch-major [batch, 5n] would make each gate a strided view, ~3x a contiguous ufunc's call
    cost). `own_h`: h's rows apart from v's, whose h a subclass fills otherwise (_start,
    _steps: hybrid_lstm.QuantizedStackedLstm quantizes and dequantizes it there). `hard`: the
    sigmoid gates are Keras's hard_sigmoid, one clamp of their columns to these bounds (m's
    columns scaled and shifted by the caller), tanh on g alone: six ufuncs a step."""

    def __init__(self, m: np.ndarray, n_cell: int, steps: int, cell_clip: float,
                 batch: int = 1, own_h: bool = False, hard=None):
        n = n_cell
        width = m.shape[0]
        lanes = () if batch == 1 else (batch,)   # the trailing batch axis, gate-major
        self.n, self.steps, self.m, self.batch = n, steps, m, batch
        self.v = np.zeros((steps + 1, width) + lanes, np.float32)
        self.v[:, -1] = 1
        self.x = self.v[:steps, n:width - 1]
        self.z = np.zeros((5 * n,) + lanes, np.float32)
        self.half = np.full((3 * n,) + lanes, 0.5, np.float32)
        self.p = np.zeros((2 * n,) + lanes, np.float32)
        self.tc = np.zeros((n,) + lanes, np.float32)
        self.clip = None if cell_clip <= 0 else bounds(-cell_clip, cell_clip)
        # Keras's hard_sigmoid gates, relu6(z + shift) * scale, as clip(z, 0, 6 scale) of m's
        # sigmoid columns * scale with shift * scale in their bias (the caller's): its bounds
        self.hard = None if hard is None else bounds(*hard)
        # the output takes h's rows in one copy
        self.h = np.zeros((steps, n) + lanes, np.float32) if own_h else self.v[1:, :n]
        z, p = self.z, self.p
        zg = z[:4 * n]
        if batch == 1:   # (the product's bound method, its operand): v_t . m
            products = [(self.v[t].dot, m) for t in range(steps)]
        else:            # m^T . v_t
            mt = np.ascontiguousarray(m.T)
            products = [(mt.dot, self.v[t]) for t in range(steps)]
        self.loop = [(dot, operand, self.h[t], self.v[t + 1, :n])
                     for t, (dot, operand) in enumerate(products)]
        self.views = (zg, z[:3 * n], z[n:3 * n], z[3 * n:], z[:n], z[4 * n:], p[:n], p[n:])

    def __call__(self, x: np.ndarray, h: np.ndarray, c: np.ndarray, out, h_out=None) -> None:
        """x [steps, batch, n_in] (time-major; dequantized where quantized), the states h (read)
        and c [batch, n] (updated) into out [steps, batch, n] (time-major; None: only the
        states) and h_out (default h) [batch, n]: any strides."""
        if self.steps == 0:   # an empty sequence: the states stay
            if h_out is not None and h_out is not h:
                _copyto(h_out, h)
            return
        cz, h_out = self.views[5], h if h_out is None else h_out
        if self.batch == 1:   # [..., 1, n] as [..., n]
            x, h, c, h_out = x[:, 0], h[0], c[0], h_out[0]
            out = None if out is None else out[:, 0]
        else:                 # gate-major: the batch last
            x, h, c, h_out = x.transpose(0, 2, 1), h.T, c.T, h_out.T
            out = None if out is None else out.transpose(0, 2, 1)
        _copyto(self.x, x)
        self._start(h)
        _copyto(cz, c)
        self._steps()
        if out is not None:
            _copyto(out, self.h)
        _copyto(h_out, self.h[-1])
        _copyto(c, cz)

    def _start(self, h0: np.ndarray) -> None:
        """h_{-1} into v's first row."""
        _copyto(self.v[0, :self.n], h0)

    def _steps(self) -> None:
        """The recurrence over v, z and the h rows (no frame a step)."""
        p, tc, half = self.p, self.tc, self.half
        zg, zs, fi, gc, o, cz, p_ig, p_fc = self.views
        tanh, mul, add, clip, hard = np.tanh, np.multiply, np.add, self.clip, self.hard
        g = zg[3 * self.n:]
        for dot, operand, row, _ in self.loop:
            dot(operand, zg)
            if hard is None:   # LOGISTIC as 0.5 + 0.5 tanh: one tanh for every gate
                tanh(zg, zg)
                mul(zs, half, zs)
                add(zs, half, zs)
            else:              # hard_sigmoid: one clamp of the sigmoid gates, tanh(g)
                _clip(zs, hard[0], hard[1], zs)
                tanh(g, g)
            mul(fi, gc, p)           # [i * g, f * c]
            add(p_ig, p_fc, cz)      # c = f * c + i * g
            if clip is not None:
                _clip(cz, clip[0], clip[1], cz)
            tanh(cz, tc)
            mul(o, tc, row)


class StackedGru:
    """A Keras GRU (sigmoid gates z and r, tanh candidate c; h' = z h + (1 - z) c) whose step
    is one product of v_t = [x_t, 1, h_{t-1}] with `m` and eight ufuncs (the fused loop's own
    steps: 12, and an input projection). m's columns are five blocks of n: [z, z, r, hc, xc],
    the sigmoid ones scaled by 0.5 (LOGISTIC as 0.5 + 0.5 tanh); hc is h's candidate term
    (reset_after: h U_c + its bias; reset_before: zero columns, r * h goes there) and xc x's
    (with the candidate's biases). One tanh, one multiply by [0.5, -0.5, 0.5] and one add of
    0.5 make [z, 1 - z, r]; the candidate c = tanh(xc + r * hc), or with reset_before
    tanh([r * h, xc] [[U_c], [I]]) (`u`: U_c, [n, n]; xc's sum in the second product), lands
    in v_t right after h_{t-1}, so one multiply of [z, 1 - z] by [h_{t-1}, c] and one add give
    h_t, written into v_{t+1}. (A zero block still multiplies its inputs: an inf in x makes hc
    NaN, and with reset_before one in xc makes every c NaN, where the unfused loop's would
    keep it to its column; an inf in x reaches every gate's sum there too: rnn_loop.Sequence
    runs its own steps again when h comes out NaN.) Batch 1 keeps v [steps + 1, width]
    (row-major GEMV), a batch v [steps + 1, width, batch] (gate-major, as StackedLstm)."""

    def __init__(self, m: np.ndarray, n: int, steps: int, u=None, batch: int = 1,
                 own_h: bool = False):
        n_in = m.shape[0] - n - 1
        lanes = () if batch == 1 else (batch,)
        self.n, self.n_in, self.steps, self.batch = n, n_in, steps, batch
        self.v = np.zeros((steps + 1, n_in + 1 + 2 * n) + lanes, np.float32)
        self.v[:, n_in] = 1
        self.x = self.v[:steps, :n_in]
        self.y = np.zeros((5 * n,) + lanes, np.float32)
        k = np.repeat(np.array([0.5, -0.5, 0.5], np.float32), n)   # [z, 1 - z, r] from tanh
        self.k = np.ascontiguousarray(np.broadcast_to(k.reshape((3 * n,) + (1,) * len(lanes)),
                                                      (3 * n,) + lanes))
        self.half = np.full((3 * n,) + lanes, 0.5, np.float32)
        self.r2 = np.zeros((2 * n,) + lanes, np.float32)
        y, v = self.y, self.v
        h_slot = slice(n_in + 1, n_in + 1 + n)
        # [h_{t-1}, c_t] rows: v's own, or with `own_h` (v's h taken quantized by a subclass)
        # a float buffer of their own
        hc_rows = np.zeros((steps + 1, 2 * n) + lanes, np.float32) if own_h \
            else v[:, n_in + 1:]
        self.hc_rows = hc_rows
        self.h = hc_rows[1:, :n]
        width = n_in + 1 + n
        if batch == 1:
            first = [(v[t, :width].dot, m) for t in range(steps)]
        else:
            mt = np.ascontiguousarray(m.T)
            first = [(mt.dot, v[t, :width]) for t in range(steps)]
        self.reset_before = u is not None
        if u is None:
            second = [(None, None)] * steps
        else:   # [r * h, xc] times [[U_c], [I]]: xc's sum in the product
            u2 = np.concatenate([np.asarray(u, np.float32), np.eye(n, dtype=np.float32)])
            if batch == 1:
                second = [(y[3 * n:].dot, u2)] * steps
            else:
                second = [(np.ascontiguousarray(u2.T).dot, y[3 * n:])] * steps
        # per step: the first product, the second (reset_before), h_{t-1}, [h_{t-1}, c], c,
        # where h_t goes, v's next h
        self.loop = [(d1, o1, d2, o2, hc_rows[t, :n], hc_rows[t], hc_rows[t, n:],
                      hc_rows[t + 1, :n], v[t + 1, h_slot])
                     for t, ((d1, o1), (d2, o2)) in enumerate(zip(first, second))]
        self.h_slot = h_slot
        self.views = (y[:3 * n], y[:2 * n], y[2 * n:3 * n], y[3 * n:4 * n], y[4 * n:])

    def __call__(self, x: np.ndarray, h: np.ndarray, out, h_out: np.ndarray) -> None:
        """x [steps, batch, n_in] (time-major), h [batch, n] (read) into out [steps, batch, n]
        (time-major; None: only the state) and h_out [batch, n]: any strides."""
        if self.steps == 0:
            _copyto(h_out, h)
            return
        if self.batch == 1:   # as StackedLstm's
            x, h, h_out = x[:, 0], h[0], h_out[0]
            out = None if out is None else out[:, 0]
        else:
            x, h, h_out = x.transpose(0, 2, 1), h.T, h_out.T
            out = None if out is None else out.transpose(0, 2, 1)
        _copyto(self.x, x)
        self._start(h)
        self._steps()
        if out is not None:
            _copyto(out, self.h)
        _copyto(h_out, self.h[-1])

    def _start(self, h0: np.ndarray) -> None:
        """h_{-1} into v's first row."""
        _copyto(self.v[0, self.h_slot], h0)

    def _steps(self) -> None:
        """The recurrence over v, y and the [h, c] rows (no frame a step)."""
        gates, pair, r, hc, xc = self.views
        k, half, r2, n, y = self.k, self.half, self.r2, self.n, self.y
        r2_a, r2_b = r2[:n], r2[n:]
        tanh, mul, add = np.tanh, np.multiply, np.add
        if self.reset_before:
            for d1, o1, d2, o2, h_prev, hq, c, h_next, _ in self.loop:
                d1(o1, y)
                tanh(gates, gates)
                mul(gates, k, gates)
                add(gates, half, gates)     # [z, 1 - z, r]
                mul(r, h_prev, hc)          # r * h
                d2(o2, c)                   # (r * h) U_c + xc
                tanh(c, c)
                mul(pair, hq, r2)           # [z h, (1 - z) c]
                add(r2_a, r2_b, h_next)
        else:
            for d1, o1, _, _, _, hq, c, h_next, _ in self.loop:
                d1(o1, y)
                tanh(gates, gates)
                mul(gates, k, gates)
                add(gates, half, gates)     # [z, 1 - z, r]
                mul(r, hc, c)               # r * (h U_c + b)
                add(c, xc, c)
                tanh(c, c)
                mul(pair, hq, r2)           # [z h, (1 - z) c]
                add(r2_a, r2_b, h_next)
