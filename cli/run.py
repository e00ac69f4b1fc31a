"""`edgelite run MODEL [--data FILE.npz]`: run a .tflite model in edgelite's interpreter:
outputs, accuracy on labels, latency, and with --profile time per op type and the arena."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from .common import echo, fail, load_model, one_line, read_npz
from .inspect import shape_text, table
from .params import Arg, Opt
from .session import Refused, Session, duration, op_type_profile, percentiles_ms, step_times

TOP_OP_TYPES = 8        # op types `run --profile` lists
FIRST_VALUES = 5        # values shown per output
LABELS_KEY = "y"        # the --data array of labels that `run` scores argmax against


def run_command(
    model: Annotated[Path, Arg("the .tflite model file")],
    data: Annotated[Path | None, Opt(
        "--data", help="an .npz of inputs, keyed by input name (signature or tensor name) or "
        "input_0, input_1, ... (or x for a one-input model); a leading axis of samples is fed "
        f"one at a time; an array '{LABELS_KEY}' of labels gives accuracy, arrays named like an "
        "output are compared with it, 'labels' names classes. Default: seeded random inputs")] \
        = None,
    signature: Annotated[str | None, Opt(
        "--signature", help="run this signature instead of subgraph 0")] = None,
    repeat: Annotated[int, Opt("--repeat", min=1, help="invokes timed for the latency")] = 10,
    threads: Annotated[int | None, Opt(
        "--threads", min=1, help="num_threads of the interpreter (default: the runtime's)")] = None,
    profile: Annotated[bool, Opt(
        "--profile", help="time per op type; arena bytes vs the live-tensor lower bound")] = False,
    reference: Annotated[bool, Opt(
        "--reference", help="integer kernels with the arithmetic of TFLite's reference kernels, "
        "bit for bit (OpResolverType.BUILTIN_REF); by default int8 may round in float, at most 1 "
        "off, as LiteRT's optimized kernels")] = False,
    as_json: Annotated[bool, Opt("--json", help="print one JSON document instead of text")] = False,
) -> None:
    """Run a .tflite model in edgelite's interpreter: outputs, accuracy on labels, latency."""
    ir = load_model(model)
    arrays = read_npz(data) if data is not None else None
    try:
        session = Session(model, ir, signature, threads, reference)
        feeds = session.match(arrays, data) if arrays is not None else session.random_feeds()
        facts = report(session, feeds, arrays or {}, repeat, profile)
    except Refused as e:
        fail(str(e))
    except Exception as e:  # the interpreter's errors name the op and tensor; keep them one line
        fail(f"{model.name}: {one_line(e)}")
    echo(json.dumps(facts, indent=1) if as_json else "\n".join(_run_text(facts)))


def report(session: Session, feeds: list, arrays: dict, repeat: int, profile: bool) -> dict:
    import numpy as np

    n = next((len(v) for v, per_sample, _ in feeds if per_sample), None)

    def sample(s: int) -> list:
        return [v[s:s + 1] if per else v for v, per, _ in feeds]

    results = [session.invoke(sample(s)) for s in range(n or 1)]
    gathered = [np.concatenate(outs) if n else outs[0] for outs in zip(*results)]
    first = results[0]
    labels = _class_names(session.ir, arrays)
    facts = {
        "model": str(session.path), "signature": session.signature, "threads": session.threads,
        "samples": n or 1,
        "inputs": [{"name": p["name"], "shape": p["shape"], "dtype": p["dtype"].name,
                    "source": src + (f", {n} samples one at a time" if per else "")}
                   for p, (_, per, src) in zip(session.inputs, feeds)],
        "outputs": [_output_facts(p, v, labels if k == 0 else None)
                    for k, (p, v) in enumerate(zip(session.outputs, first))],
        "expected": _compare(session.outputs, gathered, arrays),
        "accuracy": _accuracy(session.outputs, gathered, arrays),
        "latency_ms": percentiles_ms(session.latencies(sample(0), repeat)),
    }
    if profile:
        plan = session.plan
        seconds = step_times(plan, repeat, session.threads)
        facts["profile"] = {
            "op_types": op_type_profile(plan, seconds), "steps_ms": sum(seconds) * 1e3,
            "arena_bytes": plan.arena_bytes, "live_bytes": plan.live_bytes,
            "arena_vs_live": plan.arena_bytes / plan.live_bytes if plan.live_bytes else None}
    return facts


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
    labels = arrays.get(LABELS_KEY)
    if labels is None or not outputs or outputs[0].ndim == 0:
        return None
    if labels.ndim == 2 and labels.shape[1] > 1:   # one-hot
        labels = labels.argmax(axis=1)
    predicted = outputs[0].reshape(-1, outputs[0].shape[-1]).argmax(axis=1)
    if predicted.size != labels.size:
        raise Refused(f"--data {LABELS_KEY!r} holds {labels.size} labels; the model gave "
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
