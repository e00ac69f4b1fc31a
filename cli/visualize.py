"""`edgelite visualize MODEL -o MODEL.html`: the model's graph as one self-contained HTML page
(no network: the viewer's script and style are inlined), laid out top to bottom, ops coloured by
type, a tensor's shape, dtype and quantization on hover, subgraphs switchable, and overlays from
the other tools: delegate placement (`analyze`'s partitioning), per-op latency (`benchmark
--op-profile --json`), per-layer quantization error (`compare --json`).
`--model-explorer OUT.json` writes the same overlays as Model Explorer node data
(`{graphId: {results: {nodeId: {value}}, gradient: [...]}}`, node ids = operator indices).

The layout is computed here, not in the browser, so it is the same on every machine and tests can
read it: layers by longest path from the inputs, each layer ordered by the mean position of its
producers, then packed left to right with a fixed gap (nodes never overlap).

From Python:

    from edgelite.cli.visualize import graph_data, page
    Path("m.html").write_text(page(graph_data("m.tflite")))
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from .common import check_file, echo, fail, load_model
from .params import Arg, Opt
from .progress import note

NODE_H = 36              # px, every node
NODE_W_MIN = 110         # px, a node's width grows with its label
CHAR_W = 7.2             # px per label character (the viewer's 12px monospace)
GAP_X = 24               # px between nodes of one layer
GAP_Y = 34               # px between layers
LANE_GAP = 14           # px between a node and a skip edge's lane, and between lanes
SWEEPS = 4               # ordering passes (down, up, down, up)
VIEWER = Path(__file__).with_name("viewer.html")

CATEGORIES = {   # op type -> colour group; the viewer's legend lists the groups a graph has
    "conv": ("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "CONV_3D", "CONV_3D_TRANSPOSE"),
    "matmul": ("FULLY_CONNECTED", "BATCH_MATMUL", "EMBEDDING_LOOKUP"),
    "activation": ("RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LEAKY_RELU", "PRELU",
                   "LOGISTIC", "TANH", "HARD_SWISH", "GELU", "ELU", "SOFTMAX", "LOG_SOFTMAX"),
    "pool": ("AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D", "MEAN", "SUM", "REDUCE_MAX",
             "REDUCE_MIN", "REDUCE_PROD", "ARG_MAX", "ARG_MIN"),
    "elementwise": ("ADD", "SUB", "MUL", "DIV", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM",
                    "POW", "SQRT", "RSQRT", "EXP", "LOG", "ABS", "NEG", "SQUARE", "ADD_N",
                    "FLOOR", "CEIL", "ROUND", "SIN", "COS", "FLOOR_DIV", "FLOOR_MOD", "LESS",
                    "GREATER", "EQUAL", "NOT_EQUAL", "SELECT", "SELECT_V2", "LOGICAL_AND",
                    "LOGICAL_OR", "LOGICAL_NOT", "LESS_EQUAL", "GREATER_EQUAL"),
    "shape": ("RESHAPE", "TRANSPOSE", "CONCATENATION", "SPLIT", "SPLIT_V", "SLICE",
              "STRIDED_SLICE", "PAD", "PADV2", "MIRROR_PAD", "SQUEEZE", "EXPAND_DIMS", "GATHER",
              "GATHER_ND", "PACK", "UNPACK", "TILE", "SHAPE", "BROADCAST_TO", "RESIZE_BILINEAR",
              "RESIZE_NEAREST_NEIGHBOR", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "CAST"),
    "quant": ("QUANTIZE", "DEQUANTIZE"),
    "control": ("WHILE", "IF", "CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"),
}
_CATEGORY = {op: group for group, ops in CATEGORIES.items() for op in ops}


def visualize_command(
    model: Annotated[Path, Arg("the .tflite model file")],
    output: Annotated[Path | None, Opt("-o", "--output", help="the HTML file to write "
                                       "(default: MODEL with .html)")] = None,
    profile: Annotated[Path | None, Opt(
        "--profile", help="per-op latency: the JSON of `edgelite benchmark MODEL --op-profile "
        "--json`")] = None,
    errors: Annotated[Path | None, Opt(
        "--errors", help="per-layer quantization error: the JSON of `edgelite compare FLOAT "
        "QUANT --json`")] = None,
    delegate: Annotated[str, Opt(
        "--delegate", metavar="opencl[:fp16]|none", help="the delegate whose placement is "
        "shown (computed as `analyze` does)")] = "opencl",
    model_explorer: Annotated[Path | None, Opt(
        "--model-explorer", help="also write the overlays as Model Explorer node data here "
        "(one overlay per file: OUT.json, then OUT.<overlay>.json)")] = None,
    quiet: Annotated[bool, Opt("--quiet", "-q", help="nothing on stderr")] = False,
) -> None:
    """Draw a .tflite model's graph as one self-contained HTML page, with overlays."""
    data = graph_data(model, profile=_read_json(profile, "--profile"),
                      errors=_read_json(errors, "--errors"), delegate=delegate, quiet=quiet)
    out = output or model.with_suffix(".html")
    out.write_text(page(data), encoding="utf-8")
    wrote = [out]
    if model_explorer is not None:
        wrote += write_model_explorer(data, model_explorer)
    for path in wrote:
        echo(f"wrote {path} ({path.stat().st_size:,} bytes)")


