"""`edgelite train --json` (single process) and `edgelite train --workers 2 --mode sync|async
--json` on Ray: the same JSON shape, the same per-step losses in sync; --batch-size is the
global batch."""
from __future__ import annotations

import json

import numpy as np
import pytest

from edgelite.schema import save
from tests.cli.helpers import invoke, run_blocked


@pytest.fixture(scope="module")
def files(digits, tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    model, train, test = folder / "digits.tflite", folder / "train.npz", folder / "test.npz"
    model.write_bytes(save(digits.source))  # the FC layers re-initialized: losses from ~2.3
    np.savez(train, image=digits.x[:320], labels=digits.y[:320])
    np.savez(test, image=digits.x_test, labels=digits.y_test)
    return model, train, test


def _train(*args):
    result = invoke(["train", *map(str, args), "--trainable", "last:2", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def test_single_process_json(files):
    model, train, test = files
    summary, err = _train(model, "--data", train, "--epochs", 2, "--eval", test)
    assert len(summary["losses"]) == 20 and len(summary["epoch_losses"]) == 2
    assert summary["workers"] == 1 and summary["steps_per_second"] > 0
    assert summary["epoch_losses"][1] < summary["epoch_losses"][0]
    assert 0 <= summary["accuracy"] <= 1
    assert "epoch 2/2  loss" in err  # the text goes to stderr, stdout is the JSON alone


def test_workers_without_ray_is_one_error(files):
    model, train, _ = files
    done = run_blocked("edgelite", ["train", model, "--data", train, "--workers", "2"],
                       blocked=("ray",))
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs Ray: pip install 'edgelite[distributed]'" in lines[0]


def test_sync_workers_json_equals_single_process(ray_cluster, files):
    model, train, test = files
    single, _ = _train(model, "--data", train, "--epochs", 2)
    dist, err = _train(model, "--data", train, "--epochs", 2, "--workers", 2, "--mode",
                       "sync", "--eval", test)
    assert set(single) <= set(dist) and dist["workers"] == 2 and dist["mode"] == "sync"
    a, b = np.array(single["losses"]), np.array(dist["losses"])
    assert len(a) == len(b) == 20
    assert np.max(np.abs(a - b) / np.abs(a)) <= 1e-5
    assert "on 2 Ray workers (sync)" in err and "global batch 32" in err


def test_async_workers_json_reports_staleness(ray_cluster, files, tmp_path):
    model, train, _ = files
    out = tmp_path / "frozen.tflite"
    dist, err = _train(model, "--data", train, "--workers", 2, "--mode", "async",
                       "--max-staleness", 1, "--batch-size", 64, "--export", out)
    assert dist["mode"] == "async" and dist["max_staleness"] == 1
    assert dist["updates"] == 2 * 5 == len(dist["losses"])
    assert set(dist["staleness"]) <= {"0", "1"} and sum(dist["staleness"].values()) == 10
    assert out.stat().st_size > 0 and "staleness seen" in err
