"""Bound steps made of plain calls (steps.calls_step) are written into the plan's generated
run_steps as those calls (plan.compile_steps, issue 17): no Python frame for the step. Timing-
free guards: Python frames per invoke (each bound of these fails on the tree before, which ran
a frame a step and one per fused layer), steps inlined, a failure inside an inlined step still
named by its operator, and the inlined steps giving what the kernels' own `run` gives.
Speed: benchmarks/ab_overhead.py."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from edgelite.interpreter import Interpreter, register_custom_op
from edgelite.interpreter.plan import bind_step
from edgelite.interpreter.kernels.steps import call, calls_step
from tests.interpreter.frames import INVOKE_FRAMES, python_calls
from tests.interpreter.test_invoke_overhead import _chain_with, assert_bound_equals_unbound, \
    ready
from tests.numpy_dispatch import NUMPY2_DISPATCH
from tests.opmodel import In, op_model

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_overhead import chain_model  # noqa: E402


@NUMPY2_DISPATCH
@pytest.mark.parametrize("width", [1, 8])
@pytest.mark.parametrize("fused_relu", [False, True])
def test_a_chain_of_tiny_ops_runs_no_python_frame_per_op(fused_relu, width):
    """bench_overhead's chains of 200 ADD (RELU) / MUL ops ([1]: lines of Python floats; [8]:
    numpy's calls): every step inlined, the invoke's own frames only (was one an op: 204)."""
    it = ready(chain_model(200, fused_relu, width))
    assert it._main.run_steps.inlined == 200
    assert python_calls(it.invoke) <= INVOKE_FRAMES


@NUMPY2_DISPATCH
def test_the_digits_cnn_runs_no_python_frame_per_step(models_dir):
    """The digits CNN's two fused steps (CONV_2D+MAX_POOL_2D; CONV_2D+MAX_POOL_2D+FC+FC) as
    their calls: the invoke's frames only (was 8: a frame per step and per fused FC)."""
    it = ready(path=str(models_dir / "digits_cnn.tflite"))
    assert it._main.run_steps.inlined == len(it._main.run_ops) == 2
    assert python_calls(it.invoke) <= INVOKE_FRAMES


@pytest.mark.parametrize("name", ["digits_cnn", "mobilenet_v2", "mp_face_detection"])
def test_inlined_steps_give_what_their_run_gives(models_dir, name):
    it = ready(path=str(models_dir / f"{name}.tflite"))
    assert it._main.run_steps.inlined
    assert_bound_equals_unbound(it)


@pytest.mark.parametrize("op", ["MAXIMUM", "MINIMUM"])
@pytest.mark.parametrize("shape", [(1,), (3, 5)])
def test_max_min_inline_as_two_calls(op, shape):
    """Float MAXIMUM / MINIMUM bound as fmax (fmin) and clip, inlined: two calls, no
    reduction (was maximum, a NaN search by maximum.reduce, isnan)."""
    content = op_model(op, [In(shape), In(shape)])
    it = ready(content)
    source = it._main.run_steps.source.splitlines()
    assert it._main.run_steps.inlined == 1
    step = source[2]
    assert step.count("(") == 2 and step.count(";") == 1, step


def test_a_failing_inlined_step_names_its_operator():
    """A failure inside an inlined step (one line of calls) names its operator, at step 0 and
    after inlined ADDs."""
    def fails():
        raise ValueError("the inlined call's own failure")

    def prepare(node):
        node.outputs[0].shape = node.input(0).shape

        def run(x, out):
            fails()
        run.bind = lambda x, out: calls_step(call(np.copyto, out, x), call(fails))
        return run
    register_custom_op("EdgeliteTestInlinedFails", prepare, replace=True)
    for position in (0, 3):
        ops = ["ADD"] * 5
        ops[position] = "EdgeliteTestInlinedFails"
        it = Interpreter(model_content=_chain_with(ops))
        it.allocate_tensors()
        assert it._main.run_steps.inlined == 5
        with pytest.raises(RuntimeError, match=rf"subgraph 0 operator {position} "
                           r"\(EdgeliteTestInlinedFails\) failed: ValueError: the inlined"):
            it.invoke()


def test_calls_step_alone_runs_its_calls():
    out = np.zeros(3, np.float32)
    step = calls_step(call(np.add, np.ones(3, np.float32), 2.0, out), None,
                      call(np.multiply, out, 3.0, out=out))
    step()
    np.testing.assert_array_equal(out, [9, 9, 9])
    assert len(step.calls) == 2


