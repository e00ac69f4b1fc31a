"""The Android sample's contract on arm64 under qemu-user, with the runtime install alone: what
Python on a phone (Termux, aarch64) runs. tests/device/test_arm.py already shows the wheel's
inference on arm64 and armhf; this adds on-device training: the app's calls
(samples/android/contract.py: the camera model, 20 `train` steps, `save`, `restore`) on
edgelite's interpreter in the Debian arm64 root (PyPI's aarch64 numpy, -cpu cortex-a72), with
the results of the same calls in stock LiteRT on this machine: labels equal, scores and
probabilities within 1e-5, losses within 1e-4 relative, and the restored model bit for bit
the saved one. Skips (fails under EDGELITE_REQUIRE_ARM=1) as test_arm does without qemu or
the root."""
from __future__ import annotations

import numpy as np
import pytest

from tests.device.test_arm import qemu_python, sysroot
from tests.samples.test_android import ANDROID, contract, make_assets, user_data
from tests.wheel import built_wheel, install, run_python


@pytest.fixture(scope="module")
def assets(tmp_path_factory, sample_dir, models_dir):
    out = tmp_path_factory.mktemp("android-assets")
    assert make_assets.main(["--out", str(out), "--models", str(models_dir),
                             "--default-onnx", str(sample_dir / "default.onnx")]) == 0
    return out


def test_the_app_session_on_arm64_matches_litert(assets, sample_dir, tmp_path,
                                                 tmp_path_factory):
    root = sysroot("arm64")
    site = install(built_wheel(tmp_path_factory), tmp_path / "site")
    user = user_data(sample_dir)
    data = tmp_path / "samples.npz"
    np.savez(data, x=user["x"], y=user["y"], text=user["text"])
    out = tmp_path / "arm" / "result.npz"
    out.parent.mkdir()
    run = run_python(ANDROID / "contract.py", tmp_path, [site, root / "opt" / "py"],
                     args=["--assets", assets, "--data", data, "--out", out,
                           "--runtime", "edgelite"], python=qemu_python("arm64", root))
    assert run.returncode == 0, run.stdout + run.stderr[-4000:]
    arm = np.load(out)
    x86 = contract.exercise(assets, contract.interpreter_class("litert"), user["x"], user["y"],
                            user["text"], tmp_path)
    assert list(arm["text_labels"]) == list(x86["text_labels"]) == ["0", "180"]
    for key in ("text_scores", "images", "before", "trained", "restored"):
        np.testing.assert_allclose(arm[key], x86[key], atol=1e-5, err_msg=key)
    np.testing.assert_allclose(arm["losses"], x86["losses"], rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(arm["restored"], arm["trained"])
