"""The worker threads that share a kernel's work at num_threads > 1 (interpreter/workers.py,
issue 17 goal 5), and DEPTHWISE_CONV_2D's rows split across them (kernels/depthwise_rows.py):
the same numbers as one thread's, bit for bit; the caller never waits for a helper that has
not started; a plan splits depthwise rows (OpenBLAS at one thread) or lets OpenBLAS thread its
GEMMs, whichever has more work to split (threads.rows_first). Timing-free: the parts handed out
are counted."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from edgelite.interpreter import Interpreter, threads, workers
from edgelite.interpreter.kernels import depthwise_rows
from tests.opmodel import In, op_model


@pytest.fixture
def fixed(monkeypatch):
    """2 threads whatever the load; depthwise rows split whatever the plan's GEMMs."""
    monkeypatch.setattr(threads, "ADAPTIVE", False)
    monkeypatch.setattr(threads, "SPLIT_ROWS", "always")


def test_run_parts_runs_each_part_once():
    seen, lock = [], threading.Lock()

    def part(i):
        with lock:
            seen.append((i, threading.get_ident()))
    for helpers in (0, 1, 3):
        del seen[:]
        workers.run_parts(part, 7, helpers)
        assert sorted(i for i, _ in seen) == list(range(7))


def test_run_parts_raises_a_parts_error():
    def part(i):
        if i == 3:
            raise ValueError("part 3")
    with pytest.raises(ValueError, match="part 3"):
        workers.run_parts(part, 4, 1)


def test_caller_takes_the_parts_of_a_helper_that_never_starts(monkeypatch):
    """No helper thread runs (as on a machine whose other core is busy): nothing waits."""
    monkeypatch.setattr(workers, "_tasks", type("Q", (), {"put": lambda self, t: None})())
    monkeypatch.setattr(workers, "_ensure", lambda helpers: None)
    done = []
    workers.run_parts(done.append, 5, 1)
    assert done == [0, 1, 2, 3, 4]


