"""Keras LSTM, GRU and SimpleRNN layers as TensorFlow's converter writes them (a WHILE over the
time steps), run as one sequence kernel.

The converter lowers `keras.layers.LSTM`/`GRU` to a WHILE whose variables are two step counters,
the output TensorArray (emulated: the body rebuilds it as CONCATENATION(SLICE(acc, :t), h,
SLICE(acc, t+1:)), sizes known only while running), the states and the input sequence. Run op by
op that is ~25 kernel calls a step plus a re-prepare of the dynamic SLICEs; here the body is
recognized op by op (every op of the body must belong to the cell, else the loop runs as it is),
and the loop runs as: the input projection for all time steps in one GEMM, then per step one
matmul with the recurrent weights and the gates in a few whole-array ufuncs.

The kernel itself (and its arithmetic) is rnn_loop.py's. Under BUILTIN_REF the loop always
runs op by op.
"""
from __future__ import annotations

import numpy as np

from .rnn_loop import Sequence

F32 = np.float32


class NoMatch(Exception):
    """The body is not a Keras LSTM/GRU cell (the WHILE runs its subgraphs as they are)."""


class _Graph:
    """A prepared subgraph plan's dataflow, as the matcher reads it."""

    def __init__(self, plan):
        self.plan, self.sg = plan, plan.sg
        self.producer = {t: op for op in plan.sg.operators for t in op.outputs}
        self.index = {id(op): oi for oi, op in enumerate(plan.sg.operators)}
        self.var = {t: k for k, t in enumerate(plan.sg.inputs)}
        self.used: set = set()   # ops the match has accounted for
        self.proj: dict = {}     # "x"/"h" -> (W [out, in] float32 or None, bias, FC step)

    def live_ops(self) -> int:
        """The ops that run (not folded at prepare: their outputs are constants)."""
        return sum(1 for op in self.sg.operators
                   if not op.outputs or any(self.const(t) is None for t in op.outputs))

    def const(self, t):
        if t < 0 or t in self.var:
            return None
        data = self.plan.infos[t].data
        return None if data is None else np.asarray(data)

    def op(self, t, *names):
        """The op writing `t`, which must be one of `names` with no fused activation."""
        op = self.producer.get(t)
        if op is None or t in self.var or self.const(t) is not None or op.op not in names:
            raise NoMatch(f"tensor {t} is not written by {'/'.join(names)}")
        if int(getattr(op.options, "fused_activation_function", 0) or 0):
            raise NoMatch(f"{op.op} writing tensor {t} has a fused activation")
        self.used.add(id(op))
        return op

    def scalar(self, t, value) -> bool:
        c = self.const(t)
        return c is not None and c.size == 1 and c.reshape(-1)[0] == value

    def shape(self, t) -> tuple:
        return tuple(self.plan.infos[t].shape)

    def step(self, op):
        """The prepared (run, args) of `op`, or None when it was folded."""
        oi = self.index[id(op)]
        for k, s in enumerate(self.plan.step_ops):
            if s == oi:
                return self.plan.steps[k]
        return None


def _either(g, pair, first, second):
    """Try `first` and `second` on the operands of a commutative op in both orders (the ops a
    failed order visited are forgotten); returns their results."""
    a, b = pair
    for x, y in ((a, b), (b, a)):
        used, proj = set(g.used), dict(g.proj)
        try:
            return first(x), second(y)
        except NoMatch:
            g.used, g.proj = used, proj
    raise NoMatch("neither operand order matches")


def _bounds(cond) -> list:
    """The cond as AND of LESS(variable, constant): [(variable index, limit)]."""
    g = _Graph(cond)

    def terms(t):
        op = g.op(t, "LESS", "LOGICAL_AND")
        if op.op == "LOGICAL_AND":
            return terms(op.inputs[0]) + terms(op.inputs[1])
        k, limit = g.var.get(op.inputs[0]), g.const(op.inputs[1])
        if k is None or limit is None or limit.size != 1 or limit.dtype.kind != "i":
            raise NoMatch("the condition is not variable < constant")
        return [(k, int(limit.reshape(-1)[0]))]
    found = terms(cond.sg.outputs[0])
    if len(g.used) != g.live_ops():
        raise NoMatch("the cond has other ops")
    return found


def _fits(node, body, cell, proj) -> None:
    """The fused loop's buffers (the input projections of every step) within the interpreter's
    allocation budget, else MemoryBudgetError (the loop then runs op by op, budgeted there)."""
    from ..budget import check
    steps, batch = body.infos[body.sg.inputs[cell.x]].shape[:2]
    width = len(proj["x"][1])
    copies = 2 if proj["x"][2] is not None else 1
    check(node, int(steps) * int(batch) * width * 4 * copies,
          f"the fused loop's input projections [{steps}, {batch}, {width}]")


