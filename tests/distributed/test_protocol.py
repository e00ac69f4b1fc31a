"""The parameter server's exactly-once protocol and checkpoints, with the actor classes run
in-process (no Ray): what the Ray runs rely on, checked step by step."""
from __future__ import annotations

import copy

import numpy as np
import pytest

from edgelite.distributed.training import GRAD, ParameterServer, Worker, part
from edgelite.interpreter import Interpreter
from edgelite.interpreter.training import training_facts
from edgelite.schema import load

BATCH, WORKERS = 32, 2


def _server(digits, mode="sync", **kw):
    trainable = training_facts(load(digits.content))["trainable"]
    return ParameterServer(digits.content, trainable, WORKERS, mode, **kw)


def _workers(digits):
    data = {"image": digits.x, "labels": digits.y}
    return [Worker(digits.content, k, WORKERS, data, "labels", BATCH, 0) for k in range(WORKERS)]


def test_parts_cover_each_global_batch_once():
    n = 101
    for step in range(8):  # two epochs of 4 steps (the last batch holds 5)
        parts = [part(n, BATCH, 3, 7, step, k) for k in range(3)]
        joined = np.concatenate(parts)
        epoch, b = divmod(step, 4)
        order = np.random.default_rng(7 + epoch).permutation(n)
        assert np.array_equal(joined, order[b * BATCH:(b + 1) * BATCH])


@pytest.mark.parametrize("optimizer", ["adam", "sgd-momentum"])
def test_in_process_sync_equals_training_on_the_combined_batch(digits, optimizer):
    if optimizer != "adam":
        from edgelite.interpreter.training import SGD, make_trainable
        from edgelite.schema import save

        digits = copy.copy(digits)
        digits.content = save(make_trainable(digits.source, trainable="last:2",
                                             optimizer=SGD(0.05, momentum=0.9),
                                             gradients=True))
    server, workers = _server(digits), _workers(digits)
    single = Interpreter(model_content=digits.content)
    train = single.get_signature_runner("train")
    for step in range(6):
        weights = server.weights()
        server.push_sync(step, [w.compute(step, weights) for w in workers])
        idx = part(len(digits.y), BATCH, 1, 0, step, 0)
        loss = float(train(image=digits.x[idx], labels=digits.y[idx])["loss"])
        assert server.losses[-1] == pytest.approx(loss, rel=1e-5)
    # the weights to a tenth of one Adam step (lr 1e-3): Adam divides by sqrt(v), so a
    # gradient entry near 0 turns float32 rounding of the averaging into up to ~1e-5 here
    want = single.get_signature_runner("save")()
    got = server.variables()
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=0, atol=1e-4)


def test_sync_steps_apply_once_and_in_order(digits):
    server, workers = _server(digits), _workers(digits)
    parts = [w.compute(0, server.weights()) for w in workers]
    assert server.push_sync(0, parts) == 1
    after = server.variables()
    assert server.push_sync(0, parts) == 1 and server.duplicates == 1  # a retry: ignored
    assert all(np.array_equal(v, after[k]) for k, v in server.variables().items())
    with pytest.raises(ValueError, match="step 5 pushed but the server is at step 1"):
        server.push_sync(5, parts)
    with pytest.raises(ValueError, match="one part from each of 2 workers"):
        server.push_sync(1, [workers[0].compute(1, server.weights())])


