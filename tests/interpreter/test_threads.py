"""Threads: the default thread count, interpreters in several threads, and one interpreter used
by two threads at once (issue 19).

A custom op in the model records OpenBLAS's thread count while the model runs (what the
interpreter's BLAS calls see), and can block inside invoke so that another thread's call is
known to overlap it."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from edgelite.interpreter import ConcurrentUseError, Interpreter, register_custom_op, threads
from edgelite.schema import Model, Operator, OperatorCode, Subgraph, Tensor, default_options, save

N = 256
RNG = np.random.default_rng(3)
W = RNG.normal(0, 0.1, (N, N)).astype(np.float32)
B = RNG.normal(0, 0.1, (N,)).astype(np.float32)
X = RNG.normal(0, 1, (64, N)).astype(np.float32)

_seen = threading.local()      # per thread: the BLAS thread counts the probe saw
_gates: dict = {}              # custom options (a key) -> (entered, release) events


def _probe(node):
    node.outputs[0].shape = node.inputs[0].shape
    key = node.custom_options or b""

    def run(x, out):
        getattr(_seen, "counts", []).append(threads.blas_threads())
        gate = _gates.get(key)
        if gate is not None:
            entered, release = gate
            entered.set()
            release.wait(10)
        np.copyto(out, x)
    return run


register_custom_op("EdgeliteThreadProbe", _probe, replace=True)


def _model(key: bytes = b"") -> bytes:
    """y = probe(fc(fc(x))): two 64x256 @ 256x256 products (OpenBLAS threads them)."""
    m = Model()
    sg = Subgraph(name="main")
    T = sg.add_tensor
    x = T(Tensor("x", (64, N)))
    w = T(Tensor("w", (N, N), buffer=m.add_buffer(W)))
    b = T(Tensor("b", (N,), buffer=m.add_buffer(B)))
    h1, h2, y = T(Tensor("h1", (64, N))), T(Tensor("h2", (64, N))), T(Tensor("y", (64, N)))
    sg.inputs, sg.outputs = [x], [y]
    fc = default_options("FULLY_CONNECTED")
    sg.operators = [Operator(OperatorCode("FULLY_CONNECTED"), [x, w, b], [h1], fc),
                    Operator(OperatorCode("FULLY_CONNECTED"), [h1, w, b], [h2], fc),
                    Operator(OperatorCode("CUSTOM", 1, "EdgeliteThreadProbe"), [h2], [y],
                             custom_options=key)]
    m.subgraphs.append(sg)
    return save(m)


MODEL = _model()


def _ready(num_threads=None, content=MODEL) -> Interpreter:
    it = Interpreter(model_content=content, num_threads=num_threads)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], X)
    return it


@pytest.fixture
def blas_two_threads():
    """OpenBLAS at 2 threads around the test (as numpy starts on a machine with 2 or more
    cores), put back afterwards; num_threads=2 gets 2 whatever the machine's load (not
    threads.ADAPTIVE: tests/interpreter/test_threads_adaptive.py tests that)."""
    setter = threads._find()
    if not setter:
        pytest.skip("numpy here has no OpenBLAS whose thread count edgelite sets")
    before = threads.blas_threads()
    setter[0](2)
    if threads.blas_threads() != 2:
        setter[0](before)
        pytest.skip("OpenBLAS here runs at most one thread (a one-core machine)")
    adaptive, threads.ADAPTIVE = threads.ADAPTIVE, False
    yield
    threads.ADAPTIVE = adaptive
    setter[0](before)


def test_default_is_one_thread_as_litert(blas_two_threads):
    """num_threads None and -1: one BLAS thread while the model runs (LiteRT's CPU kernels and
    XNNPACK run one thread unless asked for more); the process's setting is back afterwards."""
    assert threads.resolve(None) == threads.resolve(-1) == 1
    for num_threads in (None, -1, 2):
        it = _ready(num_threads)
        _seen.counts = []
        it.invoke()
        assert _seen.counts == [1 if num_threads != 2 else 2], num_threads
        assert threads.blas_threads() == 2


