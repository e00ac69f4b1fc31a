"""Convolutions and pools of one interpreter share their padded-input and im2col buffers: each
run must rewrite the border (zeros, or -inf for MAX_POOL_2D) that the other layers overwrite.
A chain of such layers of different shapes, invoked twice, against LiteRT."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.schema import (Model, Operator, OperatorCode, Subgraph, Tensor, default_options,
                             save)
from tests.opmodel import assert_close, run_steps

pytest.importorskip("ai_edge_litert", reason="LiteRT is the oracle")

rng = np.random.default_rng(7)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def chain_model() -> bytes:
    """conv 3x3 -> max pool 3x3 SAME -> depthwise 3x3 stride 2 (multiplier 2) -> conv 3x3
    stride 2 -> average pool 3x3 SAME, all SAME-padded so every layer fills a border."""
    model = Model()
    sg = Subgraph(name="main")
    x = sg.add_tensor(Tensor("x", (1, 11, 10, 3), "float32"))
    sg.inputs.append(x)

    def const(name, value):
        return sg.add_tensor(Tensor(name, value.shape, "float32", buffer=model.add_buffer(value)))

    def op(name, inputs, shape, **options):
        out = sg.add_tensor(Tensor(f"{name}_{len(sg.operators)}", shape, "float32"))
        sg.operators.append(Operator(OperatorCode(name, 0), inputs, [out],
                                     default_options(name, **options)))
        return out

    t = op("CONV_2D", [x, const("w0", f32(4, 3, 3, 3)), const("b0", f32(4))], (1, 11, 10, 4),
           stride_w=1, stride_h=1, padding=0)
    t = op("MAX_POOL_2D", [t], (1, 11, 10, 4), stride_w=1, stride_h=1, filter_width=3,
           filter_height=3, padding=0)
    t = op("DEPTHWISE_CONV_2D", [t, const("w1", f32(1, 3, 3, 8)), const("b1", f32(8))],
           (1, 6, 5, 8), stride_w=2, stride_h=2, padding=0, depth_multiplier=2)
    t = op("CONV_2D", [t, const("w2", f32(5, 3, 3, 8)), const("b2", f32(5))], (1, 3, 3, 5),
           stride_w=2, stride_h=2, padding=0)
    t = op("AVERAGE_POOL_2D", [t], (1, 3, 3, 5), stride_w=1, stride_h=1, filter_width=3,
           filter_height=3, padding=0)
    sg.outputs.append(t)
    model.subgraphs.append(sg)
    return save(model)


def test_shared_buffers_refill_their_borders():
    import ai_edge_litert.interpreter as litert

    import edgelite.interpreter as edgelite

    content = chain_model()
    steps = [[f32(1, 11, 10, 3) - 2.0], [f32(1, 11, 10, 3) + 1.0]]  # negative: -inf vs 0 shows
    ours = run_steps(edgelite, content, steps)
    theirs = run_steps(litert, content, steps)
    for a, b in zip(ours, theirs):
        assert np.isfinite(a[0]).all()
        # Relative to the largest output (~300): sums in another order (OpenBLAS's AVX-512
        # kernels) move an output that nearly cancels by 1e-5.
        assert_close(a, b, rtol=1e-5, atol=1e-6 * float(np.abs(b[0]).max()))


def test_depthwise_in_bands_of_rows(monkeypatch):
    """Depthwise layers with column phases run in bands of output rows when large: forced to
    bands of one row or two, every depthwise case still matches LiteRT."""
    from edgelite.interpreter.kernels.taps import TapGrid
    from tests.interpreter.cases_conv import CASES
    from tests.opmodel import run_edgelite, run_litert

    cases = [c for c in CASES if c.id.startswith("depthwise")]
    assert len(cases) > 10
    for band_bytes in (1, 2000):
        monkeypatch.setattr(TapGrid, "BAND_BYTES", band_bytes)
        for c in cases:
            ours, theirs = run_edgelite(c.model, c.feeds), run_litert(c.model, c.feeds)
            assert_close(ours, theirs, rtol=c.rtol, atol=c.atol)
