"""What a quantizing conversion reports: calibration's progress off a terminal is plain lines on
stderr (rich's bar left a blank line on stdout), and `last_conversion.seconds` counts the whole
conversion, calibration and quantization included."""
from __future__ import annotations

import time

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from edgelite.converter import Optimize, TFLiteConverter  # noqa: E402
from edgelite.converter.quantize.calibrate import Progress  # noqa: E402


def test_progress_off_a_terminal_is_plain_lines_on_stderr(capsys):
    bar = Progress(20, "calibrating on 20 samples")
    for _ in range(20):
        bar.advance()
    bar.close()
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert lines and all(line.startswith("calibrating on 20 samples: ") for line in lines), err
    assert lines[-1].endswith("20/20")


def test_seconds_include_calibration(monkeypatch):
    import edgelite.converter.quantize as quantize

    slow = 0.3
    real = quantize.calibrate

    def slow_calibrate(*args, **kwargs):
        time.sleep(slow)
        return real(*args, **kwargs)

    monkeypatch.setattr(quantize, "calibrate", slow_calibrate)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    converter = TFLiteConverter.from_onnx(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    converter.optimizations = [Optimize.DEFAULT]
    rng = np.random.default_rng(0)
    converter.representative_dataset = [[rng.standard_normal((1, 8), np.float32)]
                                        for _ in range(4)]
    start = time.perf_counter()
    converter.convert()
    total = time.perf_counter() - start
    assert converter.last_conversion.quantization is not None
    assert slow <= converter.last_conversion.seconds <= total
