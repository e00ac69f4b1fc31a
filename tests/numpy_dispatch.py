"""Marks for timing-free guards that count Python frames or allocations of an invoke: they
measure numpy 2's dispatch, where array functions are C callables. numpy 1.x runs them through
Python frames of its own (and allocates there), so under numpy < 2 (the numpy 1.24 CI stage,
Debian's python3-numpy) those counts say nothing about edgelite: that stage checks the results,
the main stage these counts."""
from __future__ import annotations

import numpy as np
import pytest

NUMPY2_DISPATCH = pytest.mark.skipif(
    np.lib.NumpyVersion(np.__version__) < "2.0.0",
    reason="counts numpy 2's C-level dispatch; numpy 1.x adds Python frames of its own")
