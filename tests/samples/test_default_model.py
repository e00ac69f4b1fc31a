"""The default sample model: the script trains and writes it; LiteRT runs our file and agrees.

LiteRT reproducing the script's own numpy forward pass, and its accuracy, on the held-out set
proves that edgelite's writer produces a correct model (layouts, options, padding, signature)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from edgelite.schema import load

MIN_ACCURACY = 0.9   # 8 balanced classes: chance is 0.125


@pytest.fixture(scope="module")
def sample(sample_dir):
    """(model path, test set, accuracy the script reported)."""
    stdout = (sample_dir / "stdout.txt").read_text()
    match = re.search(r"test accuracy: ([0-9.]+) \(n=(\d+)\)", stdout)
    assert match, stdout
    return (sample_dir / "default.tflite", dict(np.load(sample_dir / "default_test.npz")),
            float(match[1]))


def test_script_writes_a_loadable_model(sample):
    path, test, accuracy = sample
    model = load(path)
    assert model.description.startswith("edgelite default sample")
    assert [op.op for op in model.subgraphs[0].operators] == [
        "CONV_2D", "MAX_POOL_2D", "RESHAPE", "FULLY_CONNECTED", "SOFTMAX"]
    (sig,) = model.signature_defs
    assert sig.signature_key == "serving_default"
    assert list(sig.inputs) == ["image"] and list(sig.outputs) == ["probabilities"]
    assert model.get_metadata("edgelite_labels").decode().split("\n") == list(test["labels"])
    assert test["x"].dtype == np.float32 and test["x"].shape[1:] == (16, 16, 1)
    assert accuracy >= MIN_ACCURACY


@pytest.mark.parametrize("resolver", ["AUTO", "BUILTIN_REF"])
def test_litert_matches_the_numpy_forward_pass(sample, resolver):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    path, test, accuracy = sample
    interpreter = Interpreter(model_path=str(path),
                              experimental_op_resolver_type=getattr(OpResolverType, resolver))
    assert interpreter.get_signature_list() == {
        "serving_default": {"inputs": ["image"], "outputs": ["probabilities"]}}
    runner = interpreter.get_signature_runner("serving_default")
    probabilities = runner(image=test["x"])["probabilities"]   # the whole set as one batch
    np.testing.assert_allclose(probabilities, test["probabilities"], atol=1e-5, rtol=0)
    litert_accuracy = float(np.mean(probabilities.argmax(axis=1) == test["y"]))
    assert round(litert_accuracy, 4) == accuracy
    assert litert_accuracy >= MIN_ACCURACY


def test_litert_runs_the_static_batch_of_one(sample):
    from ai_edge_litert.interpreter import Interpreter

    path, test, _ = sample
    interpreter = Interpreter(model_path=str(path))
    interpreter.allocate_tensors()
    (inp,), (out,) = interpreter.get_input_details(), interpreter.get_output_details()
    assert inp["name"] == "image" and list(inp["shape"]) == [1, 16, 16, 1]
    assert out["name"] == "probabilities" and list(out["shape"]) == [1, 8]
    for i in range(5):
        interpreter.set_tensor(inp["index"], test["x"][i:i + 1])
        interpreter.invoke()
        np.testing.assert_allclose(interpreter.get_tensor(out["index"])[0],
                                   test["probabilities"][i], atol=1e-5, rtol=0)


def test_the_main_job_converts_the_onnx_sample_and_keeps_its_accuracy(sample, tmp_path):
    """The README's main job: `tflite-convert samples/default.onnx`, then run the result. The
    converted file gives the trained accuracy in edgelite and in LiteRT."""
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    from edgelite.converter import TFLiteConverter
    from edgelite.interpreter import Interpreter

    path, test, accuracy = sample
    converted = TFLiteConverter.from_onnx(str(path.parent / "default.onnx")).convert()
    ops = [op.op for op in load(converted).subgraphs[0].operators]
    assert "TRANSPOSE" not in ops and ops.count("CONV_2D") == 1
    for runtime in (Interpreter, LiteRT):
        it = runtime(model_content=converted)
        index = it.get_input_details()[0]["index"]
        it.resize_tensor_input(index, test["x"].shape)  # NHWC input: the converter's layout
        it.allocate_tensors()
        it.set_tensor(index, test["x"])
        it.invoke()
        probabilities = it.get_tensor(it.get_output_details()[0]["index"])
        np.testing.assert_allclose(probabilities, test["probabilities"], atol=1e-5, rtol=0)
        assert round(float(np.mean(probabilities.argmax(axis=1) == test["y"])), 4) == accuracy
