"""The small float CONV_2D that gathers its im2col matrix in one take (kernels/conv.py,
`_gather_table`), alone and fused with its MAX_POOL_2D: against LiteRT for every item size
the take moves (4, 2 or 1 floats, by the channel count), and a timing-free guard of what the
take moves an invoke (issue 17: numpy's take costs per item)."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import Interpreter
from edgelite.interpreter.kernels.conv import TAKE_ELEMENTS, gather_item
from edgelite.interpreter.plan import bind_step
from tests.interpreter.test_fusion import conv_pool_model
from tests.opmodel import In, op_model, run_interpreter, run_litert

SAME, VALID = 0, 1


def _taken(it) -> list:
    """Items each bound gathering step of the plan takes an invoke."""
    plan = it._main
    steps = [step for oi, step in zip(plan.step_ops, plan.steps) if oi in plan.run_ops]
    return [getattr(bind_step(run, list(args)), "taken", None) for run, args in steps]


@pytest.mark.parametrize("channels", [1, 2, 3, 4, 6, 8, 12])
@pytest.mark.parametrize("batch,padding,stride,dilation", [
    (1, SAME, 1, 1), (2, VALID, 1, 1), (1, SAME, 2, 1), (2, SAME, 1, 2)])
def test_gathered_conv_matches_litert(channels, batch, padding, stride, dilation):
    rng = np.random.default_rng(channels)
    shape = (batch, 4, 5, channels)
    w = rng.standard_normal((5, 3, 3, channels)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    content = op_model("CONV_2D", [In(shape), w, b],
                       options=dict(padding=padding, stride_h=stride, stride_w=stride,
                                    dilation_h_factor=dilation, dilation_w_factor=dilation,
                                    fused_activation_function=1))
    x = rng.standard_normal(shape).astype(np.float32)
    it = Interpreter(model_content=content)
    ours = run_interpreter(it, [x])
    rows = int(np.prod(ours[0].shape[:3]))
    if rows * (9 * channels + 1) <= TAKE_ELEMENTS:   # else the im2col path, compared too
        assert _taken(it) == [rows * (9 * channels // gather_item(channels) + 1)]
    np.testing.assert_allclose(ours[0], run_litert(content, [x], reference=False)[0],
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,o", [((1, 6, 6, 4), 3), ((2, 4, 6, 6), 5), ((1, 4, 4, 16), 32)])
def test_gathered_conv_pool_matches_litert(shape, o):
    content = conv_pool_model(shape, o, 3, 1, SAME, 1, 2)
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    it = Interpreter(model_content=content)
    ours = run_interpreter(it, [x])
    assert len(it._main.run_ops) == 1 and _taken(it)[0] is not None
    np.testing.assert_allclose(ours[0], run_litert(content, [x], reference=False)[0],
                               rtol=1e-5, atol=1e-5)


def test_digits_cnn_takes_pixels_in_items(models_dir):
    """The digits CNN's second convolution (16 channels, 3x3, 16 pixels) takes 16 rows of 36
    four-float items and the bias item: 592 items, where a take of floats moved 2320 (0.95
    µs vs 0.44 µs on the EPYC). The first (one channel) takes 64 pixels x 10 floats."""
    it = Interpreter(model_path=str(models_dir / "digits_cnn.tflite"))
    run_interpreter(it, [np.zeros(it.get_input_details()[0]["shape"], np.float32)])
    assert _taken(it) == [640, 592]   # was [640, 2320]