class _Cell:
    """What the matcher found: loop variable roles, weights (float or the body's FC steps)."""

    def __init__(self, kind):
        self.kind = kind            # "lstm" or "gru"
        self.counters = []          # variable indices that count up by 1
        self.passed = []            # variables passed through unchanged
        self.h = self.c = self.acc = self.x = self.t = None
        self.acc_mode = None        # "sequence" (acc[t] = h) or "last" (acc = h reshaped)
        self.gates = {}             # gate name -> column range (lo, hi) of its projection
        self.extra_bias = None      # LSTM: constants added to the gates' sum
        self.reset_w = None         # GRU with reset_after=False: (W [H, H], bias) of r * h
        self.activation = "TANH"    # SimpleRNN: TANH or RELU


def _projection(g, t, cell, x_or_h: str | None = None):
    """`t` = FULLY_CONNECTED(h or GATHER(X, t), W, b) [+ constant ...]: records it in cell.proj;
    returns "x" or "h"."""
    bias = []
    while True:
        op = g.producer.get(t)
        if op is not None and op.op == "ADD":
            op = g.op(t, "ADD")
            (inner, b) = _either(g, op.inputs, lambda v: v if g.const(v) is None else _no(),
                                 lambda v: _const_vector(g, v))
            bias.append(b)
            t = inner
            continue
        break
    op = g.op(t, "FULLY_CONNECTED")
    opts = op.options
    if getattr(opts, "keep_num_dims", False) or int(getattr(opts, "weights_format", 0) or 0):
        raise NoMatch("FULLY_CONNECTED with keep_num_dims or shuffled weights")
    a = op.inputs[0]
    if g.var.get(a) == cell.h:
        which = "h"
    else:
        gather = g.op(a, "GATHER")
        if int(gather.options.axis or 0) != 0 or int(getattr(gather.options, "batch_dims", 0)
                                                     or 0):
            raise NoMatch("GATHER not along the time axis")
        x, tv = g.var.get(gather.inputs[0]), g.var.get(gather.inputs[1])
        if x is None or tv is None or (cell.x is not None and (x, tv) != (cell.x, cell.t)) \
                or g.shape(gather.inputs[1]) != () or len(g.shape(a)) != 2:
            raise NoMatch("GATHER of something other than the sequence at the step")
        cell.x, cell.t, which = x, tv, "x"
    if x_or_h is not None and which != x_or_h or which in g.proj:
        raise NoMatch("the projections are not one of the input and one of the state")
    w = g.const(op.inputs[1])
    if w is None or w.ndim != 2 or len(g.shape(a)) != 2 or \
            g.shape(op.outputs[0]) != (g.shape(a)[0], w.shape[0]):
        raise NoMatch("FULLY_CONNECTED weights not constant, or not [batch, n] -> [batch, units]")
    fc_bias = g.const(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] >= 0 else None
    if len(op.inputs) > 2 and op.inputs[2] >= 0 and fc_bias is None:
        raise NoMatch("FULLY_CONNECTED bias not constant")
    hybrid = w.dtype != F32
    if fc_bias is not None and not hybrid:   # a hybrid kernel adds its own bias
        bias.append(fc_bias)
    total = np.zeros(w.shape[0], F32)
    for b in bias:
        if b.dtype != F32 or b.size != w.shape[0]:
            raise NoMatch("a bias of another size or type")
        total = total + b.reshape(-1)
    if not hybrid:
        g.proj[which] = (w, total, None)
    else:   # dynamic-range: the body's own prepared kernel
        step = g.step(op)
        if step is None or w.dtype != np.int8 or g.plan.infos[a].dtype != F32:
            raise NoMatch("FULLY_CONNECTED with weights of a type the fused loop cannot run")
        g.proj[which] = (None, total, (step, op))
    return which


def _no():
    raise NoMatch("a constant")


def _const_vector(g, t):
    c = g.const(t)
    if c is None or c.dtype != F32:
        raise NoMatch("not a float32 constant")
    return c.astype(F32)


