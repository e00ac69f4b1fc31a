"""Non-finite inputs through edgelite and LiteRT: where does edgelite raise (or hang) and LiteRT
not, and where do the two disagree on which outputs are NaN / +-inf?

Every float input of each model gets six kinds of feed: all NaN, all +inf, all -inf, and one NaN,
+inf or -inf (the middle element) in an otherwise normal input (uniform in [-1, 1]); integer
inputs get zeros. Each feed runs under the default resolver and BUILTIN_REF in both runtimes.
The models: every .tflite under $EDGELITE_MODELS (../shared/models), the .tflite corpus
(~/.cache/edgelite-tflite-corpus), samples/default.tflite, every single-op case of
tests/interpreter/cases_*.py with a float feed (QUANTIZE, the hybrid FC / CONV / BATCH_MATMUL,
...), and the tests' dynamic-range recurrent builders (LSTM, RNN, SVDF).

Each model runs in a child process; one feed that takes longer than --timeout seconds is
recorded as a hang and the child restarted on the next one.

    python tools/nonfinite_sweep.py [--only models|ops|recurrent] [--match SUBSTR]
                                    [--json OUT.json] [--timeout 120]

Prints one line per finding (edgelite raises or hangs where LiteRT does not, or the NaN / inf
pattern of an output differs) and a summary table; --json writes every row.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KINDS = ("nan_all", "+inf_all", "-inf_all", "nan_one", "+inf_one", "-inf_one")
RESOLVERS = ("default", "builtin_ref")
_VALUE = {"nan": np.nan, "+inf": np.inf, "-inf": -np.inf}


def nonfinite_feed(shape, dtype, kind: str, rng) -> np.ndarray:
    """The feed of `kind` for one float input."""
    value, where = kind.split("_")
    if where == "all":
        return np.full(shape, _VALUE[value], dtype)
    x = rng.uniform(-1, 1, shape).astype(dtype)
    if x.size:
        x.reshape(-1)[x.size // 2] = _VALUE[value]
    return x


def feeds_for(details, kind: str, seed: int = 0, base=None) -> list:
    """Feeds for an interpreter's input details: floats of `kind`, integers zeros (or the
    case's own feeds in `base` for non-float inputs)."""
    rng = np.random.default_rng(seed)
    out = []
    for k, d in enumerate(details):
        shape = tuple(int(s) for s in d["shape"])
        dtype = np.dtype(d["dtype"])
        if dtype.kind == "f":
            out.append(nonfinite_feed(shape, dtype, kind, rng))
        elif base is not None:
            out.append(np.asarray(base[k]))
        else:
            out.append(np.zeros(shape, dtype))
    return out


def _interpreter(module, content: bytes, resolver: str, base_shapes=None, **kw):
    kind = module.OpResolverType.BUILTIN_REF if resolver == "builtin_ref" else \
        module.OpResolverType.AUTO
    it = module.Interpreter(model_content=content, experimental_op_resolver_type=kind, **kw)
    if base_shapes is not None:
        for d, s in zip(it.get_input_details(), base_shapes):
            if tuple(d["shape"]) != tuple(s):
                it.resize_tensor_input(d["index"], s)
    it.allocate_tensors()
    return it


def _invoke(it, feeds) -> list:
    for d, x in zip(it.get_input_details(), feeds):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text[:300]


