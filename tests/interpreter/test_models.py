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


def _run(interpreter_class, path, x, warm_up=False) -> list:
    it = interpreter_class(model_path=str(path), num_threads=1)
    it.allocate_tensors()
    detail = it.get_input_details()[0]
    if warm_up:  # an invoke on other values first: nothing may stick from it
        noise = np.random.default_rng(0).uniform(-1, 1, x.size)
        it.set_tensor(detail["index"], noise.reshape(detail["shape"]).astype(detail["dtype"]))
        it.invoke()
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
        ours = _run(Interpreter, path, x, warm_up=True)
    except UnsupportedOpsError as e:  # kernels still being written: say which
        pytest.skip(str(e))
    stored = [refs[f"output_{k}"] for k in range(len(ours)) if f"output_{k}" in refs.files]
    _check(ours, stored, rtol, "the stored reference outputs")

    litert = pytest.importorskip("ai_edge_litert.interpreter",
                                 reason="LiteRT (ai-edge-litert) is the oracle")
    _check(ours, _run(litert.Interpreter, path, x), rtol, "LiteRT")


def _my_cases():
    from tests.interpreter import cases_conv, cases_fully_connected, cases_pool, cases_resize
    return [c for m in (cases_conv, cases_fully_connected, cases_pool, cases_resize)
            for c in m.CASES]


@pytest.mark.parametrize("case", _my_cases(), ids=lambda c: c.id)
def test_second_invoke_uses_new_inputs(case):
    """Kernels cache views of their padded buffers and inputs: a second invoke on other
    values must still match LiteRT."""
    from edgelite.interpreter import Interpreter
    from tests.opmodel import assert_close, run_interpreter, run_litert

    pytest.importorskip("ai_edge_litert", reason="LiteRT (ai-edge-litert) is the oracle")
    it = Interpreter(model_content=case.model)
    run_interpreter(it, case.feeds)
    rng = np.random.default_rng(7)
    feeds = [rng.standard_normal(np.shape(f)).astype(np.asarray(f).dtype)
             if np.issubdtype(np.asarray(f).dtype, np.floating) else f for f in case.feeds]
    for d, x in zip(it.get_input_details(), feeds):
        it.set_tensor(d["index"], np.asarray(x))
    it.invoke()
    ours = [it.get_tensor(d["index"]) for d in it.get_output_details()]
    assert_close(ours, run_litert(case.model, feeds), rtol=case.rtol, atol=case.atol)
