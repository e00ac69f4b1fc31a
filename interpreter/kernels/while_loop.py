"""WHILE's loop: the cond and body plans' steps run directly, the loop state swapped by reference.

A loop iteration through `SubgraphPlan.call` copies every loop variable twice (into the cond's
inputs, into the body's inputs), copies the body's outputs once more, and enters the plan's error
handling and `np.errstate` twice. Here the state lives in two sets of arrays, the body's input
arrays (A) and its output arrays (B): the body's steps as prepared read A and write B; a second
copy of them, bound the other way round, reads B and writes A; the cond's steps are bound to read
A or B. An iteration then runs the steps alone: no copies, nothing re-checked. (LiteRT's WHILE
shares buffers between the body's outputs and inputs the same way where it can.)

The swap needs a static loop: no step whose shapes are known only while running, each body output
written by a body step (or the same tensor as its input: a loop-invariant variable, which stays
put), no output that is another variable's input, and no other array of the plans sharing memory
with the state. Otherwise the loop runs through `SubgraphPlan.call`, copying (`Loop.mode` says
which, and why: the CI check reads it).
"""
from __future__ import annotations

import numpy as np

from .registry import KernelError


class _Swapped:
    """The two bindings of a static loop's steps."""

    def __init__(self, cond, body, a: list, b: list):
        self.a, self.b = a, b
        swap = {id(x): y for x, y in zip(a, b) if x is not y}
        swap.update({id(y): x for x, y in zip(a, b) if x is not y})
        to_a = {id(cond.arrays[t]): x for t, x in zip(cond.sg.inputs, a)}
        to_b = {id(cond.arrays[t]): y for t, y in zip(cond.sg.inputs, b)}
        self.body_a = _rebind(body.steps, {})
        self.body_b = _rebind(body.steps, swap)
        self.cond_a = _rebind(cond.steps, to_a)
        self.cond_b = _rebind(cond.steps, to_b)
        flag = cond.arrays[cond.sg.outputs[0]]
        self.flag_a = to_a.get(id(flag), flag).reshape(-1)
        self.flag_b = to_b.get(id(flag), flag).reshape(-1)
        self.where = {}   # id(step list) -> (plan, list, operator indices), to name a failure
        for plan, steps in ((cond, self.cond_a), (cond, self.cond_b), (body, self.body_a),
                            (body, self.body_b)):
            self.where[id(steps)] = (plan, steps, _ops(plan))

    def spin(self) -> list:
        """Run the loop from the state in A; returns the arrays holding the final state."""
        cond_a, cond_b, body_a, body_b = self.cond_a, self.cond_b, self.body_a, self.body_b
        flag_a, flag_b = self.flag_a, self.flag_b
        steps, run = cond_a, None
        try:
            while True:
                steps = cond_a
                for run, args in steps:
                    run(*args)
                if not flag_a[0]:
                    return self.a
                steps = body_a
                for run, args in steps:
                    run(*args)
                steps = cond_b
                for run, args in steps:
                    run(*args)
                if not flag_b[0]:
                    return self.b
                steps = body_b
                for run, args in steps:
                    run(*args)
        except Exception as e:
            plan, steps, ops = self.where[id(steps)]
            k = next((i for i, (r, _) in enumerate(steps) if r is run), 0)
            oi = ops[k]
            op = plan.sg.operators[oi].op
            if isinstance(e, KernelError):
                if str(e).startswith("subgraph "):
                    raise
                raise type(e)(f"subgraph {plan.index} operator {oi} ({op}): {e}") from None
            raise RuntimeError(f"subgraph {plan.index} operator {oi} ({op}) failed: "
                               f"{type(e).__name__}: {e}") from e


def _rebind(steps, mapping: dict) -> list:
    """The steps with the arrays of `mapping` swapped in, less the plan's view steps (a
    RESHAPE whose output is a view of its input: nothing to run; a view of the loop state itself
    is refused by swap_plan's shared-memory check)."""
    view = _view_step()
    return [(run, tuple(mapping.get(id(x), x) for x in args)) for run, args in steps
            if run is not view]


