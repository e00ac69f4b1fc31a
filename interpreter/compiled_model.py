"""A drop-in for LiteRT 2.x's `CompiledModel` / `TensorBuffer` API (ai_edge_litert 2.3), CPU path:

    from edgelite.interpreter.compiled_model import CompiledModel, TensorBuffer
    # was: from ai_edge_litert.compiled_model import CompiledModel
    #      from ai_edge_litert.tensor_buffer import TensorBuffer

    model = CompiledModel.from_file("model.tflite")
    inputs, outputs = model.create_input_buffers(0), model.create_output_buffers(0)
    inputs[0].write(x)
    model.run_by_index(0, inputs, outputs)
    y = outputs[0].read(n, np.float32)

The same calls, details dicts and errors as LiteRT's for the same misuse: buffers hold raw
bytes (a write copies bytes, up to the buffer's size; a read reinterprets them as the dtype
asked for), unsupported dtypes and non-arrays are ValueErrors, a bad signature, index or buffer
count is a RuntimeError with LiteRT's message. A model without signatures has one,
'<placeholder signature>', over the graph's inputs and outputs. GPU and NPU accelerators are
refused (edgelite's OpenCL delegate runs through `Interpreter(experimental_delegates=...)`).
Where LiteRT aborts the process (get_signature_by_index out of range) this raises instead.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgelite.schema import ModelError

from .api import Interpreter

PLACEHOLDER = "<placeholder signature>"
_HOST_MEMORY = 1   # LiteRT's kLiteRtTensorBufferTypeHostMemory
_DTYPES = {np.dtype(np.float32): "float32", np.dtype(np.float16): "float16",
           np.dtype(np.int32): "int32", np.dtype(np.int8): "int8",
           np.dtype(np.uint8): "uint8", np.dtype(np.bool_): "bool"}


class HardwareAccelerator(enum.IntFlag):
    CPU = 1
    GPU = 2
    NPU = 4


@dataclass
class CpuOptions:
    num_threads: int | None = None


@dataclass
class Options:
    hardware_accelerators: HardwareAccelerator = HardwareAccelerator.CPU
    cpu_options: CpuOptions = field(default_factory=CpuOptions)


@dataclass(frozen=True)
class EnvironmentOptions:
    runtime_path: str | None = None
    compiler_plugin_path: str = ""
    dispatch_library_path: str = ""


class Environment:
    """LiteRT's shared environment: here only what it was made with (the CPU path needs no
    runtime library, compiler plugin or dispatch library)."""

    def __init__(self, capsule=None, options: EnvironmentOptions | None = None):
        self._capsule = capsule
        self._options = options or EnvironmentOptions()

    def __enter__(self) -> "Environment":
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.close()

    def close(self) -> None:
        self._capsule = None

    @classmethod
    def create(cls, *, options=None, runtime_path=None, compiler_plugin_path: str = "",
               dispatch_library_path: str = "") -> "Environment":
        if isinstance(options, str):
            if runtime_path is not None:
                raise ValueError("runtime_path was provided twice.")
            runtime_path, options = options, None
        if options is not None and (runtime_path is not None or compiler_plugin_path
                                    or dispatch_library_path):
            raise ValueError("Pass either options or environment path shortcuts.")
        if options is None:
            options = EnvironmentOptions(runtime_path, compiler_plugin_path,
                                         dispatch_library_path)
        return cls(object(), options)

    @property
    def options(self) -> EnvironmentOptions:
        return self._options

    @property
    def capsule(self):
        return self._capsule


def _error(code: int, message: str) -> RuntimeError:
    return RuntimeError(f"CompiledModel error: code={code}, message={message}")


def _dtype_name(dtype) -> tuple:
    """(name, numpy dtype) of a dtype TensorBuffer takes; ValueError as LiteRT's otherwise."""
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise ValueError(f"Unsupported dtype: {dtype}") from exc
    name = _DTYPES.get(dt) or (dt.name if dt.name in ("bfloat16", "float8_e4m3fn",
                                                        "float8_e5m2") else None)
    if name is None:
        raise ValueError(f"Unsupported dtype: {dtype}")
    return name, dt


