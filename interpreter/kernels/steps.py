"""Bound steps (plan.bind_step) that are nothing but calls, or one line of Python: the plan
writes them into its generated run_steps as they are (plan.compile_steps), so such a step runs
no Python frame of its own (issue 17). Kept out of common.py: `import edgelite.interpreter`
compiles only what it needs (test_import_budget)."""
from __future__ import annotations


def call(function, *args, **keywords) -> tuple:
    """One call of a bound step made of calls (`calls_step`): (function, args, keywords).
    `function` is a callable, or (owner, name): the attribute `name` of `owner` (a module),
    looked up on each call, as `owner.name(...)` in the plan's line (so that a wrapper put
    there later, tests/interpreter/numpy_calls.py's counting ones, sees the calls)."""
    return function, args, keywords


def calls_step(*calls):
    """A bound step (plan.bind_step) that is nothing but these calls, each `call(...)` (None
    entries skipped): `step.calls` lists them, and the plan writes them into its generated
    run_steps as they are (plan.compile_steps: no frame for the step, its arrays and bounds
    names in the plan's namespace). Called alone, the step runs them in a loop."""
    calls = tuple(c for c in calls if c is not None)

    def step():
        for function, args, keywords in calls:
            if function.__class__ is tuple:
                function = getattr(*function)
            function(*args, **keywords)
    step.calls = calls
    return step


def source_step(template: str, **objects):
    """A bound step written as one line of Python source (statements joined by `;`):
    `template` with `{name}` for each of `objects` (arrays' memoryviews, Python floats). The
    plan writes that line into its generated run_steps (plan.compile_steps); alone, the step
    is the line compiled into a function of its own."""
    names = {k: f"_{k}" for k in objects}
    source = (f"def _make({', '.join(names.values())}):\n  def step():\n"
              f"    {template.format(**names)}\n  return step\n")
    namespace: dict = {}
    exec(compile(source, "<edgelite step>", "exec"), namespace)   # our own source
    step = namespace["_make"](*objects.values())
    step.source = template, objects
    return step


def step_calls(step):
    """The calls of a bound step: its `calls` (calls_step), else one call of it."""
    calls = getattr(step, "calls", None)
    return calls if calls is not None else (call(step),)


def namer(bound: dict):
    """name(value, prefix): a literal for None, a bool, a str, an int or a finite float; else
    the name of `value` in the plan's namespace (`prefix` and a number), added to `bound` the
    first time."""
    names: dict = {}   # id of a bound object -> its name

    def name(value, prefix="c"):
        if value is None or isinstance(value, (bool, str)) or type(value) is int \
                or (type(value) is float and value - value == 0.0):
            return repr(value)
        key = id(value)
        if key not in names:
            names[key] = f"{prefix}{len(names)}"
            bound[names[key]] = value
        return names[key]
    return name


def step_line(step, name) -> str | None:
    """The line plan.compile_steps writes for a bound step made of calls or of a line of
    Python, `name(value)` naming each object (a name in the plan's namespace, or a literal);
    None for any other step (the plan calls it)."""
    source = getattr(step, "source", None)
    if source is not None:
        template, objects = source
        return template.format(**{k: name(v) for k, v in objects.items()})
    calls = getattr(step, "calls", None)
    if calls is None:
        return None
    return "; ".join(call_source(c, name) for c in calls) or "pass"


def call_source(one: tuple, name) -> str:
    """One `call(...)` as Python source, `name(value)` writing each object: `f(a, k=b)`, or
    `owner.attr(...)` for a function given as (owner, attr)."""
    function, args, keywords = one
    head = f"{name(function[0])}.{function[1]}" if function.__class__ is tuple \
        else name(function)
    items = [name(a) for a in args] + [f"{k}={name(v)}" for k, v in keywords.items()]
    return f"{head}({', '.join(items)})"
