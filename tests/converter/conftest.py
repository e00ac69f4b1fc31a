"""Fixtures shared by the converter tests."""
from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def conformance_tool():
    """ONNX's backend node test tool (`edgelite.converter.conformance.tool()`); skips without it
    (fails with EDGELITE_REQUIRE_MODELS=1, as CI sets it)."""
    from edgelite.converter import conformance

    module = conformance.tool()
    if module is None:
        reason = f"{conformance.TOOL_NAME} not found (../shared/tools or $EDGELITE_SHARED_TOOLS)"
        if os.environ.get("EDGELITE_REQUIRE_MODELS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return module
