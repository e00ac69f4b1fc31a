"""TFLite Metadata (edgelite.schema.metadata): written, read back with the metadata schema's
generated bindings and with tflite-support's own reader, and the model still runs as before.

tflite-support (0.4.4, the reader Android's and MediaPipe's metadata tooling descends from)
needs numpy < 2, so it lives in a venv of its own: $EDGELITE_TFLITE_SUPPORT_PYTHON, or
../venv-android/bin/python beside the repository (make it with `python3 -m venv ../venv-android`
and `../venv-android/bin/pip install "numpy<2" tflite-support==0.4.4`).
Without it that test skips, saying so; under EDGELITE_REQUIRE_TFLITE_SUPPORT=1 it fails.
"""
from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from edgelite.schema import load, save
from edgelite.schema import metadata as md
from edgelite.schema.metadata import add_metadata, associated_files, read_metadata
from tests.conftest import REPO_ROOT

DIGITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


@pytest.fixture(scope="module")
def plain(models_dir) -> bytes:
    """TensorFlow's converter's digits CNN: an 8x8x1 image in, 10 scores out, no signature,
    two metadata entries of its own (the runtime-only CI stage has no converter)."""
    return (models_dir / "digits_cnn.tflite").read_bytes()


@pytest.fixture(scope="module")
def described(plain) -> bytes:
    return add_metadata(plain, labels=DIGITS, labels_file="digits.txt", mean=[0.0], std=[255.0],
                        description="tells handwritten digits apart", version="1",
                        name="digits", author="edgelite tests", license="Apache-2.0")


