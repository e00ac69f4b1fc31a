"""ONNX QDQ graphs for the QDQ tests, built with onnx.helper (`Graph`: activations through
QuantizeLinear -> DequantizeLinear pairs, int8 weights and int32 biases behind DequantizeLinear),
and what the tests read from a conversion: its ops, its feeds and outputs in ONNX's layout."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from edgelite.converter import TFLiteConverter
from edgelite.converter.lower_qdq import quantize_array

F = np.float32


# -- what a conversion holds ---------------------------------------------------------------------

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


def random_feeds(proto, seed=0, n=1) -> list:
    rng = np.random.default_rng(seed)
    feeds = []
    for _ in range(n):
        feeds.append([rng.uniform(-1.5, 2.5, [d.dim_value or 1 for d in
                                               i.type.tensor_type.shape.dim]).astype(F)
                      for i in proto.graph.input])
    return feeds


def output_scale(proto) -> float:
    last = proto.graph.node[-1]
    inits = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
    return float(inits[last.input[1]])


# -- QDQ graphs ----------------------------------------------------------------------------------

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
