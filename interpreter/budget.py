"""One allocation budget per interpreter (and per conversion): every block the interpreter
allocates for a model is counted against one number of bytes, and a request past it is refused
before anything is allocated, naming the operator and the size.

What is counted (the bytes actually allocated, not a guess from shapes or ratios): the
activation arena and the tensors outside it (inputs, outputs, variables), values folded at
`allocate_tensors` (a RANGE or FILL of constants), densified sparse weights, the kernels' shared
work buffers (im2col patches, padded inputs: a dilated convolution's padded input is its real
size, so DeepLabV3's ASPP passes and a stride or dilation that only a hostile file has is
refused by the bytes it would take), and outputs allocated while running (dynamic shapes). The
weights are views of the file and are not counted.

The limit (`default_limit`): what the machine allows (physical memory; half of an
address-space limit), and no more than a model of this size can plausibly need: a floor of
FLOOR bytes plus PER_BYTE bytes per byte of the model file and of its inputs. So a 736-byte file
folding RANGE(0, 2**28) (1 GiB) is refused, while a real model (whose activations scale with
its weights and its inputs) is not. EDGELITE_MEMORY_LIMIT (bytes; K, M, G suffixes) sets the
limit instead.
"""
from __future__ import annotations

import contextlib
import contextvars
import os

import numpy as np

from .kernels.registry import KernelError

FLOOR = 256 << 20
PER_BYTE = 64
ENV = "EDGELITE_MEMORY_LIMIT"


class MemoryBudgetError(MemoryError, KernelError):
    """An allocation would pass the interpreter's budget. A MemoryError (what it is), and a
    KernelError (a ValueError and a RuntimeError) as the other refusals of a model at prepare,
    and LiteRT's failures to prepare."""