def test_generated_bindings_are_what_the_pinned_flatc_writes(tmp_path):
    from edgelite.schema import generate

    try:
        flatc = generate.checked_flatc()
    except generate.FlatcError as e:
        pytest.skip(f"{e}; cannot check that metadata_schema_generated.py is current")
    fbs = Path(md.__file__).with_name("metadata_schema.fbs")
    run = subprocess.run([str(flatc), *generate.FLATC_ARGS, "-o", str(tmp_path), str(fbs)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    committed = Path(md.fb.__file__).read_text().split("\n", 2)
    assert committed[0] == "# ruff: noqa"
    assert committed[2] == (tmp_path / "metadata_schema_generated.py").read_text()


def test_round_trip_through_the_schema(described):
    meta = read_metadata(described)
    assert {k: meta[k] for k in ("name", "description", "version", "author", "license",
                                 "min_parser_version")} == {
        "name": "digits", "description": "tells handwritten digits apart", "version": "1",
        "author": "edgelite tests", "license": "Apache-2.0", "min_parser_version": "1.0.0"}
    (sub,) = meta["subgraphs"]
    assert sub["inputs"] == [{
        "name": "image", "description": "a 8x8 grayscale image, NHWC float32",
        "content": "image", "color_space": "GRAYSCALE", "size": [8, 8],
        "mean": [0.0], "std": [255.0], "min": [0.0], "max": [1.0]}]
    assert sub["outputs"] == [{
        "name": "Identity", "description": "scores of the 10 labels in digits.txt",
        "content": "feature",
        "associated_files": [{"name": "digits.txt", "type": "TENSOR_AXIS_LABELS"}]}]
    assert associated_files(described) == {"digits.txt": "".join(
        f"{s}\n" for s in DIGITS).encode()}


def test_the_buffer_is_a_model_metadata_flatbuffer(described):
    buf = load(described).get_metadata(md.METADATA_NAME)
    assert buf[4:8] == md.FILE_IDENTIFIER
    root = md.fb.ModelMetadata.GetRootAs(buf, 0)
    assert root.SubgraphMetadataLength() == 1
    out = root.SubgraphMetadata(0).OutputTensorMetadata(0)
    assert out.AssociatedFiles(0).Type() == md.fb.AssociatedFileType.TENSOR_AXIS_LABELS


def test_other_metadata_is_kept_and_rewriting_replaces(plain, described):
    again = add_metadata(described, labels=DIGITS[::-1], mean=[0.0], std=[1.0])
    model = load(again)
    assert [m.name for m in model.metadata].count(md.METADATA_NAME) == 1
    for name in ("min_runtime_version", "CONVERSION_METADATA"):
        assert model.get_metadata(name) == load(plain).get_metadata(name) is not None
    assert read_metadata(again)["subgraphs"][0]["inputs"][0]["std"] == [1.0]
    assert associated_files(again) == {"labels.txt": "".join(
        f"{s}\n" for s in DIGITS[::-1]).encode()}
    assert read_metadata(plain) is None and associated_files(plain) == {}


@pytest.mark.parametrize("runtime", ["litert", "edgelite"])
def test_the_described_model_runs_as_before(plain, described, models_dir, runtime):
    if runtime == "litert":
        from ai_edge_litert.interpreter import Interpreter
    else:
        from edgelite.interpreter import Interpreter
    x = np.load(models_dir / "digits.npz")["x_test"][:1].transpose(0, 2, 3, 1)   # NCHW -> NHWC
    outputs = []
    for content in (plain, described):
        it = Interpreter(model_content=content)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        outputs.append(it.get_tensor(it.get_output_details()[0]["index"]))
    np.testing.assert_array_equal(outputs[0], outputs[1])


def test_three_channels_one_mean_each(models_dir):
    content = add_metadata((models_dir / "mobilenet_v2.tflite").read_bytes(),
                           mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375])
    (image,) = read_metadata(content)["subgraphs"][0]["inputs"]
    assert image["color_space"] == "RGB" and image["size"] == [224, 224]
    np.testing.assert_allclose(image["min"], [-123.675 / 58.395, -116.28 / 57.12,
                                              -103.53 / 57.375], rtol=1e-6)


@pytest.mark.parametrize("kwargs, message", [
    (dict(labels=DIGITS[:3]), "3 labels given, but the last axis of output 'Identity' "
                              "(shape [1, 10]) has 10 entries"),
    (dict(mean=[0.0]), "normalization needs both mean and std"),
    (dict(mean=[0.0, 1.0], std=[1.0]), "mean has 2 values, but the image inputs have [1] "
                                       "channels"),
    (dict(mean=[0.0], std=[0.0]), "a standard deviation of 0"),
])
def test_what_does_not_fit_the_model_is_one_clear_error(plain, kwargs, message):
    with pytest.raises(ValueError) as e:
        add_metadata(plain, **kwargs)
    assert message in str(e.value)


def test_a_foreign_buffer_under_the_name_is_refused(plain):
    model = load(plain)
    model.set_metadata(md.METADATA_NAME, b"\x08\x00\x00\x00XXXX\x00\x00\x00\x00")
    with pytest.raises(md.ModelError, match="not a ModelMetadata FlatBuffer"):
        read_metadata(save(model))


# -- tflite-support's reader ---------------------------------------------------------------------

READER = textwrap.dedent("""
    import json, sys
    from tflite_support import metadata
    from tensorflow_lite_support.metadata.cc.python import _pywrap_metadata_version as version
    shown = metadata.MetadataDisplayer.with_model_file(sys.argv[1])
    files = shown.get_packed_associated_file_list()
    print(json.dumps({
        "metadata": json.loads(shown.get_metadata_json()),
        "files": {n: shown.get_associated_file_buffer(n).decode() for n in files},
        "min_parser_version": version.GetMinimumMetadataParserVersion(
            bytes(shown.get_metadata_buffer())),
    }))
""")


def _tflite_support_python() -> Path:
    path = Path(os.environ.get("EDGELITE_TFLITE_SUPPORT_PYTHON")
                or REPO_ROOT.parent / "venv-android" / "bin" / "python")
    if not path.exists():
        reason = (f"no Python with tflite-support at {path} (set EDGELITE_TFLITE_SUPPORT_PYTHON;"
                  " this module's docstring says how to make one)")
        if os.environ.get("EDGELITE_REQUIRE_TFLITE_SUPPORT") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def test_tflite_support_reads_what_we_wrote(described, tmp_path):
    python = _tflite_support_python()
    model = tmp_path / "described.tflite"
    model.write_bytes(described)
    run = subprocess.run([str(python), "-c", READER, str(model)], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["files"] == {"digits.txt": "".join(f"{s}\n" for s in DIGITS)}
    assert seen["min_parser_version"] == md.MIN_PARSER_VERSION
    meta = seen["metadata"]
    assert (meta["name"], meta["description"], meta["min_parser_version"]) == (
        "digits", "tells handwritten digits apart", "1.0.0")
    (sub,) = meta["subgraph_metadata"]
    (image,) = sub["input_tensor_metadata"]
    assert image["name"] == "image"
    assert image["content"]["content_properties_type"] == "ImageProperties"
    assert image["content"]["content_properties"] == {
        "color_space": "GRAYSCALE", "default_size": {"width": 8, "height": 8}}
    assert image["process_units"] == [{"options_type": "NormalizationOptions",
                                       "options": {"mean": [0.0], "std": [255.0]}}]
    assert image["stats"] == {"max": [1.0], "min": [0.0]}
    (scores,) = sub["output_tensor_metadata"]
    assert scores["name"] == "Identity"
    assert [(f["name"], f["type"]) for f in scores["associated_files"]] == [
        ("digits.txt", "TENSOR_AXIS_LABELS")]
