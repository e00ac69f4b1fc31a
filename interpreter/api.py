"""`Interpreter`: a drop-in for `ai_edge_litert.interpreter.Interpreter`.

Same constructor, methods, detail dicts and exception types as LiteRT; messages name the tensor,
what was expected and what was given.
"""
from __future__ import annotations

import contextlib
import enum
import os
import sys
import threading

import numpy as np

from edgelite.schema import ModelError, load
from edgelite.schema.model import NUMPY_DTYPES

from . import threads
from .plan import ERRORS, IGNORE_ERRORS, Runtime

_enter, _leave, _getrefcount = threads.enter, threads.leave, sys.getrefcount


class OpResolverType(enum.Enum):
    """Which kernels run the model (LiteRT's names). BUILTIN_REF: the integer kernels round
    exactly as TFLite's reference kernels (bit-identical outputs). The others let the int8 and
    uint8 requantization round in float where that is faster, at most 1 in the last place from
    the reference, as LiteRT's optimized kernels differ from its reference ones. Float kernels
    are the same in every mode."""

    AUTO = 0
    BUILTIN = 1
    BUILTIN_REF = 2
    BUILTIN_WITHOUT_DEFAULT_DELEGATES = 3


class ResizeError(ValueError, RuntimeError):
    """`resize_tensor_input` cannot resize that input: a RuntimeError, as LiteRT raises for an
    index out of range or a fixed dimension under strict=True, and a ValueError, as its
    docstring (and edgelite's earlier versions) say."""


class ConcurrentUseError(RuntimeError):
    """Two threads used one interpreter at the same time. As in LiteRT, an interpreter is
    for one thread at a time (make one per thread); edgelite detects the overlap and refuses the
    second call instead of letting both write the same arrays."""


class _View:
    """What an array from `tensor()` views: numpy keeps it as the base of that array and of every
    slice of it. It holds the tensor's array (so the memory outlives any re-plan) and the
    interpreter's view token, whose reference count then says whether any such array is alive
    (LiteRT counts the references to its C++ wrapper, which its views hold as their base)."""

    __slots__ = ("__array_interface__", "_array", "_token")

    def __init__(self, array: np.ndarray, token):
        self.__array_interface__ = array.__array_interface__
        self._array, self._token = array, token


def _numpy_type(dtype: str):
    """The numpy type LiteRT's details give for a tensor type (object for strings, resources
    and variants; int8 for int4, whose values get_tensor gives unpacked)."""
    if dtype == "int4":
        return np.int8
    np_type = NUMPY_DTYPES.get(dtype)
    return np.object_ if dtype in ("string", "resource", "variant") or np_type is None \
        else np_type.type


def _details(model, sg, t: int, shape) -> dict:
    tensor = sg.tensors[t]
    q = tensor.quantization
    scales = np.array(q.scale, np.float32) if q is not None else np.zeros(0, np.float32)
    zps = np.array(q.zero_point, np.int32) if q is not None else np.zeros(0, np.int32)
    if scales.size and zps.size < scales.size:
        zps = np.zeros(scales.size, np.int32)
    sig = tensor.shape_signature if tensor.shape_signature is not None else tensor.shape
    return {
        "name": tensor.name,
        "index": t,
        "shape": np.array(shape, np.int32),
        "shape_signature": np.array(sig, np.int32),
        "dtype": _numpy_type(tensor.dtype),
        "quantization": (float(scales[0]), int(zps[0])) if scales.size == 1 else (0.0, 0),
        "quantization_parameters": {
            "scales": scales, "zero_points": zps,
            "quantized_dimension": int(q.quantized_dimension) if q is not None else 0,
            "block_size": 0,    # blockwise quantization: refused at load (schema.loader)
        },
        "sparsity_parameters": _sparsity_details(tensor.sparsity),
    }


