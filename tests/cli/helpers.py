"""Running the command line in-process, under either front-end (typer or argparse)."""
from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import textwrap
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


RUNTIME_ONLY = ("onnx", "onnxruntime", "typer", "click", "rich", "pydantic", "pyopencl",
                "ai_edge_litert", "tensorflow")   # what the runtime install leaves out


def run_blocked(prog: str, args, blocked=RUNTIME_ONLY) -> subprocess.CompletedProcess:
    """`prog ARGS` in a fresh interpreter where the `blocked` packages cannot be imported."""
    entry = "main" if prog == "edgelite" else "convert_main"
    code = textwrap.dedent(f"""
        import sys

        class Blocker:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {tuple(blocked)!r}:
                    raise ImportError(f"{{name}} is blocked in this test")

        sys.meta_path.insert(0, Blocker())
        sys.argv = [{prog!r}, *{[str(a) for a in args]!r}]
        from edgelite.cli import {entry}
        sys.exit({entry}())
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
