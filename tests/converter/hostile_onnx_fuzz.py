"""Running hostile ONNX cases (tests/converter/hostile_onnx.py) in worker processes: each case
under an alarm (CASE_TIMEOUT_S: longer is a hang) and an address-space limit of MEMORY_EXTRA
above the worker's baseline (more is a blow-up); a worker that dies is restarted, its case
being a crash; one silent past the watchdog is killed, its case a hang.

    from tests.converter.hostile_onnx_fuzz import fuzz, FAILURES
    results = fuzz(range(1000))     # [{"seed", "what", "outcome", "seconds"}]
"""
from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from pathlib import Path

CASE_TIMEOUT_S = 10.0
MEMORY_EXTRA = 2 * 1024 ** 3
WATCHDOG_S = CASE_TIMEOUT_S + 30.0   # a worker silent this long is stuck in C code
REPO_ROOT = Path(__file__).resolve().parents[2]
WORKER = r"""
import json, os, resource, signal, sys, time
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
from tests.converter import hostile_onnx
import edgelite.converter.convert, edgelite.interpreter   # imported before the limit
with open("/proc/self/statm") as f:
    base = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
limit = base + int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
timed_out = [False]
def alarm(signum, frame):
    timed_out[0] = True
    raise TimeoutError("case time limit")
signal.signal(signal.SIGALRM, alarm)
for line in sys.stdin:
    seed = int(line)
    what, model = hostile_onnx.case(seed)
    timed_out[0] = False
    start = time.perf_counter()
    signal.setitimer(signal.ITIMER_REAL, float(sys.argv[1]))
    try:
        outcome = hostile_onnx.run_case(model)
    except TimeoutError:
        outcome = "hang"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if timed_out[0]:
        outcome = "hang"
    print(json.dumps({"seed": seed, "what": what, "outcome": outcome,
                      "seconds": round(time.perf_counter() - start, 3)}), flush=True)
"""


def is_failure(outcome: str) -> bool:
    """Hangs, blow-ups, internal errors and crashes, in the converter or in the interpreter."""
    return any(word in outcome for word in ("hang", "blow-up", "internal", "crash"))


class _Worker:
    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(CASE_TIMEOUT_S), str(MEMORY_EXTRA)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, cwd=REPO_ROOT)

    def run(self, seed: int) -> dict | None:
        """The case's result, or None when the worker died or went silent (then it is gone)."""
        try:
            self.proc.stdin.write(f"{seed}\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return None
        deadline = time.monotonic() + WATCHDOG_S
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 1.0)
            if ready:
                line = self.proc.stdout.readline()
                return json.loads(line) if line else None
            if self.proc.poll() is not None:
                return None
        self.close()
        return {"seed": seed, "what": "?", "outcome": "hang (watchdog)", "seconds": WATCHDOG_S}

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def fuzz(seeds, progress=None) -> list:
    """Run every seed's case; a list of results (see the module docstring)."""
    from tests.converter.hostile_onnx import case

    results, worker = [], None
    for seed in seeds:
        worker = worker or _Worker()
        result = worker.run(seed)
        if result is None or result["outcome"].startswith("hang (watchdog)"):
            code = worker.proc.poll()
            worker.close()
            worker = None
            if result is None:
                result = {"seed": seed, "what": case(seed)[0], "seconds": None,
                          "outcome": f"crash (worker exit {code})"}
        results.append(result)
        if progress:
            progress(result)
    if worker:
        worker.close()
    return results
