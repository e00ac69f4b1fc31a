"""The float kernels' forms for tiny tensors (issue 17: a classifier's scores, a detector's one
logit): SOFTMAX of one short row and LOGISTIC of one element on Python floats, against LiteRT,
NaN and infinities included."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter.kernels.activations import PYTHON_SOFTMAX
from tests.opmodel import In, op_model, run_edgelite, run_litert


def rows(n: int) -> list:
    return [np.random.default_rng(n).standard_normal((1, n)).astype(np.float32) * 5,
            np.array([[np.nan] + [1.0] * (n - 1)], np.float32),
            np.array([[1.0] * (n - 1) + [np.inf]], np.float32),
            np.full((1, n), -np.inf, np.float32), np.full((1, n), 80.0, np.float32)]


@pytest.mark.parametrize("n", [1, 3, 8, PYTHON_SOFTMAX, PYTHON_SOFTMAX + 1])
@pytest.mark.parametrize("beta", [1.0, 0.5, 0.0])
def test_softmax_of_one_short_row_matches_litert(n, beta):
    model = op_model("SOFTMAX", [In((1, n))], options=dict(beta=beta))
    for x in rows(n):
        ours, theirs = run_edgelite(model, [x])[0], run_litert(model, [x], reference=False)[0]
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7, equal_nan=True)
        assert np.isnan(ours).any() == np.isnan(theirs).any()


@pytest.mark.parametrize("value", [0.0, 3.5, -7.25, 40.0, -100.0, np.inf, -np.inf, np.nan])
def test_logistic_of_one_element_matches_litert(value):
    model = op_model("LOGISTIC", [In((1, 1))])
    x = np.array([[value]], np.float32)
    ours, theirs = run_edgelite(model, [x])[0], run_litert(model, [x], reference=False)[0]
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7, equal_nan=True)