def _sparsity_details(sparsity) -> dict:
    """A sparse tensor's storage as LiteRT's details give it: traversal_order, block_map (when
    there are blocks), and per dimension its format with dense_size (DENSE) or array_segments and
    array_indices (SPARSE_CSR)."""
    if sparsity is None:
        return {}
    details = {"traversal_order": np.array(sparsity.traversal_order, np.int32)}
    if sparsity.block_map:
        details["block_map"] = np.array(sparsity.block_map, np.int32)
    dims = []
    for meta in sparsity.dim_metadata:
        if meta.format == 0:
            dims.append({"format": 0, "dense_size": int(meta.dense_size)})
        else:
            dims.append({"format": int(meta.format),
                         "array_segments": np.asarray(meta.segments).astype(np.int32),
                         "array_indices": np.asarray(meta.indices).astype(np.int32)})
    details["dim_metadata"] = dims
    return details


class Interpreter:
    """Runs a `.tflite` model on the CPU with numpy kernels."""

    def __init__(self, model_path=None, model_content=None, experimental_delegates=None,
                 num_threads=None,
                 experimental_op_resolver_type=OpResolverType.AUTO,
                 experimental_preserve_all_tensors=False,
                 experimental_disable_delegate_clustering=False,
                 experimental_default_delegate_latest_features=False):
        if model_path is None and model_content is None:
            raise ValueError("`model_path` or `model_content` must be specified.")
        if model_path is not None and model_content is not None:
            raise ValueError("Can't both provide `model_path` and `model_content`")
        if num_threads is not None:
            if not isinstance(num_threads, int):
                raise ValueError("type of num_threads should be int")
            if num_threads < 1 and num_threads != -1:
                raise ValueError("num_threads should >= 1 or -1 (let the runtime decide)")
        kind = getattr(experimental_op_resolver_type, "name", experimental_op_resolver_type)
        if kind not in OpResolverType.__members__:
            raise ValueError(f"Unrecognized passed in op resolver type: "
                             f"{experimental_op_resolver_type!r} (one of "
                             f"{', '.join(OpResolverType.__members__)})")
        if isinstance(model_content, str):
            raise TypeError("model_content must be the model's bytes; a path goes in model_path")
        try:
            self._model = load(model_path if model_path is not None else model_content)
        except ModelError as e:
            src = f"{model_path!r}" if model_path is not None else "model_content"
            raise ValueError(f"Could not load {src}: {e}") from e
        self._num_threads = num_threads
        self._op_resolver_type = experimental_op_resolver_type
        self._runtime = Runtime(self._model, bool(experimental_preserve_all_tensors),
                                experimental_delegates or (), reference=kind == "BUILTIN_REF",
                                model_bytes=_source_bytes(model_path, model_content))
        self._runtime.num_threads = threads.resolve(num_threads)   # delegates read it (prepare)
        self._runtime.check_supported()
        _room_for_nesting(self._runtime.nesting())
        self._main = self._runtime.subgraph(0)
        self._allocated = False
        self._views = object()      # every array tensor() gives holds it (see _View)
        self._views_free = sys.getrefcount(self._views)
        self._busy = threading.RLock()  # held by the thread inside a call (see _exclusive)
        self._busy_with = ""

    def _concurrent(self, what: str) -> ConcurrentUseError:
        return ConcurrentUseError(
            f"{what} was called while another thread is in {self._busy_with or 'a call'} on "
            "the same Interpreter: an interpreter serves one thread at a time (as in LiteRT); "
            "create one Interpreter per thread")

    @contextlib.contextmanager
    def _exclusive(self, what: str):
        """Run `what` as the only thread using this interpreter; ConcurrentUseError when
        another thread is inside one of its calls (the same thread may nest)."""
        if not self._busy.acquire(blocking=False):
            raise self._concurrent(what)
        outer, self._busy_with = self._busy_with, what
        try:
            yield
        finally:
            self._busy_with = outer
            self._busy.release()

    # -- set-up ------------------------------------------------------------------------------

    def allocate_tensors(self) -> None:
        with self._exclusive("allocate_tensors()"):
            self._ensure_no_views("allocate_tensors")
            with threads.limit(self._num_threads):
                self._main.prepare()
            # No BLAS call of these steps threads: invoke leaves OpenBLAS's count alone (issue
            # 17; a signature runner's re-prepare makes new steps, which take the limit again)
            want = threads.resolve(self._num_threads)
            self._blas_free = self._main.run_steps if want == 1 \
                and threads.serial(self._runtime) else None
            # At num_threads > 1: OpenBLAS's threads, or depthwise rows on edgelite's workers
            self._runtime.split_rows = want > 1 and threads.rows_first(self._runtime)
            self._blas_threads = 1 if self._runtime.split_rows else self._num_threads
            self._allocated = True

    def resize_tensor_input(self, input_index, tensor_size, strict=False) -> None:
        with self._exclusive("resize_tensor_input()"):
            self._resize_tensor_input(input_index, tensor_size, strict)

    def _resize_tensor_input(self, input_index, tensor_size, strict) -> None:
        self._ensure_no_views("resize_tensor_input")
        sg = self._main.sg
        if not isinstance(input_index, (int, np.integer)):
            raise TypeError(f"input_index must be an int (a tensor index from "
                            f"get_input_details), got {input_index!r}")
        if input_index not in sg.inputs:
            raise ResizeError(f"Tensor {input_index} is not an input of the model "
                              f"(inputs: {list(sg.inputs)})")
        size = _resize_size(input_index, tensor_size)
        if strict:
            t = sg.tensors[input_index]
            sig = t.shape_signature if t.shape_signature is not None else t.shape
            if len(sig) != len(size) or any(s != -1 and s != d for s, d in zip(sig, size)):
                raise ResizeError(f"Cannot resize input {input_index} ({t.name}) to {size} with "
                                  f"strict=True: only dimensions that are -1 in its shape "
                                  f"signature {list(sig)} may change")
        self._main.resize_input(input_index, size)
        self._allocated = False

    # -- details -----------------------------------------------------------------------------

    def _shape(self, t: int, subgraph_index: int = 0):
        """A tensor's shape: as planned, else as resized, else as the model declares it."""
        plan = self._main if subgraph_index == 0 else self._runtime.plans.get(subgraph_index)
        if plan is None:
            return self._model.subgraphs[subgraph_index].tensors[t].shape
        if plan.ready and plan.arrays[t] is not None:
            return plan.arrays[t].shape
        return plan.input_shapes.get(t, plan.sg.tensors[t].shape)

    def get_input_details(self) -> list:
        sg = self._main.sg
        return [_details(self._model, sg, t, self._shape(t)) for t in sg.inputs]

    def get_output_details(self) -> list:
        sg = self._main.sg
        return [_details(self._model, sg, t, self._shape(t)) for t in sg.outputs]

    def get_tensor_details(self) -> list:
        sg = self._main.sg
        return [_details(self._model, sg, t, self._shape(t)) for t in range(len(sg.tensors))]

    def num_subgraphs(self) -> int:
        return len(self._model.subgraphs)

    # -- data --------------------------------------------------------------------------------

    def _plan(self, subgraph_index):
        """The plan of a subgraph; subgraphs other than the main one are planned when control
        flow first runs them (before that their tensors have no data)."""
        n = len(self._model.subgraphs)
        if not isinstance(subgraph_index, (int, np.integer)):
            raise TypeError(f"A subgraph index must be an int, got {subgraph_index!r}")
        if not 0 <= subgraph_index < n:
            raise ValueError(f"Invalid subgraph index {subgraph_index} exceeds max subgraph "
                             f"index {n - 1}")
        return self._main if subgraph_index == 0 else \
            self._runtime.plans.get(int(subgraph_index))

    def _check_index(self, tensor_index, subgraph_index=0) -> None:
        n = len(self._model.subgraphs[subgraph_index].tensors)
        if not isinstance(tensor_index, (int, np.integer)):
            raise TypeError(f"A tensor index must be an int (the 'index' of its details), got "
                            f"{tensor_index!r}")
        if not 0 <= tensor_index < n:
            raise ValueError(f"Invalid tensor index {tensor_index} exceeds max tensor index "
                             f"{n - 1}")

    def _array(self, tensor_index, subgraph_index=0) -> np.ndarray:
        plan = self._plan(subgraph_index)
        self._check_index(tensor_index, subgraph_index)
        if not self._allocated or plan is None or not plan.ready:
            raise ValueError("Tensor data is null. Run allocate_tensors() first")
        value = plan.arrays[tensor_index]
        if value is None:
            name = plan.sg.tensors[tensor_index].name
            raise ValueError(f"Tensor {tensor_index} ({name}) has no data: edgelite does not "
                             "keep it (an unused tensor)")
        return value

    def set_tensor(self, tensor_index, value) -> None:
        if not self._busy.acquire(blocking=False):   # _exclusive, inlined: the hot path
            raise self._concurrent("set_tensor()")
        outer, self._busy_with = self._busy_with, "set_tensor()"
        try:
            # An array of the tensor's type and shape: copied at once (the checks and the
            # messages of _set_tensor for everything else); 2.6 -> ~1 µs on a small input.
            arrays = self._main.arrays
            if type(value) is np.ndarray and type(tensor_index) is int and self._allocated \
                    and self._main.ready and 0 <= tensor_index < len(arrays):
                target = arrays[tensor_index]
                if target is not None and value.shape == target.shape \
                        and value.dtype == target.dtype and target.flags.writeable:
                    _copyto(target, value)
                    return
            self._set_tensor(tensor_index, value)
        finally:
            self._busy_with = outer
            self._busy.release()

    def _set_tensor(self, tensor_index, value) -> None:
        target = self._array(tensor_index)
        value = np.asarray(value)
        t = self._main.sg.tensors[tensor_index]
        k = list(self._main.sg.inputs).index(tensor_index) \
            if tensor_index in self._main.sg.inputs else tensor_index
        what = f"input {k}" if tensor_index in self._main.sg.inputs else f"tensor {tensor_index}"
        if value.dtype != target.dtype:
            raise ValueError(f"Cannot set tensor: Got value of type {_tfl_type(value.dtype)} but "
                             f"expected type {_tfl_type(target.dtype)} for {what}, name: {t.name}")
        if value.ndim != target.ndim:
            raise ValueError(f"Cannot set tensor: Dimension mismatch. Got {value.ndim} but "
                             f"expected {target.ndim} for {what} ({t.name}, shape "
                             f"{list(target.shape)}).")
        for d, (got, want) in enumerate(zip(value.shape, target.shape)):
            if got != want:
                raise ValueError(f"Cannot set tensor: Dimension mismatch. Got {got} but expected "
                                 f"{want} for dimension {d} of {what} ({t.name}, shape "
                                 f"{list(target.shape)}).")
        if not target.flags.writeable:
            raise ValueError(f"Cannot set tensor {tensor_index} ({t.name}): it is a constant")
        np.copyto(target, value)

    def get_tensor(self, tensor_index, subgraph_index=0) -> np.ndarray:
        if not self._busy.acquire(blocking=False):   # _exclusive, inlined: the hot path
            raise self._concurrent("get_tensor()")
        outer, self._busy_with = self._busy_with, "get_tensor()"
        try:
            arrays = self._main.arrays
            if subgraph_index == 0 and type(tensor_index) is int and self._allocated \
                    and self._main.ready and 0 <= tensor_index < len(arrays) \
                    and arrays[tensor_index] is not None:
                return arrays[tensor_index].copy()
            return np.array(self._array(tensor_index, subgraph_index))
        finally:
            self._busy_with = outer
            self._busy.release()

    def tensor(self, tensor_index):
        """A function returning a zero-copy view of the tensor's current memory. As in LiteRT,
        hold the function, not the array: invoke(), allocate_tensors() and
        resize_tensor_input() refuse to run while an array it gave (or a slice of one) is
        alive."""
        self._array(tensor_index)
        return lambda: np.asarray(_View(self._array(tensor_index), self._views))

    def _ensure_no_views(self, what: str) -> None:
        held = sys.getrefcount(self._views) - self._views_free
        if held > 0:
            raise RuntimeError(
                "There is at least 1 reference to internal data in the interpreter in the form "
                f"of a numpy array or slice: {held} array(s) from tensor() still alive, whose "
                f"memory {what}() may change. Hold the function tensor() returns and call it "
                "again afterwards (or copy the values with get_tensor()).")

    # -- running -----------------------------------------------------------------------------

    def invoke(self) -> None:
        # The hot path (~1 µs besides the steps): locals for what it reads twice, module-level
        # names for threads' functions, plan.invoke's lines inline (one Python frame less).
        busy = self._busy
        if not busy.acquire(False):   # _exclusive, inlined
            raise self._concurrent("invoke()")
        outer = self._busy_with
        self._busy_with = "invoke()"
        try:
            if _getrefcount(self._views) != self._views_free:
                self._ensure_no_views("invoke")
            plan = self._main
            if not self._allocated or not plan.ready:
                raise RuntimeError("Invoke called on model that is not ready: call "
                                   "allocate_tensors() first (and again after "
                                   "resize_tensor_input)")
            entered = None if self._blas_free is plan.run_steps else _enter(self._blas_threads)
            try:   # the block left whatever comes after its entry (a KeyboardInterrupt in
                token = ERRORS.set(IGNORE_ERRORS)   # ERRORS.set: a fast entry left behind
                try:                                # makes every change of the count hang)
                    plan.run_steps()
                except Exception as e:
                    plan.raise_named(e)
                finally:
                    ERRORS.reset(token)
            finally:
                if entered is not None:
                    _leave(entered)
        finally:
            self._busy_with = outer
            busy.release()

    def reset_all_variables(self) -> None:
        """Variable tensors back to their initial values; resource variables forgotten, so the
        model's CALL_ONCE initializer runs again at the next invoke."""
        with self._exclusive("reset_all_variables()"):   # it writes what an invoke reads
            self._runtime.resources.clear()
            self._runtime.once_done.clear()
            for plan in self._runtime.plans.values():
                if plan.ready:
                    plan.reset_variables()

    @property
    def arena_bytes(self) -> int:
        """Bytes of the main subgraph's shared activation arena (0 before allocate_tensors)."""
        return self._main.arena_bytes

    # -- signatures --------------------------------------------------------------------------

    # -- LiteRT's underscored helpers, which tools and scripts use too ------------------------

    def _get_tensor_details(self, tensor_index, subgraph_index=0) -> dict:
        """One tensor's details (as get_tensor_details gives them), of any subgraph."""
        self._plan(subgraph_index)                       # checks the index
        self._check_index(tensor_index, subgraph_index)
        return _details(self._model, self._model.subgraphs[subgraph_index], tensor_index,
                        self._shape(tensor_index, int(subgraph_index)))

    def _get_op_details(self, op_index) -> dict:
        """An operator of the main subgraph: index, op_name, inputs and outputs (tensor indices,
        -1 for an omitted input), operand_types and result_types (numpy types)."""
        sg = self._main.sg
        if not isinstance(op_index, (int, np.integer)) or not 0 <= op_index < len(sg.operators):
            raise ValueError("Invalid node index")
        op = sg.operators[op_index]
        code = op.opcode

        def types(indices):
            return [_numpy_type(sg.tensors[t].dtype) for t in indices if t >= 0]
        return {"index": int(op_index),
                "op_name": code.custom_code if code.builtin == "CUSTOM" else code.builtin,
                "inputs": np.array(op.inputs, np.int32), "outputs": np.array(op.outputs, np.int32),
                "operand_types": types(op.inputs), "result_types": types(op.outputs)}

    def _get_ops_details(self) -> list:
        return [self._get_op_details(i) for i in range(len(self._main.sg.operators))]

    def _get_full_signature_list(self) -> dict:
        """Per signature key, its input and output names with their tensor indices."""
        return {s.signature_key: {"inputs": dict(s.inputs), "outputs": dict(s.outputs)}
                for s in self._model.signature_defs}

    def get_signature_list(self) -> dict:
        return {s.signature_key: {"inputs": list(s.inputs), "outputs": list(s.outputs)}
                for s in self._model.signature_defs}

    def get_signature_runner(self, signature_key=None):
        from .signature import SignatureRunner
        sigs = self._model.signature_defs
        if signature_key is None:
            if len(sigs) != 1:
                raise ValueError("SignatureDef signature_key is None and model has "
                                 f"{len(sigs)} Signatures. None is only allowed when the model "
                                 "has 1 SignatureDef")
            return SignatureRunner(self, sigs[0])
        for s in sigs:
            if s.signature_key == signature_key:
                return SignatureRunner(self, s)
        raise ValueError(f'Invalid signature_key provided: "{signature_key}". The model has: '
                         f"{[s.signature_key for s in sigs]}")


