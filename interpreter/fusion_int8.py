"""Fusion of int8 chains (issue 17): a convolution, a pooled convolution or a FULLY_CONNECTED
(the default resolver's fast kernels, bound to the plan's arrays) whose int8 output only a 1x1
CONV_2D or a FULLY_CONNECTED reads (through a RESHAPE or not) writes that op's float32 input
patches itself, as floor(clip(s)), and the int8 tensor between them is never written
(kernels/int8_stage.py). The producer's values arrive lifted by its requantization's 128 (int8
floors held as uint8); the consumer is prepared again with the lift in its input zero point
(the same integer sums). Chains run on: conv -> conv -> FULLY_CONNECTED is one step.

Not under BUILTIN_REF (fusion.py fuses nothing there); a kernel that cannot bind a stage after
all (plan.bind_step) runs the chain op by op through int8 buffers of its own."""
from __future__ import annotations

import numpy as np

from .fusion import _only_reader
from .kernels.int8_stage import CLIP, copy
from .kernels.joined_steps import joined
from .kernels.steps import call
from .plan import ALIAS_OPS, bind_step

CONSUMERS = ("CONV_2D", "FULLY_CONNECTED")
I8 = np.dtype(np.int8)


def _lift(run) -> int | None:
    """The lift of a producer's stage values: 128 (requantized convolutions), 0 (the
    FULLY_CONNECTED's floors); None when it gives no stage."""
    if not getattr(run, "stage_out", False):
        return None
    return 0 if getattr(run, "stage_lift_zero", False) else 128


def _next_consumer(ctx, j, t):
    """(alias links, consumer link) when the only reader of tensor t (specs[j], or after one
    RESHAPE-like op read only by it) is an int8 CONV_2D / FULLY_CONNECTED's input 0."""
    aliases = []
    nxt = ctx.link(j) if j < len(ctx.specs) else None
    if nxt is not None and nxt.node.op in ALIAS_OPS and nxt.ins[:1] == [t] \
            and len(nxt.outs) == 1 and _only_reader(ctx, t):
        aliases.append(nxt)
        t = nxt.outs[0]
        nxt = ctx.link(j + 1) if j + 1 < len(ctx.specs) else None
    if nxt is None or nxt.node.op not in CONSUMERS or nxt.ins[:1] != [t] \
            or not _only_reader(ctx, t) or any(u == t for u in nxt.ins[1:]) \
            or nxt.node.inputs[0].dtype != I8:
        return None
    return aliases, nxt


def _lifted(link, lift: int):
    """The consumer's kernel prepared for its input as float32 values + lift, or None."""
    if lift == 0:
        run = link.run
    else:
        from .kernels import conv_int8, fully_connected_int8
        prepare = conv_int8.conv_2d if link.node.op == "CONV_2D" else \
            fully_connected_int8.fully_connected
        try:
            run = prepare(link.node, input_lift=lift)
        except Exception:      # (a budget refusing its buffers): no chain
            return None
    return run if getattr(run, "stage_in", False) else None


def int8_chain(ctx, i):
    first = ctx.link(i)
    if first is None or len(first.outs) != 1 or _lift(first.run) is None \
            or first.node.outputs[0].dtype != I8:
        return None
    consumers, j, prev = [], i + 1, first      # [(original run, lifted run, link, lift)]
    while True:
        lift = _lift(prev.run if prev is first else consumers[-1][1])
        found = None if lift is None else _next_consumer(ctx, j, prev.outs[0])
        if found is None:
            break
        aliases, link = found
        lifted = _lifted(link, lift)
        if lifted is None:
            break
        consumers.append((link.run, lifted, link, lift))
        j += len(aliases) + 1
        prev = link
        if len(link.outs) != 1 or link.node.outputs[0].dtype != I8:
            break
    if not consumers:
        return None
    run = _chain_run(first, consumers)
    return (first.oi, run, list(first.ins), list(prev.outs)), j - i


def _chain_run(first, consumers):
    """run(*first's inputs, last output): op by op through int8 buffers of its own, each
    consumer (prepared for lifted input) reading x + lift as uint8 (the int8 bits with the top
    one flipped), the same bits as the bound chain; bound (plan.bind_step), one step of the
    stages' calls (_chain_step)."""
    n_in = len(first.ins)
    # Each link's int8 tensor, private (the op-by-op run's), and the consumer's view of it
    # (lifted: as uint8 x + 128).
    between = [np.empty(first.node.outputs[0].shape, np.int8)] + \
        [np.empty(link.node.outputs[0].shape, np.int8) for _, _, link, _ in consumers[:-1]]
    views = [b.reshape(link.node.inputs[0].shape)
             for b, (_, _, link, _) in zip(between, consumers)]
    lifted_views = [np.empty(v.shape, np.uint8) if lift else None
                    for v, (_, _, _, lift) in zip(views, consumers)]
    rests = [(None,) * (len(link.ins) - 1) for _, _, link, _ in consumers]
    top = np.uint8(128)

    def run(*args):
        ins, out = args[:n_in], args[n_in:]
        first.run(*ins, between[0])
        for k, (_, lifted, _, lift) in enumerate(consumers):
            dest = out if k == len(consumers) - 1 else (between[k + 1],)
            x = views[k]
            if lift:
                x = np.bitwise_xor(x.view(np.uint8), top, out=lifted_views[k])
            lifted(x, *rests[k], *dest)

    def bind(*args):
        ins, out = args[:n_in], args[n_in:]
        bound = bind_step(first.run, [*ins, between[0]])
        stages = [getattr(bound, "stage", None)]
        for k, (_, lifted, _, _) in enumerate(consumers):
            dest = list(out) if k == len(consumers) - 1 else [between[k + 1]]
            bound = bind_step(lifted, [views[k], *rests[k], *dest])
            stages.append(getattr(bound, "stage", None))
        if any(s is None for s in stages) or any(s.head is None for s in stages[1:]):
            return None
        for a, b in zip(stages, stages[1:]):
            if a.s.size != b.head.size:
                return None
        return _chain_step(stages)

    run.bind = bind
    return run


def _chain_step(stages):
    """The chain's calls as one bound step (kernels/steps.joined): the first stage's copies
    and compute, each link's clip into the next stage's patches and floor there and that
    stage's compute, the last stage's ending. A step of calls (or a line of Python, where the
    last is one): plan.compile_steps writes it into run_steps, no frame for the chain or its
    stages; numpy's ufuncs and the kernels' clip looked up on each call (by (module, name)),
    as tests/interpreter/numpy_calls.py counts them."""
    first, calls = stages[0], []
    calls += [copy(dest, src) for dest, src in first.copies]
    calls += first.compute
    for a, b in zip(stages, stages[1:]):
        calls += [call(CLIP, a.s.reshape(b.head.shape), a.lo, a.hi, b.head),
                  call((np, "floor"), b.head, b.head)]
        calls += b.compute
    return joined(*calls, *stages[-1].ending())
