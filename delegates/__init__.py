"""edgelite.delegates: the delegates, which run parts of a graph elsewhere (OpenCL devices).

    from edgelite.interpreter import Interpreter, load_delegate
    from edgelite.interpreter.delegation import placement
    gpu = load_delegate("opencl", {"precision": "fp16"})
    it = Interpreter(model_path="model.tflite", experimental_delegates=[gpu])
    it.allocate_tensors()          # logs "N ops in K partitions on OpenCL (...), M ops on CPU"
    placement(it)                  # where each operator runs, and why not on the delegate

The contract a delegate implements (`Delegate`: `support(node)` and `prepare(partition)`),
the partitioning and the names registry are the interpreter's (edgelite.interpreter.delegation,
as in TFLite's core); they are re-exported here. The built-in delegates register by entry point
(group `edgelite.delegates` in pyproject.toml), as third-party ones do, so the interpreter finds
them by name without importing this package; `register_delegate(name, factory)` adds one in
process.
"""
from __future__ import annotations

from edgelite.interpreter.delegation import (ENTRY_POINT_GROUP, Delegate, DelegateError,
                                             Partition, Placement, Stats, available,
                                             load_delegate, placement, register_delegate)
from edgelite.interpreter.partition import summary

__all__ = ["ENTRY_POINT_GROUP", "Delegate", "DelegateError", "Partition", "Placement", "Stats",
           "available", "load_delegate", "placement", "register_delegate", "summary"]
