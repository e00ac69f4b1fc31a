"""Convert a corpus of ONNX models with other projects' converters, for issue 12's comparison.

Which of the models edgelite converts would MNN's converter or onnx2tf (the ONNX route into
LiteRT that TensorFlow's own toolchain offers) have failed?  Each tool runs in its own virtual
environment, so this script runs once per tool and writes one JSON file; ``--report`` merges
them into one markdown table:

    python -m venv /work/venv-cmp && /work/venv-cmp/bin/pip install MNN onnx onnxruntime
    /work/venv-cmp/bin/python tools/compare_converters.py --tool mnn --json mnn.json DIR...
    # onnx2tf needs TensorFlow: tensorflow onnx2tf onnx_graphsurgeon sng4onnx psutil ai-edge-litert
    /work/venv-onnx2tf/bin/python tools/compare_converters.py --tool onnx2tf --json o2t.json DIR...
    python tools/compare_converters.py --report mnn.json o2t.json [--edgelite corpus.json ...]

A DIR is a corpus folder with a ``manifest.json`` as ``tools/torch_corpus.py`` writes it (each
entry names an ONNX file and an ``.npz`` of inputs), or a folder of ``.onnx`` files with an
``.npz`` of the same stem.  Every model is converted in a subprocess with a time limit, run on the
corpus inputs, and compared with onnxruntime at ``ORT_ENABLE_BASIC``: "pass" means every output
is within 1e-4 x max|ref|, the bar issue 12 sets for edgelite.  Nothing here is a dependency of
edgelite; it is a measurement script.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

TOLERANCE = 1e-4


def models_in(folders):
    """(name, onnx path, npz path) for every model of the folders."""
    out = []
    for folder in map(pathlib.Path, folders):
        manifest = folder / "manifest.json"
        entries = json.loads(manifest.read_text()) if manifest.exists() else None
        if isinstance(entries, list):
            for entry in entries:
                if entry.get("file") and entry.get("inputs") and (folder / entry["file"]).exists():
                    out.append((pathlib.Path(entry["file"]).stem, folder / entry["file"],
                                folder / entry["inputs"]))
            continue
        for onnx_file in sorted(folder.glob("*.onnx")):
            npz = onnx_file.with_suffix(".npz")
            if not npz.exists():  # ../shared/models keeps inputs in refs/, as input_0, ...
                npz = folder / "refs" / f"{onnx_file.stem}.npz"
            out.append((onnx_file.stem, onnx_file, npz if npz.exists() else None))
    return out


def feeds_for(onnx_path, npz_path):
    import numpy as np
    import onnx

    model = onnx.load(str(onnx_path), load_external_data=False)
    initializers = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    stored = dict(np.load(npz_path)) if npz_path else {}
    rng = np.random.default_rng(0)
    feeds = {}
    for position, inp in enumerate(inputs):
        for key in (inp.name, f"input_{position}"):
            if key in stored:
                feeds[inp.name] = stored[key]
                break
        if inp.name in feeds:
            continue
        dims = [d.dim_value if d.dim_value > 0 else 1 for d in inp.type.tensor_type.shape.dim]
        elem = inp.type.tensor_type.elem_type
        if elem == onnx.TensorProto.INT64:
            feeds[inp.name] = rng.integers(0, 2, dims).astype(np.int64)
        else:
            feeds[inp.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


def reference(onnx_path, feeds):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return names, session.run(names, feeds)


def relative_error(got, ref):
    """max|got - ref| / max|ref|, trying the layouts a converter may have moved the axes to."""
    import numpy as np

    ref = np.asarray(ref)
    got = np.asarray(got)
    candidates = [got]
    if got.shape != ref.shape and got.ndim == ref.ndim and got.ndim >= 3:
        # NHWC-style outputs (onnx2tf moves the channel axis last).
        candidates.append(np.moveaxis(got, -1, 1))
    if got.size == ref.size:
        candidates.append(got.reshape(ref.shape))
    best = None
    for cand in candidates:
        if cand.shape != ref.shape:
            continue
        scale = float(np.max(np.abs(ref.astype(np.float64)))) or 1.0
        err = float(np.max(np.abs(cand.astype(np.float64) - ref.astype(np.float64)))) / scale
        best = err if best is None else min(best, err)
    return best


# -- MNN ----------------------------------------------------------------------------------------

def run_mnn(name, onnx_path, npz_path, work, timeout):
    import numpy as np

    mnn_file = work / f"{name}.mnn"
    original, onnx_path = onnx_path, _private_copy(onnx_path, work)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "mnnconvert"), "-f", "ONNX",
         "--modelFile", str(onnx_path), "--MNNModel", str(mnn_file), "--bizCode", "cmp"],
        capture_output=True, text=True, timeout=timeout, env=_own_venv_env())
    seconds = time.perf_counter() - t0
    log = proc.stdout + proc.stderr
    if proc.returncode != 0 or not mnn_file.exists() or "Converted Success" not in log:
        return {"converted": False, "error": _last_lines(log), "seconds": seconds}
    feeds = feeds_for(original, npz_path)
    names, refs = reference(original, feeds)
    code = (
        "import sys, numpy as np, MNN.nn as nn, MNN.expr as F\n"
        "d = dict(np.load(sys.argv[2]))\n"
        "ins = sys.argv[3].split(','); outs = sys.argv[4].split(',')\n"
        "net = nn.load_module_from_file(sys.argv[1], ins, outs)\n"
        "def arg(a):\n"
        "    if a.dtype.kind in 'iub':\n"
        "        return F.const(a.astype(np.int32), list(a.shape), F.NCHW, F.int)\n"
        "    return F.const(a.astype(np.float32), list(a.shape), F.NCHW)\n"
        "args = [arg(d[k]) for k in ins]\n"
        "ys = net.forward(args)\n"
        "ys = ys if isinstance(ys, list) else [ys]\n"
        "res = {}\n"
        "for k, y in zip(outs, ys):\n"
        "    y = F.convert(y, F.NCHW)\n"
        "    res[k] = np.array(y.read()).reshape(y.shape)\n"
        "np.savez(sys.argv[5], **res)\n")
    feed_file = work / f"{name}.feeds.npz"
    out_file = work / f"{name}.out.npz"
    np.savez(feed_file, **feeds)
    proc = subprocess.run(
        [sys.executable, "-c", code, str(mnn_file), str(feed_file), ",".join(feeds),
         ",".join(names), str(out_file)], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or not out_file.exists():
        return {"converted": True, "ran": False, "error": _last_lines(proc.stdout + proc.stderr),
                "seconds": seconds}
    got = dict(np.load(out_file))
    errors = [relative_error(got[k], r) for k, r in zip(names, refs)]
    return _verdict(errors, seconds)


# -- onnx2tf ------------------------------------------------------------------------------------

def run_onnx2tf(name, onnx_path, npz_path, work, timeout):
    import numpy as np

    out_dir = work / name
    feeds = feeds_for(onnx_path, npz_path)
    names, refs = reference(onnx_path, feeds)     # on the original: onnx2tf writes over
    onnx_path = _private_copy(onnx_path, work)    # the model it is given
    # Keep the inputs' ONNX layout, so the same feeds go in (onnx2tf moves NCHW to NHWC else).
    keep = []
    for key, value in feeds.items():
        if np.asarray(value).ndim >= 3:
            keep.append(key)
    cmd = [os.path.join(os.path.dirname(sys.executable), "onnx2tf"), "-i", str(onnx_path),
           "-o", str(out_dir), "-coion", "-n"]
    if keep:
        cmd += ["-kat", *keep]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"converted": False, "error": f"no result in {timeout} s",
                "seconds": time.perf_counter() - t0}
    seconds = time.perf_counter() - t0
    files = sorted(out_dir.glob("*_float32.tflite")) if out_dir.exists() else []
    if not files:
        return {"converted": False, "error": _last_lines(proc.stdout + proc.stderr),
                "seconds": seconds}
    from ai_edge_litert.interpreter import Interpreter

    try:
        interp = Interpreter(model_path=str(files[0]))
        in_details = interp.get_input_details()
        values = []
        for pos, detail in enumerate(in_details):
            source = _closest(detail["name"], feeds) or list(feeds)[pos]
            value = np.asarray(feeds[source])
            signature = list(detail.get("shape_signature", detail["shape"]))
            fits = len(signature) == value.ndim and all(
                s in (-1, d) for s, d in zip(signature, value.shape))
            if not fits and value.ndim >= 3:
                value = np.moveaxis(value, 1, -1)  # an input onnx2tf moved to NHWC anyway
            if tuple(detail["shape"]) != value.shape:
                interp.resize_tensor_input(detail["index"], list(value.shape))
            values.append((detail, value))
        interp.allocate_tensors()
        for detail, value in values:
            interp.set_tensor(detail["index"], value.astype(detail["dtype"]))
        interp.invoke()
        out_details = interp.get_output_details()
        got = {d["name"]: interp.get_tensor(d["index"]) for d in out_details}
    except Exception as exc:  # a converted file LiteRT cannot run: what we want to count
        return {"converted": True, "ran": False, "error": f"{type(exc).__name__}: {exc}"[:300],
                "seconds": seconds}
    errors = []
    ordered = list(got)
    for pos, (key, ref) in enumerate(zip(names, refs)):
        source = _closest(key, got)
        if source is None and len(ordered) == len(names):
            source = ordered[pos]
        errors.append(relative_error(got[source], ref) if source else None)
    return _verdict(errors, seconds)


def _own_venv_env() -> dict:
    """The environment with this venv's bin first: mnnconvert runs `pip install` of a logging
    package as it converts, with whatever pip PATH finds (it once downgraded protobuf in
    another venv that was activated in the calling shell)."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.pop("VIRTUAL_ENV", None)
    return env


