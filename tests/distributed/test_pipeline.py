"""Model-parallel stages: a model's plan cut by the delegate partitioner into stages on
different Ray actors, pipelined over a stream of inputs; the outputs equal the single-process
run bit for bit (2 stages on the digits CNN, 3 on BlazeFace, whose branches cross the cuts)."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.distributed.pipeline import Pipeline, cut
from edgelite.interpreter import Interpreter
from edgelite.interpreter.training import export_frozen, extend, make_trainable


def _single(content, feeds_list):
    it = Interpreter(model_content=content, num_threads=1)
    out = []
    for feeds in feeds_list:
        (d,) = it.get_input_details()
        it.resize_tensor_input(d["index"], list(feeds[d["name"]].shape))
        it.allocate_tensors()
        it.set_tensor(d["index"], feeds[d["name"]])
        it.invoke()
        out.append({o["name"]: it.get_tensor(o["index"]).copy()
                    for o in it.get_output_details()})
    return out


def test_the_cuts_are_the_partitioners(digits):
    frozen = export_frozen(extend(digits.source))
    stages = cut(frozen, 2)
    assert [len(s.ops) for s in stages] == [4, 3]
    assert stages[0].outputs == stages[1].inputs and len(stages[0].outputs) == 1
    with pytest.raises(ValueError, match="cuts \\[0\\]: each stage needs at least one"):
        cut(frozen, cuts=[0])
    from edgelite.schema import save
    training = save(make_trainable(digits.source))
    with pytest.raises(ValueError, match="side effects"):
        cut(training, 2)


def test_two_stages_pipelined_equal_the_single_process_run(ray_cluster, digits):
    frozen = export_frozen(extend(digits.source))
    pipe = Pipeline(frozen, stages=2)
    name = pipe.input_names[0]
    stream = [{name: digits.x_test[k:k + 8]} for k in range(0, 360, 8)]
    got = list(pipe.map(iter(stream)))
    want = _single(frozen, stream)
    assert len(got) == len(want) == 45
    for g, w in zip(got, want):
        assert g.keys() == w.keys()
        assert all(np.array_equal(g[k], w[k]) for k in w)
    assert ray_cluster.get([a.invocations.remote() for a in pipe.actors]) == [45, 45]


def test_three_stages_across_branches(ray_cluster, models_dir):
    content = (models_dir / "mp_face_detection.tflite").read_bytes()
    stages = cut(content, 3)
    assert any(len(s.inputs) > 1 for s in stages)  # branches cross a cut
    pipe = Pipeline(content, stages=3)
    rng = np.random.default_rng(0)
    stream = [{pipe.input_names[0]: rng.random((1, 128, 128, 3), dtype=np.float32)}
              for _ in range(4)]
    got = list(pipe.map(stream))
    for g, w in zip(got, _single(content, stream)):
        assert all(np.array_equal(g[k], w[k]) for k in w)
