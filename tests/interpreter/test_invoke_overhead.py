"""Timing-free guards of the per-invoke cost of small models (issue 17): Python-level calls per
invoke, steps bound at allocate, the generated plan naming a failed operator, no array-sized
allocation while invoking, and bound kernels giving exactly what their unbound `run` gives.
Speed itself is measured in benchmarks/bench_overhead.py, never here."""
from __future__ import annotations

import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from edgelite.interpreter import Interpreter, register_custom_op, threads
from edgelite.interpreter.plan import bind_step
from tests.interpreter.frames import INVOKE_FRAMES, python_calls
from tests.opmodel import In, op_model
from tests.numpy_dispatch import NUMPY2_DISPATCH

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_overhead import chain_model  # noqa: E402

def ready(content=None, path=None) -> Interpreter:
    it = Interpreter(model_content=content, model_path=path)
    it.allocate_tensors()
    rng = np.random.default_rng(0)
    for d in it.get_input_details():
        it.set_tensor(d["index"], rng.standard_normal(d["shape"]).astype(d["dtype"]))
    it.invoke()
    return it


@NUMPY2_DISPATCH
@pytest.mark.parametrize("fused_relu", [False, True])
def test_a_chain_of_tiny_ops_runs_one_python_call_per_op(fused_relu):
    """bench_overhead's chain: ADD (a fused RELU on it or not) and MUL of [1] tensors. Each op
    is one Python frame (a fused RELU was three more: with_activation, the lambda, clip_)."""
    it = ready(chain_model(200, fused_relu))
    assert len(it._main.steps) == 200
    assert python_calls(it.invoke) <= 200 + INVOKE_FRAMES   # was 219 plain, 519 fused


@NUMPY2_DISPATCH
def test_tiny_model_steps_are_bound_at_allocate(models_dir):
    """The digits CNN's convolutions, pools and fully-connected layers run bound to their
    arrays (views and clamp bounds made once), each one Python frame an invoke."""
    it = ready(path=str(models_dir / "digits_cnn.tflite"))
    plan = it._main
    # the steps run_steps runs (a RESHAPE is a view, pools and FCs run in fused steps:
    # test_fusion.py; those are listed as steps doing nothing)
    running = [step for oi, step in zip(plan.step_ops, plan.steps) if oi in plan.run_ops]
    bound = [run for run, args in running if bind_step(run, list(args))]
    assert bound and len(bound) == len(running) == len(plan.run_ops)
    assert plan.run_steps.bound == len(bound)
    # One frame per step run (RESHAPE is a view: none), the invoke's; 2 spare. Was 55, now 11.
    assert python_calls(it.invoke) <= len(plan.run_ops) + INVOKE_FRAMES + 2


@NUMPY2_DISPATCH
def test_invoke_allocates_no_layer_sized_array(models_dir):
    """While MobileNetV2 runs, at most 64 KiB are allocated at any moment (numpy's iterators
    over strided views: ~5 KiB each, freed at once); its activations are 60 KiB to 1.5 MiB,
    so a temporary of any layer's size would show."""
    it = ready(path=str(models_dir / "mobilenet_v2.tflite"))
    tracemalloc.start()
    try:
        it.invoke()
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        it.invoke()
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024, f"an invoke allocated {peak} bytes at its peak"


def _outputs(it):
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def _unbound_outputs(it):
    """The outputs of the plan's steps run one by one through their unbound `run`."""
    with np.errstate(all="ignore"), threads.limit(None):   # one BLAS thread, as invoke
        for run, args in it._main.steps:
            run(*args)
    return _outputs(it)


def assert_bound_equals_unbound(it):
    assert it._main.run_steps.bound, "no step was bound: bound and unbound would be one run"
    it.invoke()
    bound = _outputs(it)
    for a, b in zip(bound, _unbound_outputs(it)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["digits_cnn", "mobilenet_v2", "mp_face_detection",
                                  "mp_hand_landmark"])
