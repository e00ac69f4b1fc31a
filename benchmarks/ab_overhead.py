"""A/B of the per-invoke cost of tiny models (issue 17, goal 1): an older edgelite tree against
this one and LiteRT, in one process.

    python benchmarks/ab_overhead.py --before ROOT [--blocks 20] [--models LIST]

ROOT holds an `edgelite` package (a worktree of the repository at the commit before:
`git worktree add ROOT/edgelite COMMIT`). Its modules are imported first, under their own
names, then set aside, so both interpreters live in this process (a function of the old tree
that imports a module while running gets today's). For each model (bench_overhead's names,
plus `chain`, `chain_relu` and their [8]-wide `chain_x8`, `chain_relu_x8`: its 200-op chains):
CPU time of this thread per invoke of before, after and LiteRT in alternating blocks (the
order rotates; bench_overhead.us_per_op), medians; for before and after, the Python frames of
one invoke.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # before numpy loads OpenBLAS

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_overhead as bo  # noqa: E402

MODELS = ("chain,chain_relu,chain_x8,chain_relu_x8,digits_cnn.tflite,keras_kws_head.float32,"
          "silero_vad,mwk_okay_nabu.tflite,default.tflite,mobilenet_v2.tflite")


def _ours(name: str) -> bool:
    return name == "edgelite" or name.startswith("edgelite.")


def load_before(root: str) -> dict:
    """The modules of the edgelite tree under `root` ({name: module}), imported and set aside
    (`switched` puts them back in sys.modules while old code is built)."""
    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if _ours(k)}
    sys.path.insert(0, root)
    try:
        importlib.invalidate_caches()
        old = importlib.import_module("edgelite.interpreter")
        importlib.import_module("edgelite.interpreter.kernels")
        modules = {k: sys.modules.pop(k) for k in list(sys.modules) if _ours(k)}
    finally:
        sys.path.remove(root)
        sys.modules.update(saved)
    assert Path(old.__file__).resolve().is_relative_to(Path(root).resolve()), old.__file__
    return modules


@contextlib.contextmanager
def switched(modules: dict):
    """sys.modules' edgelite entries are `modules` inside (a kernel module imported lazily
    while preparing comes from that tree, and stays in `modules`)."""
    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if _ours(k)}
    sys.modules.update(modules)
    try:
        yield
    finally:
        modules.update({k: sys.modules.pop(k) for k in list(sys.modules) if _ours(k)})
        sys.modules.update(saved)


def frames(it) -> int:
    """Python frames (profile 'call' events) of one invoke. (numpy's ufunc calls are no profile
    events, and kernels bind ufuncs at import: those are left uncounted.)"""
    count = [0]

    def profile(frame, event, arg):
        if event == "call":
            count[0] += 1
    sys.setprofile(profile)
    try:
        it.invoke()
    finally:
        sys.setprofile(None)
    return count[0]


def model_content(name: str, tmp: str):
    if name in ("chain", "chain_relu", "chain_x8", "chain_relu_x8"):
        return bo.chain_model(200, "relu" in name, 8 if name.endswith("x8") else 1), 200
    path = bo.model_path(name, tmp)
    if path is None and name == "default.tflite":
        sample = Path(__file__).resolve().parents[1] / "samples" / "default.tflite"
        path = str(sample) if sample.exists() else None
    return (None if path is None else Path(path).read_bytes()), 1


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="a folder holding the old `edgelite`")
    parser.add_argument("--blocks", type=int, default=20)
    parser.add_argument("--block-ms", type=float, default=20.0)
    parser.add_argument("--models", default=MODELS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:   # (silero_vad converted before the old tree)
        contents = {name: model_content(name, tmp) for name in args.models.split(",")}
    old_modules = load_before(args.before)
    from ai_edge_litert import interpreter as litert

    from edgelite import interpreter as new
    new_modules = {k: m for k, m in sys.modules.items() if _ours(k)}
    old = old_modules["edgelite.interpreter"]

    def make(module, content):
        with switched(old_modules if module is old else new_modules) \
                if module is not litert else contextlib.nullcontext():
            it = module.Interpreter(model_content=content, num_threads=1)
            it.allocate_tensors()
            bo.model_inputs(it)
            it.invoke()
        return it

    print(f"## Before ({args.before}) / after / LiteRT: thread CPU µs per invoke (per op for "
          f"the chains), alternating blocks, medians; load {os.getloadavg()[0]:.1f}\n")
    print("| model | before µs | after µs | LiteRT µs | before/LiteRT | after/LiteRT | "
          "Python frames an invoke, before → after |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, (content, per) in contents.items():
        if content is None:
            print(f"| {name} | not on this machine | | | | | |")
            continue
        its = {"before": make(old, content), "after": make(new, content),
               "LiteRT": make(litert, content)}
        outs = [it.get_tensor(it.get_output_details()[0]["index"]) for it in its.values()]
        np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-6)
        t, _ = bo.us_per_op({k: it.invoke for k, it in its.items()}, per, args.blocks,
                            args.block_ms / 1e3)
        f0, f1 = frames(its["before"]), frames(its["after"])
        b, a, r = t["before"], t["after"], t["LiteRT"]
        print(f"| {name} | {b:.3f} | {a:.3f} | {r:.3f} | {b / r:.2f}x | {a / r:.2f}x | "
              f"{f0} → {f1} |", flush=True)


if __name__ == "__main__":
    main()