def compare(ours: list, theirs: list) -> str:
    """'' where the outputs' non-finite patterns agree (floats: the same elements NaN, +inf,
    -inf; integers: equal), else what differs: "missing" (LiteRT non-finite where ours is
    finite: wrong), "inf-vs-max" (ours +-inf where LiteRT's reference float kernels clamp to
    the activation range, +-FLT_MAX without one), "extra" (ours NaN or inf where LiteRT is
    finite otherwise: its hybrid kernels' C casts of NaN to int, undefined behaviour; max
    pools that skip NaN), "inf/nan" (both non-finite, different kinds), or integers."""
    diffs = []
    for k, (a, b) in enumerate(zip(ours, theirs)):
        if a.shape != b.shape:
            diffs.append(f"out{k} shape {a.shape} vs {b.shape}")
            continue
        if a.dtype.kind in "fc" and b.dtype.kind in "fc":
            fa, fb = np.isfinite(a), np.isfinite(b)
            top = np.finfo(b.dtype).max if b.dtype.kind == "f" else np.inf
            # LiteRT's reference float kernels clamp to the activation range, +-FLT_MAX
            # without one: ours +-inf there
            at_max = np.isinf(a) & (np.abs(b) == top) & (np.sign(a) == np.sign(b))
            missing = int((fa & ~fb).sum())
            extra = int((~fa & fb & ~at_max).sum())
            if at_max.any():
                diffs.append(f"out{k} inf-vs-max {int(at_max.sum())}/{a.size}")
            kinds = int((~fa & ~fb & ((np.isnan(a) != np.isnan(b)) | (np.sign(a) != np.sign(b))
                                      & ~np.isnan(a))).sum())
            for label, n in (("missing", missing), ("extra", extra), ("inf/nan", kinds)):
                if n:
                    diffs.append(f"out{k} {label} {n}/{a.size}")
        elif a.dtype.kind in "iub":
            n = int((a != b).sum())
            if n:
                diffs.append(f"out{k} ints differ at {n}/{a.size} (max "
                             f"{int(np.abs(a.astype(np.int64) - b.astype(np.int64)).max())})")
    return "; ".join(diffs)


def _worker(conn, load, start: int):
    """Runs `load()`'s (name, content, base feeds or None) through every (resolver, kind) from
    index `start`, sending one row each."""
    from ai_edge_litert import interpreter as litert

    from edgelite import interpreter as edgelite
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    name, content, base = load()
    jobs = [(r, k) for r in RESOLVERS for k in KINDS]
    base_shapes = None if base is None else [np.shape(x) for x in base]
    cache = {}
    for n, (resolver, kind) in enumerate(jobs):
        if n < start:
            continue
        row = {"model": name, "resolver": resolver, "kind": kind}
        t0 = time.process_time()
        try:
            if resolver not in cache:
                cache.clear()
                cache[resolver] = {}
                for label, module in (("litert", litert), ("edgelite", edgelite)):
                    try:
                        cache[resolver][label] = _interpreter(module, content, resolver,
                                                              base_shapes)
                    except Exception as exc:  # noqa: BLE001 (recorded)
                        cache[resolver][label] = exc
            its = cache[resolver]
            feeds = None
            results = {}
            for label in ("edgelite", "litert"):   # edgelite first: LiteRT may crash
                it = its[label]
                if isinstance(it, Exception):
                    results[label] = ("load", _short(it))
                    continue
                if feeds is None:
                    feeds = feeds_for(it.get_input_details(), kind, base=base)
                conn.send(("stage", label))   # a crash names the runtime that crashed
                try:
                    results[label] = ("ok", _invoke(it, feeds))
                except Exception as exc:  # noqa: BLE001 (recorded)
                    results[label] = ("raise", _short(exc))
                    if label == "edgelite":
                        row["trace"] = traceback.format_exc()[-1500:]
            lit, ours = results["litert"], results["edgelite"]
            row["litert"] = lit[0] if lit[0] == "ok" else f"{lit[0]}: {lit[1]}"
            row["edgelite"] = ours[0] if ours[0] == "ok" else f"{ours[0]}: {ours[1]}"
            if lit[0] == "ok" and ours[0] == "ok":
                row["pattern"] = compare(ours[1], lit[1])
        except Exception as exc:  # noqa: BLE001 (recorded)
            row["edgelite"] = f"sweep error: {_short(exc)}"
        row["cpu_s"] = round(time.process_time() - t0, 3)
        conn.send(row)
    conn.send(None)


