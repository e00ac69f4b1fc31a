"""Keras LSTM/GRU/SimpleRNN layers as WHILE loops (tests/interpreter/keras_while.py) against
LiteRT: the fused sequence kernel (interpreter/kernels/while_rnn.py) where the body is a cell,
the loop op by op where it is not, and a timing-free check that the fused kernel is what runs:
the Python frames one more time step costs (a handful, where the op-by-op loop runs ~30)."""
from __future__ import annotations

import gc
import sys

import numpy as np
import pytest

from tests.interpreter.keras_while import keras_while
from tests.opmodel import assert_close
from tests.numpy_dispatch import NUMPY2_DISPATCH

litert = pytest.importorskip("ai_edge_litert.interpreter",
                             reason="LiteRT (ai-edge-litert) is the oracle: "
                                    "pip install -e '.[dev]'")
from edgelite import interpreter as edgelite_interpreter  # noqa: E402
from edgelite.interpreter.kernels.rnn_loop import Sequence  # noqa: E402

CASES = {
    "lstm-sequences": dict(kind="lstm"),
    "lstm-batch2-last": dict(kind="lstm", batch=2, sequences=False),
    "lstm-no-bias": dict(kind="lstm", bias=False, units=8, n_in=3),
    # wider than rnn_cells.narrow (the other cases here are at most twice their units): the
    # input projection in one GEMM, the loop's own steps
    "lstm-wide-input": dict(kind="lstm", n_in=12),
    "gru-wide-input-batch2": dict(kind="gru", n_in=12, batch=2),
    "gru-reset-before-wide-input": dict(kind="gru", variant="reset_before", n_in=12),
    "lstm-dynamic-range-wide-input": dict(kind="lstm", variant="dynamic", n_in=12),
    "gru-dynamic-range-wide-input": dict(kind="gru", variant="dynamic", n_in=12),
    "rnn-wide-input": dict(kind="rnn", n_in=12),
    # fewer inputs than units: rnn_cells.StackedLstm (batch 1 row-major, a batch gate-major)
    "lstm-narrow-batch3": dict(kind="lstm", batch=3, units=8, n_in=3),
    "lstm-narrow-batch4-last": dict(kind="lstm", batch=4, units=8, n_in=3, sequences=False),
    "gru-sequences-batch3": dict(kind="gru", batch=3),
    "gru-last": dict(kind="gru", sequences=False),
    "gru-no-bias": dict(kind="gru", bias=False, steps=9),
    "lstm-dynamic-range": dict(kind="lstm", variant="dynamic", batch=2),
    # batch 1, fewer inputs than units: hybrid_lstm.QuantizedStackedLstm
    "lstm-dynamic-range-narrow": dict(kind="lstm", variant="dynamic", units=8, n_in=3),
    "lstm-dynamic-range-narrow-last-no-bias": dict(kind="lstm", variant="dynamic", units=8,
                                                   n_in=3, sequences=False, bias=False),
    "gru-dynamic-range": dict(kind="gru", variant="dynamic"),
    # batch 1, fewer inputs than units: hybrid_row.QuantizedStackedGru
    "gru-dynamic-range-narrow": dict(kind="gru", variant="dynamic", units=8, n_in=3),
    "gru-dynamic-range-narrow-last-no-bias": dict(kind="gru", variant="dynamic", units=8,
                                                  n_in=3, sequences=False, bias=False),
    "gru-reset-before": dict(kind="gru", variant="reset_before", batch=2),
    "gru-reset-before-no-bias": dict(kind="gru", variant="reset_before", bias=False,
                                     sequences=False),
    # fewer inputs than units: rnn_cells.StackedGru
    "gru-narrow": dict(kind="gru", units=8, n_in=3),
    "gru-narrow-batch3-last-no-bias": dict(kind="gru", batch=3, units=8, n_in=3,
                                           sequences=False, bias=False),
    "gru-reset-before-narrow": dict(kind="gru", variant="reset_before", units=8, n_in=3),
    "gru-reset-before-narrow-batch2": dict(kind="gru", variant="reset_before", units=8,
                                           n_in=3, batch=2),
    "gru-reset-before-narrow-last-no-bias": dict(kind="gru", variant="reset_before", units=8,
                                                 n_in=3, sequences=False, bias=False),
    "rnn-sequences-batch2": dict(kind="rnn", batch=2),   # narrow: rnn_cells.StackedRnn
    "rnn-last-no-bias": dict(kind="rnn", sequences=False, bias=False),
    "lstm-relu-cell": dict(kind="lstm", variant="relu"),
    "lstm-hard-sigmoid": dict(kind="lstm", variant="hard_sigmoid"),
    "lstm-hard-sigmoid-batch2-last": dict(kind="lstm", variant="hard_sigmoid", batch=2,
                                          sequences=False),
    "rnn-relu": dict(kind="rnn", variant="relu", batch=2),
    "rnn-relu-fused": dict(kind="rnn", variant="relu_fused"),
    "gru-extra-op": dict(kind="gru", variant="extra"),
}
FUSED = {k for k, v in CASES.items() if v.get("variant", "dynamic") in ("dynamic",
                                                                       "reset_before",
                                                                       "hard_sigmoid")
         or k.startswith("rnn-relu")}


