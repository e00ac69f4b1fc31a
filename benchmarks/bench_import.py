"""Start-up: `import edgelite.interpreter` in fresh processes, without cached bytecode.

    python benchmarks/bench_import.py [--runs 7] [--module edgelite.interpreter] [--top 15]

Each run is a new `python -c "import MODULE"` with PYTHONDONTWRITEBYTECODE=1: the standard
library and numpy read their installed `.pyc` files, edgelite's own modules (an editable install
whose folders hold no `__pycache__`) are compiled from source at every start, which is what a
first start or a read-only install pays. The script says so if edgelite's folders hold bytecode.

Printed: the median (min-max) wall and CPU time of the import statement (measured inside the
child) and of the whole process (wall from the parent, CPU = the child's user + system from
`os.times`), beside the same for `import numpy` (the floor), then the modules with the largest
own import time (`-X importtime`, median over the runs).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path
import time

_TIMED = ("import time as _t; _s = _t.perf_counter(); _c = _t.process_time(); import {m}; "
          "print(_t.perf_counter() - _s, _t.process_time() - _c)")


def _env() -> dict:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPYCACHEPREFIX", None)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    return env


def _run(module: str, importtime: bool = False):
    """(import wall, import CPU, process wall, {module: own µs})"""
    args = [sys.executable] + (["-X", "importtime"] if importtime else [])
    args += ["-c", _TIMED.format(m=module)]
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"python -c 'import {module}' failed:\n{err.decode()[-2000:]}")
    imp_wall, imp_cpu = (float(x) for x in out.split())
    own = {}
    for line in err.decode().splitlines():
        if line.startswith("import time:") and "|" in line and "self [us]" not in line:
            self_us, _, name = line[len("import time:"):].split("|")
            own[name.strip()] = int(self_us)
    return imp_wall, imp_cpu, wall, own


def _children_cpu() -> float:
    r = os.times()
    return r.children_user + r.children_system


def measure(module: str, runs: int, importtime: bool = False):
    rows, owns = [], []
    for _ in range(runs):
        before = _children_cpu()
        imp_wall, imp_cpu, wall, own = _run(module, importtime)
        rows.append((imp_wall, imp_cpu, wall, _children_cpu() - before))
        owns.append(own)
    return rows, owns


def _cell(values) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--module", default="edgelite.interpreter")
    p.add_argument("--top", type=int, default=15, help="modules to list by own import time")
    a = p.parse_args(argv)
    root = Path(__file__).resolve().parent.parent
    cached = sorted(str(p.relative_to(root)) for p in root.glob("[a-z]*/**/__pycache__")
                    if not p.is_relative_to(root / "build"))
    if cached:
        print(f"note: bytecode caches in the source tree are read: {', '.join(cached[:5])}")
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs, {a.runs} fresh "
          "processes each, no bytecode cache; seconds, median (min-max)\n")
    print("| import | import wall | import CPU | process wall | process CPU |")
    print("|---|---:|---:|---:|---:|")
    results = {}
    for module in ("numpy", a.module):
        rows, owns = measure(module, a.runs, importtime=module == a.module)
        results[module] = owns
        cols = list(zip(*rows))
        print(f"| {module} | " + " | ".join(_cell(c) for c in cols) + " |")
    owns = results[a.module]
    names = set().union(*owns)
    med = {n: statistics.median(o.get(n, 0) for o in owns) for n in names}
    print(f"\nlargest own import times (-X importtime, median µs) under {a.module}:\n")
    for name, us in sorted(med.items(), key=lambda kv: -kv[1])[:a.top]:
        print(f"  {us / 1000:7.1f} ms  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
