"""Timing-free guards of the dynamic-range (hybrid) and recurrent hot paths (issue 17, goal 6):
numpy calls and matrix products of one invoke, counted, never timed.

- a default-resolver hybrid FULLY_CONNECTED or convolution at batch 1 quantizes its input in a
  handful of passes over the row (its statistics are Python scalars: hybrid.dequantize_row),
  not ~40 passes over one-element arrays, and multiplies in float32;
- an LSTM's input projection is one GEMM for all its time steps, then one product a step: 1 +
  steps products an invoke (UNIDIRECTIONAL_SEQUENCE_LSTM float and dynamic-range, the fused
  Keras loop), and a step is a bounded number of numpy calls.

Functions the kernels bind at import (hybrid's min/max reductions, common.clip) are not
counted; every other numpy function and ufunc named in COUNTED is."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from edgelite import interpreter as edgelite_interpreter
from edgelite.interpreter.kernels import hybrid
from edgelite.schema import (Model, Operator, OperatorCode, QuantizationParameters, Subgraph,
                             Tensor, default_options, load, save)
from tests.interpreter.keras_while import keras_while
from tests.numpy_dispatch import NUMPY2_DISPATCH

pytest.importorskip("ai_edge_litert.interpreter",
                    reason="LiteRT (ai-edge-litert) is the oracle: pip install -e '.[dev]'")

COUNTED = ("dot", "matmul", "einsum", "multiply", "add", "subtract", "divide", "rint", "trunc",
           "copysign", "tanh", "exp", "clip", "copyto", "where", "minimum", "maximum", "abs",
           "absolute", "negative", "less", "greater", "less_equal", "greater_equal", "equal",
           "logical_or", "any", "all", "sum", "concatenate", "ascontiguousarray", "empty",
           "zeros", "full")
PRODUCTS = ("dot", "matmul")


class _Counter:
    """Counts numpy calls by name while `on`; records the dtypes of the products' operands."""

    def __init__(self):
        self.counts, self.product_dtypes, self.on = {}, set(), True

    def wrap(self, name, f):
        return _Counted(self, name, f)

    def total(self) -> int:
        return sum(self.counts.values())

    def products(self) -> int:
        return sum(self.counts.get(n, 0) for n in PRODUCTS)


class _Counted:
    """A numpy function or ufunc that counts its calls (attributes such as .reduce pass
    through uncounted)."""

    def __init__(self, counter, name, f):
        self.counter, self.name, self.f = counter, name, f

    def __call__(self, *args, **kwargs):
        c = self.counter
        if c.on:
            c.counts[self.name] = c.counts.get(self.name, 0) + 1
            if self.name in PRODUCTS:
                c.product_dtypes.update(np.asarray(a).dtype.name for a in args[:2])
        return self.f(*args, **kwargs)

    def __getattr__(self, attr):
        return getattr(self.f, attr)


def _counted_invoke(it, monkeypatch, counter=None) -> _Counter:
    """The numpy calls of one invoke of an allocated interpreter that has run once (the array
    method ndarray.dot counted as dot, through the profile hook)."""
    counter = counter or _Counter()

    def profile(frame, event, arg):
        if event == "c_call" and counter.on and getattr(arg, "__name__", None) == "dot" \
                and isinstance(getattr(arg, "__self__", None), np.ndarray):
            counter.counts["dot"] = counter.counts.get("dot", 0) + 1
            counter.product_dtypes.add(arg.__self__.dtype.name)
    with monkeypatch.context() as m:
        for name in COUNTED:
            m.setattr(np, name, counter.wrap(name, getattr(np, name)))
        sys.setprofile(profile)
        try:
            it.invoke()
        finally:
            sys.setprofile(None)
    return counter


def _interpreter(content: bytes, **kwargs):
    it = edgelite_interpreter.Interpreter(model_content=content, **kwargs)
    it.allocate_tensors()
    rng = np.random.default_rng(0)
    for d in it.get_input_details():
        it.set_tensor(d["index"], rng.standard_normal(tuple(d["shape"])).astype(np.float32))
    it.invoke()
    return it


