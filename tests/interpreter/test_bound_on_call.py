"""kernels.common.bound_on_call: a kernel written as `bind(*arrays) -> step` run unbound binds
at the first call, again when the arrays change, and computes on the arrays it is given (the
one-row SOFTMAX once bound a copy of a strided input, then read that stale copy)."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter.kernels.activations import _softmax_row
from edgelite.interpreter.kernels.common import bound_on_call


def _softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def test_binds_once_per_arrays_and_again_when_they_change():
    made = []

    def bind(x, out):
        made.append((x, out))
        return lambda: np.add(x, 1, out)
    run = bound_on_call(bind, "the test kernel")
    x, out = np.zeros(3, np.float32), np.empty(3, np.float32)
    run(x, out)
    x += 2
    run(x, out)
    np.testing.assert_array_equal(out, 3)
    assert len(made) == 1 and run.bind is bind
    y = np.full(3, 5, np.float32)
    run(y, out)
    np.testing.assert_array_equal(out, 6)
    assert len(made) == 2


def test_a_declined_bind_is_one_clear_error():
    run = bound_on_call(lambda x, out: None, "the test kernel")
    with pytest.raises(ValueError, match="the test kernel needs contiguous arrays"):
        run(np.zeros(2), np.zeros(2))


def test_one_row_softmax_reads_a_strided_input_on_every_call():
    n = 40   # above PYTHON_SOFTMAX: the bound numpy form
    run = _softmax_row((1, n), 1.0)
    rng = np.random.default_rng(0)
    base = rng.standard_normal((1, 2 * n)).astype(np.float32)
    x = base[:, ::2]           # one row, not contiguous
    out = np.empty((1, n), np.float32)
    for _ in range(2):
        run(x, out)
        np.testing.assert_allclose(out[0], _softmax(x[0].astype(np.float64)), rtol=1e-5)
        base[:] = rng.standard_normal(base.shape)   # new values in the same array