def _ops(plan) -> list:
    """The operator index of each step _rebind keeps."""
    view = _view_step()
    return [oi for (run, _), oi in zip(plan.steps, plan.step_ops) if run is not view]


def _view_step():
    """The plan's step of a view (plan._view_step), None where the plan has none."""
    from .. import plan   # the plan that runs these kernels (imported by then)
    return getattr(plan, "_view_step", None)


def swap_plan(cond, body):
    """(_Swapped, "") for a loop whose state can be swapped by reference, else (None, why not)."""
    if cond.runtime.delegates:
        return None, "delegates place the subgraphs' steps"
    if cond.runtime.preserve_all:
        return None, "experimental_preserve_all_tensors: the body's tensors are read as it ran"
    if any(t in plan.dynamic for plan in (cond, body) for oi in plan.step_ops
           for t in plan.sg.operators[oi].outputs):
        return None, "a step's shapes are known only while running"
    view = _view_step()
    if any(not args and run is not view for run, args in cond.steps + body.steps):
        return None, "a step of no arrays"
    bi, bo, ci = body.sg.inputs, body.sg.outputs, cond.sg.inputs
    if len(set(bi)) != len(bi) or len(set(bo)) != len(bo) or len(set(ci)) != len(ci):
        return None, "a tensor is two loop variables"
    written = {t for oi in body.step_ops for t in body.sg.operators[oi].outputs}
    for k, (t_in, t_out) in enumerate(zip(bi, bo)):
        if t_out != t_in and (t_out in bi or t_out not in written):
            return None, f"body output {k} is not written by the body's steps"
    a = [body.arrays[t] for t in bi]
    b = [x if t_in == t_out else body.arrays[t_out] for x, t_in, t_out in zip(a, bi, bo)]
    state = {id(x) for x in a + b} | {id(cond.arrays[t]) for t in ci}
    others = [x for _, args in cond.steps + body.steps for x in args
              if isinstance(x, np.ndarray) and id(x) not in state]
    for x in others:
        if any(np.may_share_memory(x, s) for s in a + b):
            return None, "another array shares memory with the loop state"
    flag = cond.arrays[cond.sg.outputs[0]]
    if flag is None or flag.size != 1:
        return None, "the condition is not one value"
    return _Swapped(cond, body, a, b), ""


class Loop:
    """One WHILE op's loop over its prepared cond and body plans."""

    def __init__(self, cond, body):
        self.cond, self.body = cond, body
        self.source = None     # (cond.steps, body.steps) the swapped form was made from
        self.swapped = None
        self.mode = ""         # "swap" or "copy: <why>", after the first run

    def _fast(self, inputs):
        cond, body = self.cond, self.body
        if not (cond.ready and body.ready):
            return None
        if self.source is None or self.source[0] is not cond.steps \
                or self.source[1] is not body.steps:
            self.swapped, why = swap_plan(cond, body)
            self.source = (cond.steps, body.steps)
            self.mode = "swap" if self.swapped else f"copy: {why}"
        fast = self.swapped
        if fast is None or any(x.shape != s.shape for x, s in zip(inputs, fast.a)):
            return None
        return fast

    def run(self, inputs: list) -> list:
        """The final loop state (arrays the caller copies before the next run)."""
        fast = self._fast(inputs)
        if fast is None:
            return self.copying(inputs)
        for s, x in zip(fast.a, inputs):
            np.copyto(s, x, casting="unsafe")
        with np.errstate(all="ignore"):   # as SubgraphPlan.invoke
            return fast.spin()

    def copying(self, values: list) -> list:
        cond, body = self.cond, self.body
        values = [np.array(v) for v in values]
        while bool(np.asarray(cond.call(values)[0]).reshape(-1)[0]):
            values = [np.array(v) for v in body.call(values)]
        return values
