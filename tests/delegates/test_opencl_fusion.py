"""The OpenCL delegate's fusions (delegates/opencl/fuse.py) change launches, never results:
zero PADs read in place by the convolution after them, residual ADDs (and a channel PAD of
their operand, and the RELU after them) in the producing conv's epilogue, and no fusion where
the operand is written after the conv or the conv's output is needed elsewhere."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import Interpreter
from edgelite.interpreter.delegation import placement
from tests.delegates.compare import TOLERANCE, assert_matches
from tests.delegates.graphs import Graph

RNG = np.random.default_rng(7)


def _w(*shape):
    return RNG.standard_normal(shape).astype(np.float32) * 0.3


def _conv(g, x, cin, cout, k=1, **options):
    options = {"padding": 0, "stride_h": 1, "stride_w": 1, **options}
    return g.op("CONV_2D", [x, g.const(_w(cout, k, k, cin)), g.const(_w(cout))], **options)


def _depthwise(g, x, c, k=3, **options):
    options = {"padding": 0, "stride_h": 1, "stride_w": 1, "depth_multiplier": 1, **options}
    return g.op("DEPTHWISE_CONV_2D", [x, g.const(_w(1, k, k, c)), g.const(_w(c))], **options)


def _pad(g, x, pads):
    return g.op("PAD", [x, g.const(np.int32(pads))])


def _launches(it) -> int:
    return sum(getattr(run, "launches", 0) for run, _ in it._runtime.plans[0].steps)


def _check(content, shape, delegate, launches):
    x = RNG.standard_normal(shape).astype(np.float32)
    outs = []
    for delegates in ([], [delegate]):
        it = Interpreter(model_content=content, experimental_delegates=delegates)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        outs.append([it.get_tensor(o["index"]).copy() for o in it.get_output_details()])
    assert all(p["where"] == delegate.name for p in placement(it) if p["where"] != "folded")
    assert_matches(outs[1], outs[0], TOLERANCE["fp32"])
    assert _launches(it) == launches


def test_spatial_pads_are_read_in_place(opencl):
    """PAD -> DEPTHWISE (VALID, stride 2) and PAD -> CONV_2D 3x3: two launches, not four."""
    g = Graph()
    x = g.input((1, 9, 11, 20))
    y = _depthwise(g, _pad(g, x, [[0, 0], [1, 2], [0, 1], [0, 0]]), 20, padding=1,
                   stride_h=2, stride_w=2)
    g.output(_conv(g, _pad(g, y, [[0, 0], [2, 1], [1, 1], [0, 0]]), 20, 24, k=3, padding=1))
    _check(g.save(), (1, 9, 11, 20), opencl("fp32"), launches=2)


def test_residual_add_channel_pad_and_relu_fold_into_the_conv(opencl):
    """BlazeFace's block: ADD(conv(depthwise(x)), PAD(x) with 4 more channels) -> RELU, and
    MobileNetV2's: ADD(conv(y), y): one launch per 1x1 convolution (on a CPU device the
    depthwise joins the 1x1 convolution after it)."""
    g = Graph()
    x = g.input((1, 8, 10, 24))
    y = _conv(g, _depthwise(g, x, 24), 24, 28)
    y = g.op("RELU", [g.op("ADD", [y, _pad(g, x, [[0, 0], [0, 0], [0, 0], [0, 4]])])])
    z = g.op("ADD", [y, _conv(g, y, 28, 28)], fused_activation_function=3)
    g.output(z)
    delegate = opencl("fp32")
    _check(g.save(), (1, 8, 10, 24), delegate, launches=2 if delegate.dev.is_cpu else 3)


def test_no_fusion_when_the_operand_comes_later_or_the_conv_output_is_read(opencl):
    g = Graph()
    x = g.input((1, 6, 6, 16))
    a = _conv(g, x, 16, 16)
    b = g.op("TANH", [x])                  # written after the conv: the ADD stays
    g.output(g.op("ADD", [a, b]))
    c = _conv(g, x, 16, 16)
    g.output(g.op("ADD", [c, x]))
    g.output(c)                            # the conv's own output is needed: the ADD stays
    _check(g.save(), (1, 6, 6, 16), opencl("fp32"), launches=5)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("c, n, k, stride, shape", [(20, 24, 3, 1, (1, 9, 13)),
                                                   (42, 96, 3, 2, (2, 11, 12)),
                                                   (96, 16, 5, 1, (1, 7, 7)),
                                                   (144, 40, 5, 2, (1, 14, 9))])
def test_depthwise_then_pointwise(c, n, k, stride, shape, precision, opencl):
    """DEPTHWISE_CONV_2D (RELU6) -> 1x1 CONV_2D (+ residual when shapes allow), any channel
    count, kernel, stride, partial row tiles, batches."""
    delegate = opencl(precision)
    g = Graph()
    x = g.input(shape + (c,))
    y = _depthwise(g, x, c, k=k, stride_h=stride, stride_w=stride, fused_activation_function=3)
    y = _conv(g, y, c, n)
    if stride == 1 and n == c:
        y = g.op("ADD", [y, x])
    g.output(y)
    content = g.save()
    xv = RNG.standard_normal(shape + (c,)).astype(np.float32)
    outs = []
    for delegates in ([], [delegate]):
        it = Interpreter(model_content=content, experimental_delegates=delegates)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], xv)
        it.invoke()
        outs.append([it.get_tensor(o["index"]).copy() for o in it.get_output_details()])
    assert_matches(outs[1], outs[0], TOLERANCE[precision])
    assert _launches(it) == (1 if delegate.dev.is_cpu else 2)


@pytest.mark.parametrize("channels", [3, 20, 28, 42])
def test_channel_counts_off_the_vector_width(channels, opencl):
    """Depthwise and pools read a last partial vector of channels past the tensor's end."""
    g = Graph()
    x = g.input((1, 7, 5, channels))
    y = _depthwise(g, x, channels, k=5)
    y = g.op("MAX_POOL_2D", [y], padding=0, stride_h=2, stride_w=2, filter_height=2,
             filter_width=2)
    g.output(_conv(g, y, channels, channels, k=3, stride_h=2, stride_w=2))
    _check(g.save(), (1, 7, 5, channels), opencl("fp32"), launches=3)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("c, e, n, stride, padding, act, shape", [
    (16, 96, 24, 2, 0, 3, (1, 13, 12)),   # stride 2, odd height: SAME pads top 1
    (24, 144, 24, 1, 0, 3, (2, 9, 11)),   # the residual ADD, 2 images, a partial strip
    (20, 40, 28, 1, 1, 1, (1, 6, 7)),     # VALID, RELU, E not a multiple of 32 (NVE 2)
    (12, 16, 12, 2, 1, 0, (1, 9, 10)),    # VALID stride 2, no activation, E 16 (NVE 1)
    (24, 72, 32, 2, 0, 3, (1, 4, 3)),     # fewer columns than a strip, 1 output column
])
def test_inverted_residual_block_in_one_launch(c, e, n, stride, padding, act, shape, precision,
                                               opencl, monkeypatch):
    """1x1 CONV_2D (expand) -> DEPTHWISE_CONV_2D 3x3 -> 1x1 CONV_2D (+ residual) as one launch
    on a CPU device (fuse.py's `expand`, here for any size), against the numpy interpreter."""
    from edgelite.delegates.opencl import fuse
    monkeypatch.setattr(fuse, "EXPAND_MIN", 0)
    delegate = opencl(precision)
    g = Graph()
    x = g.input(shape + (c,))
    y = _conv(g, x, c, e, fused_activation_function=act)
    y = _depthwise(g, y, e, stride_h=stride, stride_w=stride, padding=padding,
                   fused_activation_function=act)
    y = _conv(g, y, e, n)
    residual = stride == 1 and n == c and padding == 0
    if residual:
        y = g.op("ADD", [y, x])
    g.output(y)
    content = g.save()
    xv = RNG.standard_normal(shape + (c,)).astype(np.float32)
    outs = []
    for delegates in ([], [delegate]):
        it = Interpreter(model_content=content, experimental_delegates=delegates)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], xv)
        it.invoke()
        outs.append([it.get_tensor(o["index"]).copy() for o in it.get_output_details()])
    assert all(p["where"] == delegate.name for p in placement(it) if p["where"] != "folded")
    assert_matches(outs[1], outs[0], TOLERANCE[precision])
    fused = delegate.dev.is_cpu
    assert _launches(it) == (1 if fused else 2 if delegate.dev.is_cpu else 3)
    kernels = [k for run, _ in it._runtime.plans[0].steps for _, k, _ in
               getattr(run, "labels", ())]
    assert (kernels == ["expand_depthwise_then_conv_2d"]) == fused, kernels


def test_small_blocks_stay_two_launches(opencl):
    """Below fuse.EXPAND_MIN (measured: the halo's recomputed expansion outweighs the tensor
    saved) the expand stays its own launch."""
    delegate = opencl("fp32")
    g = Graph()
    x = g.input((1, 14, 14, 64))
    y = _conv(g, x, 64, 384, fused_activation_function=3)
    y = _depthwise(g, y, 384, fused_activation_function=3)
    g.output(g.op("ADD", [_conv(g, y, 384, 64), x]))
    _check(g.save(), (1, 14, 14, 64), delegate, launches=2 if delegate.dev.is_cpu else 3)
