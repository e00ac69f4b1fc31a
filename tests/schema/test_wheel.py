"""The package as users get it: a built wheel installs and works on its own, and the editable
install keeps mapping `edgelite.<part>` onto the repository's folders."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from email.parser import Parser
from pathlib import Path

import numpy as np

from tests.conftest import REPO_ROOT
from tests.device import run_models
from tests.wheel import IGNORE, built_wheel, install, pip, run_python, runtime_dependencies

# Packages the runtime install must not see (the convert extra's, and what they pull in).
CONVERTER_ONLY = ("onnx", "typer", "ml_dtypes", "rich", "pydantic")


def _requirements(wheel: Path) -> dict:
    """The wheel's Requires-Dist as {extra or None: {name[extras], ...}}, names normalized."""
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(z.read(name).decode())
    found = {}
    for line in metadata.get_all("Requires-Dist", []):
        requirement, _, marker = line.partition(";")
        extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", marker)
        assert extra or not marker.strip(), f"a marker other than an extra: {line}"
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?", requirement)
        name = re.sub(r"[-_.]+", "-", m.group(1)).lower() + (m.group(2) or "").replace(" ", "")
        found.setdefault(extra and extra.group(1), set()).add(name)
    return found


def test_wheel_requires_only_numpy_and_flatbuffers(tmp_path_factory):
    """`pip install edgelite` on a device gets numpy and flatbuffers only; `edgelite[convert]`
    adds onnx and typer; `dev` has all of convert's; `opencl-cpu` (the README's OpenCL line)
    brings PoCL, a CPU OpenCL device."""
    requires = _requirements(built_wheel(tmp_path_factory))
    assert requires[None] == {"numpy", "flatbuffers"}, requires[None]
    assert {"onnx", "typer"} <= requires["convert"], requires["convert"]
    assert "edgelite[convert]" in requires["dev"] or requires["convert"] <= requires["dev"]
    assert requires["opencl"] == {"pyopencl"}
    assert requires["opencl-cpu"] == {"pyopencl[pocl]"}, requires.get("opencl-cpu")


def test_wheel_declares_the_opencl_delegate_by_entry_point(tmp_path_factory):
    """`load_delegate("opencl")` finds edgelite's delegate as any other: through the entry
    point group edgelite.delegates (the interpreter names no delegate package)."""
    with zipfile.ZipFile(built_wheel(tmp_path_factory)) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt")]
        text = z.read(name).decode()
    group = text.split("[edgelite.delegates]", 1)[1].split("[", 1)[0]
    assert "opencl = edgelite.delegates.opencl:OpenCLDelegate" in group, text


def test_wheel_installs_and_works_alone(models_dir, tmp_path, tmp_path_factory):
    """The wheel, installed with --no-deps beside numpy and flatbuffers and nothing else, loads
    and saves a model and runs the shared float and int8 models as their references say."""
    target = install(built_wheel(tmp_path_factory), tmp_path / "site")
    assert not (target / "edgelite" / "__init__.py").exists(), "edgelite must be a namespace"
    for part in ("schema", "interpreter", "converter", "delegates"):
        assert (target / "edgelite" / part / "__init__.py").exists(), part
    assert (target / "edgelite" / "schema" / "tflite.fbs").exists()
    assert not (target / "schema").exists(), "a bare `schema` package landed in site-packages"

    pythonpath = [target, runtime_dependencies(tmp_path / "deps")]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = run_python(f"""
        import importlib.util, sys
        assert not any(p.rstrip("/") == {str(REPO_ROOT)!r} for p in sys.path), sys.path
        present = [m for m in {CONVERTER_ONLY!r} if importlib.util.find_spec(m)]
        assert not present, f"visible to the runtime install: {{present}}"
        import edgelite.schema as s
        assert s.__file__.startswith({str(target)!r}), s.__file__
        data = s.save(s.load({str(models_dir / "digits_cnn.tflite")!r}))
        assert s.load(data).subgraphs
        print("OK", s.__file__)
    """, cwd=elsewhere, pythonpath=pythonpath)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("OK")

    specs = ("digits_cnn", "mobilenet_v2", "digits_cnn_int8:ref", "mobilenet_v2_int8:ref")
    out = tmp_path / "outputs.npz"
    result = run_python(Path(run_models.__file__), elsewhere, pythonpath,
                        args=[models_dir, out, *specs])
    assert result.returncode == 0, result.stderr
    saved = np.load(out)
    for spec in specs:
        name = spec.partition(":")[0]
        refs = np.load(models_dir / "refs" / f"{run_models.REFS[name]}.npz")
        run_models.assert_same(run_models.outputs(saved, spec), run_models.outputs(refs, ""),
                               1e-5, f"refs/{run_models.REFS[name]}.npz")

    # The command line's run and inspect need no typer (argparse serves them).
    for command in ("run", "inspect"):
        result = run_python(["-m", "edgelite.cli", command, models_dir / "digits_cnn.tflite"],
                            elsewhere, pythonpath)
        assert result.returncode == 0, f"edgelite {command}: {result.stderr}"


def test_editable_install_maps_the_repository(tmp_path):
    """The installed edgelite (pip install -e . in this environment) is this checkout."""
    result = subprocess.run(
        [sys.executable, "-c", "import edgelite.schema, edgelite.interpreter as i; "
                               "print(edgelite.schema.__file__); print(i.__file__)"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    schema_file, interpreter_file = result.stdout.split()
    assert Path(schema_file) == REPO_ROOT / "schema" / "__init__.py"
    assert Path(interpreter_file) == REPO_ROOT / "interpreter" / "__init__.py"


def test_editable_install_from_scratch(tmp_path):
    """`pip install -e .` works: a copy of the tree, into a throwaway venv that sees this
    environment's packages, maps `edgelite.schema` onto the copy's folder."""
    src = tmp_path / "src"
    shutil.copytree(REPO_ROOT, src, ignore=IGNORE)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; "
                              "print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # This environment's packages (setuptools, numpy, ...) as plain paths: its .pth files, the
    # editable install among them, are not processed.
    Path(purelib, "parent_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip("install", "--no-deps", "-e", str(src), build=True, python=python)
    result = subprocess.run([str(python), "-c", "import edgelite.schema as s; print(s.__file__)"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()) == src / "schema" / "__init__.py"
