"""Running the command line in-process, under either front-end (typer or argparse)."""
from __future__ import annotations

import contextlib
import io
import subprocess
from typing import NamedTuple

from edgelite.cli import convert_main, main
from tests.blocked import HEAVY
from tests.blocked import run_blocked as blocked_run


class Result(NamedTuple):
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def invoke(args, prog: str = "edgelite", frontend: str | None = None) -> Result:
    """`edgelite ARGS...` (or `tflite-convert ARGS...` with prog="tflite-convert")."""
    out, err = io.StringIO(), io.StringIO()
    entry = main if prog == "edgelite" else convert_main
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = entry([str(a) for a in args], frontend=frontend)
    return Result(code, out.getvalue(), err.getvalue())


def run_blocked(prog: str, args, blocked=HEAVY) -> subprocess.CompletedProcess:
    """`prog ARGS` in a fresh interpreter where the `blocked` packages cannot be imported."""
    entry = "main" if prog == "edgelite" else "convert_main"
    return blocked_run(f"""
        sys.argv = [{prog!r}, *{[str(a) for a in args]!r}]
        from edgelite.cli import {entry}
        sys.exit({entry}())
    """, blocked, timeout=300)
