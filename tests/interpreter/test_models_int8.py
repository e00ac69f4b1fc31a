"""Whole int8 models, bit-exact to LiteRT's reference kernels (OpResolverType.BUILTIN_REF).

LiteRT's default path (XNNPACK, optimized kernels) rounds differently and can differ from the
reference by an LSB; so does edgelite's default resolver (its requantization keeps float
rounding where that is faster). Under BUILTIN_REF edgelite follows the reference exactly. The
shared models' reference outputs (refs/) were made with BUILTIN_REF too.
"""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import Interpreter, OpResolverType
from edgelite.interpreter.kernels import KERNELS

litert = pytest.importorskip("ai_edge_litert.interpreter",
                             reason="LiteRT (ai-edge-litert) is the oracle: "
                                    "pip install -e '.[dev]'")


def _ours(path, **kwargs):
    # One BLAS thread: OpenBLAS threads spin, and on a loaded machine two of them are slower.
    # BUILTIN_REF: the arithmetic of TFLite's reference kernels, bit for bit (edgelite's default
    # resolver may round in float, at most 1 off per kernel: see test_default_resolver_*).
    kwargs.setdefault("experimental_op_resolver_type", OpResolverType.BUILTIN_REF)
    it = Interpreter(model_path=str(path), num_threads=1, **kwargs)
    it.allocate_tensors()
    return it


def _reference(path, **kwargs):
    it = litert.Interpreter(model_path=str(path),
                            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF,
                            **kwargs)
    it.allocate_tensors()
    return it


def _invoke(it, x) -> np.ndarray:
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"]).copy()


def _integer_tensors(ours, ref) -> dict:
    """Every 8-bit tensor both interpreters keep (preserve_all_tensors), by name."""
    pairs = {}
    for d in ref.get_tensor_details():
        if d["dtype"] not in (np.int8, np.uint8):
            continue
        theirs = ref.get_tensor(d["index"])
        mine = ours.get_tensor(d["index"])
        if mine.shape == theirs.shape:
            pairs[d["name"]] = (mine, theirs)
    return pairs


def _assert_intermediates_equal(ours, ref, least: int) -> None:
    pairs = _integer_tensors(ours, ref)
    assert len(pairs) >= least, f"only {len(pairs)} tensors compared"
    differ = {name: int(np.abs(a.astype(int) - b).max()) for name, (a, b) in pairs.items()
              if not np.array_equal(a, b)}
    assert not differ, f"tensors differing from BUILTIN_REF (max LSB): {differ}"


def test_digits_cnn_int8_every_test_image(models_dir):
    path = models_dir / "digits_cnn_int8.tflite"
    data = np.load(models_dir / "digits.npz")
    ours, ref = _ours(path), _reference(path)
    scale, zero_point = ours.get_input_details()[0]["quantization"]
    images = np.transpose(data["x_test"], (0, 2, 3, 1))          # NCHW -> NHWC
    quantized = np.clip(np.floor(images / scale + 0.5) + zero_point, -128, 127).astype(np.int8)
    differ, correct = [], 0
    for i in range(len(quantized)):
        mine = _invoke(ours, quantized[i:i + 1])
        if not np.array_equal(mine, _invoke(ref, quantized[i:i + 1])):
            differ.append(i)
        correct += int(mine.argmax() == data["y_test"][i])
    assert not differ, f"{len(differ)} of {len(quantized)} images differ from BUILTIN_REF"
    assert correct / len(quantized) > 0.97
    refs = np.load(models_dir / "refs" / "digits_cnn_int8_tfl.npz")
    np.testing.assert_array_equal(_invoke(ours, refs["input_0"]), refs["output_0"])


def test_mobilenet_v2_int8(models_dir):
    path = models_dir / "mobilenet_v2_int8.tflite"
    refs = np.load(models_dir / "refs" / "mobilenet_v2_int8.npz")
    # The softmax of this random-weight network saturates: compare every intermediate too.
    ours = _ours(path, experimental_preserve_all_tensors=True)
    ref = _reference(path, experimental_preserve_all_tensors=True)
    np.testing.assert_array_equal(_invoke(ours, refs["input_0"]), refs["output_0"])
    _invoke(ref, refs["input_0"])
    _assert_intermediates_equal(ours, ref, least=100)
    rng = np.random.default_rng(20)
    shape = tuple(ours.get_input_details()[0]["shape"])
    for k in range(20):
        x = rng.integers(-128, 128, shape).astype(np.int8)
        np.testing.assert_array_equal(_invoke(ours, x), _invoke(ref, x), err_msg=f"input {k}")
    _assert_intermediates_equal(ours, ref, least=100)