def _feeds(it, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(tuple(d["shape"])).astype(np.float32)
            for d in it.get_input_details()]


def _invoke(it, seed):
    """The outputs (copies) of one invoke of an allocated interpreter on _feeds(it, seed)."""
    for d, f in zip(it.get_input_details(), _feeds(it, seed)):
        it.set_tensor(d["index"], f)
    it.invoke()
    return [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]


def _run(module, content, invokes=2, **kwargs):
    it = module.Interpreter(model_content=content, **kwargs)
    it.allocate_tensors()
    return [_invoke(it, seed) for seed in range(invokes)]


@pytest.mark.parametrize("case", list(CASES))
def test_keras_while_matches_litert(case):
    content = keras_while(**CASES[case])
    for ours, theirs in zip(_run(edgelite_interpreter, content), _run(litert, content)):
        assert_close(ours, theirs, rtol=1e-5, atol=1e-6)


def _sequences() -> list:
    """The fused Keras-loop kernels (rnn_loop.Sequence) alive."""
    return [o for o in gc.get_objects() if type(o) is Sequence]


def _frames(content) -> tuple:
    """(Python frames, fused cell steps: the time steps the interpreter's fused kernels took)
    of one invoke."""
    before = {id(o) for o in _sequences()}
    it = edgelite_interpreter.Interpreter(model_content=content)
    it.allocate_tensors()
    _invoke(it, 1)
    fused = [o for o in _sequences() if id(o) not in before]
    for o in fused:
        o.ran = 0
    count = [0]

    def hook(frame, event, arg):
        if event == "call":
            count[0] += 1
    sys.setprofile(hook)
    try:
        it.invoke()
    finally:
        sys.setprofile(None)
    return count[0], sum(o.ran for o in fused)


@NUMPY2_DISPATCH
@pytest.mark.parametrize("case", list(CASES))
def test_keras_while_frames_per_step(case):
    """The guard of issue 17's recurrent speed, without a clock: the fused kernel runs (one cell
    step per time step), and with float weights a time step costs 3 or 4 Python frames
    (dynamic-range weights add their FULLY_CONNECTED kernel's)."""
    kw = {k: v for k, v in CASES[case].items() if k != "steps"}
    (short, short_cells), (long, long_cells) = (_frames(keras_while(steps=n, **kw))
                                                for n in (8, 16))
    per_step = (long - short) / 8
    if case in FUSED:
        assert (short_cells, long_cells) == (8, 16), "the fused kernel did not run"
        if kw.get("variant") != "dynamic":
            # the cell's step, its recurrent product, np.dot's dispatcher (two with
            # reset_after=False): at most 4; op by op, a step is ~30.
            assert per_step <= 4, f"{per_step} Python frames per time step"
    else:
        assert long_cells == 0
        assert per_step >= 15, f"{per_step} frames per step: the fused kernel took a body " \
                               "that is not a Keras cell"


