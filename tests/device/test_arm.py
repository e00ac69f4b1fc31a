"""edgelite on a Raspberry Pi's instruction set, under qemu-user: the built wheel, installed with
--no-deps into a Debian bookworm root for arm64 (PyPI's aarch64 numpy; -cpu cortex-a72, a Pi 4)
and for armhf (Debian's numpy 1.24, as 32-bit Raspberry Pi OS has; -cpu cortex-a7), runs the
shared models and gives what the same wheel gives on this machine: float outputs within 1e-5 of
the largest |output|, integer outputs equal.

The roots come from ../shared/tools/arm_sysroot.sh (debootstrap, as root: ~1 min each the first
time) and live in $EDGELITE_ARM_ROOTS/<arch> (default ~/.cache/edgelite-arm/<arch>). Where qemu
or a root is missing the test skips, saying which; EDGELITE_ARM_BUILD=1 builds what is missing,
and under EDGELITE_REQUIRE_ARM=1 (as CI sets) a missing one fails.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO_ROOT
from tests.device import run_models
from tests.wheel import built_wheel, install, run_python, runtime_dependencies

# arch -> (qemu-user binary, CPU)
ARCHES = {"arm64": ("qemu-aarch64-static", "cortex-a72"), "armhf": ("qemu-arm-static", "cortex-a7")}
SYSROOT_SCRIPT = REPO_ROOT.parent / "shared" / "tools" / "arm_sysroot.sh"
# Float (one of them with float16 weights), int8 under both resolvers, int8 with resource
# variables: 9-25 s an arch under qemu (2 busy cores).
SPECS = ("digits_cnn", "mobilenet_v2", "mp_face_detection", "mp_hand_landmark",
         "digits_cnn_int8", "digits_cnn_int8:ref", "mobilenet_v2_int8", "mobilenet_v2_int8:ref",
         "mwk_okay_nabu:ref")
RTOL = 1e-5
# The command line with the runtime install alone (argparse, no typer), on int8 models: its JSON
# (but the latency) is the same on every arch.
CLI = (("run", "digits_cnn_int8.tflite", "--data", "refs/digits_cnn_int8_tfl.npz", "--reference",
        "--repeat", "1"),
       ("inspect", "mobilenet_v2_int8.tflite"))


def roots_dir() -> Path:
    return Path(os.environ.get("EDGELITE_ARM_ROOTS") or Path.home() / ".cache" / "edgelite-arm")


def _missing(arch: str, root: Path) -> str | None:
    """Why `arch` cannot run here, or None."""
    qemu = ARCHES[arch][0]
    if shutil.which(qemu) is None:
        return f"{qemu} not found (apt-get install qemu-user-static)"
    if not ((root / "usr" / "bin" / "python3.11").exists()
            and (root / "opt" / "py" / "flatbuffers").exists()):
        return f"no {arch} root at {root} (ARCH={arch} bash {SYSROOT_SCRIPT} {root})"
    return None


def sysroot(arch: str) -> Path:
    """The arch's Debian root, built first under EDGELITE_ARM_BUILD=1; else a skip (a failure
    under EDGELITE_REQUIRE_ARM=1) naming what is missing."""
    root = roots_dir() / arch
    if _missing(arch, root) and os.environ.get("EDGELITE_ARM_BUILD") == "1":
        if not SYSROOT_SCRIPT.exists():
            pytest.fail(f"EDGELITE_ARM_BUILD=1 but {SYSROOT_SCRIPT} is missing")
        result = subprocess.run(["bash", str(SYSROOT_SCRIPT), str(root)], env={**os.environ,
                                "ARCH": arch}, capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, result.stderr[-4000:]
    reason = _missing(arch, root)
    if reason:
        if os.environ.get("EDGELITE_REQUIRE_ARM") == "1":
            pytest.fail(reason + " (EDGELITE_REQUIRE_ARM=1)")
        pytest.skip(reason + "; or set EDGELITE_ARM_BUILD=1")
    return root


def qemu_python(arch: str, root: Path) -> tuple:
    """The command that runs the root's Python 3.11 under qemu (-s: no user site-packages)."""
    qemu, cpu = ARCHES[arch]
    return (qemu, "-cpu", cpu, "-L", root, root / "usr" / "bin" / "python3.11", "-s")


def _run_models(tmp: Path, models_dir: Path, pythonpath: list, **kwargs) -> np.lib.npyio.NpzFile:
    out = tmp / "outputs.npz"
    result = run_python(Path(run_models.__file__), tmp, pythonpath,
                        args=[models_dir, out, *SPECS], **kwargs)
    assert result.returncode == 0, result.stdout + result.stderr[-4000:]
    return np.load(out)


@pytest.fixture(scope="module", params=sorted(ARCHES))
def arch_root(request) -> tuple:
    """(arch, its root): before the other fixtures, so that a skip costs no wheel build."""
    return request.param, sysroot(request.param)


def _run_cli(tmp: Path, models_dir: Path, pythonpath: list, **kwargs) -> list:
    """`python -m edgelite.cli COMMAND MODEL ... --json` for each of CLI: the documents."""
    documents = []
    for command, model, *rest in CLI:
        args = [command, models_dir / model,
                *(models_dir / a if a.startswith("refs/") else a for a in rest), "--json"]
        result = run_python(["-m", "edgelite.cli"], tmp, pythonpath, args=args, **kwargs)
        assert result.returncode == 0, f"{command} {model}: {result.stderr[-4000:]}"
        document = json.loads(result.stdout)
        document.pop("latency_ms", None)
        documents.append(document)
    return documents


@pytest.fixture(scope="module")
def x86_site(tmp_path_factory) -> list:
    """The same wheel on this machine, beside only numpy and flatbuffers: its PYTHONPATH."""
    tmp = tmp_path_factory.mktemp("x86")
    return [install(built_wheel(tmp_path_factory), tmp / "site"),
            runtime_dependencies(tmp / "deps")]


@pytest.fixture(scope="module")
def x86_outputs(x86_site, models_dir, tmp_path_factory):
    return _run_models(tmp_path_factory.mktemp("x86-models"), models_dir, x86_site)


@pytest.fixture(scope="module")
def arm_site(arch_root, tmp_path_factory) -> list:
    """The wheel installed for the arch (--no-deps), beside its root's numpy and flatbuffers."""
    arch, root = arch_root
    site = install(built_wheel(tmp_path_factory), tmp_path_factory.mktemp(arch) / "site")
    return [site, root / "opt" / "py"]


def test_models_under_qemu_match_x86(arch_root, arm_site, x86_outputs, models_dir, tmp_path):
    arch, root = arch_root
    start = time.perf_counter()
    ours = _run_models(tmp_path, models_dir, arm_site, python=qemu_python(arch, root))
    print(f"{arch}: {len(SPECS)} models under qemu in {time.perf_counter() - start:.1f} s")
    for spec in SPECS:
        run_models.assert_same(run_models.outputs(ours, spec),
                               run_models.outputs(x86_outputs, spec), RTOL, f"x86 ({spec})")


def test_cli_under_qemu_matches_x86(arch_root, arm_site, x86_site, models_dir, tmp_path):
    arch, root = arch_root
    start = time.perf_counter()
    ours = _run_cli(tmp_path, models_dir, arm_site, python=qemu_python(arch, root))
    print(f"{arch}: {len(CLI)} commands under qemu in {time.perf_counter() - start:.1f} s")
    assert ours == _run_cli(tmp_path, models_dir, x86_site)
    assert [e["max_abs_diff"] for e in ours[0]["expected"]] == [0.0]   # = refs/, bit for bit
