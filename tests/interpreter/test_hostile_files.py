"""Hostile and invalid `.tflite` files (issue 19), built by tests/schema/hostile.py: what LiteRT
refuses as invalid edgelite refuses too, with a named error; what LiteRT runs edgelite runs; and
no file makes edgelite hang or allocate gigabytes.

LiteRT runs in this process for the cases where it is safe to (it refuses them, or runs them
quickly); for RANGE(0, 2**28) LiteRT allocates 1 GiB and runs, RANGE(0, 2**31 - 1) it refuses
("Node number 0 (RANGE) failed to prepare"): the fuzz script runs those in a subprocess."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import Interpreter, KernelError
from edgelite.interpreter.budget import MemoryBudgetError
from edgelite.interpreter.plan import SubgraphPlan, UnsupportedVersionError
from edgelite.schema import Model, Operator, OperatorCode, Subgraph, Tensor, default_options, save
from tests.schema import hostile


def _litert(content: bytes):
    """LiteRT's outcome: ("ran", outputs) or ("refused", message)."""
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    try:
        it = LiteRT(model_content=content)
        it.allocate_tensors()
        for d in it.get_input_details():
            it.set_tensor(d["index"], np.ones(d["shape"], d["dtype"]))
        it.invoke()
        return "ran", [it.get_tensor(d["index"]) for d in it.get_output_details()]
    except (RuntimeError, ValueError) as e:
        return "refused", str(e)


def _edgelite(content: bytes):
    it = Interpreter(model_content=content)
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], np.ones(d["shape"], d["dtype"]))
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


