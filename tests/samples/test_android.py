"""The Android sample's contract (samples/android): its assets script writes the spec that is
committed, the models declare what the spec says (read by LiteRT itself), and the app's LiteRT
calls, made from the spec on those files in stock LiteRT, do what the app needs: the camera
model tells upright text from text turned 180 degrees, 20 training steps lower the loss on the
user's drawings, save -> train on -> restore gives back the saved model exactly. The same calls
on edgelite's interpreter agree with LiteRT.

The app cannot be built here (no Android SDK, no Maven repository); samples/android/jvmcheck
compiles its Kotlin against API stubs (a script: ~3 min, not run here); what this module checks
of the Kotlin is that every spec field it reads exists (the test of KOTLIN_KEYS).
"""
from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from edgelite.schema.metadata import associated_files, read_metadata
from tests.conftest import REPO_ROOT

ANDROID = REPO_ROOT / "samples" / "android"
ASSETS = ANDROID / "app" / "src" / "main" / "assets"
KOTLIN = ANDROID / "app" / "src" / "main" / "java"
STEPS = 20


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"_android_{name}", ANDROID / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


make_assets, contract = _module("make_assets"), _module("contract")

# A 5x7 font for the camera model's text lines (no font files or PIL needed).
GLYPHS = {
    "E": "11111 10000 10000 11110 10000 10000 11111", "D": "11110 10001 10001 10001 10001 "
    "10001 11110", "G": "01111 10000 10000 10111 10001 10001 01111", "L": "10000 10000 10000 "
    "10000 10000 10000 11111", "I": "01110 00100 00100 00100 00100 00100 01110", "T": "11111 "
    "00100 00100 00100 00100 00100 00100", "a": "00000 00000 01110 00001 01111 10001 01111",
    "n": "00000 00000 10110 11001 10001 10001 10001", "d": "00001 00001 01101 10011 10001 "
    "10011 01101", "r": "00000 00000 10110 11001 10000 10000 10000", "o": "00000 00000 01110 "
    "10001 10001 10001 01110", "i": "00100 00000 01100 00100 00100 00100 01110",
    " ": "00000 00000 00000 00000 00000 00000 00000",
}


def text_line(text: str, scale: int = 4) -> np.ndarray:
    """Black text on white, H x W x 3 uint8 RGB, as a camera frame's crop would be."""
    glyphs = [np.array([[c == "1" for c in row] for row in GLYPHS[ch].split()]) for ch in text]
    bitmap = np.concatenate([np.pad(g, ((0, 0), (0, 1))) for g in glyphs], axis=1)
    bitmap = np.pad(np.kron(bitmap, np.ones((scale, scale))), 2 * scale)
    return np.repeat((255 * (1 - bitmap)).astype(np.uint8)[..., None], 3, axis=2)


@pytest.fixture(scope="module")
def assets(tmp_path_factory, sample_dir, models_dir) -> Path:
    out = tmp_path_factory.mktemp("assets")
    assert make_assets.main(["--out", str(out), "--models", str(models_dir),
                             "--default-onnx", str(sample_dir / "default.onnx")]) == 0
    return out


@pytest.fixture(scope="module")
def spec(assets) -> dict:
    return contract.load_spec(assets)


@pytest.fixture(scope="module")
def user(sample_dir) -> dict:
    return user_data(sample_dir)


def user_data(sample_dir: Path) -> dict:
    """The user's drawings: 4 of each shape from the training set, as the 256x256 pad holds
    them (each pixel 16x16), their labels, and a text line."""
    data = np.load(sample_dir / "default_train.npz")
    pick = np.concatenate([np.flatnonzero(data["y"] == c)[:4] for c in range(8)])
    pixels = np.round(data["x"][pick, :, :, 0] * 255)
    return {"x": np.kron(pixels, np.ones((16, 16))).astype(np.uint8), "y": data["y"][pick],
            "pixels": pixels, "text": text_line("EDGELITE on android")}


def _session(assets, user, runtime, tmp_path) -> dict:
    return contract.exercise(assets, contract.interpreter_class(runtime), user["x"], user["y"],
                             user["text"], tmp_path)


@pytest.fixture(scope="module")
def litert(assets, user, tmp_path_factory) -> dict:
    return _session(assets, user, "litert", tmp_path_factory.mktemp("litert"))


def test_the_committed_spec_is_what_the_script_writes(assets):
    written = (assets / contract.SPEC).read_text()
    assert written == (ASSETS / contract.SPEC).read_text(), (
        "samples/android/app/src/main/assets/edgelite_app.json is stale: run "
        "python samples/android/make_assets.py")