def _read_json(path: Path | None, flag: str):
    if path is None:
        return None
    check_file(path)
    try:
        return json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        fail(f"{flag} {path}: not JSON ({e})")


# -- the graph ------------------------------------------------------------------------------------

def graph_data(model, profile: dict | None = None, errors: dict | None = None,
               delegate: str | None = "opencl", quiet: bool = True) -> dict:
    """What the page draws: per subgraph the nodes (with laid-out boxes), edges and tensors,
    and the overlays."""
    from .analyze import delegate_support

    path = Path(model)
    ir = load_model(path)
    subgraphs = [_subgraph(ir, i, sg) for i, sg in enumerate(ir.subgraphs)]
    overlays = {}
    if delegate and delegate != "none":
        note(f"placement on {delegate} (the interpreter's partitioning) ...", quiet)
        support = delegate_support(path, delegate)
        overlays["placement"] = _placement_overlay(support, delegate)
    if profile is not None:
        overlays["latency"] = _latency_overlay(profile, ir)
    if errors is not None:
        overlays["error"] = _error_overlay(errors, ir)
    return {"model": path.name, "size_bytes": path.stat().st_size, "subgraphs": subgraphs,
            "overlays": overlays, "categories": list(CATEGORIES) + ["other"]}


def graph_id(sg, index: int) -> str:
    """Model Explorer's id of a subgraph (its tflite adapter: the name, "main" for an unnamed
    subgraph 0)."""
    return sg.name or ("main" if index == 0 else f"subgraph_{index}")


def _subgraph(ir, index: int, sg) -> dict:
    from .analyze import _tensor, op_macs

    n_ops = len(sg.operators)
    producer = {}
    nodes = []
    for t_k, t in enumerate(sg.inputs):
        nodes.append({"id": f"in{t_k}", "kind": "input", "label": f"input {sg.tensors[t].name}",
                      "type": "INPUT", "category": "io", "inputs": [], "outputs": [t]})
        producer[t] = len(nodes) - 1
    for oi, op in enumerate(sg.operators):
        nodes.append({"id": str(oi), "kind": "op", "index": oi, "type": op.op,
                      "label": f"{oi} {op.op}", "category": _CATEGORY.get(op.op, "other"),
                      "inputs": list(op.inputs), "outputs": list(op.outputs),
                      "macs": op_macs(ir, sg, op)})
        for t in op.outputs:
            producer[t] = len(nodes) - 1
    for t_k, t in enumerate(sg.outputs):
        nodes.append({"id": f"out{t_k}", "kind": "output", "label": f"output {sg.tensors[t].name}",
                      "type": "OUTPUT", "category": "io", "inputs": [t], "outputs": []})
    edges = []
    for k, node in enumerate(nodes):
        for t in node["inputs"]:
            if t >= 0 and t in producer and producer[t] != k:
                edges.append({"from": producer[t], "to": k, "tensor": t})
    _layout(nodes, edges)
    used = {t for n in nodes for t in n["inputs"] + n["outputs"] if t >= 0}
    tensors = {str(t): _tensor(ir, sg, t) for t in sorted(used)}
    return {"index": index, "name": sg.name, "graph_id": graph_id(sg, index), "ops": n_ops,
            "nodes": nodes, "edges": edges, "tensors": tensors,
            "width": max((n["x"] + n["w"] for n in nodes), default=0),
            "height": max((n["y"] + NODE_H for n in nodes), default=0)}


