"""Timing-free guards of the recurrent kernels' time steps (issue 17, goal 6): what one more step
costs an invoke, counted, never timed. A step of these ops on rows this small is its numpy
calls (~0.2-0.5 µs each) and Python frames, so both are counted:

- numpy calls: every numpy function and ufunc a kernel calls, by name, however it reached it (a
  lookup on numpy when the kernel is prepared or runs, or a reference kept at import in a
  kernel module or on one of its functions; the clip ufunc from numpy's umath too), and the C
  methods of arrays (ndarray.dot, argmax, item) and of ufuncs (np.minimum.reduce);
- Python frames: function calls the step makes in Python (none in these loops).

The per-step numbers are the difference between invokes of 16 and 8 steps, divided by 8. The
code before this guard made (numpy calls, frames) a step: float UNIDIRECTIONAL_SEQUENCE_LSTM
(10, 2), UNIDIRECTIONAL_SEQUENCE_RNN (3, 1), dynamic-range UNIDIRECTIONAL_SEQUENCE_LSTM
(asymmetric inputs: 15, 9); every bound here fails on that code."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from edgelite import interpreter as edgelite_interpreter
from edgelite.interpreter import threads
from edgelite.interpreter.kernels import registry
from tests.numpy_dispatch import NUMPY2_DISPATCH

pytest.importorskip("ai_edge_litert.interpreter",
                    reason="LiteRT (ai-edge-litert) is the oracle: pip install -e '.[dev]'")


def _numpy_callables() -> dict:
    """numpy's ufuncs and array functions by name (np.dot, np.copyto, np.tanh...), and the
    ufuncs numpy keeps in its umath module only (the clip ufunc, which kernels.common binds:
    np.clip is a Python wrapper around it)."""
    found = {}
    try:
        from numpy._core import umath
    except ImportError:   # numpy 1
        from numpy.core import umath
    for module in (np, umath):
        for name in dir(module):
            f = getattr(module, name, None)
            if isinstance(f, np.ufunc) or type(f).__name__ == "_ArrayFunctionDispatcher":
                found.setdefault(id(f), (name, f))
    return {name: f for name, f in found.values()}


class _Counts:
    """numpy calls (and the functions' by name) and Python frames while `on`."""

    def __init__(self):
        self.numpy, self.frames, self.on, self.names = 0, 0, False, {}


class _Counted:
    """A numpy function or ufunc that counts its calls (.reduce etc. pass through)."""

    def __init__(self, counts, f, name):
        self.counts, self.f, self.name = counts, f, name

    def __call__(self, *args, **kwargs):
        c = self.counts
        if c.on:
            c.numpy += 1
            c.names[self.name] = c.names.get(self.name, 0) + 1
        return self.f(*args, **kwargs)

    def __getattr__(self, attr):
        return getattr(self.f, attr)


_WRAPPER = _Counted.__call__.__code__


class _Counting:
    """numpy's callables replaced by counting ones on numpy and wherever edgelite's modules or
    their functions keep them, for the interpreter's prepare and invokes; the profile hook
    counts Python frames and C method calls on arrays and ufuncs."""

    def __init__(self):
        self.counts = _Counts()
        self.patched = []

    def __enter__(self):
        registry.load_all()   # what a kernel module keeps at import: numpy's own, patched here
        by_id = {id(f): _Counted(self.counts, f, name)
                 for name, f in _numpy_callables().items()}
        places = [np.__dict__]
        for name, module in list(sys.modules.items()):
            if name.startswith("edgelite") and module is not None:
                places.append(module.__dict__)
                places += [v.__dict__ for v in list(vars(module).values())
                           if callable(v) and isinstance(getattr(v, "__dict__", None), dict)
                           and getattr(v, "__module__", None) == name]
        for d in places:
            for key, value in list(d.items()):
                wrapped = by_id.get(id(value))
                if wrapped is not None and wrapped.f is value:
                    self.patched.append((d, key, value))
                    d[key] = wrapped
        return self

    def __exit__(self, *exc):
        for d, key, value in reversed(self.patched):
            d[key] = value
        return False

    def invoke(self, it) -> tuple:
        """(numpy calls, Python frames, numpy functions' calls by name) of one invoke."""
        counts = self.counts

        def profile(frame, event, arg):
            if not counts.on:
                return
            if event == "call" and frame.f_code is not _WRAPPER:
                counts.frames += 1
            elif event == "c_call" and isinstance(getattr(arg, "__self__", None),
                                                  (np.ndarray, np.ufunc)):
                counts.numpy += 1
        counts.numpy = counts.frames = 0
        counts.names = {}
        sys.setprofile(profile)
        counts.on = True
        try:
            it.invoke()
        finally:
            counts.on = False
            sys.setprofile(None)
        # less the profile's own call of invoke
        return counts.numpy, counts.frames - 1, counts.names


def _invoke_counts(content: bytes) -> tuple:
    # both sizes take the BLAS limit (threads.serial may skip it at one of them): per_step
    # subtracts their counts
    serial, threads.serial = threads.serial, lambda runtime: False
    try:
        return _counts(content)
    finally:
        threads.serial = serial


def _counts(content: bytes) -> tuple:
    with _Counting() as counting:
        it = edgelite_interpreter.Interpreter(model_content=content)
        it.allocate_tensors()
        rng = np.random.default_rng(0)
        for d in it.get_input_details():
            it.set_tensor(d["index"], rng.standard_normal(tuple(d["shape"])).astype(np.float32))
        it.invoke()
        return counting.invoke(it)


def per_step(make, names: bool = False) -> tuple:
    """(numpy calls, Python frames) one more time step costs an invoke of make(steps); with
    `names`, also the numpy functions' calls a step by name."""
    (n8, f8, by8), (n16, f16, by16) = (_invoke_counts(make(steps)) for steps in (8, 16))
    step = (n16 - n8) / 8, (f16 - f8) / 8
    if not names:
        return step
    return step + ({k: (v - by8.get(k, 0)) / 8 for k, v in by16.items()
                    if v != by8.get(k, 0)},)


def _lstm(steps: int, dynamic: bool = False) -> bytes:
    from tests.interpreter.test_lstm import _lstm_model
    content = _lstm_model(batch=1, steps=steps, n_in=16, n_cell=32, n_out=32)
    if dynamic:
        from edgelite.converter.quantize import quantize
        from edgelite.schema import load, save
        content = save(quantize(load(content), "dynamic", min_weight_elements=0).model)
    return content


def _rnn(steps: int, n_in: int = 16, units: int = 32, dynamic: bool = False) -> bytes:
    """UNIDIRECTIONAL_SEQUENCE_RNN (TANH), batch 1, batch-major, constant weights (with
    `dynamic` int8, one scale each: the hybrid kernel)."""
    from edgelite.schema import (Model, Operator, OperatorCode, QuantizationParameters,
                                 Subgraph, Tensor, default_options, save)
    rng = np.random.default_rng(0)
    model = Model()
    sg = Subgraph(name="main")

    def const(name, *shape, int8=False):
        value = (rng.standard_normal(shape) * 0.3).astype(np.float32)
        if not int8:
            return sg.add_tensor(Tensor(name, shape, "float32", model.add_buffer(value)))
        q = QuantizationParameters(scale=np.array([0.01], np.float32),
                                   zero_point=np.zeros(1, np.int64))
        value = np.clip(np.rint(value / 0.01), -127, 127).astype(np.int8)
        return sg.add_tensor(Tensor(name, shape, "int8", model.add_buffer(value),
                                    quantization=q))
    x = sg.add_tensor(Tensor("x", (1, steps, n_in)))
    ins = [x, const("w", units, n_in, int8=dynamic), const("r", units, units, int8=dynamic),
           const("b", units), sg.add_tensor(Tensor("h", (1, units), is_variable=True))]
    y = sg.add_tensor(Tensor("y", (1, steps, units)))
    sg.inputs, sg.outputs = [x], [y]
    sg.operators = [Operator(OperatorCode("UNIDIRECTIONAL_SEQUENCE_RNN", 0), ins, [y],
                             default_options("UNIDIRECTIONAL_SEQUENCE_RNN",
                                             fused_activation_function=4, time_major=False))]
    model.subgraphs.append(sg)
    return save(model)


@NUMPY2_DISPATCH
def test_float_sequence_lstm_step_is_one_product_and_seven_ufuncs():
    """[h, x, 1] times the stacked weights, then tanh, the sigmoid gates' * 0.5 + 0.5, one
    multiply for i * g and f * c, one add for c, tanh(c), o * tanh(c): 8 calls, no frame."""
    calls, frames = per_step(_lstm)
    assert calls <= 8 and frames == 0, (calls, frames)


@NUMPY2_DISPATCH
@pytest.mark.parametrize("batch", [3, 4])
def test_batched_narrow_sequence_lstm_step_is_one_product_and_seven_ufuncs(batch):
    """A batch over a narrow input: StackedLstm's gate-major step (one GEMM m^T v_t, the same
    seven ufuncs on contiguous [n, batch] blocks); LstmSteps' was 10 calls (the product, the
    input projection's sum, its cell's 8)."""
    from tests.interpreter.test_lstm import _lstm_model
    calls, frames, names = per_step(lambda n: _lstm_model(batch=batch, steps=n, n_in=16,
                                                          n_cell=32, n_out=32), names=True)
    assert calls <= 8 and frames == 0, (calls, frames, names)


@NUMPY2_DISPATCH
@pytest.mark.parametrize("batch,sequences,n_in", [(1, True, 3), (4, False, 3), (1, True, 14)])
def test_keras_narrow_lstm_loop_step_is_one_product_and_seven_ufuncs(batch, sequences, n_in):
    """The fused Keras LSTM over at most twice as many inputs as units (rnn_cells.narrow) runs
    StackedLstm (both projections' weights and biases stacked): 8 calls a step, was 10
    (LstmSteps; 14 inputs for 8 units took it until the bound was measured)."""
    from tests.interpreter.keras_while import keras_while
    calls, frames = per_step(lambda n: keras_while(kind="lstm", batch=batch, units=8,
                                                   n_in=n_in, steps=n, sequences=sequences))
    assert calls <= 8 and frames == 0, (calls, frames)


@NUMPY2_DISPATCH
@pytest.mark.parametrize("variant,batch", [("", 1), ("relu_fused", 1), ("relu", 2)])
def test_keras_narrow_simple_rnn_loop_step_is_one_product_and_its_activation(variant, batch):
    """The fused Keras SimpleRNN over a narrow input runs rnn_cells.StackedRnn: one product of
    [h, x_t, 1] and the activation (tanh, or maximum with 0) a step; the loop's own: 3 (the
    recurrent product, the input projection's sum, the activation)."""
    from tests.interpreter.keras_while import keras_while
    got = per_step(lambda n: keras_while(kind="rnn", variant=variant, batch=batch, steps=n))
    assert got[0] <= 2 and got[1] == 0, got


@NUMPY2_DISPATCH
@pytest.mark.parametrize("batch", [1, 2])
def test_keras_narrow_hard_sigmoid_lstm_loop_step(batch):
    """Keras's hard_sigmoid gates through StackedLstm: relu6(z + shift) * scale as one clamp
    of m's sigmoid columns (scale and shift * scale in the weights and bias), tanh of g alone,
    then the cell's five calls: 7 a step with the product; LstmSteps' hard path was 11 (the
    input sum, + shift, the clamp, * scale, tanh(g), the cell's six)."""
    from tests.interpreter.keras_while import keras_while
    got = per_step(lambda n: keras_while(kind="lstm", variant="hard_sigmoid", batch=batch,
                                         steps=n))
    assert got[0] <= 7 and got[1] == 0, got


@NUMPY2_DISPATCH
def test_keras_narrow_dynamic_gru_loop_step():
    """The fused batch-1 dynamic-range Keras GRU over fewer inputs than units runs
    hybrid_row.QuantizedStackedGru: StackedGru's 9 calls and h's quantize-dequantize inline
    (7), no frame but x's row zero point. Before: 19 calls and 5 frames a step."""
    from tests.interpreter.keras_while import keras_while
    calls, frames = per_step(lambda n: keras_while(kind="gru", variant="dynamic", units=8,
                                                   n_in=3, steps=n))
    assert calls <= 16 and frames <= 1.5, (calls, frames)


@NUMPY2_DISPATCH
def test_keras_narrow_dynamic_lstm_loop_step():
    """The fused batch-1 dynamic-range Keras LSTM over fewer inputs than units runs
    QuantizedStackedLstm: the float step's 8 calls and h's quantize-dequantize inline (4 method
    calls, 3 ufuncs), no frame but x's row zero point (per invoke, a row a step) and a clamp's
    now and then. Before: 17 calls and 4 frames a step (RowProduct, dequantize_row, its zero
    point, LstmSteps' input sum)."""
    from tests.interpreter.keras_while import keras_while
    calls, frames = per_step(lambda n: keras_while(kind="lstm", variant="dynamic", units=8,
                                                   n_in=3, steps=n))
    assert calls <= 16 and frames <= 1.5, (calls, frames)   # 15 and a clamp now and then


@NUMPY2_DISPATCH
@pytest.mark.parametrize("variant,batch,n_in", [("", 1, 3), ("", 3, 3), ("reset_before", 1, 3),
                                                ("reset_before", 2, 3), ("", 1, 14)])
def test_keras_narrow_gru_loop_step(variant, batch, n_in):
    """The fused Keras GRU over fewer inputs than units runs StackedGru: one product of [x, 1,
    h], one tanh, multiply and add for [z, 1 - z, r], the candidate in three calls (reset_after:
    r * hc, + xc, tanh; reset_before: r * h, its product with xc's sum in, tanh), [z h,
    (1 - z) c] and their sum: 9. The loop's own steps were 12 (reset_before 12-13) and an
    input projection."""
    calls = 9
    from tests.interpreter.keras_while import keras_while
    got = per_step(lambda n: keras_while(kind="gru", variant=variant, batch=batch, units=8,
                                         n_in=n_in, steps=n))
    assert got[0] <= calls and got[1] == 0, got


@NUMPY2_DISPATCH
def test_sequence_rnn_step_is_one_product_and_its_tanh():
    calls, frames = per_step(_rnn)
    assert calls <= 2 and frames == 0, (calls, frames)


def per_invoke(make) -> float:
    """The numpy calls an invoke of make(steps) makes besides its steps' (8 steps' counted
    less 8 times per_step's)."""
    (n8, _, _), (n16, _, _) = (_invoke_counts(make(steps)) for steps in (8, 16))
    return n8 - (n16 - n8)


@NUMPY2_DISPATCH
def test_sequence_rnn_invoke_makes_no_views():
    """The batch-major TANH sequence RNN (rnn._stacked_tanh) copies its input in, its states
    and outputs out through views of its buffer made at prepare in the input's and output's
    layout: no numpy call outside the steps (its copies are np.copyto's C function). Before:
    two transposes an invoke."""
    assert per_invoke(_rnn) <= 0


@NUMPY2_DISPATCH
def test_sequence_lstm_invoke_calls():
    """The batch-major batch-1 float sequence LSTM (StackedLstm) outside its steps: the
    input's and output's time-major views (two swapaxes); was 6 (the old run's reshapes)."""
    assert per_invoke(_lstm) <= 2


@NUMPY2_DISPATCH
def test_dynamic_range_sequence_lstm_step():
    """The float step's 8 calls, then h quantized and dequantized for the next product: its
    bounds by argmin/argmax (4 method calls, no reduction), x * inv, rint, * scale, a clamp at
    most: at most 16 numpy calls; the statistics inline in the loop (hybrid_lstm.
    QuantizedStackedLstm): the one frame a step left is x's row zero point (hybrid.
    _dequantize_many, per invoke, a row a step). Before: 3 frames a step (dequantize_row and
    its _zero_point)."""
    calls, frames = per_step(lambda n: _lstm(n, dynamic=True))
    assert calls <= 16 and frames <= 1, (calls, frames)


@NUMPY2_DISPATCH
@pytest.mark.parametrize("kind,variant,calls,frames", [
    ("lstm", "", 10, 0), ("lstm", "dynamic", 17, 4), ("gru", "", 12, 0),
    ("gru", "dynamic", 19, 5), ("gru", "reset_before", 13, 0), ("rnn", "", 3, 0)])
def test_keras_loop_step(kind, variant, calls, frames):
    """The fused Keras loop (rnn_loop.py): the LSTM through rnn_cells.LstmSteps, the GRU's and
    SimpleRNN's steps inline in one loop each (no frame a step with float weights; dynamic-
    range: RowProduct, dequantize_row, the zero point), the GRU's blend c + z (h - c) in three
    calls (reset_after=False: the candidate's bias in its product). Before: LSTM (10, 4) a
    step (its step, the recurrent product, lstm_cell, np.dot's dispatcher), dynamic (15, 11),
    GRU (13, 3), dynamic GRU (18, 10), reset_before (15, 4), SimpleRNN (3, 3)."""
    from tests.interpreter.keras_while import keras_while
    # 12 inputs, 4 units: wider than rnn_cells.narrow (the stacked cells' guards are below)
    got = per_step(lambda n: keras_while(kind=kind, variant=variant, steps=n, n_in=12))
    assert got[0] <= calls and got[1] <= frames, got


@NUMPY2_DISPATCH
def test_dynamic_range_sequence_rnn_step_allocates_nothing():
    """rnn.Product's default hybrid product goes into buffers made once (it made two arrays a
    step, by np.empty_like and `@`, before): no numpy function that makes an array runs a step,
    and the product is np.matmul into its buffer."""
    calls, frames, names = per_step(lambda n: _rnn(n, dynamic=True), names=True)
    makers = {"empty", "empty_like", "zeros", "zeros_like", "ones", "full", "array", "copy"}
    assert not makers & set(names), names
    assert names.get("matmul") == 1, names
