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

SHAPES = ["horizontal", "vertical", "diagonal", "antidiagonal", "plus", "cross", "square",
          "circle"]


@pytest.fixture(scope="module")
def plain(sample_dir) -> bytes:
    return (sample_dir / "default.tflite").read_bytes()


@pytest.fixture(scope="module")
def described(plain) -> bytes:
    return add_metadata(plain, labels=SHAPES, labels_file="shapes.txt", mean=[0.0], std=[255.0],
                        description="tells eight stroke shapes apart", version="1",
                        name="edgelite default sample: eight stroke shapes",
                        author="edgelite tests", license="Apache-2.0")


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
        "name": "edgelite default sample: eight stroke shapes",
        "description": "tells eight stroke shapes apart", "version": "1",
        "author": "edgelite tests", "license": "Apache-2.0", "min_parser_version": "1.0.0"}
    (sub,) = meta["subgraphs"]
    assert sub["inputs"] == [{
        "name": "image", "description": "a 16x16 grayscale image, NHWC float32",
        "content": "image", "color_space": "GRAYSCALE", "size": [16, 16],
        "mean": [0.0], "std": [255.0], "min": [0.0], "max": [1.0]}]
    assert sub["outputs"] == [{
        "name": "probabilities", "description": "scores of the 8 labels in shapes.txt",
        "content": "feature",
        "associated_files": [{"name": "shapes.txt", "type": "TENSOR_AXIS_LABELS"}]}]
    assert associated_files(described) == {"shapes.txt": "".join(
        f"{s}\n" for s in SHAPES).encode()}


def test_the_buffer_is_a_model_metadata_flatbuffer(described):
    buf = load(described).get_metadata(md.METADATA_NAME)
    assert buf[4:8] == md.FILE_IDENTIFIER
    root = md.fb.ModelMetadata.GetRootAs(buf, 0)
    assert root.SubgraphMetadataLength() == 1
    out = root.SubgraphMetadata(0).OutputTensorMetadata(0)
    assert out.AssociatedFiles(0).Type() == md.fb.AssociatedFileType.TENSOR_AXIS_LABELS


def test_other_metadata_is_kept_and_rewriting_replaces(plain, described):
    again = add_metadata(described, labels=SHAPES[::-1], mean=[0.0], std=[1.0])
    model = load(again)
    assert [m.name for m in model.metadata].count(md.METADATA_NAME) == 1
    assert model.get_metadata("edgelite_labels") == load(plain).get_metadata("edgelite_labels")
    assert read_metadata(again)["subgraphs"][0]["inputs"][0]["std"] == [1.0]
    assert associated_files(again) == {"labels.txt": "".join(
        f"{s}\n" for s in SHAPES[::-1]).encode()}
    assert read_metadata(plain) is None and associated_files(plain) == {}


@pytest.mark.parametrize("runtime", ["litert", "edgelite"])
def test_the_described_model_runs_as_before(plain, described, sample_dir, runtime):
    if runtime == "litert":
        from ai_edge_litert.interpreter import Interpreter
    else:
        from edgelite.interpreter import Interpreter
    x = np.load(sample_dir / "default_test.npz")["x"][:4]
    outputs = []
    for content in (plain, described):
        runner = Interpreter(model_content=content).get_signature_runner("serving_default")
        outputs.append(runner(image=x)["probabilities"])
    np.testing.assert_array_equal(outputs[0], outputs[1])


def test_three_channels_one_mean_each(models_dir):
    content = add_metadata((models_dir / "mobilenet_v2.tflite").read_bytes(),
                           mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375])
    (image,) = read_metadata(content)["subgraphs"][0]["inputs"]
    assert image["color_space"] == "RGB" and image["size"] == [224, 224]
    np.testing.assert_allclose(image["min"], [-123.675 / 58.395, -116.28 / 57.12,
                                              -103.53 / 57.375], rtol=1e-6)


@pytest.mark.parametrize("kwargs, message", [
    (dict(labels=SHAPES[:3]), "3 labels given, but the last axis of output 'probabilities' "
                              "(shape [1, 8]) has 8 entries"),
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
    assert seen["files"] == {"shapes.txt": "".join(f"{s}\n" for s in SHAPES)}
    assert seen["min_parser_version"] == md.MIN_PARSER_VERSION
    meta = seen["metadata"]
    assert (meta["name"], meta["description"], meta["min_parser_version"]) == (
        "edgelite default sample: eight stroke shapes", "tells eight stroke shapes apart",
        "1.0.0")
    (sub,) = meta["subgraph_metadata"]
    (image,) = sub["input_tensor_metadata"]
    assert image["name"] == "image"
    assert image["content"]["content_properties_type"] == "ImageProperties"
    assert image["content"]["content_properties"] == {
        "color_space": "GRAYSCALE", "default_size": {"width": 16, "height": 16}}
    assert image["process_units"] == [{"options_type": "NormalizationOptions",
                                       "options": {"mean": [0.0], "std": [255.0]}}]
    assert image["stats"] == {"max": [1.0], "min": [0.0]}
    (scores,) = sub["output_tensor_metadata"]
    assert scores["name"] == "probabilities"
    assert [(f["name"], f["type"]) for f in scores["associated_files"]] == [
        ("shapes.txt", "TENSOR_AXIS_LABELS")]
