"""The fused sequence kernel of a Keras LSTM/GRU/SimpleRNN WHILE loop (matched by while_rnn.py).

Per run: the input projection of all the steps the loop takes in one GEMM (with dynamic-range
weights, one call of the body's FULLY_CONNECTED kernel prepared for all the steps' rows: the
default resolver's, weights dequantized at prepare); per step: one matmul with the recurrent
weights (dynamic-range: hybrid_row.py's one-row product, the default kernel's numbers bit for
bit, or the kernel itself for a batch), then the gates in whole-array ufuncs on views made once.
A float LSTM, GRU or SimpleRNN over a narrow input (rnn_cells.narrow) whose loop runs the
whole sequence takes rnn_cells.StackedLstm / StackedGru / StackedRnn instead (both projections
and biases stacked: one product of [h, x_t, 1] a step, no input projection), a batch-1
dynamic-range LSTM or GRU hybrid_lstm.QuantizedStackedLstm / hybrid_row.QuantizedStackedGru
(x's rows dequantized once, h's inline a step).

LOGISTIC is 0.5 + 0.5 tanh(x / 2) (an identity; at most ~3e-8 absolute from the LOGISTIC kernel):
the sigmoid columns of both projections are scaled by 0.5 (exact) before the sum, one tanh covers
every gate, and `mul`/`add` map the sigmoid columns back. The cell's products and sums are the
body's (the bias joins the input projection before the recurrent term is added): within an ulp
or so of the op-by-op loop.
"""
from __future__ import annotations

import numpy as np

from .hybrid_row import row_product
from .rnn_cells import LstmSteps, StackedGru, StackedLstm, StackedRnn, narrow

F32 = np.float32
_sum = np.add.reduce