def test_async_pushes_apply_once_per_worker_step(digits):
    server, workers = _server(digits, "async", max_staleness=1), _workers(digits)
    v0, w0 = server.pull()
    r0 = workers[0].compute(0, w0)
    r1 = workers[1].compute(0, w0)
    assert server.push_async(0, 0, v0, *r0[2:])[0] == "applied"
    before = server.variables()
    status, version, _, nxt = server.push_async(0, 0, v0, *r0[2:])   # the same update again
    assert (status, version, nxt) == ("duplicate", 1, 1)
    assert all(np.array_equal(v, before[k]) for k, v in server.variables().items())
    assert server.push_async(0, 3, 1, *r0[2:])[::3] == ("rewind", 1)   # ahead: rewind to 1
    assert server.push_async(1, 0, v0, *r1[2:])[0] == "applied"          # staleness 1: ok
    r0b = workers[0].compute(1, w0)
    status, version, fresh, nxt = server.push_async(0, 1, v0, *r0b[2:])  # staleness 2 > 1
    assert (status, nxt, server.refused) == ("stale", 1, 1)
    assert server.push_async(0, 1, version, *workers[0].compute(1, fresh)[2:])[0] == "applied"
    assert server.log == [(0, 0), (1, 0), (0, 1)]
    assert server.staleness == {0: 2, 1: 1}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_restarted_server_resumes_from_its_atomic_checkpoint(digits, tmp_path, mode):
    path = tmp_path / "ps.npz"
    server, workers = _server(digits, mode, checkpoint=str(path)), _workers(digits)
    for step in range(3):
        if mode == "sync":
            server.push_sync(step, [w.compute(step, server.weights()) for w in workers])
        else:
            version, weights = server.pull()
            server.push_async(step % 2, step // 2, version,
                              *workers[step % 2].compute(step // 2, weights)[2:])
    assert path.exists() and not (tmp_path / "ps.npz.tmp").exists()
    again = _server(digits, mode, checkpoint=str(path))
    assert again.resumed and again.state()["version"] == 3
    assert again.state() == {**server.state(), "resumed": True}
    want, got = server.variables(), again.variables()
    assert set(want) == set(got) and any(k.endswith("/m") for k in got)
    for k in want:
        assert np.array_equal(want[k], got[k]), k


def test_a_checkpoint_of_another_run_is_refused(digits, tmp_path):
    path = tmp_path / "ps.npz"
    server, workers = _server(digits, "sync", checkpoint=str(path)), _workers(digits)
    server.push_sync(0, [w.compute(0, server.weights()) for w in workers])
    with pytest.raises(ValueError, match="checkpoint of a sync run with 2 workers, not async"):
        _server(digits, "async", checkpoint=str(path))


def test_the_gradients_are_the_model_gradients_named_by_weight(digits):
    (w,) = [Worker(digits.content, 0, 1, {"image": digits.x, "labels": digits.y}, "labels",
                   BATCH, 0)]
    trainable = training_facts(load(digits.content))["trainable"]
    rank, step, n, loss, grads = w.compute(0, {})
    assert (rank, step, n) == (0, 0, BATCH) and loss > 0
    assert sorted(grads) == sorted(GRAD + k for k in trainable)


def test_an_update_applied_but_not_acknowledged_is_not_applied_twice(digits, tmp_path):
    """The server applies and checkpoints an update, then dies before its reply: the retry
    reaches the restarted server, which knows the update and does not apply it again."""
    path = tmp_path / "ps.npz"
    server, workers = _server(digits, "sync", checkpoint=str(path)), _workers(digits)
    parts = [w.compute(0, server.weights()) for w in workers]
    server.push_sync(0, parts)          # applied and checkpointed; the reply is lost
    again = _server(digits, "sync", checkpoint=str(path))
    before = again.variables()
    assert again.push_sync(0, parts) == 1 and again.duplicates == 1   # the driver's retry
    assert all(np.array_equal(v, before[k]) for k, v in again.variables().items())

    path = tmp_path / "async.npz"
    server = _server(digits, "async", checkpoint=str(path))
    version, weights = server.pull()
    pushed = workers[1].compute(0, weights)[2:]
    server.push_async(1, 0, version, *pushed)
    again = _server(digits, "async", checkpoint=str(path))
    status, version, _, nxt = again.push_async(1, 0, version, *pushed)  # the worker's retry
    assert (status, version, nxt) == ("duplicate", 1, 1) and again.log == [(1, 0)]
