"""Hybrid (dynamic-range) models on the OpenCL delegate: CONV_2D, DEPTHWISE_CONV_2D and
FULLY_CONNECTED with float32 activations and int8 weights run as float ops on weights
dequantized once at prepare ("hybrid": "dequantize", the default; quant.py), as GPU delegates
run them; "hybrid": "cpu" keeps them on the CPU kernels.

The oracle is LiteRT on the same hybrid file, both its kernels: by default XNNPACK's
dynamic-range ones, and its builtin hybrid kernels (BUILTIN_WITHOUT_DEFAULT_DELEGATES). Both
quantize every input to int8 on the fly and sum integers, each its own way; the delegate sums
the float inputs, so it differs from each by that input rounding. Measured on the model below
(five hybrid ops, three inputs), max abs difference over max |LiteRT output|: 5.3e-3 from
XNNPACK's, 9.6e-3 from the builtin kernels (fp32 and fp16 storage alike); the two LiteRT
kernels are 1.0e-2 apart, and edgelite's CPU hybrid kernels, which quantize as the builtin
ones, 1.4e-7 from those. The test allows 3e-2 from either. That the delegate computes the
float op exactly on the dequantized weights is checked tighter: against edgelite's numpy
interpreter on the model's float twin (the same graph with the weights' real values as float32
constants), at compare.TOLERANCE. On the corpus's DenseNet121 and EfficientNetB0
dynamic-range files (not in CI) `benchmarks/bench_hybrid.py --delegate --max-rel 3e-2` checks
the same against both LiteRT kernels.
"""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import Interpreter
from edgelite.interpreter.delegation import placement
from edgelite.schema import (Model, Operator, OperatorCode, QuantizationParameters, Subgraph,
                             Tensor, default_options, save)
from tests.delegates.compare import TOLERANCE, assert_matches
from tests.delegates.hybrid import float_twin, hybrid_ops
from tests.opmodel import invokes

# measured 5.3e-3 (XNNPACK) and 9.6e-3 (builtin kernels): LiteRT's int8 input rounding
LITERT_REL = 3e-2
HYBRID = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


def _weights(rng, shape, axis, per_channel):
    """int8 weights and their scales, sized so that activations stay near 1."""
    w = rng.integers(-127, 128, shape).astype(np.int8)
    # depthwise [1, KH, KW, C]: one filter of KH * KW per channel; else [N, ...]
    fan_in = shape[1] * shape[2] if axis == 3 else int(np.prod(shape[1:]))
    n = shape[axis] if per_channel else 1
    scale = rng.uniform(0.6, 1.4, n) * 1.7 / (127 * np.sqrt(fan_in))
    return w, scale.astype(np.float32)