@pytest.mark.parametrize("act", [0, 1])
def test_max_pool_nan_rule_runs_against_a_bound_of_the_output_shape(act):
    """MAX_POOL_2D under the default resolver takes a NaN max to its clamp's lower bound by
    fmax against that bound as an array of the output's shape (a 0-d one broadcasts: ~0.4 µs
    a call more), bound once at allocate; the result as LiteRT's NaN rule (test_nonfinite)."""
    content = op_model("MAX_POOL_2D", [In((1, 6, 6, 8))],
                       options=dict(filter_height=2, filter_width=2, stride_h=2, stride_w=2,
                                    padding=1, fused_activation_function=act))
    it = ready(content)
    (run, args), = [s for oi, s in zip(it._main.step_ops, it._main.steps)
                    if oi in it._main.run_ops]
    calls = bind_step(run, list(args)).calls
    fmax = [a for f, a, _ in calls if f is np.fmax]
    assert len(fmax) == 1 and fmax[0][0].shape == fmax[0][1].shape == (1, 3, 3, 8)


_VALUES = np.array([0.0, -0.0, 1.0, -1.0, 1e-45, -1e-45, 1e-30, -1e-30, 3e38, -3e38, 6.0, 5.9999995,
                    0.1, -0.3, np.inf, -np.inf, np.nan, 1.1754942e-38, 2.5, -7.25], np.float32)


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
@pytest.mark.parametrize("act", [0, 1, 2, 3])
@pytest.mark.parametrize("const", [False, True])
def test_one_element_float_ops_on_python_floats_are_numpys_bits(op, act, const):
    """ADD / SUB / MUL of one-element float32 tensors run as a line of Python on floats
    (elementwise.python_binary: a frame-free ~0.08 µs step): bit for bit numpy's float32
    arithmetic and clip (NaN, infinities, subnormals, products rounding to -0.0 at RELU's 0)."""
    y_value = np.float32(-1e-30)
    inputs = [In((1,)), np.array([y_value], np.float32) if const else In((1,))]
    it = ready(op_model(op, inputs, options=dict(fused_activation_function=act)))
    assert "[0] =" in it._main.run_steps.source.splitlines()[2]
    ufunc = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply}[op]
    lo, hi = {0: (-np.inf, np.inf), 1: (0, np.inf), 2: (-1, 1), 3: (0, 6)}[act]
    ins = it.get_input_details()
    out = it.get_output_details()[0]["index"]
    for x in _VALUES:
        for y in ([y_value] if const else _VALUES):
            it.set_tensor(ins[0]["index"], np.array([x], np.float32))
            if not const:
                it.set_tensor(ins[1]["index"], np.array([y], np.float32))
            it.invoke()
            with np.errstate(all="ignore"):
                want = ufunc(np.float32(x), np.float32(y))
            # LiteRT's std::min(std::max(v, lo), hi): -0.0 stays -0.0 at RELU's 0 (numpy 2's
            # clip agrees; numpy 1.24's clip gives +0.0), NaN passes through
            want = np.float32(lo) if want < lo else want
            want = np.float32(hi) if hi < want else want
            got = it.get_tensor(out)[0]
            assert (np.isnan(got) and np.isnan(want)) or \
                got.view(np.uint32) == want.view(np.uint32), (x, y, got, want)


@NUMPY2_DISPATCH
@pytest.mark.parametrize("op,shape,beta", [("LOGISTIC", (1, 1), None), ("SOFTMAX", (1, 8), 1.0),
                                           ("SOFTMAX", (1, 8), 0.5), ("SOFTMAX", (1, 40), 1.0)])
