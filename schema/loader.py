"""`load()`: a `.tflite` file (untrusted input) into the in-memory model.

Weights are not copied: buffers are numpy views over the file's bytes (or an mmap of it). Every
read is checked; anything wrong raises `ModelError` saying what and where, never another exception,
and the total work is bounded by the file's size.
"""
from __future__ import annotations

import mmap
import os
import struct

import flatbuffers
import numpy as np

from . import bindings as fb   # the generated bindings, compiled as used
from .errors import ModelError
from .model import (TENSOR_TYPES, Buffer, DimensionMetadata, Metadata, Model, Operator,
                    OperatorCode, QuantizationParameters, SignatureDef, SparsityParameters,
                    Subgraph, Tensor)
from .options import (OPERATOR_NAMES, OPTIONS2_NAMES, OPTIONS_NAMES, default_options,
                      options_from_table, options_kind)
from .ops import facts
from .validate import validate
from .verify import verify

BUFFER_LOCATION = "buffer_location"  # the large-model marker; see writer.save

MAX_RANK = 16

# Where low-level read errors come from: the FlatBuffers runtime and the generated bindings read
# through offsets they do not check (no verifier in Python), so on a corrupt file they raise these.
_READ_ERRORS = (IndexError, struct.error, ValueError, TypeError, OverflowError)
_READER_FILES = (os.path.dirname(flatbuffers.__file__), os.path.abspath(fb.SOURCE))


class _Budget:
    """Counts the elements read, so a hostile file that shares one huge vector among many tables
    cannot make loading take more than about one pass over the file's size. Also remembers where
    the reader is, for messages about low-level errors."""

    def __init__(self, nbytes: int):
        # A sound file has at most one element per byte (int32 vectors: one per 4 bytes).
        self.left = nbytes + 100_000
        self.where = "model"

    def spend(self, n: int, where: str) -> None:
        self.left -= n
        if self.left < 0:
            raise ModelError(f"{where}: the file refers to far more data than it holds "
                             "(shared or overlapping vectors)")


def _file_bytes(source):
    if isinstance(source, (bytes, bytearray)):
        return source
    if isinstance(source, memoryview):
        return source.cast("B") if source.c_contiguous else source.tobytes()
    path = os.fspath(source)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return b""
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise ModelError(f"cannot read model file {path!r}: {e.strerror or e}") from None


def load(source) -> Model:
    """Load a `.tflite` model from a path or from bytes. Raises `ModelError` on a bad file."""
    buf = _file_bytes(source)
    if len(buf) < 8:
        raise ModelError(f"not a .tflite model: the file has {len(buf)} bytes, too short for a "
                         "FlatBuffer header")
    ident = bytes(buf[4:8])
    if ident != b"TFL3":
        raise ModelError(f"not a .tflite model: file identifier is {ident!r}, expected b'TFL3'")
    _check_root(buf)
    verify(buf)   # the FlatBuffers verifier, as LiteRT runs it: nothing unverified is read
    budget = _Budget(len(buf))
    try:
        model = _read_model(fb.Model.GetRootAs(buf, 0), buf, budget)
    except _READ_ERRORS as e:
        if isinstance(e, ModelError) or not _raised_by_reader(e):
            raise
        raise ModelError(f"corrupt or truncated .tflite file: reading {budget.where}, an offset "
                         f"or length points outside the file ({type(e).__name__}: {e})") from None
    validate(model)
    return model


def _raised_by_reader(e: BaseException) -> bool:
    """True when `e` was raised inside the FlatBuffers runtime or the generated bindings (a
    corrupt offset), False when it comes from edgelite's own code (a bug to fix, not hide)."""
    tb = e.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return last is not None and os.path.abspath(last).startswith(_READER_FILES)


def _check_root(buf) -> None:
    """The root table and its vtable must lie inside the file."""
    n = len(buf)
    root = struct.unpack_from("<I", buf, 0)[0]
    if not 8 <= root <= n - 4:
        raise ModelError(f"corrupt .tflite file: root table offset {root} lies outside the "
                         f"{n}-byte file")
    vtable = root - struct.unpack_from("<i", buf, root)[0]
    if not 0 <= vtable <= n - 4:
        raise ModelError(f"corrupt .tflite file: the root table's vtable at {vtable} lies outside "
                         f"the {n}-byte file")


