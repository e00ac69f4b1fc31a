"""Keras LSTM, GRU and SimpleRNN layers as TensorFlow's converter writes them (a WHILE over the
time steps), run as one sequence kernel.

The converter lowers `keras.layers.LSTM`/`GRU` to a WHILE whose variables are two step counters,
the output TensorArray (emulated: the body rebuilds it as CONCATENATION(SLICE(acc, :t), h,
SLICE(acc, t+1:)), sizes known only while running), the states and the input sequence. Run op by
op that is ~25 kernel calls a step plus a re-prepare of the dynamic SLICEs; here the body is
recognized op by op (every op of the body must belong to the cell, else the loop runs as it is),
and the loop runs as: the input projection for all time steps in one GEMM, then per step one
matmul with the recurrent weights and the gates in a few whole-array ufuncs.

Here: the loop's plumbing (the cond's bounds, the counters, the TensorArray, the budget); the
body's reading is while_graph.py's, the cells while_cells.py's, the kernel (and its arithmetic)
rnn_loop.py's. Under BUILTIN_REF, with delegates or with experimental_preserve_all_tensors the
loop always runs op by op.
"""
from __future__ import annotations

from .rnn_loop import Sequence
from .while_cells import _gru, _lstm, _simple_rnn
from .while_graph import F32, NoMatch, _Cell, _Graph

__all__ = ["NoMatch", "match"]


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
