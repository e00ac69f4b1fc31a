"""The package as users get it: building its wheel (once a session), installing it with pip into
a folder, and running Python on that folder with nothing else (tests/schema/test_wheel.py,
tests/device/test_arm.py)."""
from __future__ import annotations

import functools
import importlib.util
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import REPO_ROOT

# What a source tree copy leaves out: VCS data, build output, caches, large local models.
IGNORE = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__",
                                ".pytest_cache", "*.tflite", "*.onnx", ".venv", "venv",
                                ".ci-venv*")
# What the runtime needs (pyproject's `dependencies`), as import names.
RUNTIME_DEPENDENCIES = ("numpy", "flatbuffers")


def _can_build_without_isolation() -> bool:
    """Building in this environment (fast, offline) needs setuptools >= 77: pyproject's SPDX
    `license` string (its bdist_wheel, built in since 70.1, comes with it)."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        major = version("setuptools").split(".")[0]
    except PackageNotFoundError:
        return False
    return major.isdigit() and int(major) >= 77


def pip(*args, build=False, python=None) -> None:
    """pip, offline. For a build, without isolation when this environment can build, else in
    pip's isolated build environment (which fetches setuptools from the index: slower)."""
    before = ["--python", str(python)] if python is not None else []
    flags = ["--disable-pip-version-check", "-q"]
    if not build or _can_build_without_isolation():
        flags += ["--no-index"] + (["--no-build-isolation"] if build else [])
    result = subprocess.run([sys.executable, "-m", "pip", *before, args[0], *flags, *args[1:]],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


@functools.cache
def _build_wheel(out: Path) -> Path:
    src = out / "src"
    shutil.copytree(REPO_ROOT, src, ignore=IGNORE)  # build from a copy: nothing written here
    pip("wheel", "--no-deps", "-w", str(out / "wheels"), str(src), build=True)
    (wheel,) = (out / "wheels").glob("edgelite-*.whl")
    return wheel


def built_wheel(tmp_path_factory) -> Path:
    """This checkout's wheel, built once a session (~15 s) for every test that asks."""
    return _build_wheel(tmp_path_factory.getbasetemp() / "edgelite-wheel")


def install(wheel: Path, target: Path) -> Path:
    """`pip install --no-deps --target`: the package's files alone."""
    pip("install", "--no-deps", "--target", str(target), str(wheel))
    return target


def runtime_dependencies(folder: Path) -> Path:
    """A folder holding only the runtime's dependencies, linked from this environment (numpy's
    bundled libraries, numpy.libs, beside it), for `python -S` with no other package."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in RUNTIME_DEPENDENCIES:
        package = Path(importlib.util.find_spec(name).origin).parent
        for path in (package, package.with_name(name + ".libs")):
            if path.exists() and not (folder / path.name).exists():
                (folder / path.name).symlink_to(path)
    return folder


def run_python(code: str | Path | list, cwd: Path, pythonpath: list, args=(),
               python=(sys.executable, "-S")) -> subprocess.CompletedProcess:
    """`python -S` (no site: no .pth files, so not the editable install, and no site-packages)
    with only `pythonpath`. `code` is a script's path, source to run with -c, or Python's own
    arguments (["-m", "edgelite.cli"]); `python` is the command that runs Python."""
    env = {"PYTHONPATH": ":".join(map(str, pythonpath)), "PATH": "/usr/bin:/bin",
           "OPENBLAS_NUM_THREADS": "1"}
    script = (list(code) if isinstance(code, list) else [str(code)] if isinstance(code, Path)
              else ["-c", textwrap.dedent(code)])
    return subprocess.run([*map(str, python), *script, *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


if __name__ == "__main__":  # python -m tests.wheel OUT: build the wheel into OUT, print its path
    print(_build_wheel(Path(sys.argv[1]).resolve()))
