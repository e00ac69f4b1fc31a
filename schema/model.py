"""The in-memory model: the one IR of edgelite.

Plain dataclasses that mirror the `.tflite` tables. The loader builds them (weights stay numpy views
over the file), passes edit them, the writer serializes them. Operator order in a subgraph is
execution order.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# TensorType value -> our dtype name. Numbers are the format's; names are what users see.
TENSOR_TYPES = {
    0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 5: "string", 6: "bool",
    7: "int16", 8: "complex64", 9: "int8", 10: "float64", 11: "complex128", 12: "uint64",
    13: "resource", 14: "variant", 15: "uint32", 16: "uint16", 17: "int4", 18: "bfloat16",
    19: "int2",
}
TENSOR_TYPE_CODES = {name: code for code, name in TENSOR_TYPES.items()}

# Our dtype name -> numpy dtype, for the types that hold plain numbers.
NUMPY_DTYPES = {
    "float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
    "float64": np.dtype(np.float64), "int8": np.dtype(np.int8), "uint8": np.dtype(np.uint8),
    "int16": np.dtype(np.int16), "uint16": np.dtype(np.uint16), "int32": np.dtype(np.int32),
    "uint32": np.dtype(np.uint32), "int64": np.dtype(np.int64), "uint64": np.dtype(np.uint64),
    "bool": np.dtype(np.bool_), "complex64": np.dtype(np.complex64),
    "complex128": np.dtype(np.complex128),
    # Resource and variant tensors hold a handle; edgelite keeps it in one int32 slot.
    "resource": np.dtype(np.int32), "variant": np.dtype(np.int32),
}


def int4_bytes(count: int) -> int:
    """Bytes of `count` packed int4 values (two per byte)."""
    return (int(count) + 1) // 2


def unpack_int4(packed: np.ndarray, shape) -> np.ndarray:
    """Packed int4 values (two per byte, the first in the low nibble, as TFLite packs them) as
    a read-only int8 array of `shape`, sign-extended."""
    count = int(np.prod(shape, dtype=np.int64))
    raw = np.asarray(packed).view(np.uint8).reshape(-1)[:int4_bytes(count)]
    nibbles = np.empty(2 * raw.size, np.int8)
    nibbles[0::2] = raw & 0x0F
    nibbles[1::2] = raw >> 4
    nibbles[nibbles >= 8] -= 16
    value = nibbles[:count].reshape(shape)
    value.flags.writeable = False
    return value


def pack_int4(values) -> np.ndarray:
    """int8 values in [-8, 7] packed two per byte (the first in the low nibble)."""
    flat = np.asarray(values).reshape(-1).astype(np.int16) & 0x0F
    if flat.size % 2:
        flat = np.append(flat, 0)
    return (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8)


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a tensor type name; ValueError for types numpy cannot hold."""
    try:
        return NUMPY_DTYPES[name]
    except KeyError:
        raise ValueError(f"tensor type {name!r} has no numpy dtype in edgelite") from None


def dtype_name(dtype) -> str:
    """Our tensor type name for a numpy dtype."""
    dtype = np.dtype(dtype)
    for name, dt in NUMPY_DTYPES.items():
        if dt == dtype and name not in ("resource", "variant"):
            return name
    raise ValueError(f"numpy dtype {dtype} has no .tflite tensor type")


