"""ONNX QDQ models (QuantizeLinear / DequantizeLinear) convert to integer .tflite models with the
QDQ model's own parameters: onnxruntime's quantized digits CNN (accuracy and outputs against
onnxruntime's, bits against LiteRT's reference kernels, weights carried over exactly), and small
QDQ graphs built with onnx.helper, run bit-identically in edgelite and LiteRT."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("ai_edge_litert", reason="LiteRT is the oracle")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from edgelite.converter import TFLiteConverter  # noqa: E402
from edgelite.converter.convert import convert_onnx  # noqa: E402
from edgelite.converter.errors import ConversionError  # noqa: E402
from edgelite.converter.lowerings import supported_ops  # noqa: E402
from edgelite.converter.qdq import dequantize_array, quantize_array  # noqa: E402

from tests.oracles import onnxruntime_run  # noqa: E402

from .graphs import run_edgelite, run_litert  # noqa: E402

F = np.float32


# -- helpers -------------------------------------------------------------------------------------

def ops_of(conversion) -> list:
    sg = conversion.model.subgraphs[0]
    return [(op.op, sg.tensors[op.inputs[0]].dtype if op.inputs else None)
            for op in sg.operators]


def integer_ops(conversion) -> dict:
    """{op: count} of the ops that read integer data."""
    counts: dict = {}
    for op, dtype in ops_of(conversion):
        if dtype in ("int8", "uint8") and op not in ("DEQUANTIZE", "QUANTIZE"):
            counts[op] = counts.get(op, 0) + 1
    return counts


def float_ops(conversion) -> list:
    return [op for op, dtype in ops_of(conversion)
            if dtype == "float32" and op not in ("QUANTIZE", "DEQUANTIZE")]


def to_tflite(feeds: list, conversion) -> list:
    """ONNX-layout feeds in the .tflite inputs' layout and dtype."""
    from edgelite.interpreter import Interpreter

    it = Interpreter(model_content=conversion.content)
    out = []
    for x, entry, d in zip(feeds, conversion.io_layout["inputs"], it.get_input_details()):
        x = np.transpose(x, entry["perm"])
        if d["dtype"] != np.float32:
            scale, zp = d["quantization"]
            info = np.iinfo(d["dtype"])
            x = np.clip(np.round(x / scale) + zp, info.min, info.max).astype(d["dtype"])
        out.append(np.ascontiguousarray(x))
    return out


def dequantized_outputs(conversion, outs: list) -> list:
    """Outputs as floats in ONNX's layout."""
    from edgelite.interpreter import Interpreter

    it = Interpreter(model_content=conversion.content)
    result = []
    for y, entry, d in zip(outs, conversion.io_layout["outputs"], it.get_output_details()):
        y = np.asarray(y)
        if y.dtype != np.float32:
            scale, zp = d["quantization"]
            y = (y.astype(np.float64) - zp) * scale
        result.append(np.transpose(y, np.argsort(entry["perm"])))
    return result


def convert(proto, **settings):
    c = TFLiteConverter.from_onnx(proto)
    for name, value in settings.items():
        setattr(c, name, value)
    c.convert()
    return c.last_conversion


# -- the digits CNN quantized by onnxruntime -----------------------------------------------------

@pytest.fixture(scope="module")
def digits(models_dir):
    d = np.load(models_dir / "digits.npz")
    path = models_dir / "digits_cnn_int8_qdq.onnx"
    x = d["x_test"].astype(F)
    ort_out = np.concatenate([onnxruntime_run(str(path), {"image": x[i:i + 1]})[0]
                              for i in range(len(x))])
    return {"path": path, "x": x, "y": d["y_test"], "ort": ort_out,
            "conversion": convert(path)}


def predict(conversion, images, litert=False) -> np.ndarray:
    run = run_litert if litert else run_edgelite
    return np.concatenate([run(conversion.content, to_tflite([x[None]], conversion))[0]
                           for x in images])


