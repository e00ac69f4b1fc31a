"""`save()`: the in-memory model into `.tflite` bytes, from the IR alone.

Buffer 0 stays empty, buffer data is 16-byte aligned, op codes above 127 carry both code fields,
every op that takes options gets an explicit table, op versions follow the features used, and a
`min_runtime_version` metadata entry is added when the model has none. Equal vectors and strings
are written once and shared (a FlatBuffer is a DAG; readers cannot tell): per-channel zero points,
shapes and names repeat a lot in quantized models. The same IR always gives the same bytes.
"""
from __future__ import annotations

import flatbuffers
import numpy as np

from . import tflite_generated as fb
from .errors import ModelError
from .model import TENSOR_TYPE_CODES, Buffer, Model, Operator, Subgraph
from .options import OPERATOR_CODES, OPTIONS2_CODES, OPTIONS_CODES, default_options, \
    is_options2, options_to_object
from .validate import validate
from .versions import min_runtime_version, op_version

ALIGN = 16
# A FlatBuffer cannot exceed 2 GiB; bigger models keep their buffers after it (offset/size).
FLATBUFFER_LIMIT = 2 ** 31 - 2 ** 24
# Metadata entry that marks a large-model file (TFLite's `tflite_metadata_buffer_location`).
BUFFER_LOCATION = "buffer_location"


class _SharingBuilder(flatbuffers.Builder):
    """A Builder that writes each distinct vector and string once and points every later use
    at it (offsets count from the buffer's end, so earlier objects stay valid targets)."""

    def __init__(self, size: int):
        super().__init__(size)
        self._shared: dict = {}

    def CreateNumpyVector(self, x):
        key = ("v", x.dtype.str, x.tobytes())
        if key not in self._shared:
            self._shared[key] = super().CreateNumpyVector(x)
        return self._shared[key]

    def CreateString(self, s, encoding="utf-8", errors="strict"):
        key = ("s", s if isinstance(s, bytes) else s.encode(encoding, errors))
        if key not in self._shared:
            self._shared[key] = super().CreateString(key[1])
        return self._shared[key]


class _AlignedBufferT(fb.BufferT):
    """A Buffer whose bytes start on a 16-byte boundary of the file, as TFLite's writer does."""

    def __init__(self, data: np.ndarray, offset: int = 0, size: int = 0):
        super().__init__()
        self.raw, self.offset, self.size = data, offset, size

    def Pack(self, builder):
        vec = None
        n = int(self.raw.size)
        if n:
            builder.StartVector(1, n, ALIGN)
            builder.head -= n
            # straight from the array's memory (tobytes would make a copy of it first)
            data = memoryview(np.ascontiguousarray(self.raw))
            builder.Bytes[builder.head:builder.head + n] = data
            vec = builder.EndVector()
        fb.BufferStart(builder)
        if vec is not None:
            fb.BufferAddData(builder, vec)
        if self.offset:
            fb.BufferAddOffset(builder, self.offset)
            fb.BufferAddSize(builder, self.size)
        return fb.BufferEnd(builder)


