"""`edgelite benchmark`: benchmark_model's lines and flags (both spellings), the op profile's
three tables, `--json` against the real `litert-benchmark --result_json` of ai-edge-litert 2.3
on the same model, `--compare` with LiteRT and onnxruntime, and clean refusals."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from tests.cli.helpers import invoke
from tests.conftest import REPO_ROOT

FAST = ["--num-runs", "5", "--warmup-runs", "1", "--warmup-min-secs", "0", "--min-secs", "0",
        "--quiet"]
COUNT = re.compile(r"^count=(\d+) first=(\d+) curr=(\d+) min=(\d+) max=(\d+) avg=([\d.]+) "
                   r"std=(\d+)$", re.M)


def bench(*args) -> str:
    result = invoke(["benchmark", *map(str, args)])
    assert result.exit_code == 0, result.stderr or result.output
    return result.stdout


def bench_error(*args) -> str:
    result = invoke(["benchmark", *map(str, args)])
    assert result.exit_code == 1, result.output
    assert result.stdout == "" and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    return line


@pytest.fixture(scope="module")
def digits(models_dir):
    return models_dir / "digits_cnn.tflite"


def key_types(value, prefix="") -> dict:
    """{dotted key: kind} of a JSON document's objects, recursively ("number" for int/float)."""
    found = {}
    for k, v in value.items():
        name = prefix + k
        if isinstance(v, dict):
            found[name] = "object"
            found.update(key_types(v, name + "."))
        else:
            found[name] = "number" if isinstance(v, (int, float)) and not isinstance(v, bool) \
                else type(v).__name__
    return found


@pytest.mark.parametrize("spelling", ["--num-runs", "--num_runs"])
def test_benchmark_model_lines_in_both_spellings(digits, spelling):
    out = bench(digits, spelling, 7, "--warmup_runs", 2, "--warmup-min-secs", 0, "--min_secs", 0,
                "--quiet")
    (warm, timed) = COUNT.findall(out)
    assert int(warm[0]) == 2 and int(timed[0]) == 7
    first, curr, low, high, avg = (float(v) for v in timed[1:6])
    assert low <= min(first, curr) and max(first, curr) <= high and low <= avg <= high
    assert re.search(r"^Inference timings in us: Init: \d+, First inference: \d+, Warmup \(avg\): "
                     r"[\d.]+, Inference \(avg\): [\d.]+$", out, re.M), out
    assert "Overall peak memory footprint (MB) via periodic monitoring: " in out
    assert re.search(r"^Arena: [\d,]+ bytes \(live-tensor lower bound [\d,]+ bytes\)$", out, re.M)


def test_min_secs_keeps_timing_past_num_runs(digits):
    facts = json.loads(bench(digits, "--num-runs", 1, "--min-secs", 0.3, "--warmup-runs", 0,
                             "--warmup-min-secs", 0, "--json", "--quiet"))
    lat = facts["latency"]
    assert lat["num_runs"] > 1 and lat["avg_ms"] * lat["num_runs"] >= 0.3e3 * 0.9
    assert lat["num_warmup_runs"] == 0