def _array_eq(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    a, b = np.asarray(a), np.asarray(b)
    nan = a.dtype.kind in "fc"  # a NaN read from a file equals itself
    return (a.shape == b.shape and a.dtype == b.dtype
            and bool(np.array_equal(a, b, equal_nan=nan)))


class Options:
    """A builtin operator's options table: its table name and fields in snake_case.

    `Options("Conv2DOptions", padding=1, stride_w=2, stride_h=2, ...)`. Vector fields are tuples.
    Equality compares the table name and every field.
    """

    __slots__ = ("kind", "fields")

    def __init__(self, kind: str, **fields: Any):
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "fields", dict(fields))

    def __getattr__(self, name):
        if name.startswith("__") or name in ("kind", "fields"):  # copy/pickle probe these
            raise AttributeError(name)
        try:
            return self.fields[name]
        except KeyError:
            raise AttributeError(f"{self.kind} has no field {name!r}; fields: "
                                 f"{', '.join(self.fields) or 'none'}") from None

    def __setattr__(self, name, value):
        if name not in self.fields:
            raise AttributeError(f"{self.kind} has no field {name!r}")
        self.fields[name] = value

    def __reduce__(self):
        return (_make_options, (self.kind, dict(self.fields)))

    def replace(self, **changes) -> "Options":
        for name in changes:
            if name not in self.fields:
                raise AttributeError(f"{self.kind} has no field {name!r}")
        return Options(self.kind, **{**self.fields, **changes})

    def __eq__(self, other):
        return (isinstance(other, Options) and self.kind == other.kind
                and self.fields.keys() == other.fields.keys()
                and all(_field_eq(self.fields[k], other.fields[k]) for k in self.fields))

    def __repr__(self):
        body = ", ".join(f"{k}={v!r}" for k, v in self.fields.items())
        return f"Options({self.kind!r}, {body})"


def _make_options(kind: str, fields: dict) -> "Options":
    return Options(kind, **fields)


def _field_eq(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return _array_eq(a, b)
    return a == b


@dataclass(eq=False)
class QuantizationParameters:
    """Affine quantization: real = scale * (q - zero_point), per tensor or along one axis."""

    scale: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    zero_point: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    quantized_dimension: int = 0
    min: np.ndarray | None = None
    max: np.ndarray | None = None

    def __post_init__(self):
        self.scale = np.asarray(self.scale, np.float32).reshape(-1)
        self.zero_point = np.asarray(self.zero_point, np.int64).reshape(-1)

    @property
    def per_channel(self) -> bool:
        return self.scale.size > 1

    def __eq__(self, other):
        return (isinstance(other, QuantizationParameters)
                and _array_eq(self.scale, other.scale)
                and _array_eq(self.zero_point, other.zero_point)
                and self.quantized_dimension == other.quantized_dimension
                and _array_eq(self.min, other.min) and _array_eq(self.max, other.max))


@dataclass(eq=False)
class Buffer:
    """Raw bytes of a constant tensor (or metadata). `data` is a uint8 numpy array, often a view
    over the model file; an empty array means "no data" (activations, variables)."""

    data: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))

    def __post_init__(self):
        if not isinstance(self.data, np.ndarray):
            self.data = np.frombuffer(bytes(self.data), np.uint8)
        elif self.data.dtype != np.uint8 or self.data.ndim != 1:
            self.data = np.ascontiguousarray(self.data).reshape(-1).view(np.uint8)

    @property
    def nbytes(self) -> int:
        return int(self.data.size)

    def __eq__(self, other):
        return isinstance(other, Buffer) and _array_eq(self.data, other.data)


@dataclass(eq=False)
class DimensionMetadata:
    """One dimension of a sparse tensor's storage, in traversal order: DENSE (format 0, all
    `dense_size` positions stored) or SPARSE_CSR (format 1: `segments` and `indices` arrays,
    kept in the integer type the file stores them in: uint8, uint16 or int32)."""

    format: int = 0
    dense_size: int = 0
    segments: np.ndarray | None = None
    indices: np.ndarray | None = None

    def __eq__(self, other):
        if not isinstance(other, DimensionMetadata):
            return NotImplemented
        return (self.format == other.format and self.dense_size == other.dense_size
                and _array_eq(self.segments, other.segments)
                and _array_eq(self.indices, other.indices))


@dataclass
class SparsityParameters:
    """How a sparse constant stores its values (the format's SparsityParameters): the order of
    the n original dimensions and k block dimensions, which original dimension each block
    dimension splits, and one DimensionMetadata per dimension in that order."""

    traversal_order: tuple = ()
    block_map: tuple = ()
    dim_metadata: list = field(default_factory=list)

    def __post_init__(self):
        self.traversal_order = tuple(int(d) for d in self.traversal_order)
        self.block_map = tuple(int(d) for d in self.block_map)


