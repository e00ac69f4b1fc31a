"""Keras LSTM, GRU and SimpleRNN layers as TensorFlow's converter lowers them (a WHILE over
the time steps, the output TensorArray rebuilt each step as CONCATENATION(SLICE(acc, :t), h,
SLICE(acc, t+1:))), written with edgelite's IR, op for op as in the corpus's keras_lstm and
keras_gru files (tools/tflite_corpus.py keras), with options the corpus lacks: batch > 1,
biases, initial states as graph inputs, and `variant`s the fused kernel must not take."""
from __future__ import annotations

import numpy as np

from edgelite.schema import Model, QuantizationParameters, Subgraph, Tensor, save
from tests.opmodel import operator as _op


class _Builder:
    def __init__(self, model, sg):
        self.model, self.sg = model, sg

    def t(self, name, shape, dtype="float32"):
        return self.sg.add_tensor(Tensor(name, tuple(shape), dtype))

    def int8(self, name, value):
        """Dynamic-range weights: int8 per output channel, symmetric (as TensorFlow writes)."""
        scale = np.maximum(np.abs(value).max(axis=1), 1e-6) / 127
        q = np.clip(np.round(value / scale[:, None]), -127, 127).astype(np.int8)
        quant = QuantizationParameters(scale=scale.astype(np.float32),
                                       zero_point=np.zeros(len(scale), np.int64))
        return self.sg.add_tensor(Tensor(name, q.shape, "int8", self.model.add_buffer(q),
                                         quantization=quant))

    def c(self, name, value):
        value = np.asarray(value)
        return self.sg.add_tensor(Tensor(name, value.shape, str(value.dtype),
                                         self.model.add_buffer(value)))

    def op(self, name, ins, out_shapes, dtype="float32", signature=None, **options):
        outs = [self.t(f"{name.lower()}_{len(self.sg.tensors)}", s, dtype) for s in out_shapes]
        if signature is not None:   # sizes known only while running, as the converter marks
            self.sg.tensors[outs[0]].shape_signature = tuple(signature)
        self.sg.operators.append(_op(name, ins, outs, **options))
        return outs[0] if len(outs) == 1 else outs


