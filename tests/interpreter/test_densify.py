"""DENSIFY refuses hostile sparsity metadata with an error naming the operator and the tensor,
never a crash, an out-of-bounds write or a huge allocation."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import Interpreter
from edgelite.interpreter.kernels import KernelError
from edgelite.schema import load, save
from tests.interpreter.sparse_models import DENSE, SPARSE_CSR, densify_model, encode

WEIGHTS = np.array([[0, 1.5, 0, 2], [0, 0, 0, 0], [3, 0, 0, 4]], np.float32)


def _broken(edit, blocked=False):
    if blocked:
        values, sparsity = encode(np.tile(WEIGHTS, (1, 2)), (0, 1, 2), (DENSE, SPARSE_CSR, DENSE),
                                  (1,), (2,))
        shape = (3, 8)
    else:
        values, sparsity = encode(WEIGHTS, (0, 1), (DENSE, SPARSE_CSR))
        shape = WEIGHTS.shape
    model = load(densify_model(values, shape, sparsity))
    edit(model.subgraphs[0].tensors[0].sparsity, model)
    return save(model)


def _set(meta, field, value):
    setattr(meta, field, np.asarray(value, np.int32))


HOSTILE = {
    "index_out_of_range": (lambda sp, m: _set(sp.dim_metadata[1], "indices", [1, 3, 0, 400]),
                           "indices must lie in"),
    "negative_index": (lambda sp, m: _set(sp.dim_metadata[1], "indices", [1, -3, 0, 3]),
                       "indices must lie in"),
    "falling_segments": (lambda sp, m: _set(sp.dim_metadata[1], "segments", [0, 2, 1, 4]),
                         "segments must rise"),
    "segments_past_indices": (lambda sp, m: _set(sp.dim_metadata[1], "segments", [0, 2, 2, 9]),
                              "segments must rise"),
    "too_few_segments": (lambda sp, m: _set(sp.dim_metadata[1], "segments", [0, 2]),
                         "segments, but 4 are needed"),
    "missing_indices": (lambda sp, m: setattr(sp.dim_metadata[1], "indices", None),
                        "needs segments and indices"),
    "huge_segment": (lambda sp, m: (_set(sp.dim_metadata[1], "segments", [0, 0, 0, 2 ** 31 - 1])),
                     "segments must rise"),
    "bad_traversal_order": (lambda sp, m: setattr(sp, "traversal_order", (0, 0)),
                            "traversal_order"),
    "dense_size_mismatch": (lambda sp, m: setattr(sp.dim_metadata[0], "dense_size", 1000),
                            "dense_size 1000"),
    "too_few_dim_metadata": (lambda sp, m: sp.dim_metadata.pop(), "dim_metadata entries"),
    "values_count": (lambda sp, m: setattr(m.buffers[1], "data", m.buffers[1].data[:-4]),
                     "describes 4 stored values, the buffer holds 3"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_sparsity_is_refused(name):
    edit, message = HOSTILE[name]
    content = _broken(edit)
    with pytest.raises(KernelError, match=f"DENSIFY.*'sparse_weights'.*{message}"):
        Interpreter(model_content=content).allocate_tensors()


@pytest.mark.parametrize("name,edit,message", [
    ("block_size_zero", lambda sp, m: setattr(sp.dim_metadata[2], "dense_size", 0),
     "block size 0"),
    ("block_size_not_dividing", lambda sp, m: setattr(sp.dim_metadata[2], "dense_size", 3),
     "block size 3"),
    ("block_map_out_of_range", lambda sp, m: setattr(sp, "block_map", (5,)), "block_map"),
])
def test_hostile_blocks_are_refused(name, edit, message):
    content = _broken(edit, blocked=True)
    with pytest.raises(KernelError, match=f"'sparse_weights'.*{message}"):
        Interpreter(model_content=content).allocate_tensors()


def test_densified_weights_are_a_constant():
    """Densified at prepare: no step runs for DENSIFY, and its output holds the dense value."""
    values, sparsity = encode(WEIGHTS, (0, 1), (SPARSE_CSR, SPARSE_CSR), index_dtype=np.uint8)
    it = Interpreter(model_content=densify_model(values, WEIGHTS.shape, sparsity))
    it.allocate_tensors()
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(it.get_output_details()[0]["index"]), WEIGHTS)


def _direct_fc_model(values, shape, sparsity) -> bytes:
    """FULLY_CONNECTED reading sparse weights itself (no DENSIFY before it)."""
    from edgelite.schema import Model, Operator, OperatorCode, Subgraph, Tensor, default_options
    model = Model()
    sg = Subgraph(name="main")
    w = sg.add_tensor(Tensor("sparse_weights", shape, "float32",
                             buffer=model.add_buffer(values), sparsity=sparsity))
    x = sg.add_tensor(Tensor("input", (2, shape[1])))
    y = sg.add_tensor(Tensor("output", (2, shape[0])))
    sg.inputs, sg.outputs = [x], [y]
    sg.operators = [Operator(OperatorCode("FULLY_CONNECTED", 0), [x, w, -1], [y],
                             default_options("FULLY_CONNECTED"))]
    model.subgraphs.append(sg)
    return save(model)


@pytest.mark.parametrize("blocked", [False, True])
def test_fully_connected_reads_sparse_weights_directly(blocked):
    """Any op may read a sparse constant: it is densified at prepare. The oracle is LiteRT
    running DENSIFY -> FULLY_CONNECTED on the same storage (LiteRT's own sparse
    FULLY_CONNECTED returns NaN for these layouts); bad metadata names the FULLY_CONNECTED."""
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    rng = np.random.default_rng(3)
    dense = rng.standard_normal((8, 16)).astype(np.float32)
    dense[:, ::2] = 0
    dense[3] = 0
    if blocked:
        values, sparsity = encode(dense, (0, 1, 2), (DENSE, SPARSE_CSR, DENSE), (1,), (4,))
    else:
        values, sparsity = encode(dense, (0, 1), (DENSE, SPARSE_CSR))
    x = rng.standard_normal((2, 16)).astype(np.float32)

    def run(interpreter, content):
        it = interpreter(model_content=content)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        return it.get_tensor(it.get_output_details()[0]["index"])
    ours = run(Interpreter, _direct_fc_model(values, dense.shape, sparsity))
    theirs = run(litert.Interpreter, densify_model(values, dense.shape, sparsity, "FULLY_CONNECTED",
                                       input_shape=(2, 16)))
    np.testing.assert_allclose(ours.reshape(theirs.shape), theirs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours, x @ dense.T, rtol=1e-5, atol=1e-5)

    sparsity.dim_metadata[1].indices = sparsity.dim_metadata[1].indices + 100
    with pytest.raises(KernelError, match="FULLY_CONNECTED.*'sparse_weights'.*sparsity"):
        Interpreter(model_content=_direct_fc_model(values, dense.shape, sparsity)) \
            .allocate_tensors()
