"""threads.enter's fast path (issue 17): a block whose count OpenBLAS already has takes no lock
(0.4 instead of 1.2 µs an invoke); blocks that change the count wait for the fast ones to
leave. Checked without timing: the fast path never touches the lock, and threads mixing counts,
nesting blocks and entering fast and slow ones at random all see their own count and finish."""
from __future__ import annotations

import random
import threading

import numpy as np
import pytest

from edgelite.interpreter import Interpreter, threads
from tests.opmodel import In, op_model


class _NoLock:
    """Stands in for threads._lock / _state: any use fails the test."""

    def __getattr__(self, name):
        raise AssertionError(f"the fast path used the lock ({name})")

    def __enter__(self):
        raise AssertionError("the fast path entered the lock")

    def __exit__(self, *exc):
        return False


@pytest.fixture
def blas():
    api = threads._find()
    if not api:
        pytest.skip("numpy here has no OpenBLAS whose thread count edgelite sets")
    before = api[1]()
    api[0](2)
    if api[1]() != 2:
        api[0](before)
        pytest.skip("OpenBLAS here runs at most one thread")
    adaptive, threads.ADAPTIVE = threads.ADAPTIVE, False
    yield api
    threads.ADAPTIVE = adaptive
    api[0](before)


def test_an_invoke_at_the_process_count_takes_no_lock(blas, monkeypatch):
    it = Interpreter(model_content=op_model("RELU", [In((4,))]), num_threads=1)
    it.allocate_tensors()
    blas[0](1)
    monkeypatch.setattr(threads, "_lock", _NoLock())
    monkeypatch.setattr(threads, "_state", _NoLock())
    it.invoke()                                  # was: `with _lock` twice an invoke
    assert blas[1]() == 1 and threads._fast == []


def _block(want, depth, seen, rng):
    entered = threads.enter(want)
    try:
        seen.append((want, depth, threads.blas_threads()))
        if depth < 2 and rng.random() < 0.4:
            _block(rng.choice((1, 2)), depth + 1, seen, rng)
    finally:
        threads.leave(entered)


def test_threads_mixing_counts_see_their_own_and_finish(blas):
    """Eight threads, 300 blocks each at 1 or 2 threads (some nested, which keep the outer
    count): every outermost block sees its own count, none waits forever, and the process's
    count is back at the end."""
    seen = [[] for _ in range(8)]
    errors = []

    def work(k):
        rng = random.Random(k)
        try:
            for _ in range(300):
                _block(rng.choice((1, 2)), 0, seen[k], rng)
        except Exception as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    workers = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert not any(w.is_alive() for w in workers), "a block waited forever"
    assert not errors, errors
    outer = [(want, got) for s in seen for want, depth, got in s if depth == 0]
    assert len(outer) == 8 * 300 and all(want == got for want, got in outer)
    assert blas[1]() == 2 and threads._fast == [] and threads._active == 0


def test_interpreters_at_two_counts_give_their_lone_results(blas):
    """Interpreters at 1 and 2 threads in six threads (the fast path for whichever count the
    process has at the moment): results bit for bit those of a lone interpreter."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((192, 192)).astype(np.float32)
    content = op_model("FULLY_CONNECTED", [In((48, 192)), w, None])
    x = rng.standard_normal((48, 192)).astype(np.float32)

    def ready(n):
        it = Interpreter(model_content=content, num_threads=n)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        return it
    refs = {}
    for n in (1, 2):
        it = ready(n)
        it.invoke()
        refs[n] = it.get_tensor(it.get_output_details()[0]["index"])
    bad = []

    def work(n):
        it = ready(n)
        for _ in range(100):
            it.invoke()
            if not np.array_equal(it.get_tensor(it.get_output_details()[0]["index"]), refs[n]):
                bad.append(n)
    workers = [threading.Thread(target=work, args=(1 + k % 2,), daemon=True) for k in range(6)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(60)
    assert not any(t.is_alive() for t in workers) and not bad


def test_a_block_at_the_current_count_joins_while_another_waits_to_change_it(blas):
    """A fast block whose work waits on another thread's block at the same count (a custom op
    handing work to a pool whose interpreters run at the process's count) while a third thread
    waits to change the count: the second block joins the count that is running, as a locked
    one did before the fast path; it waited for the change, which waits for the first block:
    no thread moved again."""
    blas[0](1)
    outer = threads.enter(1)
    assert outer == threads.FAST
    changer = threading.Thread(target=lambda: threads.leave(threads.enter(2)), daemon=True)
    try:
        changer.start()
        for _ in range(2000):   # until the changer waits for the fast block to leave
            if threads._changing:
                break
            changer.join(0.001)
        assert threads._changing, "the block at 2 threads did not start its change"
        seen = []

        def inner():
            entered = threads.enter(1)
            try:
                seen.append(threads.blas_threads())
            finally:
                threads.leave(entered)
        joiner = threading.Thread(target=inner, daemon=True)
        joiner.start()
        joiner.join(5)
        assert not joiner.is_alive(), "a block at the running count waited for a change " \
            "that waits for the block it serves"
        assert seen == [1]
    finally:
        threads.leave(outer)
        changer.join(10)
    assert not changer.is_alive() and blas[1]() == 1 and threads._fast == []
    assert threads._active == 0 and not threads._changing


class _Interrupted:
    """Stands in for numpy's error-state variable: a KeyboardInterrupt as it is set."""

    def set(self, _state):
        raise KeyboardInterrupt

    def reset(self, _token):
        raise AssertionError("reset without a set")


def test_an_interrupt_as_an_invoke_starts_leaves_no_block_behind(blas, monkeypatch):
    """A KeyboardInterrupt arriving after the invoke entered its BLAS block (here: as numpy's
    error state is set) leaves the block: a fast entry left in threads._fast makes every later
    change of the count wait forever."""
    from edgelite.interpreter import api
    it = Interpreter(model_content=op_model("RELU", [In((4,))]), num_threads=1)
    it.allocate_tensors()
    blas[0](1)
    monkeypatch.setattr(api, "ERRORS", _Interrupted())
    with pytest.raises(KeyboardInterrupt):
        it.invoke()
    assert threads._fast == [] and threads._active == 0


def test_a_change_of_the_count_is_not_starved_by_overlapping_blocks(blas):
    """Three threads in back-to-back blocks at the count running (their blocks overlap all
    the time) and a fourth changing the count twenty times: each change gets through (the
    blocks joining a pending change only after threads.JOIN_S; at 389e030 the change waited
    forever)."""
    blas[0](1)
    stop = threading.Event()
    a = np.ones((64, 64), np.float32)

    def busy():
        while not stop.is_set():
            entered = threads.enter(1)
            try:
                a.dot(a)
            finally:
                threads.leave(entered)
    workers = [threading.Thread(target=busy, daemon=True) for _ in range(3)]
    done = []

    def change():
        for _ in range(20):
            threads.leave(threads.enter(2))
            done.append(1)
    changer = threading.Thread(target=change, daemon=True)
    try:
        for w in workers:
            w.start()
        changer.start()
        changer.join(30)
    finally:
        stop.set()
        for w in workers:
            w.join(10)
    assert len(done) == 20, f"{len(done)} of 20 changes got through"
    assert blas[1]() == 1 and threads._fast == [] and threads._active == 0
