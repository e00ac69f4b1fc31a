"""`edgelite inspect`: text and JSON reports checked against known facts, and its error paths."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import invoke

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_TFLITE = ["digits_cnn.tflite", "digits_cnn_int8.tflite", "mwk_okay_nabu.tflite",
                 "mp_face_detection.tflite", "mp_hand_landmark.tflite", "mobilenet_v2.tflite",
                 "mobilenet_v2_int8.tflite"]


def inspect(*args):
    result = invoke(["inspect", *map(str, args)])
    assert result.exit_code == 0, result.stderr or result.output
    return result.stdout


def inspect_json(path) -> dict:
    return json.loads(inspect("--json", path))


@pytest.fixture(scope="module")
def sample(sample_dir) -> Path:
    return sample_dir / "default.tflite"


# --- the sample model ----------------------------------------------------------------------------

def test_json_on_the_sample(sample):
    facts = inspect_json(sample)
    assert facts["file"] == {"path": str(sample), "name": "default.tflite",
                             "size_bytes": sample.stat().st_size}
    assert facts["schema_version"] == 3
    assert facts["description"].startswith("edgelite default sample")
    assert facts["min_runtime_version"] == "1.5.0"
    assert facts["op_types"] == {"CONV_2D": 1, "FULLY_CONNECTED": 1, "MAX_POOL_2D": 1,
                                 "RESHAPE": 1, "SOFTMAX": 1}
    assert all(op["version"] == 1 for op in facts["operators"])
    (inp,), (out,) = facts["inputs"], facts["outputs"]
    assert inp == {"name": "image", "index": inp["index"], "shape": [1, 16, 16, 1],
                   "shape_signature": [-1, 16, 16, 1], "dtype": "float32", "quantization": None}
    assert (out["name"], out["shape"], out["shape_signature"]) == ("probabilities", [1, 8], [-1, 8])
    (sub,) = facts["subgraphs"]
    assert (sub["name"], sub["tensors"], sub["operators"]) == ("main", 11, 5)
    (sig,) = facts["signatures"]
    assert (sig["key"], sig["subgraph"]) == ("serving_default", 0)
    assert [(t["name"], t["tensor"]) for t in sig["inputs"]] == [("image", "image")]
    assert [(t["name"], t["tensor"]) for t in sig["outputs"]] == [("probabilities",
                                                                    "probabilities")]
    # conv [16,3,3,1] + bias [16], dense [8,1024] + bias [8] in float32; reshape's shape [2] int32
    weights = facts["weights"]
    assert weights["total_bytes"] == 4 * (16 * 9 + 16 + 8 * 1024 + 8) + 4 * 2
    assert weights["constant_tensors"] == 5 and weights["buffers"] == 5
    assert weights["largest"][0] == {"buffer": weights["largest"][0]["buffer"],
                                     "bytes": 8 * 1024 * 4, "tensor": "dense/weights",
                                     "shape": [8, 1024], "dtype": "float32"}
    metadata = {m["name"]: m for m in facts["metadata"]}
    assert metadata["min_runtime_version"]["text"] == "1.5.0"
    assert metadata["edgelite_labels"]["text"].split("\n")[0] == "horizontal"


def test_text_on_the_sample(sample):
    text = inspect(sample)
    assert text.startswith(f"default.tflite  ({sample.stat().st_size:,} bytes)")
    for expected in ["schema version       3", "min runtime version  1.5.0",
                     "image  float32  [1, 16, 16, 1] (signature [-1, 16, 16, 1])",
                     "CONV_2D          v1  x1", "#0  main  11 tensors  5 ops",
                     "'serving_default' (subgraph 0)", "probabilities -> probabilities",
                     "dense/weights", "edgelite_labels", "'1.5.0'"]:
        assert expected in text, expected


def test_per_channel_quantization(tmp_path):
    from edgelite.schema import (Model, Operator, OperatorCode, QuantizationParameters,
                                 Subgraph, Tensor, save)

    q = QuantizationParameters(scale=[0.5, 0.25, 0.125, 1.0], zero_point=[0, 0, 0, 0],
                               quantized_dimension=3)
    sg = Subgraph(name="main")
    x = sg.add_tensor(Tensor("x", (1, 2, 2, 4), "int8", quantization=q))
    y = sg.add_tensor(Tensor("y", (1, 2, 2, 4), "int8", quantization=q))
    sg.operators.append(Operator(OperatorCode("RELU"), [x], [y]))
    sg.inputs, sg.outputs = [x], [y]
    path = tmp_path / "per_channel.tflite"
    path.write_bytes(save(Model(subgraphs=[sg])))

    quant = inspect_json(path)["inputs"][0]["quantization"]
    assert quant == {"per_channel": True, "axis": 3, "channels": 4,
                     "scale": [0.5, 0.25, 0.125, 1.0], "zero_point": [0, 0, 0, 0]}
    assert "per-channel axis 3, 4 channels, scale 0.125..1, zero_point 0" in inspect(path)


# --- the shared real models, against their manifest ---------------------------------------------

def _manifest_quantization(q):
    """The manifest writes quantization as {scale, zero_point}, [scale, zero_point] or None;
    [0.0, 0] (LiteRT's details for a float tensor) means none."""
    if isinstance(q, list):
        q = None if q[0] == 0.0 else {"scale": q[0], "zero_point": q[1]}
    return q


def _check_io(ours: list, theirs: list):
    assert [t["name"] for t in ours] == [t["name"] for t in theirs]
    for o, t in zip(ours, theirs):
        assert (o["shape"], o["dtype"]) == (t["shape"], t["dtype"]), o["name"]
        expected = _manifest_quantization(t.get("quantization"))
        if expected is None:
            assert o["quantization"] is None, o["name"]
        else:
            assert o["quantization"]["zero_point"] == expected["zero_point"]
            assert o["quantization"]["scale"] == pytest.approx(expected["scale"], rel=1e-6)


@pytest.mark.parametrize("file", SHARED_TFLITE)
def test_json_matches_the_manifest(models_dir, file):
    path = models_dir / file
    if not path.exists():
        pytest.skip(f"{path} not found")
    manifest = json.loads((models_dir / "manifest.json").read_text())
    (entry,) = [m for m in manifest["models"] if m["path"] == file]

    facts = inspect_json(path)
    assert facts["file"]["size_bytes"] == entry["size_bytes"]
    _check_io(facts["inputs"], entry["inputs"])
    _check_io(facts["outputs"], entry["outputs"])
    if "op_types" in entry:
        assert facts["op_types"] == entry["op_types"]
    if "n_subgraphs" in entry:
        assert len(facts["subgraphs"]) == entry["n_subgraphs"]
    if "n_signatures" in entry:
        assert len(facts["signatures"]) == entry["n_signatures"]
    if "schema_version" in entry:
        assert facts["schema_version"] == entry["schema_version"]
    if "n_nodes" in entry:
        assert sum(s["operators"] for s in facts["subgraphs"]) == entry["n_nodes"]


@pytest.mark.parametrize("file", SHARED_TFLITE)
def test_weights_add_up(models_dir, file):
    """Weight bytes equal the sizes of the constant tensors' data, each buffer counted once."""
    from edgelite.schema import load

    path = models_dir / file
    if not path.exists():
        pytest.skip(f"{path} not found")
    model = load(path)
    arrays = {}
    for sg in model.subgraphs:
        for i, t in enumerate(sg.tensors):
            value = model.constant(sg, i)
            if value is not None:
                arrays[t.buffer] = value
    weights = inspect_json(path)["weights"]
    assert weights["buffers"] == len(arrays)
    assert weights["total_bytes"] == sum(a.nbytes for a in arrays.values())
    sizes = sorted((a.nbytes for a in arrays.values()), reverse=True)
    assert [b["bytes"] for b in weights["largest"]] == sizes[:len(weights["largest"])]
    text = inspect(path)
    assert f"Weights: {weights['total_bytes']:,} bytes" in text


# --- errors --------------------------------------------------------------------------------------

def _assert_clean_error(result):
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr


def test_missing_file(tmp_path):
    result = invoke(["inspect", str(tmp_path / "nope.tflite")])
    _assert_clean_error(result)
    assert "no such file" in result.stderr


@pytest.mark.parametrize("content", [b"", b"\x00" * 3, bytes(range(256)) * 4,
                                     b"\x14\x00\x00\x00TFL3" + b"\xff" * 40])
def test_corrupt_file(tmp_path, content):
    path = tmp_path / "bad.tflite"
    path.write_bytes(content)
    _assert_clean_error(invoke(["inspect", str(path)]))


def test_truncated_model(tmp_path, sample):
    path = tmp_path / "truncated.tflite"
    path.write_bytes(sample.read_bytes()[:300])
    _assert_clean_error(invoke(["inspect", "--json", str(path)]))


def test_directory(tmp_path):
    _assert_clean_error(invoke(["inspect", str(tmp_path)]))


def test_console_script_errors_without_traceback(tmp_path):
    run = subprocess.run([sys.executable, "-m", "edgelite.cli", "inspect",
                          str(tmp_path / "nope.tflite")], capture_output=True, text=True)
    assert run.returncode == 1
    assert run.stderr.startswith("error: ") and "Traceback" not in run.stderr


def test_tflite_convert_needs_a_model():
    """The converter command's own tests are tests/cli/test_convert.py."""
    run = subprocess.run([sys.executable, "-c",
                          "import sys; from edgelite.cli import convert_main; "
                          "sys.exit(convert_main())"],
                         capture_output=True, text=True)
    assert run.returncode == 2
    assert "Missing argument" in run.stderr


def test_importing_the_cli_is_cheap():
    """The CLI imports the rest of edgelite (and numpy) only inside its commands."""
    code = ("import sys, edgelite.cli; "
            "print(sorted(m for m in sys.modules if m.startswith(('edgelite.schema', 'numpy'))))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"
