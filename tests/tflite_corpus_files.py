"""Where the third-party .tflite corpus lives (tools/tflite_corpus.py writes it), for the tests
that read its files: a plain module, whose import skips nothing (tests/test_suite_rules.py)."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT


def corpus_tool():
    """tools/tflite_corpus.py as a module."""
    spec = importlib.util.spec_from_file_location("tflite_corpus",
                                                  REPO_ROOT / "tools" / "tflite_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CORPUS = Path(os.environ.get("EDGELITE_TFLITE_CORPUS", corpus_tool().DEFAULT_OUT))
MISSING = (f"the MediaPipe wheel's models are not in {CORPUS}: run "
           "`python tools/tflite_corpus.py mediapipe` (or set EDGELITE_TFLITE_CORPUS)")


def corpus_file(name: str) -> Path:
    """A corpus file; skips the test without it (fails with EDGELITE_REQUIRE_MODELS=1)."""
    path = CORPUS / name
    if not path.exists():
        if os.environ.get("EDGELITE_REQUIRE_MODELS") == "1":
            pytest.fail(MISSING + " (EDGELITE_REQUIRE_MODELS=1)")
        pytest.skip(MISSING)
    return path