def _count(n: int, elem_size: int, buf, what: str, budget: _Budget) -> int:
    if n < 0 or n * elem_size > len(buf):
        raise ModelError(f"{what}: vector of {n} entries does not fit in a {len(buf)}-byte file")
    budget.spend(n, what)
    return n


def _array(value, dtype, what: str, budget: _Budget):
    """A generated `XxxAsNumpy()` result as an array (the generated code returns 0 when absent)."""
    if isinstance(value, int):
        return np.zeros(0, dtype)
    budget.spend(value.size, what)
    return value


def _ints(value, what, budget) -> list:
    return _array(value, np.int32, what, budget).tolist()


def _str(value) -> str:
    return value.decode("utf-8", "replace") if value else ""


def _read_model(root, buf, budget: _Budget) -> Model:
    version = root.Version()
    if version != 3:
        raise ModelError(f"unsupported .tflite schema version {version}; edgelite reads version 3")
    budget.where = "operator_codes"
    codes = [_read_opcode(root.OperatorCodes(i), i, budget)
             for i in range(_count(root.OperatorCodesLength(), 4, buf, "operator_codes", budget))]
    budget.where = "buffers"
    buffers = [_read_buffer(root.Buffers(i), i, buf, budget)
               for i in range(_count(root.BuffersLength(), 4, buf, "buffers", budget))]
    budget.where = "subgraphs"
    subgraphs = [_read_subgraph(root.Subgraphs(i), i, codes, buf, budget)
                 for i in range(_count(root.SubgraphsLength(), 4, buf, "subgraphs", budget))]
    metadata = []
    budget.where = "metadata"
    for i in range(_count(root.MetadataLength(), 4, buf, "metadata", budget)):
        budget.where = f"metadata {i}"
        m = root.Metadata(i)
        metadata.append(Metadata(_str(m.Name()), int(m.Buffer())))
    signatures = []
    budget.where = "signature_defs"
    for i in range(_count(root.SignatureDefsLength(), 4, buf, "signature_defs", budget)):
        budget.where = f"signature_def {i}"
        s = root.SignatureDefs(i)
        ins = {_str(s.Inputs(j).Name()): int(s.Inputs(j).TensorIndex())
               for j in range(_count(s.InputsLength(), 4, buf, f"signature {i} inputs", budget))}
        outs = {_str(s.Outputs(j).Name()): int(s.Outputs(j).TensorIndex())
                for j in range(_count(s.OutputsLength(), 4, buf, f"signature {i} outputs",
                                      budget))}
        signatures.append(SignatureDef(_str(s.SignatureKey()), int(s.SubgraphIndex()), ins, outs))
    budget.where = "model description"
    model = Model(subgraphs=subgraphs, buffers=buffers, description=_str(root.Description()),
                  signature_defs=signatures, metadata=metadata, version=version)
    _drop_layout_metadata(model)
    return model


def _drop_layout_metadata(model: Model) -> None:
    """Remove the large-model marker (`buffer_location`) and its buffer: it describes the file's
    layout, not the model, and the writer adds it again when it writes that layout."""
    for k, md in enumerate(model.metadata):
        if md.name != BUFFER_LOCATION:
            continue
        index = md.buffer
        shared = (any(t.buffer == index for sg in model.subgraphs for t in sg.tensors)
                  or sum(m.buffer == index for m in model.metadata) > 1)
        del model.metadata[k]
        if shared or not 0 < index < len(model.buffers):
            return
        del model.buffers[index]
        for sg in model.subgraphs:
            for t in sg.tensors:
                if t.buffer > index:
                    t.buffer -= 1
        for m in model.metadata:
            if m.buffer > index:
                m.buffer -= 1
        return


def _read_opcode(oc, i: int, budget: _Budget) -> OperatorCode:
    budget.where = f"operator code {i}"
    code = max(int(oc.DeprecatedBuiltinCode()), int(oc.BuiltinCode()))
    name = OPERATOR_NAMES.get(code)
    if name is None:
        raise ModelError(f"operator code #{i}: unknown builtin operator code {code} "
                         f"(edgelite knows codes 0..{max(OPERATOR_NAMES)})")
    version = int(oc.Version())
    if version < 1:  # 0 means "pick one" in the IR; a file must say (TFLite refuses it too)
        raise ModelError(f"operator code #{i} ({name}): version {version} is invalid (versions "
                         "start at 1)")
    custom = _str(oc.CustomCode()) if name == "CUSTOM" else None
    return OperatorCode(name, version, custom)


