"""`tflite-convert` / `edgelite convert`: the summary, --check, --input-shape, --keep-io-layout,
deterministic output, and one clear `error:` line with a non-zero status for bad input."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgelite.converter import TFLiteConverter
from tests.cli.helpers import invoke, run_blocked
from edgelite.schema import load


def convert(*args):
    return invoke(["convert", *map(str, args)])


def ok(*args) -> str:
    result = convert(*args)
    assert result.exit_code == 0, result.stderr or result.output
    return result.stdout


def fails(*args, code: int = 1) -> str:
    """The one stderr line of a failed conversion."""
    result = convert(*args)
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def save(tmp_path, proto, name="m.onnx"):
    path = tmp_path / name
    onnx.save(proto, str(path))
    return path


def tiny_model(nodes, inputs, opset=18):
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs]
    outs = [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, inputs[0][1])]
    graph = helper.make_graph(nodes, "g", ins, outs)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid("com.example", 1)])
    proto.ir_version = 8
    return proto


# -- success -------------------------------------------------------------------------------------

def test_summary_and_file(models_dir, tmp_path):
    out = tmp_path / "digits.tflite"
    text = ok(models_dir / "digits_cnn.onnx", "-o", out)
    assert "ops in   (10): Conv 2, Gemm 2, MaxPool 2, Relu 3, Reshape 1" in text
    assert "ops out  (7): CONV_2D 2, FULLY_CONNECTED 2, MAX_POOL_2D 2, RESHAPE 1" in text
    assert "transposes left: 0" in text
    assert f"{out.stat().st_size:,} bytes" in text
    assert "image: float32 [1, 8, 8, 1]  (ONNX layout permuted by [0, 2, 3, 1])" in text
    assert out.read_bytes() == TFLiteConverter.from_onnx(models_dir / "digits_cnn.onnx").convert()


def test_default_output_path(models_dir, tmp_path):
    src = tmp_path / "digits_cnn.onnx"
    src.write_bytes((models_dir / "digits_cnn.onnx").read_bytes())
    ok(src)
    assert load(tmp_path / "digits_cnn.tflite").subgraphs[0].operators


def test_deterministic_bytes(models_dir, tmp_path):
    ok(models_dir / "digits_cnn.onnx", "-o", tmp_path / "a.tflite")
    ok(models_dir / "digits_cnn.onnx", "-o", tmp_path / "b.tflite")
    assert (tmp_path / "a.tflite").read_bytes() == (tmp_path / "b.tflite").read_bytes()


def test_check_prints_each_outputs_error(models_dir, tmp_path):
    text = ok(models_dir / "digits_cnn.onnx", "-o", tmp_path / "d.tflite", "--check")
    assert "check (max abs error vs onnxruntime):" in text
    line = next(x for x in text.splitlines() if x.strip().startswith("logits:"))
    assert "edgelite" in line and "LiteRT" in line and "MISMATCH" not in line


def test_check_with_given_inputs_and_input_shape(models_dir, tmp_path):
    text = ok(models_dir / "ppocr_cls.onnx", "-o", tmp_path / "p.tflite", "--input-shape",
              "x=1,3,48,192", "--check", "--inputs", models_dir / "refs" / "ppocr_cls.npz")
    assert "transposes left: 0" in text
    assert "x: float32 [1, 48, 192, 3]" in text
    line = next(x for x in text.splitlines() if "scale_0.tmp_1:" in x and "edgelite" in x)
    errors = [float(part.split()[-1]) for part in line.split("(")[0].split(":")[1].split(",")]
    assert max(errors) < 1e-5


def test_keep_io_layout(models_dir, tmp_path):
    text = ok(models_dir / "digits_cnn.onnx", "-o", tmp_path / "k.tflite", "--keep-io-layout")
    assert "image: float32 [1, 1, 8, 8]" in text


def test_dynamic_batch_in_summary(models_dir, tmp_path):
    text = ok(models_dir / "ppocr_cls.onnx", "-o", tmp_path / "p.tflite", "--input-shape",
              "x=-1,3,48,192")
    assert "x: float32 [-1, 48, 192, 3]" in text


def test_tflite_convert_console_script(models_dir, tmp_path):
    out = tmp_path / "d.tflite"
    code = ("import sys; from edgelite.cli import convert_main; "
            f"sys.argv = ['tflite-convert', {str(models_dir / 'digits_cnn.onnx')!r}, '-o', "
            f"{str(out)!r}]; sys.exit(convert_main())")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert "transposes left: 0" in run.stdout
    assert out.read_bytes() == TFLiteConverter.from_onnx(models_dir / "digits_cnn.onnx").convert()


# -- errors --------------------------------------------------------------------------------------

def test_missing_file(tmp_path):
    line = fails(tmp_path / "nope.onnx")
    assert "no such file" in line and "nope.onnx" in line


def test_not_onnx(tmp_path):
    path = tmp_path / "notes.onnx"
    path.write_text("this is not a protobuf\n" * 10)
    assert "is not an ONNX model" in fails(path)


def test_directory(tmp_path):
    assert "is a directory" in fails(tmp_path)


def test_invalid_graph_undefined_input(tmp_path):
    proto = tiny_model([helper.make_node("Relu", ["ghost"], ["y"], name="r")], [("x", [2])])
    assert "invalid ONNX" in fails(save(tmp_path, proto))


def test_invalid_graph_contradicting_types(tmp_path):
    ins = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2]),
           helper.make_tensor_value_info("b", TensorProto.INT64, [2])]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "g", ins, outs)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    proto.ir_version = 8
    assert "invalid ONNX" in fails(save(tmp_path, proto))


def test_unsupported_ops_listed_at_once(tmp_path):
    nodes = [helper.make_node("Det", ["x"], ["d"], name="det_node"),
             helper.make_node("Relu", ["x"], ["r"], name="fine"),
             helper.make_node("Foo", ["r"], ["f"], name="custom_node", domain="com.example"),
             helper.make_node("Hardmax", ["x"], ["y"], name="hardmax_node")]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
            for n, s in (("d", []), ("f", [3, 3]), ("y", [3, 3]))]
    graph = helper.make_graph(nodes, "g", ins, outs)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18),
                                                    helper.make_opsetid("com.example", 1)])
    proto.ir_version = 8
    line = fails(save(tmp_path, proto))
    assert "3 ONNX node(s) cannot be converted" in line
    for name, op in (("det_node", "Det"), ("custom_node", "Foo"), ("hardmax_node", "Hardmax")):
        assert name in line and op in line
    assert "opset 18" in line and "'fine'" not in line


def test_unsupported_ops_in_branches_listed_with_the_rest(tmp_path):
    """An If's branches are scanned too: one line lists every op, where each one is (an op
    inside a branch was an internal error, found only when the branch was lowered)."""
    out = [helper.make_tensor_value_info("b", TensorProto.FLOAT, [3, 3])]
    then = helper.make_graph([helper.make_node("Hardmax", ["x"], ["b"], name="in_then")],
                             "then", [], out)
    other = helper.make_graph([helper.make_node("Relu", ["x"], ["b"], name="fine")],
                              "else", [], out)
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other,
                              name="choose"),
             helper.make_node("Det", ["x"], ["d"], name="det_node")]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 3]),
            helper.make_tensor_value_info("d", TensorProto.FLOAT, [])]
    inits = [numpy_helper.from_array(np.array(0, np.float32), "zero")]
    proto = helper.make_model(helper.make_graph(nodes, "g", ins, outs, inits),
                              opset_imports=[helper.make_opsetid("", 18)])
    proto.ir_version = 8
    line = fails(save(tmp_path, proto))
    assert "2 ONNX node(s) cannot be converted" in line
    assert "'in_then'" in line and "then_branch" in line and "'det_node'" in line
    assert "internal" not in line and "'fine'" not in line


def test_unsupported_attribute_forms_listed_at_once(tmp_path):
    nodes = [helper.make_node("TopK", ["v", "k"], ["tv", "ti"], largest=0, name="topk"),
             helper.make_node("LSTM", ["x", "Wl", "R"], ["y"], hidden_size=2, input_forget=1,
                              name="rnn")]
    ins = [helper.make_tensor_value_info("v", TensorProto.UINT8, [2, 5]),
           helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1, 3])]
    outs = [helper.make_tensor_value_info("tv", TensorProto.UINT8, [2, 2]),
            helper.make_tensor_value_info("ti", TensorProto.INT64, [2, 2]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1, 1, 2])]
    inits = [numpy_helper.from_array(np.array([2], np.int64), "k"),
             numpy_helper.from_array(np.ones((1, 8, 3), np.float32), "Wl"),
             numpy_helper.from_array(np.ones((1, 8, 2), np.float32), "R")]
    proto = helper.make_model(helper.make_graph(nodes, "g", ins, outs, inits),
                              opset_imports=[helper.make_opsetid("", 19)])
    proto.ir_version = 8
    line = fails(save(tmp_path, proto))
    assert "2 ONNX node(s)" in line and "'topk'" in line and "unsigned" in line
    assert "'rnn'" in line and "input_forget" in line


def test_open_dims_stay_dynamic(models_dir, tmp_path):
    """ppocr_cls leaves batch, height and width open: they stay -1 with no --input-shape."""
    out = ok(models_dir / "ppocr_cls.onnx", "-o", tmp_path / "cls.tflite")
    assert "input    x: float32 [-1, -1, -1, 3]" in out


def test_open_dims_no_size_fits(tmp_path):
    """A model that takes its open dims at no size tried (a constant reshape fixes them) says
    which sizes were tried and names --input-shape."""
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "s"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 40])],
        [numpy_helper.from_array(np.array([1, 40], np.int64), "s")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    line = fails(save(tmp_path, proto))
    assert "none of the sizes tried" in line and "x[1]=128, x[2]=128" in line
    assert "--input-shape x=1,H,W (-1 keeps a dim dynamic)" in line


@pytest.mark.parametrize("spec, message", [("x", "expected NAME=D0,D1"),
                                           ("x=1,a", "expected NAME=D0,D1"),
                                           ("nope=1,3", "names 'nope'"),
                                           ("x=1,3", "2 dims given")])
def test_bad_input_shape_option(models_dir, spec, message):
    line = fails(models_dir / "ppocr_cls.onnx", "--input-shape", spec)
    assert message in line


def test_unwritable_output(models_dir, tmp_path):
    line = fails(models_dir / "digits_cnn.onnx", "-o", tmp_path / "missing_dir" / "x.tflite")
    assert "cannot write" in line


def test_old_opset_is_upgraded(tmp_path):
    proto = tiny_model([helper.make_node("Relu", ["x"], ["y"])], [("x", [2])], opset=9)
    assert "ops out  (1): RELU 1" in ok(save(tmp_path, proto), "-o", tmp_path / "r.tflite")


def test_old_opset_that_cannot_be_upgraded(tmp_path, monkeypatch):
    import onnx.version_converter

    def refuse(*_):
        raise RuntimeError("no adapter")
    monkeypatch.setattr(onnx.version_converter, "convert_version", refuse)
    proto = tiny_model([helper.make_node("Relu", ["x"], ["y"])], [("x", [2])], opset=9)
    line = fails(save(tmp_path, proto))
    assert "opset 9" in line and "no adapter" in line


def test_check_inputs_file_missing_key(models_dir, tmp_path):
    np.savez(tmp_path / "in.npz", other=np.zeros(3))
    line = fails(models_dir / "digits_cnn.onnx", "-o", tmp_path / "d.tflite", "--check",
                 "--inputs", tmp_path / "in.npz")
    assert "has no 'image' or 'input_0'" in line


# -- --check: tolerances, missing oracles -------------------------------------------------------

def test_check_tolerances_are_options(models_dir, tmp_path):
    out = tmp_path / "d.tflite"
    model = models_dir / "digits_cnn.onnx"
    assert "check (max abs error vs onnxruntime)" in ok(model, "-o", out, "--check")
    out.unlink()
    result = invoke(["convert", model, "-o", out, "--check", "--atol", "0", "--rtol", "0"])
    assert result.exit_code == 1, result.output      # float rounding differs from onnxruntime
    assert "MISMATCH" in result.stdout
    (line,) = result.stderr.splitlines()
    assert "differ by more than --atol 0 + --rtol 0 x max |reference|" in line
    assert f"({out} was written; the check failed)" in line and out.is_file()


def test_check_without_oracles_says_what_to_install(models_dir, tmp_path):
    """With neither onnxruntime nor LiteRT importable, --check cannot pass silently."""
    out = tmp_path / "d.tflite"
    run = run_blocked("tflite-convert", [models_dir / "digits_cnn.onnx", "-o", out, "--check"],
                      blocked=("onnxruntime", "ai_edge_litert"))
    assert run.returncode == 1, run.stdout + run.stderr
    assert "onnxruntime is not installed (pip install onnxruntime)" in run.stdout
    assert "LiteRT is not installed (pip install ai-edge-litert)" in run.stdout
    assert run.stderr.startswith("error: --check had nothing to compare edgelite with")
    assert out.is_file()


def test_inputs_in_either_layout(models_dir, tmp_path):
    x = np.random.default_rng(0).standard_normal((1, 1, 8, 8)).astype(np.float32)
    for layout, array in (("NCHW", x), ("NHWC", x.transpose(0, 2, 3, 1))):
        data = tmp_path / f"{layout}.npz"
        np.savez(data, **{"image" if layout == "NCHW" else "x": array})   # x: a one-input model
        text = ok(models_dir / "digits_cnn.onnx", "-o", tmp_path / "d.tflite", "--check",
                  "--inputs", data)
        moved = "(the .tflite's layout, transposed to ONNX layout)" in text
        assert moved == (layout == "NHWC"), text
