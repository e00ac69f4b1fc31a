"""interpreter/kernels/hybrid_row.py's one-row dynamic-range FULLY_CONNECTED against the hybrid
kernel it stands in for (hybrid.fully_connected under the default resolver, run through the
interpreter), times the fused loop's column scale (0.5 or 1 per column), bit for bit, on
rows of every kind: mixed signs, one sign, zeros, constants, exact halves, tiny and large values,
depths that are not multiples of 8, per-tensor and per-channel scales, with and without bias,
asymmetric and symmetric input quantization, and sums past float32's exact range."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite import interpreter as edgelite_interpreter
from edgelite.interpreter.kernels.hybrid_row import row_product
from edgelite.interpreter.kernels.registry import TensorInfo
from edgelite.schema import (Model, Operator, OperatorCode, QuantizationParameters, Subgraph,
                             Tensor, default_options, save)


def _weights(rng, units, depth, per_channel, big):
    w = rng.integers(-127, 128, (units, depth)).astype(np.int8)
    if big:   # |sum| * 255 past 2^24: the kernel sums in float64
        w[:] = np.where(rng.random((units, depth)) < 0.5, -127, 127).astype(np.int8)
    scale = (rng.random(units if per_channel else 1) * 0.01 + 1e-3).astype(np.float32)
    return w, scale


def _model(w, scale, bias, asymmetric) -> bytes:
    units, depth = w.shape
    model = Model()
    sg = Subgraph(name="main")
    x = sg.add_tensor(Tensor("x", (1, depth)))
    quant = QuantizationParameters(scale=scale, zero_point=np.zeros(scale.size, np.int64))
    wt = sg.add_tensor(Tensor("w", w.shape, "int8", model.add_buffer(w), quantization=quant))
    bt = -1 if bias is None else sg.add_tensor(Tensor("b", bias.shape, "float32",
                                                      model.add_buffer(bias)))
    y = sg.add_tensor(Tensor("y", (1, units)))
    sg.inputs, sg.outputs = [x], [y]
    sg.operators = [Operator(OperatorCode("FULLY_CONNECTED", 0), [x, wt, bt], [y],
                             default_options("FULLY_CONNECTED",
                                             asymmetric_quantize_inputs=asymmetric))]
    model.subgraphs.append(sg)
    return save(model)


def _rows(rng, depth):
    rows = [rng.standard_normal(depth), np.abs(rng.standard_normal(depth)),
            -np.abs(rng.standard_normal(depth)), np.zeros(depth), np.full(depth, 0.75),
            np.full(depth, -2.5), rng.standard_normal(depth) * 1e-6,
            rng.standard_normal(depth) * 1e4, np.round(rng.standard_normal(depth) * 4) / 2,
            np.where(rng.random(depth) < 0.5, 0.0, 1.0), rng.uniform(-0.1, 3.0, depth)]
    rows += [rng.standard_normal(depth) * 10 ** rng.uniform(-3, 3) for _ in range(30)]
    return [r.astype(np.float32).reshape(1, depth) for r in rows]


@pytest.mark.parametrize("asymmetric", [True, False])
@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("depth, units, bias, big", [(32, 96, True, False),
                                                     (13, 8, False, False),
                                                     (600, 4, True, True)])
def test_row_product_equals_the_hybrid_kernel(asymmetric, per_channel, depth, units, bias, big):
    rng = np.random.default_rng(depth + units)
    w, scale = _weights(rng, units, depth, per_channel, big)
    b = rng.standard_normal(units).astype(np.float32) if bias else None
    it = edgelite_interpreter.Interpreter(model_content=_model(w, scale, b, asymmetric))
    it.allocate_tensors()
    quant = QuantizationParameters(scale=scale, zero_point=np.zeros(scale.size, np.int64))
    w_info = TensorInfo(1, "w", w.shape, np.dtype(np.int8), "int8", quant, w)
    b_info = None if b is None else TensorInfo(2, "b", b.shape, np.dtype(np.float32), "float32",
                                               None, b)
    options = default_options("FULLY_CONNECTED", asymmetric_quantize_inputs=asymmetric)
    column_scale = np.where(rng.random(units) < 0.5, 0.5, 1.0).astype(np.float32)
    product = row_product(options, w_info, b_info, column_scale)
    assert product is not None
    out = np.empty((1, units), np.float32)
    for x in _rows(rng, depth):
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        want = it.get_tensor(it.get_output_details()[0]["index"]) * column_scale
        product(x, out)
        np.testing.assert_array_equal(out, want)