# case -> (the exception edgelite raises, what its message says)
REFUSED = {
    "while_cond_2_outputs": (KernelError, r"WHILE\): cond subgraph 1 gives 2 outputs"),
    "while_cond_float": (KernelError, r"cond subgraph 1's output must be one bool value, got "
                                      r"float32"),
    "while_body_2_outputs": (KernelError, r"body subgraph 2 gives 2 outputs, the op needs 1"),
    "weight_without_data": (KernelError, r"input 1 is tensor 1 \('w'\), which lacks data"),
    "large_offset_1": (KernelError, r"input 1 is tensor 1 \('w'\), which lacks data"),
    "conv_stride_0": (KernelError, r"CONV_2D\): strides must be positive, got 1x0"),
    "conv_dilation_0": (KernelError, r"CONV_2D\): dilations must be positive, got 0x1"),
    "conv_padding_99": (KernelError, r"padding 99 is not a Padding value"),
    "conv_version_999": (UnsupportedVersionError, r"Didn't find op for builtin opcode "
                                                  r"'CONV_2D' version '999'"),
    "depthwise_stride_0": (KernelError, r"DEPTHWISE_CONV_2D\): strides must be positive"),
    "pool_stride_0": (KernelError, r"MAX_POOL_2D\): filter 3x3 and strides 1x0 must be "
                                   r"positive"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_as_litert_refuses(case):
    content = hostile.NAMED[case]()
    outcome, message = _litert(content)
    assert outcome == "refused", f"LiteRT ran {case}"
    error, pattern = REFUSED[case]
    with pytest.raises(error, match=pattern):
        _edgelite(content)


def test_pool_filter_0_is_a_deliberate_leniency_the_other_way():
    """AVERAGE_POOL_2D with filter width 0: LiteRT runs it (an empty output), edgelite refuses
    it (a window of no pixels averages nothing)."""
    content = hostile.NAMED["pool_filter_0"]()
    assert _litert(content)[0] == "ran"
    with pytest.raises(KernelError, match=r"filter 3x0 and strides 1x1 must be positive"):
        _edgelite(content)


def test_if_chain_prepares_each_subgraph_once(monkeypatch):
    """IF chained 12 deep with then = else = the next subgraph: each subgraph is prepared once
    (it was 2**12 times for the last one: exponential in the depth; 47 s at depth 18)."""
    counts: dict = {}
    original = SubgraphPlan._prepare

    def counting(self):
        counts[self.index] = counts.get(self.index, 0) + 1
        return original(self)
    monkeypatch.setattr(SubgraphPlan, "_prepare", counting)
    out = _edgelite(hostile.if_chain(12))
    np.testing.assert_array_equal(out[0], [2, 2])
    assert counts == {k: 1 for k in range(13)}


@pytest.mark.parametrize("depth,split", [(50, False), (300, True)])
def test_deep_if_runs_as_in_litert(depth, split):
    """IF chained 50 deep (LiteRT: 0.0 s; edgelite never finished) and nested 300 deep
    (RecursionError before): both run and give LiteRT's result."""
    content = hostile.if_chain(depth, split)
    outcome, theirs = _litert(content)
    assert outcome == "ran"
    ours = _edgelite(content)
    np.testing.assert_array_equal(ours[0], theirs[0])


def test_control_flow_nested_past_the_limit_is_refused_at_load():
    from edgelite.interpreter.api import MAX_NESTING
    with pytest.raises(ValueError, match=rf"nests {MAX_NESTING + 2} subgraphs deep; edgelite "
                                         rf"runs up to {MAX_NESTING}"):
        Interpreter(model_content=hostile.if_chain(MAX_NESTING + 1, split=True))


def test_a_subgraph_calling_itself_is_refused():
    """IF whose then branch is its own subgraph: a cycle, refused at prepare (never a
    RecursionError)."""
    m = Model()
    sg = Subgraph(name="main")
    c = sg.add_tensor(Tensor("c", (1,), "bool"))
    x = sg.add_tensor(Tensor("x", (2,)))
    y = sg.add_tensor(Tensor("y", (2,)))
    sg.inputs, sg.outputs = [c, x], [y]
    sg.operators = [Operator(OperatorCode("IF"), [c, c, x], [y],
                             default_options("IF", then_subgraph_index=0,
                                             else_subgraph_index=0))]
    m.subgraphs.append(sg)
    with pytest.raises(KernelError, match=r"subgraph 0 is being prepared already: the "
                                          r"subgraphs call each other in a cycle"):
        _edgelite(save(m))


@pytest.mark.parametrize("limit", [2 ** 28, 2 ** 31 - 1])
def test_range_of_gigabytes_is_refused_at_allocate(limit):
    """A 736-byte file whose RANGE(0, limit) folds at allocate_tensors: 1 GiB and 8 GiB asked,
    both refused by the allocation budget before anything is allocated."""
    content = hostile.range_(limit)
    it = Interpreter(model_content=content)
    with pytest.raises(MemoryBudgetError, match=r"operator 0 \(RANGE\): folding output 0 "
                                                r"\[\d+\] of int32 needs .*memory budget"):
        it.allocate_tensors()


def test_the_budget_counts_folded_values(monkeypatch):
    """RANGE(0, 2**22) (16 MiB) folds under the default budget and is refused under a 8 MiB
    one (EDGELITE_MEMORY_LIMIT): the folded bytes are counted."""
    content = hostile.range_(2 ** 22)
    np.testing.assert_array_equal(_edgelite(content)[0][-3:], [2 ** 22 - 3, 2 ** 22 - 2,
                                                               2 ** 22 - 1])
    monkeypatch.setenv("EDGELITE_MEMORY_LIMIT", "8M")
    with pytest.raises(MemoryBudgetError, match=r"needs 16.0 MiB .* budget of 8.0 MiB"):
        _edgelite(content)


def _aspp_conv(dilation: int) -> bytes:
    """DeepLabV3's ASPP branch: a 3x3 convolution, 256 -> 256 channels, dilation `dilation`,
    SAME padding, on a 1x30x32x256 input."""
    rng = np.random.default_rng(5)
    m = Model()
    sg = Subgraph(name="main")
    x = sg.add_tensor(Tensor("x", (1, 30, 32, 256)))
    w = sg.add_tensor(Tensor("w", (256, 3, 3, 256), buffer=m.add_buffer(
        rng.normal(0, 0.05, (256, 3, 3, 256)).astype(np.float32))))
    b = sg.add_tensor(Tensor("b", (256,), buffer=m.add_buffer(
        rng.normal(0, 0.1, 256).astype(np.float32))))
    y = sg.add_tensor(Tensor("y", (1, 30, 32, 256)))
    sg.inputs, sg.outputs = [x], [y]
    sg.operators = [Operator(OperatorCode("CONV_2D"), [x, w, b], [y], default_options(
        "CONV_2D", padding=0, stride_w=1, stride_h=1, dilation_w_factor=dilation,
        dilation_h_factor=dilation))]
    m.subgraphs.append(sg)
    return save(m)


@pytest.mark.parametrize("dilation", [12, 36])
def test_a_real_dilated_convolution_passes_the_guard(dilation):
    """The ASPP convolution the old ratio guard refused ("padded input of 7434240 values for
    245760 input values") runs and matches LiteRT: its padded input is a few MiB, well within
    the budget; what decides is the bytes, not their ratio to the input."""
    content = _aspp_conv(dilation)
    rng = np.random.default_rng(6)
    x = rng.normal(0, 1, (1, 30, 32, 256)).astype(np.float32)
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    results = []
    for cls in (Interpreter, LiteRT):
        it = cls(model_content=content)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        results.append(it.get_tensor(it.get_output_details()[0]["index"]))
    ours, theirs = results
    np.testing.assert_allclose(ours, theirs, atol=1e-4 * float(np.abs(theirs).max()))


def test_a_hostile_dilation_is_refused_by_its_bytes():
    """The same convolution with dilation 2**20 on a 1x30x32x256 input: its padded input would
    be terabytes; the budget refuses it naming the op and the size."""
    with pytest.raises(MemoryBudgetError, match=r"CONV_2D\).*padded input of \d+ values"):
        _edgelite(_aspp_conv(2 ** 20))


def _one_op(op: str, ins: list, outs: list, consts: dict | None = None) -> bytes:
    """One `op` over tensors given as (shape, dtype); `consts`: input position -> value."""
    m = Model()
    sg = Subgraph(name="main")
    consts = consts or {}
    tin = [sg.add_tensor(Tensor(f"in{k}", shape, dtype, m.add_buffer(consts[k])
                                if k in consts else 0))
           for k, (shape, dtype) in enumerate(ins)]
    tout = [sg.add_tensor(Tensor(f"out{k}", shape, dtype)) for k, (shape, dtype) in
            enumerate(outs)]
    sg.inputs = [t for k, t in enumerate(tin) if k not in consts]
    sg.outputs = tout
    sg.operators = [Operator(OperatorCode(op), tin, tout, default_options(op))]
    m.subgraphs.append(sg)
    return save(m)


# What the structured fuzzer's "any_op" family found: internal exceptions (IndexError,
# TypeError) that reached the user wrapped in an error; each is now a named refusal.
INTERNAL_BEFORE = {
    "no outputs": (lambda: _one_op("SHAPE", [((2, 3), "float32")], []),
                   r"SHAPE\): has no outputs; SHAPE writes at least one"),
    "a second output": (lambda: _one_op("SIGN", [((3,), "float32")],
                                        [((3,), "float32"), ((3,), "float32")]),
                        r"SIGN\): has 1 inputs and 2 outputs; its kernel reads and writes 2 "
                        r"tensors"),
    "output type": (lambda: _one_op("SQUEEZE", [((1, 3), "int32")], [((3,), "bool")]),
                    r"SQUEEZE\): output 0 'out0' is bool, but SQUEEZE gives its input 0's "
                    r"type, int32"),
    "output_shape not a vector": (
        lambda: _one_op("CONV_3D_TRANSPOSE", [((1, 5), "int32"), ((1, 1, 1, 1, 1), "float32"),
                                              ((1, 1, 1, 1, 1), "float32")],
                        [((1, 1, 1, 1, 1), "float32")],
                        {0: np.zeros((1, 5), np.int32), 1: np.ones((1, 1, 1, 1, 1),
                                                                   np.float32)}),
        r"output_shape \(input 0\) must be a vector"),
}


@pytest.mark.parametrize("case", sorted(INTERNAL_BEFORE))
def test_internal_errors_are_named_refusals(case):
    make, pattern = INTERNAL_BEFORE[case]
    with pytest.raises(KernelError, match=pattern) as info:
        _edgelite(make())
    assert "Error:" not in str(info.value)   # no "TypeError: ..." / "IndexError: ..." inside


def test_an_index_out_of_range_while_running_names_the_op():
    """GATHER with an index the model feeds past the end: a named error (IndexOutOfRange, a
    KernelError and an IndexError) naming the operator, not "failed: IndexError: ..."."""
    from edgelite.interpreter.kernels.errors import IndexOutOfRange
    content = _one_op("GATHER", [((4,), "float32"), ((2,), "int32")], [((2,), "float32")],
                      {0: np.float32([1, 2, 3, 4])})
    it = Interpreter(model_content=content)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.int32([1, 9]))
    with pytest.raises(IndexOutOfRange, match=r"^subgraph 0 operator 0 \(GATHER\): gather "
                                              r"index 9 is out of range \[0, 4\)"):
        it.invoke()


def test_a_version_below_litert_lowest_is_a_deliberate_leniency():
    """BROADCAST_TO version 1 (LiteRT registers 2..4; edgelite's writer gave 1 before): LiteRT
    refuses it, edgelite runs it. Version 5 (above LiteRT's highest) both refuse."""
    def model(version):
        m = Model()
        sg = Subgraph(name="main")
        x = sg.add_tensor(Tensor("x", (1, 3)))
        s = sg.add_tensor(Tensor("s", (2,), "int32", m.add_buffer(np.int32([2, 3]))))
        y = sg.add_tensor(Tensor("y", (2, 3)))
        sg.inputs, sg.outputs = [x], [y]
        sg.operators = [Operator(OperatorCode("BROADCAST_TO", version), [x, s], [y],
                                 default_options("BROADCAST_TO"))]
        m.subgraphs.append(sg)
        return save(m)
    assert _litert(model(1))[0] == "refused"
    np.testing.assert_array_equal(_edgelite(model(1))[0], np.ones((2, 3), np.float32))
    assert _litert(model(5))[0] == "refused"
    with pytest.raises(UnsupportedVersionError, match=r"'BROADCAST_TO' version '5'.*versions "
                                                      r"2\.\.4"):
        _edgelite(model(5))


def test_a_pool_window_of_millions_of_taps_is_refused():
    """AVERAGE_POOL_2D with a 65536x99 window on an 8x8 input (a 464-byte file): LiteRT's
    builtin kernel runs it; edgelite took 8 s of CPU (16M taps: minutes and gigabytes) and now
    refuses it at prepare, naming the window."""
    with pytest.raises(KernelError, match=r"AVERAGE_POOL_2D\): a 65536x99 window has 6488064 "
                                          r"taps, more than edgelite pools \(65536"):
        _edgelite(hostile.conv("AVERAGE_POOL_2D", filter_height=65536, filter_width=99))
