"""The delegate contract: a delegate answers two questions, and the interpreter does the rest.

1. `support(node)`: None when the delegate can run this node, else the reason it cannot (one
   line, naming what it would need: "float32 or float16 precision only", "axes must be
   contiguous", ...). Called on every node after the CPU kernels prepared the plan, so shapes,
   dtypes and constant values are known.
2. `prepare(partition)`: one kernel for a subset of supported nodes: `run(*inputs, *outputs)`,
   called with the host arrays of the partition's boundary tensors, as a CPU kernel is. It
   moves the inputs in, runs every node, and moves the outputs back; the tensors in between
   never leave the delegate. `partition.nodes[0].runtime.num_threads` is the interpreter's
   `num_threads` resolved (None and -1: 1, as its CPU kernels run): a delegate on CPU threads
   that was given no thread count of its own runs that many.

The interpreter's plan splits a subgraph into maximal supported subsets and replaces each with
one step (`edgelite.interpreter.partition`: TFLite's SimpleDelegateInterface and graph
partitioning, in the same spirit); `placement(interpreter)` says what ran where.

    from edgelite.interpreter import Interpreter, load_delegate
    it = Interpreter(model_path="model.tflite", experimental_delegates=[load_delegate("opencl")])
    it.allocate_tensors()          # logs "N ops in K partitions on OpenCL (...), M ops on CPU"
    placement(it)                  # where each operator runs, and why not on the delegate

Delegates are found by name: those given to `register_delegate(name, factory)`, then the
entry points of the group `edgelite.delegates` (name -> a callable taking the options dict and
returning a `Delegate`). edgelite's own OpenCL delegate is such an entry point, so the
interpreter names no delegate package and imports one only when it is asked for by name.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

ENTRY_POINT_GROUP = "edgelite.delegates"
_REGISTERED: dict = {}  # name -> factory(options) -> Delegate


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


@dataclass
class Placement:
    """Where one operator of a subgraph runs."""

    subgraph: int
    index: int            # operator index in the subgraph
    op: str
    where: str            # the delegate's name, "CPU", or "folded" (computed at prepare)
    partition: int | None = None
    reason: str | None = None  # why the delegate did not take it (None when it did)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


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


def placement(interpreter) -> list:
    """Where each operator of every prepared subgraph runs: a list of dicts with keys subgraph,
    index, op, where (a delegate's name, "CPU", or "folded" when prepare computed it), partition
    and reason (why the delegate did not take it). Empty before `allocate_tensors` and without
    delegates."""
    plans = interpreter._runtime.plans
    return [p.as_dict() for si in sorted(plans) for p in plans[si].placement]


# -- delegates by name ---------------------------------------------------------------------------

def register_delegate(name: str, factory, *, replace: bool = False) -> None:
    """Make `load_delegate(name, options)` call `factory(options)`."""
    if name in _REGISTERED and not replace:
        raise ValueError(f"delegate {name!r} is already registered (pass replace=True)")
    _REGISTERED[name] = factory


def available() -> list:
    """Names `load_delegate` knows: registered ones and entry points (edgelite's own included)."""
    return sorted(set(_REGISTERED) | {e.name for e in _entry_points()})


def load_delegate(library: str, options: dict | None = None) -> Delegate:
    """A delegate by name, to pass as `Interpreter(experimental_delegates=[...])`.

    As LiteRT's `load_delegate(library, options)`; raises DelegateError (a ValueError) when the
    delegate cannot be made: unknown name, missing driver or device, bad options."""
    options = dict(options or {})
    factory = _REGISTERED.get(library)
    if factory is None:
        found = sorted((e for e in _entry_points() if e.name == library),
                       key=lambda e: getattr(e.dist, "name", None) != "edgelite")  # ours first
        if found:
            factory = found[0].load()
    if factory is None and "edgetpu" in str(library).lower():
        raise DelegateError(f"{library!r} is the Coral Edge TPU's delegate (libedgetpu): edgelite "
                            "has no Edge TPU support; run the model from before "
                            "edgetpu_compiler on the CPU, with no delegate")
    if factory is None:
        raise DelegateError(f"no delegate named {library!r}; available: {', '.join(available())}")
    delegate = factory(options)
    if not isinstance(delegate, Delegate):
        raise DelegateError(f"delegate {library!r} made a {type(delegate).__name__}, "
                            "not an edgelite.interpreter.delegation.Delegate")
    return delegate


def _entry_points() -> list:
    """The group's entry points of every installed distribution. Read one by one, not through
    `entry_points()`, which keeps one distribution per name: a stale `edgelite.egg-info` in
    the working folder (left by a build) would hide the installed edgelite's."""
    from importlib.metadata import distributions  # only when a delegate is asked for by name
    found = []
    for dist in distributions():
        try:
            found.extend(e for e in dist.entry_points if e.group == ENTRY_POINT_GROUP)
        except Exception:  # a broken installed distribution must not break loading ours
            continue
    return found