def accuracy(outputs, labels) -> float:
    return float(np.mean(np.argmax(outputs, axis=1) == labels))


def test_digits_converts_to_integer_ops(digits):
    c = digits["conversion"]
    assert integer_ops(c) == {"CONV_2D": 2, "FULLY_CONNECTED": 2, "MAX_POOL_2D": 2,
                              "RESHAPE": 1}
    assert float_ops(c) == []                       # no float convolution left
    assert c.ops_out == {"CONV_2D": 2, "FULLY_CONNECTED": 2, "MAX_POOL_2D": 2, "RESHAPE": 1,
                         "QUANTIZE": 1, "DEQUANTIZE": 1}   # at the float input and output
    assert c.transposes == 0
    assert c.quantization.lines()[0] == \
        "quantization (int8): CONV_2D 2, FULLY_CONNECTED 2, MAX_POOL_2D 2, RESHAPE 1"
    assert not any("match no" in n for n in c.quantization.notes)


def test_digits_weights_scales_and_zero_points_are_the_qdq_models(digits):
    proto = onnx.load(str(digits["path"]))
    inits = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
    sg = digits["conversion"].model.subgraphs[0]
    convs = [op for op in sg.operators if op.op in ("CONV_2D", "FULLY_CONNECTED")]
    for op, layer in zip(convs, ("0", "3", "7", "9")):
        w, b = sg.tensors[op.inputs[1]], sg.tensors[op.inputs[2]]
        model = digits["conversion"].model
        qw, qb = model.constant(sg, op.inputs[1]), model.constant(sg, op.inputs[2])
        onnx_w = inits[f"{layer}.weight_quantized"]
        if onnx_w.ndim == 4:
            onnx_w = onnx_w.transpose(0, 2, 3, 1)          # OIHW -> OHWI
        assert qw.dtype == np.int8 and w.quantization.quantized_dimension == 0
        # the first FULLY_CONNECTED's columns are permuted (flatten of NHWC, not NCHW)
        np.testing.assert_array_equal(np.sort(qw.reshape(len(qw), -1), axis=1),
                                      np.sort(onnx_w.reshape(len(onnx_w), -1), axis=1))
        if layer != "7":
            np.testing.assert_array_equal(qw, onnx_w)
        np.testing.assert_array_equal(w.quantization.scale, inits[f"{layer}.weight_scale"])
        np.testing.assert_array_equal(qb, inits[f"{layer}.bias_quantized"])
        np.testing.assert_array_equal(b.quantization.scale,
                                      inits[f"{layer}.bias_quantized_scale"])
    logits = sg.tensors[sg.operators[-1].inputs[0]].quantization
    assert float(logits.scale[0]) == float(inits["logits_scale"])
    assert int(logits.zero_point[0]) == int(inits["logits_zero_point"])


def test_digits_accuracy_bits_and_error_against_onnxruntime(digits):
    c = digits["conversion"]
    ours = predict(c, digits["x"])
    np.testing.assert_array_equal(predict(c, digits["x"], litert=True), ours)  # all 360
    ort_accuracy = accuracy(digits["ort"], digits["y"])
    assert accuracy(ours, digits["y"]) >= ort_accuracy - 0.003
    scale = float(c.model.subgraphs[0].tensors[c.model.subgraphs[0].operators[-1].inputs[0]]
                  .quantization.scale[0])
    error = np.abs(ours - digits["ort"]).max()
    print(f"\ndigits QDQ: accuracy {accuracy(ours, digits['y']):.4f} (onnxruntime "
          f"{ort_accuracy:.4f}); max |edgelite - onnxruntime| {error:.4g} = "
          f"{error / scale:.2f} output LSB; argmax agrees on "
          f"{np.mean(ours.argmax(1) == digits['ort'].argmax(1)):.4f}")
    assert error <= 2 * scale + 1e-6    # onnxruntime's integer kernels round their own way


