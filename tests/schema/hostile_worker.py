"""The structured hostile fuzzer's worker: seeds on stdin, one a line; for each, the case from
`hostile.make_case(seed)` runs in one runtime (edgelite or LiteRT: argv[1]) under an address
space limit of the worker's baseline plus 2 GiB, and one JSON line answers:
{"seed", "family", "outcome", "detail"}.

Outcomes: "ran" (allocated and invoked), "refused" (one clear error), "internal" (edgelite
only: an error that is, or wraps, an internal exception such as TypeError or IndexError),
"blowup" (a MemoryError other than edgelite's budget refusal: past the address-space limit),
"hang" (more than HANG_CPU_S of CPU time: CPU, not wall time, so a loaded machine does not
make a slow case a hang). The parent (tools/fuzz_hostile_tflite.py,
tests/schema/test_hostile_fuzz.py) adds "hang" (no answer within its watchdog) and "crash"
(the worker died).

Run one case by hand:  python -m tests.schema.hostile_worker edgelite --show SEED
"""
from __future__ import annotations

import json
import os
import re
import resource
import sys
import time

import numpy as np

LIMIT_EXTRA = 2 << 30
HANG_CPU_S = 10.0   # a case (a file under 1 MB) taking more CPU time than this is a hang
INTERNAL = ("TypeError", "IndexError", "KeyError", "AttributeError", "RecursionError",
            "ZeroDivisionError", "OverflowError", "AssertionError", "NameError",
            "UnboundLocalError", "StopIteration", "FloatingPointError")
_INTERNAL_WORDS = re.compile(r"\b\w*(" + "|".join(INTERNAL) + r")\b")   # UFuncTypeError too
# What the interpreter writes around an exception no check of a kernel named (numpy's ValueError
# "cannot reshape", "array is too big"): "... failed: ValueError: ...", "cannot be prepared:
# ...", "cannot be folded (its inputs are constants): ..."; the named errors may nest in these.
_WRAPPED = re.compile(r"(failed|cannot be prepared|cannot be folded \(its inputs are "
                      r"constants\)): (\w+): ")
_NAMED = ("RuntimeError", "KernelError", "MemoryBudgetError", "IndexOutOfRange")


def _limit_memory() -> None:
    with open("/proc/self/statm") as f:
        baseline = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = baseline + LIMIT_EXTRA
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _interpreter_class(runtime: str):
    if runtime == "litert":
        from ai_edge_litert.interpreter import Interpreter
    else:
        from edgelite.interpreter import Interpreter
    return Interpreter


def run(runtime: str, content: bytes) -> tuple:
    """(outcome, detail) of allocating and invoking `content` once, inputs all ones."""
    cls = _interpreter_class(runtime)
    try:
        it = cls(model_content=content)
        it.allocate_tensors()
        for d in it.get_input_details():
            it.set_tensor(d["index"], np.ones(d["shape"], d["dtype"]))
        it.invoke()
        for d in it.get_output_details():
            if np.prod(d["shape"]) > 0:   # LiteRT's get_tensor refuses an empty tensor
                it.get_tensor(d["index"])
        return "ran", ""
    except MemoryError as e:
        if runtime == "edgelite":
            from edgelite.interpreter.budget import MemoryBudgetError
            if isinstance(e, MemoryBudgetError):
                return "refused", f"{type(e).__name__}: {e}"[:300]
        return "blowup", f"{type(e).__name__}: {e}"[:300]
    except Exception as e:  # noqa: BLE001 - classified below
        detail = f"{type(e).__name__}: {e}"[:300]
        if isinstance(e.__cause__, MemoryError) and runtime == "edgelite" and \
                type(e.__cause__).__name__ != "MemoryBudgetError":
            return "blowup", detail          # an allocation past the limit, wrapped
        if runtime == "edgelite" and _is_internal(e):
            return "internal", detail
        return "refused", detail


def _is_internal(e: BaseException) -> bool:
    """An error that is, wraps, or quotes an internal exception (not one of the named
    errors a bad model gets)."""
    seen = 0
    while e is not None and seen < 8:
        if type(e).__name__ in INTERNAL or _INTERNAL_WORDS.search(str(e)):
            return True
        if any(m.group(2) not in _NAMED for m in _WRAPPED.finditer(str(e))):
            return True
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
        seen += 1
    return False


def main(argv: list) -> None:
    from tests.schema import hostile
    runtime = argv[0]
    if len(argv) > 2 and argv[1] == "--show":
        family, content = hostile.make_case(int(argv[2]))
        print(family, len(content), "bytes:", run(runtime, content))
        return
    _limit_memory()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)     # LiteRT's INFO lines
    for line in sys.stdin:
        seed = int(line)
        try:
            family, content = hostile.make_case(seed)
        except Exception as e:  # noqa: BLE001 - the generator itself failed: a bug to see
            print(json.dumps({"seed": seed, "family": "?", "outcome": "generator",
                              "detail": f"{type(e).__name__}: {e}"[:300]}), flush=True)
            continue
        start = time.process_time()
        outcome, detail = run(runtime, content)
        cpu = time.process_time() - start
        if cpu > HANG_CPU_S:
            outcome, detail = "hang", f"{cpu:.1f} s of CPU ({outcome}: {detail})"[:300]
        print(json.dumps({"seed": seed, "family": family, "outcome": outcome,
                          "detail": detail, "bytes": len(content), "cpu_s": round(cpu, 3)}),
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
