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
import sys
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


# -- the Raspberry Pi samples, headless on files ---------------------------------------------------
# Classification (float and int8 digits, 40 images) and OCR (the 160x320 detector, two lines) as
# their command lines print them (--json, no Pillow: PNGs read by edgelite.tasks.image), on the
# same wheel here and under qemu: ~20 s of CPU an arch under qemu.
OCR_LINES = ["Raspberry Pi 5", "OCR 2026"]


@pytest.fixture(scope="module")
def sample_inputs(models_dir, tmp_path_factory) -> Path:
    from edgelite.tasks.image import write_png
    from tests.samples.rpi import render_text
    folder = tmp_path_factory.mktemp("sample-inputs")
    data = np.load(models_dir / "digits.npz")
    (folder / "digits").mkdir()
    for k in range(40):
        write_png(folder / "digits" / f"{k:03d}_{data['y_test'][k]}.png",
                  np.round(data["x_test"][k, 0] * 255).astype(np.uint8))
    render_text(folder / "text.png", OCR_LINES, 28, 320)
    return folder


# The armhf OCR run fails in the interpreter: RESIZE_NEAREST_NEIGHBOR's np.take gets int64
# indices, which 32-bit numpy cannot cast to its int32 intp (interpreter/kernels/resize.py).
KNOWN_FAILURES: dict = {}   # (arch, sample) -> reason: a strict xfail


def _sample_runs(sample: str, models_dir: Path, sample_models: Path, inputs: Path) -> dict:
    """{run name: the sample's command line (script first)}."""
    if sample == "classify":
        return {m: ("classify.py", "--model", models_dir / f"{m}.tflite",
                    "--input", inputs / "digits", "--top-k", "3")
                for m in ("digits_cnn", "digits_cnn_int8")}
    return {"ocr": ("ocr.py", "--model", sample_models / "ppocr_det_small.tflite",
                    "--rec-model", sample_models / "ppocr_rec.tflite",
                    "--keys", sample_models / "ppocr_keys.txt", "--input", inputs / "text.png")}


def _run_samples(tmp: Path, runs: dict, pythonpath: list, python=(sys.executable, "-S")) -> dict:
    """Each run's JSON records, timings dropped: {run name: records}."""
    from tests.samples.rpi import SAMPLES
    found = {}
    for name, (script, *args) in runs.items():
        result = run_python(SAMPLES / script, tmp, pythonpath, python=python,
                            args=[*args, "--json", "--no-window", "--output-dir", tmp / "out"])
        assert result.returncode == 0, f"{name}: {result.stderr[-4000:]}"
        found[name] = [{k: v for k, v in json.loads(line).items() if k not in ("ms", "fps")}
                       for line in result.stdout.splitlines() if line.startswith("{")]
    return found


@pytest.mark.parametrize("sample", ["classify", "ocr"])
def test_samples_under_qemu_match_x86(arch_root, arm_site, x86_site, models_dir, sample_models,
                                      sample_inputs, sample, tmp_path, request):
    arch, root = arch_root
    if (arch, sample) in KNOWN_FAILURES:
        request.applymarker(pytest.mark.xfail(reason=KNOWN_FAILURES[arch, sample], strict=True))
    runs = _sample_runs(sample, models_dir, sample_models, sample_inputs)
    start = time.perf_counter()
    ours = _run_samples(tmp_path, runs, arm_site, python=qemu_python(arch, root))
    print(f"{arch}: {sample} under qemu in {time.perf_counter() - start:.1f} s")
    theirs = _run_samples(tmp_path, runs, x86_site)
    for name in ours:
        assert len(ours[name]) == len(theirs[name])
        for a, b in zip(ours[name], theirs[name]):
            _assert_close(a, b, f"{name} {a.get('frame')}")
    if sample == "ocr":
        assert [r["text"] for r in ours["ocr"]] == [OCR_LINES]
        return
    int8 = [(r["frame"], r["raw"]) for r in ours["digits_cnn_int8"]]
    assert int8 == [(r["frame"], r["raw"]) for r in theirs["digits_cnn_int8"]]   # bit for bit
    labels = [r["top"][0][0] for r in ours["digits_cnn"]]
    truth = [r["frame"].split("_")[1] for r in ours["digits_cnn"]]
    assert np.mean(np.array(labels) == np.array(truth)) >= 0.95


def _assert_close(a, b, where: str, scale: float = 0.0) -> None:
    """Equal structure and strings; floats within RTOL of the largest |value| of their list (or
    of their own size; at least 1e-6 absolute)."""
    if isinstance(a, float) or isinstance(b, float):
        assert abs(a - b) <= RTOL * max(abs(b), scale, 0.1), f"{where}: {a} vs {b}"
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        numbers = [abs(y) for y in b if isinstance(y, float)]
        for x, y in zip(a, b):
            _assert_close(x, y, where, max(numbers, default=0.0))
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _assert_close(a[k], b[k], f"{where}.{k}")
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"
