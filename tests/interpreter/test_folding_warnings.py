"""An operator folded at allocate_tensors (all its inputs constant) computes inf and nan as
quietly as invoke does, and as LiteRT does: no numpy RuntimeWarning reaches the user (under
`-W error` it was an exception)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from tests.opmodel import op_model, run_litert

litert = pytest.importorskip("ai_edge_litert.interpreter", reason="LiteRT is the oracle")
from edgelite.interpreter import Interpreter  # noqa: E402


@pytest.mark.parametrize("op, inputs", [
    ("LOG", [np.array([0.0, -1.0, 1.0], np.float32)]),
    ("DIV", [np.array([1.0, 0.0, -1.0], np.float32), np.zeros(3, np.float32)]),
])
def test_folded_inf_and_nan_without_warnings(op, inputs):
    content = op_model(op, inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        it = Interpreter(model_content=content)
        it.allocate_tensors()
        it.invoke()
        ours = it.get_tensor(it.get_output_details()[0]["index"])
    # LiteRT's default kernels (its reference DIV clamps infinities to the float32 range)
    np.testing.assert_array_equal(ours, run_litert(content, [], reference=False)[0])