def test_digits_int8_io(digits):
    c = convert(digits["path"], inference_input_type=np.int8, inference_output_type=np.int8)
    assert c.ops_out == {"CONV_2D": 2, "FULLY_CONNECTED": 2, "MAX_POOL_2D": 2, "RESHAPE": 1}
    sg = c.model.subgraphs[0]
    assert [sg.tensors[t].dtype for t in (*sg.inputs, *sg.outputs)] == ["int8", "int8"]
    assert [sg.tensors[t].name for t in (*sg.inputs, *sg.outputs)] == ["image", "logits"]
    raw = [run_edgelite(c.content, to_tflite([x[None]], c))[0] for x in digits["x"][:40]]
    assert all(r.dtype == np.int8 for r in raw)
    ours = np.concatenate(dequantized_outputs(c, [np.concatenate(raw)]))
    np.testing.assert_allclose(ours, predict(digits["conversion"], digits["x"][:40]), atol=1e-5)


def test_digits_cli_check(digits, tmp_path):
    from tests.cli.helpers import invoke

    out = tmp_path / "out.tflite"
    result = invoke(["convert", str(digits["path"]), "-o", str(out),
                                      "--check"])
    assert result.exit_code == 0, result.output
    assert "quantization (int8): CONV_2D 2, FULLY_CONNECTED 2" in result.output
    assert "QuantizeLinear / DequantizeLinear" in result.output
    assert "identical to LiteRT" in result.output
    assert out.read_bytes() == digits["conversion"].content


def test_settings_that_would_quantize_again_fail(digits):
    with pytest.raises(ConversionError, match="already quantized.*representative_dataset"):
        convert(digits["path"], representative_dataset=lambda: [])
    with pytest.raises(ConversionError, match="inference_input_type=int16"):
        convert(digits["path"], inference_input_type=np.int16)


# -- small QDQ graphs built with onnx.helper -----------------------------------------------------

class Graph:
    """An ONNX QDQ graph under construction: activations pass through Q -> DQ pairs, weights
    are int8 initializers behind DequantizeLinear (symmetric, per tensor or per channel),
    biases int32 with scale input x weight."""

    def __init__(self, seed: int = 0, act=TensorProto.INT8):
        self.nodes, self.inits, self.inputs = [], {}, []
        self.rng = np.random.default_rng(seed)
        self.act = act
        self.scales: dict = {}     # activation -> its scale

    def input(self, name, shape):
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
        return name

    def const(self, name, value):
        self.inits[name] = np.asarray(value)
        return name

    def qdq(self, x, lo, hi):
        """x through a Q -> DQ pair for the range [lo, hi]."""
        scale = F((hi - lo) / 255.0)
        if self.act == TensorProto.INT16:
            scale, zp = F(max(-lo, hi) / 32767), np.int16(0)
        elif self.act == TensorProto.UINT8:
            zp = np.uint8(np.clip(np.round(-lo / scale), 0, 255))
        else:
            zp = np.int8(np.clip(np.round(-128 - lo / scale), -128, 127))
        s, z = self.const(f"{x}_scale", scale), self.const(f"{x}_zp", zp)
        self.nodes += [helper.make_node("QuantizeLinear", [x, s, z], [f"{x}_q"]),
                       helper.make_node("DequantizeLinear", [f"{x}_q", s, z], [f"{x}_dq"])]
        self.scales[f"{x}_dq"] = scale
        return f"{x}_dq"

    def weight(self, name, w, axis=None):
        """int8 weights behind DequantizeLinear; axis None: one scale."""
        w = np.asarray(w, F)
        if axis is None:
            scale = np.array(np.abs(w).max() / 127, F)
        else:
            scale = (np.abs(np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)).max(1) / 127
                     ).astype(F)
        q = quantize_array(w, scale, np.zeros(scale.shape, np.int8), axis)
        self.const(f"{name}_q", q)
        self.const(f"{name}_scale", scale)
        self.const(f"{name}_zp", np.zeros(scale.shape, np.int8))
        attrs = {} if axis is None else {"axis": axis}
        self.nodes.append(helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_scale",
                                                                f"{name}_zp"], [name], **attrs))
        return name, scale

    def bias(self, name, b, input_scale, weight_scale):
        scale = (F(input_scale) * np.asarray(weight_scale, F)).astype(F)
        scale = np.broadcast_to(scale, b.shape).astype(F).copy()
        q = np.round(b / scale).astype(np.int32)
        self.const(f"{name}_q", q)
        self.const(f"{name}_scale", scale)
        self.const(f"{name}_zp", np.zeros(b.shape, np.int32))
        self.nodes.append(helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_scale",
                                                                f"{name}_zp"], [name], axis=0))
        return name

    def node(self, op, inputs, output, **attrs):
        self.nodes.append(helper.make_node(op, inputs, [output], **attrs))
        return output

    def model(self, outputs, opset=13):
        outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]
        inits = [numpy_helper.from_array(v, k) for k, v in self.inits.items()]
        graph = helper.make_graph(self.nodes, "qdq", self.inputs, outs, inits)
        proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        proto.ir_version = 8
        inferred = onnx.shape_inference.infer_shapes(proto)   # outputs get their shapes
        del proto.graph.output[:]
        proto.graph.output.extend(inferred.graph.output)
        onnx.checker.check_model(proto, full_check=True)
        return proto


