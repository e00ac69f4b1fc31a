"""Op forms that torch's ONNX exporters write in real models (issue 12's corpus,
tools/torch_corpus.py): Mod (ViT's and Swin's shape arithmetic), ScatterND (Swin's attention
mask), GatherND (GPT-2 through the dynamo exporter), int64 Abs (T5's relative-position buckets).
One small ONNX model each, converted and checked in edgelite and in LiteRT against onnxruntime
(onnx_cases.check)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.converter.onnx_cases import RNG, F, check, model, node, w


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_mod_integers(fmod, dtype):
    proto = model([node("Mod", ["a", "b"], ["y"], fmod=fmod)],
                  [("a", [2, 6], dtype), ("b", [6], dtype)], [("y", dtype)])
    a = RNG.integers(-20, 20, (2, 6)).astype(dtype)
    b = np.array([3, -3, 7, -7, 5, 1], dtype)
    check(proto, {"a": a, "b": b})


def test_mod_float_fmod():
    proto = model([node("Mod", ["a", "b"], ["y"], fmod=1)], [("a", [3, 5]), ("b", [5])], ["y"])
    a = (RNG.standard_normal((3, 5)) * 10).astype(F)
    check(proto, {"a": a, "b": np.array([2.5, -2.5, 3.0, -0.75, 1.0], F)})


def test_mod_of_shapes_folds():
    """Swin's padding: (window - H % window) % window on a static shape folds to constants."""
    nodes = [node("Shape", ["x"], ["s"]),
             node("Gather", ["s", "two"], ["h"], axis=0),
             node("Mod", ["h", "seven"], ["r"]),
             node("Sub", ["seven", "r"], ["p"]),
             node("Mod", ["p", "seven"], ["pad"]),
             node("Cast", ["pad"], ["padf"], to=1),
             node("Add", ["x", "padf"], ["y"])]
    proto = model(nodes, [("x", [1, 3, 10, 4])], ["y"],
                  {"two": np.array(2, np.int64), "seven": np.array(7, np.int64)})
    assert check(proto).ops_out == {"ADD": 1}


def test_abs_int64():
    proto = model([node("Abs", ["x"], ["y"])], [("x", [4, 5], np.int64)], [("y", np.int64)])
    conversion = check(proto, {"x": RNG.integers(-2**40, 2**40, (4, 5)).astype(np.int64)})
    assert "ABS" not in conversion.ops_out     # LiteRT's ABS has no int64 kernel


def test_div_int64_truncates_in_both_runtimes():
    """dynamo's floordiv of shape values is an int64 Div (GPT-2, wav2vec2): LiteRT has no int64
    DIV kernel and refused the file; as int32 it truncates toward zero, as onnxruntime does."""
    proto = model([node("Div", ["a", "b"], ["y"])],
                  [("a", [3, 6], np.int64), ("b", [6], np.int64)], [("y", np.int64)])
    a = RNG.integers(-50, 50, (3, 6)).astype(np.int64)
    conversion = check(proto, {"a": a, "b": np.array([3, -3, 7, -7, 5, 1], np.int64)})
    assert conversion.ops_out.get("DIV") == 1


@pytest.mark.parametrize("reduction", ["none", "add"])
def test_scatter_nd_runtime_updates(reduction):
    """Rows 2 and 0 (and -1: the last) of x replaced by (added to) the updates."""
    proto = model([node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)],
                  [("x", [4, 3]), ("u", [3, 3])], ["y"],
                  {"i": np.array([[2], [0], [-1]], np.int64)}, opset=18)
    check(proto)


def test_scatter_nd_runtime_indices():
    proto = model([node("ScatterND", ["x", "i", "u"], ["y"])],
                  [("x", [2, 3, 4]), ("i", [2, 2], np.int64), ("u", [2, 4])], ["y"])
    check(proto, {"x": w(2, 3, 4), "i": np.array([[1, 2], [0, -3]], np.int64), "u": w(2, 4)})


def test_scatter_nd_constant_mask_folds():
    """Swin's attention mask: a constant canvas with constant regions set folds away."""
    nodes = [node("ScatterND", ["canvas", "i", "u"], ["mask"]), node("Add", ["x", "mask"], ["y"])]
    proto = model(nodes, [("x", [3, 3])], ["y"],
                  {"canvas": np.zeros((3, 3), F), "i": np.array([[0, 1], [2, 2]], np.int64),
                   "u": np.array([5.0, -100.0], F)})
    assert check(proto).ops_out == {"ADD": 1}


@pytest.mark.parametrize("batch_dims, data, indices", [
    (0, [3, 4, 5], [[0, 1], [2, -1], [1, 3]]),
    (0, [3, 4, 5], [[[2]], [[-3]]]),
    (1, [2, 4, 5], [[[1], [3]], [[0], [-2]]]),
    (1, [2, 4, 5], [[1, 4], [0, 0]]),
])
def test_gather_nd(batch_dims, data, indices):
    proto = model([node("GatherND", ["x", "i"], ["y"], batch_dims=batch_dims)],
                  [("x", data)], ["y"], {"i": np.array(indices, np.int64)})
    check(proto)


def test_gather_nd_runtime_indices():
    """GPT-2's dynamo export: the last token's hidden state picked by computed coordinates."""
    proto = model([node("GatherND", ["x", "i"], ["y"], batch_dims=1)],
                  [("x", [2, 6, 4]), ("i", [2, 1], np.int64)], ["y"])
    check(proto, {"x": w(2, 6, 4), "i": np.array([[5], [-2]], np.int64)})


def test_is_nan_masks_a_softmax():
    """transformers' SDPA attention: rows of NaN (every key masked out) set to 0 via IsNaN."""
    nodes = [node("Softmax", ["x"], ["p"], axis=-1), node("IsNaN", ["p"], ["nan"]),
             node("Where", ["nan", "zero", "p"], ["y"])]
    proto = model(nodes, [("x", [2, 4])], ["y"], {"zero": np.array(0.0, F)})
    x = w(2, 4)
    x[1] = -np.inf
    check(proto, {"x": x})


@pytest.mark.parametrize("positive, negative", [(1, 1), (1, 0), (0, 1), (0, 0)])
def test_is_inf(positive, negative):
    proto = model([node("IsInf", ["x"], ["y"], detect_positive=positive,
                        detect_negative=negative)],
                  [("x", [6])], [("y", np.bool_)])
    check(proto, {"x": np.array([np.inf, -np.inf, np.nan, 0.0, 3.0, -1e38], F)})


def test_non_zero_of_a_constant_folds():
    """NonZero of a constant mask, its coordinates gathered (the indices fold away)."""
    mask = np.array([[0, 1, 0], [2, 0, 3]], np.float32)
    nodes = [node("NonZero", ["m"], ["nz"]), node("Transpose", ["nz"], ["coords"], perm=[1, 0]),
             node("GatherND", ["x", "coords"], ["y"])]
    proto = model(nodes, [("x", [2, 3])], ["y"], {"m": mask})
    assert check(proto).ops_out == {"GATHER_ND": 1}


def test_non_zero_of_a_runtime_input():
    """SSDlite's score filter: how many coordinates there are is known only while running (a
    data-dependent dim: tests/converter/test_convert_data_dependent.py)."""
    proto = model([node("NonZero", ["x"], ["y"])], [("x", [2, 3])], [("y", np.int64)])
    check(proto, {"x": np.array([[0, 1.5, 0], [-2, 0, 3]], F)})
