"""edgelite vs LiteRT on the benchmark set: a loop over `edgelite benchmark --compare litert
--op-profile` (edgelite.cli.benchmark), with markdown tables at the end.

    python benchmarks/bench_models.py [--threads 1] [--seconds 4] [--set shared|all] [--only NAME]
                                      [--models DIR] [--corpus DIR] [--json OUT]
                                      [--openblas-core native|Haswell|...]

The benchmark set (benchmarks/README.md): every `.tflite` in the shared models folder
($EDGELITE_MODELS, else ../shared/models from the repository root), the sample model
(samples/default.tflite, from samples/make_default_model.py) and, with `--set all` (the default),
the models of CORPUS_SET that we build into the third-party corpus (--corpus, else
$EDGELITE_TFLITE_CORPUS, else ~/.cache/edgelite-tflite-corpus; tools/tflite_corpus.py writes
them): a tiny keyword-spotting head, the Keras LSTM/GRU text models and dynamic-range convnets
made by TensorFlow's converter, MediaPipe's palm detector and selfie segmenter. A corpus file
that is missing is listed with the command that builds it. For each model, `benchmark` runs
edgelite and LiteRT in one process, same thread count, in alternating blocks (medians, p5-p95,
the ratio), checks that both give the same outputs on the same inputs (the reference inputs of
the manifest's refs/*.npz where they fit, else seeded random ones), times each step of
edgelite's plan (summed by op type) and reports the arena and the peak RSS of the benchmark. A
model edgelite cannot run gets the interpreter's one-line refusal and LiteRT's latency alone.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path


def _arg(argv: list, flag: str) -> str | None:
    """A flag's value from the command line, read before numpy loads OpenBLAS (which reads its
    environment once)."""
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = \
    _arg(sys.argv[1:], "--threads") or "1"
_CORE = _arg(sys.argv[1:], "--openblas-core")
if _CORE == "native":
    os.environ.pop("OPENBLAS_CORETYPE", None)
elif _CORE:
    os.environ["OPENBLAS_CORETYPE"] = _CORE

import numpy as np  # noqa: E402

from edgelite.cli.benchmark import benchmark, latency_facts, timed_loop  # noqa: E402
from edgelite.cli.common import CliError  # noqa: E402
from edgelite.cli.peers import LiteRT  # noqa: E402
from edgelite.cli.session import duration  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLE = REPO_ROOT / "samples" / "default.tflite"
TOP_OPS = 3            # op types per model in the profile table


# The models we build into the corpus (tools/tflite_corpus.py): file stem -> why it is in the set.
CORPUS_SET = {
    "keras_kws_head.float32": "tiny keyword-spotting head (openWakeWord's shape), per-invoke cost",
    "keras_lstm.float32": "Keras LSTM text model (TensorFlow's converter), recurrent",
    "keras_gru.float32": "Keras GRU text model (TensorFlow's converter), GRU as WHILE",
    "keras_lstm.dynamic": "the LSTM model, dynamic-range (hybrid) weights",
    "mp_palm_detection_lite": "MediaPipe palm detector (mediapipe 0.10.14 wheel)",
    "mp_selfie_segmentation": "MediaPipe selfie segmentation, the 2-thread outlier",
    "keras_efficientnet_b0.dynamic": "dynamic-range (hybrid) convolutions",
    "keras_densenet121.dynamic": "dynamic-range (hybrid) convolutions, many concatenations",
}
# How to build a missing corpus file, by its name's prefix.
BUILD = {"keras_": "/work/venv-tf/bin/python tools/tflite_corpus.py keras --only NAME",
         "mp_": "python tools/tflite_corpus.py mediapipe"}


@dataclass
class Entry:
    name: str                  # file name
    path: Path
    ref: Path | None = None    # reference inputs (.npz with input_K), where the folder has them
    missing: str | None = None  # how to build it, when the file is not there


def models_dir(given: str | None) -> Path:
    path = Path(given or os.environ.get("EDGELITE_MODELS")
                or REPO_ROOT.parent / "shared" / "models")
    if not path.is_dir():
        sys.exit(f"error: no models folder at {path} (set EDGELITE_MODELS or --models)")
    return path


def corpus_dir(given: str | None) -> Path:
    return Path(given or os.environ.get("EDGELITE_TFLITE_CORPUS")
                or Path("~/.cache/edgelite-tflite-corpus").expanduser())


def benchmark_set(models: str | None = None, corpus: str | None = None, only=None,
                  which: str = "all") -> list:
    """The set's entries, in table order: shared models, the sample, then CORPUS_SET.
    `only`: a substring or a list of substrings of file names."""
    folder = models_dir(models)
    refs = {}
    manifest = folder / "manifest.json"
    if manifest.exists():
        for entry in json.loads(manifest.read_text())["models"]:
            ref = (entry.get("reference") or {}).get("ref_io")
            if ref:
                refs[entry["path"]] = folder / ref
    found = [Entry(p.name, p, refs.get(p.name)) for p in sorted(folder.glob("*.tflite"))]
    if SAMPLE.exists():
        found.append(Entry(SAMPLE.name, SAMPLE))
    else:
        print(f"note: {SAMPLE} is missing: run python samples/make_default_model.py",
              file=sys.stderr)
    if which == "all":
        cdir = corpus_dir(corpus)
        for stem in CORPUS_SET:
            path = cdir / f"{stem}.tflite"
            how = next(cmd for prefix, cmd in BUILD.items() if stem.startswith(prefix))
            found.append(Entry(path.name, path, None, None if path.exists() else
                               how.replace("NAME", stem.split(".")[0][len("keras_"):])))
    wanted = [only] if isinstance(only, str) else only
    return [e for e in found if not wanted or any(w in e.name for w in wanted)]


def reference_inputs(ref: Path | None) -> dict:
    """input_K arrays of a reference .npz (benchmark takes those that fit the model)."""
    if ref is None or not ref.exists():
        return {}
    with np.load(ref) as data:
        return {k: data[k] for k in data.files if k.startswith("input_")}


def bench_model(path: Path, ref: Path | None, args) -> dict:
    from edgelite.schema import load

    ops = sum(len(sg.operators) for sg in load(path).subgraphs)
    try:
        facts = benchmark(path, num_runs=args.runs, min_secs=args.seconds / 2,
                          max_secs=10 * args.seconds, warmup_min_secs=0.3,
                          num_threads=args.threads, input_arrays=reference_inputs(ref),
                          op_profile=True, compare="litert", quiet=False)
    except CliError as e:
        if "input_" in str(e):         # a reference .npz that does not fit: random inputs
            return bench_model(path, None, args)
        litert = LiteRT(path, args.threads, _random_inputs(path))
        times = timed_loop(litert.invoke, args.runs, args.seconds / 2, 10 * args.seconds, False,
                      "litert")
        return {"model": path.name, "ops": ops, "error": str(e),
                "litert": latency_facts(litert.init_s, [], times)}
    return {**facts, "model": path.name, "ops": ops}


def _random_inputs(path: Path) -> list:
    from ai_edge_litert.interpreter import Interpreter

    from edgelite.cli.session import random_inputs

    it = Interpreter(model_path=str(path))
    return random_inputs([(tuple(d["shape"]), d["dtype"]) for d in it.get_input_details()])


def tables(results: list, meta: dict) -> list:
    threads = meta["threads"]
    lines = [f"### edgelite vs LiteRT (XNNPACK), {threads} thread{'s' if threads > 1 else ''}",
             "", f"`edgelite benchmark --compare litert --op-profile`; numpy {meta['numpy']}; "
             f"load average {meta['load_before']:.1f} before, {meta['load_after']:.1f} after, on "
             f"{meta['cpus']} CPUs. Medians (p5-p95) of single invokes, wall clock, in "
             "alternating blocks.", "",
             "| model | ops | edgelite | LiteRT | edgelite/LiteRT | max abs diff | arena / live "
             "| peak RSS MiB |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        if "missing" in r:
            lines.append(f"| {r['model']} | | missing: `{r['missing']}` | | | | | |")
            continue
        if "error" in r:
            t = r["litert"]
            lines.append(f"| {r['model']} | {r['ops']} | {r['error']} | "
                         f"{duration(t['median_ms'])} | | | | |")
            continue
        lat, c, m = r["latency"], r["compare"]["litert"], r["memory"]
        diff = "shapes differ" if c["max_abs_diff"] is None else f"{c['max_abs_diff']:.2g}"
        arena = f"{_size(m['arena_bytes'])} / {_size(m['live_bytes'])}"
        lines.append(f"| {r['model']} | {r['ops']} | {_span(lat)} | {_span(c)} | "
                     f"{c['ratio']:.1f}x | {diff} | {arena} | {m['peak_rss_mb']:.0f} |")
    profiled = [r for r in results if "op_profile" in r]
    if profiled:
        lines += ["", "### Where edgelite's time goes: each plan step timed alone, summed by op "
                      f"type; top {TOP_OPS}", "",
                  "| model | sum of steps | edgelite invoke (median) | top op types (share) |",
                  "|---|---:|---:|---|"]
        for r in profiled:
            p = r["op_profile"]
            top = ", ".join(f"{e['node_type']} x{e['count']} {duration(e['avg_ms'])} "
                            f"({e['share']:.0%})" for e in p["by_node_type"][:TOP_OPS])
            lines.append(f"| {r['model']} | {duration(p['timings_us']['avg'] / 1e3)} | "
                         f"{duration(r['latency']['median_ms'])} | {top} |")
    return lines


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**20:.2f} MiB" if nbytes >= 2**20 else f"{nbytes / 1024:.1f} KiB"


def _span(t: dict) -> str:
    return f"{duration(t['median_ms'])} ({duration(t['p5_ms'])}–{duration(t['p95_ms'])})"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="both runtimes (default 1)")
    parser.add_argument("--seconds", type=float, default=4.0,
                        help="timed seconds per model, both runtimes together (default 4)")
    parser.add_argument("--runs", type=int, default=20, help="invokes per runtime at least")
    parser.add_argument("--models", help="models folder (default $EDGELITE_MODELS or "
                                         "../shared/models)")
    parser.add_argument("--only", help="only models whose file name contains this (or one of "
                                       "these, comma-separated)")
    parser.add_argument("--set", choices=("shared", "all"), default="all",
                        help="shared: the shared models and the sample; all (default): and the "
                             "corpus models of CORPUS_SET")
    parser.add_argument("--corpus", help="corpus folder (default $EDGELITE_TFLITE_CORPUS or "
                                         "~/.cache/edgelite-tflite-corpus)")
    parser.add_argument("--json", type=Path, help="write all numbers to this file")
    parser.add_argument("--openblas-core", metavar="NAME",
                        help="numpy's OpenBLAS kernels: a core name (Haswell, SkylakeX...) or "
                             "'native' for OpenBLAS's own choice (default: the environment's)")
    args = parser.parse_args(argv)
    meta = {"threads": args.threads, "numpy": np.__version__, "cpus": os.cpu_count(),
            "load_before": os.getloadavg()[0]}
    results = []
    only = args.only.split(",") if args.only else None
    for entry in benchmark_set(args.models, args.corpus, only, args.set):
        if entry.missing:
            print(f"{entry.name}: missing; build it with: {entry.missing}", file=sys.stderr)
            results.append({"model": entry.name, "ops": "", "missing": entry.missing})
            continue
        print(f"{entry.name} ...", file=sys.stderr, flush=True)
        results.append(bench_model(entry.path, entry.ref, args))
    meta["load_after"] = os.getloadavg()[0]
    print("\n".join(tables(results, meta)))
    if args.json:
        args.json.write_text(json.dumps({**meta, "models": results}, indent=1))


if __name__ == "__main__":
    main()