_copyto = getattr(np.copyto, "_implementation", np.copyto)   # without __array_function__

_TFL_TYPE_NAMES = {np.dtype(np.float32): "FLOAT32", np.dtype(np.float64): "FLOAT64",
                   np.dtype(np.float16): "FLOAT16", np.dtype(np.int8): "INT8",
                   np.dtype(np.uint8): "UINT8", np.dtype(np.int16): "INT16",
                   np.dtype(np.int32): "INT32", np.dtype(np.int64): "INT64",
                   np.dtype(np.bool_): "BOOL", np.dtype(np.uint16): "UINT16",
                   np.dtype(np.uint32): "UINT32", np.dtype(np.uint64): "UINT64",
                   np.dtype(np.complex64): "COMPLEX64"}


# Control flow nested deeper than this is refused (deliberately: LiteRT runs IF nested 300
# deep in 0.2 s, 1000 in 2 s, and 3000 not within a minute; edgelite runs 2000 in 4 s, in a
# thread too). Python frames per nesting level: an IF's prepare, or its run, is about 5 frames
# deep before the next level.
MAX_NESTING = 2000
FRAMES_PER_LEVEL = 8


def _room_for_nesting(depth: int) -> None:
    """Raise Python's recursion limit (never lower it) so that `depth` levels of control flow
    prepare and run; refuse a deeper model."""
    if depth > MAX_NESTING:
        raise ValueError(f"Could not load the model: its control flow nests {depth} subgraphs "
                         f"deep; edgelite runs up to {MAX_NESTING}")
    need = 1000 + FRAMES_PER_LEVEL * depth
    if sys.getrecursionlimit() < need:
        sys.setrecursionlimit(need)


def _source_bytes(model_path, model_content) -> int | None:
    """The model file's size (what its allocation budget scales with)."""
    try:
        return len(model_content) if model_content is not None else os.path.getsize(model_path)
    except (OSError, TypeError):
        return None


def _resize_size(input_index, tensor_size) -> list:
    """The new shape as a list of ints: integral numbers (ints, or floats such as 2.0, which
    LiteRT accepts too), non-negative, in a 1-D sequence."""
    try:
        size = np.asarray(tensor_size)
        ok = size.ndim == 1 and (size.dtype.kind in "iu" or size.dtype.kind == "f"
                                 and bool(np.all(np.isfinite(size) & (size == np.round(size)))))
    except (TypeError, ValueError):
        ok = False
    if not ok or (size < 0).any():
        raise ResizeError(f"Cannot resize input {input_index}: size must be a 1-D list of "
                          f"non-negative ints, got {tensor_size!r}")
    return [int(d) for d in size]


def _tfl_type(dtype) -> str:
    return _TFL_TYPE_NAMES.get(np.dtype(dtype), str(dtype).upper())
