"""An invoke at one thread whose BLAS calls all run on one thread anyway leaves OpenBLAS's count
alone (issue 17, goal 5): in a default process (OpenBLAS at a thread per core, as a user's
script has it) the digits CNN's invoke made 2 setter calls (1, then back) and now makes 0.

Checked without timing: the setter calls an invoke makes, counted; and that the plans
`threads.serial` calls serial really wake no OpenBLAS worker at OpenBLAS's count 2 (a worker
that got a job has run: its CPU time or context switches moved; one asleep has not), with the
bound itself checked against the bundled library: the largest m*n*k it calls serial wakes none,
4x that does. In subprocesses, so that the workers are OpenBLAS's alone."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from edgelite.interpreter import threads
from tests.conftest import REPO_ROOT

KERNELS = REPO_ROOT / "interpreter" / "kernels"
BLAS_CALL = re.compile(r"np\.(matmul|dot|einsum|tensordot|inner|vdot|linalg)\b|\bmatmul\b|"
                       r"\s@\s|\.dot\(")

PROBE = r'''
import json, os, sys, threading, time
import numpy as np
from edgelite.interpreter import Interpreter, threads

main = threading.get_native_id()
workers = [int(t) for t in os.listdir("/proc/self/task") if int(t) != main]


def activity():
    total = 0
    for tid in workers:
        with open(f"/proc/self/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])   # utime, stime
        with open(f"/proc/self/task/{tid}/status") as f:
            total += sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
    return total


def settled():   # the workers spin a while after their last job, then sleep
    last = activity()
    for _ in range(40):
        time.sleep(0.25)
        now = activity()
        if now == last:
            return now
        last = now
    return last


def woke(run):
    before = settled()
    run()
    return settled() != before


api = threads._find()
calls = []
threads._api = (lambda n: (calls.append(n), api[0](n))[1], api[1])
out = {"count": api[1](), "workers": len(workers), "models": {}}
for path in sys.argv[1:]:
    it = Interpreter(model_path=path)
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
    it.invoke()
    del calls[:]
    woken = woke(lambda: [it.invoke() for _ in range(20)])
    out["models"][os.path.basename(path)] = {
        "serial": threads.serial(it._runtime), "setter_calls": len(calls) / 20,
        "woke": woken, "count_after": api[1]()}
n = round(threads.SERIAL_F32 ** (1 / 3))
a = np.ones((n, n), np.float32)
out["gemm_at_bound_woke"] = woke(lambda: [a @ a for _ in range(50)])
b = np.ones((4 * n, n), np.float32)
out["gemm_4x_woke"] = woke(lambda: [b @ a for _ in range(50)])
print(json.dumps(out))
'''


def _probe(paths) -> dict:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2")   # a default process on 2 cores
    env.pop("EDGELITE_BLAS_THREADS", None)
    run = subprocess.run([sys.executable, "-c", PROBE, *map(str, paths)], env=env,
                         capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def probe(models_dir):
    if not threads._find():
        pytest.skip("numpy here has no OpenBLAS whose thread count edgelite sets")
    if not Path("/proc/self/task").is_dir():
        pytest.skip("no /proc/self/task to see OpenBLAS's workers")
    paths = [models_dir / "digits_cnn.tflite", models_dir / "digits_cnn_int8.tflite",
             models_dir / "mwk_okay_nabu.tflite", models_dir / "mobilenet_v2.tflite"]
    facts = _probe(paths)
    if facts["count"] < 2 or not facts["workers"]:
        pytest.skip("OpenBLAS here runs at most one thread")
    return facts


def test_serial_models_leave_the_count_alone(probe):
    checked = threads._version() >= (0, 3, 27)   # older (numpy 1.24's 0.3.21): not serial
    for name in ("digits_cnn.tflite", "digits_cnn_int8.tflite", "mwk_okay_nabu.tflite"):
        facts = probe["models"][name]
        assert facts["serial"] == checked, name
        # was 2 (1 thread, then the process's 2); an unchecked OpenBLAS keeps the limit
        assert facts["setter_calls"] == (0 if checked else 2), facts
        assert facts["count_after"] == 2, facts


def test_serial_models_wake_no_worker(probe):
    """The oracle for `serial`: at OpenBLAS's count 2, no BLAS call of theirs threads."""
    assert probe["gemm_4x_woke"], "the probe sees no threaded GEMM: it proves nothing"
    assert not probe["gemm_at_bound_woke"], "a GEMM at SERIAL_F32 threads in this OpenBLAS"
    for name in ("digits_cnn.tflite", "digits_cnn_int8.tflite", "mwk_okay_nabu.tflite"):
        assert not probe["models"][name]["woke"], name


def test_threaded_model_keeps_the_limit(probe):
    facts = probe["models"]["mobilenet_v2.tflite"]
    assert not facts["serial"]
    assert facts["setter_calls"] == 2 and facts["count_after"] == 2, facts


def _imports(src: str) -> set:
    """The sibling modules a kernel module imports: `from .x import ...`, `from . import x, y`."""
    found = set(re.findall(r"from \.(\w+) import", src))
    for names in re.findall(r"from \. import ([\w, ]+)", src):
        found.update(n.strip() for n in names.split(","))
    return found


def test_blas_modules_are_listed():
    """Every kernel module that calls BLAS, or imports one that does, is in BLAS_MODULES (or
    BLAS_VIA, naming the ops that reach BLAS): an op whose kernels are elsewhere counts as making
    no BLAS call."""
    sources = {p.stem: p.read_text() for p in KERNELS.glob("*.py")}
    calling = {name for name, src in sources.items()
               if BLAS_CALL.search("\n".join(line.split("#")[0] for line in src.splitlines()))}
    calling.discard("common")   # helpers (raw(np.dot)'s wrapper, matmul_shape): no kernel
    grown = True
    while grown:
        grown = False
        for name, src in sources.items():
            if name not in calling and _imports(src) & calling:
                calling.add(name)
                grown = True
    listed = threads.BLAS_MODULES | set(threads.BLAS_VIA)
    assert calling <= listed, sorted(calling - listed)


def test_serial_bounds():
    """The GEMM-size table and the bound for other ops, on shapes."""
    class Op:
        def __init__(self, ins, outs):
            self.inputs, self.outputs = ins, outs
    shapes = [(1, 8, 8, 3), (16, 3, 3, 3), (16,), (1, 6, 6, 16)]
    assert threads.GEMM_SIZE["CONV_2D"](shapes, Op([0, 1, 2], [3])) == 36 * 16 * 27
    shapes = [(4, 100), (10, 100), (10,), (4, 10)]
    assert threads.GEMM_SIZE["FULLY_CONNECTED"](shapes, Op([0, 1, 2], [3])) == 4 * 10 * 100
    assert threads.op_bound([10, 10]) == 800
