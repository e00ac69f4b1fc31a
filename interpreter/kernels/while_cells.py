"""The cells the Keras loop matcher (while_rnn.py) knows, as TensorFlow lowers them: LSTM (its
gates LOGISTIC or Keras's hard_sigmoid), GRU (reset_after True or False) and SimpleRNN (tanh or
relu). Each records the cell's variables,
gate columns and projections in a `_Cell` (or raises NoMatch)."""
from __future__ import annotations

import numpy as np

from edgelite.schema.ops import Activation

from .common import activation_code
from .while_graph import F32, NoMatch, _biased_fc, _columns, _either, _projection, _sum


def _lstm(g, cell, rest) -> None:
    used = set(g.used)
    for k_h in rest:
        for k_c in rest:
            if k_c == k_h:
                continue
            try:
                cell.__dict__.pop("hard_sigmoid", None)
                _lstm_with(g, cell, k_h, k_c)
                cell.h, cell.c = k_h, k_c
                return
            except NoMatch:
                g.used, g.proj = set(used), {}
                cell.gates.clear()
    raise NoMatch("no LSTM cell")


def _lstm_with(g, cell, k_h, k_c) -> None:
    outs, ins = g.sg.outputs, g.sg.inputs
    cell.h = k_h
    pieces = {}

    def sig(name):
        def check(t):
            op = g.producer.get(t)
            if op is not None and op.op == "MUL":
                pieces[name] = _hard_sigmoid(g, cell, t)
            else:
                pieces[name] = g.op(t, "LOGISTIC").inputs[0]
                _gate_kind(cell, None)
        return check

    def tanh_of(name=None, of=None):
        def check(t):
            inner = g.op(t, "TANH").inputs[0]
            if of is not None and inner != of:
                raise NoMatch("tanh of something else")
            if name:
                pieces[name] = inner
        return check

    def is_var(k):
        def check(t):
            if t != ins[k]:
                raise NoMatch("not the state")
        return check
    _either(g, g.op(outs[k_h], "MUL").inputs, sig("o"), tanh_of(of=outs[k_c]))
    fc, ig = _either(g, g.op(outs[k_c], "ADD").inputs, lambda t: t, lambda t: t)
    used = set(g.used)
    try:
        _either(g, g.op(fc, "MUL").inputs, sig("f"), is_var(k_c))
        _either(g, g.op(ig, "MUL").inputs, sig("i"), tanh_of("g"))
    except NoMatch:
        g.used = used
        _either(g, g.op(ig, "MUL").inputs, sig("f"), is_var(k_c))
        _either(g, g.op(fc, "MUL").inputs, sig("i"), tanh_of("g"))
    srcs = set()
    for name, t in pieces.items():
        src, lo, hi = _columns(g, t)
        srcs.add(src)
        cell.gates[name] = (lo, hi)
    if len(srcs) != 1 or len(pieces) != 4:
        raise NoMatch("the gates are not pieces of one sum")
    z = srcs.pop()
    width = g.shape(z)[-1]
    if g.shape(z) != (g.shape(ins[k_h])[0], width):
        raise NoMatch("the gates' sum is not [batch, 4 units]")
    if sorted(cell.gates.values()) != [(j * width // 4, (j + 1) * width // 4) for j in range(4)]:
        raise NoMatch("the gates are not the sum's four quarters")
    cell.extra_bias = _sum(g, cell, z, width)


def _gate_kind(cell, kind) -> None:
    """Every sigmoid gate of a cell is the same function: LOGISTIC (None) or one hard_sigmoid."""
    seen = getattr(cell, "hard_sigmoid", False)
    if seen is not False and seen != kind:
        raise NoMatch("the gates mix LOGISTIC and hard_sigmoid")
    cell.hard_sigmoid = kind


def _hard_sigmoid(g, cell, t):
    """`t` = MUL(ADD(x, shift) with RELU6 fused, scale), scalar float32 constants (Keras's
    hard_sigmoid as TensorFlow lowers it, relu6(x + 3) / 6): x; records (shift, scale)."""
    mul = g.op(t, "MUL")
    shifted, scale = _either(g, mul.inputs, lambda v: v, lambda v: _scalar32(g, v))
    add = g.producer.get(shifted)
    if add is None or add.op != "ADD" or g.const(shifted) is not None or \
            activation_code(add.options) != Activation.RELU6:
        raise NoMatch("not relu6(x + shift) * scale")
    g.used.add(id(add))
    x, shift = _either(g, add.inputs, lambda v: v if g.const(v) is None else _no_const(),
                       lambda v: _scalar32(g, v))
    _gate_kind(cell, (shift, scale))
    return x


def _scalar32(g, t) -> float:
    c = g.const(t)
    if c is None or c.size != 1 or c.dtype != F32:
        raise NoMatch("not a float32 scalar constant")
    return float(c.reshape(-1)[0])


def _no_const():
    raise NoMatch("a constant")


def _simple_rnn(g, cell, rest) -> None:
    """h' = tanh(x W + h R + b): Keras's SimpleRNN (its default activation; or relu)."""
    cell.h = rest[0]
    out = g.sg.outputs[cell.h]
    last = g.producer.get(out)
    if last is not None and last.op == "ADD" and g.const(out) is None and \
            activation_code(last.options) == Activation.RELU:
        g.used.add(id(last))   # the sum's last ADD with RELU fused (as TensorFlow writes it)
        cell.activation, z = "RELU", list(last.inputs)
    else:
        act = g.op(out, "TANH", "RELU")
        cell.activation, z = act.op, act.inputs[0]
    width = g.shape(g.sg.inputs[cell.h])[-1]
    if g.shape(out) != g.shape(g.sg.inputs[cell.h]):
        raise NoMatch("the sum is not as wide as the state")
    cell.gates["h"] = (0, width)
    cell.extra_bias = _sum(g, cell, z, width)


def _gru(g, cell, rest) -> None:
    _gru_with(g, cell, rest[0])


def _gru_with(g, cell, k_h) -> None:
    """h' = z * h + (1 - z) * tanh(x_h + r * h_h), z = σ(x_z + h_z), r = σ(x_r + h_r)
    (Keras's GRU with reset_after, as TensorFlow lowers it); with reset_after=False the
    candidate is tanh(x_h + (r * h) W_h + b_h)."""
    outs, ins = g.sg.outputs, g.sg.inputs
    cell.h = k_h
    h_in = ins[k_h]
    found = {}

    def piece(key):   # a column range of a projection
        def check(t):
            src, lo, hi = _columns(g, t)
            which = found.get(("src", src)) or _projection(g, src, cell)
            found[("src", src)] = which
            found[key] = (which, lo, hi)
        return check

    def gate(name):   # σ(x_piece + h_piece)
        def check(t):
            a = g.op(g.op(t, "LOGISTIC").inputs[0], "ADD")
            _either(g, a.inputs, piece(name + "x"), piece(name + "h"))
            found[name] = t
        return check

    def one_minus(name):
        def check(t):
            s = g.op(t, "SUB")
            if not g.scalar(s.inputs[0], 1.0) or s.inputs[1] != found.get(name):
                raise NoMatch("not 1 - z")
        return check

    def is_h(t):
        if t != h_in:
            raise NoMatch("not h")

    def candidate(t):   # tanh(x_piece + r * h_piece), or reset_after=False's below
        a = g.op(g.op(t, "TANH").inputs[0], "ADD")

        def reset_term(v):
            op = g.producer.get(v)
            if op is not None and op.op == "MUL":
                _either(g, g.op(v, "MUL").inputs, gate("r"), piece("hh"))
            else:
                reset_before(v)
        _either(g, a.inputs, piece("hx"), reset_term)

    def reset_before(v):   # FULLY_CONNECTED(r * h, W, b) [+ constants]: reset_after=False
        fc, bias = _biased_fc(g, v)
        _either(g, g.op(fc.inputs[0], "MUL").inputs, gate("r"), is_h)
        w = g.const(fc.inputs[1])
        has_b = len(fc.inputs) > 2 and fc.inputs[2] >= 0
        if has_b:
            bias.append(g.const(fc.inputs[2]))
        units = g.shape(h_in)[-1]
        if w is None or w.dtype != F32 or w.shape != (units, units) or \
                any(b is None or b.dtype != F32 or b.size != units for b in bias):
            raise NoMatch("the reset projection's weights are not float32 constants")
        total = np.zeros(units, F32)
        for b in bias:
            total = total + b.reshape(-1)
        cell.reset_w = (w, total)

    left, right = _either(g, g.op(outs[k_h], "ADD").inputs, lambda t: t, lambda t: t)
    used = set(g.used)
    for zh, rest in ((left, right), (right, left)):
        g.used = set(used)
        try:
            _either(g, g.op(zh, "MUL").inputs, gate("z"), is_h)
            _either(g, g.op(rest, "MUL").inputs, one_minus("z"), candidate)
            break
        except NoMatch:
            found = {k: v for k, v in found.items() if k[0] == "src"}
            continue
    else:
        raise NoMatch("not z * h + (1 - z) * candidate")
    names = [("zx", "x"), ("zh", "h"), ("rx", "x"), ("rh", "h"), ("hx", "x")]
    if cell.reset_w is None:
        names.append(("hh", "h"))
    for name, side in names:
        which, lo, hi = found[name]
        if which != side:
            raise NoMatch("a gate's piece from the wrong projection")
        cell.gates[name] = (lo, hi)
    if sorted(g.proj) != ["h", "x"]:
        raise NoMatch("not one input and one state projection")
    units = g.shape(h_in)[-1]
    for side in "xh":
        spans = sorted(v for k, v in cell.gates.items() if k[1] == side)
        if any(hi - lo != units for lo, hi in spans) or \
                any(a[1] > b[0] for a, b in zip(spans, spans[1:])):
            raise NoMatch("the gates' pieces overlap or are not as wide as the state")
