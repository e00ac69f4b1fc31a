"""Batch inference over Ray Data (map_batches, an actor pool of 2 interpreters with fractional
CPUs): 10,000 inputs give the single-process outputs bit for bit, with throughput per worker;
a Ray Dataset of rows is scored too; `python -m edgelite.distributed predict` from the shell."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from edgelite.distributed.inference import predict
from edgelite.interpreter import Interpreter
from edgelite.interpreter.training import export_frozen, extend
from edgelite.interpreter.training import predict as predict_here

N, BATCH = 10_000, 256


@pytest.fixture(scope="module")
def frozen(digits):
    return export_frozen(extend(digits.source, trainable="last:1"))  # an open batch dimension


@pytest.fixture(scope="module")
def images(digits):
    reps = -(-N // len(digits.x))
    return np.concatenate([digits.x] * reps)[:N] + np.float32(0)


def test_ten_thousand_inputs_equal_the_single_process_run(ray_cluster, frozen, images):
    it = Interpreter(model_content=frozen, num_threads=1)
    want = predict_here(it, {"image": images}, batch_size=BATCH, signature="serving_default")
    seen = []
    result = predict(frozen, {"image": images}, workers=2, batch_size=BATCH,
                     progress=lambda done, total: seen.append((done, total)))
    got = result.outputs["Identity"]
    assert got.shape == want.shape == (N, 10)
    assert np.array_equal(got, want)
    assert seen[-1] == (N, N) and len(seen) > 1
    assert sum(w["samples"] for w in result.per_worker.values()) == N
    print(f"\nbatch inference: {result.per_second:.0f} inferences/s wall (Ray Data start "
          "included); per worker " + ", ".join(f"{w['samples']} at {w['per_second']:.0f}/s"
                                               for w in result.per_worker.values()))
    assert all(w["per_second"] > 0 for w in result.per_worker.values())


def test_a_ray_dataset_of_rows(ray_cluster, frozen, images):
    import ray.data

    ds = ray.data.from_items([{"image": im, "__index__": i} for i, im in
                              enumerate(images[:300])])
    result = predict(frozen, ds, workers=2, batch_size=50)
    it = Interpreter(model_content=frozen, num_threads=1)
    want = predict_here(it, {"image": images[:300]}, batch_size=50,
                        signature="serving_default")
    np.testing.assert_allclose(result.outputs["Identity"], want, rtol=1e-5, atol=1e-5)


def test_predict_from_the_command_line(ray_cluster, frozen, images, tmp_path):
    model, data, out = tmp_path / "m.tflite", tmp_path / "x.npz", tmp_path / "y.npz"
    model.write_bytes(frozen)
    np.savez(data, image=images[:1000])
    done = subprocess.run([sys.executable, "-m", "edgelite.distributed", "predict", str(model),
                           "--data", str(data), "--workers", "2", "--batch-size", "128",
                           "-o", str(out), "--json", "--address",
                           ray_cluster.get_runtime_context().gcs_address],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["samples"] == 1000 and len(summary["per_worker"]) >= 1
    it = Interpreter(model_content=frozen, num_threads=1)
    want = predict_here(it, {"image": images[:1000]}, batch_size=128,
                        signature="serving_default")
    assert np.array_equal(np.load(out)["Identity"], want)
