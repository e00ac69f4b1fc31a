"""Every check of the loader and validator, each with a hand-corrupted model: `ModelError` (a
ValueError) with a message naming where the problem is."""
from __future__ import annotations

import re
import struct

import flatbuffers
import numpy as np
import pytest

import edgelite.schema.writer as writer
from edgelite.schema import Buffer, ModelError, load, save, validate
from edgelite.schema import tflite_generated as fb
from edgelite.schema.options import OPERATOR_CODES, OPTIONS_CODES


@pytest.fixture(scope="module")
def digits(models_dir) -> bytes:
    return (models_dir / "digits_cnn.tflite").read_bytes()


def unvalidated_save(model, monkeypatch) -> bytes:
    """Save an IR edit as is: the writer's own validation is switched off."""
    monkeypatch.setattr(writer, "validate", lambda model: None)
    return save(model)


def repack(content: bytes, edit) -> bytes:
    """Edit the file through the generated object API (below the IR) and serialize it again."""
    m = fb.ModelT.InitFromPackedBuf(content, 0)
    edit(m)
    b = flatbuffers.Builder(len(content) + 1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def expect(content, *patterns):
    with pytest.raises(ModelError) as info:
        load(content)
    assert isinstance(info.value, ValueError)
    for p in patterns:
        assert re.search(p, str(info.value)), f"{p!r} not in: {info.value}"
    return str(info.value)


# One field of the file (the generated object API's) set wrong: (the table, field, value, what
# the error says).
FIELDS = {
    "unknown_tensor_type": (lambda m: m.subgraphs[0].tensors[3], "type", 99,
                            r"subgraph 0 tensor 3: unknown tensor type code 99"),
    "opcode_index_out_of_range": (lambda m: m.subgraphs[0].operators[3], "opcodeIndex", 40,
                                  r"subgraph 0 operator 3: opcode index 40 out of range"),
    "metadata_buffer_out_of_range": (lambda m: m.metadata[0], "buffer", 1000,
                                     r"metadata 'min_runtime_version': buffer 1000 out of range"),
    "no_subgraphs": (lambda m: m, "subgraphs", [], "no subgraphs"),
    "op_version_zero": (lambda m: m.operatorCodes[2], "version", 0,
                        r"operator code #2 \(\w+\): version 0 is invalid"),
    "unsupported_schema_version": (lambda m: m, "version", 4, "schema version 4"),
}


@pytest.mark.parametrize("case", list(FIELDS))
def test_a_wrong_field_is_named(digits, case):
    table, field, value, message = FIELDS[case]
    expect(repack(digits, lambda m: setattr(table(m), field, value)), message)


# --- the file as bytes ---------------------------------------------------------------------

def test_bad_identifier(digits):
    expect(digits[:4] + b"TFL2" + digits[8:], r"identifier is b'TFL2'", "TFL3")


def test_empty_file(tmp_path):
    path = tmp_path / "empty.tflite"
    path.write_bytes(b"")
    expect(path, "0 bytes")
    expect(b"", "0 bytes")


@pytest.mark.parametrize("keep", [0.25, 0.5, 0.9, 0.99])
def test_truncated_file(digits, keep):
    expect(digits[:int(len(digits) * keep)],
           r"(subgraph \d+|buffer \d+|operator|metadata|signature|outside the file)")


def test_missing_file_path(tmp_path):
    missing = tmp_path / "nope" / "model.tflite"
    expect(missing, "cannot read model file", re.escape(str(missing)), "No such file")
    expect(tmp_path, "cannot read model file")


def test_root_offset_out_of_range(digits):
    expect(struct.pack("<I", len(digits) + 100) + digits[4:], "root table offset")


def test_large_buffer_offset_out_of_range(digits):
    content = save(load(digits), large=True)

    def edit(m):
        b = next(b for b in m.buffers if b.offset)
        b.offset = len(content) * 4
    expect(repack(content, edit), r"buffer \d+: offset \d+ \+ size \d+ lies beyond")


def test_large_custom_options_out_of_range(digits):
    def edit(m):
        op = m.subgraphs[0].operators[0]
        op.largeCustomOptionsOffset, op.largeCustomOptionsSize = 10 ** 9, 10
    expect(repack(digits, edit), r"subgraph 0 operator 0 \(CONV_2D\): custom options")


def test_huge_vector_length_is_refused_before_reading(digits):
    model = load(digits)
    content = bytearray(save(model))
    root = fb.Model.GetRootAs(bytes(content), 0)
    sub = root.Subgraphs(0)
    vec = sub._tab.Vector(sub._tab.Offset(4))  # tensors vector: its length sits just before
    content[vec - 4:vec] = struct.pack("<I", 0x7FFFFFF0)
    expect(bytes(content), r"FlatBuffers verifier refuses it.*Model\.subgraphs\[0\]\.tensors: a "
                           r"vector of \d+ elements")


# --- tensors -------------------------------------------------------------------------------

def test_buffer_smaller_than_shape(digits, monkeypatch):
    model = load(digits)
    t = model.subgraphs[0].tensors[5]
    model.buffers[t.buffer] = Buffer(model.buffers[t.buffer].data[:-4])
    expect(unvalidated_save(model, monkeypatch),
           r"subgraph 0 tensor 5 'MatMul_1': buffer \d+ holds 2556 bytes", "needs 2560")


def test_negative_dimension(digits, monkeypatch):
    model = load(digits)
    model.subgraphs[0].tensors[10].shape = (1, -8, 8, 16)
    expect(unvalidated_save(model, monkeypatch), r"subgraph 0 tensor 10 '.*': negative dimension")


def test_absurd_shape(digits, monkeypatch):
    model = load(digits)
    model.subgraphs[0].tensors[10].shape = (65536, 65536, 16)
    expect(unvalidated_save(model, monkeypatch), r"subgraph 0 tensor 10 .*absurd size")


def test_dimension_beyond_int32_in_the_ir(digits):
    model = load(digits)
    model.subgraphs[0].tensors[10].shape = (2 ** 40, 0)
    with pytest.raises(ModelError, match=r"subgraph 0 tensor 10 .*beyond int32"):
        save(model)


def test_absurd_rank(digits, monkeypatch):
    model = load(digits)
    model.subgraphs[0].tensors[10].shape = (1,) * 40
    expect(unvalidated_save(model, monkeypatch), r"subgraph 0 tensor 10: rank 40 is absurd")


def test_per_channel_scale_count(digits, monkeypatch):
    from edgelite.schema import QuantizationParameters
    model = load(digits)
    model.subgraphs[0].tensors[5].quantization = QuantizationParameters(
        np.ones(3, np.float32), np.zeros(3, np.int64), 0)
    expect(unvalidated_save(model, monkeypatch),
           r"subgraph 0 tensor 5 'MatMul_1': 3 per-channel scales for dimension 0 of size 10")


# --- indices -------------------------------------------------------------------------------

def test_tensor_buffer_index_out_of_range(digits, monkeypatch):
    model = load(digits)
    model.subgraphs[0].tensors[4].buffer = 999
    expect(unvalidated_save(model, monkeypatch),
           r"subgraph 0 tensor 4 'Conv2D_1': buffer 999 out of range")


def test_operator_tensor_index_out_of_range(digits, monkeypatch):
    model = load(digits)
    model.subgraphs[0].operators[2].inputs[1] = 500
    expect(unvalidated_save(model, monkeypatch),
           r"subgraph 0 operator 2 \(CONV_2D\): input 1 is tensor 500, out of range")


def test_operator_output_minus_one(digits, monkeypatch):
    model = load(digits)
    model.subgraphs[0].operators[1].outputs[0] = -1
    expect(unvalidated_save(model, monkeypatch),
           r"subgraph 0 operator 1 \(MAX_POOL_2D\): output 0 is tensor -1")


def test_graph_input_index_out_of_range(digits, monkeypatch):
    model = load(digits)
    model.subgraphs[0].inputs = [77]
    expect(unvalidated_save(model, monkeypatch), r"subgraph 0: graph input tensor 77 out of range")


def test_subgraph_index_out_of_range(models_dir, monkeypatch):
    model = load(models_dir / "mwk_okay_nabu.tflite")
    sg_index, op_index = next((si, oi) for si, sg in enumerate(model.subgraphs)
                              for oi, op in enumerate(sg.operators) if op.op == "CALL_ONCE")
    op = model.subgraphs[sg_index].operators[op_index]
    op.options = op.options.replace(init_subgraph_index=9)
    expect(unvalidated_save(model, monkeypatch),
           rf"subgraph {sg_index} operator {op_index} \(CALL_ONCE\): init_subgraph_index 9 out "
           "of range")


def test_signature_subgraph_out_of_range(digits, monkeypatch):
    from edgelite.schema import SignatureDef
    model = load(digits)
    model.signature_defs = [SignatureDef("serving_default", 3, {"x": 0}, {"y": 16})]
    expect(unvalidated_save(model, monkeypatch), r"signature 'serving_default': subgraph 3")


def test_signature_tensor_out_of_range(digits, monkeypatch):
    from edgelite.schema import SignatureDef
    model = load(digits)
    model.signature_defs = [SignatureDef("serving_default", 0, {"x": 0}, {"y": 160})]
    expect(unvalidated_save(model, monkeypatch),
           r"signature 'serving_default' output 'y': tensor 160 out of range")


# --- graph structure -----------------------------------------------------------------------

def test_cycle(digits, monkeypatch):
    model = load(digits)
    ops = model.subgraphs[0].operators
    ops[0].inputs[0] = ops[1].outputs[0]  # CONV reads what the MAX_POOL after it writes
    expect(unvalidated_save(model, monkeypatch),
           r"subgraph 0 operator 0 \(CONV_2D\): reads tensor 11 'MaxPool2d', which operator 1 "
           r"\(MAX_POOL_2D\) writes later")


def test_tensor_written_twice(digits, monkeypatch):
    model = load(digits)
    ops = model.subgraphs[0].operators
    ops[3].outputs = list(ops[1].outputs)
    expect(unvalidated_save(model, monkeypatch),
           r"subgraph 0 operator 3 \(MAX_POOL_2D\): tensor 11 'MaxPool2d' is also written by "
           "operator 1")


# --- operator codes and options ------------------------------------------------------------

def test_unknown_op_code(digits):
    def edit(m):
        m.operatorCodes[1].deprecatedBuiltinCode = 127
        m.operatorCodes[1].builtinCode = 250
    expect(repack(digits, edit), r"operator code #1: unknown builtin operator code 250")


def test_missing_required_options(digits):
    def edit(m):
        op = m.subgraphs[0].operators[1]
        op.builtinOptionsType, op.builtinOptions = 0, None
    expect(repack(digits, edit),
           r"subgraph 0 operator 1 \(MAX_POOL_2D\): missing its options table Pool2DOptions")


def test_wrong_options_type(digits):
    def edit(m):
        op = m.subgraphs[0].operators[0]  # a CONV_2D given a Pool2DOptions table
        op.builtinOptionsType = OPTIONS_CODES["Pool2DOptions"]
        op.builtinOptions = m.subgraphs[0].operators[1].builtinOptions
    expect(repack(digits, edit),
           r"subgraph 0 operator 0 \(CONV_2D\): has Pool2DOptions, expected Conv2DOptions")


def test_unknown_options_type(digits):
    def edit(m):
        m.subgraphs[0].operators[0].builtinOptionsType = 240
    with pytest.raises(ModelError, match=r"subgraph 0 operator 0 \(CONV_2D\)"):
        load(repack(digits, edit))


def test_writer_refuses_what_validate_refuses(digits):
    model = load(digits)
    model.subgraphs[0].tensors[4].buffer = 999
    with pytest.raises(ModelError, match="buffer 999 out of range"):
        validate(model)
    with pytest.raises(ModelError, match="buffer 999 out of range"):
        save(model)


def test_writer_refuses_data_in_buffer_zero(digits):
    model = load(digits)
    model.buffers[0] = Buffer(np.ones(4, np.uint8))
    with pytest.raises(ModelError, match="buffer 0 must be empty"):
        save(model)


def test_unknown_op_in_ir_names_the_operator(digits):
    from edgelite.schema import OperatorCode
    model = load(digits)
    model.subgraphs[0].operators[2].opcode = OperatorCode("NOT_AN_OP", 1)
    with pytest.raises(ModelError, match=r"subgraph 0 operator 2.*NOT_AN_OP"):
        save(model)


def test_opcode_constants_sane():
    assert OPERATOR_CODES["GELU"] == 150


@pytest.mark.parametrize("kind, table, name", [(2, "BlockwiseQuantizationT", "blockwise"),
                                               (3, "MultiAxisQuantizationT", "multi-axis")])
def test_quantization_schemes_without_scales_are_refused(models_dir, kind, table, name):
    """Blockwise and multi-axis quantization keep their scales in other tensors: read as plain
    affine parameters they would give wrong numbers, so loading names the tensor and refuses."""
    content = (models_dir / "digits_cnn_int8.tflite").read_bytes()

    def edit(m):
        t = next(t for t in m.subgraphs[0].tensors if t.quantization is not None
                 and t.quantization.scale is not None)
        t.quantization.detailsType, t.quantization.details = kind, getattr(fb, table)()
    expect(repack(content, edit), r"subgraph 0 tensor \d+", f"{name} quantization is not "
           "supported")


def test_int4_buffers_hold_two_values_a_byte():
    """An int4 constant's buffer must hold ceil(n / 2) bytes; a model with one round-trips."""
    from edgelite.schema import Model, Subgraph, Tensor
    from edgelite.schema.model import pack_int4, unpack_int4
    values = np.array([[-8, 7, 0], [1, -1, 3], [5, -4, 2]], np.int8)
    model = Model()
    sg = Subgraph(name="main")
    sg.add_tensor(Tensor("w", (3, 3), "int4", buffer=model.add_buffer(pack_int4(values))))
    model.subgraphs.append(sg)
    content = save(model)
    loaded = load(content)
    assert save(loaded) == content
    np.testing.assert_array_equal(loaded.constant(loaded.subgraphs[0], 0), values)
    np.testing.assert_array_equal(unpack_int4(pack_int4(values), (3, 3)), values)
    model.buffers[1] = Buffer(pack_int4(values)[:-1])
    with pytest.raises(ModelError, match="int4 needs 5"):
        save(model)
