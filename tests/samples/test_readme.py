"""The README's commands, as written: the main job's convert and run, and the train command,
each run on the sample files the README's first command makes (in a scratch folder here)."""
from __future__ import annotations

import re
import shlex

from tests.cli.helpers import invoke
from tests.conftest import REPO_ROOT


def readme_commands(program: str) -> list:
    """Every `program ...` command in the README's sh blocks, split into words."""
    text = (REPO_ROOT / "README.md").read_text()
    found = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for part in re.split(r"&&|\n", block):
            words = shlex.split(part)
            if words and words[0] == program:
                found.append(words[1:])
    return found


def _run(program: str, args: list, sample_dir) -> str:
    args = [a.replace("samples/", f"{sample_dir}/") for a in args]
    result = invoke(args, prog="edgelite" if program == "edgelite" else "tflite-convert")
    assert result.exit_code == 0, f"{program} {' '.join(args)}: {result.output}"
    return result.stdout


def test_readme_commands_run_as_written(sample_dir):
    converts, runs = readme_commands("tflite-convert"), readme_commands("edgelite")
    assert converts and any(a[0] == "run" for a in runs) and any(a[0] == "train" for a in runs)
    for args in converts:
        assert "transposes left: 0" in _run("tflite-convert", args, sample_dir)
    for args in runs:
        out = _run("edgelite", args, sample_dir)
        if args[0] == "run":
            accuracy = float(re.search(r"accuracy: ([0-9.]+)", out)[1])
            assert accuracy > 0.9, out
        if args[0] == "train":
            final = re.findall(r"accuracy ([0-9.]+)%", out)
            assert final and float(final[-1]) > 90, out
            assert re.search(r"wrote \S+default_tuned.tflite \(\d[\d,]* bytes\)", out), out
