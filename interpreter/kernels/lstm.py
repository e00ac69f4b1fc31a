"""UNIDIRECTIONAL_SEQUENCE_LSTM, float32: TFLite's LSTM over a sequence.

The state lives in two variable tensors (inputs 18 and 19: output state h, cell state c) that keep
their values across invokes, as TFLite keeps them. Optional parts: CIFG (no input gate), peephole
connections, projection, layer normalization, cell and projection clipping.
"""
from __future__ import annotations

import numpy as np

from .common import NONE, RELU, RELU6, RELU_N1_TO_1, SIGMOID, TANH, clip_, sigmoid_
from .geometry import batch_major, sequence_input
from .registry import register
from .rnn_cells import LstmSteps, OutputRows, StackedLstm, narrow

# Input positions of the op (the format's fixed layout).
X = 0
W_I, W_F, W_C, W_O = 1, 2, 3, 4          # input-to-gate weights [n_cell, n_input]
R_I, R_F, R_C, R_O = 5, 6, 7, 8          # recurrent weights [n_cell, n_output]
P_I, P_F, P_O = 9, 10, 11                # peephole weights [n_cell]
B_I, B_F, B_C, B_O = 12, 13, 14, 15      # gate biases [n_cell]
PROJ_W, PROJ_B = 16, 17
H_STATE, C_STATE = 18, 19
LN_I, LN_F, LN_C, LN_O = 20, 21, 22, 23
# The same by gate.
W = dict(i=W_I, f=W_F, c=W_C, o=W_O)
R = dict(i=R_I, f=R_F, c=R_C, o=R_O)
P = dict(i=P_I, f=P_F, o=P_O)
B = dict(i=B_I, f=B_F, c=B_C, o=B_O)
LN = dict(i=LN_I, f=LN_F, c=LN_C, o=LN_O)


def _layer_norm(x, coef):
    mean = x.mean(axis=-1, keepdims=True)
    x -= mean
    var = (x * x).mean(axis=-1, keepdims=True)
    x /= np.sqrt(var + 1e-8)
    x *= coef


def _gate_activation(node, code: int):
    """The LSTM's cell-input and output activation (usually TANH), applied in place."""
    code = int(code or 0)
    if code == TANH:
        return lambda v: np.tanh(v, out=v)
    if code == SIGMOID:
        return sigmoid_
    bounds = {RELU: (0.0, np.inf), RELU6: (0.0, 6.0), RELU_N1_TO_1: (-1.0, 1.0)}
    if code in bounds:
        lo, hi = bounds[code]
        return lambda v: clip_(v, lo, hi)
    if code == NONE:
        return lambda v: None
    raise node.fail(f"unsupported LSTM activation {code}")


def lstm_shape(node) -> tuple:
    """UNIDIRECTIONAL_SEQUENCE_LSTM's 20 inputs (24 with layer normalization), its sequence and
    its states: sets the output's shape; returns (time_major, batch, n_cell, n_output, cifg)."""
    if len(node.inputs) not in (20, 24):
        raise node.fail(f"expected 20 or 24 inputs, got {len(node.inputs)}")
    x, time_major, batch = sequence_input(node, X)
    n_cell = node.input(W_F).shape[0]
    n_output = node.input(R_F).shape[1]
    for k, want in ((H_STATE, (batch, n_output)), (C_STATE, (batch, n_cell))):
        state = node.input(k)
        if tuple(state.shape) != want:
            raise node.fail(f"state input {k} has shape {list(state.shape)}, expected {list(want)}")
    node.outputs[0].shape = tuple(x.shape[:2]) + (n_output,)
    return time_major, batch, n_cell, n_output, node.optional_input(W_I) is None


