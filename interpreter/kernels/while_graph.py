"""How the Keras loop matcher (while_rnn.py) reads a WHILE body: a prepared plan's dataflow
(`_Graph`), commutative operands, the projections (FULLY_CONNECTED of the state or of the step's
input, with their biases), column pieces (SPLIT, STRIDED_SLICE) and sums of projections. Each
check raises NoMatch; `_Graph.used` collects the ops a match accounts for."""
from __future__ import annotations

import numpy as np

from .common import activation_code

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
        if activation_code(op.options):
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
    op, bias = _biased_fc(g, t)
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


def _biased_fc(g, t) -> tuple:
    """`t` = FULLY_CONNECTED(...) [+ float32 constant ...] (a plain FULLY_CONNECTED: no
    keep_num_dims, no shuffled weights): (the FULLY_CONNECTED op, the constants added)."""
    bias = []
    while g.producer.get(t) is not None and g.producer[t].op == "ADD":
        t, b = _either(g, g.op(t, "ADD").inputs, lambda v: v if g.const(v) is None else _no(),
                       lambda v: _const_vector(g, v))
        bias.append(b)
    op = g.op(t, "FULLY_CONNECTED")
    opts = op.options
    if getattr(opts, "keep_num_dims", False) or int(getattr(opts, "weights_format", 0) or 0):
        raise NoMatch("FULLY_CONNECTED with keep_num_dims or shuffled weights")
    return op, bias


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
