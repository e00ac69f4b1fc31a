"""`edgelite visualize`: one self-contained page, drawn in a real headless Chromium (Debian's,
driven through its DevTools protocol): every node drawn, none overlapping on a 1,000-op model
(from the drawn boxes), a hover and a click show a tensor's details; overlays from benchmark and
compare; Model Explorer node data whose ids its own .tflite adapter gives the ops."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from edgelite.schema import Model, Operator, OperatorCode, Subgraph, Tensor, default_options, save
from tests.cli import chromium
from tests.cli.helpers import invoke
from tests.conftest import REPO_ROOT

OPS = 1000


def visualize(*args) -> str:
    result = invoke(["visualize", *map(str, args), "--quiet"])
    assert result.exit_code == 0, result.stderr or result.output
    return result.stdout


@pytest.fixture(scope="module")
def browser():
    exe = chromium.find()
    if exe is None:
        message = "no chromium: apt-get install -y chromium"
        if os.environ.get("EDGELITE_REQUIRE_BROWSER") == "1":
            pytest.fail(message + " (EDGELITE_REQUIRE_BROWSER=1)")
        pytest.skip(message)
    with chromium.Browser(exe) as b:
        yield b


def wide_model(path):
    """OPS ops: a chain of blocks, each forking into three branches (ADD, MUL, SUB of a
    constant) joined by two ADDs."""
    model = Model()
    sg = Subgraph(name="main")
    one = sg.add_tensor(Tensor("one", (1, 8), buffer=model.add_buffer(np.ones((1, 8),
                                                                               np.float32))))
    x = sg.add_tensor(Tensor("x", (1, 8)))
    sg.inputs = [x]
    ops, k, h = [], 0, x

    def op(name, a, b):
        nonlocal k
        out = sg.add_tensor(Tensor(f"t{k}_{name.lower()}", (1, 8)))
        ops.append(Operator(OperatorCode(name, 0), [a, b], [out], default_options(name)))
        k += 1
        return out

    while len(ops) + 5 <= OPS:
        a, m, s = op("ADD", h, one), op("MUL", h, one), op("SUB", h, one)
        h = op("ADD", op("ADD", a, m), s)
    while len(ops) < OPS:
        h = op("ADD", h, one)
    sg.operators, sg.outputs = ops, [h]
    model.subgraphs.append(sg)
    path.write_bytes(save(model))
    return path


def boxes(b) -> list:
    return b.eval("""[...document.querySelectorAll('.node')].map((g) => {
        const r = g.querySelector('rect').getBoundingClientRect();
        return [g.dataset.id, r.left + window.scrollX, r.top + window.scrollY, r.width,
                r.height];})""")


def overlaps(rects: list) -> list:
    """Pairs of boxes whose interiors intersect (a sweep over boxes sorted by top)."""
    found, rects = [], sorted(rects, key=lambda r: r[2])
    for i, (a, ax, ay, aw, ah) in enumerate(rects):
        for b, bx, by, bw, _ in rects[i + 1:]:
            if by >= ay + ah:
                break
            if bx < ax + aw and ax < bx + bw:
                found.append((a, b))
    return found


def test_page_is_one_file_without_network(models_dir, tmp_path):
    out = tmp_path / "m.html"
    visualize(models_dir / "mobilenet_v2.tflite", "-o", out, "--delegate", "none")
    html = out.read_text()
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", html)
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", html)) - {"http://www.w3.org/2000/svg"}
    assert not urls, urls
    data = json.loads(re.search(r'id="edgelite-data">(.*?)</script>', html, re.S)[1])
    assert data["subgraphs"][0]["ops"] == 65


def test_thousand_ops_drawn_without_overlap_and_hover_shows_tensors(browser, tmp_path):
    model = wide_model(tmp_path / "wide.tflite")
    out = tmp_path / "wide.html"
    visualize(model, "-o", out)
    browser.open(out.as_uri())
    drawn = boxes(browser)
    assert len(drawn) == OPS + 2                       # the ops, the input and the output
    assert sorted(d[0] for d in drawn if d[0].isdigit()) == sorted(map(str, range(OPS)))
    assert all(w > 50 and h > 20 for _, _, _, w, h in drawn)
    assert not overlaps(drawn)[:5]
    rows = {round(y) for _, _, y, _, _ in drawn}
    assert len(rows) == 3 * OPS // 5 + 2    # a block's three branches share one row

    # A node is really painted where its box is: the element at its centre is its rect.
    browser.eval("document.querySelector('.node[data-id=\"501\"]').scrollIntoView("
                 "{block: 'center', inline: 'center'})")
    x, y, w, h = browser.eval("""(() => { const r = document.querySelector(
        '.node[data-id="501"] rect').getBoundingClientRect(); return [r.x, r.y, r.width,
        r.height]; })()""")
    cx, cy = x + w / 2, y + h / 2
    assert browser.eval(f"document.elementFromPoint({cx}, {cy}).closest('.node').dataset.id") \
        == "501"
    browser.mouse(cx, cy)
    tip = browser.eval("document.getElementById('tip').style.display === 'block' && "
                       "document.getElementById('tip').innerText")
    assert tip, "no tooltip after hovering over op 501"
    tip = tip.replace("\xa0", " ")
    assert "501 MUL" in tip and "float32 [1, 8]" in tip and "t501_mul" in tip
    browser.mouse(cx, cy, click=True)
    details = browser.eval("document.getElementById('details').innerText").replace("\xa0", " ")
    assert "501 MUL" in details and "t501_mul" in details and "const 32 B" in details
    (tmp_path / "wide.png").write_bytes(browser.screenshot())


def test_placement_without_a_profile_and_subgraph_switch(browser, models_dir, tmp_path):
    pytest.importorskip("pyopencl")
    out = tmp_path / "mwk.html"
    visualize(models_dir / "mwk_okay_nabu.tflite", "-o", out)
    browser.open(out.as_uri())
    options = browser.eval("[...document.querySelectorAll('#overlay option')].map(o => o.value)")
    assert options[0] == "type" and "placement" in options
    legend = browser.eval("document.getElementById('legend').innerText")
    assert "conv" in legend and "control" in legend          # op types by default
    browser.eval("(() => { const s = document.getElementById('overlay'); s.value = 'placement';"
                 " s.onchange(); })()")
    legend = browser.eval("document.getElementById('legend').innerText")
    if "ops delegated" not in legend:
        pytest.skip(f"no OpenCL device: {legend}")
    assert "CPU" in legend
    fills = browser.eval("[...document.querySelectorAll('.node rect')].map(r => "
                         "r.getAttribute('fill'))")
    assert len(set(fills)) >= 2
    n0 = len(boxes(browser))
    browser.eval("(() => { const s = document.getElementById('subgraph'); s.value = '1';"
                 " s.onchange(); })()")
    from edgelite.schema import load

    sg1 = load(models_dir / "mwk_okay_nabu.tflite").subgraphs[1]
    assert len(boxes(browser)) == len(sg1.operators) + len(sg1.inputs) + len(sg1.outputs) != n0


def test_latency_and_error_overlays(models_dir, tmp_path):
    from edgelite.cli.visualize import graph_data

    digits = models_dir / "digits_cnn.tflite"
    profile = tmp_path / "profile.json"
    result = invoke(["benchmark", digits, "--op-profile", "--json", "--num-runs", "3",
                     "--min-secs", "0", "--warmup-min-secs", "0", "--quiet"])
    assert result.exit_code == 0, result.stderr
    profile.write_text(result.stdout)
    errors = tmp_path / "errors.json"
    result = invoke(["compare", digits, models_dir / "digits_cnn_int8.tflite", "--samples", "4",
                     "--json"])
    assert result.exit_code == 0, result.stderr
    errors.write_text(result.stdout)
    data = graph_data(digits, profile=json.loads(profile.read_text()),
                      errors=json.loads(errors.read_text()), delegate="none")
    latency = data["overlays"]["latency"]["values"]["0"]
    steps = json.loads(profile.read_text())["op_profile"]["run_order"]
    assert {int(k): v["value"] for k, v in latency.items()} == \
        {r["op_index"]: round(r["avg_ms"], 4) for r in steps}
    error = data["overlays"]["error"]["values"]["0"]
    layers = json.loads(errors.read_text())["layers"]
    assert len(error) == len(layers) and all("SNR" in v["detail"] for v in error.values())
    out = tmp_path / "d.html"
    visualize(digits, "-o", out, "--profile", profile, "--errors", errors, "--delegate", "none")
    assert '"latency"' in out.read_text() and '"error"' in out.read_text()


def test_model_explorer_node_data_matches_its_adapter(models_dir, tmp_path):
    """Our node ids and graph ids are those Model Explorer's own .tflite adapter gives the ops
    (in a child process: the adapter loads TensorFlow's native libraries)."""
    pytest.importorskip("model_explorer")
    model = models_dir / "mwk_okay_nabu.tflite"
    profile = tmp_path / "p.json"
    result = invoke(["benchmark", model, "--op-profile", "--json", "--num-runs", "2",
                     "--min-secs", "0", "--warmup-min-secs", "0", "--quiet"])
    assert result.exit_code == 0, result.stderr
    profile.write_text(result.stdout)
    out = tmp_path / "me.json"
    visualize(model, "-o", tmp_path / "m.html", "--profile", profile, "--model-explorer", out)
    ours = json.loads(out.read_text())
    assert set(ours) == {"main"}                            # the latency of subgraph 0
    assert {"results", "gradient"} <= set(ours["main"])
    done = subprocess.run([sys.executable, "-c", f"""
import json
from model_explorer.builtin_tflite_flatbuffer_adapter import BuiltinTfliteFlatbufferAdapter
graphs = BuiltinTfliteFlatbufferAdapter().convert({str(model)!r}, {{}})
print(json.dumps({{g["id"]: {{n["id"]: n["label"] for n in g["nodes"]}}
                  for c in graphs["graphCollections"] for g in c.graphs}}))
"""], capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    from edgelite.schema import load

    ir = load(model)
    for name, values in ours.items():
        sg = ir.subgraphs[list(theirs).index(name)]
        for node in values["results"]:
            assert theirs[name][node] == sg.operators[int(node)].op.lower(), node
    placement = tmp_path / "me.placement.json"
    if placement.exists():   # with an OpenCL device: both subgraphs, string values
        both = json.loads(placement.read_text())
        assert set(both) == set(theirs) == {"main", "NoOp"}
        for name, values in both.items():
            assert set(values["results"]) <= set(theirs[name])


def test_refusals(models_dir, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    result = invoke(["visualize", models_dir / "digits_cnn.tflite", "-o", tmp_path / "x.html",
                     "--profile", bad, "--delegate", "none"])
    assert result.exit_code == 1 and "not JSON" in result.stderr
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"op_profile": {"run_order": [{"op_index": 99, "avg_ms": 1,
                                                               "share": 1}]}}))
    result = invoke(["visualize", models_dir / "digits_cnn.tflite", "-o", tmp_path / "x.html",
                     "--profile", other, "--delegate", "none"])
    assert result.exit_code == 1 and "another model" in result.stderr