def save(model: Model, large: bool | None = None) -> bytes:
    """Serialize `model`. `large=True` (automatic past 2 GiB) writes the buffers after the
    FlatBuffer, addressed by offset and size, as TFLite's large-model format does: tensor data
    16-byte aligned after the FlatBuffer, 16 zero bytes after the last one (XNNPACK may read
    past a buffer's end), metadata kept inline, and a `buffer_location` metadata entry saying
    "outside flatbuffers" (what TFLite's tools check to know the weights are not inline)."""
    validate(model)
    if model.buffers and model.buffers[0].nbytes:
        raise ModelError("buffer 0 must be empty (the format reserves it for tensors without data)")
    total = sum(b.nbytes for b in model.buffers)
    if large is None:
        large = total > FLATBUFFER_LIMIT
    if not large:
        return _build(model, None, total)
    inline = {md.buffer for md in model.metadata}  # runtimes read metadata from `data` only
    outside = [b.nbytes > 0 and i not in inline for i, b in enumerate(model.buffers)]
    # Pass 1 with placeholder offsets measures the FlatBuffer; offsets are fixed-width fields,
    # so pass 2 with the real offsets has the same size.
    head = _build(model, [2 ** 62 if o else 0 for o in outside], 0)
    offsets, pos = [], _align(len(head))
    for b, o in zip(model.buffers, outside):
        offsets.append(pos if o else 0)
        pos = _align(pos + b.nbytes) if o else pos
    final = _build(model, offsets, 0)
    if len(final) != len(head):
        raise AssertionError("large-model header changed size between passes")
    out = bytearray(final)
    for b, off in zip(model.buffers, offsets):
        if off:
            out.extend(b"\0" * (off - len(out)))
            out.extend(b.data.tobytes())
    out.extend(b"\0" * (_align(len(out)) - len(out) + ALIGN))
    return bytes(out)


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _build(model: Model, offsets, data_bytes: int) -> bytes:
    codes: dict = {}
    m = fb.ModelT()
    m.version = 3
    m.description = model.description
    m.subgraphs = [_subgraph(sg, codes) for sg in model.subgraphs]
    m.operatorCodes = [_opcode(builtin, custom, version) for builtin, custom, version in codes]
    buffers = list(model.buffers)
    # `buffer_location` describes this file's layout, so the writer alone decides it.
    metadata = [(md.name, md.buffer) for md in model.metadata if md.name != BUFFER_LOCATION]
    if not any(name == "min_runtime_version" for name, _ in metadata):
        text = min_runtime_version(codes).encode()
        buffers.append(_bytes_buffer(text.ljust(16, b"\0")))
        metadata.append(("min_runtime_version", len(buffers) - 1))
    if offsets is not None:
        buffers.append(_bytes_buffer(b"outside flatbuffers"))
        metadata.append((BUFFER_LOCATION, len(buffers) - 1))
    if offsets is None:
        m.buffers = [_AlignedBufferT(b.data) for b in buffers]
    else:
        offsets = list(offsets) + [0] * (len(buffers) - len(offsets))
        m.buffers = [_AlignedBufferT(b.data[:0] if off else b.data, off, b.nbytes if off else 0)
                     for b, off in zip(buffers, offsets)]
    m.metadata = []
    for name, index in metadata:
        md = fb.MetadataT()
        md.name, md.buffer = name, index
        m.metadata.append(md)
    m.signatureDefs = [_signature(s) for s in model.signature_defs]
    # room for the tables too (a copy of everything each time the builder grows)
    builder = _SharingBuilder(data_bytes + data_bytes // 32 + (1 << 20))
    builder.Finish(m.Pack(builder), file_identifier=b"TFL3")
    # one copy of the used part (Output() slices a bytearray copy that bytes() copies again)
    return bytes(memoryview(builder.Bytes)[builder.Head():])


def _bytes_buffer(data: bytes):
    return Buffer(np.frombuffer(data, np.uint8))


def _opcode(builtin: str, custom: str | None, version: int):
    oc = fb.OperatorCodeT()
    code = OPERATOR_CODES[builtin]
    oc.deprecatedBuiltinCode = min(code, 127)
    oc.builtinCode = code
    oc.customCode = custom
    oc.version = version
    return oc


def _subgraph(sg: Subgraph, codes: dict):
    s = fb.SubGraphT()
    s.tensors = [_tensor(t) for t in sg.tensors]
    s.inputs = np.asarray(sg.inputs, np.int32)
    s.outputs = np.asarray(sg.outputs, np.int32)
    s.operators = [_operator(op, sg, codes) for op in sg.operators]
    s.name = sg.name
    return s


def _tensor(t):
    tt = fb.TensorT()
    tt.shape = np.asarray(t.shape, np.int32)
    tt.type = TENSOR_TYPE_CODES[t.dtype]
    tt.buffer = t.buffer
    tt.name = t.name
    if t.quantization is not None:
        q = t.quantization
        qt = fb.QuantizationParametersT()
        qt.scale = np.asarray(q.scale, np.float32) if q.scale.size else None
        qt.zeroPoint = np.asarray(q.zero_point, np.int64) if q.zero_point.size else None
        qt.min = None if q.min is None else np.asarray(q.min, np.float32)
        qt.max = None if q.max is None else np.asarray(q.max, np.float32)
        qt.quantizedDimension = q.quantized_dimension
        tt.quantization = qt
    tt.isVariable = t.is_variable
    if t.shape_signature is not None:
        tt.shapeSignature = np.asarray(t.shape_signature, np.int32)
    tt.hasRank = t.has_rank
    if t.sparsity is not None:
        tt.sparsity = _sparsity(t.sparsity)
    return tt


# Index vector dtype -> (SparseIndexVector union member, its object class)
_INDEX_VECTORS = {np.dtype(np.int32): (1, fb.Int32VectorT),
                  np.dtype(np.uint16): (2, fb.Uint16VectorT),
                  np.dtype(np.uint8): (3, fb.Uint8VectorT)}


def _index_vector(values):
    if values is None:
        return 0, None
    values = np.asarray(values)
    if values.dtype not in _INDEX_VECTORS:
        raise ModelError(f"sparse index vectors must be int32, uint16 or uint8, got {values.dtype}")
    kind, cls = _INDEX_VECTORS[values.dtype]
    vec = cls()
    vec.values = values.reshape(-1)
    return kind, vec


def _sparsity(sp):
    st = fb.SparsityParametersT()
    st.traversalOrder = np.asarray(sp.traversal_order, np.int32)
    st.blockMap = np.asarray(sp.block_map, np.int32) if sp.block_map else None
    st.dimMetadata = []
    for d in sp.dim_metadata:
        dt = fb.DimensionMetadataT()
        dt.format, dt.denseSize = int(d.format), int(d.dense_size)
        dt.arraySegmentsType, dt.arraySegments = _index_vector(d.segments)
        dt.arrayIndicesType, dt.arrayIndices = _index_vector(d.indices)
        st.dimMetadata.append(dt)
    return st


def _operator(op: Operator, sg: Subgraph, codes: dict):
    builtin = op.opcode.builtin
    if builtin not in OPERATOR_CODES:
        raise ModelError(f"unknown builtin operator {builtin!r}")
    version = op.opcode.version or op_version(op, sg)
    key = (builtin, op.opcode.custom_code if builtin == "CUSTOM" else None, version)
    index = codes.setdefault(key, len(codes))
    o = fb.OperatorT()
    o.opcodeIndex = index
    o.inputs = np.asarray(op.inputs, np.int32)
    o.outputs = np.asarray(op.outputs, np.int32)
    options = op.options if op.options is not None else default_options(builtin)
    if options is not None:
        if is_options2(options.kind):
            o.builtinOptions2Type = OPTIONS2_CODES[options.kind]
            o.builtinOptions2 = options_to_object(options)
        else:
            o.builtinOptionsType = OPTIONS_CODES[options.kind]
            o.builtinOptions = options_to_object(options)
    if op.custom_options is not None:
        o.customOptions = np.frombuffer(bytes(op.custom_options), np.uint8)
    if op.intermediates:
        o.intermediates = np.asarray(op.intermediates, np.int32)
    return o


def _signature(sig):
    s = fb.SignatureDefT()
    s.signatureKey = sig.signature_key
    s.subgraphIndex = sig.subgraph_index
    s.inputs = [_tensor_map(n, i) for n, i in sig.inputs.items()]
    s.outputs = [_tensor_map(n, i) for n, i in sig.outputs.items()]
    return s


def _tensor_map(name: str, index: int):
    tm = fb.TensorMapT()
    tm.name, tm.tensorIndex = name, index
    return tm

