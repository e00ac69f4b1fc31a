"""Does PoCL inline its built-in library into the delegate's kernels on other x86-64 CPUs?

    python benchmarks/pocl_cpu_check.py [--cpus EPYC-Milan,EPYC-Rome,Haswell] [--off]

Runs the probe kernel of tests/delegates/test_opencl_cpu_path.py (vload16, fma, fmax,
vstore16 through common.cl's KERNEL) under `qemu-x86_64 -cpu MODEL`, with empty PoCL caches,
and reports which of PoCL's library functions the compiled kernel still calls (none is right:
each left is a call per use in an inner loop). Under qemu, LLVM inside PoCL sees the emulated
CPU (its name and features pick the library), while /proc/cpuinfo is still the host's, so the
kernels' CPU is given as EDGELITE_POCL_CPU: the library CPU that PoCL's choice gives for the
model (pocl_cpu.cpu_name on the model's flags, below). `--off` also runs each model without the
target attribute (EDGELITE_POCL_CPU=off): the calls that the attribute removes.

Slow (qemu's TCG runs Python and LLVM): about 2-4 minutes a model. Needs qemu-user
(apt-get install qemu-user). Speed under emulation means nothing; the calls are the finding.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests" / "delegates"))

# qemu CPU model -> the library CPU PoCL 3.0 picks on it (its feature tests: pocl_cpu.cpu_name)
LIBRARY_CPU = {
    "EPYC-Milan": "haswell",       # Zen 3: LLVM 14 names it znver3, which lacks haswell's ERMSB
    "EPYC-Rome": "haswell",        # Zen 2: znver2 also lacks INVPCID
    "EPYC": "haswell",             # Zen 1
    "Haswell": "haswell",          # LLVM names it haswell: nothing to fix
    "Skylake-Client": "haswell",   # skylake has all of haswell's features
    "Skylake-Server": "skylake-avx512",
    "SandyBridge": "sandybridge",
    "Nehalem": "penryn",
}


def probe(cpu: str, kernel_cpu: str) -> str:
    from pocl_probe import PROBE, library_calls

    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, POCL_CACHE_DIR=str(Path(tmp) / "pocl"),
                   XDG_CACHE_HOME=str(Path(tmp) / "xdg"), EDGELITE_POCL_CPU=kernel_cpu,
                   POCL_MAX_PTHREAD_COUNT="1")
        r = subprocess.run(["qemu-x86_64", "-cpu", cpu, sys.executable, "-c", PROBE, "cpu"],
                           env=env, capture_output=True, text=True, cwd=REPO_ROOT)
        if r.returncode:
            lines = [x for x in r.stderr.splitlines() if "TCG doesn't support" not in x]
            return "failed: " + " / ".join(lines[-3:])
        left = sorted(library_calls(Path(tmp) / "pocl"))
        return ", ".join(left) if left else "none"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpus", default="EPYC-Milan,EPYC-Rome")
    ap.add_argument("--off", action="store_true")
    args = ap.parse_args(argv)
    if shutil.which("qemu-x86_64") is None:
        sys.exit("needs qemu-x86_64 (apt-get install qemu-user)")
    print("| qemu CPU | kernels' CPU | PoCL library calls left |\n|---|---|---|")
    for cpu in args.cpus.split(","):
        want = LIBRARY_CPU.get(cpu)
        if want is None:
            sys.exit(f"no library CPU known for {cpu!r}; known: {sorted(LIBRARY_CPU)}")
        for kernel_cpu in [want] + (["off"] if args.off else []):
            label = kernel_cpu if kernel_cpu != "off" else "the host's (no attribute)"
            print(f"| {cpu} | {label} | {probe(cpu, kernel_cpu)} |", flush=True)


if __name__ == "__main__":
    main()