def test_mwk_okay_nabu_streaming(models_dir):
    """100 consecutive steps of a streaming model whose state lives in resource variables."""
    missing = [op for op in ("STRIDED_SLICE", "CALL_ONCE", "VAR_HANDLE") if op not in KERNELS]
    if missing:
        pytest.skip(f"the model needs {', '.join(missing)}, which edgelite lacks yet")
    path = models_dir / "mwk_okay_nabu.tflite"
    refs = np.load(models_dir / "refs" / "mwk_okay_nabu.npz")
    np.testing.assert_array_equal(_invoke(_ours(path), refs["input_0"]), refs["output_0"])
    ours = _ours(path, experimental_preserve_all_tensors=True)
    ref = _reference(path, experimental_preserve_all_tensors=True)
    rng = np.random.default_rng(100)
    shape = tuple(ours.get_input_details()[0]["shape"])
    for step in range(100):
        x = rng.integers(-128, 128, shape).astype(np.int8) if step % 4 else refs["input_0"]
        np.testing.assert_array_equal(_invoke(ours, x), _invoke(ref, x), err_msg=f"step {step}")
        _assert_intermediates_equal(ours, ref, least=50)


def test_int8_cases_invoked_again_on_new_values():
    """Every integer single-op case, invoked a second time on new inputs: no stale state (cached
    views, padded copies, shared work buffers) survives from the first invoke."""
    from tests.interpreter.cases_int8 import CASES
    from tests.opmodel import assert_close, run_litert

    rng = np.random.default_rng(2)
    for case in CASES:
        it = Interpreter(model_content=case.model,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        details = it.get_input_details()
        for d, x in zip(details, case.feeds):
            if tuple(d["shape"]) != x.shape:
                it.resize_tensor_input(d["index"], x.shape)
        it.allocate_tensors()
        for feeds in (case.feeds, [_shuffled(rng, x) for x in case.feeds]):
            for d, x in zip(it.get_input_details(), feeds):
                it.set_tensor(d["index"], x)
            it.invoke()
            ours = [it.get_tensor(d["index"]) for d in it.get_output_details()]
            assert_close(ours, run_litert(case.model, feeds))


def _shuffled(rng, x: np.ndarray) -> np.ndarray:
    if x.dtype in (np.int8, np.uint8):
        info = np.iinfo(x.dtype)
        return rng.integers(info.min, info.max + 1, x.shape).astype(x.dtype)
    return rng.permutation(x.reshape(-1)).reshape(x.shape)


def test_default_resolver_within_one_lsb_of_reference(models_dir):
    """edgelite's default resolver on the int8 models: the digits CNN on every test image
    (accuracy as under BUILTIN_REF), MobileNetV2 on 5 random inputs: outputs at most 1 from
    the reference kernels' (LiteRT's own default path is allowed the same); the count of
    differing outputs is printed (pytest -s)."""
    data = np.load(models_dir / "digits.npz")
    path = models_dir / "digits_cnn_int8.tflite"
    fast, ref = _ours(path, experimental_op_resolver_type=OpResolverType.AUTO), _reference(path)
    scale, zero_point = fast.get_input_details()[0]["quantization"]
    images = np.transpose(data["x_test"], (0, 2, 3, 1))
    quantized = np.clip(np.floor(images / scale + 0.5) + zero_point, -128, 127).astype(np.int8)
    worst, differ, agree = 0, 0, 0
    for i in range(len(quantized)):
        a, b = _invoke(fast, quantized[i:i + 1]), _invoke(ref, quantized[i:i + 1])
        worst = max(worst, int(np.abs(a.astype(int) - b).max()))
        differ += int(not np.array_equal(a, b))
        agree += int(a.argmax() == b.argmax())
    print(f"digits_cnn_int8, default resolver: {differ} of {len(quantized)} images differ from "
          f"BUILTIN_REF, by at most {worst}; argmax agrees on {agree}")
    assert worst <= 1 and agree >= len(quantized) - 2
    path = models_dir / "mobilenet_v2_int8.tflite"
    fast = _ours(path, experimental_op_resolver_type=OpResolverType.AUTO)
    ref = _reference(path)
    rng = np.random.default_rng(5)
    shape = tuple(fast.get_input_details()[0]["shape"])
    for k in range(5):
        x = rng.integers(-128, 128, shape).astype(np.int8)
        a, b = _invoke(fast, x), _invoke(ref, x)
        assert np.abs(a.astype(int) - b).max() <= 1, f"input {k}"


@pytest.mark.parametrize("scale", [0.0, -0.5, float("nan"), float("inf")])
def test_bad_quantization_scales_are_named(scale):
    """A quantized tensor whose scale is not positive and finite: LiteRT runs it to garbage
    (or zeros); edgelite refuses at allocate_tensors, naming the op, the tensor and the scale."""
    from edgelite.interpreter import KernelError
    from tests.interpreter.cases_int8 import conv_case, conv_options
    case = conv_case("bad_scale", "CONV_2D", (1, 5, 5, 3), (4, 1, 1, 3), conv_options(),
                     oq=(scale, 0))
    it = Interpreter(model_content=case.model)
    with pytest.raises(KernelError, match=r"CONV_2D.*output 0 .*scale .*positive and finite"):
        it.allocate_tensors()
