"""`TFLiteConverter`'s errors name the Python API's settings (`input_shapes={'x': [...]}`), never
tflite-convert's flags; the command line's wording (`--input-shape x=...`) travels with them as
`cli_message` (`cli_wording`). And `help(TFLiteConverter)` lists its TensorFlow-style settings."""
from __future__ import annotations

import pydoc
import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from edgelite.converter import ConversionError, TFLiteConverter  # noqa: E402
from edgelite.converter.errors import Worded, cli_wording, joined, worded  # noqa: E402

FLAG = re.compile(r"--[a-z]")


def relu_model(dims: list):
    """y = RELU(x), x declared with `dims` (ints or dim names)."""
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def conversion_error(model, **settings) -> ConversionError:
    converter = TFLiteConverter.from_onnx(model, settings.pop("input_shapes", None))
    for name, value in settings.items():
        setattr(converter, name, value)
    with pytest.raises(ConversionError) as err:
        converter.convert()
    return err.value


@pytest.mark.parametrize("dims, input_shapes, api, cli", [
    ([1, 3, 8, 8], {"nope": [1, 3]},
     "input_shapes names 'nope', but the model's inputs are 'x'",
     "--input-shape names 'nope', but the model's inputs are 'x'"),
    (["N", 3, 8, 8], {"x": [1, 3]},
     "input_shapes['x']: 2 dims given, the input has rank 4",
     "--input-shape x: 2 dims given, the input has rank 4"),
])
def test_shape_errors_name_the_argument(dims, input_shapes, api, cli):
    e = conversion_error(relu_model(dims), input_shapes=input_shapes)
    assert api in str(e) and not FLAG.search(str(e)), str(e)
    assert cli in e.cli_message and cli_wording(e) == e.cli_message


def test_shape_errors_listed_at_once_in_both_wordings():
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"])], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", "C"]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    e = conversion_error(model, input_shapes={"a": [1], "b": [1, 2, 4]})
    assert "input_shapes['a']: 1 dims" in str(e) and "input_shapes['b']: 3 dims" in str(e)
    assert "--input-shape a: 1 dims" in e.cli_message and "--input-shape b: 3 dims" in e.cli_message
    assert not FLAG.search(str(e))


def test_open_dims_no_size_fits_name_the_argument():
    """Open dims that the model cannot take at any size tried (a constant reshape fixes them,
    at no square image) are refused with the sizes tried, the node and the setting that gives
    them."""
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 40])],
        [helper.make_tensor("shape", TensorProto.INT64, [3], [1, 3, 40])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    e = conversion_error(model)
    assert "none of the sizes tried" in str(e) and "x[2]=128, x[3]=128" in str(e)
    assert "with input_shapes={'x': [1, 3, H, W]} (-1 keeps a dim dynamic)" in str(e)
    assert "Reshape node" in str(e) and not FLAG.search(str(e))
    assert "with --input-shape x=1,3,H,W (-1 keeps a dim dynamic)" in e.cli_message


def test_quantization_errors_name_the_settings():
    e = conversion_error(relu_model([1, 4]), optimizations=["DEFAULT"],
                         inference_input_type=np.int8)
    assert "inference_input_type" in str(e) and not FLAG.search(str(e))


def test_quantize_without_dataset_names_the_argument():
    from edgelite.converter.quantize import quantize
    from edgelite.schema import load

    content = TFLiteConverter.from_onnx(relu_model([1, 4])).convert()
    with pytest.raises(ValueError, match="representative_dataset") as err:
        quantize(load(content), "int8")
    assert not FLAG.search(str(err.value))


def test_worded_text():
    setting = Worded("input_shapes", "--input-shape")
    text = worded("fix it with ", setting, "; or not")
    assert text == "fix it with input_shapes; or not"
    assert text.cli == "fix it with --input-shape; or not"
    both = joined("; ", [text, "plain"])
    assert both.cli == "fix it with --input-shape; or not; plain"
    assert cli_wording("plain") == "plain" and cli_wording(ValueError("v")) == "v"
    assert ConversionError("plain").cli_message == "plain"


# -- help(TFLiteConverter) ------------------------------------------------------------------------

SETTINGS = ["optimizations", "representative_dataset", "target_spec", "inference_input_type",
            "inference_output_type", "input_shapes", "keep_io_layout", "calibration", "training",
            "last_conversion"]


def test_help_lists_the_settings():
    text = pydoc.render_doc(TFLiteConverter, renderer=pydoc.plaintext)
    for name in SETTINGS:
        line = next((ln for ln in text.splitlines()
                     if ln.lstrip(" |").startswith(name + ":")), None)
        assert line is not None, f"help(TFLiteConverter) does not list {name}"
        assert len(line.split(":", 1)[1].strip()) > 10, f"{name} has no description"


def test_help_lists_every_public_attribute():
    doc = TFLiteConverter.__doc__
    for name in vars(TFLiteConverter(None)):
        if not name.startswith("_"):
            assert re.search(rf"^\s*{name}:", doc, re.M), f"{name} is not in the docstring"


def test_dynamic_dim_warning_names_the_argument(monkeypatch):
    """A dim that cannot stay dynamic is fixed (a first dim at 1) with a warning naming
    input_shapes (and, for the command line, --input-shape)."""
    from edgelite.converter import convert

    monkeypatch.setattr(convert, "mark_dynamic_dims", lambda model, other: "a reason")
    monkeypatch.setattr(convert, "_folded_with_loops", lambda *args: None)
    monkeypatch.setattr(convert, "_folded_from_second_and_third", lambda *args: None)
    converter = TFLiteConverter.from_onnx(relu_model(["N", 4]))
    converter.convert()
    warning, = converter.last_conversion.warnings
    assert "fixed at x[0]=1: a reason" in warning
    assert "fix them with input_shapes" in warning and not FLAG.search(warning)
    assert "fix them with --input-shape" in cli_wording(warning)


def test_check_inputs_errors_name_the_file(tmp_path):
    from edgelite.converter.check import load_feeds

    converter = TFLiteConverter.from_onnx(relu_model([1, 4]))
    converter.convert()
    np.savez(tmp_path / "wrong.npz", other=np.zeros((1, 4), np.float32))
    for path in (tmp_path / "missing.npz", tmp_path / "wrong.npz"):
        with pytest.raises(ConversionError) as err:
            load_feeds(converter.last_conversion, path)
        assert str(path) in str(err.value) and not FLAG.search(str(err.value)), str(err.value)
        assert err.value.cli_message.startswith(f"--inputs {path}")


def test_check_inputs_file_of_one_array(tmp_path):
    from edgelite.converter.check import load_feeds

    converter = TFLiteConverter.from_onnx(relu_model([1, 4]))
    converter.convert()
    np.save(tmp_path / "one.npy", np.zeros((1, 4), np.float32))
    with pytest.raises(ConversionError, match="one array"):
        load_feeds(converter.last_conversion, tmp_path / "one.npy")
