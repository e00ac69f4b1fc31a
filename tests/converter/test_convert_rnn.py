"""LSTM and GRU, unrolled: small ONNX models of every form against onnxruntime through edgelite and
LiteRT, and the shared recurrent models (syn_lstm, silero_vad_seq) against their references."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from edgelite.converter import TFLiteConverter
from edgelite.converter.check import run_tflite, to_onnx_layout, to_tflite_layout
from tests.converter.onnx_cases import check, model, node
from tests.oracles import onnxruntime_run, onnxruntime_session

F = np.float32
RNG = np.random.default_rng(5)
TOLERANCE = 1e-4


def w(*shape, scale=0.5):
    return (RNG.standard_normal(shape) * scale).astype(F)


def rnn_model(op, hidden, seq=4, batch=2, size=3, dirs=1, outputs=("Y", "Y_h"), bias=True,
              states=False, lens=False, peepholes=False, **attrs):
    """One LSTM or GRU node with constant weights; states and sequence_lens as graph inputs."""
    gates = 4 if op == "LSTM" else 3
    batchwise = attrs.get("layout", 0)
    x_shape = [batch, seq, size] if batchwise else [seq, batch, size]
    inits = {"W": w(dirs, gates * hidden, size), "R": w(dirs, gates * hidden, hidden)}
    names = ["x", "W", "R", "", "", "", "", ""]
    inputs = [("x", x_shape)]
    if bias:
        inits["B"] = w(dirs, 2 * gates * hidden)
        names[3] = "B"
    if lens:
        inputs.append(("lens", [batch], np.int32))
        names[4] = "lens"
    state_shape = [batch, dirs, hidden] if batchwise else [dirs, batch, hidden]
    if states:
        inputs.append(("h0", state_shape))
        names[5] = "h0"
        if op == "LSTM":
            inputs.append(("c0", state_shape))
            names[6] = "c0"
    if peepholes:
        inits["P"] = w(dirs, 3 * hidden)
        names[7] = "P"
    while names and not names[-1]:
        names.pop()
    rnn = node(op, names, list(outputs), hidden_size=hidden, **attrs)
    return model([rnn], inputs, list(outputs), inits)


LSTMS = {
    "forward": {},
    "states_and_y_c": dict(states=True, outputs=("Y", "Y_h", "Y_c")),
    "reverse": dict(direction="reverse", states=True),
    "bidirectional": dict(direction="bidirectional", dirs=2, outputs=("Y", "Y_h", "Y_c")),
    "batchwise": dict(layout=1, states=True),
    "peepholes_clip": dict(peepholes=True, clip=0.7),
    "no_bias_one_step": dict(bias=False, seq=1),
    "activations": dict(activations=["HardSigmoid", "Relu", "ScaledTanh"],
                        activation_alpha=[0.3, 0.9], activation_beta=[0.4, 1.1]),
}


def check_rnn(proto):
    """`check` against onnxruntime, or against onnx's reference evaluator for layout=1, which
    onnxruntime does not run."""
    if not any(a.name == "layout" and a.i == 1 for a in proto.graph.node[0].attribute):
        return check(proto)
    from onnx.reference import ReferenceEvaluator

    conversion = TFLiteConverter.from_onnx(proto)
    conversion.convert()
    conversion = conversion.last_conversion
    layout = conversion.io_layout
    feeds = [w(*[d.dim_value for d in i.type.tensor_type.shape.dim])
             for i in proto.graph.input]
    want = ReferenceEvaluator(proto).run(None, {i.name: f for i, f in
                                                zip(proto.graph.input, feeds)})
    for runtime in ("edgelite", "litert"):
        got = to_onnx_layout(run_tflite(conversion.content, to_tflite_layout(feeds, layout),
                                        runtime), layout)
        for y, ref in zip(got, want):
            assert y.shape == ref.shape
            assert np.abs(y - ref).max() <= TOLERANCE * np.abs(ref).max(), runtime
    return conversion


@pytest.mark.parametrize("case", list(LSTMS))
def test_lstm(case):
    proto = rnn_model("LSTM", 5, **LSTMS[case])
    conversion = check_rnn(proto)
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" not in conversion.ops_out


def test_lstm_sequence_lens():
    proto = rnn_model("LSTM", 4, seq=5, batch=3, lens=True, states=True,
                      direction="bidirectional", dirs=2, outputs=("Y", "Y_h", "Y_c"))
    feeds = {"x": w(5, 3, 3), "lens": np.array([5, 2, 3], np.int32), "h0": w(2, 3, 4),
             "c0": w(2, 3, 4)}
    check(proto, feeds)


GRUS = {
    "forward": {},
    "linear_before_reset": dict(linear_before_reset=1, states=True),
    "bidirectional": dict(direction="bidirectional", dirs=2),
    "reverse_batchwise": dict(direction="reverse", layout=1, states=True),
    "clip_no_bias": dict(clip=0.5, bias=False),
}


@pytest.mark.parametrize("case", list(GRUS))
def test_gru(case):
    check_rnn(rnn_model("GRU", 6, **GRUS[case]))


def test_gru_sequence_lens():
    proto = rnn_model("GRU", 4, seq=4, batch=2, lens=True, direction="reverse")
    check(proto, {"x": w(4, 2, 3), "lens": np.array([1, 4], np.int32)})


def test_rnn_with_runtime_weights():
    """W, R and B as graph inputs (ONNX's own test cases do this)."""
    x = helper.make_tensor_value_info
    graph = helper.make_graph(
        [node("GRU", ["x", "W", "R", "B"], ["Y", "Y_h"], hidden_size=3)], "g",
        [x("x", TensorProto.FLOAT, [2, 1, 2]), x("W", TensorProto.FLOAT, [1, 9, 2]),
         x("R", TensorProto.FLOAT, [1, 9, 3]), x("B", TensorProto.FLOAT, [1, 18])],
        [x("Y", TensorProto.FLOAT, [2, 1, 1, 3]), x("Y_h", TensorProto.FLOAT, [1, 1, 3])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    proto.ir_version = 8
    check(proto)


# -- the shared recurrent models -----------------------------------------------------------------

# silero_vad_seq's sequence length is dynamic: a WHILE loop by default, unrolled when fixed.
REAL = {"syn_lstm": ("syn_lstm", {}), "silero_vad_seq": ("silero_vad_seq", {}),
        "silero_vad_seq_fixed": ("silero_vad_seq", {"input": [8, 576]})}


@pytest.mark.parametrize("runtime", ["edgelite", "litert"])
@pytest.mark.parametrize("case", list(REAL))
def test_recurrent_models_match_refs(models_dir, case, runtime):
    name, shapes = REAL[case]
    converter = TFLiteConverter.from_onnx(models_dir / f"{name}.onnx", shapes)
    converter.convert()
    conversion = converter.last_conversion
    refs = np.load(models_dir / "refs" / f"{name}.npz")
    layout = conversion.io_layout
    feeds = [refs[f"input_{k}"] for k in range(len(layout["inputs"]))]
    got = _run_resized(conversion.content, to_tflite_layout(feeds, layout), runtime)
    for k, y in enumerate(to_onnx_layout(got, layout)):
        want = refs[f"output_{k}"]
        assert y.shape == want.shape
        err = np.abs(y - want).max()
        assert err <= TOLERANCE * np.abs(want).max(), f"{name} output {k} on {runtime}: {err}"
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" not in conversion.ops_out


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_dynamic_batch_stays_dynamic(op):
    """A zero initial state is no constant of the batch's size: the batch stays -1."""
    gates = 4 if op == "LSTM" else 3
    nodes = [node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),
             node(op, ["xt", "W", "R", "B"], ["", "h"], hidden_size=4)]
    proto = model(nodes, [("x", ["batch", 3, 3])], ["h"],
                  {"W": w(1, gates * 4, 3), "R": w(1, gates * 4, 4), "B": w(1, 2 * gates * 4)})
    converter = TFLiteConverter.from_onnx(proto)
    converter.convert()
    conversion = converter.last_conversion
    assert not conversion.warnings
    x = w(5, 3, 3)
    _assert_both_runtimes(conversion, [x], onnxruntime_run(proto, {"x": x}))


def _run_resized(content, feeds, runtime):
    if runtime == "edgelite":
        from edgelite.interpreter import Interpreter
    else:
        from ai_edge_litert.interpreter import Interpreter
    it = Interpreter(model_content=content)
    for d, x in zip(it.get_input_details(), feeds):
        it.resize_tensor_input(d["index"], list(x.shape))
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), feeds):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]


