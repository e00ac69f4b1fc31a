"""Building the OpenCL delegate's programs shows users no compiler chatter (pyopencl's
CompilerWarning, the "N warnings generated." PoCL's compiler prints on descriptor 2), while a
failed build still raises with its log."""
from __future__ import annotations

import uuid
import warnings

import pytest

from .conftest import opencl_delegate


def _build(monkeypatch, body: str):
    from edgelite.delegates.opencl import device

    name = f"test_{uuid.uuid4().hex}"    # new code (PoCL's cache ignores comments): no cache
    monkeypatch.setitem(device._SOURCES, name, body.replace("NAME", name) + "\n")  # has it
    dev = opencl_delegate().dev
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        dev.build([(name, ())])
    return seen


def test_compiler_warnings_are_not_shown(monkeypatch, capfd):
    seen = _build(monkeypatch, "__kernel void NAME(__global float *x) { int z = 3.5; "
                               "x[0] = z; }")
    assert not [w for w in seen if "compiler" in str(w.message).lower()], seen
    err = capfd.readouterr().err
    assert "generated" not in err and "warning" not in err.lower(), err


def test_build_errors_still_raise(monkeypatch):
    from edgelite.delegates import DelegateError

    with pytest.raises(DelegateError, match="failed to build") as err:
        _build(monkeypatch, "__kernel void NAME(__global float *x) { x[0] = undefined_name; }")
    assert "undefined_name" in str(err.value)
