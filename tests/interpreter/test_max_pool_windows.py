"""MAX_POOL_2D windows one tap wide or high with strides (found by the hostile ONNX fuzz run in
LiteRT beside edgelite, issue 19: a 2x1 window at stride 2x2, which an ONNX MaxPool lowers to,
failed at invoke with "operands could not be broadcast" in the plan-bound kernel, which read
every column for a window one column wide). Each shape against LiteRT's reference kernels."""
from __future__ import annotations

import numpy as np
import pytest

from tests.opmodel import In, op_model, run_edgelite, run_litert

pytest.importorskip("ai_edge_litert", reason="LiteRT (ai-edge-litert) is the oracle")


@pytest.mark.parametrize("window,strides", [((2, 1), (2, 2)), ((1, 1), (2, 3)),
                                            ((1, 2), (3, 2)), ((3, 1), (1, 2)),
                                            ((2, 2), (2, 2)), ((1, 3), (2, 1))])
@pytest.mark.parametrize("padding", [0, 1], ids=["SAME", "VALID"])
def test_max_pool_windows_match_litert(window, strides, padding):
    options = {"padding": padding, "filter_height": window[0], "filter_width": window[1],
               "stride_h": strides[0], "stride_w": strides[1], "fused_activation_function": 0}
    model = op_model("MAX_POOL_2D", [In((1, 8, 9, 3))], options=options)
    x = np.random.default_rng(5).standard_normal((1, 8, 9, 3)).astype(np.float32)
    for _ in range(2):          # the plan binds its arrays at allocate: run twice
        ours = run_edgelite(model, [x])
    theirs = run_litert(model, [x])
    assert ours[0].shape == theirs[0].shape
    np.testing.assert_array_equal(ours[0], theirs[0])