def _columns(g, t):
    """`t` = columns [lo, hi) of a [B, width] tensor, by SPLIT or a plain STRIDED_SLICE:
    (source tensor, lo, hi)."""
    op = g.op(t, "SPLIT", "STRIDED_SLICE")
    if op.op == "SPLIT":
        axis, src = g.const(op.inputs[0]), op.inputs[1]
        rank = len(g.shape(src))
        if axis is None or axis.size != 1 or int(axis.reshape(-1)[0]) % rank != rank - 1:
            raise NoMatch("SPLIT not along the last axis")
        n = int(op.options.num_splits)
        size = g.shape(src)[-1] // n
        k = op.outputs.index(t)
        return src, k * size, (k + 1) * size
    src = op.inputs[0]
    shape = g.shape(src)
    begin, end, strides = (g.const(v) for v in op.inputs[1:4])
    o = op.options
    if len(shape) != 2 or any(v is None for v in (begin, end, strides)) or \
            strides.tolist() != [1, 1] or o.ellipsis_mask or o.new_axis_mask or \
            o.shrink_axis_mask or getattr(o, "offset", False):
        raise NoMatch("not a plain 2-D STRIDED_SLICE")
    b, e = [], []
    for axis in range(2):
        lo = 0 if o.begin_mask >> axis & 1 else int(begin[axis]) % (shape[axis] + 1)
        hi = shape[axis] if o.end_mask >> axis & 1 else int(end[axis])
        hi = hi + shape[axis] if hi < 0 else min(hi, shape[axis])
        b.append(lo)
        e.append(hi)
    if (b[0], e[0]) != (0, shape[0]):
        raise NoMatch("STRIDED_SLICE of some rows")
    return src, b[1], e[1]


def _roles(g, body, bounds) -> tuple:
    """Counters, pass-through variables and the rest (the cell's), from the body's outputs."""
    counters, passed, rest = [], [], []
    for k, (t_in, t_out) in enumerate(zip(body.sg.inputs, body.sg.outputs)):
        if t_in == t_out:
            passed.append(k)
            continue
        op = g.producer.get(t_out)
        if op is not None and op.op == "ADD" and op.inputs[0] == t_in and \
                g.scalar(op.inputs[1], 1) and g.const(op.inputs[1]).dtype.kind == "i":
            g.op(t_out, "ADD")
            counters.append(k)
        else:
            rest.append(k)
    if any(k not in counters for k, _ in bounds):
        raise NoMatch("the cond bounds a variable that is not a counter")
    return counters, passed, rest


def _acc(g, cell, t_acc_out, t_h_out, t_next):
    """The output TensorArray's update: acc[t] = h (sequence) or acc = h reshaped (last)."""
    a_shape, h_shape = g.shape(t_acc_out), g.shape(t_h_out)
    op = g.op(t_acc_out, "RESHAPE", "CONCATENATION")
    if op.op == "RESHAPE":
        if op.inputs[0] != t_h_out or a_shape != (1,) + h_shape:
            raise NoMatch("the TensorArray is not h")
        cell.acc_mode = "last"
        return
    acc_in = g.sg.inputs[cell.acc]
    if int(op.options.axis) != 0 or len(op.inputs) != 3:
        raise NoMatch("not a TensorArray write")
    first, mid, last = op.inputs
    r = g.op(mid, "RESHAPE")
    if r.inputs[0] != t_h_out or g.shape(mid) != (1,) + h_shape:
        raise NoMatch("the TensorArray row is not h")
    rank = len(a_shape)

    def row_index(v, step):   # CONCATENATION(RESHAPE(step, [1]), constant rest)
        cat = g.op(v, "CONCATENATION")
        if int(cat.options.axis) != 0 or len(cat.inputs) != 2:
            raise NoMatch("not [t, ...]")
        rs = g.op(cat.inputs[0], "RESHAPE")
        rest = g.const(cat.inputs[1])
        if rs.inputs[0] != step or g.shape(cat.inputs[0]) != (1,) or rest is None:
            raise NoMatch("not [t, ...]")
        return rest.tolist()
    s1, s2 = g.op(first, "SLICE"), g.op(last, "SLICE")
    begin1, size2 = g.const(s1.inputs[1]), g.const(s2.inputs[2])
    if s1.inputs[0] != acc_in or s2.inputs[0] != acc_in or begin1 is None or size2 is None \
            or begin1.tolist() != [0] * rank or size2.tolist() != [-1] * rank \
            or row_index(s1.inputs[2], g.sg.inputs[cell.t]) != [-1] * (rank - 1) \
            or row_index(s2.inputs[1], t_next) != [0] * (rank - 1):
        raise NoMatch("not acc[:t], h, acc[t+1:]")
    cell.acc_mode = "sequence"


def _lstm(g, cell, rest) -> None:
    used = set(g.used)
    for k_h in rest:
        for k_c in rest:
            if k_c == k_h:
                continue
            try:
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
            pieces[name] = g.op(t, "LOGISTIC").inputs[0]
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