def _read_buffer(b, i: int, buf, budget: _Budget) -> Buffer:
    budget.where = f"buffer {i}"
    data = b.DataAsNumpy()
    if not isinstance(data, int):  # inline data wins over an offset, as in TFLite's reader
        return Buffer(data)
    offset, size = int(b.Offset()), int(b.Size())
    if offset > 1:  # large-model format: the bytes live after the FlatBuffer, at `offset`
        if offset + size > len(buf):
            raise ModelError(f"buffer {i}: offset {offset} + size {size} lies beyond the end of "
                             f"the {len(buf)}-byte file")
        return Buffer(np.frombuffer(buf, np.uint8, size, offset))
    return Buffer()


# QuantizationDetails union members whose parameters are not scale / zero_point.
_UNSUPPORTED_SCHEMES = {2: "blockwise", 3: "multi-axis"}


def _read_quantization(q, where, budget) -> QuantizationParameters | None:
    if q is None:
        return None
    kind = int(q.DetailsType())
    if kind in _UNSUPPORTED_SCHEMES:
        # Their scales live in other tensors; read as plain affine parameters they would be
        # silently wrong.
        raise ModelError(f"{where}: {_UNSUPPORTED_SCHEMES[kind]} quantization is not supported "
                         "by edgelite (per-tensor and per-channel affine quantization are)")
    scale = _array(q.ScaleAsNumpy(), np.float32, where, budget)
    zp = _array(q.ZeroPointAsNumpy(), np.int64, where, budget)
    mn = _array(q.MinAsNumpy(), np.float32, where, budget)
    mx = _array(q.MaxAsNumpy(), np.float32, where, budget)
    if scale.size == 0 and zp.size == 0 and mn.size == 0 and mx.size == 0:
        return None
    return QuantizationParameters(scale=scale, zero_point=zp,
                                  quantized_dimension=int(q.QuantizedDimension()),
                                  min=mn if mn.size else None, max=mx if mx.size else None)


def _read_tensor(t, where: str, buf, budget: _Budget) -> Tensor:
    budget.where = where
    code = int(t.Type())
    dtype = TENSOR_TYPES.get(code)
    if dtype is None:
        raise ModelError(f"{where}: unknown tensor type code {code}")
    shape = _array(t.ShapeAsNumpy(), np.int32, where, budget)
    sig = t.ShapeSignatureAsNumpy()
    if shape.size > MAX_RANK:
        raise ModelError(f"{where}: rank {shape.size} is absurd (edgelite allows up to {MAX_RANK})")
    return Tensor(name=_str(t.Name()), shape=tuple(shape.tolist()), dtype=dtype,
                  buffer=int(t.Buffer()),
                  quantization=_read_quantization(t.Quantization(), where, budget),
                  shape_signature=(None if isinstance(sig, int)
                                   else tuple(_array(sig, np.int32, where, budget).tolist())),
                  is_variable=bool(t.IsVariable()), has_rank=bool(t.HasRank()),
                  sparsity=_read_sparsity(t.Sparsity(), where, buf, budget))


# SparseIndexVector union member -> (its table class, its values' dtype)
_INDEX_VECTORS = {1: (fb.Int32Vector, np.int32), 2: (fb.Uint16Vector, np.uint16),
                  3: (fb.Uint8Vector, np.uint8)}


def _read_index_vector(kind: int, table, what: str, budget: _Budget):
    if kind == 0 or table is None:
        return None
    if kind not in _INDEX_VECTORS:
        raise ModelError(f"{what}: unknown index vector type {kind}")
    cls, dtype = _INDEX_VECTORS[kind]
    vec = cls()
    vec.Init(table.Bytes, table.Pos)
    return _array(vec.ValuesAsNumpy(), dtype, what, budget)


