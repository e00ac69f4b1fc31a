"""The shared ONNX convnets converted end to end: edgelite's interpreter and LiteRT both match
the onnxruntime reference outputs, no TRANSPOSE is left inside, fusions show in the op counts."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from edgelite.converter import TFLiteConverter
from edgelite.schema import load
from tests.oracles import onnxruntime_run

TOLERANCE = 1e-4   # max abs error relative to max |reference|
# name -> input shapes for the conversion (ppocr_cls has dynamic H and W)
MODELS = {
    "digits_cnn": {},
    "syn_mobilenetv2": {},
    "ppocr_cls": {"x": [1, 3, 48, 192]},
    "syn_transformer": {},
}
CONVNETS = ["digits_cnn", "syn_mobilenetv2", "ppocr_cls"]
_CACHE: dict = {}


def converted(models_dir, name: str, keep_io_layout: bool = False, shapes=None):
    key = (name, keep_io_layout, repr(shapes))
    if key not in _CACHE:
        converter = TFLiteConverter.from_onnx(models_dir / f"{name}.onnx",
                                              MODELS[name] if shapes is None else shapes)
        converter.keep_io_layout = keep_io_layout
        converter.convert()
        _CACHE[key] = converter.last_conversion
    return _CACHE[key]


def refs(models_dir, name: str):
    data = np.load(models_dir / "refs" / f"{name}.npz")
    return data["input_0"], data["output_0"]


def run(content: bytes, x: np.ndarray, runtime: str, batch: int | None = None) -> np.ndarray:
    if runtime == "edgelite":
        from edgelite.interpreter import Interpreter
        it = Interpreter(model_content=content)
    else:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
        resolver = OpResolverType.BUILTIN_REF if runtime == "litert_ref" else \
            OpResolverType.AUTO
        it = Interpreter(model_content=content, experimental_op_resolver_type=resolver)
    detail = it.get_input_details()[0]
    if batch is not None:
        it.resize_tensor_input(detail["index"], list(x.shape))
    it.allocate_tensors()
    it.set_tensor(detail["index"], x)
    it.invoke()
    return np.array(it.get_tensor(it.get_output_details()[0]["index"]))


def layout(conversion) -> dict:
    return json.loads(load(conversion.content).get_metadata("edgelite.io_layout"))


@pytest.mark.parametrize("runtime", ["edgelite", "litert", "litert_ref"])
@pytest.mark.parametrize("name", list(MODELS))
def test_matches_onnxruntime_refs(models_dir, name, runtime):
    conversion = converted(models_dir, name)
    x, want = refs(models_dir, name)
    io = layout(conversion)
    got = run(conversion.content, np.transpose(x, io["inputs"][0]["perm"]), runtime)
    got = np.transpose(got, np.argsort(io["outputs"][0]["perm"]))
    assert got.shape == want.shape
    err = np.abs(got - want).max()
    assert err <= TOLERANCE * np.abs(want).max(), f"{name} on {runtime}: max error {err}"


@pytest.mark.parametrize("name", CONVNETS)
def test_no_transpose_inside_and_nhwc_input(models_dir, name):
    conversion = converted(models_dir, name)
    assert conversion.transposes == 0
    assert "TRANSPOSE" not in conversion.ops_out
    io = layout(conversion)
    assert io["inputs"][0]["perm"] == [0, 2, 3, 1]      # reaches a conv: channels-last
    x, _ = refs(models_dir, name)
    sg = conversion.model.subgraphs[0]
    assert sg.tensors[sg.inputs[0]].shape == tuple(np.transpose(x, (0, 2, 3, 1)).shape)


def test_ppocr_cls_fusions(models_dir):
    """BatchNormalization, conv bias adds, HardSigmoid's affine part, HardSwish and every
    ReLU / ReLU6 disappear into the convolutions, HARD_SWISH and fused activations."""
    ops = converted(models_dir, "ppocr_cls").ops_out
    for gone in ("TRANSPOSE", "RELU", "RELU6", "DIV", "SUB", "MINIMUM", "MAXIMUM",
                 "LOGISTIC", "SQUARED_DIFFERENCE", "RSQRT", "CAST", "STRIDED_SLICE",
                 "CONCATENATION"):
        assert gone not in ops, ops
    assert ops["CONV_2D"] + ops["DEPTHWISE_CONV_2D"] == 53       # the 53 Conv nodes
    assert ops["HARD_SWISH"] == 18                               # Add-Clip-Mul-Div x 18
    assert ops["RELU_0_TO_1"] == 9                               # HardSigmoid's clamp x 9
    assert ops["MUL"] == 9                                       # the squeeze-excite gates
    assert ops["ADD"] == 7                                       # residual adds only
    assert ops["MEAN"] == 10 and ops["RESHAPE"] == 1             # shape chain folded
    assert sum(ops.values()) == 114


def test_mobilenetv2_ops_and_time(models_dir):
    conversion = converted(models_dir, "syn_mobilenetv2")
    ops = conversion.ops_out
    assert ops == {"ADD": 10, "CONV_2D": 35, "DEPTHWISE_CONV_2D": 17, "FULLY_CONNECTED": 1,
                   "MEAN": 1, "PAD": 5}, ops   # every Clip(0, 6) fused as RELU6
    print(f"syn_mobilenetv2 conversion: {conversion.seconds:.2f} s")
    assert conversion.seconds < 5.0


def test_digits_cnn_flatten_permutes_fc_weights(models_dir):
    """NCHW flatten -> Gemm becomes NHWC RESHAPE -> FULLY_CONNECTED with permuted columns."""
    ops = converted(models_dir, "digits_cnn").ops_out
    assert ops == {"CONV_2D": 2, "FULLY_CONNECTED": 2, "MAX_POOL_2D": 2, "RESHAPE": 1}


def test_keep_io_layout(models_dir):
    conversion = converted(models_dir, "ppocr_cls", keep_io_layout=True)
    io = layout(conversion)
    assert io["inputs"][0]["perm"] == [0, 1, 2, 3]
    sg = conversion.model.subgraphs[0]
    assert sg.tensors[sg.inputs[0]].shape == (1, 3, 48, 192)
    assert conversion.transposes == 1            # the one at the input, as asked
    x, want = refs(models_dir, "ppocr_cls")
    for runtime in ("edgelite", "litert"):
        got = run(conversion.content, x, runtime)
        assert np.abs(got - want).max() <= TOLERANCE * np.abs(want).max()


def test_keep_io_layout_single_channel_needs_no_transpose(models_dir):
    """digits' [1, 1, 8, 8] input: NCHW -> NHWC moves only a size-1 dim, a RESHAPE."""
    conversion = converted(models_dir, "digits_cnn", keep_io_layout=True)
    assert conversion.transposes == 0
    x, want = refs(models_dir, "digits_cnn")
    got = run(conversion.content, x, "litert")
    assert np.abs(got - want).max() <= TOLERANCE * np.abs(want).max()


