"""Swish (LOGISTIC, then MUL of its input by its output: EfficientNet's activation) fused into
one step (interpreter/fusion.py, kernels/unary.py's `swish`, issue 17): the same values as the
two ops one by one and as LiteRT, in four numpy passes instead of six; not fused where the
sigmoid is seen or read elsewhere."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import Interpreter
from tests.interpreter.test_fusion import RELU6, Graph
from tests.opmodel import run_interpreter, run_litert


def swish_model(shape=(1, 6, 7, 5), order=("x", "s"), act=0, sigmoid_is_output=False,
                second_reader=False, producer=True) -> bytes:
    """in -> (ADD c) -> x -> LOGISTIC -> s; MUL(x, s) in `order` (+ act) -> y. With
    `second_reader` s also feeds an ADD whose output is a second graph output."""
    g = Graph(3)
    inp = g.tensor("in", shape)
    x = g.op("ADD", [inp, g.const("c", g.rng.standard_normal(shape).astype(np.float32))]) \
        if producer else inp
    s = g.op("LOGISTIC", [x])
    named = {"x": x, "s": s}
    y = g.op("MUL", [named[order[0]], named[order[1]]], fused_activation_function=act)
    outs = [y]
    if sigmoid_is_output:
        outs.append(s)
    if second_reader:
        outs.append(g.op("ADD", [s, g.const("d", np.float32(1.0))]))
    return g.save([inp], outs)


def _input(shape, seed=0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 4
    flat = x.reshape(-1)
    tails = [-100.0, 100.0, -30.0, 30.0, 0.0]           # saturated tails, zero
    flat[:len(tails)] = tails[:flat.size]
    return x


def _run(content, x, **kwargs):
    it = Interpreter(model_content=content, **kwargs)
    return it, run_interpreter(it, [x])


@pytest.mark.parametrize("order", [("x", "s"), ("s", "x")])
@pytest.mark.parametrize("act", [0, RELU6])
@pytest.mark.parametrize("producer", [True, False])
def test_swish_fuses_and_matches_the_ops_and_litert(order, act, producer):
    shape = (1, 6, 7, 5)
    content = swish_model(shape, order, act, producer=producer)
    x = _input(shape)
    it, fused = _run(content, x)
    ops = [it._main.sg.operators[oi].opcode.name for oi in it._main.run_ops]
    assert ops == (["ADD"] if producer else []) + ["LOGISTIC"], ops   # the MUL runs inside
    _, one_by_one = _run(content, x, experimental_preserve_all_tensors=True)
    theirs = run_litert(content, [x], reference=False)
    np.testing.assert_allclose(fused[0], one_by_one[0], rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(fused[0], theirs[0], rtol=1e-5, atol=1e-5)
    ref = x if not producer else None
    if ref is not None:   # x * sigmoid(x) in float64
        want = x.astype(np.float64) / (1 + np.exp(-x.astype(np.float64)))
        if act == RELU6:
            want = np.clip(want, 0, 6)
        np.testing.assert_allclose(fused[0], want, rtol=2e-6, atol=2e-6)


def test_swish_passes_nan_and_gives_nan_for_minus_inf_as_the_ops_do():
    shape = (1, 2, 2, 3)
    content = swish_model(shape, producer=False)
    x = _input(shape)
    x.reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
    _, fused = _run(content, x)
    with np.errstate(invalid="ignore"):
        theirs = run_litert(content, [x], reference=False)[0]
    got = fused[0].reshape(-1)
    assert np.isnan(got[0]) and got[1] == np.inf and np.isnan(got[2])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(theirs.reshape(-1)))


@pytest.mark.parametrize("why,options", [
    ("the sigmoid is a graph output", dict(sigmoid_is_output=True)),
    ("the sigmoid feeds another op too", dict(second_reader=True)),
])
def test_swish_is_not_fused_where_the_sigmoid_is_seen(why, options):
    shape = (1, 3, 4, 2)
    content = swish_model(shape, **options)
    x = _input(shape, 1)
    it, ours = _run(content, x)
    assert "MUL" in [it._main.sg.operators[oi].opcode.name for oi in it._main.run_ops], why
    for a, b in zip(ours, run_litert(content, [x], reference=False)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_a_broadcast_mul_of_a_sigmoid_is_not_swish():
    """Squeeze-excite's MUL(x, sigmoid(se)): x is not the sigmoid's input (the channel gate
    below fuses it: one step, the broadcast's values)."""
    g = Graph(4)
    x = g.tensor("x", (1, 4, 4, 3))
    se = g.tensor("se", (1, 1, 1, 3))
    y = g.op("MUL", [x, g.op("LOGISTIC", [se])])
    content = g.save([x, se], [y])
    it = Interpreter(model_content=content)
    feeds = [_input((1, 4, 4, 3)), _input((1, 1, 1, 3), 2)]
    ours = run_interpreter(it, feeds)
    assert len(it._main.run_ops) == 1
    np.testing.assert_allclose(ours[0], run_litert(content, feeds, reference=False)[0],
                               rtol=1e-5, atol=1e-5)


UFUNCS = ("multiply", "add", "subtract", "divide", "negative", "reciprocal", "exp", "tanh")


def _ufunc_calls(content, x, monkeypatch, **kwargs) -> list:
    """The ufuncs of UFUNCS one invoke calls, in order: wrapped before the interpreter is built
    (kernels bind their ufuncs at prepare)."""
    seen, on = [], [False]

    class Counted:   # .reduce and the other attributes pass through, uncounted
        def __init__(self, name, f):
            self.name, self.f = name, f

        def __call__(self, *args, **kw):
            if on[0]:
                seen.append(self.name)
            return self.f(*args, **kw)

        def __getattr__(self, attr):
            return getattr(self.f, attr)
    with monkeypatch.context() as m:
        for name in UFUNCS:
            m.setattr(np, name, Counted(name, getattr(np, name)))
        it = Interpreter(model_content=content, **kwargs)
        run_interpreter(it, [x])
        on[0] = True
        it.invoke()
    return seen


def test_a_fused_swish_makes_four_passes(monkeypatch):
    """Timing-free guard: LOGISTIC then MUL made six passes (negative, clip, exp, add,
    reciprocal; multiply), the fused step four, and no exp (twice tanh's cost)."""
    shape = (1, 8, 8, 16)
    content = swish_model(shape, producer=False)
    x = _input(shape)
    fused = _ufunc_calls(content, x, monkeypatch)
    assert fused == ["multiply", "tanh", "multiply", "add"], fused
    apart = _ufunc_calls(content, x, monkeypatch, experimental_preserve_all_tensors=True)
    # (clip and the MUL's multiply are bound at import: uncounted)
    assert apart == ["negative", "exp", "add", "reciprocal"], apart


# -- the convolution that feeds a swish writes x / 2 ------------------------------------------

def conv_swish_model(op="CONV_2D", hybrid=False, conv_act=0, extra_reader=False,
                     shape=(1, 9, 8, 6), seed=5, bias=True) -> bytes:
    """x -> CONV_2D 3x3 (or DEPTHWISE_CONV_2D 3x3, or a 1x1 projection with `hybrid` int8
    weights) -> c -> LOGISTIC -> s; MUL(c, s) -> y; `extra_reader`: c is a graph output too."""
    from edgelite.schema import QuantizationParameters
    g = Graph(seed)
    x = g.tensor("x", shape)
    c_in = shape[3]
    if op == "CONV_2D":
        k, o = (1, 4) if hybrid else (3, 5)
        w_shape = (o, k, k, c_in)
    else:
        k, o = 3, c_in
        w_shape = (1, k, k, c_in)
    axis = 0 if op == "CONV_2D" else 3
    if hybrid:
        w = g.rng.integers(-127, 128, w_shape).astype(np.int8)
    else:
        w = g.rng.standard_normal(w_shape).astype(np.float32) * 0.5
    wt = g.const("w", w)
    if hybrid:
        g.sg.tensors[wt].quantization = QuantizationParameters(
            scale=g.rng.uniform(0.002, 0.02, o).astype(np.float32),
            zero_point=np.zeros(o, np.int64), quantized_dimension=axis)
    b = g.const("b", g.rng.standard_normal(o).astype(np.float32)) if bias else -1
    options = dict(padding=0, stride_w=1, stride_h=1, fused_activation_function=conv_act)
    if op == "DEPTHWISE_CONV_2D":
        options["depth_multiplier"] = 1
    c = g.op(op, [x, wt, b], **options)
    y = g.op("MUL", [c, g.op("LOGISTIC", [c])])
    return g.save([x], [y, c] if extra_reader else [y])


CONV_SWISH = [("CONV_2D", False), ("DEPTHWISE_CONV_2D", False), ("CONV_2D", True),
              ("DEPTHWISE_CONV_2D", True)]


@pytest.mark.parametrize("op,hybrid", CONV_SWISH)
def test_a_convolution_and_its_swish_run_as_one_step(op, hybrid):
    shape = (1, 9, 8, 6)
    content = conv_swish_model(op, hybrid)
    x = _input(shape, 6)
    it, fused = _run(content, x)
    assert [it._main.sg.operators[oi].opcode.name for oi in it._main.run_ops] == [op]
    _, apart = _run(content, x, experimental_preserve_all_tensors=True)
    # halving is exact: the same values as the convolution then the fused swish
    np.testing.assert_allclose(fused[0], apart[0], rtol=2e-6, atol=2e-6 * np.abs(apart[0]).max())
    theirs = run_litert(content, [x], reference=False)[0]
    scale = np.abs(theirs).max()
    tol = 3e-2 if hybrid else 1e-5      # hybrid: LiteRT's integer kernels (test_ops' rules)
    assert np.abs(fused[0] - theirs).max() <= tol * scale


@pytest.mark.parametrize("hybrid", [False, True])
def test_a_depthwise_without_bias_and_its_swish_run_as_one_step(hybrid):
    shape = (1, 9, 8, 6)
    content = conv_swish_model("DEPTHWISE_CONV_2D", hybrid, bias=False)
    x = _input(shape, 9)
    it, fused = _run(content, x)
    assert len(it._main.run_ops) == 1
    _, apart = _run(content, x, experimental_preserve_all_tensors=True)
    np.testing.assert_allclose(fused[0], apart[0], rtol=2e-6, atol=2e-6 * np.abs(apart[0]).max())


@pytest.mark.parametrize("why,options", [
    ("the convolution has its own activation", dict(conv_act=1)),
    ("the convolution's output is a graph output", dict(extra_reader=True)),
])
def test_a_convolution_keeps_its_swish_apart(why, options):
    shape = (1, 9, 8, 6)
    content = conv_swish_model(**options)
    x = _input(shape, 7)
    it, ours = _run(content, x)
    assert len(it._main.run_ops) == 2, why      # the convolution, the fused swish
    for a, b in zip(ours, run_litert(content, [x], reference=False)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * np.abs(b).max())


@pytest.mark.parametrize("op,hybrid", CONV_SWISH)
def test_a_swish_after_a_convolution_makes_three_passes(op, hybrid, monkeypatch):
    """Timing-free guard: the swish of a convolution's output starts from the h = x / 2 the
    halved convolution wrote: tanh, multiply, add, one pass (x * 0.5) fewer than the fused
    swish after a convolution it cannot take in (whose output is a graph output)."""
    shape = (1, 9, 8, 6)
    x = _input(shape, 8)
    fused = _ufunc_calls(conv_swish_model(op, hybrid), x, monkeypatch)
    apart = _ufunc_calls(conv_swish_model(op, hybrid, extra_reader=True), x, monkeypatch)
    assert fused[-3:] == ["tanh", "multiply", "add"], fused
    assert apart[-4:] == ["multiply", "tanh", "multiply", "add"], apart
    assert fused == apart[:-4] + apart[-3:], (fused, apart)


# -- squeeze-excite's gate: LOGISTIC of [1, 1, 1, C], then a broadcast MUL -------------------

def gate_model(shape=(1, 5, 6, 7), order=("x", "s"), act=0, gate_is_output=False) -> bytes:
    g = Graph(9)
    x = g.tensor("x", shape)
    gate = g.tensor("g", (1, 1, 1, shape[-1]))
    s = g.op("LOGISTIC", [gate])
    named = {"x": x, "s": s}
    y = g.op("MUL", [named[order[0]], named[order[1]]], fused_activation_function=act)
    return g.save([x, gate], [y, s] if gate_is_output else [y])


@pytest.mark.parametrize("order", [("x", "s"), ("s", "x")])
@pytest.mark.parametrize("act", [0, RELU6])
@pytest.mark.parametrize("shape", [(1, 5, 6, 7), (2, 3, 4, 1), (1, 1, 9, 16)])
def test_a_channel_gate_is_one_step_with_the_ops_values(order, act, shape):
    content = gate_model(shape, order, act)
    feeds = [_input(shape, 3), _input((1, 1, 1, shape[-1]), 4)]
    it = Interpreter(model_content=content)
    fused = run_interpreter(it, feeds)
    assert [it._main.sg.operators[oi].opcode.name for oi in it._main.run_ops] == ["LOGISTIC"]
    apart = run_interpreter(Interpreter(model_content=content,
                                        experimental_preserve_all_tensors=True), feeds)
    np.testing.assert_array_equal(fused[0], apart[0])     # the same sigmoid, the same products
    np.testing.assert_allclose(fused[0], run_litert(content, feeds, reference=False)[0],
                               rtol=1e-5, atol=1e-5)


def test_a_channel_gate_seen_outside_is_not_fused():
    content = gate_model(gate_is_output=True)
    feeds = [_input((1, 5, 6, 7), 3), _input((1, 1, 1, 7), 4)]
    it = Interpreter(model_content=content)
    ours = run_interpreter(it, feeds)
    assert len(it._main.run_ops) == 2
    for a, b in zip(ours, run_litert(content, feeds, reference=False)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_a_channel_gate_multiplies_whole_pixel_rows(monkeypatch):
    """Timing-free guard: the gate's product is one multiply over [rows, W*C] against the
    gate tiled along a row (the MUL kernel broadcast a [C] gate: C values an inner loop)."""
    shape = (1, 5, 6, 7)
    content = gate_model(shape)
    feeds = [_input(shape, 3), _input((1, 1, 1, 7), 4)]
    shapes = []
    real = np.multiply

    class Spy:
        def __call__(self, *args, **kw):
            shapes.append(tuple(np.shape(a) for a in args[:2]))
            return real(*args, **kw)

        def __getattr__(self, attr):
            return getattr(real, attr)
    with monkeypatch.context() as m:
        m.setattr(np, "multiply", Spy())
        it = Interpreter(model_content=content)
        run_interpreter(it, feeds)
        shapes.clear()
        it.invoke()
    assert shapes == [((5, 42), (42,))], shapes
