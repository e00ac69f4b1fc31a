"""A global pool (one window over the whole input, as MediaPipe's selfie segmentation's ten
AVERAGE_POOL_2D) is one ufunc.reduce over the pixels instead of a fold of h*w taps (16384
numpy calls of 16 values for 128x128x16: 6.8 of the model's ~14 ms). The reduce adds the
pixels in the fold's order, so the values are the fold's bit for bit; LiteRT within the usual
tolerance. Timing-free guard: numpy calls per invoke."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import Interpreter
from tests.opmodel import In, assert_close, op_model, run_litert

SHAPES = [(1, 128, 128, 16), (2, 16, 16, 32), (1, 7, 7, 96), (1, 1, 1, 8)]


def _fold(x, ufunc):
    taps = [x[:, i, j] for i in range(x.shape[1]) for j in range(x.shape[2])]
    o = taps[0].copy()
    for t in taps[1:]:
        ufunc(o, t, out=o)
    return o[:, None, None]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "L2_POOL_2D", "MAX_POOL_2D"])
def test_global_pool(op, shape):
    n, h, w, c = shape
    model = op_model(op, [In(shape)], options=dict(padding=1, stride_h=h, stride_w=w,
                                                   filter_height=h, filter_width=w))
    x = (np.random.default_rng(3).standard_normal(shape) * 4).astype(np.float32)
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    ours = it.get_tensor(it.get_output_details()[0]["index"])
    if op == "AVERAGE_POOL_2D":
        want = _fold(x, np.add) / np.float32(h * w)
    elif op == "L2_POOL_2D":
        want = np.sqrt(_fold(np.square(x), np.add) / np.float32(h * w))
    else:
        want = _fold(x, np.maximum)
    np.testing.assert_array_equal(ours, want)
    assert_close([ours], run_litert(model, [x], False), rtol=1e-5, atol=1e-5)
    # the pool's step, written into the plan's run_steps: its calls (a ufunc call is no C
    # call to the profiler: counting those could not fail); the fold made h*w - 1 of them
    (line,) = it._main.run_steps.source.splitlines()[2:]
    assert line.count(";") + 1 <= 5, line[:200]