def keras_while(kind="lstm", batch=1, steps=6, n_in=5, units=4, sequences=True, bias=True,
                variant="", seed=0, limit=None) -> bytes:
    """Inputs x [batch, steps, n_in], h0 [batch, units] (and c0 for an LSTM); outputs the
    sequence [batch, steps, units] (or the last h), the final h (and c).
    variant "reset_before": a GRU with reset_after=False (tanh(x_h + (r * h) W + b));
    "dynamic": int8 weights (dynamic-range, inputs quantized per row, asymmetric);
    "relu": the LSTM's cell activation is RELU (no fused kernel), a SimpleRNN's (fused);
    "hard_sigmoid": the LSTM's gates are Keras's hard_sigmoid (relu6(x + 3) / 6).
    `limit`: the cond's bound on the step counters (default `steps`).
    "extra": the body also computes a value nobody reads (no fused kernel)."""
    rng = np.random.default_rng(seed)
    gates = {"lstm": 4, "gru": 3, "rnn": 1}[kind]
    model = Model(description=f"keras {kind} as a WHILE")
    main = Subgraph(name="main")
    m = _Builder(model, main)
    x = m.t("x", (batch, steps, n_in))
    h0 = m.t("h0", (batch, units))
    state_in = [h0] + ([m.t("c0", (batch, units))] if kind == "lstm" else [])
    main.inputs = [x] + state_in
    xt = m.op("TRANSPOSE", [x, m.c("perm", np.array([1, 0, 2], np.int32))],
              [(steps, batch, n_in)])
    zero = m.c("zero", np.int32(0))
    rows = steps if sequences else 1
    acc0 = m.c("acc0", np.zeros((rows, batch, units), np.float32))
    loop_in = [zero, zero, acc0] + state_in + [xt]
    shapes = [(), (), (rows, batch, units)] + [(batch, units)] * len(state_in) + \
        [(steps, batch, n_in)]
    dtypes = ["int32", "int32"] + ["float32"] * (len(shapes) - 2)
    loop_out = [m.t(f"while{k}", s, d) for k, (s, d) in enumerate(zip(shapes, dtypes))]
    main.operators.append(_op("WHILE", loop_in, loop_out, cond_subgraph_index=1,
                              body_subgraph_index=2))
    acc_out = loop_out[2]
    if sequences:
        y = m.op("TRANSPOSE", [acc_out, m.c("perm2", np.array([1, 0, 2], np.int32))],
                 [(batch, steps, units)])
    else:
        y = m.op("RESHAPE", [acc_out, m.c("shape_last", np.array([batch, units], np.int32))],
                 [(batch, units)])
    main.outputs = [y] + loop_out[3:3 + len(state_in)]

    cond = Subgraph(name="cond")
    cb = _Builder(model, cond)
    c_in = [cb.t(f"arg{k}", s, d) for k, (s, d) in enumerate(zip(shapes, dtypes))]
    limit = cb.c("limit", np.int32(steps if limit is None else limit))
    less1 = cb.op("LESS", [c_in[0], limit], [()], "bool")
    less2 = cb.op("LESS", [c_in[1], limit], [()], "bool")
    cond.inputs, cond.outputs = c_in, [cb.op("LOGICAL_AND", [less1, less2], [()], "bool")]

    body = Subgraph(name="body")
    b = _Builder(model, body)
    ins = [b.t(f"arg{k}", s, d) for k, (s, d) in enumerate(zip(shapes, dtypes))]
    body.inputs = ins
    i0, t, acc, h = ins[0], ins[1], ins[2], ins[3]
    xs = ins[-1]
    one = b.c("one", np.int32(1))
    i_next = b.op("ADD", [i0, one], [()], "int32")
    t_next = b.op("ADD", [t, one], [()], "int32")

    def w(name, *shape):
        return b.c(name, (rng.standard_normal(shape) * 0.4).astype(np.float32))

    def weights(name, *shape):
        if variant != "dynamic":
            return w(name, *shape)
        return b.int8(name, (rng.standard_normal(shape) * 0.4).astype(np.float32))
    fc = {"asymmetric_quantize_inputs": True} if variant == "dynamic" else {}
    width = gates * units
    h_width = 2 * units if variant == "reset_before" else width   # its candidate's own product
    hp = b.op("FULLY_CONNECTED", [h, weights("w_h", h_width, units), -1], [(batch, h_width)],
              **fc)
    x_t = b.op("GATHER", [xs, t], [(batch, n_in)], axis=0)
    x_bias = w("b_x", width) if bias else -1
    xp = b.op("FULLY_CONNECTED", [x_t, weights("w_x", width, n_in), x_bias], [(batch, width)],
              **fc)
    if kind == "lstm":
        c = ins[4]
        if batch == 1:   # as the corpus's file: the recurrent term reshaped to [width]
            hp = b.op("RESHAPE", [hp, b.c("flat", np.array([width], np.int32))], [(width,)])
        z = b.op("ADD", [xp, hp], [(batch, width)])
        if bias:
            z = b.op("ADD", [z, w("b", width)], [(batch, width)])
        gi, gf, gg, go = b.op("SPLIT", [one, z], [(batch, units)] * 4, num_splits=4)
        def sigmoid(v):
            if variant != "hard_sigmoid":
                return b.op("LOGISTIC", [v], [(batch, units)])
            # as TensorFlow lowers Keras's hard_sigmoid: relu6(v + 3) * (1/6)
            shifted = b.op("ADD", [v, b.c(f"three{v}", np.float32(3))], [(batch, units)],
                           fused_activation_function=3)
            return b.op("MUL", [shifted, b.c(f"sixth{v}", np.float32(1 / 6))], [(batch, units)])
        si, sf = sigmoid(gi), sigmoid(gf)
        fc = b.op("MUL", [sf, c], [(batch, units)])
        so = sigmoid(go)
        cell_act = "RELU" if variant == "relu" else "TANH"
        tg = b.op(cell_act, [gg], [(batch, units)])
        c_new = b.op("ADD", [fc, b.op("MUL", [si, tg], [(batch, units)])], [(batch, units)])
        h_new = b.op("MUL", [so, b.op("TANH", [c_new], [(batch, units)])], [(batch, units)])
        states = [h_new, c_new]
    elif kind == "rnn":   # SimpleRNN
        if variant == "relu_fused":   # as TensorFlow writes activation="relu"
            h_new = b.op("ADD", [xp, hp], [(batch, width)], fused_activation_function=1)
        else:
            z = b.op("ADD", [xp, hp], [(batch, width)])
            h_new = b.op("RELU" if variant == "relu" else "TANH", [z], [(batch, units)])
        states = [h_new]
    else:
        if bias:
            hp = b.op("ADD", [hp, w("b_h", h_width)], [(batch, h_width)])
        cols = [b.c(f"col{k}", np.array([0, k * units], np.int32)) for k in range(4)]
        strides = b.c("strides", np.array([1, 1], np.int32))
        hz = b.op("STRIDED_SLICE", [hp, cols[0], cols[1], strides], [(batch, units)],
                  begin_mask=3, end_mask=1)
        hr = b.op("STRIDED_SLICE", [hp, cols[1], cols[2], strides], [(batch, units)],
                  begin_mask=1, end_mask=1)
        if variant != "reset_before":
            hh = b.op("STRIDED_SLICE", [hp, cols[2], cols[0], strides], [(batch, units)],
                      begin_mask=1, end_mask=3)
        xz, xr, xh = b.op("SPLIT", [b.c("axis", np.int32(-1)), xp], [(batch, units)] * 3,
                          num_splits=3)
        z = b.op("LOGISTIC", [b.op("ADD", [xz, hz], [(batch, units)])], [(batch, units)])
        zh = b.op("MUL", [z, h], [(batch, units)])
        one_minus = b.op("SUB", [b.c("onef", np.float32(1)), z], [(batch, units)])
        r = b.op("LOGISTIC", [b.op("ADD", [xr, hr], [(batch, units)])], [(batch, units)])
        if variant == "reset_before":   # Keras's GRU(reset_after=False)
            rh = b.op("MUL", [r, h], [(batch, units)])
            reset = b.op("FULLY_CONNECTED", [rh, w("w_rh", units, units),
                                             w("b_rh", units) if bias else -1], [(batch, units)])
        else:
            reset = b.op("MUL", [r, hh], [(batch, units)])
        cand = b.op("ADD", [xh, reset], [(batch, units)])
        cand = b.op("TANH", [cand], [(batch, units)])
        h_new = b.op("ADD", [zh, b.op("MUL", [one_minus, cand], [(batch, units)])],
                     [(batch, units)])
        states = [h_new]
    if variant == "extra":
        b.op("MUL", [h_new, h_new], [(batch, units)])
    row = b.op("RESHAPE", [h_new, b.c("row", np.array([1, batch, units], np.int32))],
               [(1, batch, units)])
    if sequences:
        t1 = b.op("RESHAPE", [t, b.c("one_d", np.array([1], np.int32))], [(1,)], "int32")
        size1 = b.op("CONCATENATION", [t1, b.c("rest1", np.array([-1, -1], np.int32))], [(3,)],
                     "int32", axis=0)
        head = b.op("SLICE", [acc, b.c("zeros3", np.zeros(3, np.int32)), size1],
                    [(1, 1, 1)], signature=(-1, -1, -1))
        t2 = b.op("RESHAPE", [t_next, b.c("one_d2", np.array([1], np.int32))], [(1,)], "int32")
        begin2 = b.op("CONCATENATION", [t2, b.c("rest2", np.zeros(2, np.int32))], [(3,)],
                      "int32", axis=0)
        tail = b.op("SLICE", [acc, begin2, b.c("all3", np.full(3, -1, np.int32))],
                    [(1, batch, units)], signature=(-1, batch, units))
        acc_new = b.op("CONCATENATION", [head, row, tail], [(rows, batch, units)], axis=0)
    else:
        acc_new = row
    body.outputs = [i_next, t_next, acc_new] + states + [xs]
    model.subgraphs = [main, cond, body]
    return save(model)