def run_model(load, name: str, timeout: float) -> list:
    """Every (resolver, kind) row of one model, restarting the child after a hang."""
    ctx = mp.get_context("fork")
    rows, start, total = [], 0, len(RESOLVERS) * len(KINDS)
    while start < total:
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_worker, args=(child, load, start), daemon=True)
        proc.start()
        child.close()
        stage = "load"
        # loading a big model counts against the first feed
        deadline = timeout * (3 if start == 0 else 2)
        while True:
            if not parent.poll(deadline):
                resolver, kind = [(r, k) for r in RESOLVERS for k in KINDS][start]
                rows.append({"model": name, "resolver": resolver, "kind": kind,
                             "litert": "?", "edgelite": f"hang (> {timeout:.0f} s)"})
                proc.kill()
                start += 1
                break
            try:
                row = parent.recv()
            except EOFError:
                proc.join(5)
                resolver, kind = [(r, k) for r in RESOLVERS for k in KINDS][start]
                died = f"child died (exit {proc.exitcode})"
                rows.append({"model": name, "resolver": resolver, "kind": kind,
                             "litert": died if stage == "litert" else "?",
                             "edgelite": died if stage != "litert" else "?"})
                start += 1
                break
            if isinstance(row, tuple):
                stage = row[1]
                continue
            if row is None:
                start = total
                break
            rows.append(row)
            start += 1
            deadline = timeout
        proc.join(5)
        if proc.is_alive():
            proc.kill()
    return rows


def finding(row: dict) -> str:
    """'' for a row that is fine, else what is wrong."""
    ours, lit = row.get("edgelite", ""), row.get("litert", "")
    if ours.startswith(("hang", "child died", "sweep error")):
        return ours
    if lit.startswith("child died"):
        return ""      # LiteRT crashed (not edgelite's)
    if ours != "ok" and lit == "ok":
        return "edgelite raises, LiteRT does not"
    if ours.startswith("load") and not lit.startswith("load"):
        return "edgelite cannot load"
    pattern = row.get("pattern", "")
    if "missing" in pattern or "ints" in pattern or "shape" in pattern:
        return "pattern: LiteRT non-finite where ours is finite"
    if pattern:
        return "pattern: ours non-finite where LiteRT finite"
    return ""


# -- the models -----------------------------------------------------------------------------------

def model_files() -> list:
    from tests.conftest import models_dir
    files = []
    shared = models_dir()
    if shared is not None and Path(shared).is_dir():
        files += sorted(Path(shared).rglob("*.tflite"))
    corpus = Path.home() / ".cache" / "edgelite-tflite-corpus"
    if corpus.is_dir():
        files += sorted(p for p in corpus.glob("*.tflite"))
    sample = ROOT / "samples" / "default.tflite"
    if sample.exists():
        files.append(sample)
    return sorted(files, key=lambda p: p.stat().st_size)


def _has_float_input(content: bytes) -> bool:
    from edgelite.interpreter import Interpreter
    it = Interpreter(model_content=content)
    return any(np.dtype(d["dtype"]).kind == "f" for d in it.get_input_details())


def _file_loader(path: Path):
    return lambda: (path.name, path.read_bytes(), None)


def op_case_items() -> list:
    """(name, loader) of every single-op case with a float feed."""
    from tests.interpreter.op_cases import all_cases
    items = []
    for attribute in ("CASES", "AUTO_CASES"):
        for param in all_cases(attribute):
            c = param.values[0]
            if any(np.asarray(f).dtype.kind == "f" for f in c.feeds):
                items.append((param.id, (lambda c=c, i=param.id: (i, c.model, c.feeds))))
    return items


