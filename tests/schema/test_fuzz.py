"""Fuzz the loader and writer with seeded mutations of the shared models.

Each case runs in a worker process (tests/schema/fuzz_worker.py) under an alarm (1 s, or 8x the
unmutated model's run on this machine if longer: busy and slow machines pass alike) and an
address space limit of 2 GiB above the worker's baseline; many cases run per worker, and a worker
that dies is restarted, the case that killed it being a failure. Allowed outcomes: loaded (then
`save` succeeds or raises ModelError, and what it saved loads again; then the interpreter
allocates and invokes it, or refuses it with one clear error) or ModelError.

EDGELITE_FUZZ_CASES (default 3000) sets the number of cases, EDGELITE_FUZZ_SEED (default 0) the
first seed. Run with -s to see the counts.
"""
from __future__ import annotations

import collections
import json
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

from edgelite.schema import load, save
from tests.conftest import REPO_ROOT

CASES = int(os.environ.get("EDGELITE_FUZZ_CASES", "3000"))
FIRST_SEED = int(os.environ.get("EDGELITE_FUZZ_SEED", "0"))
CASE_TIMEOUT_S = 1.0
MEMORY_EXTRA = 2 * 1024 ** 3
WATCHDOG_S = 20.0  # a worker silent this long is hung in C code the alarm cannot interrupt
# Smaller models are fuzzed more: they are fast and have the same structures.
WEIGHTS = {"digits_cnn_int8": 10, "digits_cnn": 10, "mwk_okay_nabu": 10, "mp_face_detection": 5,
           "mp_hand_landmark": 1, "mobilenet_v2_int8": 0.3, "mobilenet_v2": 0.1}


def _corpus(models_dir: Path, tmp: Path) -> Path:
    import numpy as np

    from tests.interpreter.sparse_models import DENSE, SPARSE_CSR, densify_model, encode
    from tests.schema.test_from_scratch import build_model
    corpus = [{"name": p.stem, "path": str(p), "weight": WEIGHTS.get(p.stem, 1)}
              for p in sorted(models_dir.glob("*.tflite"))]
    dense = np.arange(48, dtype=np.float32).reshape(6, 8) % 5 - 2  # a third of it zeros
    values, sparsity = encode(dense, (0, 1, 2), (DENSE, SPARSE_CSR, DENSE), (1,), (2,), np.uint8)
    extras = {"digits_cnn_large": save(load(models_dir / "digits_cnn.tflite"), large=True),
              "from_scratch": save(build_model()),
              "sparse_fc": densify_model(values, dense.shape, sparsity, "FULLY_CONNECTED",
                                         input_shape=(1, 8))}
    for name, content in extras.items():
        path = tmp / f"{name}.tflite"
        path.write_bytes(content)
        corpus.append({"name": name, "path": str(path), "weight": 5})
    path = tmp / "corpus.json"
    path.write_text(json.dumps(corpus))
    return path


class _Worker:
    def __init__(self, corpus_json: Path):
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
                   MKL_NUM_THREADS="1", PYTHONPATH=str(REPO_ROOT))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.schema.fuzz_worker", str(corpus_json),
             str(CASE_TIMEOUT_S), str(MEMORY_EXTRA)],
            cwd=REPO_ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, bufsize=1)

    def run(self, seed: int) -> tuple:
        """(answer, None) for `seed`, or (None, why) when the worker died or hung (then it is
        killed)."""
        try:
            self.proc.stdin.write(f"{seed}\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return None, self._death()
        ready, _, _ = select.select([self.proc.stdout], [], [], WATCHDOG_S)
        if not ready:
            self.proc.kill()
            self.proc.wait()
            return None, f"hung for more than {WATCHDOG_S} s (killed)"
        line = self.proc.stdout.readline()
        return (json.loads(line), None) if line else (None, self._death())

    def _death(self) -> str:
        self.proc.wait()
        err = self.proc.stderr.read()[-1500:]
        return f"worker died with exit status {self.proc.returncode}: {err}"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


def _run_seeds(corpus_json: Path, seeds: list, results: list) -> None:
    worker = _Worker(corpus_json)
    for seed in seeds:
        answer, why = worker.run(seed)
        if answer is None:
            results.append({"seed": seed, "model": "?", "kind": "?", "outcome": "failure",
                            "detail": why})
            worker = _Worker(corpus_json)
        else:
            results.append(answer)
    worker.close()


def test_fuzz_load_save_and_run(models_dir, tmp_path):
    corpus_json = _corpus(models_dir, tmp_path)
    seeds = list(range(FIRST_SEED, FIRST_SEED + CASES))
    n_workers = max(1, min(8, (os.cpu_count() or 2)))
    results: list = []
    start = time.monotonic()
    threads = [threading.Thread(target=_run_seeds, args=(corpus_json, seeds[k::n_workers],
                                                         results))
               for k in range(n_workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start

    outcomes = collections.Counter(r["outcome"] for r in results)
    by_kind: dict = collections.defaultdict(collections.Counter)
    by_model: dict = collections.defaultdict(collections.Counter)
    for r in results:
        by_kind[r["kind"]][r["outcome"]] += 1
        by_model[r["model"]][r["outcome"]] += 1
    print(f"\nfuzz: {len(results)} cases (seeds {FIRST_SEED}..{FIRST_SEED + CASES - 1}) in "
          f"{elapsed:.1f} s on {n_workers} workers: loaded, saved and ran {outcomes['ran']}, "
          f"allocated only (too big to run) {outcomes['allocated']}, refused by the interpreter "
          f"{outcomes['run_error']}, loaded but save refused {outcomes['save_error']}, "
          f"ModelError {outcomes['model_error']}, failures {outcomes['failure']}")
    for title, table in (("by mutation kind", by_kind), ("by model", by_model)):
        print(f"  {title}:")
        for key in sorted(table):
            c = table[key]
            print(f"    {key:20s} {sum(c.values()):6d}  ran {c['ran']:5d}  allocated "
                  f"{c['allocated']:4d}  run_error {c['run_error']:5d}  save_error "
                  f"{c['save_error']:4d}  model_error {c['model_error']:6d}  failure "
                  f"{c['failure']:3d}")
    failures = sorted((r for r in results if r["outcome"] == "failure"), key=lambda r: r["seed"])
    assert len(results) == CASES
    assert not failures, (
        f"{len(failures)} failing seeds {[r['seed'] for r in failures][:50]}; replay one with "
        f"`python -m tests.schema.fuzz_worker --show SEED {corpus_json}`:\n"
        + "\n".join(f"seed {r['seed']} ({r['model']}, {r['kind']}): {r['detail']}"
                    for r in failures[:10]))
