"""`python -m edgelite.distributed predict MODEL --data X.npz [-o OUT.npz] [--workers N]`: batch
inference on Ray (a local cluster, or `--address` / $RAY_ADDRESS), with progress on stderr and
throughput per worker. (Distributed training is `edgelite train ... --workers N`.)"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m edgelite.distributed")
    sub = p.add_subparsers(dest="command", required=True)
    pr = sub.add_parser("predict", help="score an .npz with a model on an actor pool")
    pr.add_argument("model", type=Path)
    pr.add_argument("--data", type=Path, required=True,
                    help="an .npz keyed by the model's input names (or x / input_0 for one)")
    pr.add_argument("-o", "--output", type=Path, help="write the outputs here (.npz by name)")
    pr.add_argument("--workers", type=int, default=2, help="interpreter actors in the pool")
    pr.add_argument("--batch-size", type=int, default=256)
    pr.add_argument("--signature", help="the signature to run (default: the first)")
    pr.add_argument("--address", help="a running Ray cluster (default: start a local one)")
    pr.add_argument("--num-cpus", type=int, help="CPUs of the local cluster it starts")
    pr.add_argument("--json", action="store_true", help="print the summary as JSON")
    return p


def _fail(message: str) -> None:
    sys.stderr.write(f"error: {message}\n")
    raise SystemExit(2)


def predict_command(args) -> dict:
    from edgelite.distributed import _ray
    from edgelite.distributed.inference import Scorer, predict
    from edgelite.interpreter.training import as_model
    from edgelite.schema import save

    if args.workers < 1 or args.batch_size < 1:
        _fail("--workers and --batch-size must be at least 1")
    try:
        content = save(as_model(args.model))
    except (OSError, ValueError) as e:
        _fail(f"{args.model}: {e}")
    with np.load(args.data) as z:
        arrays = {k: z[k] for k in z.files}
    names = Scorer(content, args.signature).inputs
    inputs = {}
    for k, name in enumerate(names):
        keys = [name, f"input_{k}"] + (["x"] if len(names) == 1 else [])
        key = next((c for c in keys if c in arrays), None)
        if key is None:
            _fail(f"--data {args.data.name} has no array for input {' or '.join(keys)} "
                  f"(it has: {', '.join(sorted(arrays))})")
        inputs[name] = arrays[key]
    try:
        _ray.init(num_cpus=args.num_cpus, address=args.address)
    except ImportError as e:
        _fail(str(e))
    last = [0.0]

    def progress(done, total):
        now = time.perf_counter()
        if now - last[0] > 0.5 or done == total:
            sys.stderr.write(f"scored {done}/{total}\n")
            last[0] = now

    result = predict(content, inputs, workers=args.workers, batch_size=args.batch_size,
                     signature=args.signature, progress=progress)
    if args.output is not None:
        np.savez(args.output, **result.outputs)
    return {"samples": result.samples, "seconds": result.seconds,
            "per_second": result.per_second, "workers": args.workers,
            "per_worker": result.per_worker,
            "output": None if args.output is None else str(args.output)}


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    summary = predict_command(args)
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"{summary['samples']} samples in {summary['seconds']:.1f} s "
              f"({summary['per_second']:.0f}/s, Ray Data's start included)")
        for worker, w in summary["per_worker"].items():
            print(f"  {worker}: {w['samples']} samples, {w['per_second']:.0f}/s busy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