def recurrent_items() -> list:
    """The tests' dynamic-range recurrent models (and float LSTMs), both input quantizations."""
    from edgelite.schema import load, save
    from tests.interpreter.test_lstm import _lstm_model
    from tests.interpreter.test_lstm_full import lstm_model
    from tests.interpreter.test_rnn import _Builder

    def asym(content, asymmetric):
        model = load(content)
        op = model.subgraphs[0].operators[0]
        op.options = op.options.replace(asymmetric_quantize_inputs=asymmetric)
        return save(model)

    models = {"lstm_float": _lstm_model(), "lstm_full_float": lstm_model(),
              "lstm_float_layer_norm_peephole": _lstm_model(layer_norm=True, peephole=True)}
    for a in (False, True):
        tag = "asym" if a else "sym"
        for kw, label in (({}, "plain"), ({"batch": 1, "n_cell": 3, "n_out": 3}, "batch1"),
                          ({"projection": True, "n_out": 3, "peephole": True}, "proj_peep"),
                          ({"layer_norm": True, "cifg": True}, "ln_cifg")):
            models[f"hybrid_lstm_{label}_{tag}"] = asym(_lstm_model(hybrid=True, **kw), a)
        models[f"hybrid_rnn_{tag}"] = _Builder(2).input((3, 6)).qconst(5, 6, scale=0.01) \
            .qconst(5, 5, scale=0.015).const(5).variable(3, 5) \
            .build("RNN", [(3, 5)], fused_activation_function=4, asymmetric_quantize_inputs=a)
        models[f"hybrid_uni_rnn_{tag}"] = _Builder(3).input((2, 4, 7)) \
            .qconst(6, 7, scale=0.01).qconst(6, 6, scale=0.02).const(6).variable(2, 6) \
            .build("UNIDIRECTIONAL_SEQUENCE_RNN", [(2, 4, 6)], time_major=False,
                   fused_activation_function=1, asymmetric_quantize_inputs=a)
        b = _Builder(4).input((2, 3, 4))
        b.qconst(5, 4, scale=0.01).qconst(5, 5, scale=0.02).const(5).variable(2, 5)
        b.qconst(4, 4, scale=0.012).qconst(4, 4, scale=0.02).const(4).variable(2, 4)
        b.input((2, 3, 4)).qconst(5, 4, scale=0.03).qconst(4, 4, scale=0.01)
        models[f"hybrid_bidi_rnn_{tag}"] = b.build(
            "BIDIRECTIONAL_SEQUENCE_RNN", [(2, 3, 5), (2, 3, 4)], time_major=False,
            fused_activation_function=4, asymmetric_quantize_inputs=a)
        for act in (1, 4):
            b = _Builder(5).input((2, 5)).qconst(6, 5, scale=0.01).qconst(6, 4, scale=0.02)
            models[f"hybrid_svdf_act{act}_{tag}"] = b.const(3).variable(2, 24).build(
                "SVDF", [(2, 3)], rank=2, fused_activation_function=act,
                asymmetric_quantize_inputs=a)
    return [(name, (lambda n=name, c=content: (n, c, None))) for name, content in models.items()]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", choices=["models", "ops", "recurrent"], action="append")
    p.add_argument("--match", default="")
    p.add_argument("--json")
    p.add_argument("--timeout", type=float, default=120.0)
    args = p.parse_args(argv)
    parts = args.only or ["ops", "recurrent", "models"]
    items = []
    if "ops" in parts:
        items += op_case_items()
    if "recurrent" in parts:
        items += recurrent_items()
    if "models" in parts:
        for path in model_files():
            if _has_float_input(path.read_bytes()):
                items.append((path.name, _file_loader(path)))
            else:
                print(f"skip {path.name}: no float input", flush=True)
    items = [(n, f) for n, f in items if args.match in n]
    rows = []
    t0 = time.time()
    for k, (name, load) in enumerate(items):
        model_rows = run_model(load, name, args.timeout)
        rows += model_rows
        bad = [(r, finding(r)) for r in model_rows if finding(r)]
        for r, why in bad:
            detail = r.get("pattern") or r.get("edgelite")
            print(f"FIND {name} [{r['resolver']}] {r['kind']}: {why}: {detail}", flush=True)
        if not bad and ("models" in parts and "ops" not in parts):
            print(f"ok   {name}", flush=True)
        if k % 50 == 49:
            print(f"... {k + 1}/{len(items)} items, {time.time() - t0:.0f} s", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
    findings = [r for r in rows if finding(r)]
    print(f"\n{len(items)} models, {len(rows)} runs, {len(findings)} findings "
          f"({time.time() - t0:.0f} s wall)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
