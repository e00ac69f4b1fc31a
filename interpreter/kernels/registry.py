"""The kernel registry: (op, arithmetic) -> a prepare function.

A kernel is one function `prepare(node) -> run`. `prepare` validates the op, infers and sets its
output shapes (`node.outputs[k].shape = ...`), precomputes what it can (weights in the layout the
arithmetic wants, quantization multipliers, index tables) and returns `run`, which only computes:
it is called as `run(*inputs, *outputs)` with numpy arrays (None for an omitted optional input)
and writes its results into the output arrays, which already exist. Kernels never see the
interpreter.

The arithmetic key says which kernel computes an op: the dtype of its first input ("float32",
"int8", "uint8", "int16", "int32", "int64", "bool", ...) or "hybrid" (float activations with int8
weights). `register("ADD", "float32", "int32")` declares a kernel for those keys.
"""
from __future__ import annotations

import importlib
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from edgelite.schema.model import QuantizationParameters
from edgelite.schema.ops import OPS


class KernelError(ValueError, RuntimeError):
    """An operator cannot run: bad shapes, unsupported options or dtypes. Names the operator.
    A RuntimeError too, as LiteRT raises for a model that fails to prepare or to invoke (so the
    same `except` catches both), and a ValueError, as edgelite raised before."""


@dataclass
class TensorInfo:
    """What `prepare` knows of a tensor: its shape, dtype, quantization, and its value when
    constant. `prepare` sets an output's `shape` (and may set `data` when the value is known
    before running, e.g. SHAPE of a static tensor)."""

    index: int
    name: str
    shape: tuple
    dtype: np.dtype
    type_name: str
    quantization: QuantizationParameters | None = None
    data: np.ndarray | None = None
    is_variable: bool = False

    @property
    def scale(self) -> float:
        """The per-tensor scale (the first one for per-channel tensors); 0.0 if not quantized."""
        q = self.quantization
        return float(q.scale[0]) if q is not None and q.scale.size else 0.0

    @property
    def zero_point(self) -> int:
        q = self.quantization
        return int(q.zero_point[0]) if q is not None and q.zero_point.size else 0


@dataclass
class Node:
    """One operator as `prepare` sees it."""

    op: str
    index: int
    inputs: list            # TensorInfo, or None for an omitted optional input (-1)
    outputs: list           # TensorInfo; shapes start as the model declares them
    options: Any = None     # edgelite.schema.Options or None
    custom_options: bytes | None = None
    subgraph: int = 0
    is_custom: bool = False  # then `op` is the custom code
    runtime: Any = None     # services for control flow and variables (see interpreter.plan)
    state: dict = field(default_factory=dict)
    # Set by a prepare whose output shapes depend on input *values* (WHERE, a RESHAPE to a
    # computed shape...): then `run(*inputs)` returns the output arrays, which it allocates.
    dynamic: bool = False

    def fail(self, message: str) -> KernelError:
        """An error naming this operator; `raise node.fail("...")`."""
        return KernelError(f"subgraph {self.subgraph} operator {self.index} ({self.op}): {message}")

    def input(self, k: int) -> TensorInfo:
        if k >= len(self.inputs) or self.inputs[k] is None:
            raise self.fail(f"input {k} is missing")
        return self.inputs[k]

    def optional_input(self, k: int) -> TensorInfo | None:
        return self.inputs[k] if k < len(self.inputs) else None

    def expect_inputs(self, *counts: int) -> None:
        if len(self.inputs) not in counts:
            want = " or ".join(str(c) for c in counts)
            raise self.fail(f"expected {want} inputs, got {len(self.inputs)}")


Prepare = Callable[[Node], Callable]

# -- loading kernel modules when their ops are first asked for ------------------------------------
# The kernels package declares which module registers which ops (FAMILIES in kernels/__init__.py,
# the coverage table); a module is imported the first time one of its ops is looked up, so that
# `import edgelite.interpreter` compiles none of the ~50 kernel files (~480 kB of source) and a
# model imports the few its ops need. Iterating a table imports every module first, and a name
# the table does not know loads them all before it is reported missing: the table decides only
# how early a kernel loads, never whether it is found (tests/interpreter/test_kernel_families.py
# checks it against what each module registers).

_FAMILIES: dict = {}      # op or custom code -> the modules (in the package) that register it
_ensured: set = set()     # names whose modules are imported
_all_loaded = False
_load_lock = threading.RLock()
REGISTERED_BY: dict = {}  # op or custom code -> the modules whose import registered it


def declare(families: dict) -> None:
    """The package's table: module name -> its ops and custom codes, space-separated."""
    for module, names in families.items():
        for name in names.split():
            _FAMILIES.setdefault(name, []).append(module)


def _ensure(name) -> None:
    """Import the modules that register `name` (every module when the table lacks it and no
    kernel of that name is registered yet)."""
    if name in _ensured or _all_loaded:
        return
    modules = _FAMILIES.get(name)
    if modules is None:
        if not (dict.__contains__(KERNELS, name) or dict.__contains__(CUSTOM_OPS, name)):
            load_all()
        return
    with _load_lock:
        for module in modules:
            importlib.import_module(f"{__package__}.{module}")
        _ensured.add(name)


