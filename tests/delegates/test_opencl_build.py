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


@pytest.mark.opencl
def test_compiler_warnings_are_not_shown(monkeypatch, capfd):
    seen = _build(monkeypatch, "__kernel void NAME(__global float *x) { int z = 3.5; "
                               "x[0] = z; }")
    assert not [w for w in seen if "compiler" in str(w.message).lower()], seen
    err = capfd.readouterr().err
    assert "generated" not in err and "warning" not in err.lower(), err


@pytest.mark.opencl
def test_build_errors_still_raise(monkeypatch):
    from edgelite.delegates import DelegateError

    with pytest.raises(DelegateError, match="failed to build") as err:
        _build(monkeypatch, "__kernel void NAME(__global float *x) { x[0] = undefined_name; }")
    assert "undefined_name" in str(err.value)


def test_op_codes_are_generated_from_the_host_tables():
    """elementwise.cl switches on op codes it does not define: they are #defines generated
    from ops.BINARY / ops.UNARY and put before its text, so host and kernel cannot drift."""
    import re

    from edgelite.delegates.opencl import device, ops

    raw = (device.HERE / "elementwise.cl").read_text()
    assert not re.search(r"#define\s+(OP|UN)_", raw), "op codes hand-written in elementwise.cl"
    used = set(re.findall(r"\b((?:OP|UN)_\w+)\b", raw))
    generated = {f"OP_{op}": code for op, code in ops.BINARY.items()}
    generated.update({f"UN_{op}": code for op, code in ops.UNARY.items()})
    assert used <= set(generated), sorted(used - set(generated))
    text = device._text("elementwise")
    for name, code in generated.items():
        assert f"#define {name} {code}\n" in text
    assert text.endswith(raw)


def test_every_op_builds_with_one_signature():
    """Each op's build is build(node, g): what else a builder needs is on the Builder `g`."""
    import inspect

    from edgelite.delegates.opencl.ops import OPS

    odd = {op: str(inspect.signature(build)) for op, (_, build) in OPS.items()
           if list(inspect.signature(build).parameters) != ["node", "g"]}
    assert not odd, odd
