"""The fused activations of the dynamic-range FULLY_CONNECTED against LiteRT: TANH bit for bit
under BUILTIN_REF (Eigen's tanh, as LiteRT's ApplyActivationToVector: eigen_math.py), and the
format's code 6, which LiteRT's parser reads as NONE (TFLite's SIGMOID exists only inside it)."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.schema import (Model, Operator, OperatorCode, QuantizationParameters, Subgraph,
                             Tensor, default_options, save)

litert = pytest.importorskip("ai_edge_litert.interpreter",
                             reason="LiteRT (ai-edge-litert) is the oracle: "
                                    "pip install -e '.[dev]'")
from edgelite import interpreter as edgelite_interpreter  # noqa: E402


def _fc(rows: int, depth: int, units: int, act: int, asymmetric: bool) -> bytes:
    rng = np.random.default_rng(0)
    m, sg = Model(), Subgraph(name="main")
    x = sg.add_tensor(Tensor("x", (rows, depth), "float32"))
    w = rng.integers(-127, 128, (units, depth)).astype(np.int8)
    wt = sg.add_tensor(Tensor("w", w.shape, "int8", buffer=m.add_buffer(w),
                              quantization=QuantizationParameters(scale=[0.01], zero_point=[0])))
    b = (rng.standard_normal(units) * 0.3).astype(np.float32)
    bt = sg.add_tensor(Tensor("b", b.shape, "float32", buffer=m.add_buffer(b)))
    out = sg.add_tensor(Tensor("out", (rows, units), "float32"))
    sg.inputs, sg.outputs = [x], [out]
    sg.operators = [Operator(OperatorCode("FULLY_CONNECTED", 0), [x, wt, bt], [out],
                             default_options("FULLY_CONNECTED", fused_activation_function=act,
                                             asymmetric_quantize_inputs=asymmetric))]
    m.subgraphs.append(sg)
    return save(m)


def _run(module, content, x, reference):
    kw = {"experimental_op_resolver_type": module.OpResolverType.BUILTIN_REF} if reference \
        else {}
    it = module.Interpreter(model_content=content, **kw)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"]).copy()


@pytest.mark.parametrize("rows,units", [(1, 5), (3, 7), (4, 16)])
@pytest.mark.parametrize("asymmetric", [False, True])
def test_hybrid_fully_connected_tanh_builtin_ref_is_bit_exact(rows, units, asymmetric):
    content = _fc(rows, 10, units, 4, asymmetric)
    x = np.random.default_rng(1).standard_normal((rows, 10)).astype(np.float32)
    ours = _run(edgelite_interpreter, content, x, True)
    np.testing.assert_array_equal(ours, _run(litert, content, x, True))
    assert np.all(np.abs(ours) <= 1) and np.any(np.abs(ours) < 0.99)   # a tanh was applied


@pytest.mark.parametrize("reference", [False, True])
def test_hybrid_fully_connected_code_6_is_none(reference):
    """Code 6 is no activation in LiteRT: the outputs are those of code 0."""
    x = np.random.default_rng(1).standard_normal((3, 10)).astype(np.float32)
    ours = _run(edgelite_interpreter, _fc(3, 10, 7, 6, False), x, reference)
    np.testing.assert_array_equal(ours, _run(edgelite_interpreter, _fc(3, 10, 7, 0, False), x,
                                             reference))
    assert np.any(ours < 0) and np.any(ours > 1)   # no sigmoid
    if reference:
        np.testing.assert_array_equal(ours, _run(litert, _fc(3, 10, 7, 6, False), x, True))
