"""Cases for int4 weights (see test_ops.py): constants packed two values a byte, as LiteRT reads
them, unpacked by edgelite's plan: DEQUANTIZE to float; int8 FULLY_CONNECTED, CONV_2D and
DEPTHWISE_CONV_2D whose weights are int4 (bit-exact to LiteRT's reference kernels); hybrid
(float activations) FULLY_CONNECTED and CONV_2D with int4 weights."""
import numpy as np

from edgelite.schema import (Model, Operator, OperatorCode, QuantizationParameters, Subgraph,
                             Tensor, default_options, save)
from edgelite.schema.model import pack_int4
from tests.opmodel import Case

rng = np.random.default_rng(4)


def _q(scale, zero_point=None, axis=0) -> QuantizationParameters:
    scale = np.atleast_1d(np.asarray(scale, np.float32))
    zp = np.zeros(scale.size, np.int64) if zero_point is None else \
        np.atleast_1d(np.asarray(zero_point, np.int64))
    return QuantizationParameters(scale=scale, zero_point=zp, quantized_dimension=axis)


def _int4(shape, per_channel_axis=None):
    """Random int4 weights in [-8, 7] and their quantization (symmetric)."""
    w = rng.integers(-8, 8, shape).astype(np.int8)
    n = 1 if per_channel_axis is None else shape[per_channel_axis]
    return w, _q(rng.uniform(0.02, 0.2, n), axis=per_channel_axis or 0)


def dequantize_case(id, shape, axis=None, zero_point=None):
    w, q = _int4(shape, axis)
    if zero_point is not None:
        q = _q(q.scale, np.full(q.scale.size, zero_point), q.quantized_dimension)
    model, sg = Model(), Subgraph(name="main")
    x = sg.add_tensor(Tensor("w", shape, "int4", buffer=model.add_buffer(pack_int4(w)),
                             quantization=q))
    y = sg.add_tensor(Tensor("y", shape))
    sg.outputs = [y]
    sg.operators = [Operator(OperatorCode("DEQUANTIZE", 0), [x], [y],
                             default_options("DEQUANTIZE"))]
    model.subgraphs.append(sg)
    return Case(id, save(model), [])


def weights_case(id, op, x_shape, w_shape, axis, options, bias=True, per_channel=True,
                 xq=(0.05, 3), oq=(0.3, -5)):
    """`op` with int8 input and output and int4 weights (per channel along `axis`)."""
    w, wq = _int4(w_shape, axis if per_channel else None)
    model, sg = Model(), Subgraph(name="main")
    x = sg.add_tensor(Tensor("x", x_shape, "int8", quantization=_q(*xq)))
    wt = sg.add_tensor(Tensor("w", w_shape, "int4", buffer=model.add_buffer(pack_int4(w)),
                              quantization=wq))
    ins = [x, wt]
    cout = w_shape[axis]
    if bias:
        scales = np.broadcast_to(wq.scale, (cout,)) if per_channel else wq.scale
        b = rng.integers(-500, 500, cout).astype(np.int32)
        ins.append(sg.add_tensor(Tensor("b", (cout,), "int32", buffer=model.add_buffer(b),
                                        quantization=_q(xq[0] * scales))))
    elif op == "FULLY_CONNECTED":
        ins.append(-1)
    y = sg.add_tensor(Tensor("y", (1,), "int8", quantization=_q(*oq)))
    sg.inputs, sg.outputs = [x], [y]
    sg.operators = [Operator(OperatorCode(op, 0), ins, [y], default_options(op, **options))]
    model.subgraphs.append(sg)
    return Case(id, _with_output_shape(model, op, x_shape, w_shape, options),
                [rng.integers(-128, 128, x_shape).astype(np.int8)])


