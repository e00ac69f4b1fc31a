"""Running the structured hostile fuzzer (hostile.py) over many seeds in edgelite and LiteRT:
worker processes (hostile_worker.py) answer per seed; a worker silent for WATCHDOG_S is hung
(killed, the seed counted as a hang); a worker that dies has crashed on its seed (restarted
after it). Used by tests/schema/test_hostile_fuzz.py and tools/fuzz_hostile_tflite.py."""
from __future__ import annotations

import collections
import json
import os
import select
import subprocess
import sys
import threading

from tests.conftest import REPO_ROOT

# A worker silent this long (wall time) is hung in code the CPU-time check cannot see; the
# worker itself calls a case over 10 s of CPU time a hang (hostile_worker.HANG_CPU_S).
WATCHDOG_S = 90.0
RUNTIMES = ("edgelite", "litert")


class _Worker:
    def __init__(self, runtime: str):
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
                   PYTHONPATH=str(REPO_ROOT))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.schema.hostile_worker", runtime], cwd=REPO_ROOT,
            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def ask(self, seed: int):
        try:
            self.proc.stdin.write(f"{seed}\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return None, "crash"
        ready, _, _ = select.select([self.proc.stdout], [], [], WATCHDOG_S)
        if not ready:
            self.proc.kill()
            self.proc.wait()
            return None, "hang"
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            return None, "crash"
        return json.loads(line), None

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


def _run_seeds(runtime: str, seeds: list, results: dict) -> None:
    from tests.schema.hostile import make_case
    worker = _Worker(runtime)
    for seed in seeds:
        answer, why = worker.ask(seed)
        if answer is None:
            family = make_case(seed)[0]
            answer = {"seed": seed, "family": family, "outcome": why,
                      "detail": f"the worker {'hung' if why == 'hang' else 'died'}"}
            worker = _Worker(runtime)
        results[seed] = answer
    worker.close()


def run(seeds: list, runtimes=RUNTIMES, workers: int = 2) -> dict:
    """{runtime: {seed: answer}} over `seeds`, `workers` processes per runtime at a time."""
    out = {}
    for runtime in runtimes:
        results: dict = {}
        threads = [threading.Thread(target=_run_seeds, args=(runtime, seeds[k::workers],
                                                             results))
                   for k in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out[runtime] = results
    return out


def table(results: dict) -> str:
    """Counts by outcome per runtime, overall and per family."""
    lines = []
    outcomes = ("ran", "refused", "internal", "hang", "blowup", "crash", "generator")
    for runtime, answers in results.items():
        total = collections.Counter(a["outcome"] for a in answers.values())
        lines.append(f"{runtime}: {len(answers)} cases: " + ", ".join(
            f"{o} {total[o]}" for o in outcomes if total[o] or o in ("ran", "refused")))
        by_family: dict = collections.defaultdict(collections.Counter)
        for a in answers.values():
            by_family[a["family"]][a["outcome"]] += 1
        for family in sorted(by_family):
            c = by_family[family]
            lines.append(f"    {family:18s} {sum(c.values()):6d}  " + "  ".join(
                f"{o} {c[o]}" for o in outcomes if c[o]))
    return "\n".join(lines)


# LiteRT refusals that are its XNNPACK delegate's limits, not invalid files (LiteRT's builtin
# kernels run them: a pool window of 32768 rows, a depthwise stride of 256).
DELEGATE_LIMITS = ("XNNPack delegate failed",)


def disagreements(results: dict) -> dict:
    """Seeds where LiteRT refused (as invalid) and edgelite ran, and the other way round."""
    ours, theirs = results.get("edgelite", {}), results.get("litert", {})
    lenient = sorted(s for s in ours if s in theirs and ours[s]["outcome"] == "ran"
                     and theirs[s]["outcome"] == "refused"
                     and not any(w in theirs[s]["detail"] for w in DELEGATE_LIMITS))
    strict = sorted(s for s in ours if s in theirs and ours[s]["outcome"] == "refused"
                    and theirs[s]["outcome"] == "ran")
    return {"edgelite ran, LiteRT refused": lenient, "edgelite refused, LiteRT ran": strict}