def test_bound_kernels_give_what_their_run_gives(models_dir, name):
    assert_bound_equals_unbound(ready(path=str(models_dir / f"{name}.tflite")))


POOLS = [((1, 1), (1, 1)), ((2, 2), (2, 2)), ((3, 3), (1, 1)), ((3, 3), (2, 2)),
         ((1, 3), (1, 2)), ((3, 1), (2, 1)), ((2, 3), (1, 3))]


@pytest.mark.parametrize("window,strides", POOLS)
@pytest.mark.parametrize("act", [0, 3])
@pytest.mark.parametrize("padding", [1], ids=["VALID"])
def test_bound_max_pool_matches_its_run(window, strides, act, padding):
    """MAX_POOL_2D bound (rows folded, then columns) against its tap-by-tap `run`. VALID only:
    a padded (SAME) window is not bound (its `run` stays), so there it would compare `run` with
    itself; tests/interpreter/test_max_pool_windows.py checks SAME against LiteRT."""
    content = op_model("MAX_POOL_2D", [In((2, 7, 9, 3))],
                       options=dict(filter_height=window[0], filter_width=window[1],
                                    stride_h=strides[0], stride_w=strides[1], padding=padding,
                                    fused_activation_function=act))
    it = ready(content)
    it.set_tensor(it.get_input_details()[0]["index"],
                  np.random.default_rng(1).standard_normal((2, 7, 9, 3)).astype(np.float32) * 4)
    assert_bound_equals_unbound(it)


@pytest.mark.parametrize("rows", [1, 5])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", [0, 1, 3])
def test_bound_fully_connected_matches_its_run(rows, bias, act):
    rng = np.random.default_rng(2)
    w = rng.standard_normal((7, 12)).astype(np.float32)
    b = rng.standard_normal(7).astype(np.float32) if bias else None
    content = op_model("FULLY_CONNECTED", [In((rows, 12)), w, b],
                       options=dict(fused_activation_function=act))
    it = ready(content)
    assert_bound_equals_unbound(it)