def _private_copy(onnx_path, work):
    """A copy of the model, and of the external-data files it names, for a tool to read:
    onnx2tf saves its shape-inferred model over its input file."""
    import shutil

    import onnx

    folder = work / "input"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    source = pathlib.Path(onnx_path)
    model = onnx.load(str(source), load_external_data=False)
    locations = {entry.value for init in model.graph.initializer
                 for entry in init.external_data if entry.key == "location"}
    for name in locations | {source.name}:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source.parent / name, folder / name)
    return folder / source.name


def _closest(key, mapping):
    """onnx2tf renames tensors (``input.1`` → ``input_1``); match on the sanitized name."""
    clean = "".join(c if c.isalnum() else "_" for c in key).lower()
    for k in mapping:
        if "".join(c if c.isalnum() else "_" for c in k).lower() == clean:
            return k
    for k in mapping:  # LiteRT may prefix a signature name: "serving_default_x:0"
        if clean and clean in "".join(c if c.isalnum() else "_" for c in k).lower():
            return k
    return next(iter(mapping)) if len(mapping) == 1 else None


def _verdict(errors, seconds):
    worst = None if any(e is None for e in errors) else max(errors, default=0.0)
    return {"converted": True, "ran": True, "max_rel_error": worst, "seconds": seconds,
            "pass": worst is not None and worst <= TOLERANCE}