def _layout(nodes: list, edges: list) -> None:
    """x, y, w of every node: longest-path layers top to bottom; barycentre ordering; packed
    left to right with GAP_X between boxes, so no two boxes of a layer overlap."""
    preds = [[] for _ in nodes]
    succs = [[] for _ in nodes]
    for e in edges:
        preds[e["to"]].append(e["from"])
        succs[e["from"]].append(e["to"])
    layer = [0] * len(nodes)
    for k in range(len(nodes)):    # nodes are in execution order: producers come first
        layer[k] = 1 + max((layer[p] for p in preds[k]), default=-1)
    # Ops fed by constants alone (DEQUANTIZE of fp16 weights, ...) sit just above their first
    # consumer, not all in the first row.
    fed = [n["kind"] == "input" for n in nodes]
    for k in range(len(nodes)):
        fed[k] = fed[k] or any(fed[p] for p in preds[k])
    for k in reversed(range(len(nodes))):
        if not fed[k] and succs[k]:
            layer[k] = min(layer[s] for s in succs[k]) - 1
    outputs = [k for k, n in enumerate(nodes) if n["kind"] == "output"]
    last = max(layer, default=0)
    for k in outputs:
        layer[k] = max(layer[k], last) if preds[k] else layer[k]
    rows: dict = {}
    for k in range(len(nodes)):
        rows.setdefault(layer[k], []).append(k)
    for n in nodes:
        n["w"] = max(NODE_W_MIN, round(len(n["label"]) * CHAR_W + 20))
    x = {k: 0.0 for k in range(len(nodes))}
    order = [rows[r] for r in sorted(rows)]
    # The data path is placed by the data path: constant-fed producers follow their consumer,
    # they do not pull it aside.
    data_preds = [[p for p in ps if fed[p]] or ps for ps in preds]
    for sweep in range(SWEEPS):
        down = sweep % 2 == 0
        sequence = order if down else order[::-1]
        for row in sequence:
            near = data_preds if down else succs
            for k in row:
                if near[k]:
                    x[k] = sum(x[p] for p in near[k]) / len(near[k])
            row.sort(key=lambda k: x[k])
            _pack(row, x, nodes)
    for r, row in enumerate(order):
        for k in row:
            nodes[k]["x"] = round(x[k], 1)
            nodes[k]["y"] = r * (NODE_H + GAP_Y)
            nodes[k]["layer"] = r
    low = min((n["x"] for n in nodes), default=0)
    for n in nodes:
        n["x"] = round(n["x"] - low + GAP_X, 1)
        n["y"] += GAP_Y
    _route(nodes, edges, order)


def _route(nodes: list, edges: list, order: list) -> None:
    """An edge that skips layers (a residual connection) gets a lane: a vertical run right of
    every node of the layers it passes, so it is not drawn through them. Lanes of edges whose
    layer spans overlap are side by side (LANE_GAP apart)."""
    right = [max(nodes[k]["x"] + nodes[k]["w"] for k in row) for row in order]
    taken: list = []    # (lane x, first layer, last layer)
    for e in sorted(edges, key=lambda e: (nodes[e["from"]]["layer"], nodes[e["to"]]["layer"])):
        a, b = nodes[e["from"]]["layer"], nodes[e["to"]]["layer"]
        if b - a < 2:
            continue
        x = max(right[a + 1:b]) + LANE_GAP
        while any(abs(x - lx) < LANE_GAP / 2 and not (b < la or lb < a) for lx, la, lb in taken):
            x += LANE_GAP
        taken.append((x, a, b))
        e["lane"] = round(x, 1)


def _pack(row: list, x: dict, nodes: list) -> None:
    """Left edges at their wanted places, pushed right where a box would overlap the one
    before it, then the row shifted back so that its middle stays where it wanted to be."""
    wanted = [x[k] for k in row]
    edge = None
    for k in row:
        if edge is not None and x[k] < edge:
            x[k] = edge
        edge = x[k] + nodes[k]["w"] + GAP_X
    shift = (sum(wanted) - sum(x[k] for k in row)) / len(row) if row else 0
    for k in row:
        x[k] += shift


# -- overlays -------------------------------------------------------------------------------------

def _placement_overlay(support: dict, spec: str) -> dict:
    if not support.get("available") or "error" in support:
        return {"kind": "category", "title": f"placement on {spec}", "values": {},
                "note": support.get("error", "")}
    values: dict = {}
    for p in support["placement"]:
        where = p["where"] if p["partition"] is None else f"{p['where']} #{p['partition']}"
        values.setdefault(str(p["subgraph"]), {})[str(p["index"])] = {
            "value": where, "detail": p["reason"] or ""}
    return {"kind": "category", "title": f"placement on {support['device']}", "values": values,
            "note": f"{support['ops_delegated']} ops delegated in {len(support['partitions'])} "
                    f"partitions, {support['ops_on_cpu']} on CPU"}