def _sum(g, cell, z, width: int) -> np.ndarray:
    """`z` = the input projection + the state projection + constants (RESHAPEs that only drop a
    leading 1 pass): records the projections, returns the constants' sum. `z` may be a list of
    tensors whose sum is meant."""
    leaves = []

    def flatten(t):
        op = g.producer.get(t)
        if op is not None and op.op == "ADD" and g.const(t) is None:
            g.op(t, "ADD")
            for v in op.inputs:
                flatten(v)
        elif op is not None and op.op == "RESHAPE" and g.const(t) is None:
            inner = g.op(t, "RESHAPE").inputs[0]
            if g.shape(inner) != (1, width) or g.shape(t) != (width,):
                raise NoMatch("a RESHAPE in the gates' sum")
            leaves.append(inner)
        else:
            leaves.append(t)
    for t in z if isinstance(z, list) else [z]:
        flatten(t)
    extra = np.zeros(width, F32)
    kinds = []
    for t in leaves:
        c = g.const(t)
        if c is not None:
            if c.dtype != F32 or c.shape not in ((width,), (1, width)):
                raise NoMatch("a constant of another shape in the gates' sum")
            extra = extra + c.reshape(-1)
        else:
            kinds.append(_projection(g, t, cell))
    if sorted(kinds) != ["h", "x"]:
        raise NoMatch("the gates' sum is not one input and one state projection")
    return extra


def _simple_rnn(g, cell, rest) -> None:
    """h' = tanh(x W + h R + b): Keras's SimpleRNN (its default activation; or relu)."""
    cell.h = rest[0]
    out = g.sg.outputs[cell.h]
    last = g.producer.get(out)
    if last is not None and last.op == "ADD" and g.const(out) is None and \
            int(getattr(last.options, "fused_activation_function", 0) or 0) == 1:
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
        bias = []
        while g.producer.get(v) is not None and g.producer[v].op == "ADD":
            inner, b = _either(g, g.op(v, "ADD").inputs,
                               lambda u: u if g.const(u) is None else _no(),
                               lambda u: _const_vector(g, u))
            bias.append(b)
            v = inner
        fc = g.op(v, "FULLY_CONNECTED")
        if getattr(fc.options, "keep_num_dims", False) or \
                int(getattr(fc.options, "weights_format", 0) or 0):
            raise NoMatch("FULLY_CONNECTED with keep_num_dims or shuffled weights")
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


def match(node, cond, body):
    """A fused sequence kernel for the WHILE `node` over `cond` and `body` (prepared plans), or
    raise NoMatch. A graph the matcher's reading did not foresee (an option missing, a rank it
    does not expect) is no cell: NoMatch, and the loop runs as it is."""
    if body.runtime.reference or body.runtime.delegates or body.runtime.preserve_all:
        raise NoMatch("BUILTIN_REF, delegates or experimental_preserve_all_tensors (the body's "
                      "tensors are read): the loop runs op by op")
    try:
        return _match(node, cond, body)
    except NoMatch:
        raise
    except Exception as e:
        raise NoMatch(f"{type(e).__name__}: {e}") from None


def _match(node, cond, body):
    bounds = _bounds(cond)
    g = _Graph(body)
    counters, passed, rest = _roles(g, body, bounds)
    counter_ops = set(g.used)
    for kind, fn, n_rest in (("lstm", _lstm, 3), ("gru", _gru, 2), ("rnn", _simple_rnn, 2)):
        if len(rest) != n_rest:
            continue
        for k_acc in rest:
            cell = _Cell(kind)
            cell.counters, cell.passed, cell.acc = counters, passed, k_acc
            g.used, g.proj = set(counter_ops), {}
            try:
                fn(g, cell, [k for k in rest if k != k_acc])
                if cell.t not in counters or cell.x not in passed:
                    raise NoMatch("the step or the sequence is not a loop variable")
                _acc(g, cell, body.sg.outputs[k_acc], body.sg.outputs[cell.h],
                     body.sg.outputs[cell.t])
            except NoMatch:
                continue
            if len(g.used) != g.live_ops():
                continue   # the body computes more than the cell
            cells = [cell.h, cell.acc, cell.x] + ([cell.c] if kind == "lstm" else [])
            if any(body.infos[body.sg.inputs[k]].dtype != F32 for k in cells) or \
                    len(body.infos[body.sg.inputs[cell.h]].shape) != 2:
                continue
            _fits(node, body, cell, g.proj)
            return Sequence(cell, dict(g.proj), bounds, body)
    raise NoMatch("not a Keras LSTM/GRU/SimpleRNN loop")
