"""Chains the plan fuses into one step (interpreter/fusion.py, issue 17): the fused step gives
what the ops give one by one (edgelite with every tensor kept, which fuses nothing) and what
LiteRT gives; a chain whose intermediate tensor is observable is not fused."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import Interpreter, OpResolverType
from edgelite.schema import Model, Subgraph, Tensor, save
from tests.interpreter.frames import INVOKE_FRAMES, python_calls
from tests.numpy_dispatch import NUMPY2_DISPATCH
from tests.opmodel import const_tensor, operator, run_interpreter, run_litert

RELU, RELU6 = 1, 3
SAME, VALID = 0, 1


def conv_pool_model(shape, out_channels, kernel, stride, padding, act, pool, pool_stride=None,
                    pool_padding=VALID, pool_act=0, conv_is_output=False, seed=0) -> bytes:
    """x -> CONV_2D (+ act) -> MAX_POOL_2D -> y; the convolution's output also a graph output
    when `conv_is_output`."""
    rng = np.random.default_rng(seed)
    model, sg = Model(), Subgraph(name="main")
    x = sg.add_tensor(Tensor("x", shape, "float32"))
    w = const_tensor(model, sg, "w", rng.standard_normal(
        (out_channels, kernel, kernel, shape[3])).astype(np.float32))
    b = const_tensor(model, sg, "b", rng.standard_normal(out_channels).astype(np.float32))
    c = sg.add_tensor(Tensor("conv", (), "float32"))
    y = sg.add_tensor(Tensor("pool", (), "float32"))
    sg.operators.append(operator("CONV_2D", [x, w, b], [c], padding=padding, stride_w=stride,
                                 stride_h=stride, fused_activation_function=act))
    ps = pool_stride or pool
    sg.operators.append(operator("MAX_POOL_2D", [c], [y], padding=pool_padding, stride_w=ps,
                                 stride_h=ps, filter_width=pool, filter_height=pool,
                                 fused_activation_function=pool_act))
    sg.inputs, sg.outputs = [x], [y, c] if conv_is_output else [y]
    model.subgraphs.append(sg)
    return save(model)


def edgelite(content, x, **kwargs):
    it = Interpreter(model_content=content, **kwargs)
    outs = run_interpreter(it, [x])
    return it, outs


CASES = [  # shape, out channels, kernel, stride, padding, act, pool
    ((1, 8, 8, 1), 16, 3, 1, SAME, RELU, 2),          # the digits CNN's first layer
    ((1, 4, 4, 16), 32, 3, 1, SAME, RELU, 2),         # ... and its second
    ((1, 7, 7, 3), 8, 3, 1, SAME, 0, 2),              # a row and a column the pool drops
    ((2, 9, 9, 2), 4, 3, 1, VALID, RELU6, 3),         # batch 2, a 3x3 pool, RELU6
    ((1, 10, 10, 2), 5, 3, 2, SAME, RELU, 2),         # a strided convolution
    ((1, 6, 6, 3), 4, 5, 1, SAME, RELU, 2),           # a 5x5 kernel
]


@pytest.mark.parametrize("shape,o,k,s,padding,act,pool", CASES)
def test_fused_conv_max_pool_matches_the_ops_one_by_one_and_litert(shape, o, k, s, padding,
                                                                    act, pool):
    content = conv_pool_model(shape, o, k, s, padding, act, pool)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    it, fused = edgelite(content, x)
    assert len(it._main.run_ops) == 1, "the convolution and its pool should run as one step"
    _, one_by_one = edgelite(content, x, experimental_preserve_all_tensors=True)
    np.testing.assert_allclose(fused[0], one_by_one[0], rtol=1e-6, atol=1e-6)
    theirs = run_litert(content, [x], reference=False)
    np.testing.assert_allclose(fused[0], theirs[0], rtol=1e-5, atol=1e-5)
    if act == RELU:   # NaN goes through the fused maximum as through the pool: as LiteRT's
        x[0, 0, 0, 0] = np.nan
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        got = it.get_tensor(it.get_output_details()[0]["index"])
        want = run_litert(content, [x], reference=False)[0]
        for test in (np.isnan, np.isposinf, np.isneginf):
            np.testing.assert_array_equal(test(got), test(want))


@pytest.mark.parametrize("why,kwargs,options", [
    ("the convolution's output is a graph output", {}, dict(conv_is_output=True)),
    ("the pool's windows overlap", {}, dict(pool_stride=1)),
    ("the pool has its own activation", {}, dict(pool_act=RELU)),
    ("every tensor is kept", dict(experimental_preserve_all_tensors=True), {}),
    ("BUILTIN_REF runs each op on its own",
     dict(experimental_op_resolver_type=OpResolverType.BUILTIN_REF), {}),
])
def test_an_observable_or_unfusable_chain_runs_op_by_op(why, kwargs, options):
    content = conv_pool_model((1, 8, 8, 1), 16, 3, 1, SAME, RELU, 2, **options)
    x = np.random.default_rng(2).standard_normal((1, 8, 8, 1)).astype(np.float32)
    it, ours = edgelite(content, x, **kwargs)
    assert len(it._main.run_ops) == 2, why
    theirs = run_litert(content, [x], reference=False)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


class Graph:
    """A model built op by op: float32 tensors, constants, operators with their options."""

    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.model, self.sg = Model(), Subgraph(name="main")

    def tensor(self, name, shape=()):
        return self.sg.add_tensor(Tensor(name, shape, "float32"))

    def const(self, name, value):
        return const_tensor(self.model, self.sg, name, value)

    def op(self, name, ins, **options):
        out = self.tensor(f"t{len(self.sg.operators)}")
        self.sg.operators.append(operator(name, ins, [out], **options))
        return out

    def save(self, inputs, outputs) -> bytes:
        self.sg.inputs, self.sg.outputs = inputs, outputs
        self.model.subgraphs.append(self.sg)
        return save(self.model)

    def layer_norm(self, x, depth, beta=False, gamma=True, act=0):
        """TensorFlow's lowering of Keras's LayerNormalization over the last axis of x, as the
        corpus's keyword-spotting head has it: MEAN, NEG, SQUARED_DIFFERENCE, MEAN, ADD eps,
        RSQRT, MUL gamma, MUL, MUL, ADD; with `beta`, x*s + (beta - mean*s) (MUL, SUB, ADD)
        instead of x*s + (-mean)*s. Returns (y, the mean)."""
        op = self.op
        axes = self.const("axes", np.array([-1], np.int32))
        eps = self.const("eps", np.array(1e-3, np.float32))
        m = op("MEAN", [x, axes], keep_dims=True)
        neg = None if beta else op("NEG", [m])
        sd = op("SQUARED_DIFFERENCE", [x, m])
        v = op("MEAN", [sd, axes], keep_dims=True)
        r = op("RSQRT", [op("ADD", [v, eps])])
        if gamma:
            r = op("MUL", [r, self.const("gamma", self.rng.uniform(0.5, 2, depth)
                                         .astype(np.float32))])
        if beta:
            b = self.const("beta", self.rng.standard_normal(depth).astype(np.float32))
            shift = op("SUB", [b, op("MUL", [m, r])])
        else:
            shift = op("MUL", [neg, r])
        return op("ADD", [op("MUL", [x, r]), shift], fused_activation_function=act), m

    def fully_connected(self, x, units, depth, **options):
        w = self.const("w", self.rng.standard_normal((units, depth)).astype(np.float32) + 3.0)
        return self.op("FULLY_CONNECTED", [x, w, -1], **options)


def layer_norm_model(shape, fc_in=None, beta=False, gamma=True, act=0, seed=0,
                     mean_is_output=False) -> bytes:
    """A layer norm of x (or of a FULLY_CONNECTED of an input of `fc_in` values, its weights'
    mean far from 0 over the units: centering them matters)."""
    g = Graph(seed)
    depth = shape[-1]
    if fc_in is None:
        x = inp = g.tensor("x", shape)
    else:
        inp = g.tensor("h", shape[:-1] + (fc_in,))
        x = g.fully_connected(inp, depth, fc_in, keep_num_dims=True)
    y, m = g.layer_norm(x, depth, beta, gamma, act)
    return g.save([inp], [y, m] if mean_is_output else [y])


LAYER_NORMS = [  # shape, fc_in, beta, gamma, act
    ((1, 32), None, False, True, RELU),    # the keyword-spotting head's
    ((1, 32), 96, False, True, RELU),      # ... with the FULLY_CONNECTED before it
    ((1, 16), None, True, True, 0),        # Keras with beta
    ((3, 24), None, True, True, RELU6),    # rows
    ((2, 5, 8), 12, True, False, 0),       # rows, an FC, no gamma
]


@pytest.mark.parametrize("shape,fc_in,beta,gamma,act", LAYER_NORMS)
def test_fused_layer_norm_matches_the_ops_one_by_one_and_litert(shape, fc_in, beta, gamma, act):
    content = layer_norm_model(shape, fc_in, beta, gamma, act)
    x = np.random.default_rng(3).standard_normal(
        shape if fc_in is None else shape[:-1] + (fc_in,)).astype(np.float32) * 2 + 0.5
    it, fused = edgelite(content, x)
    assert len(it._main.run_ops) == 1, "the layer norm (and its FC) should run as one step"
    _, one_by_one = edgelite(content, x, experimental_preserve_all_tensors=True)
    np.testing.assert_allclose(fused[0], one_by_one[0], rtol=2e-5, atol=2e-5)
    theirs = run_litert(content, [x], reference=False)
    np.testing.assert_allclose(fused[0], theirs[0], rtol=2e-5, atol=2e-5)


def test_a_constant_row_normalizes_as_the_ops_do():
    """Variance 0: with eps the scale is finite (gamma / sqrt(eps)), the row becomes beta
    (the ops one by one lose ~1e-5 to x*s - mean*s, the fused step computes x - mean: 0)."""
    content = layer_norm_model((1, 16), beta=True)
    x = np.full((1, 16), 3.0, np.float32)
    _, fused = edgelite(content, x)
    _, one_by_one = edgelite(content, x, experimental_preserve_all_tensors=True)
    np.testing.assert_allclose(fused[0], one_by_one[0], atol=5e-5)
    beta = np.random.default_rng(0)   # layer_norm_model's draws: w (none here), gamma, beta
    beta.uniform(0.5, 2, 16)
    np.testing.assert_array_equal(fused[0], beta.standard_normal(16).astype(np.float32)[None])


def test_a_layer_norm_whose_mean_is_seen_runs_op_by_op():
    content = layer_norm_model((1, 32), mean_is_output=True)
    x = np.random.default_rng(4).standard_normal((1, 32)).astype(np.float32)
    it, ours = edgelite(content, x)
    assert len(it._main.run_ops) == 10
    theirs = run_litert(content, [x], reference=False)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


# -- timing-free guards of the tiny models' steps (issue 17) ---------------------------------

def kws_head_model() -> bytes:
    """The shape of the corpus's keyword-spotting head (tools/tflite_corpus.py keras --only
    kws_head, TensorFlow's converter; openWakeWord's): 16x96 embeddings -> RESHAPE -> FC 32 ->
    LayerNorm + RELU -> FC 32 -> LayerNorm + RELU -> FC 1 -> LOGISTIC, 25 ops."""
    g = Graph(7)
    x = g.tensor("x", (1, 16, 96))
    h = g.op("RESHAPE", [x, g.const("shape", np.array([1, 1536], np.int32))])
    for depth in (1536, 32):
        h, _ = g.layer_norm(g.fully_connected(h, 32, depth), 32, act=RELU)
    w = g.const("w", g.rng.standard_normal((1, 32)).astype(np.float32) * 0.3)
    return g.save([x], [g.op("LOGISTIC", [g.op("FULLY_CONNECTED", [h, w, -1])])])


def test_tiny_models_run_few_steps(models_dir):
    """The digits CNN: 2 steps, convolution + pool, and convolution + pool -> FC -> FC (the
    FCs' inputs written into their [x..., 1] by the step before: no bias pass); was 6 steps
    and 11 Python calls an invoke. The keyword-spotting head: 2 steps of FC + layer norm, FC,
    LOGISTIC; was 24 steps, 33 calls. Frames: one per kernel (LOGISTIC two), the invoke's."""
    for it, steps in _tiny_models(models_dir):
        ops = [it._main.sg.operators[oi].opcode.name for oi in it._main.run_ops]
        assert len(ops) == steps, ops
        assert it._main.run_steps.bound == len(ops)


@NUMPY2_DISPATCH
def test_tiny_models_run_few_python_frames(models_dir):
    for it, _ in _tiny_models(models_dir):
        assert python_calls(it.invoke) <= INVOKE_FRAMES + 5


def _tiny_models(models_dir) -> list:
    """[(interpreter, steps it should run)]: the digits CNN and the keyword-spotting head."""
    digits = Interpreter(model_path=str(models_dir / "digits_cnn.tflite"))
    kws = Interpreter(model_content=kws_head_model())
    for it in (digits, kws):
        run_interpreter(it, [np.random.default_rng(0).standard_normal(
            it.get_input_details()[0]["shape"]).astype(np.float32)])
    return [(digits, 2), (kws, 4)]


def test_the_keyword_spotting_head_matches_litert():
    content = kws_head_model()
    x = np.random.default_rng(8).standard_normal((1, 16, 96)).astype(np.float32)
    it, ours = edgelite(content, x)
    assert len(it._main.run_ops) == 4
    assert 0.01 < ours[0].item() < 0.99, "a score the sigmoid does not saturate"
    np.testing.assert_allclose(ours[0], run_litert(content, [x], reference=False)[0],
                               rtol=1e-5, atol=1e-6)


def producer_fc_model(bias=True, act=RELU, second_reader=False, reshape=True) -> bytes:
    """x[1, 4, 6] -> ADD c -> (RESHAPE [1, 24]) -> FULLY_CONNECTED 5 (+ bias, act) -> y; with
    `second_reader` the ADD's output is a graph output too."""
    g = Graph(9)
    x = g.tensor("x", (1, 4, 6))
    a = g.op("ADD", [x, g.const("c", g.rng.standard_normal((1, 4, 6)).astype(np.float32))])
    h = g.op("RESHAPE", [a, g.const("shape", np.array([1, 24], np.int32))]) if reshape else a
    w = g.const("w", g.rng.standard_normal((5, 24)).astype(np.float32))
    b = g.const("b", g.rng.standard_normal(5).astype(np.float32)) if bias else -1
    y = g.op("FULLY_CONNECTED", [h, w, b], fused_activation_function=act)
    return g.save([x], [y, a] if second_reader else [y])


@pytest.mark.parametrize("act", [0, RELU, RELU6])
@pytest.mark.parametrize("reshape", [True, False])
def test_a_fully_connected_takes_its_producer_in(act, reshape):
    """The ADD writes into the head of the FC's [x..., 1], whose weights carry the bias."""
    content = producer_fc_model(act=act, reshape=reshape)
    x = np.random.default_rng(10).standard_normal((1, 4, 6)).astype(np.float32)
    it, fused = edgelite(content, x)
    assert len(it._main.run_ops) == 1
    _, one_by_one = edgelite(content, x, experimental_preserve_all_tensors=True)
    np.testing.assert_allclose(fused[0], one_by_one[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(fused[0], run_litert(content, [x], reference=False)[0],
                               rtol=1e-5, atol=1e-5)
    x2 = x + 1   # a second invoke reads the new input (nothing of the first is kept)
    it.set_tensor(it.get_input_details()[0]["index"], x2)
    it.invoke()
    np.testing.assert_allclose(it.get_tensor(it.get_output_details()[0]["index"]),
                               edgelite(content, x2, experimental_preserve_all_tensors=True)[1][0],
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("why,options", [
    ("no bias: nothing to fold", dict(bias=False)),
    ("the producer's output is a graph output", dict(second_reader=True)),
])
def test_a_fully_connected_keeps_its_producer_apart(why, options):
    content = producer_fc_model(**options)
    x = np.random.default_rng(11).standard_normal((1, 4, 6)).astype(np.float32)
    it, ours = edgelite(content, x)
    assert len(it._main.run_ops) == 2, why
    for a, b in zip(ours, run_litert(content, [x], reference=False)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