class TensorBuffer:
    """A host-memory tensor buffer: raw bytes with a dtype and shape."""

    def __init__(self, capsule, environment=None):
        self._capsule = capsule          # a dict: bytes (uint8 array), dtype, shape
        self._environment = environment

    @classmethod
    def _owned(cls, dtype: np.dtype, shape) -> "TensorBuffer":
        shape = [int(d) for d in shape]
        data = np.zeros(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, np.uint8)
        return cls(dict(bytes=data, dtype=dtype, shape=shape))

    @classmethod
    def create_from_host_memory(cls, data_array: np.ndarray) -> "TensorBuffer":
        """A buffer over the array's own memory (no copy): writes land in the array."""
        if not isinstance(data_array, np.ndarray):
            raise ValueError("data_array must be a NumPy array")
        _, dt = _dtype_name(data_array.dtype)
        if not data_array.flags.c_contiguous:
            raise ValueError("data_array must be C-contiguous for zero-copy host-memory binding")
        raw = data_array.reshape(-1).view(np.uint8)
        return cls(dict(bytes=raw, dtype=dt, shape=[int(data_array.size)]))

    def _live(self, what: str) -> dict:
        if self._capsule is None:
            raise RuntimeError(f"{what}: invalid capsule")
        return self._capsule

    def write(self, data_array: np.ndarray) -> None:
        """Copies the array's bytes to the start of the buffer."""
        if not isinstance(data_array, np.ndarray):
            raise ValueError("data_array must be a NumPy array")
        _dtype_name(data_array.dtype)
        buf = self._live("WriteTensorBuffer")["bytes"]
        src = np.ascontiguousarray(data_array).reshape(-1).view(np.uint8)
        if src.size > buf.size:
            raise RuntimeError("WriteTensorBuffer: source buffer is larger than the tensor buffer")
        buf[:src.size] = src

    def read(self, num_elements: int, output_dtype) -> np.ndarray:
        """The first `num_elements` values of the buffer's bytes as `output_dtype`."""
        _, dt = _dtype_name(output_dtype)
        buf = self._live("ReadTensorToBuffer")["bytes"]
        count = int(num_elements) * dt.itemsize
        if count > buf.size:
            raise RuntimeError("ReadTensorToBuffer: destination buffer is larger than the tensor "
                               "buffer")
        return buf[:count].copy().view(dt)

    def get_tensor_details(self) -> dict:
        c = self._live("GetTensorDetails")
        return {"dtype": _DTYPES.get(c["dtype"], c["dtype"].name), "shape": list(c["shape"])}

    def destroy(self) -> None:
        self._capsule = None
        self._environment = None

    @property
    def capsule(self):
        if self._capsule is None:
            raise ValueError("TensorBuffer has been destroyed")
        return self._capsule


class _Model:
    """What the CompiledModel wraps (LiteRT's C++ object): an edgelite Interpreter and its
    signatures, each as (key, input names, output names, tensor indices)."""

    def __init__(self, interpreter: Interpreter):
        self.it = interpreter
        self.signatures = []
        for key, io in interpreter.get_signature_list().items():
            runner = interpreter.get_signature_runner(key)
            self.signatures.append((key, list(io["inputs"]), list(io["outputs"]), runner))
        if not self.signatures:
            ins = [d["name"] for d in interpreter.get_input_details()]
            outs = [d["name"] for d in interpreter.get_output_details()]
            self.signatures.append((PLACEHOLDER, ins, outs, None))
        self.fed = {}       # (signature, input name) -> the last value fed (a runner's inputs)
        self.resized = {}   # (signature, input name) -> shape (a runner resizes when fed)

    def index_of(self, key: str) -> int:
        return next((i for i, s in enumerate(self.signatures) if s[0] == key), -1)

    def signature(self, index: int, code=1000, what="") -> tuple:
        if not 0 <= index < len(self.signatures):
            raise _error(code, f"{what}Signature index is out of range of signature keys")
        return self.signatures[index]

    def by_key(self, key: str, message=None) -> tuple:
        i = self.index_of(key)
        if i < 0:
            raise _error(6, message or f"Signature not found: {key}")
        return self.signatures[i]

    def tensors(self, index: int) -> tuple:
        """(input details, output details), each a list of the interpreter's detail dicts."""
        key, _, _, runner = self.signature(index)
        if runner is None:
            return self.it.get_input_details(), self.it.get_output_details()
        ins, outs = runner.get_input_details(), runner.get_output_details()
        names = self.signatures[index]
        ins = [dict(ins[n], shape=np.array(self.resized.get((index, n), ins[n]["shape"])))
               for n in names[1]]
        return ins, [outs[n] for n in names[2]]

    def details(self, key: str, which: int) -> dict:
        index = self.index_of(key)
        if index < 0:
            raise _error(6, f"Signature not found: {key}")
        names = self.signatures[index][1 + which]
        return {name: {"name": d["name"], "index": int(d["index"]),
                       "dtype": np.dtype(d["dtype"]).name,
                       "shape": [int(v) for v in d["shape"]]}
                for name, d in zip(names, self.tensors(index)[which])}

    def run(self, index: int, inputs: list, outputs: list) -> None:
        key, in_names, out_names, runner = self.signature(index, 1000,
                                                          "Failed to invoke the compiled model\n└ ")
        ins, outs = self.tensors(index)
        for have, want, kind in ((inputs, ins, "Input"), (outputs, outs, "Output")):
            if len(have) != len(want):
                raise _error(3, f"Failed to invoke the compiled model\n└ {kind} buffer size "
                                f"mismatch: number of {kind.lower()}s:{len(want)} vs "
                                f"buffers:{len(have)}")
        self._run(index, dict(zip(in_names, inputs)), dict(zip(out_names, outputs)))

    def _run(self, index: int, inputs: dict, outputs: dict) -> None:
        key, in_names, out_names, runner = self.signatures[index]
        ins, outs = self.tensors(index)
        capsules = {n: b.capsule for n, b in {**inputs, **outputs}.items()}   # destroyed: raises
        feeds = {}
        for name, d in zip(in_names, ins):
            if name in inputs:
                feeds[name] = _tensor_view(capsules[name], d, name)
        if runner is None:
            for name, d in zip(in_names, ins):
                if name in feeds:
                    self.it.set_tensor(d["index"], feeds[name])
            self.it.invoke()
            results = {n: self.it.get_tensor(d["index"]) for n, d in zip(out_names, outs)}
        else:
            for name, d in zip(in_names, ins):    # an input left out keeps its last value
                if name in feeds:
                    self.fed[index, name] = feeds[name].copy()
                feeds[name] = self.fed.get((index, name))
                if feeds[name] is None:
                    feeds[name] = np.zeros([int(v) for v in d["shape"]], d["dtype"])
            results = runner(**feeds)
        for name in out_names:
            if name in outputs:
                value = np.ascontiguousarray(results[name]).reshape(-1).view(np.uint8)
                buf = capsules[name]["bytes"]
                buf[:min(buf.size, value.size)] = value[:buf.size]