def _latency_overlay(profile: dict, ir) -> dict:
    p = profile.get("op_profile", profile)
    if "run_order" not in p:
        fail("--profile: no op profile in it (make it with edgelite benchmark MODEL "
             "--op-profile --json)")
    subgraph = str(p.get("subgraph", 0))
    n_ops = len(ir.subgraphs[int(subgraph)].operators)
    values = {}
    for r in p["run_order"]:
        if r["op_index"] >= n_ops:
            fail(f"--profile: op {r['op_index']} is not in this model ({n_ops} ops): is it the "
                 "profile of another model?")
        values[str(r["op_index"])] = {"value": round(r["avg_ms"], 4),
                                      "detail": f"{r['avg_ms']:.3f} ms ({r['share']:.1%})"}
    return {"kind": "number", "title": "latency (ms, avg per invoke)", "unit": "ms",
            "values": {subgraph: values}, "high_is_bad": True}


def _error_overlay(errors: dict, ir) -> dict:
    layers = errors.get("layers")
    if layers is None:
        fail("--errors: no layers in it (make it with edgelite compare FLOAT QUANT --json)")
    sg = ir.subgraphs[0]
    by_name = {sg.tensors[t].name: oi for oi, op in enumerate(sg.operators) for t in op.outputs}
    values = {}
    for r in layers:
        oi = by_name.get(r["tensor"])
        if oi is None:
            continue
        snr = r["snr_db"]
        values[str(oi)] = {"value": round(snr, 2) if snr != float("inf") else 999.0,
                           "detail": f"SNR {snr:.1f} dB, RMSE {r['rmse']:.3g}, max |err| "
                                     f"{r['max_abs_error']:.3g}, cosine {r['cosine']:.4f}"}
    if not values:
        fail("--errors: none of its layers names a tensor of this model")
    return {"kind": "number", "title": "quantization error (SNR dB; low is bad)", "unit": "dB",
            "values": {"0": values}, "high_is_bad": False}


# -- the page and Model Explorer's node data ------------------------------------------------------

def page(data: dict) -> str:
    """The viewer with the graph's data inlined: one file, no network."""
    template = VIEWER.read_text(encoding="utf-8")
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return template.replace("__EDGELITE_TITLE__", _html(data["model"])) \
        .replace("__EDGELITE_DATA__", payload)


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


GRADIENT_BAD_HIGH = [{"stop": 0, "bgColor": "#e8f5e9"}, {"stop": 0.5, "bgColor": "#ffd54f"},
                     {"stop": 1, "bgColor": "#e53935"}]
GRADIENT_BAD_LOW = [{"stop": 0, "bgColor": "#e53935"}, {"stop": 0.5, "bgColor": "#ffd54f"},
                    {"stop": 1, "bgColor": "#e8f5e9"}]


def model_explorer_data(data: dict, overlay: str) -> dict:
    """One overlay as Model Explorer's ModelNodeData: {graphId: {results, gradient}}."""
    o = data["overlays"][overlay]
    out = {}
    for sg in data["subgraphs"]:
        values = o["values"].get(str(sg["index"]))
        if not values:
            continue
        results = {node: {"value": v["value"]} for node, v in values.items()}
        entry = {"name": o["title"], "results": results}
        if o["kind"] == "number":
            entry["gradient"] = GRADIENT_BAD_HIGH if o["high_is_bad"] else GRADIENT_BAD_LOW
        out[sg["graph_id"]] = entry
    return out


def write_model_explorer(data: dict, path: Path) -> list:
    """Each overlay in its own file (Model Explorer loads one node-data file per overlay):
    the first at `path`, the others beside it as PATH.<overlay>.json."""
    order = [o for o in ("latency", "error", "placement") if o in data["overlays"]]
    if not order:
        fail("--model-explorer: no overlay to write (give --profile, --errors, or a delegate)")
    wrote = []
    for k, name in enumerate(order):
        target = path if k == 0 else path.with_name(f"{path.stem}.{name}{path.suffix}")
        target.write_text(json.dumps(model_explorer_data(data, name), indent=1))
        wrote.append(target)
    return wrote