CASES = {   # id: (input shape, filter shape, options)
    "s1": ((1, 40, 40, 24), (1, 3, 3, 24), dict(padding=0, fused_activation_function=3)),
    "s2_bands": ((1, 112, 112, 64), (1, 3, 3, 64), dict(padding=0, stride_h=2, stride_w=2)),
    "k5_valid": ((1, 30, 30, 32), (1, 5, 5, 32), dict(padding=1, fused_activation_function=1)),
    "multiplier": ((1, 32, 32, 8), (1, 3, 3, 16), dict(padding=0, depth_multiplier=2)),
    "batch2_dilated": ((2, 24, 24, 32), (1, 3, 3, 32), dict(padding=0, dilation_h_factor=2,
                                                           dilation_w_factor=2)),
    "rows_4": ((1, 4, 200, 96), (1, 3, 3, 96), dict(padding=0)),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("bias_input", [False, True])
def test_depthwise_rows_same_numbers(case, bias_input, fixed, monkeypatch):
    shape, wshape, options = CASES[case]
    options = dict(dict(stride_h=1, stride_w=1, depth_multiplier=1, dilation_h_factor=1,
                        dilation_w_factor=1), **options)
    rng = np.random.default_rng(1)
    w = rng.standard_normal(wshape).astype(np.float32)
    b = rng.standard_normal(wshape[-1]).astype(np.float32)
    x = rng.standard_normal(shape).astype(np.float32)
    model = op_model("DEPTHWISE_CONV_2D", [In(shape), w, In(b.shape) if bias_input else b],
                     options=options)
    feeds = [x] if not bias_input else [x, b]

    def run(num_threads):
        it = Interpreter(model_content=model, num_threads=num_threads)
        it.allocate_tensors()
        for d, v in zip(it.get_input_details(), feeds):
            it.set_tensor(d["index"], v)
        it.invoke()
        return it.get_tensor(it.get_output_details()[0]["index"])
    one = run(1)
    monkeypatch.setattr(depthwise_rows, "SPLIT_MACS", 1)
    before = workers.posted
    two = run(2)
    assert workers.posted > before, "the layer ran on one thread"
    np.testing.assert_array_equal(two, one)


def test_hand_landmark_hands_out_its_depthwise_rows(models_dir, fixed):
    """At num_threads 2 every large depthwise layer of mp_hand_landmark (16 layers, 13 above
    SPLIT_MACS) offers parts to a helper (was none: numpy's depthwise ran on one thread), and
    the outputs are those of the same run with the split off."""
    path = str(models_dir / "mp_hand_landmark.tflite")
    x = np.random.default_rng(0).random((1, 224, 224, 3), np.float32)

    def run(split_macs):
        old, depthwise_rows.SPLIT_MACS = depthwise_rows.SPLIT_MACS, split_macs
        try:
            it = Interpreter(model_path=path, num_threads=2)
            it.allocate_tensors()
        finally:
            depthwise_rows.SPLIT_MACS = old
        it.set_tensor(it.get_input_details()[0]["index"], x)
        before = workers.posted
        it.invoke()
        return workers.posted - before, [it.get_tensor(d["index"])
                                         for d in it.get_output_details()]
    posted, split = run(depthwise_rows.SPLIT_MACS)
    none, whole = run(1 << 62)
    assert none == 0 and posted >= 13, posted
    for a, b in zip(split, whole):
        np.testing.assert_array_equal(a, b)


def _dw_model() -> bytes:
    rng = np.random.default_rng(0)
    return op_model("DEPTHWISE_CONV_2D", [In((1, 112, 112, 24)),
                                          rng.standard_normal((1, 3, 3, 24)).astype(np.float32),
                                          rng.standard_normal(24).astype(np.float32)],
                    options=dict(stride_h=1, stride_w=1, depth_multiplier=1, padding=0,
                                 dilation_h_factor=1, dilation_w_factor=1))


@pytest.mark.parametrize("name, rows", [("depthwise only", True),
                                        ("mp_hand_landmark.tflite", False),
                                        ("mobilenet_v2.tflite", False)])
def test_rows_or_blas(models_dir, monkeypatch, name, rows):
    """A plan whose GEMMs OpenBLAS would thread lets it (mp_hand_landmark: 124 M GEMM
    multiply-adds; its worker spins on the second core between GEMMs, a split there shares that
    core): no layer splits. A plan of depthwise layers alone keeps OpenBLAS at one thread and
    splits their rows."""
    monkeypatch.setattr(threads, "ADAPTIVE", False)
    it = Interpreter(model_content=_dw_model(), num_threads=2) if name == "depthwise only" \
        else Interpreter(model_path=str(models_dir / name), num_threads=2)
    it.allocate_tensors()
    assert it._runtime.split_rows is rows
    assert it._blas_threads == (1 if rows else 2)
    d = it.get_input_details()[0]
    it.set_tensor(d["index"], np.zeros(d["shape"], np.float32))
    before = workers.posted
    it.invoke()
    assert (workers.posted > before) is rows


def test_wake_then_parts():
    """wake() posts tasks with nothing left to take: the helpers skip them, the parts after run
    once each."""
    workers.run_parts(lambda i: None, 2, 1)   # a helper started
    seen = []
    for _ in range(20):
        workers.wake(1)
        del seen[:]
        workers.run_parts(seen.append, 6, 1)
        assert sorted(seen) == list(range(6))


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no os.fork here")
def test_forked_child_gets_its_own_helpers():
    """A forked child (no helper threads of its parent's) runs its parts and does not hang."""
    import os

    workers.run_parts(lambda i: None, 2, 1)
    pid = os.fork()
    if pid == 0:   # the child: exit 0 only if the parts ran
        try:
            done = []
            workers.wake(1)
            workers.run_parts(done.append, 4, 1)
            os._exit(0 if sorted(done) == [0, 1, 2, 3] else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