def _tensor_view(capsule: dict, detail: dict, name: str) -> np.ndarray:
    """A buffer's bytes as the tensor it feeds (LiteRT refuses a buffer of another shape)."""
    shape = [int(v) for v in detail["shape"]]
    if list(capsule["shape"]) != shape:
        raise _error(3, "Failed to invoke the compiled model\n└ Failed to register input tensor "
                        f"buffer: Cannot auto-resize tensor {name}: no dims_signature exists")
    dt = np.dtype(detail["dtype"])
    return capsule["bytes"][:int(np.prod(shape, dtype=np.int64)) * dt.itemsize].view(dt) \
        .reshape(shape)


def _resolve(options, hardware_accel) -> Options:
    if options is not None:
        if hardware_accel is not None:
            raise ValueError("Pass either options or hardware_accel, not both.")
        return options
    return Options(hardware_accelerators=hardware_accel or HardwareAccelerator.CPU,
                   cpu_options=CpuOptions(num_threads=1))


def _interpreter(options: Options, **source) -> Interpreter:
    accel = HardwareAccelerator(int(options.hardware_accelerators))
    if accel & ~HardwareAccelerator.CPU:
        raise RuntimeError(f"edgelite's CompiledModel runs on the CPU only, not {accel!r}; "
                           "for a GPU, pass load_delegate('opencl') to edgelite.interpreter."
                           "Interpreter")
    where = "file" if "model_path" in source else "buffer"
    try:
        it = Interpreter(num_threads=options.cpu_options.num_threads, **source)
        it.allocate_tensors()
    except (ModelError, OSError, ValueError) as e:
        raise RuntimeError(f"Failed to load model from {where}\n└ {e}") from e
    return it


