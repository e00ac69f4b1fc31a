"""Ray for the distributed tests: one local cluster (`ray.init(num_cpus=2)`) for the session.

Without Ray the tests that need it skip with one reason; EDGELITE_REQUIRE_RAY=1 (the CI stage
'ray' sets it) turns the absence into a failure. The protocol tests (test_protocol.py) run the
actor classes in-process and need no Ray.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

RAY_SKIP = "Ray not installed: pip install 'edgelite[distributed]' (CI's 'ray' stage runs these)"


@pytest.fixture(scope="session")
def ray_cluster():
    try:
        import ray
    except ImportError:
        if os.environ.get("EDGELITE_REQUIRE_RAY") == "1":
            pytest.fail(RAY_SKIP + " (EDGELITE_REQUIRE_RAY=1)")
        pytest.skip(RAY_SKIP)
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


class Digits:
    """The digits CNN (digits_cnn.tflite) with its two FULLY_CONNECTED layers re-initialized
    (seed 0), trainable (last:2), Adam lr 1e-3, built with the gradients/apply signatures."""

    def __init__(self, models_dir, optimizer="adam", learning_rate=1e-3):
        from edgelite.interpreter.training import make_trainable, reinitialize
        from edgelite.schema import load, save

        data = np.load(models_dir / "digits.npz")
        self.x = np.ascontiguousarray(data["x_train"].transpose(0, 2, 3, 1))
        self.y = data["y_train"].astype(np.int32)
        self.x_test = np.ascontiguousarray(data["x_test"].transpose(0, 2, 3, 1))
        self.y_test = data["y_test"]
        self.source = load(models_dir / "digits_cnn.tflite")
        sg = self.source.subgraphs[0]
        fcs = [op for op in sg.operators if op.opcode.builtin == "FULLY_CONNECTED"]
        reinitialize(self.source, [sg.tensors[op.inputs[1]].name for op in fcs], seed=0)
        self.content = save(make_trainable(self.source, trainable="last:2", optimizer=optimizer,
                                           learning_rate=learning_rate, gradients=True))


@pytest.fixture(scope="session")
def digits(models_dir):
    return Digits(models_dir)
