"""The default resolver's float32 requantization (requantize.Requantizer, not `exact`) against
TFLite's arithmetic (Requantizer.exact): within 1, and on few outputs; its bound form
(bind_finish) the same bits as its unbound one. Negative sums inside the clamp range round with
-2 d (RoundingDivideByPOT's halves away from zero): not `exact`, through copysign (two passes
fewer than a bool mask and its cast)."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter.kernels.requantize import Requantizer
from tests.interpreter.numpy_calls import numpy_calls


def _requantizer(rng, channels: int, right: int, zero_point: int, n: int):
    multiplier = rng.integers(1 << 30, (1 << 31) - 1, channels)
    shift = np.full(channels, -right)
    bias = rng.integers(-3000, 3000, channels)
    # accumulators whose results span the int8 range: |acc| R up to ~200
    real = multiplier * 2.0 ** (-right - 31)
    acc_bound = np.ceil(200 / real)
    # (scaled_error: the float32 products' error, as the convolutions give it; with an
    # acc_bound instead, small outputs would take the exact float64 path)
    r = Requantizer(multiplier, shift, zero_point, -128, 127, (n, channels), bias, tile=4,
                    scaled_error=np.full(channels, 2.0 ** -14), exact=False)
    acc = np.floor(rng.uniform(-1, 1, (n, channels)) * acc_bound).astype(np.float32)
    return r, acc


@pytest.mark.parametrize("right", [2, 3, 4, 6])   # (1: 2 d = 1/2, no fast path)
@pytest.mark.parametrize("n", [16, 1024])
def test_signed_fast_path_within_one_of_the_reference(right, n):
    rng = np.random.default_rng(right * 100 + n)
    r, acc = _requantizer(rng, 24, right, 5, n)
    assert r.fast and r.signed and r.sign_copy
    want = r.exact(acc.astype(np.int64))
    got = np.empty((n, 24), np.int8)
    r(acc.copy(), got, r.work())
    diff = got.astype(int) - want
    assert np.abs(diff).max() <= 1
    print(f"right shift {right}, {n} x 24: {np.count_nonzero(diff)} differ")
    inside = (want > -128) & (want < 127)
    assert np.count_nonzero(diff) <= max(2, 0.02 * np.count_nonzero(inside)), \
        np.count_nonzero(diff)
    # negative results inside the range are there (the -2 d branch ran)
    assert np.count_nonzero((want < 5) & inside) > n


@pytest.mark.parametrize("n", [16, 1024, 8192])
def test_bound_finish_gives_the_unbound_bits(n, monkeypatch):
    """bind_finish (flat tiled vectors for small outputs, rows beyond) and __call__'s fast path
    (broadcast rows): the same passes on the same values, so the same bits. Bound, 7 numpy
    calls (the offset, the -2 d in three, clip, cast, sign flip; with a bool mask and its
    cast, 8), none broadcasting on small outputs."""
    rng = np.random.default_rng(n)
    r, acc = _requantizer(rng, 24, 3, -7, n)
    want = np.empty((n, 24), np.int8)
    r(acc.copy(), want, r.work())
    shape, real, _ = r._rows(acc.size)
    s = np.multiply(acc.reshape(shape), real).astype(np.float32).reshape(n, 24)
    got = np.empty((n, 24), np.int8)
    run = r.bind_finish(s, got, r.work(), True)
    assert run is not None
    run()
    np.testing.assert_array_equal(got, want)
    if np.lib.NumpyVersion(np.__version__) >= "2.0.0":     # (numpy_calls: numpy 2's dispatch)
        counts = numpy_calls(run, monkeypatch)
        assert counts["ufuncs"] + counts["builtins"] <= 7, counts
        assert n * 24 > 4096 or counts["broadcasts"] == 0, counts
