"""A dynamic-range (int8 weights) FULLY_CONNECTED before a layer normalization stays a step of
its own (fusion._layer_norm folds only float32 weights): the corpus's keras_kws_head.dynamic
did not load under the default resolver ("MEAN: input 0 ... lacks data": the rejected FC was
dropped with the fused layer norm)."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.schema import QuantizationParameters, load, save
from tests.interpreter.test_fusion import kws_head_model
from tests.opmodel import run_edgelite, run_litert

pytest.importorskip("ai_edge_litert", reason="LiteRT (ai-edge-litert) is the oracle")


def _hybrid_kws_head() -> bytes:
    """kws_head_model with each FULLY_CONNECTED's weights int8, one scale each."""
    model = load(kws_head_model())
    sg = model.subgraphs[0]
    for op in sg.operators:
        if op.opcode.builtin != "FULLY_CONNECTED":
            continue
        t = sg.tensors[op.inputs[1]]
        w = np.asarray(model.buffers[t.buffer].data).view(np.float32).reshape(t.shape)
        scale = float(np.abs(w).max()) / 127
        q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
        t2 = sg.add_tensor(type(t)(t.name + "_int8", t.shape, "int8", buffer=model.add_buffer(q),
                                   quantization=QuantizationParameters(scale=[scale],
                                                                       zero_point=[0])))
        op.inputs[1] = t2
    return save(model)


@pytest.mark.parametrize("reference", [False, True], ids=["default", "builtin_ref"])
def test_hybrid_fc_before_a_layer_norm_matches_litert(reference):
    from edgelite.interpreter import OpResolverType
    content = _hybrid_kws_head()
    x = np.random.default_rng(8).standard_normal((1, 16, 96)).astype(np.float32)
    kind = OpResolverType.BUILTIN_REF if reference else OpResolverType.AUTO
    ours = run_edgelite(content, [x], experimental_op_resolver_type=kind)
    # LiteRT's XNNPACK refuses a bias-less hybrid FC ("failed to create XNNPACK Value for
    # tensor -1"): its reference kernels are the oracle for both resolvers
    np.testing.assert_allclose(ours[0], run_litert(content, [x], True)[0], rtol=1e-5,
                               atol=1e-6)