def test_one_row_activations_are_inlined(op, shape, beta):
    """A one-element LOGISTIC and a short SOFTMAX row (Python floats) as a line of Python, a
    longer SOFTMAX row as its numpy calls: no frame (was one: bound, two for LOGISTIC), the
    same values as the kernels' own run."""
    options = None if beta is None else dict(beta=beta)
    it = ready(op_model(op, [In(shape)], options=options))
    assert it._main.run_steps.inlined == 1
    assert python_calls(it.invoke) <= INVOKE_FRAMES
    x = np.float32([[np.nan, -100, -1e-30, 0, 3, 88.5, -88.5, 1e30]] * (shape[1] // 8 or 1))
    it.set_tensor(it.get_input_details()[0]["index"], x.reshape(-1)[:np.prod(shape)]
                  .reshape(shape) if shape[1] % 8 == 0 else np.float32([[0.75]]))
    assert_bound_equals_unbound(it)


def test_mobilenet_v2_convolutions_and_adds_are_inlined(models_dir):
    """MobileNetV2's 1x1 and 3x3 CONV_2Ds (gather, product, bias, clamp) and residual ADDs run
    as their calls in the plan's run_steps: 47 of its 65 steps (the depthwise convolutions and
    the MEAN keep their frames; were all 65 steps a frame or more: 406 an invoke, now ~305)."""
    it = ready(path=str(models_dir / "mobilenet_v2.tflite"))
    plan = it._main
    framed = [plan.sg.operators[oi].opcode.name
              for oi, (run, args) in zip(plan.step_ops, plan.steps) if oi in plan.run_ops
              and not hasattr(bind_step(run, list(args)), "calls")]
    assert set(framed) <= {"DEPTHWISE_CONV_2D", "MEAN"}, framed
    assert plan.run_steps.inlined >= 47


@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "L2_POOL_2D"])
@pytest.mark.parametrize("window,strides", [((2, 2), (2, 2)), ((3, 3), (1, 1)), ((1, 3), (1, 2)),
                                            ((1, 1), (1, 1))])
@pytest.mark.parametrize("act", [0, 1, 3])
def test_summing_pools_inline_and_match_their_run(op, window, strides, act):
    """AVERAGE_POOL_2D / L2_POOL_2D of unpadded (VALID) windows as their calls in run_steps
    (was a frame and a tap list rebuilt every invoke), the same values as `run`."""
    content = op_model(op, [In((2, 7, 9, 3))],
                       options=dict(filter_height=window[0], filter_width=window[1],
                                    stride_h=strides[0], stride_w=strides[1], padding=1,
                                    fused_activation_function=act))
    it = ready(content)
    assert it._main.run_steps.inlined == 1
    x = np.random.default_rng(2).standard_normal((2, 7, 9, 3)).astype(np.float32) * 4
    x[0, 1, 1, 0], x[1, 2, 3, 1] = np.nan, np.inf
    it.set_tensor(it.get_input_details()[0]["index"], x)
    assert_bound_equals_unbound(it)


@pytest.mark.parametrize("op,act", [("DIV", 0), ("DIV", 1), ("FLOOR_DIV", 0), ("POW", 0)])
@pytest.mark.parametrize("shapes", [((1,), (1,)), ((2, 5), (2, 5)), ((2, 5), (1, 5))])
def test_float_div_pow_inline_and_match_their_run(op, act, shapes):
    options = dict(fused_activation_function=act) if op == "DIV" else None
    it = ready(op_model(op, [In(shapes[0]), In(shapes[1])], options=options))
    assert it._main.run_steps.inlined == 1
    rng = np.random.default_rng(4)
    for d in it.get_input_details():
        x = rng.standard_normal(d["shape"]).astype(np.float32) * 3
        x.reshape(-1)[0] = 0.0
        it.set_tensor(d["index"], x)
    assert_bound_equals_unbound(it)


@pytest.mark.parametrize("bias,act", [(True, 1), (False, 0)])
def test_transpose_conv_inlines_and_matches_its_run(bias, act):
    rng = np.random.default_rng(5)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    inputs = [np.array([1, 8, 8, 4], np.int32), w, In((1, 4, 4, 3))] + \
        ([rng.standard_normal(4).astype(np.float32)] if bias else [])
    it = ready(op_model("TRANSPOSE_CONV", inputs, options=dict(
        stride_w=2, stride_h=2, padding=0, fused_activation_function=act)))
    assert it._main.run_steps.inlined == 1
    assert_bound_equals_unbound(it)


@pytest.mark.parametrize("adj", [(False, False), (True, False), (False, True)])
def test_batch_matmul_inlines_and_matches_its_run(adj):
    a = (2, 5, 3) if adj[0] else (2, 3, 5)
    b = (2, 4, 5) if adj[1] else (2, 5, 4)
    it = ready(op_model("BATCH_MATMUL", [In(a), In(b)], options=dict(adj_x=adj[0], adj_y=adj[1])))
    assert it._main.run_steps.inlined == 1
    assert_bound_equals_unbound(it)