def _worker(num_threads, reference, results, errors, invokes=60):
    try:
        it = _ready(num_threads)
        _seen.counts = []
        out = it.get_output_details()[0]["index"]
        bad = 0
        for _ in range(invokes):
            it.invoke()
            bad += not np.array_equal(it.get_tensor(out), reference)
        results.append((num_threads, bad, set(_seen.counts)))
    except Exception as e:  # noqa: BLE001 - reported by the test
        errors.append(e)


def test_interpreters_in_threads_do_not_race_on_blas(blas_two_threads):
    """Six threads, each with its own interpreter, half at num_threads=1 and half at 2: every
    invoke sees its own thread count (never the other interpreters'), gives the result of a lone
    interpreter at that count bit for bit, and the process's OpenBLAS setting is unchanged at
    the end."""
    references = {}
    for n in (1, 2):   # OpenBLAS's sums differ with the thread count: one reference for each
        it = _ready(n)
        it.invoke()
        references[n] = it.get_tensor(it.get_output_details()[0]["index"])
    results: list = []
    errors: list = []
    workers = [threading.Thread(target=_worker,
                                args=(1 + k % 2, references[1 + k % 2], results, errors))
               for k in range(6)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors, errors
    assert sorted(results, key=lambda r: r[0]) == [(1, 0, {1})] * 3 + [(2, 0, {2})] * 3
    assert threads.blas_threads() == 2


def test_one_interpreter_used_by_two_threads_is_refused():
    """While thread A is inside invoke(), thread B's invoke / set_tensor / get_tensor /
    allocate_tensors / reset_all_variables on the same interpreter raise ConcurrentUseError
    (LiteRT's contract is one interpreter per thread); A's invoke is unharmed and the
    interpreter works afterwards."""
    entered, release = threading.Event(), threading.Event()
    _gates[b"gate"] = (entered, release)
    it = _ready(content=_model(b"gate"))
    x = it.get_input_details()[0]["index"]
    out = it.get_output_details()[0]["index"]
    errors: list = []
    a = threading.Thread(target=lambda: errors.append(None) if it.invoke() is None else None)
    a.start()
    try:
        assert entered.wait(10)
        calls = {"invoke()": it.invoke, "set_tensor()": lambda: it.set_tensor(x, X),
                 "get_tensor()": lambda: it.get_tensor(out),
                 "allocate_tensors()": it.allocate_tensors,
                 "reset_all_variables()": it.reset_all_variables}
        for name, call in calls.items():
            with pytest.raises(ConcurrentUseError, match=rf"{name[:-2]}\(\) was called while "
                               r"another thread is in invoke\(\) on the same Interpreter"):
                call()
    finally:
        release.set()
        a.join()
        del _gates[b"gate"]
    assert errors == [None]
    expected = (X @ W.T + B) @ W.T + B
    np.testing.assert_allclose(it.get_tensor(out), expected, rtol=1e-4, atol=1e-4)
    it.reset_all_variables()   # free again
    it.invoke()


def test_one_interpreter_in_a_loop_from_two_threads_never_gives_wrong_numbers():
    """Two threads invoking and reading one interpreter as fast as they can: each call either
    runs alone or raises ConcurrentUseError, and every output read is right (no garbage)."""
    it = _ready(1)
    out = it.get_output_details()[0]["index"]
    it.invoke()
    reference = it.get_tensor(out)
    outcomes: list = []

    def hammer():
        for _ in range(200):
            for call in (it.invoke, lambda: it.get_tensor(out)):
                try:
                    value = call()
                except ConcurrentUseError:
                    outcomes.append("refused")
                    continue
                outcomes.append(True if value is None else np.array_equal(value, reference))
    workers = [threading.Thread(target=hammer) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(outcomes) == 800 and False not in outcomes