def _last_lines(text, n=3):
    """The tool's own error lines if it printed any, else its last lines."""
    noise = ("WARNING: Location", "Requirement already", "WARNING: Running pip")
    lines = [line.strip() for line in text.strip().splitlines()
             if line.strip() and not line.strip().startswith(noise)]
    errors = [line for line in lines
              if any(w in line for w in ("Error", "ERROR", "error:", "Not Support", "Failed"))]
    lines = errors or lines
    return " | ".join(lines[-n:])[:400]


def outcome(result):
    if result is None:
        return "—"
    if not result.get("converted"):
        return "convert fails"
    if not result.get("ran"):
        return "file fails to run"
    if result.get("max_rel_error") is None:
        return "wrong output shapes"
    err = result["max_rel_error"]
    return f"pass ({err:.1e})" if result["pass"] else f"wrong ({err:.1e})"


def _edgelite_rows(paths) -> dict:
    """tools/corpus_report.py's --json rows by file stem (model.exporter[.dynamic])."""
    rows = {}
    for path in paths or []:
        for row in json.loads(pathlib.Path(path).read_text()):
            stem = f"{row['model']}.{row['exporter']}" + (".dynamic" if row.get("dynamic") else "")
            rows[stem] = row
    return rows


def _edgelite_cell(row) -> str:
    if row is None:
        return "—"
    if "error" in row:
        return "fails: " + str(row["error"]).replace("|", "/")[:60]
    worst = [row.get(k) for k in ("edgelite", "LiteRT")]
    if not all(isinstance(v, float) for v in worst):
        return "fails: " + " / ".join(str(v)[:40] for v in worst).replace("|", "/")
    mark = "pass" if max(worst) <= TOLERANCE else "wrong"
    return f"{mark} ({worst[0]:.1e} / {worst[1]:.1e}), {row.get('transposes', '?')} transposes"


