"""The interpreter's partitioning, with a trivial numpy delegate: maximal partitions, transfers
only at their edges, the options, the placement report, and results equal to the CPU
interpreter's; delegates by name."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from edgelite.interpreter import Interpreter
from edgelite.interpreter.delegation import load_delegate, placement, register_delegate
from tests.delegates.graphs import Graph
from tests.delegates.numpy_delegate import NumpyDelegate

RNG = np.random.default_rng(0)
C = 4


def _const():
    return RNG.standard_normal(C).astype(np.float32)


def chain_with_cpu_op_in_the_middle() -> bytes:
    """x -> ADD -> MUL -> TANH -> ADD -> RELU: TANH stays on the CPU."""
    g = Graph()
    x = g.input((1, 5, 5, C))
    y = g.op("MUL", [g.op("ADD", [x, g.const(_const())]), g.const(_const())])
    y = g.op("RELU", [g.op("ADD", [g.op("TANH", [y]), g.const(_const())])])
    g.output(y)
    return g.save()


def branches_around_a_cpu_op() -> bytes:
    """File order ADD, TANH, MUL, SUB: ADD and MUL form one partition (TANH does not feed
    MUL), and SUB, which reads TANH, a second one."""
    g = Graph()
    x = g.input((1, 3, 3, C))
    a = g.op("ADD", [x, g.const(_const())])
    t = g.op("TANH", [x])
    m = g.op("MUL", [a, a])
    g.output(g.op("SUB", [m, t]))
    return g.save()


def _run(content, feeds, delegates=(), **kwargs):
    it = Interpreter(model_content=content, experimental_delegates=list(delegates), **kwargs)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), feeds):
        it.set_tensor(d["index"], x)
    it.invoke()
    return it, [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


def _feeds(content):
    it = Interpreter(model_content=content)
    return [RNG.standard_normal(d["shape"]).astype(np.float32) for d in it.get_input_details()]


def test_unsupported_op_in_the_middle_splits_into_two_partitions_that_match():
    content = chain_with_cpu_op_in_the_middle()
    feeds = _feeds(content)
    _, ref = _run(content, feeds)
    d = NumpyDelegate({"ADD", "MUL", "RELU"})
    it, out = _run(content, feeds, [d])
    np.testing.assert_array_equal(out[0], ref[0])
    assert [len(p.nodes) for p in d.partitions] == [2, 2]
    # One tensor in and one out of each partition, per invoke; nothing else crosses.
    assert (d.stats.to_device, d.stats.to_host, d.stats.invokes) == (2, 2, 2)
    it.invoke()
    assert (d.stats.to_device, d.stats.to_host) == (4, 4)
    where = [p["where"] for p in placement(it)]
    assert where == ["numpy", "numpy", "CPU", "numpy", "numpy"]
    tanh = placement(it)[2]
    assert tanh["op"] == "TANH" and "TANH is not in" in tanh["reason"]


def test_independent_branches_join_one_partition():
    content = branches_around_a_cpu_op()
    feeds = _feeds(content)
    _, ref = _run(content, feeds)
    d = NumpyDelegate({"ADD", "MUL", "SUB"})
    _, out = _run(content, feeds, [d])
    np.testing.assert_allclose(out[0], ref[0], rtol=1e-6)
    assert [[n.op for n in p.nodes] for p in d.partitions] == [["ADD", "MUL"], ["SUB"]]
    # x in; MUL's output out to SUB's partition (not to the CPU: SUB is delegated), TANH in.
    assert [[t.name for t in p.inputs] for p in d.partitions][0] == ["input_0"]
    assert (d.stats.to_device, d.stats.to_host) == (3, 2)


def test_everything_supported_moves_only_graph_inputs_and_outputs():
    content = chain_with_cpu_op_in_the_middle()
    feeds = _feeds(content)
    d = NumpyDelegate({"ADD", "MUL", "RELU", "TANH"})
    _, out = _run(content, feeds, [d])
    assert len(d.partitions) == 1
    assert (d.stats.to_device, d.stats.to_host) == (1, 1)


def test_min_nodes_and_max_partitions():
    content = chain_with_cpu_op_in_the_middle()
    feeds = _feeds(content)
    _, ref = _run(content, feeds)
    d = NumpyDelegate({"ADD", "MUL", "RELU"}, {"min_nodes_per_partition": 3})
    it, out = _run(content, feeds, [d])
    np.testing.assert_array_equal(out[0], ref[0])
    assert d.partitions == [] and d.stats.to_device == 0
    assert "min_nodes_per_partition=3" in placement(it)[0]["reason"]
    d = NumpyDelegate({"ADD", "MUL", "RELU", "TANH"} - {"MUL"}, {"max_partitions": 1})
    it, out = _run(content, feeds, [d])
    np.testing.assert_array_equal(out[0], ref[0])
    assert [[n.op for n in p.nodes] for p in d.partitions] == [["TANH", "ADD", "RELU"]]
    assert "largest" in placement(it)[0]["reason"]


def test_placement_log_line(caplog):
    content = chain_with_cpu_op_in_the_middle()
    with caplog.at_level(logging.INFO, logger="edgelite.delegates"):
        _run(content, _feeds(content), [NumpyDelegate({"ADD", "MUL", "RELU"})])
    assert "4 ops in 2 partitions on numpy, 1 ops on CPU: [TANH]" in caplog.text


def test_preserve_all_tensors_reads_intermediates():
    content = chain_with_cpu_op_in_the_middle()
    feeds = _feeds(content)
    cpu, _ = _run(content, feeds, experimental_preserve_all_tensors=True)
    it, _ = _run(content, feeds, [NumpyDelegate({"ADD", "MUL", "RELU"})],
                 experimental_preserve_all_tensors=True)
    for d in cpu.get_tensor_details():
        np.testing.assert_array_equal(it.get_tensor(d["index"]), cpu.get_tensor(d["index"]))


def test_registry_by_name_and_errors():
    register_delegate("test-numpy", lambda options: NumpyDelegate({"ADD"}, options),
                      replace=True)
    d = load_delegate("test-numpy", {"min_nodes_per_partition": 2})
    assert d.min_nodes_per_partition == 2
    with pytest.raises(ValueError, match="no delegate named 'nope'.*opencl"):
        load_delegate("nope")
    from edgelite.interpreter import load_delegate as from_interpreter
    assert from_interpreter("test-numpy").name == "numpy"
    import edgelite.delegates as delegates  # the delegates package re-exports the registry
    assert delegates.load_delegate is load_delegate and delegates.placement is placement
