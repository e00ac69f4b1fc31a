"""Convolutions whose strides or dilations only a hostile file has: no hang, no huge buffer.

A stride of 2^30 leaves one output column or row: it must run as fast as stride 7 does and give
LiteRT's result for stride 7 (the same windows). A dilation of 2^30 under SAME padding would need
a padded input of gigabytes: a KernelError names the op instead."""
from __future__ import annotations

import time

import numpy as np
import pytest

from edgelite.interpreter import KernelError, OpResolverType
from tests.interpreter.cases_int8 import conv_case
from tests.opmodel import In, op_model, run_edgelite, run_litert

pytest.importorskip("ai_edge_litert", reason="LiteRT (ai-edge-litert) is the oracle")
BIG = 1 << 30
rng = np.random.default_rng(30)
SHAPES = {"CONV_2D": (5, 3, 3, 4), "DEPTHWISE_CONV_2D": (1, 3, 3, 4)}


def _model(key, op, **options):
    o = {"padding": 1, "stride_w": 1, "stride_h": 1, "fused_activation_function": 0, **options}
    if op == "DEPTHWISE_CONV_2D":
        o["depth_multiplier"] = 1
    w_shape = SHAPES[op]
    if key == "int8":
        c = conv_case("hostile", op, (1, 6, 7, 4), w_shape, o)
        return c.model, c.feeds
    cout = w_shape[0] if op == "CONV_2D" else w_shape[3]
    w = np.random.default_rng(1).standard_normal(w_shape).astype(np.float32)
    model = op_model(op, [In((1, 6, 7, 4)), w, np.zeros(cout, np.float32)], options=o)
    return model, [rng.standard_normal((1, 6, 7, 4)).astype(np.float32)]


@pytest.mark.parametrize("op", sorted(SHAPES))
@pytest.mark.parametrize("key", ["float32", "int8"])
@pytest.mark.parametrize("axis", ["w", "h"])
def test_huge_stride_runs_like_the_smallest_equivalent(key, op, axis):
    """CONV_2D with a stride of 2**30 runs as with the smallest stride that gives the same
    output; DEPTHWISE_CONV_2D's is refused, as LiteRT refuses it (its depthwise kernels hold
    strides in 16 bits)."""
    from edgelite.schema import load, save
    model, feeds = _model(key, op, **{f"stride_{axis}": BIG})
    if op == "DEPTHWISE_CONV_2D":
        with pytest.raises(RuntimeError, match="stride_(width|height) <= INT16_MAX"):
            run_litert(model, feeds)
        with pytest.raises(KernelError, match=r"DEPTHWISE_CONV_2D\): strides .* must be at "
                                              r"most 32767"):
            run_edgelite(model, feeds)
        return
    ir = load(model)
    conv = ir.subgraphs[0].operators[0]
    conv.options = conv.options.replace(**{f"stride_{axis}": 7})
    same = save(ir)
    start = time.perf_counter()
    ours = run_edgelite(model, feeds, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    assert time.perf_counter() - start < 5
    theirs = run_litert(same, feeds)
    assert ours[0].shape == theirs[0].shape
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", sorted(SHAPES))
@pytest.mark.parametrize("key", ["float32", "int8"])
def test_huge_dilation_with_same_padding_is_refused(key, op):
    model, feeds = _model(key, op, padding=0, dilation_w_factor=BIG, dilation_h_factor=1)
    # CONV_2D: by the bytes its padded input would take; DEPTHWISE_CONV_2D: past 16 bits.
    refusal = "padded input of" if op == "CONV_2D" else "must be at most 32767"
    with pytest.raises(KernelError, match=f"{op}.*{refusal}"):
        run_edgelite(model, feeds)
