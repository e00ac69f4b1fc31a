"""Timing-free guards of issue 17's float-path savings: a small 1x1 convolution's bias added
over its whole output (equal shapes: no broadcast; MobileNetV2 float 48 -> 40 broadcasts an
invoke). Speed itself: side by side with LiteRT (issue 17's notes); accuracy against LiteRT in
test_ops."""
from __future__ import annotations

import numpy as np

from edgelite.interpreter import Interpreter
from tests.interpreter.numpy_calls import numpy_calls
from tests.numpy_dispatch import NUMPY2_DISPATCH
from tests.opmodel import In, op_model, run_litert


def _ready(content=None, path=None) -> Interpreter:
    it = Interpreter(model_content=content, model_path=path)
    it.allocate_tensors()
    rng = np.random.default_rng(0)
    for d in it.get_input_details():
        it.set_tensor(d["index"], rng.standard_normal(d["shape"]).astype(d["dtype"]) * 4)
    it.invoke()
    return it


def per_invoke(content, monkeypatch) -> dict:
    """numpy_calls of one invoke of a model built with the counters in place (kernels bind
    their ufuncs at prepare): two invokes' counts less one's, allocation and all."""
    def run(invokes):
        def go():
            it = _ready(content)
            for _ in range(invokes - 1):
                it.invoke()
        return numpy_calls(go, monkeypatch)
    _ready(content)     # uncounted first: modules imported lazily bind numpy's own ufuncs
    one, two = run(1), run(2)
    return {k: v - one.get(k, 0) for k, v in two.items()}


def test_logistic_extremes_against_litert():
    """LOGISTIC over the whole float32 range (subnormals, huge, +-inf, NaN): within 1.2e-7
    absolute of both LiteRT resolvers, and 1e-6 relative to XNNPACK's down its low tail
    (0.5 + 0.5 tanh(x / 2), half the cost, was 2% off at outputs near 1e-6 and 0 below
    x = -17.3: kept out for that)."""
    bits = np.arange(0, 0x7f800000, 4099, dtype=np.uint32).view(np.float32)
    x = np.concatenate([bits, -bits, np.float32([np.inf, -np.inf, np.nan, -0.0, 1e-45, 88.0,
                                                 -88.0, -104.0, 16.6, -9.0, -17.4])])
    # XNNPACK's sigmoid gives NaN past ~4e26 (ours 1, as before; at inf 1 as ours)
    x = x[(np.abs(x) < 1e26) | np.isinf(x) | np.isnan(x)]
    content = op_model("LOGISTIC", [In(x.shape)])
    it = Interpreter(model_content=content)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    ours = it.get_tensor(it.get_output_details()[0]["index"]).astype(np.float64)
    for reference in (True, False):
        (theirs,) = run_litert(content, [x], reference=reference)
        assert np.array_equal(np.isnan(ours), np.isnan(theirs))
        ok = ~np.isnan(theirs)
        d = np.abs(ours[ok] - theirs[ok])
        assert d.max() <= 1.2e-7, (reference, d.max())
        if not reference:   # (TFLite's reference kernel is exp(x) below -9: its own tail)
            tail = theirs[ok] >= 1e-30
            assert (d[tail] <= 1e-6 * theirs[ok][tail]).all()
    assert ours[x == np.inf][0] == 1.0 and ours[x == -np.inf][0] < 1e-38   # (e^-88 cap)


def _conv_1x1_model(pixels, channels, out_channels):
    rng = np.random.default_rng(1)
    w = rng.standard_normal((out_channels, 1, 1, channels)).astype(np.float32)
    b = rng.standard_normal(out_channels).astype(np.float32)
    return op_model("CONV_2D", [In((1, pixels, pixels, channels)), w, b],
                 options=dict(padding=1, stride_w=1, stride_h=1, fused_activation_function=0))


@NUMPY2_DISPATCH
def test_small_1x1_conv_adds_its_bias_without_broadcasting(monkeypatch):
    """A 1x1 convolution of a small output (14x14x64: 12544 elements) adds its constant bias
    tiled over the whole output: no broadcasting ufunc call (was one: [14, 896] + [896])."""
    counts = per_invoke(_conv_1x1_model(14, 32, 64), monkeypatch)
    assert counts["add"] == 1 and counts["broadcasts"] == 0, counts


def test_small_1x1_conv_matches_litert():
    content = _conv_1x1_model(14, 32, 64)
    it = _ready(content)
    x = it.get_tensor(it.get_input_details()[0]["index"])
    ours = it.get_tensor(it.get_output_details()[0]["index"])
    for reference in (True, False):
        (theirs,) = run_litert(content, [x], reference=reference)
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


def test_mobilenet_v2_float_broadcasts(models_dir, monkeypatch):
    """MobileNetV2 float: 48 broadcasting calls an invoke before, 40 after (its small 1x1
    convolutions; the depthwise ones and the large outputs still add a row-tiled bias)."""
    it = _ready(path=str(models_dir / "mobilenet_v2.tflite"))
    counts = numpy_calls(it.invoke, monkeypatch)
    assert counts["broadcasts"] <= 40, counts


@NUMPY2_DISPATCH
def test_small_1x1_conv_multiplies_through_dot(monkeypatch):
    """A squeeze-excite's 1x1 convolution (1x1152 by 1152x48, EfficientNet's) and a small one
    multiply through np.dot's C function (0.4-0.6 us less a call than np.matmul's ufunc);
    a large one (14x14x64 by 64x384) still through np.matmul (np.dot's is 2.4x slower there)."""
    for shape, out_channels, dot in (((1, 1152), 48, True), ((4, 32), 64, True),
                                     ((14, 64), 384, False)):
        counts = per_invoke(_conv_1x1_model(shape[0], shape[1], out_channels), monkeypatch)
        assert (counts.get("dot", 0), counts.get("matmul", 0)) == (dot, not dot), (shape, counts)


def test_small_1x1_conv_through_dot_matches_litert():
    content = _conv_1x1_model(1, 1152, 48)
    it = _ready(content)
    x = it.get_tensor(it.get_input_details()[0]["index"])
    ours = it.get_tensor(it.get_output_details()[0]["index"])
    (theirs,) = run_litert(content, [x], reference=False)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-4)


def test_digits_conv_pool_nan_rule_does_not_broadcast(models_dir, monkeypatch):
    """The fused CONV_2D + MAX_POOL_2D takes a NaN max to -inf (XNNPACK's pool) with one fmax
    a step against a -inf array of the pooled shape: against a 0-d -inf it broadcast (0.78 vs
    0.35 us on the digits CNN's 1352 pooled values, twice an invoke)."""
    shapes, fmax = [], np.fmax

    def spy(*args, **kwargs):
        shapes.append(tuple(np.shape(a) for a in args[:2]))
        return fmax(*args, **kwargs)
    monkeypatch.setattr(np, "fmax", spy)    # the fusion binds np.fmax at prepare
    it = _ready(path=str(models_dir / "digits_cnn.tflite"))
    shapes.clear()
    it.invoke()
    assert len(shapes) == 2 and all(a == b for a, b in shapes), shapes
