"""The package as users get it: a built wheel installs and works on its own, and the editable
install keeps mapping `edgelite.<part>` onto the repository's folders."""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

from tests.conftest import REPO_ROOT

# What a source tree copy leaves out: VCS data, build output, caches, large local models.
IGNORE = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__",
                                ".pytest_cache", "*.tflite", "*.onnx", ".venv", "venv",
                                ".ci-venv")


def _can_build_without_isolation() -> bool:
    """Building in this environment (fast, offline) needs setuptools with a bdist_wheel: the
    `wheel` package, or setuptools >= 70.1 where it is built in."""
    return (importlib.util.find_spec("setuptools") is not None
            and (importlib.util.find_spec("wheel") is not None
                 or importlib.util.find_spec("setuptools.command.bdist_wheel") is not None))


def _pip(*args, build=False, python=None) -> None:
    """pip, offline. For a build, without isolation when this environment can build, else in
    pip's isolated build environment (which fetches setuptools from the index: slower)."""
    before = ["--python", str(python)] if python is not None else []
    flags = ["--disable-pip-version-check", "-q"]
    if not build or _can_build_without_isolation():
        flags += ["--no-index"] + (["--no-build-isolation"] if build else [])
    result = subprocess.run([sys.executable, "-m", "pip", *before, args[0], *flags, *args[1:]],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def _run(code: str, cwd: Path, pythonpath: list) -> subprocess.CompletedProcess:
    """`python -S` (no site: no .pth files, so not the editable install) with `pythonpath`."""
    env = {"PYTHONPATH": ":".join(map(str, pythonpath)), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-S", "-c", textwrap.dedent(code)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_wheel_installs_and_works_alone(models_dir, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(REPO_ROOT, src, ignore=IGNORE)  # build from a copy: nothing written here
    _pip("wheel", "--no-deps", "-w", str(tmp_path / "wheels"), str(src), build=True)
    (wheel,) = (tmp_path / "wheels").glob("edgelite-*.whl")
    target = tmp_path / "site"
    _pip("install", "--no-deps", "--target", str(target), str(wheel))
    assert not (target / "edgelite" / "__init__.py").exists(), "edgelite must be a namespace"
    for part in ("schema", "interpreter", "converter", "delegates"):
        assert (target / "edgelite" / part / "__init__.py").exists(), part
    assert (target / "edgelite" / "schema" / "tflite.fbs").exists()
    assert not (target / "schema").exists(), "a bare `schema` package landed in site-packages"

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = _run(f"""
        import sys
        assert not any(p.rstrip("/") == {str(REPO_ROOT)!r} for p in sys.path), sys.path
        import edgelite.schema as s
        assert s.__file__.startswith({str(target)!r}), s.__file__
        data = s.save(s.load({str(models_dir / "digits_cnn.tflite")!r}))
        assert s.load(data).subgraphs
        print("OK", s.__file__)
    """, cwd=elsewhere, pythonpath=[target, sysconfig.get_paths()["purelib"]])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("OK")


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
    _pip("install", "--no-deps", "-e", str(src), build=True, python=python)
    result = subprocess.run([str(python), "-c", "import edgelite.schema as s; print(s.__file__)"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()) == src / "schema" / "__init__.py"
