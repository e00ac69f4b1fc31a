"""Helper threads that share a large kernel's work with the thread running the invoke (issue 17,
goal 5: 2 threads faster than 1 where OpenBLAS is not the work).

numpy releases the GIL inside ufuncs, einsum and BLAS, so two threads each calling numpy on
their own rows of an output run on two cores. A kernel at num_threads > 1 cuts its work in
parts and calls `run_parts(fn, parts, helpers)`: the calling thread and up to `helpers` pool
threads take the next part not yet taken until none is left. The caller never waits for a
helper that has not started (on a busy machine it may not run for a scheduler period): it takes
the parts itself, and waits only for parts a helper is inside. So a late or absent helper costs
nothing but its share; a helper that is busy with another interpreter's parts leaves this one
to its caller. `threads.effective` (the cores other processes leave idle) says how many helpers
a kernel asks for. The pool starts lazily (daemon threads, one per extra core asked for) and is
forgotten in a forked child (its threads are not there).
"""
from __future__ import annotations

import itertools
import os
import queue
import threading

_tasks: queue.SimpleQueue = queue.SimpleQueue()
_started = 0
_start_lock = threading.Lock()
posted = 0   # tasks offered to helpers so far (test_threads_workers counts them)


class _Task:
    __slots__ = ("fn", "parts", "next", "lock", "closed", "active", "done", "error")

    def __init__(self, fn, parts: int):
        self.fn, self.parts = fn, parts
        self.next = itertools.count()   # next(): atomic under the GIL
        self.lock = threading.Lock()
        self.closed = False             # the caller has taken its last part
        self.active = 0                 # helpers inside a part
        self.done = threading.Lock()    # released by the last helper out after closed
        self.done.acquire()
        self.error = None

    def work(self) -> None:
        fn, parts, take = self.fn, self.parts, self.next
        i = next(take)
        while i < parts:
            fn(i)
            i = next(take)


def _helper() -> None:
    while True:
        task = _tasks.get()
        with task.lock:
            if task.closed:   # the caller took every part
                continue
            task.active += 1
        try:
            task.work()
        except BaseException as e:   # the caller raises it
            task.error = e
        finally:
            with task.lock:
                task.active -= 1
                if task.closed and not task.active:
                    task.done.release()


def _ensure(helpers: int) -> None:
    global _started
    if _started >= helpers:
        return
    with _start_lock:
        while _started < helpers:
            threading.Thread(target=_helper, name=f"edgelite-worker-{_started}",
                             daemon=True).start()
            _started += 1


def _closed_task() -> _Task:
    task = _Task(None, 0)
    task.closed = True
    return task


def _forget_in_child() -> None:
    global _tasks, _started, _start_lock, _WAKE
    _tasks, _started, _start_lock = queue.SimpleQueue(), 0, threading.Lock()
    _WAKE = _closed_task()   # its lock may have been held by a parent's helper


_WAKE = _closed_task()   # what wake() posts: a task with nothing left to take
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def helpers_started() -> int:
    return _started


def wake(helpers: int) -> None:
    """Wakes up to `helpers` helpers ahead of a run_parts (they find nothing and sleep again):
    a helper woken a moment ago starts ~40 instead of ~110 µs after the task is posted (this
    VM, load ~2), so a kernel calls this before the serial work that precedes its parts."""
    if helpers > 0 and _started:
        for _ in range(min(helpers, _started)):
            _tasks.put(_WAKE)


def run_parts(fn, parts: int, helpers: int) -> None:
    """Calls fn(i) once for every i in range(parts), on this thread and up to `helpers` pool
    threads (0: all here, in order); returns when every call has returned, raising the first
    error one raised. The parts must write disjoint memory."""
    helpers = min(helpers, parts - 1)
    if helpers < 1:
        for i in range(parts):
            fn(i)
        return
    global posted
    _ensure(helpers)
    task = _Task(fn, parts)
    posted += 1
    for _ in range(helpers):
        _tasks.put(task)
    try:
        task.work()
    finally:
        with task.lock:
            task.closed = True
            wait = task.active > 0
        if wait:
            task.done.acquire()
    if task.error is not None:
        raise task.error
