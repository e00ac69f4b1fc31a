"""A model built from scratch with the IR runs in LiteRT as numpy predicts, and its file has the
format's required layout: empty buffer 0, TFL3, aligned buffers, both op code fields above 127,
explicit options tables, op versions from versions.py and a min_runtime_version entry."""
from __future__ import annotations

import math

import numpy as np
import pytest

from edgelite.schema import (Model, Operator, OperatorCode, QuantizationParameters, SignatureDef,
                             Subgraph, Tensor, default_options, load, save)
from edgelite.schema import tflite_generated as fb
from edgelite.schema.options import OPERATOR_CODES, options_kind
from edgelite.schema.versions import min_runtime_version, op_version
from tests.schema._litert import interpreter

RELU = 1  # ActivationFunctionType.RELU
RNG = np.random.default_rng(7)
W_Q = RNG.integers(-127, 128, (3, 4)).astype(np.int8)         # per-channel int8 weights
W_SCALE = np.array([0.01, 0.02, 0.005], np.float32)             # one scale per output channel
BIAS = np.array([0.1, -0.2, 0.3], np.float32)
STATE0 = np.array([[0.5, -1.0, 0.25]], np.float32)             # the variable's initial value


def _op(name, inputs, outputs, **options):
    return Operator(OperatorCode(name), list(inputs), list(outputs),
                    default_options(name, **options))


def build_model() -> Model:
    """y = gelu(relu(x @ dequantize(W).T + b + state)); state := relu(...) (one step per invoke).

    Subgraph 0 "main" calls subgraph 1 "init" once, which sets the resource variable "state"."""
    m = Model(description="edgelite from-scratch test model")
    main = Subgraph(name="main")
    T = main.add_tensor
    x = T(Tensor("x", (1, 4)))
    wq = T(Tensor("w_int8", (3, 4), "int8", m.add_buffer(W_Q),
                  QuantizationParameters(W_SCALE, np.zeros(3, np.int64), 0)))
    w = T(Tensor("w", (3, 4)))
    b = T(Tensor("b", (3,), buffer=m.add_buffer(BIAS)))
    h = T(Tensor("h", (1, 3)))
    handle = T(Tensor("state_handle", (), "resource"))
    state = T(Tensor("state_value", (1, 3)))
    a = T(Tensor("a", (1, 3)))
    y = T(Tensor("y", (1, 3)))
    main.inputs, main.outputs = [x], [y]
    main.operators = [
        _op("CALL_ONCE", [], [], init_subgraph_index=1),
        _op("VAR_HANDLE", [], [handle], shared_name="state"),
        _op("READ_VARIABLE", [handle], [state]),
        _op("DEQUANTIZE", [wq], [w]),
        _op("FULLY_CONNECTED", [x, w, b], [h]),
        _op("ADD", [h, state], [a], fused_activation_function=RELU),
        _op("GELU", [a], [y]),
        _op("ASSIGN_VARIABLE", [handle, a], []),
    ]
    init = Subgraph(name="init")
    ih = init.add_tensor(Tensor("state_handle", (), "resource"))
    iv = init.add_tensor(Tensor("state_init", (1, 3), buffer=m.add_buffer(STATE0)))
    init.operators = [_op("VAR_HANDLE", [], [ih], shared_name="state"),
                      _op("ASSIGN_VARIABLE", [ih, iv], [])]
    m.subgraphs = [main, init]
    m.signature_defs = [SignatureDef("serving_default", 0, {"x": x}, {"y": y})]
    return m


def numpy_steps(xs: list) -> list:
    """What the model computes over consecutive invokes."""
    w = W_Q.astype(np.float64) * W_SCALE.astype(np.float64)[:, None]
    state, ys = STATE0.astype(np.float64), []
    for x in xs:
        a = np.maximum(x.astype(np.float64) @ w.T + BIAS + state, 0.0)
        ys.append(np.vectorize(lambda v: 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))))(a))
        state = a
    return ys


INPUTS = [RNG.normal(0, 20, (1, 4)).astype(np.float32) for _ in range(4)]


@pytest.fixture(scope="module")
def content() -> bytes:
    return save(build_model())


def test_runs_in_litert_as_numpy_predicts(content):
    it = interpreter(content)
    (detail,) = it.get_input_details()
    expected = numpy_steps(INPUTS)
    assert any(np.any(e > 0) for e in expected) and any(np.any(e == 0) for e in expected)
    for k, x in enumerate(INPUTS):
        it.set_tensor(detail["index"], x)
        it.invoke()
        got = it.get_tensor(it.get_output_details()[0]["index"])
        np.testing.assert_allclose(got, expected[k], rtol=1e-6, atol=1e-6,
                                   err_msg=f"invoke {k}")


def test_signature_runner(content):
    it = interpreter(content)
    assert it.get_signature_list() == {"serving_default": {"inputs": ["x"], "outputs": ["y"]}}
    runner = it.get_signature_runner("serving_default")
    expected = numpy_steps(INPUTS[:2])
    for k in range(2):
        out = runner(x=INPUTS[k])
        np.testing.assert_allclose(out["y"], expected[k], rtol=1e-6, atol=1e-6)