def _with_output_shape(model, op, x_shape, w_shape, options) -> bytes:
    """The output's shape, from the op's geometry (VALID padding, stride 1 in these cases)."""
    sg = model.subgraphs[0]
    y = sg.tensors[sg.outputs[0]]
    if op == "FULLY_CONNECTED":
        y.shape = (int(np.prod(x_shape)) // w_shape[1], w_shape[0])
    else:
        n, h, w, _ = x_shape
        kh, kw = w_shape[1], w_shape[2]
        cout = w_shape[0] if op == "CONV_2D" else w_shape[3]
        y.shape = (n, h - kh + 1, w - kw + 1, cout)
    return save(model)


def _conv(act=0, **extra):
    return dict(padding=1, stride_w=1, stride_h=1, fused_activation_function=act, **extra)


CASES = [
    dequantize_case("dequantize_per_tensor", (4, 6)),
    dequantize_case("dequantize_odd_count", (3, 5)),
    dequantize_case("dequantize_per_channel_axis0", (5, 3), axis=0),
    dequantize_case("dequantize_per_channel_axis1", (2, 7), axis=1),
    dequantize_case("dequantize_zero_point", (3, 3), zero_point=2),
    weights_case("fully_connected", "FULLY_CONNECTED", (2, 6), (4, 6), 0,
                 dict(fused_activation_function=0)),
    weights_case("fully_connected_odd_depth_relu", "FULLY_CONNECTED", (3, 7), (5, 7), 0,
                 dict(fused_activation_function=1)),
    weights_case("fully_connected_per_tensor_no_bias", "FULLY_CONNECTED", (2, 16), (3, 16), 0,
                 dict(fused_activation_function=3), bias=False, per_channel=False),
    weights_case("conv_2d", "CONV_2D", (1, 6, 5, 3), (4, 3, 3, 3), 0, _conv()),
    weights_case("conv_2d_relu6_odd", "CONV_2D", (1, 5, 5, 3), (3, 3, 1, 3), 0, _conv(act=3)),
    weights_case("depthwise_conv_2d", "DEPTHWISE_CONV_2D", (1, 6, 6, 4), (1, 3, 3, 4), 3,
                 _conv(depth_multiplier=1)),
]


def hybrid_case(id, op, x_shape, w_shape, axis, options, per_channel=True, bias=True):
    """`op` with float32 input and output and int4 weights (a dynamic-range model): the input
    is quantized on the fly, the integer sums are LiteRT's exactly."""
    w, wq = _int4(w_shape, axis if per_channel else None)
    model, sg = Model(), Subgraph(name="main")
    x = sg.add_tensor(Tensor("x", x_shape))
    wt = sg.add_tensor(Tensor("w", w_shape, "int4", buffer=model.add_buffer(pack_int4(w)),
                              quantization=wq))
    cout = w_shape[axis]
    ins = [x, wt]
    if bias:
        ins.append(sg.add_tensor(Tensor("b", (cout,), buffer=model.add_buffer(
            rng.normal(0, 0.5, cout).astype(np.float32)))))
    elif op == "FULLY_CONNECTED":
        ins.append(-1)
    y = sg.add_tensor(Tensor("y", (1,)))
    sg.inputs, sg.outputs = [x], [y]
    sg.operators = [Operator(OperatorCode(op, 0), ins, [y], default_options(op, **options))]
    model.subgraphs.append(sg)
    return Case(id, _with_output_shape(model, op, x_shape, w_shape, options),
                [rng.normal(0, 1, x_shape).astype(np.float32)], rtol=2e-5, atol=2e-5)


CASES += [
    hybrid_case("hybrid_fully_connected", "FULLY_CONNECTED", (3, 6), (4, 6), 0,
                dict(fused_activation_function=0)),
    hybrid_case("hybrid_fully_connected_per_tensor_relu", "FULLY_CONNECTED", (2, 9), (5, 9), 0,
                dict(fused_activation_function=1), per_channel=False, bias=False),
    hybrid_case("hybrid_conv_2d", "CONV_2D", (1, 6, 5, 3), (4, 3, 3, 3), 0, _conv()),
    # (LiteRT has no hybrid DEPTHWISE_CONV_2D with int4 weights: "not currently supported".)
]