def conv_model(per_channel: bool, depthwise=False, relu=False, act=TensorProto.INT8):
    g = Graph(1, act)
    x = g.qdq(g.input("x", [1, 4, 9, 9]), -1.0, 1.5)
    c_out, group = (8, 4) if depthwise else (6, 1)
    w, ws = g.weight("w", g.rng.normal(0, 0.4, (c_out, 4 // group, 3, 3)),
                     0 if per_channel else None)
    b = g.bias("b", g.rng.normal(0, 0.3, c_out).astype(F), g.scales[x], ws)
    y = g.node("Conv", [x, w, b], "conv", pads=[1, 1, 1, 1], strides=[2, 1], group=group)
    y = g.qdq(y, -4.0, 4.0)
    if relu:
        y = g.qdq(g.node("Relu", [y], "relu"), 0.0, 4.0)
    return g.model([y])


def gemm_model(per_channel: bool):
    """Gemm (transB, per-channel axis 0) then MatMul + Add (weights [K, N], axis 1)."""
    g = Graph(2)
    x = g.qdq(g.input("x", [3, 12]), -2.0, 2.0)
    w, ws = g.weight("w", g.rng.normal(0, 0.3, (10, 12)), 0 if per_channel else None)
    b = g.bias("b", g.rng.normal(0, 0.3, 10).astype(F), g.scales[x], ws)
    y = g.qdq(g.node("Gemm", [x, w, b], "gemm", transB=1), -3.0, 3.0)
    w2, ws2 = g.weight("w2", g.rng.normal(0, 0.3, (10, 5)), 1 if per_channel else None)
    b2 = g.bias("b2", g.rng.normal(0, 0.3, 5).astype(F), g.scales[y], ws2)
    m = g.qdq(g.node("MatMul", [y, w2], "matmul"), -3.0, 3.0)
    return g.model([g.qdq(g.node("Add", [m, b2], "add"), -3.0, 3.0)])


def add_model(act=TensorProto.INT8):
    """Two inputs on different grids added, then added to an int8 constant."""
    g = Graph(3, act)
    a = g.qdq(g.input("a", [1, 3, 5, 5]), -1.0, 1.0)
    b = g.qdq(g.input("b", [1, 3, 5, 5]), -0.5, 2.0)
    s = g.qdq(g.node("Add", [a, b], "sum"), -1.5, 3.0)
    c, _ = g.weight("c", g.rng.normal(0, 1, (1, 3, 1, 1)))
    return g.model([g.qdq(g.node("Add", [s, c], "shifted"), -3.0, 5.0)])


def pool_reshape_model():
    """Conv, then MaxPool and Reshape whose QDQ output parameters differ from their inputs'
    (TFLite's int8 ops keep the input's: requantized after), Softmax, and Sin (no integer
    kernel: float between DEQUANTIZE and QUANTIZE)."""
    g = Graph(4)
    x = g.qdq(g.input("x", [1, 2, 6, 6]), -1.0, 1.0)
    w, ws = g.weight("w", g.rng.normal(0, 0.4, (4, 2, 3, 3)), 0)
    b = g.bias("b", g.rng.normal(0, 0.3, 4).astype(F), g.scales[x], ws)
    y = g.qdq(g.node("Conv", [x, w, b], "conv", pads=[1, 1, 1, 1]), -3.0, 3.0)
    p = g.qdq(g.node("MaxPool", [y], "pool", kernel_shape=[2, 2], strides=[2, 2]), -2.0, 3.5)
    shape = g.const("shape", np.array([1, 36], np.int64))
    r = g.qdq(g.node("Reshape", [p, shape], "flat"), -2.5, 3.0)
    s = g.qdq(g.node("Sin", [r], "sin"), -1.0, 1.0)
    w2, ws2 = g.weight("w2", g.rng.normal(0, 0.3, (36, 6)), 1)
    m = g.qdq(g.node("MatMul", [s, w2], "fc"), -2.0, 2.0)
    return g.model([g.qdq(g.node("Softmax", [m], "softmax", axis=-1), 0.0, 1.0)])


def concat_model(batch=1):
    """Concat of two grids into a third (TFLite's int8 CONCATENATION shares one), then a
    per-channel conv; `batch` may be a name (a dynamic dim)."""
    g = Graph(7)
    a = g.qdq(g.input("a", [batch, 2, 5, 5]), -1.0, 1.0)
    b = g.qdq(g.input("b", [batch, 3, 5, 5]), -0.5, 2.0)
    cat = g.qdq(g.node("Concat", [a, b], "cat", axis=1), -0.8, 1.8)   # clips both
    w, ws = g.weight("w", g.rng.normal(0, 0.4, (4, 5, 1, 1)), 0)
    bias = g.bias("bias", g.rng.normal(0, 0.3, 4).astype(F), g.scales[cat], ws)
    return g.model([g.qdq(g.node("Conv", [cat, w, bias], "conv"), -3.0, 3.0)])


CASES = {
    "conv per-channel": (lambda: conv_model(True), {"CONV_2D": 1}),
    "conv per-tensor + relu": (lambda: conv_model(False, relu=True), {"CONV_2D": 1}),
    "depthwise per-channel": (lambda: conv_model(True, depthwise=True),
                              {"DEPTHWISE_CONV_2D": 1}),
    "conv uint8 activations": (lambda: conv_model(True, act=TensorProto.UINT8),
                               {"CONV_2D": 1}),
    "gemm per-channel": (lambda: gemm_model(True), {"FULLY_CONNECTED": 2}),
    "gemm per-tensor": (lambda: gemm_model(False), {"FULLY_CONNECTED": 2}),
    "add": (add_model, {"ADD": 2}),
    "add uint8": (lambda: add_model(TensorProto.UINT8), {"ADD": 2}),
    "concat": (concat_model, {"CONCATENATION": 1, "CONV_2D": 1}),
    "dynamic batch": (lambda: concat_model("N"), {"CONCATENATION": 1, "CONV_2D": 1}),
    "pool reshape softmax sin": (pool_reshape_model,
                                 {"CONV_2D": 1, "MAX_POOL_2D": 1, "RESHAPE": 1,
                                  "FULLY_CONNECTED": 1, "SOFTMAX": 1}),
}


def test_same_and_fixed_outputs_requantized_to_the_qdq_parameters():
    """MAX_POOL_2D, RESHAPE and SOFTMAX keep TFLite's output parameters (their input's, or
    1/256 and -128); a QUANTIZE after each requantizes to the QDQ model's; SIN stays float."""
    c = convert(pool_reshape_model())
    sg = c.model.subgraphs[0]
    producer = {t: op for op in sg.operators for t in op.outputs}
    params = lambda t: (float(sg.tensors[t].quantization.scale[0]),  # noqa: E731
                        int(sg.tensors[t].quantization.zero_point[0]))
    for op in sg.operators:
        if op.op in ("MAX_POOL_2D", "RESHAPE"):
            assert params(op.outputs[0]) == params(op.inputs[0])
        if op.op == "SOFTMAX":
            assert params(op.outputs[0]) == (1 / 256, -128)
    requantized = [producer[op.inputs[0]].op for op in sg.operators
                   if op.op == "QUANTIZE" and sg.tensors[op.inputs[0]].dtype == "int8"]
    assert requantized == ["MAX_POOL_2D", "RESHAPE", "SOFTMAX"]
    assert c.quantization.requantized == 3
    assert float_ops(c) == ["SIN"]
    assert "SIN" in " ".join(c.quantization.lines())


def test_concatenation_keeps_the_qdq_output_grid():
    """Its inputs are requantized onto the output's QDQ grid (not onto the union of ranges)."""
    c = convert(concat_model())
    sg = c.model.subgraphs[0]
    cat = next(op for op in sg.operators if op.op == "CONCATENATION")
    out = sg.tensors[cat.outputs[0]].quantization
    assert np.isclose(out.scale[0], 2.6 / 255)
    assert all(sg.tensors[t].quantization.scale[0] == out.scale[0] for t in cat.inputs)
    assert c.quantization.requantized == 2    # one per input, none after


def random_feeds(proto, seed=0, n=1) -> list:
    rng = np.random.default_rng(seed)
    feeds = []
    for _ in range(n):
        feeds.append([rng.uniform(-1.5, 2.5, [d.dim_value or 1 for d in
                                               i.type.tensor_type.shape.dim]).astype(F)
                      for i in proto.graph.input])
    return feeds


@pytest.mark.parametrize("name", list(CASES))
def test_small_qdq_graphs(name):
    make, expected = CASES[name]
    proto = make()
    c = convert(proto)
    for op, n in expected.items():
        assert integer_ops(c).get(op, 0) >= n, (name, ops_of(c))
    assert not {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"} & set(float_ops(c))
    _assert_qdq_weight_scales(proto, c)
    names = [i.name for i in proto.graph.input]
    worst = 0.0
    for feeds in random_feeds(proto, n=8):
        tflite_feeds = to_tflite(feeds, c)
        ours = run_edgelite(c.content, tflite_feeds)
        theirs = run_litert(c.content, tflite_feeds)
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(a, b)          # bit-identical
        ref = onnxruntime_run(proto, dict(zip(names, feeds)))
        for y, r in zip(dequantized_outputs(c, ours), ref):
            worst = max(worst, float(np.abs(y - r).max()))
    out_scale = _output_scale(proto)
    print(f"\n{name}: max |edgelite - onnxruntime| {worst:.4g} = {worst / out_scale:.2f} LSB")
    assert worst <= 2 * out_scale + 1e-6


def _assert_qdq_weight_scales(proto, conversion) -> None:
    """Every weight keeps the scales of its DequantizeLinear, along TFLite's channel axis."""
    inits = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
    weights = {tuple(inits[n.input[1]].reshape(-1)) for n in proto.graph.node
               if n.op_type == "DequantizeLinear" and inits.get(n.input[0], np.zeros(0)).dtype
               == np.int8}
    sg = conversion.model.subgraphs[0]
    for op in sg.operators:
        if op.op in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
            q = sg.tensors[op.inputs[1]].quantization
            assert tuple(q.scale) in weights, op.op
            if q.scale.size > 1:
                assert q.quantized_dimension == (3 if op.op == "DEPTHWISE_CONV_2D" else 0)


def _output_scale(proto) -> float:
    last = proto.graph.node[-1]
    inits = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
    return float(inits[last.input[1]])


def test_the_pairs_are_the_converters_ops():
    assert {"QuantizeLinear", "DequantizeLinear"} <= set(supported_ops())


def test_float_import_keeps_fake_quantization():
    """convert_onnx alone gives the float graph with QUANTIZE / DEQUANTIZE pairs: it computes
    what onnxruntime does (up to QUANTIZE's rounding of halves), and the pairs after MaxPool and
    Reshape that repeat their input's grid are gone."""
    proto = conv_model(True)
    c = convert_onnx(proto)
    assert c.ops_out == {"QUANTIZE": 2, "DEQUANTIZE": 2, "CONV_2D": 1}
    feeds = random_feeds(proto)[0]
    ours = run_edgelite(c.content, to_tflite(feeds, c))
    ref = onnxruntime_run(proto, {"x": feeds[0]})
    np.testing.assert_allclose(dequantized_outputs(c, ours)[0], ref[0], atol=1e-6)


def test_identity_pairs_after_value_moving_ops_go():
    g = Graph(5)
    x = g.qdq(g.input("x", [1, 2, 4, 4]), -1.0, 1.0)
    p = g.node("MaxPool", [x], "pool", kernel_shape=[2, 2], strides=[2, 2])
    same = g.qdq(p, -1.0, 1.0)                    # the same grid: an identity
    other = g.qdq(g.node("Relu", [same], "relu"), 0.0, 1.0)
    c = convert_onnx(g.model([other]))
    assert c.ops_out["QUANTIZE"] == 2 and c.ops_out["DEQUANTIZE"] == 2


def test_constants_quantized_in_the_graph():
    """Float weights behind QuantizeLinear -> DequantizeLinear fold into the same weights."""
    w = np.random.default_rng(0).normal(0, 0.5, (3, 4)).astype(F)
    scale = (np.abs(w).max(1) / 127).astype(F)
    q = quantize_array(w, scale, np.zeros(3, np.int8), 0)
    np.testing.assert_array_equal(
        dequantize_array(q, scale, np.zeros(3, np.int8), 0),
        q.astype(F) * scale[:, None])
    g = Graph(6)
    x = g.qdq(g.input("x", [2, 4]), -1.0, 1.0)
    g.const("w", w.T.copy())
    g.const("ws", scale)
    g.const("wz", np.zeros(3, np.int8))
    g.node("QuantizeLinear", ["w", "ws", "wz"], "wq", axis=1)
    g.node("DequantizeLinear", ["wq", "ws", "wz"], "wdq", axis=1)
    y = g.qdq(g.node("MatMul", [x, "wdq"], "y"), -2.0, 2.0)
    c = convert(g.model([y]))
    assert integer_ops(c) == {"FULLY_CONNECTED": 1}
    sg = c.model.subgraphs[0]
    fc = next(op for op in sg.operators if op.op == "FULLY_CONNECTED")
    np.testing.assert_array_equal(c.model.constant(sg, fc.inputs[1]), q)
    np.testing.assert_array_equal(sg.tensors[fc.inputs[1]].quantization.scale, scale)


# -- a small convnet quantized by onnxruntime's quantize_static ----------------------------------

def float_convnet():
    """Conv-Relu, MaxPool, a residual block (Conv-Relu, Conv, Add, Relu), GlobalAveragePool,
    Flatten, Gemm: a float model for onnxruntime's quantizer."""
    rng = np.random.default_rng(8)
    g = Graph(8)
    x = g.input("x", [1, 3, 12, 12])

    def conv(name, src, c_in, c_out, relu):
        w = g.const(f"{name}_w", rng.normal(0, 0.5 / np.sqrt(c_in), (c_out, c_in, 3, 3))
                    .astype(F))
        b = g.const(f"{name}_b", rng.normal(0, 0.1, c_out).astype(F))
        y = g.node("Conv", [src, w, b], name, pads=[1, 1, 1, 1])
        return g.node("Relu", [y], f"{name}_relu") if relu else y

    y = g.node("MaxPool", [conv("c1", x, 3, 8, True)], "pool", kernel_shape=[2, 2],
               strides=[2, 2])
    r = conv("c3", conv("c2", y, 8, 8, True), 8, 8, False)
    y = g.node("Relu", [g.node("Add", [y, r], "res")], "res_relu")
    y = g.node("Flatten", [g.node("GlobalAveragePool", [y], "gap")], "flat")
    w = g.const("fc_w", rng.normal(0, 0.4, (5, 8)).astype(F))
    b = g.const("fc_b", rng.normal(0, 0.1, 5).astype(F))
    return g.model([g.node("Gemm", [y, w, b], "logits", transB=1)])


@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("activations", ["QInt8", "QUInt8"])
def test_onnxruntime_quantized_convnet(tmp_path, per_channel, activations):
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)

    rng = np.random.default_rng(9)
    calibration = [rng.uniform(0, 1, (1, 3, 12, 12)).astype(F) for _ in range(16)]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.samples = iter({"x": x} for x in calibration)

        def get_next(self):
            return next(self.samples, None)

    src, dst = tmp_path / "float.onnx", tmp_path / "qdq.onnx"
    onnx.save(float_convnet(), str(src))
    quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=per_channel, activation_type=getattr(QuantType, activations),
                    weight_type=QuantType.QInt8)
    c = convert(dst)
    assert float_ops(c) == [], ops_of(c)
    assert {"CONV_2D": 3, "FULLY_CONNECTED": 1, "ADD": 1} .items() <= integer_ops(c).items()
    assert not any("match no" in n for n in c.quantization.notes), c.quantization.notes
    worst, scale = 0.0, _output_scale(onnx.load(str(dst)))
    for x in [rng.uniform(0, 1, (1, 3, 12, 12)).astype(F) for _ in range(8)]:
        feeds = to_tflite([x], c)
        ours = run_edgelite(c.content, feeds)
        np.testing.assert_array_equal(run_litert(c.content, feeds)[0], ours[0])
        ref = onnxruntime_run(str(dst), {"x": x})[0]
        worst = max(worst, float(np.abs(dequantized_outputs(c, ours)[0] - ref).max()))
    print(f"\nonnxruntime-quantized convnet ({activations}, per channel {per_channel}): "
          f"max |edgelite - onnxruntime| {worst:.4g} = {worst / scale:.2f} LSB")
    assert worst <= 3 * scale + 1e-6


def test_int16_pairs_stay_fake_quantization():
    """16-bit QDQ (opset 21) converts, with its pairs as float QUANTIZE / DEQUANTIZE ops around
    float ops: what onnxruntime computes, no integer op."""
    g = Graph(10, TensorProto.INT16)
    x = g.qdq(g.input("x", [1, 4, 9, 9]), -1.0, 1.5)
    w, ws = g.weight("w", g.rng.normal(0, 0.4, (6, 4, 3, 3)), 0)
    y = g.qdq(g.node("Conv", [x, w], "conv", pads=[1, 1, 1, 1]), -4.0, 4.0)
    proto = g.model([y], opset=21)
    c = convert(proto)
    assert integer_ops(c) == {} and "CONV_2D" in float_ops(c)
    feeds = random_feeds(proto)[0]
    ours = run_edgelite(c.content, to_tflite(feeds, c))
    np.testing.assert_array_equal(run_litert(c.content, to_tflite(feeds, c))[0], ours[0])
    ref = onnxruntime_run(proto, {"x": feeds[0]})[0]
    np.testing.assert_allclose(dequantized_outputs(c, ours)[0], ref, atol=4 / 32767 * 1.01)
