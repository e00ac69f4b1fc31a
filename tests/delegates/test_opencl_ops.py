"""Every delegated op on its own, through the same cases as the CPU kernels (the `CASES` and
`AUTO_CASES` of tests/interpreter/cases_*.py), on the OpenCL delegate against edgelite's CPU
interpreter: max abs error <= 1e-4 x max |ref| in fp32, <= 1e-2 x max |ref| in fp16 (hybrid ops,
float ops on dequantized weights there, against the CPU on the model's float twin: hybrid.py).
Cases the delegate declines (int8 arithmetic, ...) stay on the CPU and must give exactly the
CPU's result.
Needs an OpenCL device, not LiteRT (the cases come from a plain module, op_cases.py)."""
from __future__ import annotations

import pytest

from edgelite.delegates.opencl.ops import OPS  # the table alone: no pyopencl needed to list
from edgelite.interpreter.delegation import placement
from edgelite.schema import load
from tests.delegates.compare import TOLERANCE, assert_matches
from tests.delegates.hybrid import float_twin, hybrid_ops
from tests.interpreter.op_cases import all_cases
from tests.opmodel import run_edgelite, run_interpreter


def _op(case) -> str:
    return load(case.model).subgraphs[0].operators[0].opcode.name


def _cases():
    return [c for c in all_cases("CASES") + all_cases("AUTO_CASES") if _op(c.values[0]) in OPS]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("case", _cases())
def test_op_on_opencl_matches_cpu(case, precision, opencl):
    from edgelite.interpreter import Interpreter

    delegate = opencl(precision)
    ref = run_edgelite(case.model, case.feeds)
    it = Interpreter(model_content=case.model, experimental_delegates=[delegate])
    ours = run_interpreter(it, case.feeds)
    where = [p for p in placement(it) if p["where"] != "folded"]
    if not where or where[0]["where"] != delegate.name:
        # Folded at prepare, or declined (int8 arithmetic, ...): the op stays on the CPU, and
        # with a delegate present the result must be exactly the CPU interpreter's.
        assert not where or "failed" not in (where[0]["reason"] or ""), where[0]["reason"]
        assert_matches(ours, ref, 0.0)
        return
    if hybrid_ops(case.model):
        ref = run_edgelite(float_twin(case.model), case.feeds)
    assert_matches(ours, ref, TOLERANCE[precision])
