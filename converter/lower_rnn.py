"""Recurrent ONNX ops, LSTM and GRU, unrolled over the (static) sequence length.

TFLite's UNIDIRECTIONAL_SEQUENCE_LSTM keeps h and c in variable tensors across invokes and outputs
only the sequence, and TFLite has no GRU builtin, so both become plain ops: one FULLY_CONNECTED
for the input projection of every time step at once, then per step a FULLY_CONNECTED of the
hidden state, the gate activations and the state update. That takes initial states as inputs,
gives Y, Y_h and Y_c, runs both directions, peepholes, clipping, any activation ONNX names and
per-batch `sequence_lens` (steps past a sequence's end keep its state and output zeros).
"""
from __future__ import annotations

import numpy as np

from .lower import lowers
from .lower_math import softplus_of


@lowers("LSTM")
def lstm(b, n):
    return _recurrent(b, n, gates=4, step=_lstm_step, defaults=("Sigmoid", "Tanh", "Tanh"))


@lowers("GRU")
def gru(b, n):
    return _recurrent(b, n, gates=3, step=_gru_step, defaults=("Sigmoid", "Tanh"))


def _recurrent(b, n, gates: int, step, defaults):
    x, w, r, bias, lens = (n.input(k) for k in range(5))
    hidden = int(n.attr("hidden_size", b.shape(r)[-1]))
    direction = n.attr("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise n.fail(f"direction={direction!r} is not forward, reverse or bidirectional")
    if n.op_type == "LSTM" and int(n.attr("input_forget", 0)):
        raise n.fail("input_forget=1 is not supported")
    batchwise = bool(int(n.attr("layout", 0)))
    if batchwise:
        x = b.transpose(x, (1, 0, 2))
    seq, batch, _ = b.shape(x)
    dirs = 2 if direction == "bidirectional" else 1
    acts = _activations(b, n, defaults, dirs)
    clip = n.attr("clip")
    dtype = b.sg.tensors[x].np_dtype
    states = [n.input(5), n.input(6)] if n.op_type == "LSTM" else [n.input(5)]
    states = [t if t >= 0 and t not in b.empty and not _zeros(b, t) else -1 for t in states]
    if batchwise:
        states = [t if t < 0 else b.transpose(t, (1, 0, 2)) for t in states]
    mask = _step_masks(b, lens, seq, batch, dtype) if lens >= 0 and lens not in b.empty else None
    ys, finals = [], []
    for d in range(dirs):
        reverse = direction == "reverse" or d == 1
        wd, rd, wb, rb = _direction_weights(b, n, w, r, bias, d, gates, hidden, dtype)
        params = {"R": rd, "Rb": rb, "acts": acts[d], "clip": clip, "peep": _peepholes(b, n, d),
                  "linear_before_reset": bool(int(n.attr("linear_before_reset", 0)))}
        init = [None if t < 0 else _pick(b, t, d) for t in states]  # None: zeros
        if b.prefer_loops and mask is None and all(b.is_const(t) for t in (wd, rd, wb, rb)):
            y, final = _loop(b, n, x, wd, wb, init, reverse, step, params, defaults, dirs, d)
        else:
            order = range(seq - 1, -1, -1) if reverse else range(seq)
            y, final = _unroll(b, x, wd, wb, init, order, mask,
                               lambda xw, s, params=params: step(b, xw, s, params))
        ys.append(y)
        finals.append(final)
    y = ys[0] if dirs == 1 else b.op("PACK", ys, {"axis": 1, "values_count": dirs})
    if dirs == 1:
        y = b.reshape(y, (seq, 1, batch, hidden))
    outs = [y] + [_stack(b, [f[k] for f in finals]) for k in range(len(finals[0]))]
    if batchwise:
        outs = [b.transpose(outs[0], (2, 0, 1, 3))] + [b.transpose(t, (1, 0, 2))
                                                         for t in outs[1:]]
    return outs


def _zeros(b, t) -> bool:
    value = b.value(t)
    return value is not None and not value.any()


def _stack(b, parts):
    return b.op("PACK", parts, {"axis": 0, "values_count": len(parts)})


def _pick(b, t, d):
    """Direction d of a [dirs, ...] tensor."""
    rows = b.op("GATHER", [t, b.const(np.array([d], np.int32))], {"axis": 0})
    return b.reshape(rows, b.shape(t)[1:])


def _direction_weights(b, n, w, r, bias, d, gates, hidden, dtype):
    """(W [G*H, I], R [G*H, H], Wb [G*H], Rb [G*H]) of direction d."""
    wd, rd = _pick(b, w, d), _pick(b, r, d)
    if bias < 0 or bias in b.empty:
        zeros = b.const(np.zeros(gates * hidden, dtype))
        return wd, rd, zeros, zeros
    bd = _pick(b, bias, d)
    wb, rb = b.ops("SPLIT", [b.const(np.array(0, np.int32)), bd], {"num_splits": 2}, n_out=2)
    return wd, rd, wb, rb


def _step_masks(b, lens, seq, batch, dtype):
    """Per step t, a [batch, 1] tensor: 1 where t < sequence_lens, else 0."""
    steps = b.const(np.arange(seq, dtype=np.int64).reshape(seq, 1))
    lens = b.cast(b.reshape(lens, (1, batch)), "int64")
    valid = b.cast(b.op("LESS", [steps, lens], dtype="bool"), np.dtype(dtype).name)
    rows = b.ops("UNPACK", [valid], {"num": seq, "axis": 0}, n_out=seq) if seq > 1 else \
        [b.reshape(valid, (batch,))]
    return [b.reshape(row, (batch, 1)) for row in rows]


def _peepholes(b, n, d):
    """(Pi, Po, Pf) of direction d, or None."""
    if n.op_type != "LSTM" or n.input(7) < 0 or n.input(7) in b.empty:
        return None
    return b.ops("SPLIT", [b.const(np.array(0, np.int32)), _pick(b, n.input(7), d)],
                 {"num_splits": 3}, n_out=3)


def _unroll(b, x, wd, wb, init, order, mask, step):
    """Run `step(x projected, state) -> new state` over the time steps in `order`:
    ([seq, batch, H] outputs, final states)."""
    seq, batch, size = b.shape(x)
    projected = b.op("FULLY_CONNECTED", [b.reshape(x, (seq * batch, size)), wd, wb])
    width = b.shape(wd)[0]
    projected = b.reshape(projected, (seq, batch, width))
    inputs = b.ops("UNPACK", [projected], {"num": seq, "axis": 0}, n_out=seq) if seq > 1 else \
        [b.reshape(projected, (batch, width))]
    state = list(init)   # None stands for zeros: no constant of the batch's size
    outputs = [None] * seq
    for t in order:
        new = step(inputs[t], state)
        if mask is None:
            state = new
            outputs[t] = new[0]
            continue
        keep = mask[t]
        state = [b.op("MUL", [keep, s]) if old is None else
                 b.op("ADD", [old, b.op("MUL", [keep, b.op("SUB", [s, old])])])
                 for s, old in zip(new, state)]
        outputs[t] = b.op("MUL", [new[0], keep])
    y = outputs[0] if seq == 1 else b.op("PACK", outputs, {"axis": 0, "values_count": seq})
    return b.reshape(y, (seq, batch, b.shape(outputs[0])[-1])), state


def _loop(b, n, x, wd, wb, init, reverse, step, params, defaults, dirs, d):
    """The steps as a WHILE loop, whose count is the sequence's length while running:
    ([seq, batch, H] outputs, final states). The loop carries (t, count, projected inputs,
    states, outputs); the body GATHERs step t's input, runs `step`, and writes the new hidden
    state into the outputs with DYNAMIC_UPDATE_SLICE."""
    from edgelite.schema import Subgraph

    from .builder import IRBuilder

    seq, batch, size = b.shape(x)
    width = b.shape(wd)[0]
    hidden = b.shape(params["R"])[-1]
    dtype = b.sg.tensors[x].np_dtype
    projected = b.op("FULLY_CONNECTED", [b.reshape(x, (seq * batch, size)), wd, wb])
    projected = b.reshape(projected, (seq, batch, width))
    shape = b.emit("SHAPE", [projected], {"out_type": 2}, [(3,)], ["int32"])[0]
    count = b.op("GATHER", [shape, b.const(np.array(0, np.int32))], {"axis": 0})
    lead = b.op("STRIDED_SLICE", [shape, b.const(np.array([0], np.int32)),
                                  b.const(np.array([2], np.int32)),
                                  b.const(np.array([1], np.int32))])
    dims = b.op("CONCATENATION", [lead, b.const(np.array([hidden], np.int32))], {"axis": 0})
    outputs = b.op("FILL", [dims, b.const(np.array(0, dtype))], dtype=np.dtype(dtype).name,
                   shape=(seq, batch, hidden))
    states = [b.const(np.zeros((batch, hidden), dtype)) if s is None else s for s in init]
    carried = [b.const(np.array(0, np.int32)), count, projected, *states, outputs]

    def subgraph(name):
        sg = Subgraph(name=f"{b.where}/{name}")
        b.model.subgraphs.append(sg)
        inner = IRBuilder(b.model, sg)
        inner.where = f"{b.where}/{name}"
        for t in carried:
            sg.inputs.append(inner.tensor(b.sg.tensors[t].name, b.shape(t), b.dtype(t)))
        return len(b.model.subgraphs) - 1, inner

    cond_index, cond = subgraph("cond")
    cond.sg.outputs = [cond.op("LESS", cond.sg.inputs[:2], dtype="bool")]
    body_index, body = subgraph("body")
    t, total, inputs, *state, ys = body.sg.inputs
    here = t if not reverse else body.op("SUB", [body.op("SUB", [total, body.const(
        np.array(1, np.int32))]), t])
    x_t = body.op("GATHER", [inputs, here], {"axis": 0})
    inner = dict(params)
    for key in ("R", "Rb"):
        inner[key] = body.const(b.value(params[key]))
    if params["peep"] is not None:
        inner["peep"] = [body.const(b.value(p)) for p in params["peep"]]
    inner["acts"] = _activations(body, n, defaults, dirs)[d]
    new = step(body, x_t, state, inner)
    at = body.op("PACK", [here, body.const(np.array(0, np.int32)),
                          body.const(np.array(0, np.int32))], {"axis": 0, "values_count": 3})
    row = body.reshape(new[0], (1, batch, hidden))
    ys = body.op("DYNAMIC_UPDATE_SLICE", [ys, row, at])
    step_t = body.op("ADD", [t, body.const(np.array(1, np.int32))])
    body.sg.outputs = [step_t, total, inputs, *new, ys]
    results = b.emit("WHILE", carried, {"cond_subgraph_index": cond_index,
                                        "body_subgraph_index": body_index},
                     [b.shape(t) for t in carried], [b.dtype(t) for t in carried])
    return results[-1], results[3:-1]


def _clip(b, t, clip):
    if clip is None:
        return t
    c = float(clip)
    dtype = b.sg.tensors[t].np_dtype
    return b.op("MINIMUM", [b.op("MAXIMUM", [t, b.const(np.array(-c, dtype))]),
                            b.const(np.array(c, dtype))])


def _recurrent_term(b, h, weights, bias):
    """h @ weights^T + bias; with a zero state (h None), the bias alone."""
    return bias if h is None else b.op("FULLY_CONNECTED", [h, weights, bias])


def _plus(b, t, bias):
    """t + bias, or t when the bias is a constant of zeros."""
    value = b.value(bias)
    return t if value is not None and not value.any() else b.op("ADD", [t, bias])


def _lstm_step(b, xw, state, p):
    """ONNX's LSTM equations (gates i, o, f, c; peepholes P = [Pi, Po, Pf]); a None state is
    zeros."""
    h, c = state
    f_act, g_act, h_act = p["acts"]
    clip, peep = p["clip"], p["peep"]
    gates = _plus(b, xw, _recurrent_term(b, h, p["R"], p["Rb"]))
    i, o, f, cand = b.ops("SPLIT", [b.const(np.array(1, np.int32)), gates], {"num_splits": 4},
                          n_out=4)
    if peep is not None and c is not None:
        i = b.op("ADD", [i, b.op("MUL", [peep[0], c])])
        f = b.op("ADD", [f, b.op("MUL", [peep[2], c])])
    i, f = f_act(_clip(b, i, clip)), f_act(_clip(b, f, clip))
    new = b.op("MUL", [i, g_act(_clip(b, cand, clip))])
    c = new if c is None else b.op("ADD", [b.op("MUL", [f, c]), new])
    if peep is not None:
        o = b.op("ADD", [o, b.op("MUL", [peep[1], c])])
    o = f_act(_clip(b, o, clip))
    return [b.op("MUL", [o, h_act(c)]), c]


def _gru_step(b, xw, state, p):
    """ONNX's GRU equations (gates z, r, h), linear_before_reset either way."""
    (h,) = state
    f_act, g_act = p["acts"]
    clip = p["clip"]
    hidden = b.shape(p["R"])[-1]
    sizes = b.const(np.array([2 * hidden, hidden], np.int32))
    x_zr, x_h = b.ops("SPLIT_V", [xw, sizes, b.const(np.array(1, np.int32))],
                      {"num_splits": 2}, n_out=2)
    r_zr, r_h = b.ops("SPLIT_V", [p["R"], sizes, b.const(np.array(0, np.int32))],
                      {"num_splits": 2}, n_out=2)
    rb_zr, rb_h = b.ops("SPLIT_V", [p["Rb"], sizes, b.const(np.array(0, np.int32))],
                        {"num_splits": 2}, n_out=2)
    zr = _plus(b, x_zr, _recurrent_term(b, h, r_zr, rb_zr))
    z, r = b.ops("SPLIT", [b.const(np.array(1, np.int32)), zr], {"num_splits": 2}, n_out=2)
    z, r = f_act(_clip(b, z, clip)), f_act(_clip(b, r, clip))
    if p["linear_before_reset"]:
        recurrent = b.op("MUL", [r, _recurrent_term(b, h, r_h, rb_h)])
    else:
        recurrent = _recurrent_term(b, None if h is None else b.op("MUL", [r, h]), r_h, rb_h)
    cand = g_act(_clip(b, _plus(b, x_h, recurrent), clip))
    if h is None:  # (1 - z) * cand
        return [b.op("MUL", [cand, b.op("SUB", [b.const(np.ones((), b.sg.tensors[z].np_dtype)),
                                                z])])]
    return [b.op("ADD", [cand, b.op("MUL", [z, b.op("SUB", [h, cand])])])]


# -- activations ---------------------------------------------------------------------------------

# Activations that take alpha and beta, with ONNX's defaults (None: the attribute must give it).
_ALPHA = {"Affine": None, "LeakyRelu": 0.01, "ThresholdedRelu": 1.0, "ScaledTanh": None,
          "HardSigmoid": 0.2, "Elu": 1.0}
_BETA = {"Affine": 0.0, "ScaledTanh": None, "HardSigmoid": 0.5}


def _activations(b, n, defaults, dirs):
    """Per direction, the activation functions (callables on a tensor) ONNX's attributes name;
    activation_alpha and activation_beta are consumed in order by the functions that take
    them."""
    names = list(n.attr("activations", [])) or list(defaults) * dirs
    if len(names) != len(defaults) * dirs:
        raise n.fail(f"activations {names} must name {len(defaults)} functions per direction")
    alphas = list(n.attr("activation_alpha", []))
    betas = list(n.attr("activation_beta", []))
    funcs = []
    for name in names:
        alpha = (alphas.pop(0) if alphas else _ALPHA[name]) if name in _ALPHA else None
        beta = (betas.pop(0) if betas else _BETA[name]) if name in _BETA else None
        if (name in _ALPHA and alpha is None) or (name in _BETA and beta is None):
            raise n.fail(f"activation {name} needs activation_alpha and activation_beta")
        funcs.append(_activation(b, n, name, alpha, beta))
    k = len(defaults)
    return [funcs[d * k:(d + 1) * k] for d in range(dirs)]


def _activation(b, n, name, alpha, beta):
    def const(v, t):
        return b.const(np.array(v, b.sg.tensors[t].np_dtype))

    simple = {"Sigmoid": "LOGISTIC", "Tanh": "TANH", "Relu": "RELU"}
    if name in simple:
        return lambda t: b.op(simple[name], [t])
    if name == "HardSigmoid":
        return lambda t: b.op("RELU_0_TO_1", [b.op("ADD", [b.op("MUL", [t, const(alpha, t)]),
                                                           const(beta, t)])])
    if name == "LeakyRelu":
        return lambda t: b.op("LEAKY_RELU", [t], {"alpha": float(alpha)})
    if name == "ThresholdedRelu":
        return lambda t: b.op("SELECT_V2", [b.op("GREATER", [t, const(alpha, t)], dtype="bool"),
                                            t, const(0, t)], dtype=b.dtype(t))
    if name == "ScaledTanh":
        return lambda t: b.op("MUL", [b.op("TANH", [b.op("MUL", [t, const(beta, t)])]),
                                      const(alpha, t)])
    if name == "Affine":
        return lambda t: b.op("ADD", [b.op("MUL", [t, const(alpha, t)]), const(beta, t)])
    if name == "Elu":
        def elu(t):
            y = b.op("ELU", [t])
            return y if alpha == 1.0 else b.op("SELECT_V2", [
                b.op("GREATER", [t, const(0, t)], dtype="bool"), t,
                b.op("MUL", [y, const(alpha, t)])], dtype=b.dtype(t))
        return elu
    if name == "Softsign":
        return lambda t: b.op("DIV", [t, b.op("ADD", [b.op("ABS", [t]), const(1, t)])])
    if name == "Softplus":
        return lambda t: softplus_of(b, t)
    raise n.fail(f"activation {name!r} is not supported")