def _read_sparsity(s, where: str, buf, budget: _Budget):
    """The tensor's SparsityParameters, or None for a dense tensor. Only the structure is read
    here; DENSIFY checks the indices against the shape."""
    if s is None:
        return None
    where = f"{where} sparsity"
    order = _array(s.TraversalOrderAsNumpy(), np.int32, where, budget)
    block_map = _array(s.BlockMapAsNumpy(), np.int32, where, budget)
    dims = []
    for i in range(_count(s.DimMetadataLength(), 4, buf, f"{where} dim_metadata", budget)):
        d = s.DimMetadata(i)
        what = f"{where} dim_metadata {i}"
        fmt = int(d.Format())
        if fmt not in (0, 1):
            raise ModelError(f"{what}: unknown dimension format {fmt} (0 DENSE, 1 SPARSE_CSR)")
        dims.append(DimensionMetadata(
            format=fmt, dense_size=int(d.DenseSize()),
            segments=_read_index_vector(int(d.ArraySegmentsType()), d.ArraySegments(), what,
                                        budget),
            indices=_read_index_vector(int(d.ArrayIndicesType()), d.ArrayIndices(), what,
                                       budget)))
    return SparsityParameters(traversal_order=order.tolist(), block_map=block_map.tolist(),
                              dim_metadata=dims)


def _read_subgraph(s, si: int, codes: list, buf, budget: _Budget) -> Subgraph:
    budget.where = f"subgraph {si}"
    if s.TensorsIsNone():   # an empty vector is fine; none at all LiteRT refuses
        raise ModelError(f"subgraph {si} has no tensors vector (LiteRT: \"Did not get tensors "
                         f"in subgraph {si}\")")
    n_tensors = _count(s.TensorsLength(), 4, buf, f"subgraph {si} tensors", budget)
    tensors = [_read_tensor(s.Tensors(i), f"subgraph {si} tensor {i}", buf, budget)
               for i in range(n_tensors)]
    ops = []
    for i in range(_count(s.OperatorsLength(), 4, buf, f"subgraph {si} operators", budget)):
        ops.append(_read_operator(s.Operators(i), f"subgraph {si} operator {i}", codes, buf,
                                  budget))
    budget.where = f"subgraph {si} inputs, outputs and name"
    return Subgraph(tensors=tensors, inputs=_ints(s.InputsAsNumpy(), f"subgraph {si}", budget),
                    outputs=_ints(s.OutputsAsNumpy(), f"subgraph {si}", budget),
                    operators=ops, name=_str(s.Name()))


def _read_operator(o, where: str, codes: list, buf, budget: _Budget) -> Operator:
    budget.where = where
    index = int(o.OpcodeIndex())
    if index >= len(codes):
        raise ModelError(f"{where}: opcode index {index} out of range "
                         f"(the model has {len(codes)} operator codes)")
    opcode = codes[index]
    where = budget.where = f"{where} ({opcode.name})"
    options = None
    kind_code = int(o.BuiltinOptionsType())
    table = o.BuiltinOptions()
    names = OPTIONS_NAMES
    if kind_code == 0:
        kind_code, table, names = int(o.BuiltinOptions2Type()), o.BuiltinOptions2(), OPTIONS2_NAMES
    if kind_code != 0:
        kind = names.get(kind_code)
        if kind is None:
            raise ModelError(f"{where}: unknown builtin options type {kind_code}")
        if table is None:
            raise ModelError(f"{where}: options type {kind} is set but the table is missing")
        options = options_from_table(kind, buf, table.Pos)
        budget.spend(sum(len(v) for v in options.fields.values()
                         if isinstance(v, (tuple, str))), where)
    elif facts(opcode.builtin).options_required:
        raise ModelError(f"{where}: missing its options table {options_kind(opcode.builtin)}")
    else:  # files may omit a table whose fields all have their defaults
        options = default_options(opcode.builtin)
    custom = None
    if o.LargeCustomOptionsSize() > 0:
        off, size = int(o.LargeCustomOptionsOffset()), int(o.LargeCustomOptionsSize())
        if off + size > len(buf):
            raise ModelError(f"{where}: custom options at {off}+{size} lie beyond the file")
        custom = bytes(buf[off:off + size])
    else:
        raw = o.CustomOptionsAsNumpy()
        if not isinstance(raw, int):
            budget.spend(raw.size, where)
            custom = raw.tobytes()
    return Operator(opcode=opcode, inputs=_ints(o.InputsAsNumpy(), where, budget),
                    outputs=_ints(o.OutputsAsNumpy(), where, budget), options=options,
                    custom_options=custom,
                    intermediates=_ints(o.IntermediatesAsNumpy(), where, budget))
