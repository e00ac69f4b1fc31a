"""The OpenCL delegate for tests: one per precision, made once per session (so one context and
one set of compiled programs), or a skip with one reason when pyopencl or a device is missing.
Tests that use it carry the marker `opencl`."""
from __future__ import annotations

import pytest

_DELEGATES: dict = {}


def opencl_delegate(precision: str = "fp32"):
    """The session's OpenCL delegate for `precision`; skips the calling test without one."""
    pytest.importorskip("pyopencl", reason="pyopencl is not installed: pip install -e '.[dev]' "
                                           "(pyopencl[pocl] brings a CPU OpenCL device)")
    from edgelite.delegates import DelegateError, load_delegate
    if precision not in _DELEGATES:
        try:
            _DELEGATES[precision] = load_delegate("opencl", {"precision": precision})
        except DelegateError as e:
            _DELEGATES[precision] = e
    d = _DELEGATES[precision]
    if isinstance(d, Exception):
        pytest.skip(f"no OpenCL device: {d}")
    return d


@pytest.fixture(name="opencl", scope="session")
def opencl_fixture():
    return opencl_delegate


def pytest_collection_modifyitems(items):
    """A test that asks for the `opencl` fixture is marked `opencl` (`-m opencl` runs them)."""
    for item in items:
        if "opencl" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.opencl)