def test_litert_sees_the_signatures_the_spec_names(assets, spec):
    from ai_edge_litert.interpreter import Interpreter

    for screen in ("camera", "personalization"):
        it = Interpreter(model_path=str(assets / spec[screen]["model"]))
        declared = spec[screen]["signatures"]
        assert it.get_signature_list() == {
            k: {"inputs": sorted(v["inputs"]), "outputs": sorted(v["outputs"])}
            for k, v in declared.items()}
        for key, sig in declared.items():
            runner = it.get_signature_runner(key)
            for names, details in ((sig["inputs"], runner.get_input_details()),
                                   (sig["outputs"], runner.get_output_details())):
                for name, info in names.items():
                    got = details[name]
                    shape = got["shape_signature"] if "shape_signature" in got else got["shape"]
                    assert (list(shape), np.dtype(got["dtype"]).name) == (
                        info["shape"], info["dtype"]), f"{screen} {key} {name}"
    keys = spec["personalization"]["keys"]
    assert set(keys.values()) <= set(spec["personalization"]["signatures"])


def test_the_models_metadata_says_what_the_spec_says(assets, spec):
    for screen in ("camera", "personalization"):
        content = (assets / spec[screen]["model"]).read_bytes()
        (image,) = read_metadata(content)["subgraphs"][0]["inputs"]
        channels = len(spec[screen]["image"]["mean"])
        for field in ("mean", "std"):
            values = image[field] * (channels if len(image[field]) == 1 else 1)
            assert values == spec[screen]["image"][field]
        labels = (ASSETS / spec[screen]["labels"]).read_bytes()
        assert associated_files(content) == {spec[screen]["labels"]: labels}


def test_camera_model_tells_text_direction_on_litert(litert):
    assert list(litert["text_labels"]) == ["0", "180"]
    assert litert["text_scores"][0, 0] > 0.9 and litert["text_scores"][1, 1] > 0.9


def test_the_pad_preprocessing_gives_the_model_its_pixels(litert, user):
    np.testing.assert_allclose(litert["images"][..., 0], user["pixels"] / 255, atol=1e-7)


def _cross_entropy(p, y) -> float:
    return float(-np.mean(np.log(p[np.arange(len(y)), y])))


def test_twenty_training_steps_on_litert_lower_the_loss(litert, user, spec):
    assert spec["personalization"]["steps"] == STEPS and len(litert["losses"]) == STEPS
    assert np.all(np.isfinite(litert["losses"]))
    before, after = (_cross_entropy(litert[k], user["y"]) for k in ("before", "trained"))
    assert after < 0.5 * before, (before, after)
    assert litert["losses"][-5:].mean() < litert["losses"][:5].mean()


def test_save_then_restore_gives_back_the_saved_model_on_litert(litert, spec):
    assert np.abs(litert["drifted"] - litert["trained"]).max() > 1e-4   # training on changed it
    np.testing.assert_array_equal(litert["restored"], litert["trained"])
    outputs = spec["personalization"]["signatures"]["save"]["outputs"]
    for name, info in outputs.items():
        assert list(litert[f"saved/{name}"].shape) == info["shape"]
    assert int(litert["checkpoint_bytes"]) == 4 * sum(
        int(np.prod(i["shape"], dtype=np.int64)) for i in outputs.values())


def test_edgelite_makes_the_same_calls_with_the_same_results(assets, user, litert, tmp_path):
    ours = _session(assets, user, "edgelite", tmp_path)
    assert list(ours["text_labels"]) == list(litert["text_labels"])
    for key in ("text_scores", "before", "trained", "restored"):
        np.testing.assert_allclose(ours[key], litert[key], atol=1e-5, err_msg=key)
    np.testing.assert_allclose(ours["losses"], litert["losses"], rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(ours["restored"], ours["trained"])


# Every field the Kotlin sources read from the spec (`json.getString("model")`,
# `optInt("steps", 0)`, `floats(json, "mean")`) must be a field of the spec: the app reads
# nothing the contract does not have.
KOTLIN_KEYS = re.compile(r'(?:\.(?:get|opt)(?:String|JSONObject|JSONArray|Int|Double|Boolean)\(|'
                         r'floats\(json, )"([^"]+)"')


def _fields(value) -> set:
    if isinstance(value, dict):
        return set(value) | set().union(*(_fields(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_fields(v) for v in value)) if value else set()
    return set()


def test_every_spec_field_the_kotlin_code_reads_exists():
    spec = json.loads((ASSETS / contract.SPEC).read_text())
    sources = sorted(KOTLIN.rglob("*.kt"))
    assert sources, f"no Kotlin sources under {KOTLIN}"
    read = {m for path in sources for m in KOTLIN_KEYS.findall(path.read_text())}
    assert {"camera", "personalization", "signatures", "model", "mean", "std"} <= read
    assert read - _fields(spec) == set()
