"""UNIDIRECTIONAL_SEQUENCE_LSTM against LiteRT: state kept in variable tensors across invokes,
with and without CIFG, peepholes, projection, layer normalization and clipping."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.schema import (Model, Operator, OperatorCode, QuantizationParameters, Subgraph,
                             Tensor, default_options, save)
from tests.opmodel import assert_close, run_steps

litert = pytest.importorskip("ai_edge_litert.interpreter",
                             reason="LiteRT (ai-edge-litert) is the oracle: "
                                    "pip install -e '.[dev]'")
from edgelite import interpreter as edgelite_interpreter  # noqa: E402


def _lstm_model(batch=2, steps=3, n_in=5, n_cell=4, n_out=4, cifg=False, peephole=False,
                projection=False, time_major=False, cell_clip=0.0, layer_norm=False,
                seed=0, hybrid=False) -> bytes:
    """`hybrid`: the weights (input, recurrent, peephole, projection) int8 with one scale each
    (a dynamic-range LSTM, as the quantizer writes one), the biases and norms float32."""
    rng = np.random.default_rng(seed)
    model = Model()
    sg = Subgraph(name="main")
    shape = (steps, batch, n_in) if time_major else (batch, steps, n_in)
    x = sg.add_tensor(Tensor("x", shape))

    def const(name, *shape_):
        value = (rng.standard_normal(shape_) * 0.5).astype(np.float32)
        if hybrid and name[:2] in ("w_", "r_", "p_", "pr") and name != "proj_b":
            scale = float(np.abs(value).max()) / 127
            q = np.clip(np.round(value / scale), -127, 127).astype(np.int8)
            return sg.add_tensor(Tensor(name, shape_, "int8", buffer=model.add_buffer(q),
                                        quantization=QuantizationParameters(scale=[scale],
                                                                            zero_point=[0])))
        return sg.add_tensor(Tensor(name, shape_, buffer=model.add_buffer(value)))

    n_proj_out = n_out if projection else n_cell
    ins = [x]
    ins += [-1 if cifg else const("w_i", n_cell, n_in)] + \
           [const(f"w_{g}", n_cell, n_in) for g in "fco"]
    ins += [-1 if cifg else const("r_i", n_cell, n_proj_out)] + \
           [const(f"r_{g}", n_cell, n_proj_out) for g in "fco"]
    ins += [(-1 if cifg else const("p_i", n_cell)) if peephole else -1,
            const("p_f", n_cell) if peephole else -1, const("p_o", n_cell) if peephole else -1]
    ins += [-1 if cifg else const("b_i", n_cell)] + [const(f"b_{g}", n_cell) for g in "fco"]
    ins += [const("proj_w", n_proj_out, n_cell) if projection else -1,
            const("proj_b", n_proj_out) if projection else -1]
    ins += [sg.add_tensor(Tensor("h", (batch, n_proj_out), is_variable=True)),
            sg.add_tensor(Tensor("c", (batch, n_cell), is_variable=True))]
    if layer_norm:  # coefficients of the four gates' layer norms (inputs 20-23)
        ins += [-1 if cifg else const("ln_i", n_cell)] + [const(f"ln_{g}", n_cell) for g in "fco"]
    y = sg.add_tensor(Tensor("y", shape[:2] + (n_proj_out,)))
    sg.inputs, sg.outputs = [x], [y]
    sg.operators = [Operator(OperatorCode("UNIDIRECTIONAL_SEQUENCE_LSTM", 0), ins, [y],
                             default_options("UNIDIRECTIONAL_SEQUENCE_LSTM",
                                             fused_activation_function=4, cell_clip=cell_clip,
                                             time_major=time_major))]
    model.subgraphs.append(sg)
    return save(model)


def _run(module, content, xs):
    it = module.Interpreter(model_content=content)
    it.allocate_tensors()
    outs = []
    for x in xs:
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        outs.append(it.get_tensor(it.get_output_details()[0]["index"]))
    it.reset_all_variables()
    it.set_tensor(it.get_input_details()[0]["index"], xs[0])
    it.invoke()
    outs.append(it.get_tensor(it.get_output_details()[0]["index"]))
    return outs


@pytest.mark.parametrize("kwargs", [
    {}, {"cifg": True}, {"peephole": True}, {"projection": True, "n_out": 3},
    {"time_major": True}, {"cell_clip": 0.3}, {"cifg": True, "peephole": True, "projection": True},
    {"layer_norm": True}, {"layer_norm": True, "peephole": True},
    {"layer_norm": True, "peephole": True, "cifg": True, "projection": True},
], ids=lambda k: ",".join(k) or "plain")
def test_lstm_matches_litert_across_invokes(kwargs):
    content = _lstm_model(**kwargs)
    rng = np.random.default_rng(1)
    shape = (3, 2, 5) if kwargs.get("time_major") else (2, 3, 5)
    xs = [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]
    ours, theirs = _run(edgelite_interpreter, content, xs), _run(litert, content, xs)
    assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    assert not np.allclose(ours[0], ours[1])  # the state carried over between invokes


@pytest.mark.parametrize("kwargs", [{}, {"time_major": True}, {"cell_clip": 0.3}],
                         ids=lambda k: ",".join(k) or "plain")
@pytest.mark.parametrize("dynamic", [None, "asymmetric", "symmetric"])
def test_batch_one_narrow_input_lstm_matches_litert(kwargs, dynamic):
    """Batch 1 with fewer inputs than cells takes rnn_cells.StackedLstm (one product of [h, x, 1]
    a step), float32 and dynamic-range (h quantized and dequantized each step): three invokes
    against LiteRT, as strict as the other paths."""
    from edgelite.converter.quantize import quantize
    from edgelite.schema import load, save
    content = _lstm_model(batch=1, steps=7, n_in=6, n_cell=16, n_out=16, **kwargs)
    if dynamic:
        q = quantize(load(content), "dynamic", min_weight_elements=0)
        op = q.model.subgraphs[0].operators[0]
        op.options = op.options.replace(asymmetric_quantize_inputs=dynamic == "asymmetric")
        content = save(q.model)
    rng = np.random.default_rng(1)
    shape = (7, 1, 6) if kwargs.get("time_major") else (1, 7, 6)
    xs = [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]
    ours, theirs = _run(edgelite_interpreter, content, xs), _run(litert, content, xs)
    assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    assert not np.allclose(ours[0], ours[1])


@pytest.mark.parametrize("kwargs", [{}, {"time_major": True}, {"cell_clip": 0.3}],
                         ids=lambda k: ",".join(k) or "plain")
@pytest.mark.parametrize("batch", [2, 5])
def test_batched_narrow_input_lstm_matches_litert(kwargs, batch):
    """A batch with fewer inputs than cells takes StackedLstm's gate-major form (v_t [width,
    batch], one GEMM m^T v_t a step): three invokes against LiteRT, as strict as the others."""
    content = _lstm_model(batch=batch, steps=7, n_in=6, n_cell=16, n_out=16, **kwargs)
    rng = np.random.default_rng(2)
    shape = (7, batch, 6) if kwargs.get("time_major") else (batch, 7, 6)
    xs = [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]
    ours, theirs = _run(edgelite_interpreter, content, xs), _run(litert, content, xs)
    assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    assert not np.allclose(ours[0], ours[1])


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("dynamic", [False, True])
def test_wide_input_lstm_matches_litert(batch, dynamic):
    """More than twice as many inputs as cells (past rnn_cells.narrow): the input projection
    of every step in one GEMM, then LstmSteps (float and default dynamic-range)."""
    from edgelite.converter.quantize import quantize
    from edgelite.schema import load
    content = _lstm_model(batch=batch, steps=5, n_in=12, n_cell=4, n_out=4)
    if dynamic:
        content = save(quantize(load(content), "dynamic", min_weight_elements=0).model)
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((batch, 5, 12)).astype(np.float32) for _ in range(3)]
    ours, theirs = _run(edgelite_interpreter, content, xs), _run(litert, content, xs)
    assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    assert not np.allclose(ours[0], ours[1])


@pytest.mark.parametrize("dynamic", [False, True])
def test_batch_one_narrow_input_lstm_of_no_steps(dynamic):
    """An empty sequence through StackedLstm: an empty output and the states kept, as LiteRT."""
    from edgelite.converter.quantize import quantize
    from edgelite.schema import load
    content = _lstm_model(batch=1, steps=0, n_in=6, n_cell=16, n_out=16)
    if dynamic:
        content = save(quantize(load(content), "dynamic", min_weight_elements=0).model)
    xs = [np.zeros((1, 0, 6), np.float32)]
    ours, theirs = _run(edgelite_interpreter, content, xs), _run(litert, content, xs)
    assert [o.shape for o in ours] == [t.shape for t in theirs] == [(1, 0, 16)] * 2


def _run_ref(module, content, xs):
    steps = run_steps(module, content, [[x] for x in xs],
                      experimental_op_resolver_type=module.OpResolverType.BUILTIN_REF)
    return [outputs[0] for outputs in steps]


@pytest.mark.parametrize("exact,kwargs", [
    (True, {}), (True, {"peephole": True}), (True, {"projection": True, "n_out": 3}),
    (True, {"time_major": True}), (True, {"cell_clip": 0.3}), (True, {"layer_norm": True}),
    (True, {"n_cell": 3, "n_out": 3, "batch": 1}), (True, {"n_cell": 5, "n_out": 5, "batch": 3}),
    (True, {"n_cell": 5, "n_out": 5, "batch": 3, "time_major": True}),
    (True, {"n_cell": 6, "n_out": 3, "batch": 3, "projection": True, "peephole": True}),
    (True, {"n_cell": 7, "n_out": 7, "layer_norm": True, "time_major": True}),
    (True, {"cifg": True}), (True, {"cifg": True, "peephole": True, "n_cell": 5, "n_out": 5}),
    (True, {"layer_norm": True, "peephole": True, "cifg": True, "projection": True, "n_out": 3}),
    # values whose scalar-path logistic needs libm's expf (float64 exp is 1 ulp off there)
    (True, {"n_cell": 17, "n_out": 17, "n_in": 11, "steps": 4, "seed": 1}),
], ids=lambda v: v if isinstance(v, bool) else (",".join(v) or "plain"))
@pytest.mark.parametrize("asymmetric", [False, True])
def test_hybrid_lstm_builtin_ref_matches_litert(exact, kwargs, asymmetric):
    """The dynamic-range LSTM under BUILTIN_REF in both runtimes: LiteRT's LstmStepHybrid order,
    Eigen's tanh and logistic (eigen_math.py), MeanStddevNormalization's sums in order; bit for
    bit where `exact`, else within the default tolerance."""
    from edgelite.schema import load
    model = load(_lstm_model(hybrid=True, **kwargs))
    op = model.subgraphs[0].operators[0]
    op.options = op.options.replace(asymmetric_quantize_inputs=asymmetric)
    content = save(model)
    rng = np.random.default_rng(kwargs.get("seed", 1))
    batch, steps, n_in = kwargs.get("batch", 2), kwargs.get("steps", 3), kwargs.get("n_in", 5)
    shape = (steps, batch, n_in) if kwargs.get("time_major") else (batch, steps, n_in)
    xs = [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]
    ours, theirs = _run_ref(edgelite_interpreter, content, xs), _run_ref(litert, content, xs)
    if exact:
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(a, b)
    else:
        assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    assert not np.allclose(ours[0], ours[1])
