"""Small float models for the quantization tests, built op by op with the converter's IRBuilder
(shapes inferred by the kernels), and helpers to run a model in edgelite and LiteRT."""
from __future__ import annotations

import numpy as np

from edgelite.schema import Model, Subgraph, Tensor, save

rng = np.random.default_rng(7)


def new_graph(input_shapes: dict):
    """(model, builder, {name: input tensor})."""
    from edgelite.converter.builder import IRBuilder

    model = Model()
    sg = Subgraph(name="main")
    model.subgraphs.append(sg)
    b = IRBuilder(model, sg)
    inputs = {}
    for name, shape in input_shapes.items():
        t = sg.add_tensor(Tensor(name, shape, "float32"))
        sg.inputs.append(t)
        inputs[name] = t
    return model, b, inputs


def conv(b, x, cout, act=0, k=3, scale=0.3, bias_shift=0.0, r=None):
    r = rng if r is None else r
    cin = b.shape(x)[-1]
    w = b.const(r.normal(0, scale, (cout, k, k, cin)).astype(np.float32))
    bias = b.const((r.normal(0, 0.1, cout) + bias_shift).astype(np.float32))
    return b.op("CONV_2D", [x, w, bias], dict(padding=0, stride_w=1, stride_h=1,
                                               fused_activation_function=act,
                                               dilation_w_factor=1, dilation_h_factor=1))


def branchy_model() -> Model:
    """Two convolutions concatenated (one also read by TANH: its input to the concatenation is
    requantized), max pool, ADD of a constant, LOGISTIC, MEAN, FULLY_CONNECTED, SOFTMAX."""
    model, b, ins = new_graph({"x": (1, 6, 6, 3)})
    r = np.random.default_rng(1)
    x = ins["x"]
    a = conv(b, x, 4, act=1, r=r)
    c = conv(b, x, 4, scale=0.8, bias_shift=1.0, r=r)
    t = b.op("TANH", [a])
    cat = b.op("CONCATENATION", [a, c], dict(axis=3))
    p = b.op("MAX_POOL_2D", [cat], dict(padding=1, stride_w=2, stride_h=2, filter_width=2,
                                         filter_height=2))
    s = b.op("ADD", [p, b.const(r.normal(0, 1, 8).astype(np.float32))])
    g = b.op("LOGISTIC", [s])
    m = b.op("MEAN", [g, b.const(np.array([1, 2], np.int32))], dict(keep_dims=False))
    w = b.const(r.normal(0, 0.5, (5, 8)).astype(np.float32))
    y = b.op("FULLY_CONNECTED", [m, w, b.const(np.zeros(5, np.float32))])
    out = b.op("SOFTMAX", [y], dict(beta=1.0))
    b.sg.outputs = [out, t, s]
    return model


def fallback_model() -> Model:
    """EXP (no int8 kernel in edgelite) between integer convolutions."""
    model, b, ins = new_graph({"x": (1, 5, 5, 2)})
    r = np.random.default_rng(2)
    a = conv(b, ins["x"], 3, scale=0.2, r=r)
    e = b.op("EXP", [a])
    c = conv(b, e, 2, act=1, r=r)
    b.sg.outputs = [c]
    return model


def run_edgelite(content: bytes, feeds: list, all_tensors=False) -> list:
    """edgelite with the reference kernels' arithmetic, as run_litert."""
    from edgelite.interpreter import Interpreter, OpResolverType
    it = Interpreter(model_content=content, experimental_preserve_all_tensors=all_tensors,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    return _run(it, feeds, all_tensors)


def run_litert(content: bytes, feeds: list, all_tensors=False) -> list:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    it = Interpreter(model_content=content, experimental_preserve_all_tensors=all_tensors,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    return _run(it, feeds, all_tensors)


def _run(it, feeds, all_tensors) -> list:
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), feeds):
        it.set_tensor(d["index"], x)
    it.invoke()
    if not all_tensors:
        return [it.get_tensor(d["index"]) for d in it.get_output_details()]
    values = {}
    for d in it.get_tensor_details():
        try:
            values[d["name"], d["index"]] = it.get_tensor(d["index"])
        except ValueError:
            pass
    return values


def calibration(model: Model, n: int = 32, scale: float = 1.0, seed: int = 0) -> list:
    sg = model.subgraphs[0]
    r = np.random.default_rng(seed)
    return [[r.normal(0, scale, sg.tensors[t].shape).astype(np.float32) for t in sg.inputs]
            for _ in range(n)]


def content(model: Model) -> bytes:
    return save(model)