def hybrid_model(seed: int = 0) -> bytes:
    """input [1, 16, 16, 8] -> CONV_2D 3x3 (per-channel int8, RELU) -> DEPTHWISE_CONV_2D 3x3
    (per-channel along dimension 3, RELU6) -> CONV_2D 1x1 (per-tensor) -> MEAN over H, W ->
    FULLY_CONNECTED 24 -> 10 (per-channel) -> FULLY_CONNECTED 10 -> 6 (per-tensor, no bias)."""
    rng = np.random.default_rng(seed)
    model, sg = Model(), Subgraph(name="main")

    def tensor(name, shape, dtype="float32", value=None, q=None):
        buffer = model.add_buffer(value) if value is not None else 0
        return sg.add_tensor(Tensor(name, tuple(shape), dtype, buffer=buffer, quantization=q))

    def weights(name, shape, axis, per_channel):
        w, scale = _weights(rng, shape, axis, per_channel)
        q = QuantizationParameters(scale=scale, zero_point=np.zeros(scale.size, np.int64),
                                   quantized_dimension=axis if per_channel else 0)
        return tensor(name, shape, "int8", w, q)

    def bias(name, n):
        return tensor(name, (n,), value=rng.normal(0, 0.3, n).astype(np.float32))

    def op(name, inputs, shape, **options):
        out = tensor(f"{name.lower()}_{len(sg.tensors)}", shape)
        sg.operators.append(Operator(OperatorCode(name, 0), inputs, [out],
                                     default_options(name, **options)))
        return out

    x = tensor("input", (1, 16, 16, 8))
    sg.inputs.append(x)
    conv = dict(padding=0, stride_w=1, stride_h=1, dilation_w_factor=1, dilation_h_factor=1)
    y = op("CONV_2D", [x, weights("conv1", (16, 3, 3, 8), 0, True), bias("b1", 16)],
           (1, 16, 16, 16), fused_activation_function=1, **conv)
    y = op("DEPTHWISE_CONV_2D", [y, weights("dw", (1, 3, 3, 16), 3, True), bias("b2", 16)],
           (1, 16, 16, 16), fused_activation_function=3, depth_multiplier=1, **conv)
    y = op("CONV_2D", [y, weights("conv2", (24, 1, 1, 16), 0, False), bias("b3", 24)],
           (1, 16, 16, 24), fused_activation_function=0, **conv)
    y = op("MEAN", [y, tensor("axes", (2,), "int32", np.array([1, 2], np.int32))], (1, 24),
           keep_dims=False)
    y = op("FULLY_CONNECTED", [y, weights("fc1", (10, 24), 0, True), bias("b4", 10)], (1, 10),
           fused_activation_function=1)
    y = op("FULLY_CONNECTED", [y, weights("fc2", (6, 10), 0, False), -1], (1, 6))
    sg.outputs.append(y)
    model.subgraphs.append(sg)
    return save(model)


def _inputs(n: int = 3) -> list:
    rng = np.random.default_rng(7)
    return [rng.normal(0, 1, (1, 16, 16, 8)).astype(np.float32) for _ in range(n)]


def _run(it, xs: list) -> list:
    return [outputs[0] for outputs in invokes(it, [[x] for x in xs])]


def _delegated(content: bytes, delegate):
    return Interpreter(model_content=content, experimental_delegates=[delegate])


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_hybrid_model_matches_litert(opencl, precision):
    """Every hybrid op in the delegate's one partition (counted: the timing-free guard), the
    outputs within LITERT_REL of both LiteRT kernels' on the same file."""
    litert = pytest.importorskip("ai_edge_litert.interpreter",
                                 reason="LiteRT (ai-edge-litert) is the oracle")
    content, xs = hybrid_model(), _inputs()
    it = _delegated(content, opencl(precision))
    ours = _run(it, xs)
    where = [p for p in placement(it) if p["where"] != "folded"]
    hybrid = [p for p in where if p["op"] in HYBRID]
    assert len(hybrid) == 5 and all(p["where"] == "OpenCL" for p in hybrid), where
    assert len({p["partition"] for p in where}) == 1 and all(p["where"] == "OpenCL"
                                                            for p in where), where
    ref = _run(litert.Interpreter(model_content=content, num_threads=1), xs)
    builtin = _run(litert.Interpreter(
        model_content=content, num_threads=1,
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES),
        xs)
    for a, b, c in zip(ours, ref, builtin):
        assert_matches([a], [b], LITERT_REL)
        assert_matches([a], [c], LITERT_REL)
    # not vacuous: LiteRT's outputs are not near zero, and they vary with the input
    assert float(np.abs(ref[0]).max()) > 0.1 and not np.allclose(ref[0], ref[1], atol=1e-2)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_hybrid_is_the_float_op_on_dequantized_weights(opencl, precision):
    """The delegate's hybrid model equals the numpy interpreter on its float twin (weights as
    their real values) at the float tolerance: nothing but the input rounding of LiteRT's
    hybrid kernels separates the two above."""
    xs = _inputs()
    content = hybrid_model()
    ours = _run(_delegated(content, opencl(precision)), xs)
    assert hybrid_ops(content) == 5 and hybrid_ops(float_twin(content)) == 0
    ref = _run(Interpreter(model_content=float_twin(content)), xs)
    for a, b in zip(ours, ref):
        assert_matches([a], [b], TOLERANCE[precision])


