"""`edgelite analyze MODEL`: a model's structure as TensorFlow's `tf.lite.experimental.Analyzer`
prints it (per subgraph the op list `Op#2 CONV_2D(T#137, T#44, T#93) -> [T#138]` and the tensors
with shapes, types and quantization), plus MACs and parameters per op and in total, weight bytes
by dtype, signatures, metadata, and what a delegate would take: which ops, in which partitions,
and for each op it declines, why (the interpreter's own partitioning, without building kernels).

From Python:

    from edgelite.cli.analyze import analyze
    facts = analyze("model.tflite")          # JSON-ready; analyze_text(facts) is the report
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

from .common import echo, load_model, one_line
from .params import Arg, Opt

DATA_PREVIEW = 4        # constant values shown per tensor in the text report


def analyze_command(
    model: Annotated[Path, Arg("the .tflite model file")],
    delegate: Annotated[list[str], Opt(
        "--delegate", metavar="opencl[:fp16]", help="the delegate whose support is analyzed "
        "(repeatable; default opencl); 'none' for none")] = None,
    as_json: Annotated[bool, Opt("--json", help="print one JSON document instead of text")] = False,
) -> None:
    """Analyze a .tflite model: ops and tensors, MACs and parameters, delegate support."""
    facts = analyze(model, delegates=delegate or ["opencl"])
    echo(json.dumps(facts, indent=1) if as_json else "\n".join(analyze_text(facts)))


def analyze(model, delegates=("opencl",)) -> dict:
    """The facts `edgelite analyze` reports (JSON-ready)."""
    from .inspect import describe

    path = Path(model)
    ir = load_model(path)
    described = describe(ir, path)
    subgraphs = [_subgraph(ir, i, sg) for i, sg in enumerate(ir.subgraphs)]
    facts = {
        "model": str(path),
        "size_bytes": path.stat().st_size,
        "subgraphs": subgraphs,
        "total": {"ops": sum(len(s["ops"]) for s in subgraphs),
                  "macs": sum(s["macs"] for s in subgraphs),
                  "params": sum(s["params"] for s in subgraphs)},
        "weights": described["weights"],
        "signatures": described["signatures"],
        "metadata": described["metadata"],
        "delegates": {},
    }
    for spec in delegates:
        if spec and spec != "none":
            facts["delegates"][spec] = delegate_support(path, spec)
    return facts


# -- ops and tensors ------------------------------------------------------------------------------

def _subgraph(ir, index: int, sg) -> dict:
    ops = []
    for oi, op in enumerate(sg.operators):
        macs = op_macs(ir, sg, op)
        params = sum(_count(sg.tensors[t].shape) for t in op.inputs
                     if t >= 0 and ir.constant(sg, t) is not None)
        ops.append({"index": oi, "op": op.op, "version": op.opcode.version,
                    "inputs": list(op.inputs), "outputs": list(op.outputs),
                    "macs": macs, "params": params})
    return {
        "index": index, "name": sg.name or ("main" if index == 0 else ""),
        "inputs": list(sg.inputs), "outputs": list(sg.outputs),
        "ops": ops,
        "tensors": [_tensor(ir, sg, t) for t in range(len(sg.tensors))],
        "macs": sum(o["macs"] or 0 for o in ops),
        "params": sum(o["params"] for o in ops),
    }


def _tensor(ir, sg, t: int) -> dict:
    from .inspect import _quantization_facts

    tensor = sg.tensors[t]
    value = ir.constant(sg, t)
    facts = {"index": t, "name": tensor.name, "shape": list(tensor.shape),
             "shape_signature": list(tensor.shape_signature) if tensor.shape_signature
             is not None else None, "dtype": tensor.dtype,
             "quantization": _quantization_facts(tensor.quantization),
             "constant_bytes": ir.buffers[tensor.buffer].nbytes if value is not None else None,
             "buffer": tensor.buffer, "is_variable": tensor.is_variable}
    if value is not None and value.dtype.kind in "biuf":
        facts["data"] = value.reshape(-1)[:DATA_PREVIEW].tolist()
    return facts


def _count(shape) -> int:
    return math.prod(int(d) for d in shape) if all(int(d) >= 0 for d in shape) else 0


def op_macs(ir, sg, op) -> int | None:
    """Multiply-accumulates of one operator from its static shapes (0 for ops without any;
    None when a shape it needs is unknown)."""
    shapes = [sg.tensors[t].shape if t >= 0 else None for t in op.inputs]
    out = sg.tensors[op.outputs[0]].shape if op.outputs else ()
    if any(int(d) < 0 for d in out):
        return None
    n_out = _count(out)
    name = op.op
    try:
        if name == "CONV_2D":            # filter [O, KH, KW, I]
            _, kh, kw, cin = shapes[1]
            return n_out * kh * kw * cin
        if name == "DEPTHWISE_CONV_2D":  # filter [1, KH, KW, C*M]
            return n_out * shapes[1][1] * shapes[1][2]
        if name == "CONV_3D":            # filter [KD, KH, KW, I, O]
            kd, kh, kw, cin, _ = shapes[1]
            return n_out * kd * kh * kw * cin
        if name == "FULLY_CONNECTED":    # weights [O, I]
            return n_out * shapes[1][-1]
        if name == "TRANSPOSE_CONV":     # (output shape, filter [O, KH, KW, I], input)
            _, kh, kw, _ = shapes[1]
            return _count(shapes[2]) * kh * kw * shapes[1][0]
        if name == "BATCH_MATMUL":
            adj_x = bool(getattr(op.options, "adj_x", False)) if op.options else False
            return n_out * shapes[0][-2 if adj_x else -1]
    except (TypeError, ValueError, IndexError):
        return None
    return 0


# -- delegate support -----------------------------------------------------------------------------

def delegate_support(path: Path, spec: str) -> dict:
    """Where each op of every subgraph would run with the delegate `spec` (opencl[:fp16]): the
    interpreter partitions the model as it would to run it, but no kernel is built."""
    from edgelite.interpreter import Interpreter, load_delegate
    from edgelite.interpreter.delegation import DelegateError, placement

    name, _, precision = spec.partition(":")
    try:
        real = load_delegate(name, {"precision": precision} if precision else {})
    except DelegateError as e:
        return {"available": False, "error": one_line(e)}
    dry = _dry_run(real)
    try:
        it = Interpreter(model_path=str(path), experimental_delegates=[dry])
        it.allocate_tensors()
        for si in range(1, len(it._runtime.model.subgraphs)):
            plan = it._runtime.subgraph(si)    # every subgraph's plan, not only subgraph 0's
            if not plan.ready:
                plan.prepare()
    except Exception as e:  # a model the CPU kernels cannot prepare: its support is unknown
        return {"available": True, "device": real.device_name(),
                "error": f"the interpreter cannot prepare {path.name}: {one_line(e)}"}
    placed = placement(it)
    on = [p for p in placed if p["where"] == real.name]
    partitions: dict = {}
    for p in on:
        partitions.setdefault((p["subgraph"], p["partition"]), []).append(p["index"])
    declined = [p for p in placed if p["where"] == "CPU"]
    reasons: dict = {}
    for p in declined:
        reasons.setdefault(p["reason"] or "?", []).append(f"{p['subgraph']}:{p['index']}")
    return {
        "available": True, "delegate": real.name, "device": real.device_name(),
        "ops_delegated": len(on), "ops_on_cpu": len(declined),
        "ops_folded": sum(p["where"] == "folded" for p in placed),
        "partitions": [{"subgraph": s, "partition": k, "ops": ops}
                       for (s, k), ops in sorted(partitions.items())],
        "declined": [{"subgraph": p["subgraph"], "index": p["index"], "op": p["op"],
                      "reason": p["reason"]} for p in declined],
        "reasons": reasons,
        "placement": placed,
    }


def _dry_run(real):
    """A delegate that asks `real` which nodes it supports and builds nothing: its partitions
    run nothing (the interpreter is only prepared, never invoked)."""
    from edgelite.interpreter.delegation import Delegate

    class DryRun(Delegate):
        name = real.name

        def device_name(self) -> str:
            return real.device_name()

        def support(self, node):
            return real.support(node)

        def prepare(self, partition):
            def run(*_arrays):
                raise RuntimeError("analyze's dry-run delegate does not run")
            return run

    return DryRun(real.options)


# -- the text report ------------------------------------------------------------------------------

def analyze_text(f: dict) -> list:
    n = len(f["subgraphs"])
    lines = [f"=== {f['model']} ===", "",
             f"Your TFLite model has '{n}' subgraph(s). In the subgraph description below,",
             "T# represents the Tensor numbers. For example, in Subgraph#0, the CONV_2D op takes",
             "tensor #0 and tensor #1 as input and produces tensor #2 as output "
             "(an example of the notation).", ""]
    for s in f["subgraphs"]:
        lines += _subgraph_text(s)
    t = f["total"]
    lines += [f"Model total: {t['ops']} ops, {human(t['macs'])} MACs, {human(t['params'])} "
              "parameters", ""]
    w = f["weights"]
    by_dtype = ", ".join(f"{d} {b:,}" for d, b in w["bytes_by_dtype"].items())
    lines.append(f"Weights: {w['total_bytes']:,} bytes in {w['constant_tensors']} constant "
                 f"tensors" + (f" ({by_dtype})" if by_dtype else ""))
    lines.append("Signatures: " + ("none" if not f["signatures"] else ""))
    for sig in f["signatures"]:
        ins = ", ".join(f"{i['name']}=T#{i['index']}" for i in sig["inputs"])
        outs = ", ".join(f"{o['name']}=T#{o['index']}" for o in sig["outputs"])
        lines.append(f"  {sig['key']!r} (Subgraph#{sig['subgraph']}): ({ins}) -> [{outs}]")
    lines.append("Metadata: " + ("none" if not f["metadata"] else ""))
    for m in f["metadata"]:
        text = m["text"]
        shown = repr(text[:60]) + ("..." if len(text) > 60 else "") if text else "(binary)"
        lines.append(f"  {m['name']}: {m['size_bytes']:,} bytes {shown}")
    for spec, d in f["delegates"].items():
        lines += [""] + _delegate_text(spec, d)
    return lines


def _subgraph_text(s: dict) -> list:
    def ts(ids):
        return ", ".join(f"T#{t}" if t >= 0 else "-" for t in ids)

    lines = [f"Subgraph#{s['index']} {s['name']}({ts(s['inputs'])}) -> [{ts(s['outputs'])}]"]
    heads = [f"  Op#{o['index']} {o['op']}({ts(o['inputs'])}) -> [{ts(o['outputs'])}]"
             for o in s["ops"]]
    width = max((len(h) for h in heads), default=0)
    for h, o in zip(heads, s["ops"]):
        extra = []
        if o["macs"]:
            extra.append(f"MACs {human(o['macs'])}")
        if o["params"]:
            extra.append(f"params {human(o['params'])}")
        lines.append((h.ljust(width) + "  " + "  ".join(extra)).rstrip())
    lines += [f"  total: {human(s['macs'])} MACs, {human(s['params'])} parameters", "",
              f"Tensors of Subgraph#{s['index']}"]
    for t in s["tensors"]:
        line = f"  T#{t['index']}({t['name']}) shape:{t['shape']}, type:{t['dtype'].upper()}"
        if t["shape_signature"] and t["shape_signature"] != t["shape"]:
            line += f" shape_signature:{t['shape_signature']}"
        if t["constant_bytes"] is not None:
            line += f" RO {t['constant_bytes']} bytes"
        if "data" in t:
            line += f", data:[{', '.join(_num(v) for v in t['data'])}" + \
                (", ...]" if _count(t["shape"]) > len(t["data"]) else "]")
        q = t["quantization"]
        if q:
            line += f", quant: {_quant(q)}"
        lines.append(line)
    return lines + [""]


def _delegate_text(spec: str, d: dict) -> list:
    if not d["available"]:
        return [f"Delegate {spec}: not available here: {d['error']}"]
    if "error" in d:
        return [f"Delegate {spec} ({d['device']}): {d['error']}"]
    parts = d["partitions"]
    lines = [f"Delegate {spec} ({d['device']}): {d['ops_delegated']} ops in {len(parts)} "
             f"partition{'s' if len(parts) != 1 else ''}, {d['ops_on_cpu']} ops on CPU"
             + (f", {d['ops_folded']} folded at prepare" if d["ops_folded"] else "")]
    for p in parts:
        lines.append(f"  partition {p['partition']} (Subgraph#{p['subgraph']}): {len(p['ops'])} "
                     f"ops, {_ranges(p['ops'])}")
    if d["declined"]:
        lines.append("  on CPU:")
        for reason, where in d["reasons"].items():
            ops = sorted({e["op"] for e in d["declined"] if (e["reason"] or "?") == reason})
            at = ", ".join(f"Op#{i}" if s == "0" else f"Subgraph#{s} Op#{i}"
                           for s, i in (w.split(":") for w in where))
            lines.append(f"    {', '.join(ops)} ({at}): {reason}")
    return lines


def _ranges(ops: list) -> str:
    """Op#0..Op#5, Op#7 from sorted op indices."""
    out, start = [], None
    for i, o in enumerate(ops):
        if start is None:
            start = o
        if i + 1 == len(ops) or ops[i + 1] != o + 1:
            out.append(f"Op#{start}" if start == o else f"Op#{start}..Op#{o}")
            start = None
    return ", ".join(out)


def _quant(q: dict) -> str:
    if not q.get("per_channel"):
        return f"scale {q['scale']:.6g} zero_point {q['zero_point']}"
    return (f"per-channel axis {q['axis']} ({q['channels']}), scale {min(q['scale']):.3g}.."
            f"{max(q['scale']):.3g}")


def _num(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def human(n) -> str:
    """1234567 -> 1.23M."""
    if n is None:
        return "?"
    for unit, size in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)
