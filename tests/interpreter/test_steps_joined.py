"""kernels/steps.py: a call's function named as (owner, name), looked up on each call (so a
wrapper put there later sees it: tests/interpreter/numpy_calls.py), and `joined`, one bound step
of other steps' pieces: calls stay a calls_step; with a line of Python among them, one line
(its own fields renamed, its literal braces kept), as plan.compile_steps writes it."""
from __future__ import annotations

import types

import numpy as np

from edgelite.interpreter.kernels.joined_steps import joined
from edgelite.interpreter.kernels.steps import call, calls_step, namer, source_step, step_line


def _line(step) -> tuple:
    """(the line plan.compile_steps writes for `step`, the objects it names)."""
    bound: dict = {}
    return step_line(step, namer(bound)), bound


def _run_line(step) -> None:
    """`step` as the plan runs it: its line compiled with its objects as closure variables."""
    line, bound = _line(step)
    source = f"def _make({', '.join(bound)}):\n  def run():\n    {line}\n  return run\n"
    namespace: dict = {}
    exec(compile(source, "<test>", "exec"), namespace)
    namespace["_make"](*bound.values())()


def test_a_call_by_owner_and_name_is_looked_up_on_each_call():
    owner = types.SimpleNamespace(f=lambda out: out.__setitem__(0, 1.0))
    out = np.zeros(2)
    step = calls_step(call((owner, "f"), out), call(np.add, out, 1.0, out))
    owner.f = lambda out: out.__setitem__(0, 5.0)        # replaced after the step was made
    step()
    np.testing.assert_array_equal(out, [6.0, 1.0])
    line, bound = _line(step)
    assert ".f(" in line and owner in bound.values(), line
    out[:] = 0
    _run_line(step)
    np.testing.assert_array_equal(out, [6.0, 1.0])


def test_joined_calls_are_a_calls_step():
    a, out = np.arange(3.0), np.zeros(3)
    step = joined(call(np.add, a, 1.0, out), None,
                  calls_step(call((np, "multiply"), out, 2.0, out=out)))
    assert len(step.calls) == 2 and getattr(step, "source", None) is None
    step()
    np.testing.assert_array_equal(out, [2.0, 4.0, 6.0])


def test_joined_with_a_line_is_one_line():
    """Calls, a line with literal braces and a field used twice, and a plain function (one
    call of it): one line, alone and as the plan writes it, with the same effects."""
    a, out, seen = np.arange(3.0), np.zeros(3), []
    line = source_step("{o}[1] = {{'k': {v}}}['k'] + {o}[0]", o=out, v=10.0)
    step = joined(call(np.add, a, 1.0, out), line, lambda: seen.append(float(out[1])),
                  call((np, "negative"), out, out=out))
    assert getattr(step, "calls", None) is None and step.source is not None
    for run in (step, lambda: _run_line(step)):
        out[:], seen[:] = 0, []
        run()
        np.testing.assert_array_equal(out, [-1.0, -11.0, -3.0])
        assert seen == [11.0]
    text, _ = _line(step)
    assert "{'k':" in text and text.count(";") == 3, text