def _quant(scale):
    scale = np.asarray(scale, np.float32).reshape(-1)
    return QuantizationParameters(scale=scale, zero_point=np.zeros(scale.size, np.int64))


def _hybrid_fc(depth=64, units=48, asymmetric=True) -> bytes:
    rng = np.random.default_rng(1)
    model = Model()
    sg = Subgraph(name="main")
    x = sg.add_tensor(Tensor("x", (1, depth)))
    w = rng.integers(-127, 128, (units, depth)).astype(np.int8)
    wt = sg.add_tensor(Tensor("w", w.shape, "int8", model.add_buffer(w),
                              quantization=_quant(rng.random(units) * 0.01 + 1e-3)))
    b = rng.standard_normal(units).astype(np.float32)
    bt = sg.add_tensor(Tensor("b", b.shape, "float32", model.add_buffer(b)))
    y = sg.add_tensor(Tensor("y", (1, units)))
    sg.inputs, sg.outputs = [x], [y]
    sg.operators = [Operator(OperatorCode("FULLY_CONNECTED", 0), [x, wt, bt], [y],
                             default_options("FULLY_CONNECTED", fused_activation_function=1,
                                             asymmetric_quantize_inputs=asymmetric))]
    model.subgraphs.append(sg)
    return save(model)


def _hybrid_conv(asymmetric_scales=True) -> bytes:
    """CONV_2D 3x3 over [1, 12, 12, 16] -> 24 channels, int8 weights (per-channel scales: the
    asymmetric input path; one scale: the symmetric one), bias, RELU."""
    rng = np.random.default_rng(2)
    model = Model()
    sg = Subgraph(name="main")
    x = sg.add_tensor(Tensor("x", (1, 12, 12, 16)))
    w = rng.integers(-127, 128, (24, 3, 3, 16)).astype(np.int8)
    scale = rng.random(24) * 0.01 + 1e-3 if asymmetric_scales else [0.004]
    wt = sg.add_tensor(Tensor("w", w.shape, "int8", model.add_buffer(w),
                              quantization=_quant(scale)))
    b = rng.standard_normal(24).astype(np.float32)
    bt = sg.add_tensor(Tensor("b", b.shape, "float32", model.add_buffer(b)))
    y = sg.add_tensor(Tensor("y", (1, 12, 12, 24)))
    sg.inputs, sg.outputs = [x], [y]
    sg.operators = [Operator(OperatorCode("CONV_2D", 0), [x, wt, bt], [y],
                             default_options("CONV_2D", padding=0, stride_w=1, stride_h=1,
                                             fused_activation_function=1))]
    model.subgraphs.append(sg)
    return save(model)


@NUMPY2_DISPATCH
@pytest.mark.parametrize("asymmetric", [True, False])
def test_default_hybrid_fully_connected_is_a_few_passes_and_one_float32_product(
        asymmetric, monkeypatch):
    """Batch 1: multiply by 1/scale, rint, multiply by the scale, one float32 GEMV, the bias
    and the activation: at most 7 numpy calls (the exact path, BUILTIN_REF's, makes ~40 for its
    row statistics alone, and a float64 product where the integer sums would pass 2^24)."""
    it = _interpreter(_hybrid_fc(asymmetric=asymmetric))
    counter = _counted_invoke(it, monkeypatch)
    assert counter.products() == 1, counter.counts
    assert counter.product_dtypes == {"float32"}, counter.product_dtypes
    assert counter.total() <= 7, counter.counts


