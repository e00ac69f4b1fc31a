"""Dynamic shapes: resize_tensor_input + allocate_tensors re-plans; a -1 batch runs at any size
LiteRT accepts, through the API and through signature runners."""
from __future__ import annotations

import numpy as np
import pytest

litert = pytest.importorskip("ai_edge_litert.interpreter",
                             reason="LiteRT (ai-edge-litert) is the oracle: "
                                    "pip install -e '.[dev]'")
from edgelite import interpreter as edgelite_interpreter  # noqa: E402


def _resized_outputs(module, path, batch, x):
    it = module.Interpreter(model_path=str(path), num_threads=1)
    index = it.get_input_details()[0]["index"]
    it.resize_tensor_input(index, [batch, *x.shape[1:]], strict=True)
    it.allocate_tensors()
    it.set_tensor(index, x)
    it.invoke()
    details = it.get_output_details()[0]
    return details["shape"].tolist(), it.get_tensor(details["index"])


def test_mobilenet_batch_resize_matches_litert(models_dir):
    path = models_dir / "mobilenet_v2.tflite"
    x = np.random.default_rng(0).standard_normal((2, 224, 224, 3)).astype(np.float32)
    ours_shape, ours = _resized_outputs(edgelite_interpreter, path, 2, x)
    theirs_shape, theirs = _resized_outputs(litert, path, 2, x)
    assert ours_shape == theirs_shape == [2, 1000]
    np.testing.assert_allclose(ours, theirs, atol=1e-5 * np.abs(theirs).max())


def test_signature_runner_takes_any_batch(models_dir):
    path = models_dir / "mobilenet_v2.tflite"
    rng = np.random.default_rng(1)
    ours_it = edgelite_interpreter.Interpreter(model_path=str(path), num_threads=1)
    theirs_it = litert.Interpreter(model_path=str(path), num_threads=1)
    ours_run, theirs_run = ours_it.get_signature_runner(), theirs_it.get_signature_runner()
    (name,) = ours_run.get_input_details()
    for batch in (3, 1):
        x = rng.standard_normal((batch, 224, 224, 3)).astype(np.float32)
        ours, theirs = ours_run(**{name: x}), theirs_run(**{name: x})
        assert ours.keys() == theirs.keys()
        for key in theirs:
            assert ours[key].shape == theirs[key].shape == (batch, 1000)
            np.testing.assert_allclose(ours[key], theirs[key],
                                       atol=1e-5 * np.abs(theirs[key]).max())


def test_strict_resize_refuses_static_dimensions(models_dir):
    it = edgelite_interpreter.Interpreter(model_path=str(models_dir / "mobilenet_v2.tflite"))
    with pytest.raises(ValueError, match="strict"):
        it.resize_tensor_input(0, [1, 200, 224, 3], strict=True)
    it.resize_tensor_input(0, [1, 200, 224, 3])  # not strict: allowed, the kernels re-plan
    it.allocate_tensors()
    assert it.get_input_details()[0]["shape"].tolist() == [1, 200, 224, 3]
    with pytest.raises(RuntimeError):
        it.resize_tensor_input(0, [1, 224, 224, 3])
        it.invoke()  # resized but not re-allocated
