"""Running the command line in-process, under either front-end (typer or argparse)."""
from __future__ import annotations

import contextlib
import io
from typing import NamedTuple

from edgelite.cli import convert_main, main


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
