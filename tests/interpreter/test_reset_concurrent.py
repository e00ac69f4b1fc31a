"""reset_all_variables() is refused like the other calls (ConcurrentUseError) while another
thread is inside invoke() on the same interpreter: it writes the variables that invoke reads."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from edgelite.interpreter import ConcurrentUseError
from tests.interpreter.test_threads import B, W, X, _gates, _model, _ready


def test_reset_all_variables_while_another_thread_invokes_is_refused():
    entered, release = threading.Event(), threading.Event()
    _gates[b"reset_gate"] = (entered, release)
    it = _ready(content=_model(b"reset_gate"))
    out = it.get_output_details()[0]["index"]
    errors: list = []
    a = threading.Thread(target=lambda: errors.append(None) if it.invoke() is None else None)
    a.start()
    try:
        assert entered.wait(10)
        with pytest.raises(ConcurrentUseError, match=r"reset_all_variables\(\) was called while "
                           r"another thread is in invoke\(\)"):
            it.reset_all_variables()
    finally:
        release.set()
        a.join()
        del _gates[b"reset_gate"]
    assert errors == [None]
    it.reset_all_variables()   # free again
    np.testing.assert_allclose(it.get_tensor(out), (X @ W.T + B) @ W.T + B, rtol=1e-4,
                               atol=1e-4)
