"""Shared test helpers: where the shared real models live."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SKIP_REASON = "shared models not found: set EDGELITE_MODELS or clone beside ../shared/models"


def find_models_dir() -> Path | None:
    """The shared models folder ($EDGELITE_MODELS, else <repo>/../shared/models), or None."""
    env = os.environ.get("EDGELITE_MODELS")
    path = Path(env) if env else REPO_ROOT.parent / "shared" / "models"
    return path if path.is_dir() else None


def models_dir() -> Path:
    """The shared models folder; skips the calling test when it is missing (fails instead when
    EDGELITE_REQUIRE_MODELS=1, as CI sets it, so CI always runs these tests)."""
    path = find_models_dir()
    if path is None:
        if os.environ.get("EDGELITE_REQUIRE_MODELS") == "1":
            pytest.fail(SKIP_REASON + " (EDGELITE_REQUIRE_MODELS=1)")
        pytest.skip(SKIP_REASON)
    return path


@pytest.fixture(name="models_dir", scope="session")
def models_dir_fixture() -> Path:
    return models_dir()


@pytest.fixture(scope="session")
def sample_dir(tmp_path_factory) -> Path:
    """A folder where samples/make_default_model.py has run once for the whole session:
    default.tflite, default.onnx, default_test.npz, and stdout.txt (what the script printed)."""
    import subprocess
    import sys
    out = tmp_path_factory.mktemp("sample")
    run = subprocess.run([sys.executable, str(REPO_ROOT / "samples" / "make_default_model.py"),
                          "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    (out / "stdout.txt").write_text(run.stdout)
    return out