class CompiledModel:
    """A model ready to run: signatures, buffers, run_by_index / run_by_name (see the module)."""

    def __init__(self, c_model_ptr, environment=None):
        self._model = c_model_ptr
        self._environment = environment

    def __enter__(self) -> "CompiledModel":
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.close()

    def close(self) -> None:
        self._model = None

    @classmethod
    def from_file(cls, model_path: str, hardware_accel=None, environment=None,
                  options=None) -> "CompiledModel":
        it = _interpreter(_resolve(options, hardware_accel), model_path=model_path)
        return cls(_Model(it), environment or Environment.create())

    @classmethod
    def from_buffer(cls, model_data: bytes, hardware_accel=None, environment=None,
                    options=None) -> "CompiledModel":
        it = _interpreter(_resolve(options, hardware_accel), model_content=bytes(model_data))
        return cls(_Model(it), environment or Environment.create())

    @property
    def environment(self):
        return self._environment

    def get_signature_list(self) -> dict:
        return {k: {"inputs": list(i), "outputs": list(o)} for k, i, o, _ in
                self._model.signatures}

    def get_signature_by_index(self, index: int) -> dict[str, Any]:
        key, ins, outs, _ = self._model.signature(index)
        return {"key": key, "inputs": list(ins), "outputs": list(outs)}

    def get_num_signatures(self) -> int:
        return len(self._model.signatures)

    def get_signature_index(self, key: str) -> int:
        return self._model.index_of(key)

    def get_input_tensor_details(self, signature_key: str) -> dict:
        return self._model.details(signature_key, 0)

    def get_output_tensor_details(self, signature_key: str) -> dict:
        return self._model.details(signature_key, 1)

    def _requirements(self, k: int, signature_index: int, which: int) -> dict:
        details = self._model.tensors(signature_index)[which]
        if not 0 <= k < len(details):
            raise _error(1000, f"{('Input', 'Output')[which]} index out of range")
        d = details[k]
        size = int(np.prod(d["shape"], dtype=np.int64)) * np.dtype(d["dtype"]).itemsize
        return {"buffer_size": size, "supported_types": [_HOST_MEMORY]}

    def get_input_buffer_requirements(self, input_index: int, signature_index: int = 0) -> dict:
        return self._requirements(input_index, signature_index, 0)

    def get_output_buffer_requirements(self, output_index: int,
                                       signature_index: int = 0) -> dict:
        return self._requirements(output_index, signature_index, 1)

    def is_fully_accelerated(self) -> bool:
        return True    # every op runs on the one accelerator asked for, the CPU

    def _buffer(self, signature_key: str, name: str, which: int) -> TensorBuffer:
        index = self._model.index_of(signature_key)
        if index < 0:
            raise _error(6, f"Signature not found: {signature_key}")
        names = self._model.signatures[index][1 + which]
        if name not in names:
            raise _error(6, f"{('Input', 'Output')[which]} tensor not found: {name}")
        d = self._model.tensors(index)[which][names.index(name)]
        return TensorBuffer._owned(np.dtype(d["dtype"]), d["shape"])

    def create_input_buffer_by_name(self, signature_key: str, input_name: str) -> TensorBuffer:
        return self._buffer(signature_key, input_name, 0)

    def create_output_buffer_by_name(self, signature_key: str,
                                     output_name: str) -> TensorBuffer:
        return self._buffer(signature_key, output_name, 1)

    def create_input_buffers(self, signature_index: int) -> list:
        return [TensorBuffer._owned(np.dtype(d["dtype"]), d["shape"])
                for d in self._model.tensors(signature_index)[0]]

    def create_output_buffers(self, signature_index: int) -> list:
        return [TensorBuffer._owned(np.dtype(d["dtype"]), d["shape"])
                for d in self._model.tensors(signature_index)[1]]

    def resize_input_tensor(self, input_index: int, dims, signature_index: int = 0,
                            strict: bool = True) -> None:
        """Resizes an input; strict (LiteRT's default) only along dimensions the model marks
        dynamic (-1 in its shape signature)."""
        dims = [int(v) for v in dims]
        ins = self._model.tensors(signature_index)[0]
        if not 0 <= input_index < len(ins):
            raise _error(1000, "Input index out of range")
        d = ins[input_index]
        if strict:
            sig = list(d.get("shape_signature", d["shape"]))
            if len(sig) != len(dims) or any(s != -1 and s != v for s, v in zip(sig, dims)):
                raise _error(1, "New shape is not compatible with current shape.")
        key, names, _, runner = self._model.signatures[signature_index]
        if runner is not None:
            self._model.resized[signature_index, names[input_index]] = dims
            self._model.fed.pop((signature_index, names[input_index]), None)
            return
        try:
            self._model.it.resize_tensor_input(d["index"], dims, strict=False)
            self._model.it.allocate_tensors()
        except (ValueError, RuntimeError) as e:
            raise _error(3, f"Failed to allocate tensors\n└ {e}") from e

    def resize_input_tensor_by_name(self, signature_key: str, input_name: str, dims,
                                    strict: bool = True) -> None:
        index = self.get_signature_index(signature_key)
        if index < 0:
            raise ValueError(f"Unknown signature: {signature_key}")
        names = self.get_signature_list()[signature_key]["inputs"]
        if input_name not in names:
            raise ValueError(f"Unknown input '{input_name}' for signature '{signature_key}'")
        self.resize_input_tensor(names.index(input_name), dims, index, strict)

    def run_by_name(self, signature_key: str, input_map: dict, output_map: dict) -> None:
        """Runs a signature; names it does not have are ignored, as LiteRT does, and an input
        left out keeps the value it had."""
        index = self._model.index_of(signature_key)
        if index < 0:
            raise _error(6, "Failed to get signature_index")
        key, in_names, out_names, _ = self._model.signatures[index]
        self._model._run(index, {k: v for k, v in input_map.items() if k in in_names},
                         {k: v for k, v in output_map.items() if k in out_names})

    def run_by_index(self, signature_index: int, input_buffers: list,
                     output_buffers: list) -> None:
        self._model.run(signature_index, list(input_buffers), list(output_buffers))
