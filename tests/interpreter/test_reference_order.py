"""Under OpResolverType.BUILTIN_REF, float DEPTHWISE_CONV_2D, small CONV_2D (at most 32
products per output) and global MEAN sum in the order of TFLite's reference kernels:
bit-identical to LiteRT's BUILTIN_REF (interpreter/kernels/reference_order.py says why: issue
13's hybrid models)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.opmodel import In, op_model, run_both

pytest.importorskip("ai_edge_litert", reason="LiteRT (ai-edge-litert) is the oracle")

DEPTHWISE = {
    "3x3_same": ((1, 9, 9, 8), (1, 3, 3, 8), dict(padding=0, stride_w=1, stride_h=1)),
    "3x3_s2_relu6": ((2, 10, 9, 5), (1, 3, 3, 5),
                     dict(padding=0, stride_w=2, stride_h=2, fused_activation_function=3)),
    "5x5_valid": ((1, 12, 12, 4), (1, 5, 5, 4), dict(padding=1, stride_w=1, stride_h=1)),
    "multiplier_2": ((1, 7, 7, 3), (1, 3, 3, 6),
                     dict(padding=0, stride_w=1, stride_h=1, depth_multiplier=2)),
    "dilated": ((1, 11, 11, 4), (1, 3, 3, 4),
                dict(padding=0, stride_w=1, stride_h=1, dilation_w_factor=2,
                     dilation_h_factor=2)),
}
CONV = {
    "stem_3x3x3_s2": ((1, 16, 16, 3), (8, 3, 3, 3), dict(padding=0, stride_w=2, stride_h=2)),
    "1x1x24": ((1, 6, 6, 24), (16, 1, 1, 24), dict(padding=1, stride_w=1, stride_h=1)),
    "2x2x8_relu": ((2, 7, 5, 8), (4, 2, 2, 8),
                   dict(padding=1, stride_w=1, stride_h=1, fused_activation_function=1)),
}


def _case(op, xs, ws, options, bias=True):
    rng = np.random.default_rng(len(str(xs)))
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    channels = ws[3] if op == "DEPTHWISE_CONV_2D" else ws[0]
    b = rng.standard_normal(channels).astype(np.float32) if bias else None
    ours, theirs = run_both(op_model(op, [In(xs), w, b], options=options), [x])
    assert ours[0].shape == theirs[0].shape
    np.testing.assert_array_equal(ours[0], theirs[0])


@pytest.mark.parametrize("name", list(DEPTHWISE))
def test_depthwise_bit_exact_under_builtin_ref(name):
    _case("DEPTHWISE_CONV_2D", *DEPTHWISE[name])


@pytest.mark.parametrize("name", list(CONV))
def test_small_conv_bit_exact_under_builtin_ref(name):
    _case("CONV_2D", *CONV[name])



@pytest.mark.parametrize("shape", [(1, 14, 14, 96), (1, 56, 56, 16), (2, 9, 9, 40)])
def test_global_mean_bit_exact_under_builtin_ref(shape):
    """MEAN over H and W (global average pooling) adds in order under BUILTIN_REF."""
    x = (np.random.default_rng(0).standard_normal(shape) * 3 + 1).astype(np.float32)
    model = op_model("MEAN", [In(shape), np.array([1, 2], np.int32)],
                     options=dict(keep_dims=True))
    ours, theirs = run_both(model, [x])
    np.testing.assert_array_equal(ours[0], theirs[0])


def test_squeeze_excite_conv_bit_exact_under_builtin_ref():
    """A 1x1 conv on a pooled vector (many terms, few outputs): the stacked ordered form."""
    _case("CONV_2D", (1, 1, 1, 96), (4, 1, 1, 96), dict(padding=1, stride_w=1, stride_h=1))
    _case("CONV_2D", (2, 2, 2, 40), (24, 1, 1, 40),
          dict(padding=0, stride_w=1, stride_h=1, fused_activation_function=3))


def test_logistic_bit_exact_under_builtin_ref():
    """TFLite's reference Logistic with glibc's expf, across its cutoffs and the extremes."""
    rng = np.random.default_rng(0)
    x = np.concatenate([(rng.standard_normal(50000) * 6).astype(np.float32),
                        np.linspace(-120, 30, 20001, dtype=np.float32),
                        np.array([np.inf, -np.inf, 1e30, -1e30, 0.0, -0.0], np.float32)])
    ours, theirs = run_both(op_model("LOGISTIC", [In(x.shape)]), [x])
    np.testing.assert_array_equal(ours[0], theirs[0])


@pytest.mark.parametrize("shape", [(1, 56, 56, 96), (2, 10, 33)])
def test_last_axis_mean_bit_exact_under_builtin_ref(shape):
    """MEAN over the channels (LayerNorm's, ConvNeXt's) adds in order under BUILTIN_REF."""
    x = (np.random.default_rng(1).standard_normal(shape) * 3 + 1).astype(np.float32)
    model = op_model("MEAN", [In(shape), np.array([-1], np.int32)], options=dict(keep_dims=True))
    ours, theirs = run_both(model, [x])
    np.testing.assert_array_equal(ours[0], theirs[0])