@register("UNIDIRECTIONAL_SEQUENCE_LSTM", "float32")
def unidirectional_sequence_lstm(node):
    time_major, _, n_cell, _, cifg = lstm_shape(node)
    opts = node.options
    gates = ["f", "c", "o"] if cifg else ["i", "f", "c", "o"]
    use_ln = len(node.inputs) == 24 and node.optional_input(LN_F) is not None
    act = _gate_activation(node, opts.fused_activation_function)
    cell_clip, proj_clip = float(opts.cell_clip), float(opts.proj_clip)
    has_proj = node.optional_input(PROJ_W) is not None
    fast = _plain_cell(node, gates, act_code=int(opts.fused_activation_function or 0),
                       use_ln=use_ln, has_proj=has_proj, time_major=time_major)
    if fast is not None:
        return fast

    def run(*arrays):
        ins = arrays[:len(node.inputs)]
        out = arrays[-1]
        xs = batch_major(ins[X], time_major)
        h, c = ins[H_STATE], ins[C_STATE]
        w = np.concatenate([ins[W[g]] for g in gates]).astype(np.float32, copy=False)
        r = np.concatenate([ins[R[g]] for g in gates]).astype(np.float32, copy=False)
        bias = np.concatenate([ins[B[g]] if ins[B[g]] is not None
                               else np.zeros(n_cell, np.float32) for g in gates])
        xw = xs @ w.T  # [batch, time, n_g * n_cell]
        if not use_ln:
            xw += bias
        outs = batch_major(out, time_major)
        for t in range(xs.shape[1]):
            z = xw[:, t] + h @ r.T
            parts = {g: z[:, k * n_cell:(k + 1) * n_cell] for k, g in enumerate(gates)}
            for g in ("i", "f"):
                if g in parts and ins[P[g]] is not None:
                    parts[g] += c * ins[P[g]]
            if use_ln:  # the output gate's waits for its peephole term (the new cell state)
                for g in gates[:-1]:
                    _layer_norm(parts[g], ins[LN[g]])
                    parts[g] += ins[B[g]]
            sigmoid_(parts["f"])
            if cifg:
                i_gate = 1.0 - parts["f"]
            else:
                sigmoid_(parts["i"])
                i_gate = parts["i"]
            g_gate = parts["c"]
            act(g_gate)
            c *= parts["f"]
            c += i_gate * g_gate
            if cell_clip > 0:
                np.clip(c, -cell_clip, cell_clip, out=c)
            o_gate = parts["o"]
            if ins[P_O] is not None:
                o_gate += c * ins[P_O]
            if use_ln:
                _layer_norm(o_gate, ins[LN["o"]])
                o_gate += ins[B["o"]]
            sigmoid_(o_gate)
            cell_act = c.copy()
            act(cell_act)
            hidden = o_gate * cell_act
            if has_proj:
                hidden = hidden @ ins[PROJ_W].T
                if ins[PROJ_B] is not None:
                    hidden += ins[PROJ_B]
                if proj_clip > 0:
                    np.clip(hidden, -proj_clip, proj_clip, out=hidden)
            h[...] = hidden
            outs[:, t] = hidden
    return run


