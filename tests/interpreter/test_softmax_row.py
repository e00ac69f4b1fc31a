"""The one-row float SOFTMAX of at most PYTHON_SOFTMAX values, computed on Python floats read
and written through the arrays' buffers (kernels/activations.py, `_softmax_floats`): as
LiteRT, with a NaN, for contiguous and strided rows."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter.kernels.activations import PYTHON_SOFTMAX, _softmax_floats
from tests.opmodel import In, op_model, run_edgelite, run_litert


@pytest.mark.parametrize("n", [1, 3, 8, PYTHON_SOFTMAX])
@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_short_softmax_row_matches_litert(n, beta):
    content = op_model("SOFTMAX", [In((1, n))], options=dict(beta=beta))
    x = (np.random.default_rng(n).standard_normal((1, n)) * 4).astype(np.float32)
    ours, theirs = run_edgelite(content, [x]), run_litert(content, [x], reference=False)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6, atol=1e-7)
    x[0, n // 2] = np.nan
    assert np.isnan(run_edgelite(content, [x])[0]).all()


def test_short_softmax_row_bound_to_a_strided_row():
    run = _softmax_floats(5, 1.0)
    x = np.arange(10, dtype=np.float32)[::2]           # strided: read through tolist
    out = np.empty(10, np.float32)[1::2]
    run.bind(x, out)()
    e = np.exp(x.astype(np.float64) - x.max())
    np.testing.assert_allclose(out, e / e.sum(), rtol=1e-6)