def test_keras_while_under_builtin_ref_runs_op_by_op():
    """BUILTIN_REF is the spec: no fused kernel there, and the same results."""
    content = keras_while(kind="gru", batch=2)
    resolver = edgelite_interpreter.OpResolverType.BUILTIN_REF
    ours = _run(edgelite_interpreter, content, invokes=1,
                experimental_op_resolver_type=resolver)[0]
    assert_close(ours, _run(litert, content, invokes=1)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind,sizes", [("lstm", {}), ("gru", {}),
                                        ("lstm", dict(units=8, n_in=3, batch=2)),
                                        ("gru", dict(units=8, n_in=3, batch=2))])
def test_keras_while_fewer_steps_than_the_sequence(kind, sizes):
    """The loop stops before the sequence ends: the TensorArray's later rows keep their zeros
    (a narrow LSTM, StackedLstm's where it runs the whole sequence, takes LstmSteps here)."""
    content = keras_while(kind=kind, steps=7, limit=4, **sizes)
    for ours, theirs in zip(_run(edgelite_interpreter, content), _run(litert, content)):
        assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    assert _frames(content)[1] == 4


def test_keras_while_past_the_sequence_fails_naming_the_gather():
    """More steps than the sequence has: the fused kernel declines and the loop, run as it is,
    fails at the GATHER, as LiteRT does."""
    content = keras_while(kind="lstm", steps=5, limit=6)
    with pytest.raises(IndexError, match=r"operator 3 \(GATHER\): gather index 5 is out of"):
        _run(edgelite_interpreter, content, invokes=1)
    with pytest.raises(RuntimeError, match="GATHER"):
        _run(litert, content, invokes=1)


def test_keras_while_with_preserve_all_tensors_runs_op_by_op():
    """experimental_preserve_all_tensors reads the body's tensors as they ran: no fused kernel,
    the same outputs."""
    content = keras_while(kind="lstm")
    it = edgelite_interpreter.Interpreter(model_content=content,
                                          experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    ours = _invoke(it, 0)
    assert_close(ours, _run(litert, content, invokes=1)[0], rtol=1e-5, atol=1e-6)
    body = it._runtime.subgraph(2)
    h_last = body.arrays[body.sg.outputs[3]]   # the last iteration's h, as LiteRT keeps it
    np.testing.assert_allclose(h_last, ours[1], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("kind,variant,batch", [
    ("gru", "", 1), ("gru", "", 3), ("gru", "reset_before", 1), ("gru", "reset_before", 2),
    ("lstm", "", 1), ("lstm", "hard_sigmoid", 2), ("rnn", "", 2)])
@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
def test_keras_while_narrow_nonfinite_input_as_litert(kind, variant, batch, value):
    """A narrow loop's stacked steps (rnn_cells) with one non-finite input: LiteRT's
    non-finite pattern and its values elsewhere. StackedGru's zero blocks multiply x's inf
    (inf * 0: NaN in every h); that loop takes the loop's own steps then."""
    content = keras_while(kind=kind, variant=variant, batch=batch, units=8, n_in=3)
    outs = []
    for module in (edgelite_interpreter, litert):
        it = module.Interpreter(model_content=content)
        it.allocate_tensors()
        feeds = _feeds(it)
        feeds[0][0, 2, 1] = value
        for d, f in zip(it.get_input_details(), feeds):
            it.set_tensor(d["index"], f)
        it.invoke()
        outs.append([np.array(it.get_tensor(d["index"])) for d in it.get_output_details()])
    for ours, theirs in zip(*outs):
        for test in (np.isnan, np.isposinf, np.isneginf):
            np.testing.assert_array_equal(test(ours), test(theirs))
        finite = np.isfinite(theirs)
        np.testing.assert_allclose(ours[finite], theirs[finite], rtol=1e-5, atol=1e-6)