@dataclass
class Tensor:
    name: str
    shape: tuple
    dtype: str = "float32"
    buffer: int = 0  # index into Model.buffers; 0 is the empty buffer
    quantization: QuantizationParameters | None = None
    shape_signature: tuple | None = None  # -1 marks a dynamic dimension
    is_variable: bool = False
    has_rank: bool = False
    sparsity: SparsityParameters | None = None  # the buffer holds only the stored values

    def __post_init__(self):
        self.shape = tuple(int(d) for d in self.shape)
        if self.shape_signature is not None:
            self.shape_signature = tuple(int(d) for d in self.shape_signature)

    @property
    def np_dtype(self) -> np.dtype:
        return numpy_dtype(self.dtype)


@dataclass(frozen=True)
class OperatorCode:
    """What an operator is: a builtin op by name (e.g. "CONV_2D"), or "CUSTOM" with custom_code.

    `version` 0 (the default) lets the writer pick the version from the features the op uses
    (`versions.op_version`); a loaded model keeps the versions its file states."""

    builtin: str
    version: int = 0
    custom_code: str | None = None

    @property
    def name(self) -> str:
        return self.custom_code if self.builtin == "CUSTOM" else self.builtin


@dataclass
class Operator:
    opcode: OperatorCode
    inputs: list  # tensor indices; -1 is an omitted optional input
    outputs: list
    options: Options | None = None
    custom_options: bytes | None = None
    intermediates: list = field(default_factory=list)

    @property
    def op(self) -> str:
        """The builtin name (or custom code) of this operator."""
        return self.opcode.name


@dataclass
class Subgraph:
    tensors: list = field(default_factory=list)
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    operators: list = field(default_factory=list)
    name: str = ""

    def add_tensor(self, tensor: Tensor) -> int:
        self.tensors.append(tensor)
        return len(self.tensors) - 1


@dataclass
class SignatureDef:
    """A named entry point: input and output names (in order) mapped to tensor indices."""

    signature_key: str
    subgraph_index: int = 0
    inputs: dict = field(default_factory=dict)
    outputs: dict = field(default_factory=dict)


@dataclass
class Metadata:
    name: str
    buffer: int


@dataclass
class Model:
    subgraphs: list = field(default_factory=list)
    buffers: list = field(default_factory=lambda: [Buffer()])
    description: str = ""
    signature_defs: list = field(default_factory=list)
    metadata: list = field(default_factory=list)
    version: int = 3

    def add_buffer(self, data=None) -> int:
        """Append a buffer holding `data` (bytes or an array, stored as its raw bytes)."""
        if data is None:
            self.buffers.append(Buffer())
        else:
            arr = np.ascontiguousarray(data)
            self.buffers.append(Buffer(arr.reshape(-1).view(np.uint8)))
        return len(self.buffers) - 1

    def get_metadata(self, name: str) -> bytes | None:
        for m in self.metadata:
            if m.name == name:
                return self.buffers[m.buffer].data.tobytes()
        return None

    def set_metadata(self, name: str, data: bytes) -> None:
        for m in self.metadata:
            if m.name == name:
                self.buffers[m.buffer] = Buffer(np.frombuffer(bytes(data), np.uint8))
                return
        self.metadata.append(Metadata(name, self.add_buffer(np.frombuffer(bytes(data), np.uint8))))

    def constant(self, subgraph: Subgraph, tensor_index: int) -> np.ndarray | None:
        """The value of a constant tensor as an array of its dtype and shape (a view), or None.
        None for a sparse tensor too: its buffer holds the stored values only (DENSIFY). An int4
        constant comes unpacked, as an int8 array (a copy)."""
        t = subgraph.tensors[tensor_index]
        buf = self.buffers[t.buffer]
        if t.is_variable or buf.nbytes == 0 or t.sparsity is not None:
            return None
        if t.dtype == "int4":
            return unpack_int4(buf.data, t.shape)
        return buf.data.view(t.np_dtype).reshape(t.shape)

    def __eq__(self, other):
        if not isinstance(other, Model):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name)
                   for f in dataclasses.fields(self))
