"""Convert and check every export of the torch corpus (tools/torch_corpus.py), and print the
table of issue 12: model, exporter, converted or the error, max error / max|ref| in edgelite and
in LiteRT against onnxruntime (ORT_ENABLE_BASIC, one thread: edgelite.converter.check's
settings, as tests/oracles.py), TFLite op count, transposes left, conversion seconds.

    python tools/corpus_report.py [OUT] [--only NAME ...] [--json FILE] [--references]
    python tools/corpus_report.py --combine FIXED.json DYNAMIC.json ...   # the compact table

Each export is checked in a child process (a runtime that crashes on a file is a row of the
table, not the end of the run). A file that LiteRT or edgelite refuses to load or allocate is a
failure. Dynamic exports are converted with no input shapes and run at each size the manifest
lists (resize_tensor_input, allocate_tensors).

A row whose references check little is marked (`degenerate`): an output that is constant, whose
max|ref| is tiny, or that barely moves when the input changes (onnxruntime at a second input of
the same shapes), as torchvision's ViT head at its zero init. `--references` prints only
that, with onnxruntime alone (no conversion): a quick scan of a corpus.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

DEFAULT_OUT = Path("~/.cache/edgelite-corpus").expanduser()
LIMIT = 1e-4          # max error / max|ref| a row passes at
TINY = 1e-6           # a max|ref| below this checks little (LiteRT flushes denormals)
SPREAD = 1e-3         # an output that moves less than this x max|ref| checks little
CHILD_TIMEOUT = 900


def _feeds_at(entry: dict, size: dict, seed: int) -> dict:
    """Inputs of the sizes `size` ({name: shape}): normal floats, token ids below int_high,
    all-ones masks."""
    rng = np.random.default_rng(seed)
    base = dict(np.load(entry["dir"] / entry["inputs"]))
    feeds = {}
    for name, shape in size.items():
        dtype = base[name].dtype
        if dtype.kind == "f":
            feeds[name] = rng.standard_normal(shape).astype(dtype)
        elif "mask" in name:
            feeds[name] = np.ones(shape, dtype)
        else:
            feeds[name] = rng.integers(0, entry["int_high"], shape).astype(dtype)
    return feeds


def degenerate(entry: dict, names: list, outs: list, ref: list, base: dict) -> str | None:
    """Why onnxruntime's outputs `ref` (at the inputs `base`) check little, or None: an output
    that is constant, tiny, or nearly the same at a second input of the same shapes."""
    path = entry["dir"] / entry["file"]
    other = _feeds_at(entry, {n: base[n].shape for n in names}, 99)
    if entry.get("int_high", 2) <= 1 and all(other[n].dtype.kind != "f" for n in names):
        return None     # no other input to draw
    ref2 = run_onnxruntime_outputs(path, {n: other[n] for n in names}, outs)
    for name, a, b in zip(outs, ref, ref2):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        if a.size == 0:
            continue
        scale = float(np.abs(a).max())
        if scale < TINY:
            return f"output {name!r} has max|ref| {scale:.1e}"
        if a.size > 1 and np.ptp(a) / scale < SPREAD:
            return f"output {name!r} is constant to {np.ptp(a) / scale:.1e} x max|ref|"
        if a.shape == b.shape and float(np.abs(a - b).max()) / scale < SPREAD:
            moved = float(np.abs(a - b).max()) / scale
            return f"output {name!r} moves {moved:.1e} x max|ref| at another input"
    return None


def run_onnxruntime_outputs(path, feeds: dict, outs: list) -> list:
    from edgelite.converter.check import run_onnxruntime

    return run_onnxruntime(path, feeds, outs)


def references_only(entry: dict) -> dict:
    """The `degenerate` check alone, with onnxruntime: no conversion."""
    import onnx

    path = entry["dir"] / entry["file"]
    row = {"model": entry["model"], "exporter": entry["exporter"], "dynamic": entry["dynamic"]}
    proto = onnx.load(str(path), load_external_data=False)
    initializers = {i.name for i in proto.graph.initializer}
    names = [i.name for i in proto.graph.input if i.name not in initializers]
    outs = [o.name for o in proto.graph.output]
    base = dict(np.load(path.with_suffix(".npz")))
    ref = run_onnxruntime_outputs(path, {n: base[n] for n in names}, outs)
    row["max_ref"] = min(float(np.abs(np.asarray(r, np.float64)).max()) if np.size(r) else 0.0
                         for r in ref)
    row["degenerate"] = degenerate(entry, names, outs, ref, base)
    return row


def _ratio(got, ref) -> float:
    from edgelite.converter.check import max_error

    got, ref = np.asarray(got), np.asarray(ref)
    if got.shape != ref.shape:
        return float("inf")
    scale = float(np.abs(ref.astype(np.float64)).max()) if ref.size else 0.0
    err = max_error(got, ref)
    return err / scale if scale else err


def _matched(got: list, ref: list, window: int = 4) -> tuple:
    """Detections (row k of every output is detection k, sorted by score): `got`'s rows put in
    the order of `ref`'s, each matched with the closest unused one at most `window` places
    away. Near-tied scores (0.7597370 and 0.7597349) may come out in either order from
    arithmetic that differs in the last bits. (got reordered, rows moved), or None when the
    outputs are not such rows."""
    got, ref = [np.asarray(g) for g in got], [np.asarray(r) for r in ref]
    rows = {len(r) for r in ref if r.ndim >= 1} | {len(g) for g in got if g.ndim >= 1}
    if len(rows) != 1 or any(g.shape != r.shape for g, r in zip(got, ref)):
        return None
    n = rows.pop()
    scales = [max(float(np.abs(r.astype(np.float64)).max()), 1e-30) if r.size else 1.0
              for r in ref]
    order, used = [], set()
    for i in range(n):
        near = [j for j in range(max(0, i - window), min(n, i + window + 1)) if j not in used]
        cost = [max(float(np.abs(g[j].astype(np.float64) - r[i]).max()) / s
                    for g, r, s in zip(got, ref, scales)) for j in near]
        j = near[int(np.argmin(cost))]
        used.add(j)
        order.append(j)
    moved = sum(j != i for i, j in enumerate(order))
    return [g[order] for g in got], moved


def _run(content: bytes, runtime: str, feeds: list, shapes: list | None):
    """Outputs of `runtime` on the file; `shapes` resizes the inputs first."""
    from edgelite.converter.check import quiet_litert

    if runtime == "edgelite":
        from edgelite.interpreter import Interpreter
    else:
        from ai_edge_litert.interpreter import Interpreter
    with quiet_litert():
        it = Interpreter(model_content=content, num_threads=1)
        if shapes is not None:
            for detail, shape in zip(it.get_input_details(), shapes):
                it.resize_tensor_input(detail["index"], list(shape))
        it.allocate_tensors()
    for detail, x in zip(it.get_input_details(), feeds):
        it.set_tensor(detail["index"], x)
    it.invoke()
    return [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]


def check_one(entry: dict) -> dict:
    """Convert one export and check it in both runtimes: the table row's facts."""
    from edgelite.converter import TFLiteConverter
    from edgelite.converter.check import run_onnxruntime, to_onnx_layout, to_tflite_layout

    path = entry["dir"] / entry["file"]
    row = {"model": entry["model"], "exporter": entry["exporter"], "dynamic": entry["dynamic"]}
    converter = TFLiteConverter.from_onnx(str(path))
    start, cpu = time.perf_counter(), time.process_time()
    try:
        converter.convert()
    except Exception as e:   # ConversionError, or a converter bug: the row says which
        row["error"] = f"{type(e).__name__}: {e}"
        row["seconds"] = time.perf_counter() - start
        row["cpu_seconds"] = time.process_time() - cpu
        return row
    conv = converter.last_conversion
    # CPU seconds too: on a shared machine the wall time says more about the neighbours
    row.update(seconds=conv.seconds, cpu_seconds=time.process_time() - cpu,
               ops=sum(conv.ops_out.values()), transposes=conv.transposes,
               warnings=[str(w) for w in conv.warnings])
    layout = conv.io_layout
    names = [e["name"] for e in layout["inputs"]]
    outs = [e["name"] for e in layout["outputs"]]
    base = dict(np.load(path.with_suffix(".npz")))
    sizes = [None] + [s for s in entry.get("sizes", [])[1:]]
    if entry.get("ranked") and not entry["dynamic"]:   # sizes that follow the values: more
        sizes += [{n: base[n].shape for n in names}] * 2   # inputs, at the same shapes
    for runtime in ("edgelite", "LiteRT"):
        row[runtime] = 0.0
    first_ref = None
    for k, size in enumerate(sizes):
        feeds = base if size is None else _feeds_at(entry, size, k)
        onnx_feeds = [feeds[n] for n in names]
        try:
            ref = run_onnxruntime(path, dict(zip(names, onnx_feeds)), outs)
        except Exception as e:   # the export itself does not run there: no reference
            if k == 0:
                raise
            message = str(e).splitlines()[0] if str(e) else type(e).__name__
            row["reference_fails"] = f"at {size}: {message[:160]}"
            break
        first_ref = ref if k == 0 else first_ref
        if any(np.ptp(r) == 0 for r in ref if np.size(r) > 1):
            row["constant_ref"] = True      # an output that checks nothing
        tfl_feeds = to_tflite_layout(onnx_feeds, layout)
        shapes = [x.shape for x in tfl_feeds] if entry["dynamic"] else None
        for runtime in ("edgelite", "LiteRT"):
            if isinstance(row[runtime], str):
                continue
            try:
                got = to_onnx_layout(_run(conv.content, runtime.lower(), tfl_feeds, shapes),
                                     layout)
            except Exception as e:
                at = "" if size is None else f" at {size}"
                row[runtime] = f"{type(e).__name__}{at}: {str(e).splitlines()[0][:200]}"
                continue
            ratio = max(_ratio(g, r) for g, r in zip(got, ref)) if ref else 0.0
            if ratio > LIMIT and entry.get("ranked"):
                matched = _matched(got, ref)
                if matched is not None and matched[1]:
                    ratio = max(_ratio(g, r) for g, r in zip(matched[0], ref))
                    row.setdefault("reordered", {})[runtime] = \
                        row.get("reordered", {}).get(runtime, 0) + matched[1]
            row[runtime] = max(row[runtime], ratio)
    why = degenerate(entry, names, outs, first_ref, base)
    if why:
        row["degenerate"] = why
    return row


