"""`edgelite run`: the sample's accuracy equals LiteRT's on the same data; inputs from an .npz by
name, one sample at a time or whole; profiles; and one clean error line for what users get wrong."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from tests.cli.helpers import invoke
from edgelite.schema import Model, Operator, OperatorCode, SignatureDef, Subgraph, Tensor, \
    default_options, save
from tests.opmodel import In, Out, op_model

REPO_ROOT = Path(__file__).resolve().parents[2]
BIAS = np.array([0.5, -1.0, 2.0, 0.0], np.float32)


def run(*args) -> str:
    result = invoke(["run", *map(str, args)])
    assert result.exit_code == 0, result.stderr or result.output
    return result.stdout


def run_json(*args) -> dict:
    return json.loads(run(*args, "--json"))


def run_error(*args) -> str:
    """The one `error: ...` line a failing run prints."""
    result = invoke(["run", *map(str, args)])
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def chain_model(path: Path) -> Path:
    """x[1, 4] -> ADD(bias, RELU) -> MUL(2) -> ADD(bias), signature 'serving_default' naming the
    input "features" and the output "scores"."""
    model = Model()
    sg = Subgraph(name="main")
    x = sg.add_tensor(Tensor("x", (1, 4), shape_signature=(-1, 4)))
    b = sg.add_tensor(Tensor("b", (4,), buffer=model.add_buffer(BIAS)))
    two = sg.add_tensor(Tensor("two", (), buffer=model.add_buffer(np.float32(2.0))))
    h1, h2, y = (sg.add_tensor(Tensor(n, (1, 4), shape_signature=(-1, 4)))
                 for n in ("h1", "h2", "y"))
    sg.inputs, sg.outputs = [x], [y]
    sg.operators = [
        Operator(OperatorCode("ADD", 0), [x, b], [h1],
                 default_options("ADD", fused_activation_function=1)),
        Operator(OperatorCode("MUL", 0), [h1, two], [h2], default_options("MUL")),
        Operator(OperatorCode("ADD", 0), [h2, b], [y], default_options("ADD")),
    ]
    model.subgraphs.append(sg)
    model.signature_defs.append(SignatureDef("serving_default", 0, {"features": x},
                                             {"scores": y}))
    path.write_bytes(save(model))
    return path


def chain(x):
    return np.maximum(x + BIAS, 0) * 2 + BIAS


@pytest.fixture
def model(tmp_path) -> Path:
    return chain_model(tmp_path / "chain.tflite")


def npz(tmp_path, **arrays) -> Path:
    path = tmp_path / "data.npz"
    np.savez(path, **arrays)
    return path


# --- the sample model, against LiteRT ------------------------------------------------------------

@pytest.fixture(scope="module")
def sample(sample_dir):
    return sample_dir / "default.tflite", sample_dir / "default_test.npz"


def test_sample_accuracy_equals_litert(sample):
    from ai_edge_litert.interpreter import Interpreter

    path, data = sample
    test = np.load(data)
    runner = Interpreter(model_path=str(path)).get_signature_runner("serving_default")
    litert_correct = int((runner(image=test["x"])["probabilities"].argmax(1) == test["y"]).sum())

    report = run_json(path, "--data", data, "--repeat", 3)
    n = len(test["y"])
    assert report["samples"] == n
    assert report["inputs"][0]["source"] == f"--data 'x', {n} samples one at a time"
    assert report["accuracy"]["correct"] == litert_correct and report["accuracy"]["total"] == n
    # The script's own numpy forward pass is in the npz under the output's name.
    (expected,) = report["expected"]
    assert expected["key"] == "probabilities" and expected["max_abs_diff"] < 1e-5
    assert report["outputs"][0]["class"] == str(test["labels"][report["outputs"][0]["argmax"]])

    text = run(path, "--data", data, "--repeat", 3, "--profile")
    assert f"accuracy: {litert_correct / n:.4f} ({litert_correct}/{n}, argmax of " \
           "'probabilities' vs 'y')" in text
    assert "CONV_2D" in text and "live-tensor lower bound" in text


# --- inputs --------------------------------------------------------------------------------------

def test_samples_fed_one_at_a_time_by_tensor_name(model, tmp_path):
    x = np.random.default_rng(1).normal(size=(6, 4)).astype(np.float32)
    y = chain(x).argmax(1)
    y[0] = (y[0] + 1) % 4     # one wrong label
    report = run_json(model, "--data", npz(tmp_path, x=x, y=y, scores=chain(x)))
    assert report["samples"] == 6
    assert report["inputs"] == [{"name": "x", "shape": [1, 4], "dtype": "float32",
                                 "source": "--data 'x', 6 samples one at a time"}]
    (out,) = report["outputs"]
    np.testing.assert_allclose(out["first_values"], chain(x[:1])[0], rtol=1e-6)
    assert out["argmax"] == int(chain(x[:1]).argmax())
    assert report["accuracy"] == {"correct": 5, "total": 6, "value": 5 / 6, "output": "y",
                                  "labels": "y"}
    assert report["expected"] == [{"output": "y", "key": "scores", "max_abs_diff": 0.0}]


@pytest.mark.parametrize("key", ["features", "input_0"])
def test_signature_and_positional_names(model, tmp_path, key):
    x = np.arange(4, dtype=np.float64).reshape(1, 4) - 2      # float64: cast to float32
    report = run_json(model, "--data", npz(tmp_path, **{key: x}))
    assert report["samples"] == 1
    assert report["inputs"][0]["source"] == f"--data {key!r} (cast from float64)"
    np.testing.assert_allclose(report["outputs"][0]["first_values"], chain(x)[0], rtol=1e-6)


def test_signature_runner(model, tmp_path):
    x = np.ones((3, 4), np.float32)
    report = run_json(model, "--signature", "serving_default",
                      "--data", npz(tmp_path, features=x, y=np.full(3, 2)))
    assert [o["name"] for o in report["outputs"]] == ["scores"]
    assert report["accuracy"]["correct"] == 3


def test_random_inputs_and_profile(model):
    report = run_json(model, "--profile", "--repeat", 4, "--threads", 1)
    assert report["inputs"][0]["source"] == "random (seed 0)"
    assert report["latency_ms"]["runs"] == 4 and report["latency_ms"]["median"] > 0
    profile = report["profile"]
    assert [(o["op"], o["steps"]) for o in profile["op_types"]] in (
        [("ADD", 2), ("MUL", 1)], [("MUL", 1), ("ADD", 2)])
    assert profile["arena_bytes"] >= profile["live_bytes"] > 0   # h1 and h2 share the arena
    text = run(model, "--profile")
    assert "latency:" in text and "ADD  2 steps" in text and "live-tensor lower bound" in text


def test_int8_inputs_are_random_within_range(tmp_path):
    path = tmp_path / "int8.tflite"
    path.write_bytes(op_model("RESHAPE", [In((1, 64), "int8"), np.array([64], np.int32)],
                              outputs=[Out((64,), "int8")], options={"new_shape": [64]}))
    from edgelite.interpreter import Interpreter, UnsupportedOpsError
    try:
        Interpreter(model_path=str(path))
    except UnsupportedOpsError:
        pytest.skip("no int8 RESHAPE kernel yet")
    report = run_json(path)
    assert report["inputs"][0]["dtype"] == "int8"
    values = report["outputs"][0]["first_values"]
    assert all(-128 <= v <= 127 for v in values) and len(set(values)) > 1


# --- errors --------------------------------------------------------------------------------------

def test_unsupported_ops_are_all_listed(tmp_path):
    model = Model()
    sg = Subgraph(name="main")
    x = sg.add_tensor(Tensor("x", (1, 4)))
    a, b, c = (sg.add_tensor(Tensor(n, (1, 4))) for n in "abc")
    sg.inputs, sg.outputs = [x], [c]
    sg.operators = [Operator(OperatorCode("CUSTOM", 1, "FancyOp"), [x], [a]),
                    Operator(OperatorCode("CUSTOM", 1, "FancyOp"), [a], [b]),
                    Operator(OperatorCode("CUSTOM", 1, "OtherOp"), [b], [c])]
    model.subgraphs.append(sg)
    path = tmp_path / "custom.tflite"
    path.write_bytes(save(model))
    line = run_error(path)
    assert "no kernel for 3 operator(s)" in line
    assert "'FancyOp' is not registered" in line and "at operators 0, 1" in line
    assert "'OtherOp' is not registered" in line and "at operator 2" in line


def test_missing_input_name(model, tmp_path):
    line = run_error(model, "--data", npz(tmp_path, image=np.ones((1, 4), np.float32)))
    assert "no array for input 'x' or 'features' or 'input_0'" in line and "it has: image" in line


def test_wrong_shape(model, tmp_path):
    line = run_error(model, "--data", npz(tmp_path, x=np.ones((5, 3), np.float32)))
    assert "input 'x' has shape [1, 4] (or [N, 4]: N samples); --data 'x' has shape [5, 3]" in line


def test_wrong_dtype(model, tmp_path):
    line = run_error(model, "--data", npz(tmp_path, x=np.array([["a", "b", "c", "d"]])))
    assert "input 'x' is float32" in line


def test_labels_that_do_not_match(model, tmp_path):
    line = run_error(model, "--data", npz(tmp_path, x=np.ones((2, 4), np.float32), y=np.ones(3)))
    assert "holds 3 labels; the model gave 2 predictions" in line


def test_bad_files_and_signature(model, tmp_path):
    assert "no such file" in run_error(tmp_path / "nope.tflite")
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"\x00" * 16)
    run_error(bad)
    assert "no such file" in run_error(model, "--data", tmp_path / "nope.npz")
    (tmp_path / "junk.npz").write_bytes(b"junk")
    assert "cannot read --data" in run_error(model, "--data", tmp_path / "junk.npz")
    assert "no signature 'train' (it has: 'serving_default')" in run_error(
        model, "--signature", "train")


def test_reference_flag_gives_the_reference_kernels_bits(tmp_path):
    """`--reference`: the interpreter `run` builds uses BUILTIN_REF, whose int8 outputs equal
    LiteRT's reference kernels' bit for bit; without it this case differs (by 1) somewhere."""
    from edgelite.cli.session import Session
    from edgelite.schema import load
    from tests.interpreter.cases_int8_requant import CASES
    from tests.opmodel import run_litert
    case = next(c for c in CASES if c.id == "requant_conv_1x1_large_relu6")
    path = tmp_path / "conv.tflite"
    path.write_bytes(case.model)
    theirs = run_litert(case.model, case.feeds)[0]

    def output(reference: bool) -> np.ndarray:
        it = Session(path, load(path), None, 1, reference).interpreter
        it.set_tensor(it.get_input_details()[0]["index"], case.feeds[0])
        it.invoke()
        return it.get_tensor(it.get_output_details()[0]["index"])
    np.testing.assert_array_equal(output(True), theirs)
    fast = output(False)
    assert not np.array_equal(fast, theirs)
    assert np.abs(fast.astype(int) - theirs).max() == 1
    assert run_json(path, "--reference", "--repeat", "1")["outputs"][0]["dtype"] == "int8"


def test_data_in_either_layout(models_dir, tmp_path):
    """`run --data` takes the ONNX layout (NCHW) too, as tflite-convert --inputs does, and says
    which it used; the predictions are the same."""
    d = np.load(models_dir / "digits.npz")
    nchw, y = d["x_test"][:40], d["y_test"][:40]
    model = models_dir / "digits_cnn.tflite"
    texts = []
    for name, x in (("nchw", nchw), ("nhwc", nchw.transpose(0, 2, 3, 1))):
        np.savez(tmp_path / f"{name}.npz", x=x, y=y)
        texts.append(run(model, "--data", tmp_path / f"{name}.npz"))
    assert "--data 'x' (NCHW, transposed to NHWC), 40 samples" in texts[0]
    assert "transposed" not in texts[1]
    accuracy = [re.search(r"accuracy: (\S+ \(\d+/40)", t)[1] for t in texts]
    assert accuracy[0] == accuracy[1]