def report(paths, edgelite=None):
    tables = {}
    for path in paths:
        data = json.loads(pathlib.Path(path).read_text())
        tables[data["tool"]] = data["results"]
    tools = sorted(tables)
    ours = _edgelite_rows(edgelite)
    names = sorted({n for t in tables.values() for n in t} | set(ours))
    head = (["edgelite (edgelite / LiteRT err)"] if ours else []) + tools
    print("| model | " + " | ".join(head) + " |")
    print("|---|" + "---|" * len(head))
    for n in names:
        cells = ([_edgelite_cell(ours.get(n))] if ours else []) + \
            [outcome(tables[t].get(n)) for t in tools]
        print(f"| {n} | " + " | ".join(cells) + " |")
    if ours:
        passed = sum(1 for r in ours.values() if _edgelite_cell(r).startswith("pass"))
        print(f"\nedgelite: {passed}/{len(ours)} pass")
    for t in tools:
        passed = sum(1 for r in tables[t].values() if r.get("pass"))
        print(f"\n{t}: {passed}/{len(tables[t])} pass")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="*")
    parser.add_argument("--tool", choices=["mnn", "onnx2tf"])
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--only", help="comma-separated substrings of model names")
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--report", nargs="+", metavar="JSON", help="merge result files")
    parser.add_argument("--edgelite", nargs="*", metavar="JSON",
                        help="with --report: tools/corpus_report.py --json files, as a column")
    args = parser.parse_args(argv)
    if args.report:
        report(args.report, args.edgelite)
        return 0
    if not args.tool or not args.folders:
        parser.error("give --tool and at least one corpus folder (or --report)")
    runner = {"mnn": run_mnn, "onnx2tf": run_onnx2tf}[args.tool]
    results = {}
    if args.json and pathlib.Path(args.json).exists():
        results = json.loads(pathlib.Path(args.json).read_text()).get("results", {})
    only = [s for s in (args.only or "").split(",") if s]
    with tempfile.TemporaryDirectory() as tmp:
        for name, onnx_path, npz_path in models_in(args.folders):
            if only and not any(s in name for s in only):
                continue
            if name in results:
                continue
            try:
                result = runner(name, onnx_path, npz_path, pathlib.Path(tmp), args.timeout)
            except subprocess.TimeoutExpired:
                result = {"converted": False, "error": f"no result in {args.timeout} s"}
            except Exception as exc:
                result = {"converted": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
            results[name] = result
            print(f"{name}: {outcome(result)}  {result.get('error', '')}", flush=True)
            if args.json:
                pathlib.Path(args.json).write_text(
                    json.dumps({"tool": args.tool, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
