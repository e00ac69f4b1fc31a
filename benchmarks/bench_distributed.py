"""edgelite.distributed's throughput on this machine: 1 against 2 Ray workers.

    python benchmarks/bench_distributed.py [--repeats 3] [--json OUT]   (edgelite[distributed])

On a local `ray.init(num_cpus=2)` cluster, the digits CNN (its two FULLY_CONNECTED layers
trainable, Adam): single-process `train` steps/s at batch 32; sync data-parallel steps/s with 1
and 2 workers at the global batch 32 (one epoch, 45 steps, actors started before the clock);
async updates/s with 2 workers; batch inference over 10,000 inputs (batch 256) with 1 and 2
actors: the wall clock (Ray Data's start included) and the actors' busy inferences/s; the
2-stage pipeline against 1 stage over 100 batches of 32. Medians of --repeats runs.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

MODELS = Path(__file__).resolve().parents[1].parent / "shared" / "models"


def _digits():
    from edgelite.interpreter.training import make_trainable, reinitialize
    from edgelite.schema import load, save

    data = np.load(MODELS / "digits.npz")
    x = np.ascontiguousarray(data["x_train"].transpose(0, 2, 3, 1))
    y = data["y_train"].astype(np.int32)
    src = load(MODELS / "digits_cnn.tflite")
    sg = src.subgraphs[0]
    fcs = [op for op in sg.operators if op.opcode.builtin == "FULLY_CONNECTED"]
    reinitialize(src, [sg.tensors[op.inputs[1]].name for op in fcs], seed=0)
    return src, save(make_trainable(src, trainable="last:2", gradients=True)), x, y


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    import ray

    from edgelite.distributed import DataParallel, Pipeline, predict
    from edgelite.interpreter import Interpreter
    from edgelite.interpreter.training import export_frozen, extend, fit

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    src, content, x, y = _digits()
    rows = {}

    def median(name, fn):
        values = [fn() for _ in range(args.repeats)]
        rows[name] = statistics.median(values)
        print(f"{name:42s} {rows[name]:10.1f}", flush=True)

    median("single-process train steps/s", lambda: fit(
        Interpreter(model_content=content, num_threads=1), {"image": x}, y,
        batch_size=32).steps_per_second)
    for workers in (1, 2):
        median(f"sync {workers} worker(s) steps/s", lambda w=workers: DataParallel(
            content, {"image": x}, y, w, "sync", batch_size=32).run().steps_per_second)
    median("async 2 workers updates/s (half batches)", lambda: DataParallel(
        content, {"image": x}, y, 2, "async", batch_size=32, max_staleness=2)
        .run().steps_per_second)
    frozen = export_frozen(extend(src))
    images = np.concatenate([x] * 7)[:10_000]
    for workers in (1, 2):
        results = []

        def wall(w=workers, results=results):
            results.append(predict(frozen, {"image": images}, workers=w))
            return results[-1].per_second
        median(f"batch inference {workers} actor(s) wall /s", wall)
        busy = [sum(v["per_second"] for v in r.per_worker.values()) for r in results]
        rows[f"batch inference {workers} actor(s) busy /s"] = statistics.median(busy)
        print(f"{'batch inference ' + str(workers) + ' actor(s) busy /s':42s} "
              f"{rows[f'batch inference {workers} actor(s) busy /s']:10.1f}")
    stream = [{"image": x[(32 * k) % 1400:(32 * k) % 1400 + 32]} for k in range(100)]
    for stages in (1, 2):
        pipe = Pipeline(frozen, stages=stages)
        list(pipe.map(stream[:4]))  # started

        def timed(pipe=pipe):
            t = time.perf_counter()
            list(pipe.map(stream))
            return len(stream) / (time.perf_counter() - t)
        median(f"pipeline {stages} stage(s) batches/s", timed)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
