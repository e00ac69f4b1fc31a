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
from tests.interpreter.test_fusion import Graph, conv_pool_model
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


def _copies(it) -> list:
    """Whether each bound gathering step copies its input into its own source first."""
    plan = it._main
    steps = [step for oi, step in zip(plan.step_ops, plan.steps) if oi in plan.run_ops]
    return [getattr(bind_step(run, list(args)), "copies", None) for run, args in steps]


def test_digits_cnn_copies_no_input_into_a_gather_source(models_dir):
    """The plan allocates each gathering convolution's input before the zero and one items its
    take reads (plan._tails): no copy of the input an invoke (0.11 µs each)."""
    it = Interpreter(model_path=str(models_dir / "digits_cnn.tflite"))
    run_interpreter(it, [np.zeros(it.get_input_details()[0]["shape"], np.float32)])
    assert _copies(it) == [False, False]   # was: no such steps' flag, a copy each


def test_a_gather_source_shared_and_reshaped_matches_litert():
    """x -> RESHAPE -> CONV_2D (the reshape a view of x, so x gets the tail), x also read by an
    ADD; and the second part of a concatenation (a view inside its output) feeding a conv:
    that one copies."""
    g = Graph(seed=4)
    x = g.tensor("x", (1, 48))
    shape = g.const("shape", np.array([1, 4, 3, 4], np.int32))
    r = g.op("RESHAPE", [x, shape])
    w = g.const("w", g.rng.standard_normal((3, 3, 3, 4)).astype(np.float32))
    b = g.const("b", g.rng.standard_normal(3).astype(np.float32))
    one = dict(stride_h=1, stride_w=1, dilation_h_factor=1, dilation_w_factor=1)
    c = g.op("CONV_2D", [r, w, b], padding=SAME, fused_activation_function=1, **one)
    a = g.op("ADD", [x, g.const("one", np.ones(48, np.float32))])
    first = g.op("ADD", [r, g.const("half", np.full((1, 4, 3, 4), 0.5, np.float32))])
    second = g.op("ADD", [r, g.const("two", np.full((1, 4, 3, 4), 2.0, np.float32))])
    both = g.op("CONCATENATION", [first, second], axis=1)   # parts: views of `both`
    c2 = g.op("CONV_2D", [second, g.const("w2", g.rng.standard_normal((2, 3, 3, 4)).astype(
        np.float32)), g.const("b2", np.zeros(2, np.float32))], padding=SAME, **one)
    content = g.save([x], [c, a, c2, both])
    feed = np.random.default_rng(5).standard_normal((1, 48)).astype(np.float32)
    it = Interpreter(model_content=content)
    ours = run_interpreter(it, [feed])
    theirs = run_litert(content, [feed], reference=False)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o, t, rtol=1e-5, atol=1e-5)
    assert _copies(it)[0] is False and True in _copies(it)   # x in place, the part copied
