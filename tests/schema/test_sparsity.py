"""Sparse tensors (the format's SparsityParameters) survive save and load, and LiteRT reads what
the writer stores."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.schema import ModelError, load, save
from tests.interpreter.sparse_models import DENSE, SPARSE_CSR, densify_model, encode

DENSE_WEIGHTS = np.array([[0, 1.5, 0, 2, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0],
                          [3, 0, 0, 0, 0, 0, 4, 5]], np.float32)


@pytest.mark.parametrize("index_dtype", [np.uint8, np.uint16, np.int32])
@pytest.mark.parametrize("blocked", [False, True])
def test_sparsity_round_trip(index_dtype, blocked):
    if blocked:
        values, sparsity = encode(DENSE_WEIGHTS, (0, 1, 2), (DENSE, SPARSE_CSR, DENSE), (1,),
                                  (2,), index_dtype)
    else:
        values, sparsity = encode(DENSE_WEIGHTS, (0, 1), (DENSE, SPARSE_CSR),
                                  index_dtype=index_dtype)
    saved = densify_model(values, DENSE_WEIGHTS.shape, sparsity)
    model = load(saved)
    read = model.subgraphs[0].tensors[0].sparsity
    assert read == sparsity
    assert read.dim_metadata[1].indices.dtype == index_dtype  # the stored type is kept
    assert save(model) == saved
    assert model.constant(model.subgraphs[0], 0) is None  # no dense value to view

    pytest.importorskip("ai_edge_litert")
    from ai_edge_litert.interpreter import Interpreter
    theirs = Interpreter(model_content=saved).get_tensor_details()[0]["sparsity_parameters"]
    assert list(theirs["traversal_order"]) == list(sparsity.traversal_order)
    assert list(theirs.get("block_map", ())) == list(sparsity.block_map)
    for ours, meta in zip(sparsity.dim_metadata, theirs["dim_metadata"]):
        assert meta["format"] == ours.format
        if ours.format == DENSE:
            assert meta["dense_size"] == ours.dense_size
        else:
            np.testing.assert_array_equal(meta["array_segments"], ours.segments)
            np.testing.assert_array_equal(meta["array_indices"], ours.indices)


def test_unknown_dimension_format_is_a_model_error():
    values, sparsity = encode(DENSE_WEIGHTS, (0, 1), (DENSE, SPARSE_CSR))
    sparsity.dim_metadata[1].format = 7
    with pytest.raises(ModelError, match="tensor 0.*format 7"):
        load(densify_model(values, DENSE_WEIGHTS.shape, sparsity))


def test_sparse_buffer_of_partial_values_is_a_model_error():
    values, sparsity = encode(DENSE_WEIGHTS, (0, 1), (DENSE, SPARSE_CSR))
    model = load(densify_model(values, DENSE_WEIGHTS.shape, sparsity))
    model.buffers[1].data = model.buffers[1].data[:-1]
    with pytest.raises(ModelError, match="sparse_weights"):
        save(model)


@pytest.mark.parametrize("blocked", [False, True])
def test_tensor_details_give_sparsity_as_litert_does(blocked):
    """get_tensor_details()['sparsity_parameters']: the same keys, values and dtypes in edgelite
    and LiteRT, for sparse and dense tensors."""
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    from edgelite.interpreter import Interpreter
    if blocked:
        values, sparsity = encode(DENSE_WEIGHTS, (0, 1, 2), (DENSE, SPARSE_CSR, DENSE), (1,),
                                  (2,), np.uint8)
    else:
        values, sparsity = encode(DENSE_WEIGHTS, (0, 1), (DENSE, SPARSE_CSR))
    content = densify_model(values, DENSE_WEIGHTS.shape, sparsity)
    ours = Interpreter(model_content=content).get_tensor_details()
    theirs = litert.Interpreter(model_content=content).get_tensor_details()
    assert len(ours) == len(theirs)

    def same(a, b):
        if isinstance(a, dict):
            assert isinstance(b, dict) and a.keys() == b.keys(), (a, b)
            for k in a:
                same(a[k], b[k])
        elif isinstance(a, list):
            assert isinstance(b, list) and len(a) == len(b)
            for x, y in zip(a, b):
                same(x, y)
        elif isinstance(a, np.ndarray):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)
        else:
            assert a == b
    for o, t in zip(ours, theirs):
        same(o["sparsity_parameters"], t["sparsity_parameters"])
    assert any(o["sparsity_parameters"] for o in ours)
