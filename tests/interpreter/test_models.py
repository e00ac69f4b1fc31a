"""The shared real float models, end to end: edgelite's outputs against the stored reference
outputs and against LiteRT run live on the same input."""
from __future__ import annotations

import numpy as np
import pytest

# model -> (reference .npz in refs/, relative tolerance). The MediaPipe models store float16
# weights (DEQUANTIZE'd at load): their sums lose more to a different accumulation order.
MODELS = {
    "digits_cnn": ("digits_cnn_tfl", 1e-5),
    "mobilenet_v2": ("mobilenet_v2", 1e-5),
    "mp_face_detection": ("mp_face_detection", 1e-4),
    "mp_hand_landmark": ("mp_hand_landmark", 1e-4),
}


def _run(interpreter_class, path, x) -> list:
    it = interpreter_class(model_path=str(path), num_threads=1)
    it.allocate_tensors()
    detail = it.get_input_details()[0]
    it.set_tensor(detail["index"], x.reshape(detail["shape"]).astype(detail["dtype"]))
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


def _check(ours: list, theirs: list, rtol: float, what: str) -> None:
    assert len(ours) == len(theirs), f"{len(ours)} outputs vs {len(theirs)} from {what}"
    for k, (a, b) in enumerate(zip(ours, theirs)):
        b = np.asarray(b)
        assert a.shape == b.shape, f"output {k}: shape {a.shape} vs {b.shape} from {what}"
        err = float(np.max(np.abs(a.astype(np.float64) - b)))
        bound = rtol * float(np.max(np.abs(b)))
        assert err <= bound, f"output {k}: max abs error {err:.3g} > {bound:.3g} vs {what}"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_float_model_matches_references_and_litert(name, models_dir):
    from edgelite.interpreter import Interpreter, UnsupportedOpsError

    ref_name, rtol = MODELS[name]
    path = models_dir / f"{name}.tflite"
    refs = np.load(models_dir / "refs" / f"{ref_name}.npz")
    x = refs["input_0"]
    try:
        ours = _run(Interpreter, path, x)
    except UnsupportedOpsError as e:  # kernels still being written: say which
        pytest.skip(str(e))
    stored = [refs[f"output_{k}"] for k in range(len(ours)) if f"output_{k}" in refs.files]
    _check(ours, stored, rtol, "the stored reference outputs")

    litert = pytest.importorskip("ai_edge_litert.interpreter",
                                 reason="LiteRT (ai-edge-litert) is the oracle")
    _check(ours, _run(litert.Interpreter, path, x), rtol, "LiteRT")
