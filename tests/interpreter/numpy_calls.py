"""Every numpy call of an invoke, counted (issue 17's timing-free guards): ufunc calls, which
Python's profiler does not see (a ufunc is no builtin function), through counting wrappers of
numpy's ufuncs and the kernels' `clip`; numpy's builtin calls (np.copyto's and np.dot's C
functions, c_einsum, reduce methods) as the profiler's C-call events. A tiny model's invoke
costs about 0.25 µs a numpy call, so this count is its floor. Marked NUMPY2_DISPATCH where used.
"""
from __future__ import annotations

import sys

import numpy as np


class _Counted:
    """A ufunc that counts its calls (its attributes, .reduce among them, pass through)."""

    def __init__(self, name, f, counts):
        self.name, self.f, self.counts = name, f, counts
        self.elementwise = getattr(f, "signature", None) is None    # (not matmul, vecdot)

    def __call__(self, *args, **kwargs):
        counts = self.counts
        counts[self.name] += 1          # (the builtins called here are not counted)
        first = None if self.elementwise else ()
        for a in args + tuple(kwargs.values()):   # a broadcast: operands of unequal shapes
            try:
                shape = a.shape
            except AttributeError:
                continue
            if shape == () or first == ():        # (0-d bounds cost nothing more)
                continue
            if first is None:
                first = shape
            elif shape != first:
                counts["broadcasts"] += 1         # ~0.5 µs a call more than equal shapes
                break
        return self.f(*args, **kwargs)

    def __getattr__(self, attr):
        return getattr(self.f, attr)


def _numpy(function) -> bool:
    """Whether a builtin is numpy's: its function (np.copyto's, c_einsum) or a method of a
    ufunc or an array (np.maximum.reduce); not the interpreter's locks and dict lookups."""
    owner = getattr(function, "__self__", None)
    return isinstance(owner, (np.ufunc, np.ndarray)) or \
        str(getattr(function, "__module__", None) or "").startswith("numpy")


def numpy_calls(fn, monkeypatch) -> dict:
    """{name: calls} while `fn` runs once: each ufunc by its name, each builtin (C) function
    by its own name (its __qualname__), plus "ufuncs" and "builtins", the two totals, and
    "broadcasts", the ufunc calls whose array operands differ in shape (0-d ones aside)."""
    from edgelite.interpreter.kernels import common
    counts: dict = {}
    builtins: dict = {}
    with monkeypatch.context() as m:
        for name in dir(np):
            f = getattr(np, name, None)
            if isinstance(f, np.ufunc):
                counts[name] = 0
                m.setattr(np, name, _Counted(name, f, counts))
        real = common.clip
        counts["clip"] = counts["broadcasts"] = 0
        clip = _Counted("clip", real, counts)
        for module in list(sys.modules.values()):      # every kernel module's clip
            if getattr(module, "__name__", "").startswith("edgelite.interpreter") \
                    and getattr(module, "clip", None) is real:
                m.setattr(module, "clip", clip)

        own = _Counted.__call__.__code__

        def profile(frame, event, arg):
            if event == "c_call" and frame.f_code is not own and _numpy(arg):
                name = getattr(arg, "__qualname__", None) or getattr(arg, "__name__", "?")
                builtins[name] = builtins.get(name, 0) + 1
        sys.setprofile(profile)
        try:
            fn()
        finally:
            sys.setprofile(None)
    builtins.pop("setprofile", None)                   # (the profiler's own end)
    broadcasts = counts.pop("broadcasts")
    counts = {name: k for name, k in counts.items() if k}
    ufuncs = sum(counts.values())
    counts["broadcasts"] = broadcasts
    counts.update(builtins)
    counts["ufuncs"], counts["builtins"] = ufuncs, sum(builtins.values())
    return counts
