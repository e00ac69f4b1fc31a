"""edgelite's command line: `edgelite COMMAND ...` and `tflite-convert`.

One module per command (`run`, `inspect`, `convert`, `compare`, `train`), each a plain function
whose parameters are declared with `params.Arg` / `params.Opt`; `frontends.py` serves them through
typer where it is installed (the `convert` extra) and through argparse where it is not, so the
runtime install alone (numpy and flatbuffers) runs `edgelite run` and `edgelite inspect` on a
device. Importing this package is cheap: commands import numpy and edgelite's parts in their
bodies.

Arrays from .npz files (`run --data`, `compare --data`, `tflite-convert --inputs` and
`--calibration-data`) may be in either layout, the model's (NHWC) or ONNX's (NCHW): an array that
fits only the other layout is transposed, and the command says so (`edgelite.interpreter.feeds`).
"""
from __future__ import annotations

from . import frontends
from .analyze import analyze_command
from .benchmark import benchmark_command
from .compare import compare_command
from .convert import convert_command
from .inspect import inspect_command
from .run import run_command
from .train import train_command
from .visualize import visualize_command

COMMANDS = {"run": run_command, "inspect": inspect_command, "convert": convert_command,
            "compare": compare_command, "train": train_command, "benchmark": benchmark_command,
            "analyze": analyze_command, "visualize": visualize_command}
DOC = "edgelite: a .tflite inference runtime and ONNX converter, in Python on numpy."


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("edgelite")
    except PackageNotFoundError:
        return "(not installed)"


def main(argv: list | None = None, frontend: str | None = None) -> int:
    """`edgelite`: returns the exit status."""
    return frontends.run("edgelite", DOC, COMMANDS, version(), argv, frontend=frontend)


def convert_main(argv: list | None = None, frontend: str | None = None) -> int:
    """`tflite-convert` (the same command as `edgelite convert`)."""
    return frontends.run("tflite-convert", convert_command.__doc__, {"convert": convert_command},
                         version(), argv, single=True, frontend=frontend)

