"""The delegate interface: a delegate answers two questions, and shared code does the rest.

1. `support(node)`: None when the delegate can run this node, else the reason it cannot (one
   line, naming what it would need: "float32 or float16 precision only", "axes must be
   contiguous", ...). Called on every node after the CPU kernels prepared the plan, so shapes,
   dtypes and constant values are known.
2. `prepare(partition)`: one kernel for a subset of supported nodes: `run(*inputs, *outputs)`,
   called with the host arrays of the partition's boundary tensors, as a CPU kernel is. It
   moves the inputs in, runs every node, and moves the outputs back; the tensors in between
   never leave the delegate.

`edgelite.delegates.partition` splits a plan into maximal supported subsets and replaces each
with one step (TFLite's SimpleDelegateInterface / graph partitioning, in the same spirit).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


class DelegateError(ValueError):
    """A delegate cannot be loaded or used (no driver, no device, bad options). A ValueError,
    as LiteRT's `load_delegate` raises."""


@dataclass
class Partition:
    """A subset of a subgraph's nodes that one delegate step runs."""

    index: int            # k-th partition of this delegate in the subgraph
    subgraph: int
    nodes: list           # registry.Node, in execution order
    cpu_runs: list        # the CPU kernel of each node (the reference, e.g. to derive tables)
    inputs: list          # TensorInfo read from outside, in the order `run` receives them
    outputs: list         # TensorInfo needed outside (graph outputs, CPU consumers)


@dataclass
class Stats:
    """What crossed the boundary between the host and the delegate, counted per tensor copy."""

    to_device: int = 0
    to_host: int = 0
    bytes_to_device: int = 0
    bytes_to_host: int = 0
    invokes: int = 0

    def reset(self) -> None:
        self.to_device = self.to_host = self.bytes_to_device = self.bytes_to_host = 0
        self.invokes = 0


class Delegate:
    """Base class: subclasses set `name`, and implement `support` and `prepare`."""

    name = "delegate"

    def __init__(self, options: dict | None = None):
        self.options = dict(options or {})
        self.stats = Stats()
        self.placement: dict = {}  # subgraph -> [Placement] of its last prepare

    @property
    def max_partitions(self) -> int:
        """Keep at most this many partitions (the largest); 0 or less: no limit."""
        return int(self.options.get("max_partitions", 0) or 0)

    @property
    def min_nodes_per_partition(self) -> int:
        """Smaller partitions stay on the CPU (a transfer costs more than a tiny op saves)."""
        return int(self.options.get("min_nodes_per_partition", 1) or 1)

    def device_name(self) -> str:
        return self.name

    def support(self, node) -> str | None:
        raise NotImplementedError

    def prepare(self, partition: Partition) -> Callable:
        raise NotImplementedError
