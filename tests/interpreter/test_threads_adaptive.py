"""num_threads > 1 gets only the cores other processes leave idle (interpreter/threads.py):
OpenBLAS's spinning threads collapse on a busy machine (MobileNetV2 120 ms at 1 thread, 1.6 s
at 2 under a load of ~10 on 2 cores). The machine's load is faked here: /proc/stat's ticks and
this process's CPU time are what the sampler reads."""
from __future__ import annotations

import pytest

from edgelite.interpreter import threads
from tests.interpreter.test_threads import MODEL, _ready, _seen, blas_two_threads  # noqa: F401


class FakeMachine:
    """Two cores; `others` of them busy with other processes, `ours` with this one."""

    def __init__(self, monkeypatch, others: float, ours: float = 1.0, cores: int = 2):
        self.t, self.cpu, self.busy, self.total = 100.0, 5.0, 1000, 4000
        self.others, self.ours, self.cores = others, ours, cores
        monkeypatch.setattr(threads, "_cpu_ticks", lambda: (self.busy, self.total))
        monkeypatch.setattr(threads, "_cores", lambda: self.cores)
        monkeypatch.setattr(threads.time, "monotonic", lambda: self.t)
        monkeypatch.setattr(threads.time, "process_time", lambda: self.cpu)
        monkeypatch.setattr(threads.os, "getloadavg", lambda: (others + ours, 0.0, 0.0))
        monkeypatch.setattr(threads, "_sampler", threads._Sampler())
        monkeypatch.setattr(threads, "ADAPTIVE", True)

    def advance(self, seconds: float) -> None:
        ticks = 100 * seconds   # USER_HZ
        self.t += seconds
        self.cpu += self.ours * seconds
        self.busy += int((self.others + self.ours) * ticks)
        self.total += int(self.cores * ticks)


@pytest.mark.parametrize("others, expected", [(0.0, 2), (0.25, 2), (0.5, 1), (1.0, 1),
                                              (1.8, 1)])
def test_two_threads_only_where_a_second_core_is_free(monkeypatch, others, expected):
    machine = FakeMachine(monkeypatch, others)
    threads.effective(2)             # the first sample
    machine.advance(1.0)
    assert threads.effective(2) == expected
    assert threads.effective(1) == 1


def test_this_process_own_threads_do_not_count_as_load(monkeypatch):
    """Our own two busy threads (OpenBLAS's, spinning) are not another process's load."""
    machine = FakeMachine(monkeypatch, others=0.0, ours=2.0)
    threads.effective(2)
    machine.advance(1.0)
    assert threads.cores_free() == pytest.approx(2.0)
    assert threads.effective(2) == 2


def test_the_sample_is_reused_for_half_a_second(monkeypatch):
    machine = FakeMachine(monkeypatch, others=0.0)
    threads.effective(2)
    machine.advance(1.0)
    assert threads.effective(2) == 2
    machine.others = 2.0             # the machine fills up ...
    machine.advance(0.2)
    assert threads.effective(2) == 2  # ... seen only at the next sample
    machine.advance(0.4)
    assert threads.effective(2) == 1


def test_fixed_hands_blas_what_was_asked(monkeypatch):
    machine = FakeMachine(monkeypatch, others=2.0)
    machine.advance(1.0)
    monkeypatch.setattr(threads, "ADAPTIVE", False)
    assert threads.effective(2) == 2


def test_an_invoke_on_a_busy_machine_runs_blas_on_one_thread(monkeypatch, blas_two_threads):  # noqa: F811
    """Through the interpreter: num_threads=2 on a machine whose cores are taken runs its
    GEMMs at one OpenBLAS thread, and at two once a core is free."""
    machine = FakeMachine(monkeypatch, others=1.5)
    it = _ready(2)
    machine.advance(1.0)
    _seen.counts = []
    it.invoke()
    machine.others = 0.0
    machine.advance(1.0)
    it.invoke()
    assert _seen.counts == [1, 2]
    assert threads.blas_threads() == 2
