"""ONNX Transposes of more dims than LiteRT's TRANSPOSE takes (8), between Reshapes from and to
fewer dims (LiteRT refuses any 9-D tensor in a RESHAPE too): the converter writes them as
transposes of at most 8 dims, which both runtimes run and onnxruntime agrees with."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.converter.builder import TRANSPOSE_MAX_RANK
from tests.converter.onnx_cases import check, model, node

pytest.importorskip("ai_edge_litert.interpreter",
                    reason="LiteRT (ai-edge-litert) is the oracle: pip install -e '.[dev]'")

CASES = {
    # no two dims stay neighbours: each dim moved on its own
    "reversed 9-D": ([2] * 9, list(range(9))[::-1]),
    "interleaved 9-D": ([2, 3, 2, 1, 2, 3, 2, 2, 2], [8, 6, 4, 2, 0, 7, 5, 3, 1]),
    # dims 2,3,4 and 6,7 stay together: one 6-D TRANSPOSE between reshapes
    "mergeable 10-D": ([2, 1, 3, 2, 2, 3, 2, 2, 1, 2], [9, 5, 6, 7, 2, 3, 4, 0, 8, 1]),
}


def _transposes(conversion):
    return [op for op in conversion.model.subgraphs[0].operators if op.op == "TRANSPOSE"]


@pytest.mark.parametrize("name", list(CASES))
def test_high_rank_transpose_runs_in_both_runtimes(name):
    shape, perm = CASES[name]
    size = int(np.prod(shape))
    x = np.arange(size, dtype=np.float32).reshape(4, size // 4)
    nodes = [node("Reshape", ["x", "into"], ["h"]), node("Transpose", ["h"], ["t"], perm=perm),
             node("Reshape", ["t", "back"], ["y"])]
    inits = {"into": np.array(shape, np.int64), "back": np.array([4, size // 4], np.int64)}
    conversion = check(model(nodes, [("x", list(x.shape))], ["y"], inits), feeds={"x": x})
    subgraph = conversion.model.subgraphs[0]
    transposes = _transposes(conversion)
    assert transposes
    for op in transposes:
        assert len(subgraph.tensors[op.inputs[0]].shape) <= TRANSPOSE_MAX_RANK
    if name.startswith("mergeable"):
        assert len(transposes) == 1


def test_tensor_past_litert_rank_is_refused_by_name():
    """A graph that keeps a 9-D tensor (here an Add on one) converts into no file LiteRT would
    refuse: one error names the op and the tensor."""
    from edgelite.converter.errors import ConversionError
    from tests.converter.onnx_cases import convert

    shape = [2] * 9
    proto = model([node("Reshape", ["x", "into"], ["h"]), node("Add", ["h", "h"], ["s"]),
                   node("Reshape", ["s", "back"], ["y"])], [("x", [512])], ["y"],
                  {"into": np.array(shape, np.int64), "back": np.array([512], np.int64)})
    named = r"at most 8 dims; 3 op.*; ADD on 'h' \[2(, 2){8}\], 's' \[2"
    with pytest.raises(ConversionError, match=named):
        convert(proto)
