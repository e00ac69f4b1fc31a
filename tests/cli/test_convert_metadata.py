"""`tflite-convert --labels FILE --mean M --std S --description TEXT`: TFLite Metadata written
into the converted model (edgelite.schema.metadata), under both front-ends; what does not fit
the model is one `error:` line naming the flag and the output."""
from __future__ import annotations

import pytest

from edgelite.schema.metadata import associated_files, read_metadata
from tests.cli.helpers import invoke

SHAPES = "horizontal vertical diagonal antidiagonal plus cross square circle".split()


@pytest.fixture(scope="module")
def labels(tmp_path_factory):
    path = tmp_path_factory.mktemp("labels") / "shapes.txt"
    path.write_text("\n".join(SHAPES) + "\n\n")    # a blank last line is not a label
    return path


@pytest.mark.parametrize("frontend", ["typer", "argparse"])
def test_convert_writes_the_metadata(sample_dir, labels, tmp_path, frontend):
    out = tmp_path / "described.tflite"
    result = invoke(["convert", sample_dir / "default.onnx", "-o", out, "--labels", labels,
                     "--mean", "0", "--std", "255", "--description", "eight stroke shapes"],
                    frontend=frontend)
    assert result.exit_code == 0, result.output
    content = out.read_bytes()
    meta = read_metadata(content)
    assert (meta["name"], meta["description"]) == ("default", "eight stroke shapes")
    (image,) = meta["subgraphs"][0]["inputs"]
    assert (image["name"], image["mean"], image["std"]) == ("image", [0.0], [255.0])
    (scores,) = meta["subgraphs"][0]["outputs"]
    assert scores["associated_files"] == [{"name": "shapes.txt", "type": "TENSOR_AXIS_LABELS"}]
    assert associated_files(content) == {"shapes.txt": ("\n".join(SHAPES) + "\n").encode()}


def test_without_the_flags_no_metadata_is_written(sample_dir, tmp_path):
    out = tmp_path / "plain.tflite"
    assert invoke(["convert", sample_dir / "default.onnx", "-o", out]).exit_code == 0
    assert read_metadata(out.read_bytes()) is None


@pytest.mark.parametrize("args, message", [
    (["--mean", "0,1,2", "--std", "1"], "mean has 3 values, but the image inputs have [1]"),
    (["--mean", "zero", "--std", "1"], "could not convert string to float"),
    (["--std", "1"], "needs both mean and std"),
])
def test_normalization_that_does_not_fit_is_one_error(sample_dir, tmp_path, args, message):
    result = invoke(["convert", sample_dir / "default.onnx", "-o", tmp_path / "m.tflite", *args])
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: --labels/--mean/--std: ") and message in line


def test_labels_that_do_not_fit_name_the_output(sample_dir, tmp_path):
    bad = tmp_path / "three.txt"
    bad.write_text("a\nb\nc\n")
    result = invoke(["convert", sample_dir / "default.onnx", "-o", tmp_path / "m.tflite",
                     "--labels", bad])
    assert result.exit_code == 1
    assert "3 labels given, but the last axis of output 'probabilities'" in result.stderr
    missing = invoke(["convert", sample_dir / "default.onnx", "-o", tmp_path / "m.tflite",
                      "--labels", tmp_path / "none.txt"])
    assert missing.exit_code == 1 and "cannot read --labels" in missing.stderr
