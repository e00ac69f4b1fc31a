"""BIDIRECTIONAL_SEQUENCE_LSTM, float32: a forward and a backward LSTM over the sequence, as
TFLite's lstm_eval (CIFG, peepholes, projection, cell and projection clipping).

Inputs (48, the format's fixed layout): 0 the input; 1-17 the forward weights (input-to-gate
i f c o, recurrent i f c o, peepholes i f o, biases i f c o, projection weights and bias);
18-34 the same for the backward LSTM; 35-38 the states (forward h, c, backward h, c: variable
tensors, kept across invokes); 39 an auxiliary input; 40-47 its weights (forward i f c o,
backward i f c o). With aux weights both LSTMs add the aux input's products; with an aux input
alone the backward LSTM reads it instead of the input (stacked layers without cross links).
Outputs: forward and backward sequences, or one sequence with both (merge_outputs).
"""
from __future__ import annotations

import numpy as np

from .common import sigmoid_
from .geometry import batch_major, sequence_input
from .registry import register
from .rnn import bidirectional_outputs, bidirectional_views, rnn_activation

GATES = "ifco"
FW, BW = 1, 18                           # first weight input of each direction
STATES = {FW: (35, 36), BW: (37, 38)}
AUX_INPUT = 39
AUX_WEIGHTS = {FW: 40, BW: 44}


def _layout(base: int) -> dict:
    """Input positions of one direction's tensors."""
    return dict(w={g: base + k for k, g in enumerate(GATES)},
                r={g: base + 4 + k for k, g in enumerate(GATES)},
                p={"i": base + 8, "f": base + 9, "o": base + 10},
                b={g: base + 11 + k for k, g in enumerate(GATES)},
                proj_w=base + 15, proj_b=base + 16)


def lstm_sequence(xs, aux, t: dict, h, c, out, act, cell_clip, proj_clip, reverse):
    """One direction over xs [batch, time, input]; `t` maps names to arrays (w, r, b, p per
    gate, aux_w per gate or None, proj_w, proj_b); out [batch, time, n_output] is a view."""
    gates = [g for g in GATES if t["w"][g] is not None]  # no "i" with CIFG
    w = np.concatenate([t["w"][g] for g in gates])
    bias = np.concatenate([t["b"][g] for g in gates])
    r = np.concatenate([t["r"][g] for g in gates]).T
    z = xs @ w.T
    z += bias
    if aux is not None:
        z += aux @ np.concatenate([t["aux_w"][g] for g in gates]).T
    n_cell = c.shape[1]
    steps = range(xs.shape[1] - 1, -1, -1) if reverse else range(xs.shape[1])
    for step in steps:
        zt = z[:, step] + h @ r
        part = {g: zt[:, k * n_cell:(k + 1) * n_cell] for k, g in enumerate(gates)}
        for g in ("i", "f"):
            if g in part and t["p"][g] is not None:
                part[g] += t["p"][g] * c
        sigmoid_(part["f"])
        if "i" in part:
            sigmoid_(part["i"])
            i_gate = part["i"]
        else:
            i_gate = 1.0 - part["f"]
        act(part["c"])
        c *= part["f"]
        c += part["c"] * i_gate
        if cell_clip > 0:
            np.clip(c, -cell_clip, cell_clip, out=c)
        o_gate = part["o"]
        if t["p"]["o"] is not None:
            o_gate += t["p"]["o"] * c
        sigmoid_(o_gate)
        hidden = c.copy()
        act(hidden)
        hidden *= o_gate
        if t["proj_w"] is not None:
            hidden = hidden @ t["proj_w"].T
            if t["proj_b"] is not None:
                hidden += t["proj_b"]
            if proj_clip > 0:
                np.clip(hidden, -proj_clip, proj_clip, out=hidden)
        h[...] = hidden
        out[:, step] = hidden