@pytest.mark.parametrize("padding", [0, 1])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("dilation", [1, 2])
@pytest.mark.parametrize("batch,size", [(1, 6), (2, 7), (1, 30)])  # 30: too large to gather
def test_bound_conv_matches_its_run(padding, stride, dilation, batch, size):
    """CONV_2D bound: a small one gathers its im2col matrix in one take, a larger one copies
    windows into the shared work buffer; both as its `run`, bit for bit."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 3, 3, 2)).astype(np.float32)
    content = op_model("CONV_2D", [In((batch, size, size + 1, 2)), w,
                                   rng.standard_normal(4).astype(np.float32)],
                       options=dict(padding=padding, stride_h=stride, stride_w=stride,
                                    dilation_h_factor=dilation, dilation_w_factor=dilation,
                                    fused_activation_function=1))
    assert_bound_equals_unbound(ready(content))


def test_a_failing_step_of_the_generated_plan_names_its_operator():
    """The plan runs as one generated function; a kernel failing at step 3 is still named
    (from the line of the traceback), and so is one at step 0."""
    def prepare(node):
        node.outputs[0].shape = node.input(0).shape

        def run(x, out):
            raise ValueError("the kernel's own failure")
        return run
    register_custom_op("EdgeliteTestFails", prepare, replace=True)
    for position in (0, 3):
        ops = ["ADD"] * 5
        ops[position] = "EdgeliteTestFails"
        it = Interpreter(model_content=_chain_with(ops))
        it.allocate_tensors()
        with pytest.raises(RuntimeError, match=rf"subgraph 0 operator {position} "
                           r"\(EdgeliteTestFails\) failed: ValueError: the kernel's own failure"):
            it.invoke()


def _chain_with(ops: list) -> bytes:
    from edgelite.schema import (Model, Operator, OperatorCode, Subgraph, Tensor,
                                 default_options, save)

    model = Model()
    sg = Subgraph(name="main")
    prev = sg.add_tensor(Tensor("x", (2,), "float32"))
    c = sg.add_tensor(Tensor("c", (2,), "float32",
                             buffer=model.add_buffer(np.ones(2, np.float32))))
    sg.inputs = [prev]
    for i, op in enumerate(ops):
        out = sg.add_tensor(Tensor(f"t{i}", (2,), "float32"))
        if op == "ADD":
            sg.operators.append(Operator(OperatorCode("ADD", 1), [prev, c], [out],
                                         default_options("ADD")))
        else:
            sg.operators.append(Operator(OperatorCode("CUSTOM", 1, custom_code=op), [prev],
                                         [out]))
        prev = out
    sg.outputs = [prev]
    model.subgraphs.append(sg)
    return save(model)


def _add_reshape_add() -> bytes:
    """x[2, 3] -> ADD -> RESHAPE [3, 2] -> ADD -> y (nothing the plan fuses)."""
    from edgelite.schema import Model, Subgraph, Tensor, save
    from tests.opmodel import const_tensor, operator

    model, sg = Model(), Subgraph(name="main")
    x, a, r, y = (sg.add_tensor(Tensor(name, shape, "float32")) for name, shape in
                  (("x", (2, 3)), ("a", (2, 3)), ("r", (3, 2)), ("y", (3, 2))))
    sg.operators += [
        operator("ADD", [x, const_tensor(model, sg, "c", np.ones(3, np.float32))], [a]),
        operator("RESHAPE", [a, const_tensor(model, sg, "s", np.array([3, 2], np.int32))], [r]),
        operator("ADD", [r, const_tensor(model, sg, "d", np.ones(2, np.float32))], [y])]
    sg.inputs, sg.outputs = [x], [y]
    model.subgraphs.append(sg)
    return save(model)


def test_a_reshape_inside_the_graph_is_a_view_and_runs_no_step():
    """A RESHAPE between two ops shares its input's memory, and run_steps has no step for it
    (profiles still list it, as a step doing nothing); a RESHAPE whose output is the model's
    output is still copied. (The digits CNN's RESHAPE is inside a fused step now:
    test_fusion.py.)"""
    it = ready(content=_add_reshape_add())
    plan = it._main
    (oi,) = [i for i, op in enumerate(plan.sg.operators) if op.opcode.name == "RESHAPE"]
    op = plan.sg.operators[oi]
    assert oi not in plan.run_ops and oi in plan.step_ops
    assert np.shares_memory(plan.arrays[op.inputs[0]], plan.arrays[op.outputs[0]])
    last = Interpreter(model_content=op_model("RESHAPE", [In((2, 3)), np.array([3, 2], np.int32)]))
    last.allocate_tensors()
    assert len(last._main.steps) == 1


def test_set_tensor_and_get_tensor_of_the_right_array_are_one_call_each(models_dir):
    """An input of the tensor's type and shape is copied in without the checks that build the
    messages (1 Python frame: set_tensor; was 12), an output copied out the same way (was 10); the
    values are what they should be, and a wrong array still gets its message."""
    it = ready(path=str(models_dir / "digits_cnn.tflite"))
    x = np.random.default_rng(4).random((1, 8, 8, 1), np.float32)
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    assert python_calls(lambda: it.set_tensor(i, x)) <= 2      # the lambda, set_tensor
    it.invoke()
    assert python_calls(lambda: it.get_tensor(o)) <= 2
    out = it.get_tensor(o)
    out[...] = 0     # a copy: the interpreter's output is untouched
    reference = Interpreter(model_path=str(models_dir / "digits_cnn.tflite"))
    reference.allocate_tensors()
    reference.set_tensor(i, x)
    reference.invoke()
    np.testing.assert_array_equal(it.get_tensor(o), reference.get_tensor(o))
    with pytest.raises(ValueError, match="Got value of type FLOAT64 but expected type FLOAT32"):
        it.set_tensor(i, x.astype(np.float64))
