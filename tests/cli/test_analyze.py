"""`edgelite analyze`: the Analyzer's op list and tensors, MACs and parameters, weights by dtype,
signatures, and the OpenCL delegate's placement as the interpreter really makes it."""
from __future__ import annotations

import json
import re

import pytest

from tests.cli.helpers import invoke

OP_LINE = re.compile(r"^  Op#(\d+) ([A-Z0-9_]+)\(((?:T#\d+|-)(?:, (?:T#\d+|-))*)?\) -> "
                     r"\[(T#\d+(?:, T#\d+)*)\]", re.M)


def analyze(*args) -> str:
    result = invoke(["analyze", *map(str, args)])
    assert result.exit_code == 0, result.stderr or result.output
    return result.stdout


def test_op_list_as_the_analyzer_prints_it(models_dir):
    from edgelite.schema import load

    path = models_dir / "mobilenet_v2.tflite"
    text = analyze(path, "--delegate", "none")
    sg = load(path).subgraphs[0]
    found = OP_LINE.findall(text)
    assert len(found) == len(sg.operators)
    for k, ((index, op, ins, outs), want) in enumerate(zip(found, sg.operators)):
        assert int(index) == k and op == want.op
        assert ins == ", ".join(f"T#{t}" if t >= 0 else "-" for t in want.inputs)
        assert outs == ", ".join(f"T#{t}" for t in want.outputs)
    assert re.search(r"^Subgraph#0 main\(T#0\) -> \[T#\d+\]$", text, re.M)
    assert re.search(r"^  T#0\(serving_default_keras_tensor:0\) shape:\[1, 224, 224, 3\], "
                     r"type:FLOAT32", text, re.M)
    assert "'serving_default' (Subgraph#0)" in text
    assert "min_runtime_version" in text


def test_macs_and_params(models_dir):
    facts = json.loads(analyze(models_dir / "digits_cnn.tflite", "--delegate", "none", "--json"))
    ops = facts["subgraphs"][0]["ops"]
    # conv 3x3 1->16 on 8x8 (same padding), conv 3x3 16->32 on 4x4, FC 128->64, FC 64->10
    assert [o["macs"] for o in ops if o["macs"]] == [8 * 8 * 16 * 9, 4 * 4 * 32 * 9 * 16,
                                                      128 * 64, 64 * 10]
    assert [o["params"] for o in ops if o["params"] and o["op"] != "RESHAPE"] == \
        [16 * 9 + 16, 32 * 9 * 16 + 32, 128 * 64 + 64, 64 * 10 + 10]
    # MobileNetV2 1.0 at 224: about 300M MACs and 3.5M parameters (BatchNorm folded in).
    mnv2 = json.loads(analyze(models_dir / "mobilenet_v2.tflite", "--delegate", "none",
                              "--json"))
    assert 295e6 < mnv2["total"]["macs"] < 310e6
    assert 3.4e6 < mnv2["total"]["params"] < 3.6e6
    w = mnv2["weights"]
    assert sum(w["bytes_by_dtype"].values()) == w["total_bytes"]
    assert w["bytes_by_dtype"]["float32"] == pytest.approx(4 * mnv2["total"]["params"], rel=0.01)


def test_quantization_in_tensors(models_dir):
    facts = json.loads(analyze(models_dir / "digits_cnn_int8.tflite", "--delegate", "none",
                               "--json"))
    tensors = facts["subgraphs"][0]["tensors"]
    per_channel = [t for t in tensors if t["quantization"] and
                   t["quantization"].get("per_channel")]
    assert per_channel and all(t["dtype"] in ("int8", "int32") for t in per_channel)
    text = analyze(models_dir / "digits_cnn_int8.tflite", "--delegate", "none")
    assert re.search(r"type:INT8.*quant: scale [\d.e-]+ zero_point -?\d+", text)


def test_delegate_placement_is_the_interpreters(models_dir):
    """What analyze says the OpenCL delegate takes is what it takes when the model runs."""
    pytest.importorskip("pyopencl")
    from edgelite.interpreter import Interpreter, load_delegate
    from edgelite.interpreter.delegation import DelegateError, placement

    path = models_dir / "mwk_okay_nabu.tflite"
    facts = json.loads(analyze(path, "--json"))
    d = facts["delegates"]["opencl"]
    if not d["available"]:
        pytest.skip(f"no OpenCL device: {d['error']}")
    try:
        it = Interpreter(model_path=str(path), experimental_delegates=[load_delegate("opencl")])
    except DelegateError as e:
        pytest.skip(f"no OpenCL device: {e}")
    it.allocate_tensors()
    real = [p for p in placement(it) if p["subgraph"] == 0]
    ours = [p for p in d["placement"] if p["subgraph"] == 0]
    assert [(p["index"], p["where"], p["reason"]) for p in ours] == \
        [(p["index"], p["where"], p["reason"]) for p in real]
    declined = {e["op"]: e["reason"] for e in d["declined"]}
    assert declined["SPLIT_V"] == "SPLIT_V has no OpenCL kernel"
    assert "has side effects" in declined["ASSIGN_VARIABLE"]
    text = analyze(path)
    assert re.search(r"^Delegate opencl \(OpenCL .*\): \d+ ops in \d+ partitions?, \d+ ops on "
                     r"CPU", text, re.M)
    assert "SPLIT_V (Op#25, Op#36, Op#46): SPLIT_V has no OpenCL kernel" in text


def test_a_float_model_goes_to_the_delegate_whole(models_dir):
    pytest.importorskip("pyopencl")
    facts = json.loads(analyze(models_dir / "digits_cnn.tflite", "--json"))
    d = facts["delegates"]["opencl"]
    if not d["available"]:
        pytest.skip(f"no OpenCL device: {d['error']}")
    assert d["ops_on_cpu"] == 0 and len(d["partitions"]) == 1
    assert d["partitions"][0]["ops"] == list(range(7))


def test_callable_from_python(models_dir):
    from edgelite.cli.analyze import analyze as run, analyze_text

    facts = run(models_dir / "digits_cnn.tflite", delegates=())
    assert facts["total"]["ops"] == 7 and facts["delegates"] == {}
    assert any(line.startswith("  Op#6 FULLY_CONNECTED(") for line in analyze_text(facts))


def test_not_a_model(tmp_path):
    bad = tmp_path / "x.tflite"
    bad.write_bytes(b"nope")
    result = invoke(["analyze", bad])
    assert result.exit_code == 1 and result.stderr.startswith("error: ")


def test_runtime_install_alone(models_dir):
    """numpy and flatbuffers only: analyze runs, and says what the delegate needs."""
    from tests.cli.helpers import run_blocked

    done = run_blocked("edgelite", ["analyze", models_dir / "digits_cnn.tflite"])
    assert done.returncode == 0, done.stderr
    assert "Op#0 CONV_2D(" in done.stdout
    assert "Delegate opencl: not available here: " in done.stdout and "pip install" in done.stdout
