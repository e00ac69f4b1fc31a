"""DenseNet's dynamic-range layer (MUL by per-channel constants + RELU, hybrid 1x1 CONV_2D +
RELU, hybrid 3x3 CONV_2D) fused into one step (interpreter/fusion_hybrid.py, issue 17, goal
6): bit for bit the values of the ops one by one, near LiteRT's; the MUL's product and both
clamps done inside the convolutions' quantization, each of which then reads its input's
greatest value only (a clamp at 0 below leaves the least one unneeded). Timing-free guards:
steps run and reductions per invoke."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import Interpreter
from edgelite.interpreter.kernels import hybrid, hybrid_conv
from edgelite.schema import QuantizationParameters, Tensor
from tests.interpreter.test_fusion import RELU6, Graph
from tests.opmodel import run_interpreter, run_litert

RELU = 1


def _int8_conv_weights(g: Graph, name: str, shape) -> int:
    """An int8 weights tensor [O, kh, kw, C] with distinct per-channel scales (the hybrid
    CONV_2D's asymmetric per-channel path, as DenseNet's)."""
    q = g.rng.integers(-127, 128, shape).astype(np.int8)
    scales = g.rng.uniform(0.002, 0.02, shape[0]).astype(np.float32)
    return g.sg.add_tensor(Tensor(name, tuple(shape), "int8", buffer=g.model.add_buffer(q),
                                  quantization=QuantizationParameters(
                                      scale=scales, zero_point=np.zeros(shape[0], np.int64),
                                      quantized_dimension=0)))


def dense_layer_model(shape=(1, 9, 8, 12), width=16, growth=6, mul_act=RELU, conv_act=RELU,
                      mul=True, concat=True) -> bytes:
    """x -> [MUL(x, s) + mul_act] -> hybrid 1x1 CONV_2D (+ conv_act) -> hybrid 3x3 SAME
    CONV_2D -> [CONCATENATION(x, that)]."""
    g = Graph(5)
    c = shape[3]
    x = g.tensor("x", shape)
    t = x
    if mul:
        s = g.rng.uniform(-0.5, 1.5, (1, 1, 1, c)).astype(np.float32)
        t = g.op("MUL", [x, g.const("s", s)], fused_activation_function=mul_act)
    conv = dict(stride_w=1, stride_h=1, padding=0, dilation_w_factor=1, dilation_h_factor=1)
    y = g.op("CONV_2D", [t, _int8_conv_weights(g, "w1", (width, 1, 1, c)),
                         g.const("b1", g.rng.normal(0, 0.3, width).astype(np.float32))],
             fused_activation_function=conv_act, **conv)
    z = g.op("CONV_2D", [y, _int8_conv_weights(g, "w3", (growth, 3, 3, width)),
                         g.const("b3", g.rng.normal(0, 0.3, growth).astype(np.float32))],
             fused_activation_function=0, **conv)
    out = g.op("CONCATENATION", [x, z], axis=3, fused_activation_function=0) if concat else z
    return g.save([x], [out])


def _input(shape, seed=0, nan=False) -> np.ndarray:
    x = np.random.default_rng(seed).normal(0.3, 2.0, shape).astype(np.float32)
    if nan:
        x.reshape(-1)[5] = np.nan
    return x


def _ops(it) -> list:
    return [it._main.sg.operators[oi].opcode.name for oi in it._main.run_ops]


CHAINS = [dict(), dict(mul_act=RELU6, conv_act=RELU6), dict(mul_act=0),
          dict(conv_act=0), dict(mul=False), dict(shape=(1, 30, 29, 12))]   # 30x29: shifted


@pytest.mark.parametrize("settings", CHAINS, ids=lambda s: ",".join(
    f"{k}={v}" for k, v in s.items()) or "relu")
def test_the_fused_dense_layer_is_the_ops_bit_for_bit_and_near_litert(settings):
    content = dense_layer_model(**settings)
    shape = settings.get("shape", (1, 9, 8, 12))
    x = _input(shape)
    it = Interpreter(model_content=content)
    fused = run_interpreter(it, [x])[0]
    one_by_one = run_interpreter(Interpreter(model_content=content,
                                             experimental_preserve_all_tensors=True), [x])[0]
    if settings.get("mul", True):
        assert _ops(it) == ["MUL", "CONCATENATION"], _ops(it)
    else:   # the two convolutions in one step
        assert _ops(it) == ["CONV_2D", "CONCATENATION"], _ops(it)
    np.testing.assert_array_equal(fused, one_by_one)
    want = run_litert(content, [x], reference=True)[0]
    np.testing.assert_allclose(fused, want, rtol=0, atol=2e-5 * np.abs(want).max())


def test_a_fused_dense_layer_keeps_nan_as_the_ops_do():
    content = dense_layer_model()
    x = _input((1, 9, 8, 12), nan=True)
    it = Interpreter(model_content=content)
    fused = run_interpreter(it, [x])[0]
    assert _ops(it) == ["MUL", "CONCATENATION"], _ops(it)   # fused (else this compares nothing)
    one_by_one = run_interpreter(Interpreter(model_content=content,
                                             experimental_preserve_all_tensors=True), [x])[0]
    np.testing.assert_array_equal(fused, one_by_one)


def test_a_fused_dense_layer_reads_each_input_for_its_greatest_value_only(monkeypatch):
    """Per invoke: the fused step makes one max reduction per convolution and no min one
    (both inputs are clamped at 0 below), one step instead of three; the ops one by one make
    a min and a max reduction per convolution."""
    counts = {"min": 0, "max": 0}

    def counted(name, f):
        def reduce(*args, **kwargs):
            counts[name] += 1
            return f(*args, **kwargs)
        return reduce
    low, high = hybrid._min, hybrid._max
    for module in (hybrid, hybrid_conv):   # (dequantize_rows's, hybrid_conv's)
        monkeypatch.setattr(module, "_min", counted("min", low))
        monkeypatch.setattr(module, "_max", counted("max", high))
    content = dense_layer_model(concat=False)
    x = _input((1, 9, 8, 12))
    for preserve, want in ((False, {"min": 0, "max": 2}), (True, {"min": 2, "max": 2})):
        it = Interpreter(model_content=content, experimental_preserve_all_tensors=preserve)
        run_interpreter(it, [x])
        counts.update(min=0, max=0)
        it.invoke()
        assert counts == want, (preserve, counts)
        assert len(it._main.run_ops) == (3 if preserve else 1), _ops(it)
