"""`--check` (converter.check) runs LiteRT without letting its C++ INFO lines ("INFO: Created
TensorFlow Lite XNNPACK delegate for CPU.") reach the user's terminal. LiteRT prints them once
per process, on descriptor 2, so each case runs in a fresh Python."""
from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("onnx")
pytest.importorskip("ai_edge_litert", reason="LiteRT is what prints the INFO lines")

FLOAT_CHECK = """
from edgelite.converter import TFLiteConverter
from edgelite.converter.check import compare
converter = TFLiteConverter.from_onnx({model!r})
converter.convert()
rows = compare(converter.last_conversion, {model!r})
assert rows and all(r["ok"] for r in rows), rows
"""

PLAIN_LITERT = """
from ai_edge_litert.interpreter import Interpreter
from edgelite.converter import TFLiteConverter
converter = TFLiteConverter.from_onnx({model!r})
Interpreter(model_content=converter.convert()).allocate_tensors()
"""


def _stderr(script: str) -> str:
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_check_prints_no_litert_info_lines(models_dir):
    model = str(models_dir / "digits_cnn.onnx")
    if "INFO:" not in _stderr(PLAIN_LITERT.format(model=model)):
        pytest.skip("this LiteRT prints no INFO lines: nothing to silence")
    err = _stderr(FLOAT_CHECK.format(model=model))
    assert not [line for line in err.splitlines() if line.startswith("INFO:")], err