def load_all() -> None:
    """Import every kernel module of the table (what iterating a table needs)."""
    global _all_loaded
    if _all_loaded:
        return
    with _load_lock:
        for module in dict.fromkeys(m for ms in _FAMILIES.values() for m in ms):
            importlib.import_module(f"{__package__}.{module}")
        _all_loaded = True


def _ensuring(method):
    """dict's (or set's) `method` of a name, after the modules that register the name load."""
    def ensured(self, name, *args):
        _ensure(name)
        return method(self, name, *args)
    ensured.__name__ = method.__name__
    return ensured


def _whole(method):
    """dict's (or set's) `method` of the whole table, after every kernel module loads."""
    def loaded(self):
        load_all()
        return method(self)
    loaded.__name__ = method.__name__
    return loaded


class _Table(dict):
    """A registry table that imports kernel modules as it is read (see above); registration
    writes through dict's own methods."""
    get = _ensuring(dict.get)
    __getitem__ = _ensuring(dict.__getitem__)
    __contains__ = _ensuring(dict.__contains__)
    __iter__ = _whole(dict.__iter__)
    __len__ = _whole(dict.__len__)
    keys = _whole(dict.keys)
    values = _whole(dict.values)
    items = _whole(dict.items)


class _Names(set):
    """PURE_CUSTOM_OPS: a membership test imports the module that declares the name."""
    __contains__ = _ensuring(set.__contains__)
    __iter__ = _whole(set.__iter__)


KERNELS: dict = _Table()      # op -> {arithmetic key -> prepare}
CUSTOM_OPS: dict = _Table()   # custom code -> prepare
# Custom ops whose kernels are pure functions of their inputs (no state): a delegate may take them.
PURE_CUSTOM_OPS: set = _Names()
# Custom ops no CPU kernel can run, with what to say instead of "not registered".
UNAVAILABLE_CUSTOM_OPS = {
    "edgetpu-custom-op": "the model was compiled for the Coral Edge TPU (edgetpu_compiler): "
                         "this op is a graph that runs inside the Edge TPU and needs the device "
                         "and libedgetpu. Run the model as it was before edgetpu_compiler",
}


def register(op: str, *keys: str):
    """Decorator: declare `prepare` as the kernel of `op` for the arithmetic `keys`."""
    module = sys._getframe(1).f_globals.get("__name__", "?").rpartition(".")[2]
    REGISTERED_BY.setdefault(op, set()).add(module)

    def wrap(prepare: Prepare) -> Prepare:
        table = dict.setdefault(KERNELS, op, {})
        for key in keys:
            if key in table:
                raise RuntimeError(f"two kernels registered for {op} / {key}")
            table[key] = prepare
        return prepare
    return wrap


def register_custom_op(name: str, prepare: Prepare, *, replace: bool = False) -> None:
    """Register a Python kernel for the custom op `name` (a model's custom_code).

    `prepare(node) -> run` as for builtin kernels: set `node.outputs[k].shape`, return
    `run(*inputs, *outputs)`. `node.custom_options` holds the op's raw options bytes."""
    module = sys._getframe(1).f_globals.get("__name__", "?")
    ours = module.startswith(f"{__package__}.")
    if ours:   # a kernel module registering its own op, while it is being imported
        REGISTERED_BY.setdefault(name, set()).add(module.rpartition(".")[2])
    elif name in _FAMILIES:   # a user's: edgelite's kernel of that name first, for the check
        _ensure(name)
    if dict.__contains__(CUSTOM_OPS, name) and not replace:
        raise ValueError(f"custom op {name!r} is already registered (pass replace=True)")
    CUSTOM_OPS[name] = prepare


# The table's facts in the form the hot path wants (schema/ops.py says which ops and inputs).
HYBRID_OPS = frozenset(op for op, f in OPS.items() if f.hybrid)
# Ops whose first input is not the data that selects the arithmetic: op -> that input's position.
DATA_INPUT = {op: f.data[0] for op, f in OPS.items() if f.data and f.data[0] != 0}


def arithmetic(node: Node) -> str:
    """The key that selects a kernel: the data input's dtype (the first input's, unless
    DATA_INPUT says otherwise), or "hybrid"."""
    k = DATA_INPUT.get(node.op)
    if k is not None and k < len(node.inputs) and node.inputs[k] is not None:
        return node.inputs[k].type_name
    first = next((t for t in node.inputs if t is not None), None)
    if first is None:
        return node.outputs[0].type_name if node.outputs else "none"
    key = first.type_name
    if key == "float32" and node.op in HYBRID_OPS:
        # The first weight present decides (a CIFG LSTM omits input 1, its input-gate weights).
        weight = next((t for t in node.inputs[1:] if t is not None), None)
        if weight is not None and weight.type_name in ("int8", "uint8", "int4"):
            return "hybrid"
    return key


def lookup(node: Node) -> Prepare | None:
    """The kernel for a node, or None when edgelite has none."""
    if node.is_custom:
        return CUSTOM_OPS.get(node.op)
    return KERNELS.get(node.op, {}).get(arithmetic(node))


def supported_keys(op: str) -> list:
    return sorted(KERNELS.get(op, {}))
