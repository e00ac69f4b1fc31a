"""TFLiteConverter.from_torch: a torch module exported by torch's ONNX exporter (TorchScript or
dynamo) in memory, converted, and checked in edgelite and in LiteRT against onnxruntime and
torch. Skips without torch (fails under EDGELITE_REQUIRE_TORCH=1, as CI's torch stage sets)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.blocked import run_blocked
from tests.converter.torch_cases import check_torch, require

EXPORTERS = ["torchscript", "dynamo"]


def _exporter(name: str) -> str:
    if name == "dynamo":
        require("onnxscript")
    return name


def _convnet():
    torch = require("torch")
    nn = torch.nn
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU6(),
                nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.BatchNorm2d(8), nn.Hardswish(),
                nn.Conv2d(8, 16, 1), nn.ReLU())
            self.head = nn.Linear(16, 5)

        def forward(self, image):
            x = self.features(image)
            return self.head(x.mean(dim=(2, 3)))

    net = Net().eval()
    for m in net.modules():     # BatchNorm statistics that are not the identity
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    return net, torch.randn(1, 3, 32, 32)


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_convnet(exporter):
    net, x = _convnet()
    conversion = check_torch(net, (x,), _exporter(exporter))
    assert conversion.transposes == 0
    assert [e["name"] for e in conversion.io_layout["inputs"]] == ["image"]  # forward's name
    assert "CONV_2D" in conversion.ops_out and "DEPTHWISE_CONV_2D" in conversion.ops_out


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_two_inputs_named(exporter):
    torch = require("torch")

    class Mix(torch.nn.Module):
        def forward(self, a, b):
            return torch.tanh(a @ b.transpose(0, 1)) * 2 - a.sum(), torch.softmax(b, dim=-1)

    a, b = torch.randn(3, 4), torch.randn(5, 4)
    conversion = check_torch(Mix(), (a, b), _exporter(exporter), input_names=["left", "right"])
    assert [e["name"] for e in conversion.io_layout["inputs"]] == ["left", "right"]


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_dynamic_batch_runs_at_other_sizes(exporter):
    require("torch")
    from edgelite.interpreter import Interpreter

    net, x = _convnet()
    conversion = check_torch(net, x, _exporter(exporter), dynamic_shapes={"image": {0: "batch"}})
    sg = conversion.model.subgraphs[0]
    assert sg.tensors[sg.inputs[0]].shape_signature[0] == -1
    litert = require("ai_edge_litert.interpreter")
    for batch in (2, 3):
        _runs_like_torch(conversion.content, net, batch, (Interpreter, litert.Interpreter))


def _runs_like_torch(content: bytes, net, batch: int, interpreters):
    """The converted convnet, resized to `batch` (NHWC) in each of `interpreters`, gives torch's
    output on a random image."""
    import torch

    x = torch.randn(batch, 3, 32, 32)
    with torch.no_grad():
        expected = net(x).numpy()
    for cls in interpreters:
        it = cls(model_content=content)
        it.resize_tensor_input(it.get_input_details()[0]["index"], [batch, 32, 32, 3])
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"],
                      np.ascontiguousarray(x.numpy().transpose(0, 2, 3, 1)))
        it.invoke()
        got = it.get_tensor(it.get_output_details()[0]["index"])
        assert np.abs(got - expected).max() <= 1e-5 + 1e-4 * np.abs(expected).max(), cls


def test_errors_are_conversion_errors():
    require("torch")
    from edgelite.converter import ConversionError, TFLiteConverter

    net, x = _convnet()
    with pytest.raises(ConversionError, match="takes a torch.nn.Module"):
        TFLiteConverter.from_torch(lambda t: t, (x,))
    with pytest.raises(ConversionError, match=r"dynamic_shapes names \['x'\].*\['image'\]"):
        TFLiteConverter.from_torch(net, (x,), dynamic_shapes={"x": {0: "batch"}})
    with pytest.raises(ConversionError, match="exporter 'onnx2' is not one of"):
        TFLiteConverter.from_torch(net, (x,), exporter="onnx2")
    with pytest.raises(ConversionError, match="not tensors"):
        TFLiteConverter.from_torch(net, (x.numpy(),))


def test_without_torch_the_converter_imports_and_from_torch_says_what_to_install():
    result = run_blocked("""
        from edgelite.converter import ConversionError, TFLiteConverter
        try:
            TFLiteConverter.from_torch(object(), ())
        except ConversionError as e:
            print(e)
    """, blocked=("torch",))
    assert result.returncode == 0, result.stderr
    assert 'from_torch needs torch (pip install "edgelite[torch]"' in result.stdout


# -- a saved torch.export program (.pt2): TFLiteConverter.from_exported_program, tflite-convert

@pytest.fixture(scope="module")
def saved_program(tmp_path_factory):
    """The convnet exported by torch.export with a dynamic batch (at most 64) and saved (once
    for the tests that read it: torch.export takes seconds)."""
    torch = require("torch")
    require("onnxscript")
    net, _ = _convnet()
    batch = torch.export.Dim("batch", max=64)
    program = torch.export.export(net, (torch.randn(2, 3, 32, 32),),
                                  dynamic_shapes={"image": {0: batch}})
    path = tmp_path_factory.mktemp("program") / "convnet.pt2"
    torch.export.save(program, str(path))
    return net, path


def test_exported_program_keeps_its_dynamic_batch(saved_program):
    require("torch")
    from edgelite.converter import TFLiteConverter
    from edgelite.interpreter import Interpreter

    net, path = saved_program
    converter = TFLiteConverter.from_exported_program(path)
    content = converter.convert()
    conversion = converter.last_conversion
    sg = conversion.model.subgraphs[0]
    assert sg.tensors[sg.inputs[0]].shape_signature[0] == -1
    assert [e["name"] for e in conversion.io_layout["inputs"]] == ["image"]
    litert = require("ai_edge_litert.interpreter")
    _runs_like_torch(content, net, 3, (Interpreter, litert.Interpreter))


def test_tflite_convert_on_a_pt2_checks_it(saved_program, tmp_path):
    from tests.cli.helpers import invoke

    _, path = saved_program
    out = tmp_path / "convnet.tflite"
    result = invoke([path, "-o", out, "--check"], prog="tflite-convert")
    assert result.exit_code == 0, result.output
    assert "convnet.pt2 -> " in result.stdout and "CONV_2D" in result.stdout
    assert "input    image: float32 [-1, 32, 32, 3]" in result.stdout
    assert "edgelite" in result.stdout and "LiteRT" in result.stdout   # --check's errors
    assert out.stat().st_size > 0


def test_tflite_convert_on_a_file_that_is_no_program(tmp_path):
    require("torch")
    from tests.cli.helpers import invoke

    path = tmp_path / "broken.pt2"
    path.write_bytes(b"PK\x03\x04 not a program")
    result = invoke([path], prog="tflite-convert")
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not a torch.export program" in lines[0], result.stderr


def test_tflite_convert_on_a_pt2_without_torch_says_what_to_install(tmp_path):
    from tests.cli.helpers import run_blocked

    path = tmp_path / "m.pt2"
    path.write_bytes(b"PK\x03\x04")
    result = run_blocked("tflite-convert", [path], blocked=("torch",))
    assert result.returncode == 1, result.stderr
    assert 'converting a torch.export program (.pt2) needs torch (pip install ' \
        '"edgelite[torch]"' in result.stderr