def _check_direction(node, base: int, n_input: int, batch: int, n_aux):
    """(n_cell, n_output) of one direction, after checking its tensors' shapes."""
    lay = _layout(base)
    n_cell = node.input(lay["w"]["f"]).shape[0]
    n_output = node.input(lay["r"]["f"]).shape[1]
    cifg = node.optional_input(lay["w"]["i"]) is None
    want = {}
    for g in GATES:
        if g == "i" and cifg:
            continue
        want[lay["w"][g]] = (n_cell, n_input)
        want[lay["r"][g]] = (n_cell, n_output)
        want[lay["b"][g]] = (n_cell,)
        if n_aux is not None:
            want[AUX_WEIGHTS[base] + GATES.index(g)] = (n_cell, n_aux)
    for g, k in lay["p"].items():
        if node.optional_input(k) is not None and not (g == "i" and cifg):
            want[k] = (n_cell,)
    if node.optional_input(lay["proj_w"]) is not None:
        want[lay["proj_w"]] = (n_output, n_cell)
        if node.optional_input(lay["proj_b"]) is not None:
            want[lay["proj_b"]] = (n_output,)
    elif n_output != n_cell:
        raise node.fail(f"without projection the output size {n_output} must equal the cell "
                        f"size {n_cell}")
    h_k, c_k = STATES[base]
    want[h_k] = (batch, n_output)
    want[c_k] = (batch, n_cell)
    for k, shape in want.items():
        tensor = node.input(k)
        if tuple(tensor.shape) != shape:
            raise node.fail(f"input {k} ({tensor.name!r}) has shape {list(tensor.shape)}, "
                            f"expected {list(shape)}")
        if tensor.type_name != "float32":
            raise node.fail(f"input {k} ({tensor.name!r}) is {tensor.type_name}: only float32 "
                            "weights are supported (hybrid int8 weights are not)")
    return n_cell, n_output


@register("BIDIRECTIONAL_SEQUENCE_LSTM", "float32")
def bidirectional_sequence_lstm(node):
    node.expect_inputs(48)
    opts = node.options
    x, time_major, batch = sequence_input(node)
    merge = bool(opts.merge_outputs)
    aux = node.optional_input(AUX_INPUT)
    use_aux = node.optional_input(AUX_WEIGHTS[FW] + 1) is not None
    non_stacking = aux is not None and not use_aux
    if aux is not None and (len(aux.shape) != 3 or tuple(aux.shape[:2]) != tuple(x.shape[:2])):
        raise node.fail(f"aux input {list(aux.shape)} must match the input {list(x.shape)} in "
                        "its first two dimensions")
    if use_aux and aux is None:
        raise node.fail("aux weights are given without an aux input")
    n_aux = aux.shape[2] if use_aux else None
    _, fw_out = _check_direction(node, FW, x.shape[2], batch, n_aux)
    _, bw_out = _check_direction(node, BW, aux.shape[2] if non_stacking else x.shape[2],
                                 batch, n_aux)
    bidirectional_outputs(node, merge, tuple(x.shape[:2]), fw_out, bw_out)
    act = rnn_activation(node, opts.fused_activation_function)
    cell_clip, proj_clip = float(opts.cell_clip), float(opts.proj_clip)
    n_in = len(node.inputs)

    def tensors(ins, base):
        lay = _layout(base)
        t = {key: {g: ins[k] for g, k in lay[key].items()} for key in ("w", "r", "p", "b")}
        t["aux_w"] = {g: ins[AUX_WEIGHTS[base] + k] for k, g in enumerate(GATES)}
        t["proj_w"], t["proj_b"] = ins[lay["proj_w"]], ins[lay["proj_b"]]
        return t

    def run(*arrays):
        ins, outs = arrays[:n_in], arrays[n_in:]
        xs = batch_major(ins[0], time_major)
        aux_v = None if ins[AUX_INPUT] is None else batch_major(ins[AUX_INPUT], time_major)
        fw_view, bw_view = bidirectional_views(outs, merge, fw_out, time_major)
        real_aux = aux_v if use_aux else None
        lstm_sequence(xs, real_aux, tensors(ins, FW), ins[35], ins[36], fw_view, act,
                      cell_clip, proj_clip, reverse=False)
        lstm_sequence(aux_v if non_stacking else xs, real_aux, tensors(ins, BW), ins[37],
                      ins[38], bw_view, act, cell_clip, proj_clip, reverse=True)
    return run