def _plain_cell(node, gates, act_code: int, use_ln: bool, has_proj: bool, time_major: bool):
    """The run of the common LSTM (constant weights, TANH, no peepholes, projection or layer
    norm; CIFG and clipping allowed) with everything but the recurrence done at prepare: the
    gates' weights concatenated and transposed once, the input projection of all steps in one
    GEMM, then per step one matmul and whole-array gates into buffers made here. LOGISTIC as
    0.5 + 0.5 tanh(x / 2) (an identity, ~3e-8 absolute from 1 / (1 + exp(-x))): the sigmoid
    gates' weights and biases are scaled by 0.5 (exact), one tanh covers every gate. None
    where the general loop is needed."""
    if act_code != TANH or use_ln or has_proj or any(node.optional_input(k) is not None
                                                      for k in (P_I, P_F, P_O)):
        return None
    ins = [node.optional_input(k) for k in range(len(node.inputs))]
    ws = [ins[W[g]] for g in gates] + [ins[R[g]] for g in gates]
    if any(t is None or t.data is None or t.type_name != "float32" for t in ws) or \
            any(ins[B[g]] is not None and (ins[B[g]].data is None or
                                           ins[B[g]].type_name != "float32") for g in gates):
        return None
    n_cell = node.input(W_F).shape[0]
    x = node.input(X).shape
    batch, steps = (x[1], x[0]) if time_major else (x[0], x[1])
    if len(gates) == 4 and narrow(x[2], n_cell):
        return _stacked(ins, n_cell, steps, batch, time_major, float(node.options.cell_clip))
    scale = np.concatenate([np.full(n_cell, 1.0 if g == "c" else 0.5, np.float32)
                            for g in gates])
    w = np.concatenate([np.asarray(ins[W[g]].data, np.float32) for g in gates]).T * scale
    r = np.concatenate([np.asarray(ins[R[g]].data, np.float32) for g in gates]).T * scale
    w, r = np.ascontiguousarray(w, np.float32), np.ascontiguousarray(r, np.float32)
    bias = np.concatenate([np.zeros(n_cell, np.float32) if ins[B[g]] is None
                           else np.asarray(ins[B[g]].data, np.float32) for g in gates]) * scale
    xw = np.zeros((batch, steps, len(gates) * n_cell), np.float32)
    xw_rows = [xw[:, t] for t in range(steps)]
    recurrence = LstmSteps.stacked(gates, n_cell, batch, scale, float(node.options.cell_clip))
    out_rows = OutputRows(time_major)

    def run(*arrays):
        np.matmul(batch_major(arrays[X], time_major), w, out=xw)   # every step's: one GEMM
        np.add(xw, bias, out=xw)
        h = arrays[H_STATE]
        np.copyto(h, recurrence(h, arrays[C_STATE], out_rows(arrays[-1]), xw_rows, r=r))
    return run


STACKED = "oifc"   # rnn_cells.StackedLstm's gate columns: o, i, f, g


def stacked_weights(w: dict, r: dict, b: dict, n_cell: int) -> np.ndarray:
    """StackedLstm's m = [[R^T], [W^T], [b]] from the gates' float32 weights [n, n_in],
    recurrent weights [n, n] and biases [n] (None: zeros), the sigmoid gates' columns * 0.5."""
    half = np.concatenate([np.full(n_cell, 1.0 if g == "c" else 0.5, np.float32)
                           for g in STACKED])
    bias = [np.zeros(n_cell, np.float32) if b[g] is None else b[g] for g in STACKED]
    m = np.concatenate([np.concatenate([r[g] for g in STACKED]).T,
                        np.concatenate([w[g] for g in STACKED]).T,
                        np.concatenate(bias)[None]]) * half
    return np.ascontiguousarray(m, np.float32)


def _stacked(ins, n_cell: int, steps: int, batch: int, time_major: bool, cell_clip: float):
    """The plain LSTM with a narrow input (rnn_cells.narrow: a product of [h, x, 1] costs less
    than the input projection's GEMM and a sum a step): rnn_cells.StackedLstm (any batch)."""
    def data(t):
        return None if t is None else np.asarray(t.data, np.float32)
    m = stacked_weights({g: data(ins[W[g]]) for g in STACKED},
                        {g: data(ins[R[g]]) for g in STACKED},
                        {g: data(ins[B[g]]) for g in STACKED}, n_cell)
    recurrence = StackedLstm(m, n_cell, steps, cell_clip, batch=batch)
    if time_major:
        def run(*arrays):
            recurrence(arrays[X], arrays[H_STATE], arrays[C_STATE], arrays[-1])
    else:
        def run(*arrays):
            recurrence(arrays[X].swapaxes(0, 1), arrays[H_STATE], arrays[C_STATE],
                       arrays[-1].swapaxes(0, 1))
    return run