def _child(entry_json: str) -> None:
    entry = json.loads(entry_json)
    entry["dir"] = Path(entry["dir"])
    check = references_only if entry.pop("references_only", False) else check_one
    print(json.dumps(check(entry)))


def _in_child(entry: dict) -> dict:
    payload = json.dumps({**entry, "dir": str(entry["dir"])})
    row = {"model": entry["model"], "exporter": entry["exporter"], "dynamic": entry["dynamic"]}
    try:
        done = subprocess.run([sys.executable, __file__, "--child", payload], text=True,
                              capture_output=True, timeout=CHILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        row["error"] = f"not done in {CHILD_TIMEOUT} s"
        return row
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        row["error"] = f"checker exited with {done.returncode}: {tail[:300]}"
        return row
    return json.loads(lines[-1])


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.replace("|", "\\|").replace("\n", " ")[:160]
    mark = "" if value <= LIMIT else " ✗"
    return f"{value:.1e}{mark}"


def table(rows: list) -> str:
    lines = ["| model | exporter | converted | edgelite err/max\\|ref\\| | "
             "LiteRT err/max\\|ref\\| | ops | transposes | convert s (CPU s) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        exporter = r["exporter"] + (" (dynamic)" if r.get("dynamic") else "")
        converted = "yes" if "error" not in r else _cell(r["error"])
        if r.get("reference_fails"):
            converted += f" (onnxruntime fails on the export itself {r['reference_fails']})"
        if r.get("degenerate"):
            converted += f" (checks little: {r['degenerate']})"
        elif r.get("constant_ref"):
            converted += " (an output is constant: checks little)"
        for runtime, moved in r.get("reordered", {}).items():
            converted += f" ({runtime}: {moved} detections matched in another order)"
        seconds = f"{r['seconds']:.2f} ({r.get('cpu_seconds', 0):.2f})" if "seconds" in r else ""
        lines.append(f"| {r['model']} | {exporter} | {converted} | {_cell(r.get('edgelite'))} | "
                     f"{_cell(r.get('LiteRT'))} | {r.get('ops', '')} | "
                     f"{r.get('transposes', '')} | {seconds} |")
    return "\n".join(lines)


def _worse(row: dict) -> str:
    """The worse of the two runtimes' errors, or why the row has none."""
    if "error" in row:
        return _cell(row["error"])[:60]
    if "reference_fails" in row:
        return "export fails in onnxruntime " + _cell(row["reference_fails"])[:40]
    values = [row.get(k) for k in ("edgelite", "LiteRT")]
    if any(isinstance(v, str) for v in values):
        return next(_cell(v)[:60] for v in values if isinstance(v, str))
    text = _cell(max(v for v in values if v is not None))
    return text + (" (weak)" if row.get("degenerate") else "")


def compact_table(rows: list) -> str:
    """One line per model and exporter: the worse runtime's max error / max|ref| fixed and
    dynamic, ops/transposes fixed · dynamic, conversion CPU seconds fixed · dynamic. A later
    row for the same export replaces an earlier one."""
    cells: dict = {}
    for r in rows:
        cells.setdefault((r["model"], r["exporter"]), {})[bool(r.get("dynamic"))] = r

    def pair(by, fn):
        return " · ".join(fn(by[d]) if d in by else "–" for d in (False, True))

    lines = ["| model | exporter | err/max\\|ref\\| fixed | dynamic | ops/transposes fixed · "
             "dynamic | convert CPU s fixed · dynamic |", "|---|---|---|---|---|---|"]
    for (model, exporter), by in cells.items():
        errors = [_worse(by[d]) if d in by else "–" for d in (False, True)]
        shape = pair(by, lambda r: f"{r['ops']}/{r['transposes']}" if "ops" in r else "–")
        cpu = pair(by, lambda r: f"{r['cpu_seconds']:.1f}" if "cpu_seconds" in r else "–")
        lines.append(f"| {model} | {exporter} | {errors[0]} | {errors[1]} | {shape} | {cpu} |")
    return "\n".join(lines)


def passed(row: dict) -> bool:
    return "error" not in row and "reference_fails" not in row and all(
        isinstance(row.get(k), float) and row[k] <= LIMIT for k in ("edgelite", "LiteRT"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--only", nargs="*", default=None, help="model names")
    parser.add_argument("--json", type=Path, default=None, help="write the rows here too")
    parser.add_argument("--references", action="store_true",
                        help="only check that the references are not degenerate (onnxruntime)")
    parser.add_argument("--combine", nargs="+", type=Path, default=None,
                        help="print the compact table of these --json files (later ones win)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.combine:
        rows = [r for f in args.combine for r in json.loads(f.read_text())]
        print(compact_table(rows))
        return 0
    if args.child is not None:
        _child(args.child)
        return 0
    manifest = json.loads((args.out / "manifest.json").read_text())
    rows = []
    for entry in manifest:
        if args.only is not None and entry["model"] not in args.only:
            continue
        entry = {**entry, "dir": args.out, "references_only": args.references}
        if "error" in entry:
            row = {"model": entry["model"], "exporter": entry["exporter"],
                   "dynamic": entry["dynamic"], "error": f"export failed: {entry['error']}"}
        else:
            row = _in_child(entry)
        rows.append(row)
        if args.references:
            print(f"{row['model']} {row['exporter']}: {row.get('error') or row['degenerate']}",
                  flush=True)
            continue
        print(f"{row['model']} {row['exporter']}: "
              f"{'pass' if passed(row) else row.get('error', 'mismatch')}", file=sys.stderr,
              flush=True)
    if args.references:
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
        return 0
    print(table(rows))
    weak = sum(1 for r in rows if passed(r) and r.get("degenerate"))
    print(f"\n{sum(map(passed, rows))}/{len(rows)} pass (converted, loaded and allocated by "
          f"both runtimes, max error <= {LIMIT:g} x max|ref| in both)"
          + (f"; {weak} of them with references that check little" if weak else ""))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