@NUMPY2_DISPATCH
@pytest.mark.parametrize("asymmetric_scales", [True, False])
def test_default_hybrid_conv_quantizes_its_input_in_three_passes(asymmetric_scales,
                                                                  monkeypatch):
    """Around its one float kernel (not counted here) a default hybrid CONV_2D at batch 1 makes
    at most 4 numpy calls: x * (1/scale), rint, (a clamp where a row needs it), * scale."""
    counter = _Counter()
    real = hybrid._float_kernel

    def float_kernel(*args, **kwargs):
        run = real(*args, **kwargs)

        def uncounted(*a):
            counter.on = False
            try:
                return run(*a)
            finally:
                counter.on = True
        return uncounted
    monkeypatch.setattr(hybrid, "_float_kernel", float_kernel)
    it = _interpreter(_hybrid_conv(asymmetric_scales))
    _counted_invoke(it, monkeypatch, counter)
    assert counter.counts.get("rint") == 1, counter.counts
    assert counter.total() <= 4, counter.counts


def _sequence_lstm(steps: int, dynamic: bool) -> bytes:
    """UNIDIRECTIONAL_SEQUENCE_LSTM, batch 1, 80 inputs, 32 cells (test_lstm's builder; an
    input at most twice the cells, rnn_cells.narrow, takes rnn_cells.StackedLstm,
    test_recurrent_calls' guard); with `dynamic` its weights int8 by edgelite's dynamic-range
    quantizer."""
    from tests.interpreter.test_lstm import _lstm_model
    content = _lstm_model(batch=1, steps=steps, n_in=80, n_cell=32, n_out=32)
    if dynamic:
        from edgelite.converter.quantize import quantize
        q = quantize(load(content), "dynamic", min_weight_elements=0)
        assert q.report.quantized_ops == {"UNIDIRECTIONAL_SEQUENCE_LSTM": 1}
        content = save(q.model)
    return content


def _per_step(make, monkeypatch, **kwargs) -> tuple:
    """(products of an 8-step invoke, numpy calls one more step costs) of make(steps)."""
    short, long = (_counted_invoke(_interpreter(make(n), **kwargs), monkeypatch)
                   for n in (8, 16))
    return short.products(), (long.total() - short.total()) / 8, long.products()


@NUMPY2_DISPATCH
@pytest.mark.parametrize("dynamic", [False, True], ids=["float32", "dynamic-range"])
def test_sequence_lstm_is_one_gemm_then_one_product_a_step(dynamic, monkeypatch):
    """UNIDIRECTIONAL_SEQUENCE_LSTM: 1 + steps products an invoke (the dynamic-range one made 8
    a step: each gate's input and recurrent products, each step's rows quantized again), and a
    step is its product, the gates' sum and rnn_cells.lstm_cell: at most 10 numpy calls (the
    dynamic-range one adds h's quantization: 3 more)."""
    short, per_step, long = _per_step(lambda n: _sequence_lstm(n, dynamic), monkeypatch)
    assert (short, long) == (1 + 8, 1 + 16)
    assert per_step <= (13 if dynamic else 10), per_step


@NUMPY2_DISPATCH
def test_sequence_lstm_under_builtin_ref_keeps_the_exact_loop(monkeypatch):
    """BUILTIN_REF is the spec: the dynamic-range LSTM's exact per-gate products stay there."""
    resolver = edgelite_interpreter.OpResolverType.BUILTIN_REF
    short, _, _ = _per_step(lambda n: _sequence_lstm(n, True), monkeypatch,
                            experimental_op_resolver_type=resolver)
    assert short == 8 * 8


@NUMPY2_DISPATCH
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_keras_dynamic_range_loop_step_numpy_calls(kind, monkeypatch):
    """The fused Keras loop with dynamic-range weights: one GEMM for every step's input
    projection, then one product a step, and a step of at most 13 numpy calls for the LSTM
    (h's quantization 3, the product, the gates' sum, lstm_cell's 8), 16 for the GRU (the
    quantization and product 4, the recurrent bias, the gates 11); the exact row the loop ran
    before (hybrid_row's LiteRT rounding, the offset correction in float64) made 10 alone."""
    short, per_step, long = _per_step(   # wider than rnn_cells.narrow: not stacked
        lambda n: keras_while(kind=kind, variant="dynamic", steps=n, n_in=12), monkeypatch)
    assert (short, long) == (1 + 8, 1 + 16)
    assert per_step <= (13 if kind == "lstm" else 16), per_step
