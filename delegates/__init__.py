"""edgelite.delegates: parts of a graph run elsewhere (OpenCL devices), the rest on the CPU.

    from edgelite.interpreter import Interpreter, load_delegate
    gpu = load_delegate("opencl", {"precision": "fp16"})
    it = Interpreter(model_path="model.tflite", experimental_delegates=[gpu])
    it.allocate_tensors()          # logs "N ops in K partitions on OpenCL (...), M ops on CPU"
    placement(it)                  # where each operator runs, and why not on the delegate

Delegates register by name: the built-in ones below, `register_delegate(name, factory)`, and
third-party packages through the entry-point group `edgelite.delegates` (name -> a callable
taking the options dict and returning a `Delegate`).
"""
from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from .base import Delegate, DelegateError, Partition, Stats
from .partition import Placement, summary

ENTRY_POINT_GROUP = "edgelite.delegates"

# name -> "module:attribute" (imported only when loaded: pyopencl stays optional)
_BUILTIN = {"opencl": "edgelite.delegates.opencl:OpenCLDelegate"}
_REGISTERED: dict = {}


def register_delegate(name: str, factory, *, replace: bool = False) -> None:
    """Make `load_delegate(name, options)` call `factory(options)`."""
    if name in _REGISTERED and not replace:
        raise ValueError(f"delegate {name!r} is already registered (pass replace=True)")
    _REGISTERED[name] = factory


def available() -> list:
    """Names `load_delegate` knows: built-in, registered, and from entry points."""
    return sorted(set(_BUILTIN) | set(_REGISTERED) | {e.name for e in _entry_points()})


def load_delegate(library: str, options: dict | None = None) -> Delegate:
    """A delegate by name, to pass as `Interpreter(experimental_delegates=[...])`.

    As LiteRT's `load_delegate(library, options)`; raises DelegateError (a ValueError) when the
    delegate cannot be made: unknown name, missing driver or device, bad options."""
    options = dict(options or {})
    factory = _REGISTERED.get(library)
    if factory is None and library in _BUILTIN:
        module, attr = _BUILTIN[library].split(":")
        factory = getattr(importlib.import_module(module), attr)
    if factory is None:
        found = [e for e in _entry_points() if e.name == library]
        if found:
            factory = found[0].load()
    if factory is None:
        raise DelegateError(f"no delegate named {library!r}; available: {', '.join(available())}")
    delegate = factory(options)
    if not isinstance(delegate, Delegate):
        raise DelegateError(f"delegate {library!r} made a {type(delegate).__name__}, "
                            "not an edgelite.delegates.Delegate")
    return delegate


def placement(interpreter) -> list:
    """Where each operator of every prepared subgraph runs: a list of dicts with keys subgraph,
    index, op, where (a delegate's name, "CPU", or "folded" when prepare computed it), partition
    and reason (why the delegate did not take it). Empty before `allocate_tensors`."""
    plans = interpreter._runtime.plans
    out = []
    for si in sorted(plans):
        out.extend(p.as_dict() for p in getattr(plans[si], "placement", []) or [])
    return out


def _entry_points() -> list:
    try:
        return list(entry_points(group=ENTRY_POINT_GROUP))
    except Exception:  # a broken installed distribution must not break loading ours
        return []


__all__ = ["Delegate", "DelegateError", "Partition", "Placement", "Stats", "available",
           "load_delegate", "placement", "register_delegate", "summary"]