class Sequence:
    """`run(values)` gives the final loop variables, or None when the steps do not fit the
    sequence (the WHILE then runs op by op and reports what goes wrong)."""

    def __init__(self, cell, proj, bounds, body):
        self.cell, self.bounds = cell, bounds
        c = cell
        self.shapes = shapes = [tuple(body.infos[t].shape) for t in body.sg.inputs]
        batch, units = shapes[c.h]
        w_x, b_x, self.fc_x = proj["x"]
        w_h, b_h, self.fc_h = proj["h"]
        self.scale_x, self.scale_h = np.ones(len(b_x), F32), np.ones(len(b_h), F32)
        hard = getattr(c, "hard_sigmoid", None) if c.kind == "lstm" else None
        for name, (lo, hi) in c.gates.items():
            if name[0] in "ifozr" and hard is None:   # LOGISTIC as 0.5 + 0.5 tanh(x / 2)
                if c.kind == "lstm" or name[1] == "x":
                    self.scale_x[lo:hi] = 0.5
                if c.kind == "lstm" or name[1] == "h":
                    self.scale_h[lo:hi] = 0.5
        if c.kind != "gru":
            b_x = b_x + c.extra_bias
        self.w_x = None if w_x is None else np.ascontiguousarray(w_x.T, F32)
        self.w_h = None if w_h is None else \
            np.ascontiguousarray(w_h.T.astype(F32) * self.scale_h, F32)
        self.b_x = b_x.astype(F32)
        self.b_h = (b_h * (self.scale_h if w_h is not None else 1)).astype(F32)
        self.has_b_h = bool(self.b_h.any())
        # Operands of the per-step ufuncs have the full [batch, width] shape: broadcasting a
        # [width] vector (or a Python float) costs more than the arithmetic on rows this small.
        self.b_h = np.ascontiguousarray(np.broadcast_to(self.b_h, (batch, len(b_h))))
        self.scale_h_rows = np.ascontiguousarray(np.broadcast_to(self.scale_h, (batch, len(b_h))))
        steps = shapes[c.x][0]
        x_op = None if self.fc_x is None else self.fc_x[1]
        if self.fc_x is not None:   # the body's own kernel, prepared again for all the steps
            self.fc_x = _all_steps(body, x_op, steps * batch)
            self.xp_all = np.zeros((steps, batch, len(b_x)), F32)
        self.row_h = None
        if self.fc_h is not None:
            step, op = self.fc_h
            self.fc_h = step
            if batch == 1:   # one row a step: the kernel's arithmetic with scalar statistics
                infos = body.infos
                b_info = infos[op.inputs[2]] if len(op.inputs) > 2 and op.inputs[2] >= 0 \
                    else None
                self.row_h = row_product(op.options, infos[op.inputs[1]], b_info,
                                         self.scale_h)
                # its column scale folded in: the loop's bias is scaled too, not the sum
                self.b_h_row = np.ascontiguousarray(self.b_h * self.scale_h_rows)
        self.xp = np.zeros((steps, batch, len(b_x)), F32)
        self.hp = np.zeros((batch, len(b_h)), F32)
        self.tmp = np.zeros((batch, units), F32)
        # The h buffers of a loop that keeps only the last step: two, alternating.
        self.pair = (np.zeros((batch, units), F32), np.zeros((batch, units), F32))
        g = c.gates
        self.stacked = None   # StackedLstm / StackedGru for the whole sequence, where they fit
        self.stacked_x = None   # what x goes through before (hybrid: its rows dequantized)
        if c.kind == "rnn":
            self.xp_rows = list(self.xp)
            self.steps = self._rnn_steps
            if self.w_x is not None and self.w_h is not None and \
                    narrow(self.w_x.shape[0], units):   # [h, x_t, 1] times [[R], [W], [b]]
                m = np.concatenate([self.w_h, self.w_x, (self.b_x + self.b_h[0])[None]])
                self.stacked = StackedRnn(np.ascontiguousarray(m, F32), units, steps,
                                          c.activation != "TANH", batch)
        elif c.kind == "lstm":   # rnn_cells.LstmSteps, its z the sum of both projections
            self.lstm = LstmSteps({k: g[k] for k in "ifgo"}, batch, self.scale_x,
                                  hard=None if hard is None else
                                  _hard_gates(hard, g["g"], (batch, len(b_x))))
            # the recurrent weights alone where no bias of their own: LstmSteps' dot a step;
            # the dynamic-range row product called directly where it is the whole projection
            self.lstm_r = self.w_h if self.w_h is not None and not self.has_b_h else None
            self.lstm_recurrent = self.row_h if self.row_h is not None and not self.has_b_h \
                else self._recurrent
            self.xp_rows = list(self.xp)
            if hard is None:
                self.stacked = self._stacked_lstm(g, steps, batch, units) or \
                    self._quantized_stacked_lstm(g, steps, units, body, x_op)
            elif hard[1] > 0:   # clip(z + shift, 0, 6) * scale = clip(z scale + shift scale, ..)
                self.stacked = self._stacked_lstm(g, steps, batch, units, hard)
        else:
            self.z = np.zeros((batch, len(b_x)), F32)
            zr_x, zr_h = _span(g["zx"], g["rx"]), _span(g["zh"], g["rh"])
            if zr_x is None or zr_h is None or (g["zx"] < g["rx"]) != (g["zh"] < g["rh"]):
                pairs = [(g["zx"], g["zh"]), (g["rx"], g["rh"])]
            else:
                pairs = [(zr_x, zr_h)]
            self.zr = [(self.z[:, xl:xh], self.hp[:, hl:hh]) for (xl, xh), (hl, hh) in pairs]
            self.halves = [np.full((batch, xh - xl), 0.5, F32) for (xl, xh), _ in pairs]
            self.z_z, self.z_r = self.z[:, slice(*g["zx"])], self.z[:, slice(*g["rx"])]
            if c.reset_w is None:
                self.hp_c = self.hp[:, slice(*g["hh"])]
            else:   # reset_after=False: the candidate's own product of r * h
                # (r * h, 1) times [[W], [b]]: the candidate's bias in its product
                self.w_rh = np.ascontiguousarray(np.concatenate(
                    [c.reset_w[0].T, c.reset_w[1].reshape(1, -1)]), F32)
                self.rh_ones = np.ones((batch, units + 1), F32)
                self.rh = self.rh_ones[:, :units]
            self.xp_rows = [(tuple(row[:, xl:xh] for (xl, xh), _ in pairs),
                             row[:, slice(*g["hx"])]) for row in self.xp]
            self.steps = self._gru_steps
            self.stacked = self._stacked_gru(g, steps, batch, units) or \
                self._quantized_stacked_gru(g, steps, units, body, x_op)
        # a float StackedGru's NaN is checked (run): its zero blocks make one of an inf in x;
        # the batch where there is one (1: h's first value tells)
        self.zero_blocks = batch if type(self.stacked) is StackedGru else 0

    def run(self, values: list, outs: list) -> bool:
        """The loop from `values` into `outs` (the WHILE's outputs, of the same shapes); False,
        writing nothing, when the steps do not fit the sequence."""
        c = self.cell
        start = {k: int(np.asarray(values[k]).reshape(-1)[0]) for k in c.counters}
        n = max(0, min(limit - start[k] for k, limit in self.bounds))
        t0 = start[c.t]
        if n and (t0 < 0 or t0 + n > self.shapes[c.x][0]
                  or (c.acc_mode == "sequence" and t0 + n > self.shapes[c.acc][0])):
            return False
        for k in c.counters:
            outs[k][...] = start[k] + n
        if self.stacked is not None and t0 == 0 and n == self.shapes[c.x][0]:
            self._run_stacked(values, outs, n)
            if not self.zero_blocks:
                return True
            h = outs[c.h]   # a NaN in a row of h is in all of it (every product is dense)
            last = h.item(0) if self.zero_blocks == 1 else _sum(h, None)
            if last == last:
                return True
            # A NaN in h: StackedGru's zero blocks multiply x, so an inf there is NaN
            # throughout, where LiteRT's (and the loop's own) steps keep it to its gates'
            # columns: again by those steps, from `values`, which hold on.
        for k in c.passed + ([c.c] if c.kind == "lstm" else []) + [c.acc]:
            np.copyto(outs[k], values[k], casting="unsafe")
        h = outs[c.h]
        if n == 0:
            np.copyto(h, values[c.h], casting="unsafe")
            return True
        self._input_projection(np.asarray(values[c.x], F32), t0, n)
        # Each step writes h into its output row (a view), the next reads it from there.
        rows = self._rows(outs[c.acc], t0, n)
        prev = np.asarray(values[c.h], F32)
        if c.kind == "lstm":
            prev = self.lstm(prev, outs[c.c], rows, self.xp_rows, r=self.lstm_r,
                             recurrent=self.lstm_recurrent)
        else:
            prev = self.steps(prev, rows)
        self.ran = n   # the time steps the last run took (the fused kernel's tests read it)
        np.copyto(h, prev)
        if c.acc_mode == "last":
            outs[c.acc].reshape(h.shape)[...] = h
        return True

    def _stacked_lstm(self, g: dict, steps: int, batch: int, units: int, hard=None):
        """rnn_cells.StackedLstm for a float LSTM over a narrow input (rnn_cells.narrow:
        one product of [h, x_t, 1] a step, no input projection), or None: m's columns are
        the gates o, i, f, g of both projections, with the bias of both."""
        if self.w_x is None or self.w_h is None or not narrow(self.w_x.shape[0], units):
            return None
        cols = [slice(*g[k]) for k in "oifg"]
        scaled_x = self.w_x * self.scale_x
        bias = self.b_x * self.scale_x + self.b_h[0]
        m = np.concatenate([np.concatenate([a[..., k] for k in cols], axis=-1)
                            for a in (self.w_h, scaled_x, bias[None])])
        bounds = None
        if hard is not None:   # (scale_x is 1 here) the sigmoid gates o, i, f: 3 units
            shift, scale = hard
            m[:, :3 * units] *= F32(scale)
            m[-1, :3 * units] += F32(shift * scale)
            bounds = (0.0, 6.0 * scale)
        return StackedLstm(np.ascontiguousarray(m, F32), units, steps, 0.0, batch=batch,
                           hard=bounds)

    def _row_x(self, units: int, body, x_op):
        """The input projection's RowProduct (its weights and bias dequantized, the column
        scale in) for a batch-1 dynamic-range loop over a narrow input whose recurrent
        projection is one too, with `self.stacked_x` set to dequantize x's rows as that
        FULLY_CONNECTED does (all the steps at once); or None."""
        if self.row_h is None or x_op is None:
            return None
        infos = body.infos
        b_info = infos[x_op.inputs[2]] if len(x_op.inputs) > 2 and x_op.inputs[2] >= 0 \
            else None
        row_x = row_product(x_op.options, infos[x_op.inputs[1]], b_info, self.scale_x)
        if row_x is None or not narrow(row_x.wt.shape[0], units):
            return None
        from .hybrid import dequantize_rows
        xq = np.zeros((self.shapes[self.cell.x][0], row_x.wt.shape[0]), F32)

        def stacked_x(x):
            dequantize_rows(np.ascontiguousarray(x, F32).reshape(xq.shape), xq, row_x.asymmetric)
            return xq[:, None]
        self.stacked_x = stacked_x
        return row_x

    def _quantized_stacked_lstm(self, g: dict, steps: int, units: int, body, x_op):
        """hybrid_lstm.QuantizedStackedLstm for a batch-1 dynamic-range LSTM over a narrow
        input whose projections both fit hybrid_row.RowProduct (the default FULLY_CONNECTED's
        numbers): its weights dequantized once, x's rows quantized and dequantized at once per
        invoke as that kernel does (`self.stacked_x`), h's each step; or None."""
        row_x = self._row_x(units, body, x_op)
        if row_x is None:
            return None
        from .hybrid_lstm import QuantizedStackedLstm
        bias = self.b_x * self.scale_x + self.b_h_row[0]
        for row in (row_x, self.row_h):
            if row.bias is not None:
                bias = bias + row.bias[0]
        cols = [slice(*g[k]) for k in "oifg"]
        m = np.concatenate([np.concatenate([a[..., k] for k in cols], axis=-1)
                            for a in (self.row_h.wt, row_x.wt, bias[None])])
        return QuantizedStackedLstm(np.ascontiguousarray(m, F32), units, steps, 0.0,
                                    self.row_h.asymmetric)

    def _stacked_gru(self, g: dict, steps: int, batch: int, units: int):
        """rnn_cells.StackedGru for a float GRU over a narrow input, or None (reset_before:
        the candidate's product's bias with x's)."""
        if self.w_x is None or self.w_h is None or not narrow(self.w_x.shape[0], units):
            return None
        c = self.cell
        m = _gru_stacked_weights(g, units, self.w_x * self.scale_x, self.b_x * self.scale_x,
                                 self.w_h, self.b_h[0], c.reset_w is None)
        u = None
        if c.reset_w is not None:   # reset_before: (r * h) U_c + b
            u = np.asarray(c.reset_w[0], F32).T
            m[self.w_x.shape[0], 4 * units:] += np.asarray(c.reset_w[1], F32).reshape(-1)
        return StackedGru(m, units, steps, u, batch=batch)

    def _quantized_stacked_gru(self, g: dict, steps: int, units: int, body, x_op):
        """hybrid_row.QuantizedStackedGru for a batch-1 dynamic-range GRU (reset_after) over a
        narrow input whose projections both fit RowProduct, as _quantized_stacked_lstm; or
        None."""
        if self.cell.reset_w is not None:
            return None
        row_x = self._row_x(units, body, x_op)
        if row_x is None:
            return None
        from .hybrid_row import QuantizedStackedGru
        b_x, b_h = self.b_x * self.scale_x, self.b_h_row[0]
        if row_x.bias is not None:
            b_x = b_x + row_x.bias[0]
        if self.row_h.bias is not None:
            b_h = b_h + self.row_h.bias[0]
        m = _gru_stacked_weights(g, units, row_x.wt, b_x, self.row_h.wt, b_h, True)
        return QuantizedStackedGru(m, units, steps, self.row_h.asymmetric)

    def _run_stacked(self, values: list, outs: list, n: int) -> bool:
        """Every step of the sequence through StackedLstm / StackedGru: outs' h (and an LSTM's
        c, copied from values) updated, the output sequence (or the last h) written."""
        c = self.cell
        lstm = c.kind == "lstm"
        if lstm:
            np.copyto(outs[c.c], values[c.c], casting="unsafe")
        for k in c.passed:
            np.copyto(outs[k], values[k], casting="unsafe")
        h, acc = outs[c.h], outs[c.acc]
        sequence = c.acc_mode == "sequence"
        if sequence and acc.shape[0] != n:   # rows past the steps keep their values
            np.copyto(acc, values[c.acc], casting="unsafe")
        x, h0 = np.asarray(values[c.x], F32), np.asarray(values[c.h], F32)
        if self.stacked_x is not None:   # dynamic-range: x's rows dequantized
            x = self.stacked_x(x)
        if lstm:
            self.stacked(x, h0, outs[c.c], acc[:n] if sequence else None, h)
        else:
            self.stacked(x, h0, acc[:n] if sequence else None, h)
        if not sequence:
            acc.reshape(h.shape)[...] = h
        self.ran = n
        return True

    def _rows(self, acc, t0: int, n: int) -> list:
        """The arrays step j writes h into: acc's rows (made once per output array), or for a
        loop that keeps only the last step two buffers, alternating."""
        if self.cell.acc_mode != "sequence":
            return [self.pair[j % 2] for j in range(n)]
        cached = getattr(self, "_rows_of", None)
        if cached is None or cached[0] is not acc or cached[1:3] != (t0, n):
            cached = self._rows_of = (acc, t0, n, list(acc[t0:t0 + n]))
        return cached[3]

    def _input_projection(self, x, t0, n):
        xs, xp = x[t0:t0 + n], self.xp[:n]
        if self.w_x is not None:
            np.dot(np.ascontiguousarray(xs).reshape(-1, xs.shape[-1]), self.w_x,
                   out=xp.reshape(-1, xp.shape[-1]))
        else:   # rows are quantized one by one: all the steps at once are the same rows
            run, args = self.fc_x
            x2 = np.ascontiguousarray(x, F32).reshape(-1, x.shape[-1])
            run(x2, *args, self.xp_all.reshape(-1, xp.shape[-1]))
            np.copyto(xp, self.xp_all[t0:t0 + n])
        xp += self.b_x
        xp *= self.scale_x

    def _recurrent(self, h, hp):
        """hp = the recurrent projection of h (its bias and column scale in)."""
        if self.w_h is not None:
            h.dot(self.w_h, hp)   # a fifth of np.matmul's call cost on a row, no dispatcher
            if self.has_b_h:
                np.add(hp, self.b_h, hp)
        else:
            if self.row_h is not None:   # the column scale is in its weights and bias
                self.row_h(h, hp)
                if self.has_b_h:
                    np.add(hp, self.b_h_row, hp)
                return
            run, args = self.fc_h
            run(np.ascontiguousarray(h), *args[1:-1], hp)
            if self.has_b_h:
                np.add(hp, self.b_h, hp)
            np.multiply(hp, self.scale_h_rows, hp)

    # The steps' ufuncs take their output as a positional argument: on rows this small out=
    # costs a tenth of the call, and in-place operators a little more than positional.
    def _rnn_steps(self, h, rows):
        """The SimpleRNN's steps from h (read only) into `rows`, inline (no frame a step with
        float weights); returns the last row."""
        hp, w_h, has_b_h, b_h = self.hp, self.w_h, self.has_b_h, self.b_h
        tanh = self.cell.activation == "TANH"
        for h_next, xt in zip(rows, self.xp_rows):
            if w_h is None:
                self._recurrent(h, hp)
            else:
                h.dot(w_h, hp)   # a fifth of np.matmul's call cost on a row, no dispatcher
                if has_b_h:
                    np.add(hp, b_h, hp)
            np.add(hp, xt, hp)
            if tanh:
                np.tanh(hp, h_next)
            else:
                np.maximum(hp, F32(0), out=h_next)   # (positional out: deprecated for maximum)
            h = h_next
        return h

    def _gru_steps(self, h, rows):
        """The GRU's steps from h (read only) into `rows`, inline (no frame a step with float
        weights); returns the last row. h' = c + z (h - c): z h + (1 - z) c in three passes."""
        tmp, hp, zr, halves, z_z, z_r = (self.tmp, self.hp, self.zr, self.halves, self.z_z,
                                          self.z_r)
        w_h, has_b_h, b_h = self.w_h, self.has_b_h, self.b_h
        reset_after = self.cell.reset_w is None
        if reset_after:
            hp_c = self.hp_c
        else:
            rh, rh_ones, w_rh = self.rh, self.rh_ones, self.w_rh
        tanh, multiply, plus = np.tanh, np.multiply, np.add
        for h_next, (xzr, xc) in zip(rows, self.xp_rows):
            if w_h is None:
                self._recurrent(h, hp)
            else:
                h.dot(w_h, hp)
                if has_b_h:
                    plus(hp, b_h, hp)
            for (z, hz), x, half in zip(zr, xzr, halves):   # sigmoid: 0.5 + 0.5 tanh(x / 2)
                plus(x, hz, z)
                tanh(z, z)
                multiply(z, half, z)
                plus(z, half, z)
            if reset_after:
                multiply(z_r, hp_c, h_next)
            else:
                multiply(z_r, h, rh)
                rh_ones.dot(w_rh, h_next)
            plus(h_next, xc, h_next)
            tanh(h_next, h_next)                   # the candidate c
            np.subtract(h, h_next, tmp)            # h - c
            multiply(z_z, tmp, tmp)
            plus(h_next, tmp, h_next)              # c + z (h - c)
            h = h_next
        return h