def test_dynamic_batch_stays_dynamic(models_dir):
    conversion = converted(models_dir, "ppocr_cls", shapes={"x": [-1, 3, 48, 192]})
    model = load(conversion.content)
    sg = model.subgraphs[0]
    assert sg.tensors[sg.inputs[0]].shape_signature == (-1, 48, 192, 3)
    assert sg.tensors[sg.outputs[0]].shape_signature == (-1, 2)
    x = np.random.default_rng(0).random((3, 3, 48, 192), dtype=np.float32)
    want = onnxruntime_run(models_dir / "ppocr_cls.onnx", {"x": x})[0]
    for runtime in ("edgelite", "litert"):
        got = run(conversion.content, x.transpose(0, 2, 3, 1).copy(), runtime, batch=3)
        assert got.shape == (3, 2)
        assert np.abs(got - want).max() <= TOLERANCE * np.abs(want).max()


def test_static_when_fixed(models_dir):
    sg = converted(models_dir, "ppocr_cls").model.subgraphs[0]
    assert all(t.shape_signature is None or -1 not in t.shape_signature for t in sg.tensors)


def test_signature_uses_onnx_names(models_dir):
    from ai_edge_litert.interpreter import Interpreter

    conversion = converted(models_dir, "digits_cnn")
    it = Interpreter(model_content=conversion.content)
    assert it.get_signature_list() == {"serving_default": {"inputs": ["image"],
                                                           "outputs": ["logits"]}}
    x, want = refs(models_dir, "digits_cnn")
    got = it.get_signature_runner("serving_default")(image=x.transpose(0, 2, 3, 1).copy())
    assert np.abs(got["logits"] - want).max() <= TOLERANCE * np.abs(want).max()
    details = it.get_input_details()[0], it.get_output_details()[0]
    assert [d["name"] for d in details] == ["image", "logits"]


def test_deterministic_bytes(models_dir):
    first = TFLiteConverter.from_onnx(models_dir / "digits_cnn.onnx").convert()
    second = TFLiteConverter.from_onnx(models_dir / "digits_cnn.onnx").convert()
    assert first == second
    assert first == converted(models_dir, "digits_cnn").content


def test_model_proto_input(models_dir):
    import onnx

    proto = onnx.load(str(models_dir / "digits_cnn.onnx"))
    content = TFLiteConverter.from_onnx(proto).convert()
    assert content == converted(models_dir, "digits_cnn").content


def test_transformer_gelu_and_layer_norm(models_dir):
    conversion = converted(models_dir, "syn_transformer")
    assert conversion.ops_in["Erf"] == 2 and conversion.ops_in["LayerNormalization"] == 5
    ops = conversion.ops_out
    assert ops["GELU"] == 2 and ops["RSQRT"] == 5
    assert "EXP" not in ops                       # no erf polynomial: the pattern fused


def test_op_counts_of_the_onnx_side(models_dir):
    conversion = converted(models_dir, "digits_cnn")
    assert conversion.ops_in == {"Conv": 2, "Gemm": 2, "MaxPool": 2, "Relu": 3, "Reshape": 1}
    assert Counter(op.op for op in conversion.model.subgraphs[0].operators) == \
        Counter(conversion.ops_out)
