"""The command line: `edgelite COMMAND ...` and `tflite-convert`.

The top of the stack: every command imports the parts it needs inside its body, so importing this
module (and `edgelite --help`) stays cheap.
"""
from __future__ import annotations

import json
from pathlib import Path

import typer

from .inspect import describe, inspect_text, shape_text, table

app = typer.Typer(
    name="edgelite",
    help="edgelite: a .tflite inference runtime and ONNX converter, in Python on numpy.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """edgelite: a .tflite inference runtime and ONNX converter, in Python on numpy."""
    # A callback keeps typer in multi-command mode, so `edgelite inspect MODEL` stays spelled out
    # even while `inspect` is the only command.


def _fail(message: str) -> None:
    """Print one `error: ...` line to stderr and exit with status 1."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def _load_model(path: Path):
    from edgelite.schema import ModelError, load

    if not path.exists():
        _fail(f"no such file: {path}")
    if path.is_dir():
        _fail(f"{path} is a directory, not a model file")
    try:
        return load(path)
    except ModelError as e:
        _fail(f"{path}: {e}")


# ---------------------------------------------------------------------------------------------
# inspect

@app.command("inspect")
def inspect_command(
    model: Path = typer.Argument(..., help="the .tflite model file"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON document instead of text"),
) -> None:
    """Show what a .tflite model holds: inputs, outputs, ops, subgraphs, signatures, weights."""
    facts = describe(_load_model(model), model)
    if as_json:
        typer.echo(json.dumps(facts, indent=1))
    else:
        typer.echo("\n".join(inspect_text(facts)))


# ---------------------------------------------------------------------------------------------
# run

TOP_OP_TYPES = 8        # op types `run --profile` lists
FIRST_VALUES = 5        # values shown per output
LABELS_KEY = "y"        # the --data array of labels that `run` scores argmax against
SEED = 0                # of the random inputs used without --data


@app.command("run")
def run_command(
    model: Path = typer.Argument(..., help="the .tflite model file"),
    data: Path | None = typer.Option(
        None, "--data", help="an .npz of inputs, keyed by input name (signature or tensor name) "
        "or input_0, input_1, ... (or x for a one-input model); a leading axis of samples is fed "
        f"one at a time; an array '{LABELS_KEY}' of labels gives accuracy, arrays named like an "
        "output are compared with it, 'labels' names classes. Default: seeded random inputs"),
    signature: str | None = typer.Option(None, "--signature",
                                         help="run this signature instead of subgraph 0"),
    repeat: int = typer.Option(10, "--repeat", min=1, help="invokes timed for the latency"),
    threads: int | None = typer.Option(
        None, "--threads", min=1, help="num_threads of the interpreter (default: the runtime's)"),
    profile: bool = typer.Option(
        False, "--profile", help="time per op type; arena bytes vs the live-tensor lower bound"),
    reference: bool = typer.Option(
        False, "--reference", help="integer kernels with the arithmetic of TFLite's reference "
        "kernels, bit for bit (OpResolverType.BUILTIN_REF); by default int8 may round in float, "
        "at most 1 off, as LiteRT's optimized kernels"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON document instead of text"),
) -> None:
    """Run a .tflite model in edgelite's interpreter: outputs, accuracy on labels, latency."""
    ir = _load_model(model)
    arrays = _read_npz(data) if data is not None else None
    try:
        session = Session(model, ir, signature, threads, reference)
        feeds = session.match(arrays, data) if arrays is not None else session.random_feeds()
        report = session.report(feeds, arrays or {}, repeat, profile)
    except _Refused as e:
        _fail(str(e))
    except Exception as e:  # the interpreter's errors name the op and tensor; keep them one line
        _fail(f"{model.name}: {_one_line(e)}")
    typer.echo(json.dumps(report, indent=1) if as_json else "\n".join(_run_text(report)))


class _Refused(Exception):
    """A problem with what the user gave (names, shapes, dtypes): its message is the error."""


def _read_npz(path: Path) -> dict:
    import numpy as np

    if not path.is_file():
        _fail(f"no such file: {path}")
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except Exception as e:
        _fail(f"cannot read --data {path} as an .npz: {_one_line(e)}")


def _one_line(e: Exception) -> str:
    """An exception as one line; the interpreter's list of unsupported operators grouped by op."""
    import re

    from edgelite.interpreter import UnsupportedOpsError

    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()] or [type(e).__name__]
    if not isinstance(e, UnsupportedOpsError) or len(lines) == 1:
        return " ".join(lines) if isinstance(e, (ValueError, RuntimeError)) \
            else f"{type(e).__name__}: {' '.join(lines)}"
    where: dict = {}   # what is missing -> operators
    for ln in lines[1:]:
        m = re.fullmatch(r"subgraph (\d+) operator (\d+): (.*)", ln)
        what, op = (m[3], m[2] if m[1] == "0" else f"{m[1]}:{m[2]}") if m else (ln, None)
        where.setdefault(what, []).extend([op] if op else [])
    parts = [f"{what} at operator{'s' if len(ops) > 1 else ''} {', '.join(ops)}" if ops else what
             for what, ops in where.items()]
    return f"{lines[0].rstrip(':')}: " + "; ".join(parts)


def random_inputs(specs, seed: int = SEED) -> list:
    """Seeded random arrays for (shape, dtype) pairs: floats in [-1, 1), integers over their
    type's range (int32/int64 in [0, 10): they are often indices), booleans."""
    import numpy as np

    rng = np.random.default_rng(seed)
    arrays = []
    for shape, dtype in specs:
        dtype = np.dtype(dtype)
        if dtype.kind == "f":
            arrays.append(rng.uniform(-1, 1, shape).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.integers(0, 2, shape).astype(bool))
        elif dtype.itemsize >= 4:
            arrays.append(rng.integers(0, 10, shape).astype(dtype))
        else:
            info = np.iinfo(dtype)
            arrays.append(rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype))
    return arrays


def step_times(plan, repeat: int, num_threads: int | None = None) -> list:
    """Median seconds of each step of a prepared plan (`SubgraphPlan`) over `repeat` runs on the
    inputs it holds."""
    import statistics
    import time

    from edgelite.interpreter import threads

    clock = time.perf_counter
    times = [[0.0] * repeat for _ in plan.steps]
    with threads.limit(num_threads):
        for r in range(repeat):
            for i, (run, args) in enumerate(plan.steps):
                start = clock()
                run(*args)
                times[i][r] = clock() - start
    return [statistics.median(t) for t in times]


def op_type_profile(plan, seconds: list) -> list:
    """Step times summed by op type, slowest first: [{op, steps, ms, share}]."""
    by_type: dict = {}
    for oi, s in zip(plan.step_ops, seconds):
        entry = by_type.setdefault(plan.sg.operators[oi].op, [0, 0.0])
        entry[0] += 1
        entry[1] += s
    total = sum(seconds) or 1.0
    return [{"op": op, "steps": n, "ms": s * 1e3, "share": s / total}
            for op, (n, s) in sorted(by_type.items(), key=lambda kv: -kv[1][1])]


def duration(ms: float) -> str:
    return f"{ms:.3g} ms" if ms >= 1 else f"{ms * 1e3:.3g} µs"


def percentiles_ms(seconds: list) -> dict:
    import numpy as np

    p10, p50, p90 = np.percentile(np.asarray(seconds) * 1e3, [10, 50, 90])
    return {"median": float(p50), "p10": float(p10), "p90": float(p90), "runs": len(seconds)}


class Session:
    """One entry point of a model in edgelite's interpreter: subgraph 0 through the Interpreter
    API, or a signature through its runner. Ports are dicts: name, keys (names --data may use),
    index, shape, dtype, quantization."""

    def __init__(self, path: Path, ir, signature: str | None, threads: int | None,
                 reference: bool = False):
        from edgelite.interpreter import Interpreter, OpResolverType

        self.path, self.ir, self.signature, self.threads = path, ir, signature, threads
        kind = OpResolverType.BUILTIN_REF if reference else OpResolverType.AUTO
        self.interpreter = Interpreter(model_path=str(path), num_threads=threads,
                                       experimental_op_resolver_type=kind)
        if signature is None:
            self.runner, subgraph = None, 0
            self.interpreter.allocate_tensors()
            aliases: dict = {}   # tensor -> its names in signatures of subgraph 0
            for sig in ir.signature_defs:
                if sig.subgraph_index == 0:
                    for name, t in [*sig.inputs.items(), *sig.outputs.items()]:
                        aliases.setdefault(t, []).append(name)
            self.inputs = [_port(d, d["name"], aliases.get(d["index"], []))
                           for d in self.interpreter.get_input_details()]
            self.outputs = [_port(d, d["name"], aliases.get(d["index"], []))
                            for d in self.interpreter.get_output_details()]
        else:
            keys = [s.signature_key for s in ir.signature_defs]
            if signature not in keys:
                raise _Refused(f"{path.name} has no signature {signature!r} (it has: "
                               f"{', '.join(map(repr, keys)) or 'none'})")
            self.runner = self.interpreter.get_signature_runner(signature)
            self.runner.allocate_tensors()
            subgraph = ir.signature_defs[keys.index(signature)].subgraph_index
            self.inputs = [_port(d, n, []) for n, d in self.runner.get_input_details().items()]
            self.outputs = [_port(d, n, []) for n, d in self.runner.get_output_details().items()]
        # The execution plan, for --profile (the interpreter keeps one per subgraph).
        self.plan = self.interpreter._runtime.subgraph(subgraph)

    def random_feeds(self) -> list:
        arrays = random_inputs([(p["shape"], p["dtype"]) for p in self.inputs])
        return [(a, False, f"random (seed {SEED})") for a in arrays]

    def match(self, arrays: dict, path: Path) -> list:
        """(array, per_sample, where from) for each input, from the arrays of an .npz."""
        feeds, missing = [], []
        for k, port in enumerate(self.inputs):
            names = list(dict.fromkeys([*port["keys"], f"input_{k}"]
                                       + (["x"] if len(self.inputs) == 1 else [])))
            key = next((n for n in names if n in arrays), None)
            if key is None:
                missing.append(" or ".join(map(repr, names)))
                continue
            value, note = _convert(arrays[key], port, key)
            feeds.append(_fit(value, port, key) + (f"--data {key!r}{note}",))
        if missing:
            raise _Refused(f"--data {path.name} has no array for input {'; '.join(missing)} "
                           f"(it has: {', '.join(arrays) or 'nothing'})")
        counts = {len(v) for v, per_sample, _ in feeds if per_sample}
        if len(counts) > 1:
            raise _Refused(f"--data inputs hold different numbers of samples: {sorted(counts)}")
        return feeds

    def invoke(self, values: list) -> list:
        if self.runner is not None:
            out = self.runner(**{p["name"]: v for p, v in zip(self.inputs, values)})
            return [out[p["name"]] for p in self.outputs]
        for p, v in zip(self.inputs, values):
            self.interpreter.set_tensor(p["index"], v)
        self.interpreter.invoke()
        return [self.interpreter.get_tensor(p["index"]) for p in self.outputs]

    def latencies(self, values: list, repeat: int) -> list:
        """Seconds of `repeat` invokes after a warm-up one; a signature's runner call includes
        copying its inputs in and outputs out."""
        import time

        call = self.interpreter.invoke if self.runner is None else lambda: self.invoke(values)
        clock, times = time.perf_counter, []
        self.invoke(values)
        for _ in range(repeat):
            start = clock()
            call()
            times.append(clock() - start)
        return times

    def report(self, feeds: list, arrays: dict, repeat: int, profile: bool) -> dict:
        import numpy as np

        n = next((len(v) for v, per_sample, _ in feeds if per_sample), None)
        sample = lambda s: [v[s:s + 1] if per_sample else v for v, per_sample, _ in feeds]
        results = [self.invoke(sample(s)) for s in range(n or 1)]
        gathered = [np.concatenate(outs) if n else outs[0] for outs in zip(*results)]
        first = results[0]
        labels = _class_names(self.ir, arrays)
        report = {
            "model": str(self.path), "signature": self.signature, "threads": self.threads,
            "samples": n or 1,
            "inputs": [{"name": p["name"], "shape": p["shape"], "dtype": p["dtype"].name,
                        "source": src + (f", {n} samples one at a time" if per else "")}
                       for p, (_, per, src) in zip(self.inputs, feeds)],
            "outputs": [_output_facts(p, v, labels if k == 0 else None)
                        for k, (p, v) in enumerate(zip(self.outputs, first))],
            "expected": _compare(self.outputs, gathered, arrays),
            "accuracy": _accuracy(self.outputs, gathered, arrays),
            "latency_ms": percentiles_ms(self.latencies(sample(0), repeat)),
        }
        if profile:
            plan = self.plan
            seconds = step_times(plan, repeat, self.threads)
            report["profile"] = {
                "op_types": op_type_profile(plan, seconds), "steps_ms": sum(seconds) * 1e3,
                "arena_bytes": plan.arena_bytes, "live_bytes": plan.live_bytes,
                "arena_vs_live": plan.arena_bytes / plan.live_bytes if plan.live_bytes else None}
        return report


def _port(details: dict, name: str, aliases: list) -> dict:
    import numpy as np

    keys = list(dict.fromkeys([name, details["name"], *aliases]))
    return {"name": name, "keys": keys, "index": details["index"],
            "shape": [int(d) for d in details["shape"]], "dtype": np.dtype(details["dtype"]),
            "quantization": details["quantization"]}


def _convert(value, port: dict, key: str):
    """`value` in the input's dtype, and a note saying how it got there ("" if unchanged)."""
    import numpy as np

    want, scale, zero_point = port["dtype"], *port["quantization"]
    if value.dtype == want:
        return value, ""
    if want.kind == "f" and value.dtype.kind in "biuf":
        return value.astype(want), f" (cast from {value.dtype})"
    if want.kind in "iu" and value.dtype.kind == "f" and scale > 0:
        info = np.iinfo(want)
        q = np.clip(np.round(value / scale) + zero_point, info.min, info.max).astype(want)
        return q, f" (quantized: scale {scale:.6g}, zero point {zero_point})"
    if want.kind in "iu" and value.dtype.kind in "iub":
        info = np.iinfo(want)
        if value.size == 0 or (value.min() >= info.min and value.max() <= info.max):
            return value.astype(want), f" (cast from {value.dtype})"
    raise _Refused(f"input {port['name']!r} is {want.name}; --data {key!r} is {value.dtype} "
                   "and cannot be converted to it")


def _fit(value, port: dict, key: str) -> tuple:
    """(value, per_sample): the whole array when it has the input's shape, else samples along
    its first axis when the input has a batch of 1."""
    shape, got = tuple(port["shape"]), value.shape
    if got == shape:
        return value, False
    if shape and shape[0] == 1:
        if got == shape[1:]:
            return value[None], False
        if len(got) == len(shape) and got[1:] == shape[1:] and got[0] > 0:
            return value, True
    batch = f" (or [N, {', '.join(map(str, shape[1:]))}]: N samples)" if shape[:1] == (1,) else ""
    raise _Refused(f"input {port['name']!r} has shape {list(shape)}{batch}; --data {key!r} has "
                   f"shape {list(got)}")


def _class_names(ir, arrays: dict) -> list | None:
    names = arrays.get("labels")
    if names is not None and names.dtype.kind == "U" and names.ndim == 1:
        return [str(n) for n in names]
    text = ir.get_metadata("edgelite_labels")
    return text.decode("utf-8", "replace").split("\n") if text else None


def _output_facts(port: dict, value, labels: list | None) -> dict:
    import numpy as np

    flat = value.reshape(-1)
    facts = {"name": port["name"], "shape": list(value.shape), "dtype": value.dtype.name,
             "size": int(value.size), "first_values": flat[:FIRST_VALUES].tolist()}
    if value.size > 1 and value.dtype.kind in "iuf":
        best = int(np.argmax(value.reshape(-1, value.shape[-1])[0])) if value.ndim else 0
        facts["argmax"] = best
        if labels and value.shape[-1] == len(labels):
            facts["class"] = labels[best]
    return facts


def _compare(ports: list, outputs: list, arrays: dict) -> list:
    """Max |difference| from --data arrays named like an output (or output_0, ...)."""
    import numpy as np

    found = []
    for k, (port, value) in enumerate(zip(ports, outputs)):
        key = next((n for n in [*port["keys"], f"output_{k}"] if n in arrays
                    and arrays[n].shape == value.shape and arrays[n].dtype.kind in "iuf"), None)
        if key is None:
            continue
        diff = np.abs(value.astype(np.float64) - arrays[key].astype(np.float64))
        found.append({"output": port["name"], "key": key, "max_abs_diff": float(diff.max())})
    return found


def _accuracy(ports: list, outputs: list, arrays: dict) -> dict | None:
    """Argmax of the first output against the labels array, when --data has one."""
    import numpy as np

    labels = arrays.get(LABELS_KEY)
    if labels is None or not outputs or outputs[0].ndim == 0:
        return None
    if labels.ndim == 2 and labels.shape[1] > 1:   # one-hot
        labels = labels.argmax(axis=1)
    predicted = outputs[0].reshape(-1, outputs[0].shape[-1]).argmax(axis=1)
    if predicted.size != labels.size:
        raise _Refused(f"--data {LABELS_KEY!r} holds {labels.size} labels; the model gave "
                       f"{predicted.size} predictions")
    correct = int((predicted == labels.reshape(-1)).sum())
    return {"correct": correct, "total": int(labels.size), "value": correct / labels.size,
            "output": ports[0]["name"], "labels": LABELS_KEY}


def _run_text(r: dict) -> list:
    where = f"signature {r['signature']!r}" if r["signature"] else "subgraph 0"
    lines = [f"{Path(r['model']).name} in edgelite ({where}, threads: {r['threads'] or 'default'})",
             "Inputs",
             *table([[p["name"], p["dtype"], shape_text(p["shape"]), p["source"]]
                     for p in r["inputs"]]),
             "Outputs" + (" (sample 0)" if r["samples"] > 1 else "")]
    lines += table([[o["name"], o["dtype"], shape_text(o["shape"]),
                     f"argmax {o['argmax']}" + (f" ({o['class']})" if "class" in o else "")
                     if "argmax" in o else "", "first " + _values(o)]
                    for o in r["outputs"]])
    for e in r["expected"]:
        lines.append(f"  {e['output']} vs --data {e['key']!r}: max |diff| "
                     f"{e['max_abs_diff']:.3g}")
    a = r["accuracy"]
    if a is not None:
        lines.append(f"accuracy: {a['value']:.4f} ({a['correct']}/{a['total']}, argmax of "
                     f"{a['output']!r} vs {a['labels']!r})")
    t = r["latency_ms"]
    lines.append(f"latency: {duration(t['median'])} median of {t['runs']} runs (p10 "
                 f"{duration(t['p10'])}, p90 {duration(t['p90'])})")
    p = r.get("profile")
    if p:
        lines.append("Profile (median per step, summed by op type; steps total "
                     f"{duration(p['steps_ms'])})")
        lines += table([[o["op"], f"{o['steps']} step{'s' if o['steps'] > 1 else ''}",
                         duration(o["ms"]), f"{o['share']:.1%}"]
                        for o in p["op_types"][:TOP_OP_TYPES]])
        rest = p["op_types"][TOP_OP_TYPES:]
        if rest:
            rest_ms = sum(o["ms"] for o in rest)
            lines.append(f"  ({len(rest)} more op types: {duration(rest_ms)})")
        ratio = f" ({p['arena_vs_live']:.2f}x)" if p["arena_vs_live"] else ""
        lines.append(f"arena: {p['arena_bytes']:,} bytes; live-tensor lower bound "
                     f"{p['live_bytes']:,} bytes{ratio}")
    return lines


def _values(output: dict) -> str:
    values = output["first_values"]
    shown = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in values)
    return f"[{shown}{', ...' if output['size'] > len(values) else ''}]"


# convert: the implementation lives in cli_convert.py (`tflite-convert` is the same command)

from .cli_convert import convert_command  # noqa: E402

app.command("convert")(convert_command)

# compare: quantization's per-layer error report, in compare.py

from .compare import compare_command  # noqa: E402

app.command("compare")(compare_command)

# train: on-device fine-tuning, in cli_train.py

from .cli_train import train_command  # noqa: E402

app.command("train")(train_command)


# ---------------------------------------------------------------------------------------------
# entry points (pyproject's console scripts)

def main() -> None:
    """`edgelite`"""
    app()


def convert_main() -> None:
    """`tflite-convert`"""
    from .cli_convert import main as convert
    convert()


if __name__ == "__main__":
    main()