def _gru_stacked_weights(g: dict, units: int, w_x, b_x, w_h, b_h, reset_after: bool):
    """StackedGru's m, rows [x; 1; h], columns [z, z, r, hc, xc], from both projections'
    weights [n_in, G] / [units, G] and biases (their 0.5 on z and r in): hc is h's candidate
    term (reset_after; else zeros), xc x's."""
    n_in = w_x.shape[0]
    m = np.zeros((n_in + 1 + units, 5 * units), F32)
    x_rows, one, h_rows = m[:n_in], m[n_in], m[n_in + 1:]
    for block, (gx, gh) in enumerate([("zx", "zh"), ("zx", "zh"), ("rx", "rh")]):
        cols, xs, hs = (slice(block * units, (block + 1) * units), slice(*g[gx]),
                        slice(*g[gh]))
        x_rows[:, cols], h_rows[:, cols] = w_x[:, xs], w_h[:, hs]
        one[cols] = b_x[xs] + b_h[hs]
    hc, xc, hx = slice(3 * units, 4 * units), slice(4 * units, 5 * units), slice(*g["hx"])
    x_rows[:, xc], one[xc] = w_x[:, hx], b_x[hx]
    if reset_after:   # r * (h U_c + b)
        hh = slice(*g["hh"])
        h_rows[:, hc], one[hc] = w_h[:, hh], b_h[hh]
    return m