def _vector_offset(whole: np.ndarray, view: np.ndarray) -> int:
    return view.__array_interface__["data"][0] - whole.__array_interface__["data"][0]


def test_file_layout(content):
    assert content[4:8] == b"TFL3"
    root = fb.Model.GetRootAs(content, 0)
    assert root.Version() == 3
    whole = np.frombuffer(content, np.uint8)
    assert root.Buffers(0).DataLength() == 0, "buffer 0 is not empty"
    filled = 0
    for i in range(root.BuffersLength()):
        data = root.Buffers(i).DataAsNumpy()
        if isinstance(data, np.ndarray) and data.size:
            filled += 1
            offset = _vector_offset(whole, data)
            assert offset % 16 == 0, f"buffer {i} starts at unaligned offset {offset}"
    assert filled >= 4

    codes = []
    for i in range(root.OperatorCodesLength()):
        oc = root.OperatorCodes(i)
        code = oc.BuiltinCode()
        assert oc.DeprecatedBuiltinCode() == min(code, 127), f"operator code {i}"
        codes.append(code)
    assert {c for c in codes if c > 127} >= {OPERATOR_CODES[n] for n in
                                              ("GELU", "CALL_ONCE", "VAR_HANDLE",
                                               "READ_VARIABLE", "ASSIGN_VARIABLE")}

    names = {root.Metadata(i).Name(): root.Metadata(i).Buffer()
             for i in range(root.MetadataLength())}
    assert b"min_runtime_version" in names
    text = bytes(root.Buffers(names[b"min_runtime_version"]).DataAsNumpy()).rstrip(b"\0")
    model = build_model()
    used = {(op.opcode.builtin, None, op_version(op, sg))
            for sg in model.subgraphs for op in sg.operators}
    assert text.decode() == min_runtime_version(used) == "2.9.0"  # GELU came in 2.9

    for si, sg in enumerate(model.subgraphs):
        sub = root.Subgraphs(si)
        for oi, op in enumerate(sg.operators):
            o = sub.Operators(oi)
            where = f"subgraph {si} operator {oi} {op.op}"
            oc = root.OperatorCodes(o.OpcodeIndex())
            assert oc.BuiltinCode() == OPERATOR_CODES[op.op], where
            assert oc.Version() == op_version(op, sg), where
            kind = options_kind(op.op)
            assert kind is not None, where
            assert fb.BuiltinOptions.__dict__.get(kind) == o.BuiltinOptionsType(), where
            assert o.BuiltinOptions() is not None, where


def test_versions_follow_features():
    m = build_model()
    main = m.subgraphs[0]
    by_name = {op.op: op for op in main.operators}
    assert op_version(by_name["DEQUANTIZE"], main) == 5  # per-channel int8
    assert op_version(by_name["FULLY_CONNECTED"], main) == 1
    fc = by_name["FULLY_CONNECTED"]
    no_bias = Operator(fc.opcode, fc.inputs[:2], fc.outputs, fc.options)
    assert op_version(no_bias, main) == 6


def test_reload_keeps_everything_but_versions(content):
    model, reloaded = build_model(), load(content)
    assert reloaded.signature_defs == model.signature_defs
    assert [sg.name for sg in reloaded.subgraphs] == ["main", "init"]
    for sg, rsg in zip(model.subgraphs, reloaded.subgraphs):
        assert rsg.tensors == sg.tensors
        assert [op.options for op in rsg.operators] == [op.options for op in sg.operators]
        assert [op.opcode.version for op in rsg.operators] == \
            [op_version(op, sg) for op in sg.operators]
    assert save(reloaded) == content


@pytest.mark.parametrize("dtype", ["float32", "int8", "int16"])
def test_versions_keep_the_first_registered(dtype):
    """BROADCAST_TO starts at version 2 in every arithmetic (LiteRT has no version 1 of it)."""
    sg = Subgraph()
    q = QuantizationParameters(scale=[0.1], zero_point=[0]) if dtype != "float32" else None
    x = sg.add_tensor(Tensor("x", (1, 3), dtype, quantization=q))
    shape = sg.add_tensor(Tensor("shape", (2,), "int32"))
    y = sg.add_tensor(Tensor("y", (2, 3), dtype, quantization=q))
    op = Operator(OperatorCode("BROADCAST_TO", 0), [x, shape], [y], None)
    assert op_version(op, sg) == 2


@pytest.mark.parametrize("name", ["digits_cnn", "digits_cnn_int8", "mobilenet_v2",
                                  "mobilenet_v2_int8", "mwk_okay_nabu"])
def test_versions_agree_with_tensorflows_converter(models_dir, name):
    """TensorFlow's converter wrote these files: versions.py must pick the versions it picked."""
    model = load(models_dir / f"{name}.tflite")
    wrong = {(op.op, op.opcode.version, op_version(op, sg))
             for sg in model.subgraphs for op in sg.operators
             if op.opcode.version != op_version(op, sg)}
    assert not wrong, f"(op, file version, versions.py) {sorted(wrong)}"
