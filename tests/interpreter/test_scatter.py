"""What a case table cannot show for the scatter / segment / NMS kernels: bad index values fail
at invoke as in LiteRT (a RuntimeError naming the operator), and data-dependent output shapes
(UNIQUE, SEGMENT_SUM, SCATTER_ND with a computed shape) feed the ops after them across invokes
whose sizes change."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.schema import Model, Operator, OperatorCode, Subgraph, Tensor, default_options, save
from tests.opmodel import In, assert_close, op_model, run_steps

litert = pytest.importorskip("ai_edge_litert.interpreter",
                             reason="LiteRT (ai-edge-litert) is the oracle: "
                                    "pip install -e '.[dev]'")
from edgelite import interpreter as edgelite_interpreter  # noqa: E402


def _invoke(module, content, feeds):
    it = module.Interpreter(model_content=content)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), feeds):
        it.set_tensor(d["index"], x)
    it.invoke()


BAD_VALUES = {
    "scatter_nd_index_out_of_bounds": (
        op_model("SCATTER_ND", [In((2, 1), "int32"), In((2, 3)), np.int32([4, 3])]),
        [np.int32([[1], [4]]), np.ones((2, 3), np.float32)]),
    "unsorted_segment_id_not_below_count": (
        op_model("UNSORTED_SEGMENT_SUM", [In((3,)), In((3,), "int32"), np.int32(2)]),
        [np.ones(3, np.float32), np.int32([0, 2, 1])]),
}


@pytest.mark.parametrize("name", list(BAD_VALUES))
def test_bad_values_fail_at_invoke_like_litert(name):
    content, feeds = BAD_VALUES[name]
    with pytest.raises(RuntimeError):
        _invoke(litert, content, feeds)
    with pytest.raises(RuntimeError, match="operator 0"):
        _invoke(edgelite_interpreter, content, feeds)


def _op(name, ins, outs, **options):
    return Operator(OperatorCode(name, 0), list(ins), list(outs), default_options(name, **options))


def _unique_then_scale() -> bytes:
    """u, idx = unique(x); y = u * 2; s = segment_sum(x, sorted ids); the sizes depend on x."""
    model = Model()
    sg = Subgraph(name="main")
    x = sg.add_tensor(Tensor("x", (8,)))
    ids = sg.add_tensor(Tensor("ids", (8,), "int32"))
    two = sg.add_tensor(Tensor("two", (), buffer=model.add_buffer(np.float32(2))))
    u = sg.add_tensor(Tensor("u", (1,)))
    idx = sg.add_tensor(Tensor("idx", (8,), "int32"))
    y = sg.add_tensor(Tensor("y", (1,)))
    s = sg.add_tensor(Tensor("s", (1,)))
    t = sg.add_tensor(Tensor("t", (1,)))
    sg.inputs, sg.outputs = [x, ids], [y, idx, t]
    sg.operators = [_op("UNIQUE", [x], [u, idx], idx_out_type=2),
                    _op("MUL", [u, two], [y]),
                    _op("SEGMENT_SUM", [x, ids], [s]),
                    _op("ADD", [s, two], [t])]
    model.subgraphs.append(sg)
    return save(model)


def test_dynamic_outputs_feed_later_ops_across_invokes():
    content = _unique_then_scale()
    feeds = [[np.float32([1, 2, 2, 3, 1, 5, 5, 0]), np.int32([0, 0, 1, 1, 1, 2, 3, 3])],
             [np.float32([4, 4, 4, 4, 4, 4, 4, 4]), np.int32([0, 0, 0, 0, 0, 0, 0, 1])],
             [np.float32([1, 2, 3, 4, 5, 6, 7, 8]), np.int32([0, 1, 2, 3, 4, 5, 6, 7])]]
    # one interpreter each, invoked three times (LiteRT's default resolver: SEGMENT_SUM)
    ours = run_steps(edgelite_interpreter, content, feeds)
    theirs = run_steps(litert, content, feeds)
    for a, b in zip(ours, theirs):
        assert_close(a, b)
    assert [r[0].shape for r in ours] == [(5,), (1,), (8,)]
    assert [r[2].shape for r in ours] == [(4,), (2,), (8,)]