def _hard_gates(hard, g_columns, shape) -> tuple:
    """LstmSteps' `hard`: relu6(z + shift) * scale on the sigmoid gates' columns, identities
    on the cell input g's (full-shape operands, as the others)."""
    shift, scale = hard
    lo, hi = g_columns
    arrays = [np.full(shape, v, F32) for v in (shift, 0.0, 6.0, scale)]
    for a, identity in zip(arrays, (0.0, -np.inf, np.inf, 1.0)):
        a[:, lo:hi] = identity
    return tuple(arrays)


def _span(a, b):
    """The columns of two adjacent pieces as one range, or None."""
    (al, ah), (bl, bh) = sorted([a, b])
    return (al, bh) if ah == bl else None


def _all_steps(body, op, rows: int):
    """The body's dynamic-range FULLY_CONNECTED `op` prepared for `rows` input rows (all the time
    steps at once): (run, its weight and bias arrays)."""
    import dataclasses

    from .hybrid import fully_connected
    from .registry import Node
    infos = body.infos
    x, w = infos[op.inputs[0]], infos[op.inputs[1]]
    b = infos[op.inputs[2]] if len(op.inputs) > 2 and op.inputs[2] >= 0 else None
    out = infos[op.outputs[0]]
    node = Node(op="FULLY_CONNECTED", index=body.sg.operators.index(op), subgraph=body.index,
                runtime=body.runtime, options=op.options,
                inputs=[dataclasses.replace(x, shape=(rows, x.shape[-1])), w, b],
                outputs=[dataclasses.replace(out, shape=(rows, out.shape[-1]), data=None)])
    run = fully_connected(node)
    return run, (w.data, None if b is None else b.data)