def test_json_has_every_key_of_litert_benchmark(digits, tmp_path):
    """litert-benchmark (ai-edge-litert's console script) runs on the same model; every key it
    writes, nested ones included, is in ours with the same kind of value."""
    theirs_path = tmp_path / "litert.json"
    done = subprocess.run([sys.executable, "-m", "ai_edge_litert.tools.benchmark_litert_model",
                           f"--model={digits}", "--num_runs=5", "--warmup_runs=1",
                           f"--result_json={theirs_path}"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    theirs = json.loads(theirs_path.read_text())
    ours = json.loads(bench(digits, *FAST, "--json"))
    want, got = key_types(theirs), key_types(ours)
    missing = sorted(set(want) - set(got))
    assert not missing, f"keys litert-benchmark writes that ours lacks: {missing}"
    kinds = {k: (want[k], got[k]) for k in want if want[k] != got[k]}
    assert not kinds, kinds
    assert len(want) >= 20      # the latency object's 12 keys and the top level's
    assert "op_profile" not in ours and "compare" not in ours     # only when asked for
    # The same facts where they must agree.
    for key in ("model", "model_size_mb", "signature", "num_threads", "fully_accelerated",
                "accelerators"):
        assert ours[key] == theirs[key], key
    assert ours["latency"]["num_runs"] == 5 and ours["latency"]["num_warmup_runs"] == 1
    lat = ours["latency"]
    assert lat["min_ms"] <= lat["p5_ms"] <= lat["median_ms"] <= lat["p95_ms"] <= lat["max_ms"]


def test_op_profile_tables_cover_every_step(digits):
    from edgelite.schema import load

    facts = json.loads(bench(digits, *FAST, "--op-profile", "--json"))
    p = facts["op_profile"]
    sg = load(digits).subgraphs[0]
    order = p["run_order"]
    assert [r["op_index"] for r in order] == list(range(len(sg.operators)))   # none folded here
    assert [r["node_type"] for r in order] == [op.op for op in sg.operators]
    assert [r["name"] for r in order] == [sg.tensors[op.outputs[0]].name for op in sg.operators]
    assert order[-1]["cdf"] == pytest.approx(1.0)
    assert [r["avg_ms"] for r in p["top"]] == sorted((r["avg_ms"] for r in order), reverse=True)
    by_type = {e["node_type"]: e for e in p["by_node_type"]}
    assert by_type["CONV_2D"]["count"] == 2 and by_type["FULLY_CONNECTED"]["count"] == 2
    assert sum(e["share"] for e in p["by_node_type"]) == pytest.approx(1.0)
    assert p["runs"] == 5 and p["timings_us"]["count"] == 5

    text = bench(digits, *FAST, "--enable_op_profiling")
    for title in ("Run Order", "Top by Computation Time", "Summary by node type"):
        assert f" {title} " in text
    rows = [ln for ln in text.splitlines() if ln.startswith("\t") and "[Relu;add;Conv2D" in ln]
    assert len(rows) == 2   # the first conv in the run order and in the top table
    assert re.search(r"^7 nodes observed$", text, re.M)


def test_inputs_from_files(digits, tmp_path):
    image = np.random.default_rng(3).uniform(0, 1, (1, 8, 8, 1)).astype(np.float32)
    np.save(tmp_path / "image.npy", image)
    facts = json.loads(bench(digits, *FAST, "--json", "--input", f"image={tmp_path / 'image.npy'}"))
    assert facts["inputs"][0]["source"] == "--input image"
    # input_K works too, and an .npz of one array.
    np.savez(tmp_path / "one.npz", anything=image[0])
    facts = json.loads(bench(digits, *FAST, "--json", "--input", f"input_0={tmp_path / 'one.npz'}"))
    assert facts["inputs"][0]["source"] == "--input input_0"


def test_refusals_are_one_line(digits, tmp_path):
    np.save(tmp_path / "bad.npy", np.zeros((3, 3), np.float32))
    assert "input 'image' has shape [1, 8, 8, 1]" in bench_error(
        digits, *FAST, "--input", f"image={tmp_path / 'bad.npy'}")
    assert "no such input" in bench_error(digits, *FAST, "--input",
                                          f"nope={tmp_path / 'bad.npy'}")
    assert "has no signature 'train'" in bench_error(digits, *FAST, "--signature", "train")
    assert "the peers are litert, onnxruntime" in bench_error(digits, *FAST, "--compare", "tvm")
    assert "no delegate named 'cuda'" in bench_error(digits, *FAST, "--delegate", "cuda")
    assert "no ONNX model at" in bench_error(digits, *FAST, "--compare",
                                             f"onnxruntime={tmp_path / 'none.onnx'}")


def test_compare_runs_the_peers_alternating(models_dir):
    """In a child process: the suite's guard refuses onnxruntime sessions above ORT_ENABLE_BASIC
    (for oracles), and a benchmark runs onnxruntime as users do, fully optimized."""
    done = subprocess.run(
        [sys.executable, "-m", "edgelite.cli", "benchmark", str(models_dir / "digits_cnn.tflite"),
         *FAST, "--num-runs", "20", "--json",
         "--compare", f"litert,onnxruntime={models_dir / 'digits_cnn.onnx'}"],
        capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    c = facts["compare"]
    assert set(c) == {"litert", "onnxruntime"}
    for name, peer in c.items():
        assert peer["num_runs"] >= 20 and peer["median_ms"] > 0, name
        assert peer["ratio"] == pytest.approx(facts["latency"]["median_ms"] / peer["median_ms"],
                                              rel=0.02)
    assert facts["latency"]["num_runs"] >= 20
    assert c["litert"]["max_abs_diff"] < 1e-4      # the same inputs: the same outputs
    assert c["onnxruntime"]["max_abs_diff"] is None   # its own inputs (NCHW)


def test_a_missing_peer_names_its_package(models_dir):
    from tests.blocked import run_blocked

    done = run_blocked(f"""
        sys.argv = ["edgelite", "benchmark", {str(models_dir / 'digits_cnn.tflite')!r},
                    "--compare", "litert", "--quiet"]
        from edgelite.cli import main
        sys.exit(main())
    """)
    assert done.returncode == 1, done.stderr
    assert "pip install ai-edge-litert" in done.stderr and done.stdout == ""


def test_callable_from_python(digits):
    from edgelite.cli.benchmark import benchmark

    facts = benchmark(digits, num_runs=3, warmup_runs=0, warmup_min_secs=0, min_secs=0,
                      input_arrays={"image": np.zeros((1, 8, 8, 1), np.float32)})
    assert facts["latency"]["num_runs"] == 3 and facts["inputs"][0]["source"] == "--input image"


def test_progress_on_stderr_results_on_stdout(digits):
    loud = invoke(["benchmark", digits, "--num-runs", "3", "--min-secs", "0",
                   "--warmup-min-secs", "0"])
    assert loud.exit_code == 0
    assert "Running benchmark for at least 3 iterations" in loud.stderr
    assert "Running" not in loud.stdout and COUNT.search(loud.stdout)
    quiet = invoke(["benchmark", digits, "--num-runs", "3", "--min-secs", "0",
                    "--warmup-min-secs", "0", "--quiet", "--json"])
    assert quiet.exit_code == 0 and quiet.stderr == ""
    json.loads(quiet.stdout)    # nothing but the document


def test_runtime_install_alone(digits):
    """numpy and flatbuffers only (argparse, no rich): benchmark and its op profile run."""
    from tests.cli.helpers import run_blocked

    done = run_blocked("edgelite", ["benchmark", digits, *FAST, "--op-profile"])
    assert done.returncode == 0, done.stderr
    assert len(COUNT.findall(done.stdout)) == 2 and " Summary by node type " in done.stdout


def test_delegate_placement_and_partition_profile(digits):
    pytest.importorskip("pyopencl")
    result = invoke(["benchmark", digits, *FAST, "--delegate", "opencl:fp16", "--json",
                     "--op-profile"])
    if result.exit_code != 0 and "--delegate opencl:fp16" in result.stderr:
        pytest.skip(f"no OpenCL device: {result.stderr.strip()}")
    assert result.exit_code == 0, result.stderr
    facts = json.loads(result.stdout)
    assert facts["accelerators"] == ["OpenCL", "CPU"] and facts["fully_accelerated"] is True
    assert "fp16" in facts["placement"]["device"]
    assert {p["where"] for p in facts["placement"]["ops"]} == {"OpenCL"}
    (step,) = facts["op_profile"]["run_order"]          # one partition: one step
    assert step["node_type"] == "OpenCL partition" and "7 ops" in step["name"]


def test_a_signature_through_its_runner(models_dir, tmp_path):
    path = models_dir / "mobilenet_v2.tflite"
    image = np.random.default_rng(0).uniform(-1, 1, (224, 224, 3)).astype(np.float32)
    np.save(tmp_path / "image.npy", image)
    given = f"keras_tensor={tmp_path / 'image.npy'}"
    facts = json.loads(bench(path, *FAST, "--num-runs", 2, "--json", "--signature",
                             "serving_default", "--input", given))
    assert facts["signature"] == "serving_default"
    assert facts["inputs"] == [{"name": "keras_tensor", "shape": [1, 224, 224, 3],
                                "dtype": "float32", "source": "--input keras_tensor"}]
    assert facts["latency"]["num_runs"] == 2
