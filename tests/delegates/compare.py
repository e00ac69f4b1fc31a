"""How close a delegate's outputs must be to the CPU interpreter's (shared by the OpenCL op,
fusion and model suites; a plain module: importing it skips nothing)."""
from __future__ import annotations

import numpy as np

# Max abs error allowed, relative to the reference's max |value|, per precision.
TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2}


def assert_matches(ours: list, ref: list, rel: float) -> None:
    """Same shapes, dtypes and inf/nan positions; integers equal; floats within `rel` x the
    reference's max |finite value|."""
    assert len(ours) == len(ref)
    for k, (a, b) in enumerate(zip(ours, ref)):
        assert a.shape == b.shape and a.dtype == b.dtype, f"output {k}"
        if not np.issubdtype(b.dtype, np.floating):
            np.testing.assert_array_equal(a, b, err_msg=f"output {k}")
            continue
        finite = np.isfinite(b)
        np.testing.assert_array_equal(np.isfinite(a), finite, err_msg=f"output {k}: inf/nan")
        if not finite.any():
            continue
        err = float(np.max(np.abs(a[finite].astype(np.float64) - b[finite])))
        bound = rel * float(np.max(np.abs(b[finite])))
        assert err <= bound, f"output {k}: max abs error {err:.3g} > {bound:.3g}"