def _assert_both_runtimes(conversion, feeds: list, want: list, seq: int | None = None) -> None:
    """edgelite and LiteRT, their inputs resized to the ONNX-layout feeds, give onnxruntime's
    outputs (`want`) within TOLERANCE."""
    from edgelite.converter.check import to_onnx_layout, to_tflite_layout

    layout = conversion.io_layout
    for runtime in ("edgelite", "litert"):
        got = to_onnx_layout(_run_resized(conversion.content, to_tflite_layout(feeds, layout),
                                          runtime), layout)
        for y, ref in zip(got, want):
            assert y.shape == ref.shape
            assert np.abs(y - ref).max() <= TOLERANCE * np.abs(ref).max(), (runtime, seq)


@pytest.mark.parametrize("op, attrs", [("LSTM", {}), ("LSTM", dict(direction="bidirectional")),
                                       ("GRU", dict(direction="reverse")),
                                       ("GRU", dict(linear_before_reset=1))])
def test_dynamic_sequence_runs_as_a_while_loop(op, attrs):
    """A sequence length that is a dynamic dim: the steps run as a WHILE loop (unrolled they
    would change the graph with the length), at any length, in edgelite and LiteRT."""
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    gates = 4 if op == "LSTM" else 3
    proto = model([node(op, ["x", "W", "R", "B", "", "h0"], ["y", "h"], hidden_size=4,
                        **attrs)], [("x", ["seq", 2, 3]), ("h0", [dirs, 2, 4])], ["y", "h"],
                  {"W": w(dirs, gates * 4, 3), "R": w(dirs, gates * 4, 4),
                   "B": w(dirs, 2 * gates * 4)})
    converter = TFLiteConverter.from_onnx(proto)
    converter.convert()
    conversion = converter.last_conversion
    assert not conversion.warnings
    assert [op.op for op in conversion.model.subgraphs[0].operators].count("WHILE") == dirs
    session = onnxruntime_session(proto)
    for seq in (1, 5):
        feeds = [w(seq, 2, 3), w(dirs, 2, 4)]
        want = session.run(None, {"x": feeds[0], "h0": feeds[1]})
        _assert_both_runtimes(conversion, feeds, want, seq)


def test_silero_any_sequence_length(models_dir):
    path = models_dir / "silero_vad_seq.onnx"
    converter = TFLiteConverter.from_onnx(path)
    converter.convert()
    conversion = converter.last_conversion
    assert not conversion.warnings and "WHILE" in conversion.ops_out
    session = onnxruntime_session(path)
    for seq in (3, 12):
        feeds = [w(seq, 576, scale=0.1), w(1, 1, 128, scale=0.1), w(1, 1, 128, scale=0.1)]
        want = session.run(None, dict(zip(["input", "h", "c"], feeds)))
        _assert_both_runtimes(conversion, feeds, want, seq)
