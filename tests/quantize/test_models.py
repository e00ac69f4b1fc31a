"""Quantizing the shared real models: the digits CNN (accuracy, size, bits against LiteRT, the
same file as TensorFlow's converter makes) and MobileNetV2 (bits against LiteRT)."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.converter.quantize import quantize
from edgelite.schema import load, save

from .graphs import run_edgelite, run_litert

pytest.importorskip("ai_edge_litert", reason="LiteRT is the oracle")


@pytest.fixture(scope="module")
def digits(models_dir):
    d = np.load(models_dir / "digits.npz")
    nhwc = lambda a: a.transpose(0, 2, 3, 1).astype(np.float32)  # noqa: E731
    path = models_dir / "digits_cnn.tflite"
    return {"model": load(path), "bytes": path.stat().st_size,
            "calib": [[x[None]] for x in nhwc(d["x_calib"])], "x": nhwc(d["x_test"]),
            "y": d["y_test"], "tf_int8": load(models_dir / "digits_cnn_int8.tflite")}


def predict(content: bytes, images: np.ndarray, litert: bool = False) -> np.ndarray:
    """The output for each image (inputs quantized when the model takes integers)."""
    if litert:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
        it = Interpreter(model_content=content,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    else:
        from edgelite.interpreter import Interpreter, OpResolverType
        it = Interpreter(model_content=content,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    i, o = it.get_input_details()[0], it.get_output_details()[0]
    out = []
    for x in images:
        v = x[None]
        if i["dtype"] != np.float32:
            scale, zp = i["quantization"]
            info = np.iinfo(i["dtype"])
            v = np.clip(np.round(v / scale) + zp, info.min, info.max).astype(i["dtype"])
        it.set_tensor(i["index"], v)
        it.invoke()
        out.append(it.get_tensor(o["index"])[0])
    return np.array(out)


@pytest.fixture(scope="module")
def digits_float(digits):
    return predict(save(digits["model"]), digits["x"])


def accuracy(outputs, labels) -> float:
    return float(np.mean(outputs.argmax(axis=1) == labels))


def test_digits_int8_accuracy_size_and_bits(digits, digits_float):
    q = quantize(digits["model"], "int8", digits["calib"], progress=False)
    content = save(q.model)
    ours = predict(content, digits["x"])
    assert accuracy(ours, digits["y"]) >= accuracy(digits_float, digits["y"]) - 0.005
    np.testing.assert_array_equal(predict(content, digits["x"], litert=True), ours)
    # Float inputs and outputs cost a QUANTIZE and a DEQUANTIZE; with equal vectors written
    # once (per-channel zero points) the file is 0.33 of the float one.
    assert len(content) <= 0.35 * digits["bytes"]


def test_digits_int8_io_is_what_tensorflow_makes(digits):
    """Same ops, tensors, weights, biases, zero points; scales within float32 rounding (the
    calibrated extremes come from different float kernels)."""
    m = quantize(digits["model"], "int8", digits["calib"], progress=False,
                 inference_input_type="int8", inference_output_type="int8").model
    tf = digits["tf_int8"]
    assert len(save(m)) <= 0.35 * digits["bytes"]
    sg, tsg = m.subgraphs[0], tf.subgraphs[0]
    assert [op.op for op in sg.operators] == [op.op for op in tsg.operators]
    ours = {t.name: (i, t) for i, t in enumerate(sg.tensors)}
    for i, t in enumerate(tsg.tensors):
        j, mine = ours[t.name]
        assert mine.dtype == t.dtype and mine.shape == t.shape, t.name
        if t.quantization is not None and t.quantization.scale.size:
            np.testing.assert_allclose(mine.quantization.scale, t.quantization.scale, rtol=3e-7)
            np.testing.assert_array_equal(mine.quantization.zero_point, t.quantization.zero_point)
            assert mine.quantization.quantized_dimension == t.quantization.quantized_dimension
        if i not in tsg.inputs and tf.constant(tsg, i) is not None:
            np.testing.assert_array_equal(m.constant(sg, j), tf.constant(tsg, i), t.name)


def test_digits_float16(digits, digits_float):
    q = quantize(digits["model"], "float16")
    content = save(q.model)
    assert len(content) <= 0.55 * digits["bytes"]
    ours = predict(content, digits["x"])
    np.testing.assert_array_equal(ours.argmax(axis=1), digits_float.argmax(axis=1))
    np.testing.assert_allclose(predict(content, digits["x"], litert=True), ours, rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("min_elements", [0, 1024])
def test_digits_dynamic_range(digits, digits_float, min_elements):
    q = quantize(digits["model"], "dynamic", min_weight_elements=min_elements)
    content = save(q.model)
    assert sum(q.report.quantized_ops.values()) == (4 if min_elements == 0 else 2)
    ours = predict(content, digits["x"])
    assert accuracy(ours, digits["y"]) >= accuracy(digits_float, digits["y"]) - 0.005
    theirs = predict(content, digits["x"], litert=True)
    if min_elements == 0:   # hybrid kernels only: LiteRT's bits
        np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


def test_digits_int16x8(digits, digits_float):
    q = quantize(digits["model"], "int16x8", digits["calib"], progress=False)
    content = save(q.model)
    assert not q.report.float_ops, q.report.lines()
    ours = predict(content, digits["x"])
    np.testing.assert_array_equal(predict(content, digits["x"], litert=True), ours)
    assert np.abs(ours - digits_float).max() < 0.01 * np.abs(digits_float).max()


@pytest.fixture(scope="module")
def mobilenet(models_dir):
    return load(models_dir / "mobilenet_v2.tflite")


def random_images(n: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [[rng.uniform(-1, 1, (1, 224, 224, 3)).astype(np.float32)] for _ in range(n)]


def test_mobilenet_int8_every_tensor_matches_litert(mobilenet):
    q = quantize(mobilenet, "int8", random_images(6, 0), progress=False)
    assert not q.report.float_ops
    content = save(q.model)
    for feeds in random_images(2, 1):
        ours, theirs = run_edgelite(content, feeds, True), run_litert(content, feeds, True)
        compared = 0
        for key, value in theirs.items():
            if key in ours:
                np.testing.assert_array_equal(ours[key], value, err_msg=str(key))
                compared += 1
        assert compared > 150


def test_mobilenet_dynamic_range_matches_litert(mobilenet):
    q = quantize(mobilenet, "dynamic")
    assert q.report.quantized_ops == {"CONV_2D": 33, "DEPTHWISE_CONV_2D": 15,
                                      "FULLY_CONNECTED": 1}
    # Every weight hybrid: bits equal up to MEAN, whose float sum LiteRT orders differently
    # (the hybrid FULLY_CONNECTED after it quantizes a last-place difference on the fly).
    q = quantize(mobilenet, "dynamic", min_weight_elements=0)
    content = save(q.model)
    sg = q.model.subgraphs[0]
    mean = next(i for i, op in enumerate(sg.operators) if op.op == "MEAN")
    after = {sg.tensors[t].name for op in sg.operators[mean:] for t in op.outputs}
    feeds = random_images(1, 2)[0]
    ours, theirs = run_edgelite(content, feeds, True), run_litert(content, feeds, True)
    for key, value in theirs.items():
        if key not in ours or value.dtype != np.float32:
            continue
        if key[0] in after:
            np.testing.assert_allclose(ours[key], value, rtol=0,
                                       atol=2e-3 * np.abs(value).max(), err_msg=str(key))
        else:
            np.testing.assert_array_equal(ours[key], value, err_msg=str(key))


def test_digits_dynamic_int4(digits, digits_float):
    """int4 weights (two a byte) for FULLY_CONNECTED and CONV_2D: the file about a third of the
    int8 one's weight bytes, accuracy within 2 points of float, and LiteRT's reference kernels
    give the same bits."""
    q8 = quantize(digits["model"], "dynamic", min_weight_elements=0)
    q4 = quantize(digits["model"], "dynamic-int4", min_weight_elements=0)
    assert q4.report.quantized_ops == {"CONV_2D": 2, "FULLY_CONNECTED": 2}
    assert {t.dtype for t in q4.model.subgraphs[0].tensors} >= {"int4"}
    content = save(q4.model)
    assert len(content) < 0.7 * len(save(q8.model))
    ours = predict(content, digits["x"])
    assert accuracy(ours, digits["y"]) >= accuracy(digits_float, digits["y"]) - 0.02
    np.testing.assert_array_equal(ours, predict(content, digits["x"], litert=True))