def test_hybrid_cpu_option_keeps_them_on_the_cpu(opencl):
    """"hybrid": "cpu": the hybrid ops run on the CPU kernels, the MEAN between them alone on
    the device (its float32 sum in another order: the float tolerance, not bit for bit)."""
    from edgelite.delegates import load_delegate
    opencl("fp32")  # skips without a device
    content, xs = hybrid_model(), _inputs(2)
    it = _delegated(content, load_delegate("opencl", {"hybrid": "cpu"}))
    ours = _run(it, xs)
    where = [p for p in placement(it) if p["op"] in HYBRID]
    assert len(where) == 5 and all(p["where"] == "CPU" and "int8" in p["reason"]
                                   for p in where), where
    ref = _run(Interpreter(model_content=content), xs)
    for a, b in zip(ours, ref):
        assert_matches([a], [b], TOLERANCE["fp32"])


def test_hybrid_option_is_checked():
    pytest.importorskip("pyopencl")
    from edgelite.delegates import DelegateError, load_delegate
    with pytest.raises(DelegateError, match="hybrid 'integer'"):
        load_delegate("opencl", {"hybrid": "integer"})


def test_hybrid_reasons():
    """What the hybrid path declines: weights that are not constants, scales that do not fit
    the weights' quantized dimension, non-float outputs."""
    from edgelite.delegates.opencl import quant
    from edgelite.interpreter.kernels.registry import Node, TensorInfo

    def t(i, shape, type_name="float32", data=None, scale=(), dim=0):
        q = QuantizationParameters(scale=np.array(scale, np.float32),
                                   zero_point=np.zeros(len(scale), np.int64),
                                   quantized_dimension=dim)
        return TensorInfo(i, f"t{i}", shape, np.dtype(type_name), type_name, q, data)

    x, y = t(0, (1, 4)), t(1, (1, 3))
    w = t(2, (3, 4), "int8", np.ones((3, 4), np.int8), (0.1, 0.2, 0.3))
    fc = Node("FULLY_CONNECTED", 0, [x, w], [y])
    assert quant.is_hybrid(fc) and quant.hybrid_reason(fc) is None
    assert not quant.is_hybrid(Node("ADD", 0, [x, w], [y]))
    assert "not a constant" in quant.hybrid_reason(
        Node("FULLY_CONNECTED", 0, [x, t(3, (3, 4), "int8", None, (0.1,))], [y]))
    assert "3 scales along dimension 1" in quant.hybrid_reason(
        Node("FULLY_CONNECTED", 0, [x, t(4, (3, 4), "int8", np.ones((3, 4), np.int8),
                                            (0.1, 0.2, 0.3), dim=1)], [y]))
    assert "without scales" in quant.hybrid_reason(
        Node("FULLY_CONNECTED", 0, [x, t(5, (3, 4), "int8", np.ones((3, 4), np.int8))], [y]))
    view = quant.Views().node(fc).inputs[1]
    assert view.type_name == "float32" and np.allclose(view.data[:, 0], [0.1, 0.2, 0.3])


@pytest.mark.parametrize("int8", ["dequantize", "integer"])
def test_hybrid_beside_the_int8_modes(opencl, int8):
    """The int8 modes leave hybrid nodes to the hybrid path: the same partition and outputs as
    the default delegate (an int8 mode's views would read int8 weights as q - zero point)."""
    from edgelite.delegates import load_delegate
    opencl("fp32")  # skips without a device
    content, xs = hybrid_model(), _inputs(2)
    it = _delegated(content, load_delegate("opencl", {"int8": int8}))
    ours = _run(it, xs)
    where = [p for p in placement(it) if p["where"] != "folded"]
    assert all(p["where"] == "OpenCL" for p in where), where
    ref = _run(Interpreter(model_content=float_twin(content)), xs)
    for a, b in zip(ours, ref):
        assert_matches([a], [b], TOLERANCE["fp32"])
