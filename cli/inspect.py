"""`edgelite inspect MODEL`: what a .tflite model holds. The facts as JSON-ready values
(`describe`) and the text report (`inspect_text`)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from .common import echo, load_model
from .params import Arg, Opt

LARGEST_BUFFERS = 5     # how many of the largest constant buffers `inspect` lists
TEXT_PREVIEW = 80       # longest metadata text shown inline in the text report


def inspect_command(
    model: Annotated[Path, Arg("the .tflite model file")],
    as_json: Annotated[bool, Opt("--json", help="print one JSON document instead of text")] = False,
) -> None:
    """Show what a .tflite model holds: inputs, outputs, ops, subgraphs, signatures, weights."""
    facts = describe(load_model(model), model)
    echo(json.dumps(facts, indent=1) if as_json else "\n".join(inspect_text(facts)))


def describe(model, path: Path | None = None) -> dict:
    """The facts `inspect` reports about a loaded model, as plain JSON-ready values."""
    from collections import Counter

    main = model.subgraphs[0]
    ops = Counter((op.op, op.opcode.version) for sg in model.subgraphs for op in sg.operators)
    op_types = Counter()
    for (name, _), n in ops.items():
        op_types[name] += n
    facts = {}
    if path is not None:
        facts["file"] = {"path": str(path), "name": path.name, "size_bytes": path.stat().st_size}
    facts.update({
        "schema_version": model.version,
        "description": model.description,
        "min_runtime_version": _metadata_text(model.get_metadata("min_runtime_version")),
        "inputs": [_tensor_facts(main, t) for t in main.inputs],
        "outputs": [_tensor_facts(main, t) for t in main.outputs],
        "op_types": dict(sorted(op_types.items())),
        "operators": [{"op": name, "version": v, "count": n}
                      for (name, v), n in sorted(ops.items())],
        "subgraphs": [_subgraph_facts(model, i, sg) for i, sg in enumerate(model.subgraphs)],
        "signatures": [_signature_facts(model, sig) for sig in model.signature_defs],
        "weights": _weight_facts(model),
        "metadata": [_metadata_facts(model, m) for m in model.metadata],
    })
    return facts


def _tensor_facts(sg, index: int, name: str | None = None) -> dict:
    t = sg.tensors[index]
    facts = {"name": name if name is not None else t.name}
    if name is not None:
        facts["tensor"] = t.name
    facts.update({
        "index": index,
        "shape": list(t.shape),
        "shape_signature": list(t.shape_signature if t.shape_signature is not None else t.shape),
        "dtype": t.dtype,
        "quantization": _quantization_facts(t.quantization),
    })
    return facts


def _quantization_facts(q) -> dict | None:
    if q is None or q.scale.size == 0:
        return None
    if not q.per_channel:
        zp = int(q.zero_point[0]) if q.zero_point.size else 0
        return {"scale": float(q.scale[0]), "zero_point": zp}
    return {"per_channel": True, "axis": int(q.quantized_dimension),
            "channels": int(q.scale.size), "scale": [float(s) for s in q.scale],
            "zero_point": [int(z) for z in q.zero_point]}


def _subgraph_facts(model, index: int, sg) -> dict:
    from collections import Counter

    constant = {i for i in range(len(sg.tensors)) if model.constant(sg, i) is not None}
    activations = sum(_nbytes(t) or 0 for i, t in enumerate(sg.tensors) if i not in constant)
    return {
        "index": index,
        "name": sg.name,
        "tensors": len(sg.tensors),
        "operators": len(sg.operators),
        "constant_tensors": len(constant),
        "activation_bytes": activations,
        "inputs": [sg.tensors[t].name for t in sg.inputs],
        "outputs": [sg.tensors[t].name for t in sg.outputs],
        "op_types": dict(sorted(Counter(op.op for op in sg.operators).items())),
    }


def _signature_facts(model, sig) -> dict:
    sg = model.subgraphs[sig.subgraph_index]
    return {
        "key": sig.signature_key,
        "subgraph": sig.subgraph_index,
        "inputs": [_tensor_facts(sg, t, name) for name, t in sig.inputs.items()],
        "outputs": [_tensor_facts(sg, t, name) for name, t in sig.outputs.items()],
    }


def _nbytes(tensor) -> int | None:
    """Bytes of a tensor's static shape, or None for types without a fixed element size."""
    import math

    from edgelite.schema import numpy_dtype

    try:
        itemsize = numpy_dtype(tensor.dtype).itemsize
    except ValueError:
        return None
    return math.prod(tensor.shape) * itemsize


