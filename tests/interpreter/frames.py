"""Call counts for the timing-free guards of an invoke's cost (issue 17): test_invoke_overhead,
test_int8_invoke_overhead and test_fusion count with these (marked NUMPY2_DISPATCH)."""
from __future__ import annotations

import sys

# Python functions an invoke runs besides its kernels: Interpreter.invoke, threads.enter and
# leave, the generated run_steps (the BLAS thread lock and numpy's error state are entered with
# no Python frame; Interpreter.invoke runs SubgraphPlan.invoke's lines itself: was 5).
INVOKE_FRAMES = 4


def calls(fn) -> tuple:
    """(Python function calls, C function calls: numpy's among them) while `fn` runs once."""
    count = {"call": 0, "c_call": 0}

    def profile(frame, event, arg):
        if event in count:
            count[event] += 1
    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return count["call"], count["c_call"]


def python_calls(fn) -> int:
    """Python-level function calls (profile 'call' events) while `fn` runs once."""
    return calls(fn)[0]
