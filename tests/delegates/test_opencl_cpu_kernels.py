"""The float kernels' CPU-device paths that benchmarks showed paying (issue 17), timing-free:
results equal the CPU interpreter's where the faster path runs, and the kernel source still
takes it. Speed itself is benchmarks/bench_opencl.py's and ab_opencl_kernels.py's."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from edgelite.interpreter import Interpreter
from tests.delegates.compare import TOLERANCE, assert_matches
from tests.delegates.graphs import Graph

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(17)


def _w(*shape):
    return RNG.standard_normal(shape).astype(np.float32) * 0.3


def _launches(it) -> int:
    return sum(getattr(run, "launches", 0) for run, _ in it._runtime.plans[0].steps)


def _run(content, x, delegates):
    it = Interpreter(model_content=content, experimental_delegates=delegates)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it, [it.get_tensor(o["index"]).copy() for o in it.get_output_details()]


def _kernel_body(name: str) -> str:
    text = (ROOT / "delegates" / "opencl" / "gemm.cl").read_text()
    start = text.index(f"__kernel void KERNEL({name})(")
    end = text.find("__kernel", start + 1)
    return text[start:end if end > 0 else len(text)]


@pytest.mark.parametrize("width,stride,k", [(7, 1, 3), (14, 1, 3), (14, 2, 3), (28, 2, 3),
                                            (7, 1, 5), (16, 2, 5), (29, 1, 3), (9, 2, 3)])
def test_depthwise_then_conv_at_the_row_edges(opencl, width, stride, k):
    """DEPTHWISE_CONV_2D (SAME, stride 1 or 2) -> 1x1 CONV_2D as one launch on a CPU device, on
    rows where every work-item (7 or 14 outputs: TM = 7) or some reach into the padding: the
    padded pixels' zeros come from the window's select, not the per-tap path."""
    c, co = 40, 48
    g = Graph()
    x = g.input((1, 9, width, c))
    y = g.op("DEPTHWISE_CONV_2D", [x, g.const(_w(1, k, k, c)), g.const(_w(c))], padding=1,
             stride_h=stride, stride_w=stride, depth_multiplier=1, fused_activation_function=3)
    g.output(g.op("CONV_2D", [y, g.const(_w(co, 1, 1, c)), g.const(_w(co))], padding=0,
                  stride_h=1, stride_w=1))
    delegate = opencl("fp32")
    inp = RNG.standard_normal((1, 9, width, c)).astype(np.float32)
    _, ref = _run(g.save(), inp, [])
    it, ours = _run(g.save(), inp, [delegate])
    assert_matches(ours, ref, TOLERANCE["fp32"])
    if delegate.dev.is_cpu:
        assert _launches(it) == 1


def test_the_depthwise_window_serves_edge_work_items():
    """Every unit-stride work-item of depthwise_conv_2d_then_conv_2d (and stride 2's where the
    window fits the registers) loads its row's window once, whether or not it reaches into the
    padding; the per-tap path is left to other strides and dilations. MobileNetV2's 7- and
    14-wide layers (TM = 7: no work-item inside a row) ran the per-tap path everywhere, the
    depthwise 55-80 % of those kernels' time (fused kernels 0.75-0.9x after)."""
    body = _kernel_body("depthwise_conv_2d_then_conv_2d")
    assert re.search(r"if \(unit\) \{\s*DW_WINDOW\(1\);", body)
    assert re.search(r"if \(sw == 2 && dw == 1\) \{\s*DW_WINDOW\(2\);", body)
    assert "inside && unit" not in body
