"""The command line as a package: the same commands under typer and under argparse (the runtime
install, with no typer), --version, help on every option, choices as enums, and `run` /
`inspect` in a process where the converter's packages cannot be imported."""
from __future__ import annotations

import json
import subprocess

import pytest

from edgelite.cli import COMMANDS, choices, frontends, version
from edgelite.cli.params import Arg, Opt
from tests.cli.helpers import invoke, run_blocked

FRONTENDS = ["typer", "argparse"]


def test_every_parameter_has_help():
    for name, func in COMMANDS.items():
        for p in frontends.params(func):
            assert isinstance(p.spec, (Arg, Opt)), (name, p.name)
            assert len(p.spec.help) > 10, f"edgelite {name}: {p.name} has no help"


@pytest.mark.parametrize("frontend", FRONTENDS)
@pytest.mark.parametrize("prog", ["edgelite", "tflite-convert"])
def test_version(frontend, prog):
    result = invoke(["--version"], prog=prog, frontend=frontend)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"{prog} {version()}"
    assert version()[0].isdigit()


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_help_lists_commands_options_and_choices(frontend):
    top = invoke(["--help"], frontend=frontend)
    assert top.exit_code == 0
    for name in COMMANDS:
        assert name in top.stdout
    convert = invoke(["convert", "--help"], frontend=frontend)
    assert convert.exit_code == 0
    for text in ("--atol", "--rtol", "--calibration-data", "int16x8", "percentile"):
        assert text in convert.stdout, (text, convert.stdout)
    train = invoke(["train", "--help"], frontend=frontend)
    for text in ("--epochs", "passes over --data", "--batch-size", "samples per training step",
                 "--learning-rate", "binary_cross_entropy", "sgd"):
        assert text in " ".join(train.stdout.split()), text


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_usage_errors_exit_2(frontend, tmp_path):
    for args in (["run"], ["run", tmp_path, "--repeat", "0"], ["nope"],
                 ["convert", tmp_path / "m.onnx", "--quantize", "int3"]):
        result = invoke(args, frontend=frontend)
        assert result.exit_code == 2, (args, result.output)
        assert result.stdout == "" and "Traceback" not in result.stderr


def test_choices_agree_with_what_the_libraries_take():
    from edgelite.converter.quantize.calibrate import METHODS
    from edgelite.interpreter.training.losses import LOSSES
    from edgelite.interpreter.training.optimizers import OPTIMIZERS

    assert {c.value for c in choices.Loss} == set(LOSSES)
    assert {c.value for c in choices.Optimizer} == set(OPTIMIZERS)
    assert {c.value for c in choices.Calibration} == set(METHODS)


def test_both_frontends_give_the_same_reports(models_dir):
    model = models_dir / "digits_cnn_int8.tflite"
    reports = []
    for frontend in FRONTENDS:
        run = invoke(["run", model, "--json", "--repeat", "1"], frontend=frontend)
        assert run.exit_code == 0, run.output
        facts = json.loads(run.stdout)
        facts.pop("latency_ms")
        inspected = invoke(["inspect", model, "--json"], frontend=frontend)
        assert inspected.exit_code == 0
        reports.append((facts, json.loads(inspected.stdout)))
    assert reports[0] == reports[1]


def _runtime_only(*args) -> subprocess.CompletedProcess:
    return run_blocked("edgelite", args)


def test_run_and_inspect_need_only_the_runtime(models_dir):
    model = models_dir / "digits_cnn.tflite"
    run = _runtime_only("run", model, "--json", "--repeat", "2")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["outputs"][0]["shape"] == [1, 10]
    inspected = _runtime_only("inspect", model)
    assert inspected.returncode == 0, inspected.stderr
    assert "CONV_2D" in inspected.stdout
    assert _runtime_only("--version").stdout.startswith("edgelite ")
    assert "usage: edgelite" in _runtime_only("run", "--help").stdout


def test_convert_without_the_extra_says_what_to_install(models_dir):
    result = _runtime_only("convert", models_dir / "digits_cnn.onnx")
    assert result.returncode == 1
    assert result.stderr.strip() == ("error: converting an ONNX model needs onnx, which the "
                                     "runtime install leaves out: pip install 'edgelite[convert]'")