def _weight_facts(model) -> dict:
    """Constant tensors and the buffers holding them (a buffer shared by tensors counts once)."""
    users: dict[int, list] = {}
    constants = 0
    for sg in model.subgraphs:
        for i, t in enumerate(sg.tensors):
            if model.constant(sg, i) is not None:
                constants += 1
                users.setdefault(t.buffer, []).append(t)
    by_dtype: dict[str, int] = {}
    for b, tensors in users.items():
        dtype = tensors[0].dtype
        by_dtype[dtype] = by_dtype.get(dtype, 0) + model.buffers[b].nbytes
    largest = sorted(users, key=lambda b: (-model.buffers[b].nbytes, b))[:LARGEST_BUFFERS]
    return {
        "total_bytes": sum(model.buffers[b].nbytes for b in users),
        "constant_tensors": constants,
        "buffers": len(users),
        "bytes_by_dtype": dict(sorted(by_dtype.items())),
        "all_buffers": len(model.buffers),
        "all_buffer_bytes": sum(b.nbytes for b in model.buffers),
        "largest": [{"buffer": b, "bytes": model.buffers[b].nbytes,
                     "tensor": users[b][0].name, "shape": list(users[b][0].shape),
                     "dtype": users[b][0].dtype} for b in largest],
    }


def _metadata_text(data: bytes | None) -> str | None:
    """A metadata value as text when it is printable text (NUL padding removed), else None."""
    if data is None:
        return None
    try:
        text = data.rstrip(b"\0").decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text or not all(c.isprintable() or c in "\n\t" for c in text):
        return None
    return text


def _metadata_facts(model, m) -> dict:
    data = model.buffers[m.buffer].data.tobytes()
    return {"name": m.name, "buffer": m.buffer, "size_bytes": len(data),
            "text": _metadata_text(data)}


# --- the text report -------------------------------------------------------------------------

def inspect_text(f: dict) -> list[str]:
    lines = []
    if "file" in f:
        lines.append(f"{f['file']['name']}  ({f['file']['size_bytes']:,} bytes)")
    lines += [
        f"  schema version       {f['schema_version']}",
        f"  description          {f['description'] or '-'}",
        f"  min runtime version  {f['min_runtime_version'] or '-'}",
        "",
        f"Inputs (subgraph 0 {f['subgraphs'][0]['name']!r})",
        *_tensor_rows(f["inputs"]),
        "Outputs",
        *_tensor_rows(f["outputs"]),
        "",
        f"Operators ({sum(o['count'] for o in f['operators'])} in {len(f['subgraphs'])} "
        f"subgraph{'s' if len(f['subgraphs']) != 1 else ''})",
        *table([[o["op"], f"v{o['version']}", f"x{o['count']}"] for o in f["operators"]]),
        "",
        "Subgraphs",
        *table([[f"#{s['index']}", s["name"] or "-", f"{s['tensors']} tensors",
                  f"{s['operators']} ops", f"{s['activation_bytes']:,} activation bytes"]
                 for s in f["subgraphs"]]),
    ]
    lines += ["", "Signatures" if f["signatures"] else "Signatures: none"]
    for sig in f["signatures"]:
        lines.append(f"  {sig['key']!r} (subgraph {sig['subgraph']})")
        lines += ["    inputs", *_tensor_rows(sig["inputs"], indent=6)]
        lines += ["    outputs", *_tensor_rows(sig["outputs"], indent=6)]
    w = f["weights"]
    by_dtype = ", ".join(f"{d} {n:,}" for d, n in w["bytes_by_dtype"].items())
    lines += ["", f"Weights: {w['total_bytes']:,} bytes in {w['constant_tensors']} constant "
                  f"tensors, {w['buffers']} buffers" + (f" ({by_dtype})" if by_dtype else "")]
    lines += table([[f"buffer {b['buffer']}", f"{b['bytes']:,} bytes", b["dtype"],
                      shape_text(b["shape"]), b["tensor"]] for b in w["largest"]])
    lines += ["", "Metadata" if f["metadata"] else "Metadata: none"]
    lines += table([[m["name"], f"{m['size_bytes']:,} bytes", _preview(m["text"])]
                     for m in f["metadata"]])
    return lines


def _tensor_rows(tensors: list, indent: int = 2) -> list[str]:
    rows = []
    for t in tensors:
        name = f"{t['name']} -> {t['tensor']}" if "tensor" in t else t["name"]
        shape = shape_text(t["shape"])
        if t["shape_signature"] != t["shape"]:
            shape += f" (signature {shape_text(t['shape_signature'])})"
        rows.append([name, t["dtype"], shape, _quant_text(t["quantization"])])
    return table(rows, indent) if rows else [" " * indent + "none"]


def shape_text(shape: list) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _quant_text(q: dict | None) -> str:
    if q is None:
        return ""
    if not q.get("per_channel"):
        return f"scale {q['scale']:.6g} zero_point {q['zero_point']}"
    zps = sorted(set(q["zero_point"]))
    return (f"per-channel axis {q['axis']}, {q['channels']} channels, scale "
            f"{min(q['scale']):.3g}..{max(q['scale']):.3g}, zero_point "
            f"{zps[0] if len(zps) == 1 else f'{zps[0]}..{zps[-1]}'}")


def _preview(text: str | None) -> str:
    if text is None:
        return "(binary)"
    return repr(text[:TEXT_PREVIEW]) + ("..." if len(text) > TEXT_PREVIEW else "")


def table(rows: list, indent: int = 2) -> list[str]:
    """Rows of cells as left-aligned columns."""
    if not rows:
        return []
    widths = [max(len(str(r[c])) for r in rows) for c in range(len(rows[0]))]
    return [(" " * indent + "  ".join(str(cell).ljust(w) for cell, w in zip(r, widths))).rstrip()
            for r in rows]