def test_skip_edges_run_beside_the_nodes_they_pass(models_dir):
    """MobileNetV2's residual ADDs: each edge that skips layers has a lane right of every node
    of the layers between its ends (so it is not drawn through them)."""
    from edgelite.cli.visualize import graph_data

    sg = graph_data(models_dir / "mobilenet_v2.tflite", delegate="none")["subgraphs"][0]
    nodes = sg["nodes"]
    skips = [e for e in sg["edges"]
             if nodes[e["to"]]["layer"] - nodes[e["from"]]["layer"] > 1]
    assert len(skips) == 10 == sum(n["type"] == "ADD" for n in nodes)
    for e in skips:
        a, b = nodes[e["from"]]["layer"], nodes[e["to"]]["layer"]
        passed = [n for n in nodes if a < n["layer"] < b]
        assert e["lane"] > max(n["x"] + n["w"] for n in passed)
    assert all("lane" not in e for e in sg["edges"] if e not in skips)


def test_constant_fed_ops_sit_above_their_consumer(models_dir):
    """BlazeFace's 74 DEQUANTIZEs of fp16 weights: each one row above the op that reads it,
    not all in the first row."""
    from edgelite.cli.visualize import graph_data

    sg = graph_data(models_dir / "mp_face_detection.tflite", delegate="none")["subgraphs"][0]
    nodes = sg["nodes"]
    consumers: dict = {}
    for e in sg["edges"]:
        consumers.setdefault(e["from"], []).append(nodes[e["to"]]["layer"])
    dequantize = [k for k, n in enumerate(nodes) if n["type"] == "DEQUANTIZE"]
    assert len(dequantize) == 74
    for k in dequantize:
        assert nodes[k]["layer"] == min(consumers[k]) - 1
    first_row = [n["label"] for n in nodes if n["layer"] == 0]
    assert first_row == ["input input", "0 DEQUANTIZE", "1 DEQUANTIZE"]   # the first conv's
