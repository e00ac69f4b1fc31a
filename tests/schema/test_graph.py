"""The graph helper, before and after: producers, consumers, replace_uses, remove_dead, order,
drop_unused_buffers. Side-effect ops are never removed and never reordered across."""
from __future__ import annotations

import pytest

import numpy as np

from edgelite.schema import (Metadata, Model, Operator, OperatorCode, Subgraph, Tensor, consumers,
                             default_options, drop_unused_buffers, has_side_effects, load, order,
                             producers, remove_dead, replace_uses)


def op(name, inputs, outputs, **options):
    return Operator(OperatorCode(name), list(inputs), list(outputs),
                    default_options(name, **options))


def graph(n_tensors, ops, inputs=(0,), outputs=()):
    return Subgraph(tensors=[Tensor(f"t{i}", (1,)) for i in range(n_tensors)],
                    inputs=list(inputs), outputs=list(outputs), operators=list(ops))


def names(sg):
    return [f"{o.op}:{o.outputs}" for o in sg.operators]


def test_producers_and_consumers():
    # t0 -> ADD(t0, t0) -> t1 -> MUL(t1, t0) -> t2 ; CONCAT-free optional input -1 is ignored
    sg = graph(4, [op("ADD", [0, 0], [1]), op("MUL", [1, 0], [2]),
                   op("FULLY_CONNECTED", [2, 1, -1], [3])], outputs=[3])
    assert producers(sg) == {1: 0, 2: 1, 3: 2}
    assert consumers(sg) == {0: [0, 1], 1: [1, 2], 2: [2]}


def test_replace_uses_rewires_readers_and_graph_outputs():
    sg = graph(4, [op("ADD", [0, 0], [1]), op("MUL", [1, 1], [2]), op("RELU", [1], [3])],
               outputs=[1, 3])
    assert replace_uses(sg, 1, 0) == 4  # two MUL inputs, one RELU input, one graph output
    assert [o.inputs for o in sg.operators] == [[0, 0], [0, 0], [0]]
    assert sg.outputs == [0, 3]
    assert sg.operators[0].outputs == [1], "the producer's output is not a use"
    assert replace_uses(sg, 7, 0) == 0


def test_remove_dead_drops_unread_ordinary_ops_only():
    # t1 = RELU(t0) (dead), t2 = TANH(t0) (output), t3 = LOGISTIC(t0) -> ASSIGN_VARIABLE (kept)
    # VAR_HANDLE's handle t4 is read by the ASSIGN; CALL_ONCE has no outputs; t5 = RELU(t1) dead
    sg = graph(7, [
        op("CALL_ONCE", [], [], init_subgraph_index=0),
        op("RELU", [0], [1]),
        op("TANH", [0], [2]),
        op("LOGISTIC", [0], [3]),
        op("VAR_HANDLE", [], [4], shared_name="v"),
        op("ASSIGN_VARIABLE", [4, 3], []),
        op("RELU", [1], [5]),
        op("VAR_HANDLE", [], [6], shared_name="unused"),
    ], outputs=[2])
    before = list(sg.operators)
    assert remove_dead(sg) == 2
    assert sg.operators == [before[i] for i in (0, 2, 3, 4, 5, 7)]
    assert remove_dead(sg) == 0


def test_side_effect_classification():
    assert has_side_effects(op("ASSIGN_VARIABLE", [0, 1], []))
    assert has_side_effects(op("CALL_ONCE", [], [], init_subgraph_index=1))
    assert has_side_effects(op("READ_VARIABLE", [0], [1]))
    assert has_side_effects(Operator(OperatorCode("ADD"), [0, 1], []))  # no outputs
    assert not has_side_effects(op("ADD", [0, 1], [2]))


def test_order_sorts_within_segments_and_keeps_free_order():
    # reversed chain t0 -> RELU t1 -> TANH t2 -> LOGISTIC t3, plus an independent op first
    sg = graph(5, [op("NEG", [0], [4]), op("LOGISTIC", [2], [3]), op("TANH", [1], [2]),
                   op("RELU", [0], [1])], outputs=[3, 4])
    order(sg)
    assert names(sg) == ["NEG:[4]", "RELU:[1]", "TANH:[2]", "LOGISTIC:[3]"]
    order(sg)  # already ordered: unchanged
    assert names(sg) == ["NEG:[4]", "RELU:[1]", "TANH:[2]", "LOGISTIC:[3]"]


def test_order_never_moves_ops_across_a_barrier():
    # segment 1: [TANH reads t1, RELU writes t1] | ASSIGN_VARIABLE | segment 2: [LOGISTIC, NEG]
    sg = graph(6, [op("TANH", [1], [2]), op("RELU", [0], [1]),
                   op("ASSIGN_VARIABLE", [5, 2], []),
                   op("LOGISTIC", [3], [4]), op("NEG", [0], [3])], outputs=[4])
    order(sg)
    assert names(sg) == ["RELU:[1]", "TANH:[2]", "ASSIGN_VARIABLE:[]", "NEG:[3]", "LOGISTIC:[4]"]


def test_order_refuses_a_dependency_that_crosses_a_barrier():
    # TANH reads t1, which RELU writes only after the barrier: sorting would cross it
    sg = graph(4, [op("TANH", [1], [2]), op("ASSIGN_VARIABLE", [3, 0], []),
                   op("RELU", [0], [1])], outputs=[2])
    before = list(sg.operators)
    with pytest.raises(ValueError, match="barrier"):
        order(sg)
    assert sg.operators == before, "a failed order must leave the graph as it was"


def test_order_detects_a_cycle():
    sg = graph(3, [op("RELU", [2], [1]), op("TANH", [1], [2])], outputs=[2])
    with pytest.raises(ValueError, match="cycle"):
        order(sg)


def test_real_models_are_already_ordered_and_have_nothing_dead(models_dir):
    for name in ("digits_cnn", "mwk_okay_nabu", "mp_face_detection"):
        model = load(models_dir / f"{name}.tflite")
        for sg in model.subgraphs:
            before = list(sg.operators)
            order(sg)
            assert sg.operators == before, name
            assert remove_dead(sg) == 0, name


def test_order_restores_a_shuffled_real_model(models_dir):
    import random
    model = load(models_dir / "mp_face_detection.tflite")
    sg = model.subgraphs[0]
    random.Random(0).shuffle(sg.operators)
    order(sg)
    seen = set(sg.inputs) | {i for i, t in enumerate(sg.tensors) if t.buffer and
                            model.buffers[t.buffer].nbytes}
    for o in sg.operators:
        assert all(t in seen for t in o.inputs if t >= 0), o.op
        seen.update(o.outputs)


def test_drop_unused_buffers_renumbers_the_rest():
    model = Model()
    a, unused, b, meta = (model.add_buffer(np.full(2, v, np.float32)) for v in (1, 2, 3, 4))
    sg = graph(3, [op("ADD", [0, 1], [2])])
    sg.tensors[1].buffer, sg.tensors[2].buffer = b, a
    model.subgraphs.append(sg)
    model.metadata.append(Metadata("m", meta))
    assert drop_unused_buffers(model) == 1
    assert len(model.buffers) == 4                       # the empty buffer 0, a, b, the metadata's
    assert [t.buffer for t in sg.tensors] == [0, 2, 1]
    assert model.metadata[0].buffer == 3
    assert float(model.buffers[2].data.view(np.float32)[0]) == 3
    assert drop_unused_buffers(model) == 0