def machine_limit() -> int:
    """Bytes this process may allocate: physical memory, or half of an address-space limit
    (RLIMIT_AS) when one is set."""
    try:
        limit = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        limit = 1 << 40
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            limit = min(limit, soft // 2)
    except (ImportError, OSError, ValueError):
        pass
    return limit


def _parse(text: str) -> int:
    text = text.strip().upper().removesuffix("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(text[-1:], 1)
    try:
        return int(float(text[:-1] if scale > 1 else text) * scale)
    except ValueError:
        raise ValueError(f"{ENV}={text!r} is not a number of bytes (e.g. 4G)") from None


def default_limit(model_bytes: int, input_bytes: int = 0) -> int:
    """The budget of a model of `model_bytes` whose inputs hold `input_bytes` (see above)."""
    env = os.environ.get(ENV)
    if env:
        return _parse(env)
    return min(machine_limit(), FLOOR + PER_BYTE * (int(model_bytes) + int(input_bytes)))


def _size(nbytes: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            return f"{nbytes / (1 << shift):.1f} {unit}"
    return f"{nbytes} bytes"


class Budget:
    """Bytes held per key (a subgraph's plan, the shared work buffers) under one limit."""

    def __init__(self, limit: int):
        self.limit = int(limit)
        self.held: dict = {}
        self.used = 0

    def _refuse(self, nbytes: int, what: str) -> MemoryBudgetError:
        return MemoryBudgetError(
            f"{what} needs {_size(nbytes)} ({nbytes} bytes); with the {_size(self.used)} "
            f"already allocated that passes this model's memory budget of {_size(self.limit)} "
            f"(set {ENV} to allow more)")

    def check(self, nbytes: int, what: str) -> None:
        """Refuse `nbytes` more (allocated for a moment: not held) unless they fit."""
        if nbytes < 0 or self.used + nbytes > self.limit:
            raise self._refuse(nbytes, what)

    def charge(self, key, nbytes: int, what: str) -> None:
        """Hold `nbytes` more under `key`, or refuse them."""
        nbytes = int(nbytes)
        self.check(nbytes, what)
        self.held[key] = self.held.get(key, 0) + nbytes
        self.used += nbytes

    def hold(self, key, nbytes: int, what: str) -> None:
        """`key` holds `nbytes` in all (a block that grew), or refuse the growth."""
        grow = int(nbytes) - self.held.get(key, 0)
        if grow > 0:
            self.charge(key, grow, what)

    def release(self, key) -> None:
        self.used -= self.held.pop(key, 0)

    def empty(self, key, shape, dtype, what: str) -> np.ndarray:
        """np.empty(shape, dtype), held under `key`."""
        dtype = np.dtype(dtype)
        self.charge(key, nbytes(shape, dtype), what)
        return np.empty(shape, dtype)


def nbytes(shape, dtype) -> int:
    """Bytes of an array of `shape` and `dtype` (Python ints: no overflow)."""
    count = 1
    for d in shape:
        count *= int(d)
    return count * np.dtype(dtype).itemsize


class Owner:
    """What a kernel's `node.runtime` needs to be for the budget (and the shared work buffers)
    outside an interpreter: the converter, which folds constants with the same kernels, gives
    its nodes one Owner per conversion (`conversion(default_limit(onnx_model_bytes))`)."""

    def __init__(self, limit: int):
        self.budget = Budget(limit)


# The Owner of the conversion under way in this thread (None outside one): the converter's
# kernel nodes take it as their `runtime` (converter/builder.kernel_node).
_CONVERSION: contextvars.ContextVar = contextvars.ContextVar("edgelite_conversion", default=None)


@contextlib.contextmanager
def conversion(model_bytes: int):
    """The budget of one conversion of a model of `model_bytes` (an interpreter's limit for it,
    raised by `conversion_inputs`): while inside, `conversion_owner()` is its Owner."""
    owner = Owner(default_limit(model_bytes))
    owner.model_bytes = int(model_bytes)
    token = _CONVERSION.set(owner)
    try:
        yield owner
    finally:
        _CONVERSION.reset(token)


def conversion_owner() -> Owner | None:
    return _CONVERSION.get()


def conversion_inputs(inputs) -> None:
    """The conversion's inputs, [(shape, dtype)] at the sizes it prepares kernels at: its
    limit becomes an interpreter's for the model with those inputs (a convolution of a large
    image with small weights needs large work buffers, as in the interpreter)."""
    owner = _CONVERSION.get()
    if owner is None:
        return
    total = 0
    for shape, dtype in inputs:
        try:
            total += nbytes(shape, dtype)
        except TypeError:      # a type numpy has no size for (string): not counted
            pass
    owner.budget.limit = max(owner.budget.limit, default_limit(owner.model_bytes, total))


def of(node) -> Budget | None:
    """The budget of a kernel node's interpreter (None outside one: nothing is counted)."""
    return getattr(node.runtime, "budget", None)


def check(node, nbytes_: int, what: str) -> None:
    """A kernel's guard: refuse, naming the op, a block of `nbytes_` that will not fit (the
    machine's limit for a node outside an interpreter)."""
    budget = of(node)
    try:
        (budget or Budget(machine_limit())).check(nbytes_, what)
    except MemoryBudgetError as e:
        raise MemoryBudgetError(f"subgraph {node.subgraph} operator {node.index} "
                                f"({node.op}): {e}") from None


# TFLite's dimensions are C ints: a dimension past this is refused (LiteRT: "Output shape
# dimensions must be in range [0, INT32_MAX]"), also when another dimension is 0 (0 bytes, but
# numpy cannot make the array: "array is too big", or an OverflowError past int64).
MAX_DIM = 2 ** 31 - 1


def check_dims(node, shape, what: str) -> None:
    """Refuse, naming the op, a shape with a dimension past MAX_DIM, or whose dimensions other
    than 0 multiply past what numpy can shape (an empty [0, 2^31-1, 2^31-1, 2^31-1])."""
    dims = [int(d) for d in shape if isinstance(d, (int, np.integer))]
    if any(d > MAX_DIM for d in dims):
        raise node.fail(f"{what} {dims} has a dimension past 2^31-1 (TFLite's dimensions are "
                        "int32)")
    if 0 in dims:    # no bytes (the budget passes it), but numpy checks the other dims' product
        count = 1
        for d in dims:
            count *= max(d, 1)
        if count >= 1 << 59:    # times 16 bytes, past 2^63: "array is too big"
            raise node.fail(f"{what} {dims} is empty, but its other dimensions multiply to "
                            f"{count}, more than an array can have")


def check_outputs(node) -> None:
    """After prepare: every output shape the kernel set is within MAX_DIM."""
    if not node.dynamic:
        for k, o in enumerate(node.outputs):
            check_dims(node, o.shape, f"output {k}'s shape")


def empty(node, shape, dtype, fill=None) -> np.ndarray:
    """An output a kernel allocates while running (a shape known from values only): checked
    against the budget first (`check`), then np.empty, or np.full with `fill`."""
    shape = tuple(int(d) for d in shape)
    check_dims(node, shape, "an output")
    check(node, nbytes(shape, dtype), f"an output {list(shape)} of {np.dtype(dtype).name}")
    return np.empty(shape, dtype) if fill is None else np.full(shape, fill, dtype)


def fold(node, run, key=None) -> list:
    """Run a prepared kernel on constant inputs: its outputs (read-only), allocated through the
    budget (held under `key`, the caller's plan, when given). What the interpreter does at
    allocate_tensors, and the converter when it folds."""
    budget = of(node)
    ins = [None if t is None else t.data for t in node.inputs]
    if node.dynamic:
        outs = list(run(*ins))
        if budget is not None:
            for value in outs:
                _charge(node, budget, key, int(np.asarray(value).nbytes), "its folded output")
    else:
        outs = []
        for k, o in enumerate(node.outputs):
            if budget is not None:
                _charge(node, budget, key, nbytes(o.shape, o.dtype),
                        f"folding output {k} {list(o.shape)} of {np.dtype(o.dtype).name}")
            outs.append(np.empty(o.shape, o.dtype))
        with np.errstate(all="ignore"):  # as invoke (and LiteRT): inf/nan arithmetic is silent
            run(*ins, *outs)
    for value in outs:
        value.flags.writeable = False
    return outs


def _charge(node, budget: Budget, key, nbytes_: int, what: str) -> None:
    try:
        if key is None:
            budget.check(nbytes_, what)
        else:
            budget.charge(key, nbytes_, what)
    except MemoryBudgetError as e:
        raise MemoryBudgetError(f"subgraph {node.subgraph} operator {node.index} ({node.op}): "
                                f"{e}") from None
