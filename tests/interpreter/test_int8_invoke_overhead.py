"""Timing-free guards of the per-invoke cost of int8 tiny models (issue 17): their int8 steps bound
at allocate (plan.bind_step), few Python and numpy calls an invoke, and every bound int8 kernel
giving bit for bit what its unbound `run` gives (the default resolver; BUILTIN_REF kernels
decline to bind and keep their exact path). Speed itself: benchmarks/bench_overhead.py --models."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import Interpreter, threads
from edgelite.interpreter.plan import bind_step
from tests.interpreter.cases_int8 import CASES
from tests.interpreter.frames import calls
from tests.interpreter.numpy_calls import numpy_calls
from tests.numpy_dispatch import NUMPY2_DISPATCH

INT8_OPS = ("conv_2d", "depthwise_conv_2d", "fully_connected", "max_pool", "add", "sub")


def ready(content=None, path=None, seed=0) -> Interpreter:
    it = Interpreter(model_content=content, model_path=path)
    it.allocate_tensors()
    feed(it, seed)
    it.invoke()
    return it


def feed(it, seed) -> None:
    rng = np.random.default_rng(seed)
    for d in it.get_input_details():
        if np.issubdtype(d["dtype"], np.integer):
            info = np.iinfo(d["dtype"])
            value = rng.integers(info.min, info.max + 1, d["shape"])
        else:
            value = rng.standard_normal(d["shape"]) * 2
        it.set_tensor(d["index"], value.astype(d["dtype"]))


def op_names(it) -> list:
    plan = it._main
    return [plan.sg.operators[oi].opcode.name for oi in plan.step_ops]


def assert_steps_match_unbound(it) -> int:
    """Each step bound (where its kernel binds) against its unbound `run`, in plan order on the
    same arrays: every array of the step equal bit for bit. Returns the steps compared."""
    compared = 0
    with np.errstate(all="ignore"), threads.limit(None):
        plan = it._main
        for oi, (run, args) in zip(plan.step_ops, plan.steps):
            name, writes = plan.sg.operators[oi].opcode.name, bool(plan.sg.operators[oi].outputs)
            # (a CONCATENATION whose other inputs are views of its output writes only parts)
            writes = writes and getattr(run, "__name__", "") != "concatenation_parts"
            args = list(args)
            bound = bind_step(run, args)
            run(*args)
            if bound is None:
                continue
            want = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
            for a in args:                       # the output is overwritten, not read
                if isinstance(a, np.ndarray) and a is args[-1] and writes:   # (ASSIGN: none)
                    a.view(np.uint8).fill(0x5A)
            bound()
            for k, (a, b) in enumerate(zip(args, want)):
                if isinstance(a, np.ndarray):
                    np.testing.assert_array_equal(a, b, err_msg=f"{name} array {k}")
            compared += 1
    return compared


def running(it) -> list:
    """(op, its kernel's name, bound) of each step that runs (views run none: views.py)."""
    return [(op, run.__qualname__.split(".")[0], bind_step(run, list(args)) is not None)
            for op, (run, args) in zip(op_names(it), it._main.steps)
            if run.__name__ != "_view_step"]


def test_wake_word_int8_steps_bound(models_dir):
    """mwk_okay_nabu (streaming int8 wake-word model): its convolutions, depthwise convolutions
    (its three MixConv blocks one each, mixconv.py) and fully-connected layer run bound to
    their arrays; its ring buffers' CONCATENATION/STRIDED_SLICE and the blocks' SPLIT_V run
    no step; five int8 chains (fusion_int8.py: depthwise or MixConv block -> 1x1 conv, the
    last -> FULLY_CONNECTED too) one step each."""
    it = ready(path=str(models_dir / "mwk_okay_nabu.tflite"))
    steps = running(it)
    kernels = {(op, kernel) for op, kernel, _ in steps}
    assert {op for op, _ in kernels} >= {"CONV_2D", "DEPTHWISE_CONV_2D"}
    assert all(bound for op, kernel, bound in steps if kernel in (
        "conv_2d", "depthwise_conv_2d", "_fast_run", "_chain_run") or op == "FULLY_CONNECTED")
    assert [kernel for _, kernel, _ in steps].count("_chain_run") == 5
    assert [kernel for op, kernel, _ in steps if op == "CONCATENATION"].count(
        "_chain_run") == 3        # (the MixConv blocks: mixconv.py, then their chains)
    assert not any(op in ("SPLIT_V", "STRIDED_SLICE") for op, _, _ in steps)


@NUMPY2_DISPATCH
def test_wake_word_int8_calls_per_invoke(models_dir, monkeypatch):
    """Steps, Python frames and numpy calls per invoke of mwk_okay_nabu. Before the int8
    kernels bound: 55 steps, 202 Python calls and 139 C calls; bound, 117 and 101; with
    views (ring buffers, views.py), MixConv blocks as one depthwise step (mixconv.py) and bound
    variable copies, lookup tables and the ring's one concat copy: 28 steps, 46 Python calls
    and 77 numpy calls (36 ufuncs, 41 builtins: numpy_calls.py), 5 of them broadcasting
    (0.5 µs a call more) and 7 GEMMs through np.matmul (0.4 µs more than np.dot's C
    function at these sizes). Now none of either, no add pass in the depthwise steps (their
    offset folded into the weights) and none after the one-output FULLY_CONNECTED's GEMM
    (its floor and clamp on a Python number): 70 numpy calls; the convolutions' requantizer
    passes inline in their steps (requantize.bind_finish's `passes`): 31 Python calls. The
    int8 chains (fusion_int8.py: a producer writes its consumer's float patches as floor(clip
    (s)), two calls a link for four; the stages' calls in the chain's own frame; the MixConv
    blocks' too, mixconv.py): 22 steps, 24 Python calls, 58 numpy calls, 6 floors (one a
    link, one the FULLY_CONNECTED's). The one-pixel depthwise sums as a product pass and a ones
    row times it (np.dot), one call more than the 2-d einsum and 0.3 µs less: 63, 12 GEMMs."""
    it = ready(path=str(models_dir / "mwk_okay_nabu.tflite"))
    assert len(running(it)) <= 22
    python, _ = calls(it.invoke)
    assert python <= 24, python          # (46 before the requantizer's passes ran inline)
    counts = numpy_calls(it.invoke, monkeypatch)
    assert counts["ufuncs"] + counts["builtins"] <= 63, counts
    assert counts["broadcasts"] == 0, counts
    assert counts.get("matmul", 0) == 0 and counts.get("dot") == 12, counts
    assert counts.get("c_einsum", 0) == 0 and counts.get("multiply") == 5, counts
    assert counts.get("add", 0) == 0 and counts.get("floor", 0) == 6, counts


@NUMPY2_DISPATCH
def test_wake_word_depthwise_pixels_are_products_and_a_dot(models_dir, monkeypatch):
    """mwk_okay_nabu's depthwise steps (two plain, three MixConv blocks) each make one output
    pixel: their sums are a product pass over (taps + 1, channels) (the offset's ones row
    among them) and np.dot of a ones row by it: 0.3 µs less than numpy's 2-d einsum (1.2-1.6
    µs at 4 to 18 taps), and far less than its 5-d one over the strided taps view."""
    from edgelite.interpreter.kernels import conv_int8
    it = ready(path=str(models_dir / "mwk_okay_nabu.tflite"))
    used = []
    real = conv_int8.einsum

    def counted(spec, *operands, **kwargs):
        used.append(spec)
        return real(spec, *operands, **kwargs)
    monkeypatch.setattr(conv_int8, "einsum", counted)
    counts = numpy_calls(it.invoke, monkeypatch)
    assert used == [] and counts.get("multiply") == 5, (used, counts)


@NUMPY2_DISPATCH
def test_digits_int8_gemms_through_dot(models_dir, monkeypatch):
    """The int8 digits CNN: its 4 GEMMs through np.dot's C function (np.matmul costs 0.4 µs
    a call more at these sizes), no broadcasting pass, at most 26 numpy calls an invoke; each
    2x2 pool two maxima over the halves of its convolution's float sums, the window taps' rows
    (a maximum.reduce over the first axis of 4 rows costs 1.2 µs, two maxima 0.6; over two
    strided axes of the int8 output, 64 loops of 16 values, 2.7 µs), and the requantization
    on the pooled sums only: 4 clips, of 256 and 128 values (of 1024 and 512 unfused)."""
    it = ready(path=str(models_dir / "digits_cnn_int8.tflite"))
    counts = numpy_calls(it.invoke, monkeypatch)
    assert counts.get("matmul", 0) == 0 and counts.get("dot") == 4, counts
    assert counts["broadcasts"] == 0, counts
    assert counts["ufuncs"] + counts["builtins"] <= 22, counts   # (26 before the int8 chain)
    assert counts.get("maximum") == 4 and counts.get("ufunc.reduce", 0) == 0, counts
    # the first layer's patches (1 input channel) by one take from a float32 padded copy
    assert counts.get("ndarray.take") == 1, counts


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_wake_word_bound_steps_give_their_runs_bits(models_dir, seed):
    it = ready(path=str(models_dir / "mwk_okay_nabu.tflite"), seed=seed)
    for _ in range(3):      # the streaming state moves on
        feed(it, seed + 10)
        it.invoke()
    assert assert_steps_match_unbound(it) >= 8


def test_digits_int8_steps_bound(models_dir):
    """The int8 digits CNN: each CONV_2D and its MAX_POOL_2D one step (conv_int8's
    max_pool_fusion), the two FULLY_CONNECTED layers: 4 steps (6 before), every one bound, one
    Python frame each; RESHAPE a view. The second conv + pool and the two FULLY_CONNECTED
    layers one int8 chain (fusion_int8.py): 2 steps."""
    it = ready(path=str(models_dir / "digits_cnn_int8.tflite"))
    assert len(it._main.run_ops) == 2
    assert it._main.run_steps.bound == 2
    kernels = [kernel for _, kernel, _ in running(it)]
    assert kernels.count("_pooled_conv") == 1 and kernels.count("_chain_run") == 1
    assert assert_steps_match_unbound(it) == it._main.run_steps.bound


def test_digits_int8_pooled_convolutions_give_the_two_ops_bits(models_dir):
    """The fused CONV_2D + MAX_POOL_2D steps requantize the pooled float sums (the
    requantization is monotonic, so it commutes with the maximum): the same bits as the two
    ops (preserve_all_tensors keeps every op), on 200 random inputs and 100 test images."""
    path = str(models_dir / "digits_cnn_int8.tflite")
    fused, plain = Interpreter(model_path=path), \
        Interpreter(model_path=path, experimental_preserve_all_tensors=True)
    for it in (fused, plain):
        it.allocate_tensors()
    assert len(fused._main.run_ops) < len(plain._main.run_ops)
    rng = np.random.default_rng(7)
    images = np.load(models_dir / "digits.npz")["x_test"][:100].transpose(0, 2, 3, 1)
    scale, zero_point = fused.get_input_details()[0]["quantization"]
    quantized = np.clip(np.floor(images / scale + 0.5) + zero_point, -128, 127).astype(np.int8)
    feeds = [rng.integers(-128, 128, (1, 8, 8, 1)).astype(np.int8) for _ in range(200)] + \
        [quantized[i:i + 1] for i in range(len(quantized))]
    for k, x in enumerate(feeds):
        outs = []
        for it in (fused, plain):
            it.set_tensor(it.get_input_details()[0]["index"], x)
            it.invoke()
            outs.append(it.get_tensor(it.get_output_details()[0]["index"]).copy())
        np.testing.assert_array_equal(outs[0], outs[1], err_msg=f"input {k}")


# The int8 cases whose step keeps its unbound run (grouped or float64 sums, a multiplier near or
# above 1, padded pooling, a narrow SUB): every other case must compare a bound step.
UNBOUND_CASES = {"conv_2d_groups", "conv_2d_deep_float64", "conv_2d_multiplier_near_1",
                 "conv_2d_multiplier_above_1", "depthwise_conv_2d_multiplier_near_1",
                 "fully_connected_deep_float64", "max_pool_2d_same_relu6", "sub_narrow_output"}


@pytest.mark.parametrize("c", [c for c in CASES if c.id.startswith(INT8_OPS)], ids=lambda c: c.id)
def test_bound_int8_kernel_matches_its_run(c):
    """The int8 cases (strides, padding, multipliers, activations, broadcasting, uint8) bound
    and unbound."""
    it = Interpreter(model_content=c.model)
    it.allocate_tensors()
    for d, value in zip(it.get_input_details(), c.feeds):
        it.set_tensor(d["index"], value)
    it.invoke()
    compared = assert_steps_match_unbound(it)
    assert compared or c.id in UNBOUND_CASES, f"{c.id}: no step bound, nothing compared"


def test_mobilenet_int8_bound_steps_give_their_runs_bits(models_dir):
    """int8 MobileNetV2 (54 steps bound, its ADDs among them): large layers too (convolutions
    in several blocks of rows, stride-2 depthwise layers in two column phases, padding)."""
    it = ready(path=str(models_dir / "mobilenet_v2_int8.tflite"))
    assert assert_steps_match_unbound(it) >= 54


def test_wake_word_score_lookups_in_python(models_dir):
    """mwk_okay_nabu's LOGISTIC and QUANTIZE of its one score: bound lookups in Python ints
    through memoryviews (lut.TINY_LOOKUP), no numpy call (a bound `table.take` costs 0.3 µs
    more); their bits are the unbound take's (test_wake_word_bound_steps_give_their_runs_bits)."""
    import functools
    it = ready(path=str(models_dir / "mwk_okay_nabu.tflite"))
    plan = it._main
    tiny = [bind_step(run, list(args)) for oi, (run, args) in zip(plan.step_ops, plan.steps)
            if plan.sg.operators[oi].opcode.name in ("LOGISTIC", "QUANTIZE")]
    assert len(tiny) == 2 and all(f is not None for f in tiny)
    assert not any(isinstance(f, functools.partial) for f in tiny), tiny
    python, c = calls(tiny[0])
    assert python == 1 and c <= 1, (python, c)   # (c: the profiler's own end)


def int8_conv_pool_model(shape, cout, kernel, padding, act, pool, key="int8", seed=0) -> bytes:
    """x -> CONV_2D (int8 per-channel weights, or uint8 per-tensor; + act) -> MAX_POOL_2D."""
    from edgelite.schema import Model, Subgraph, Tensor, save
    from edgelite.schema.model import QuantizationParameters as Q
    from tests.opmodel import operator
    rng = np.random.default_rng(seed)
    model, sg = Model(), Subgraph(name="main")
    lift = 0 if key == "int8" else 128
    x = sg.add_tensor(Tensor("x", shape, key, quantization=Q([0.05], [3 + lift])))
    w_shape = (cout, kernel, kernel, shape[3])
    if key == "int8":
        wq = Q(rng.uniform(0.005, 0.02, cout), np.zeros(cout), quantized_dimension=0)
        w = rng.integers(-127, 128, w_shape).astype(np.int8)
    else:
        wq, w = Q([0.01], [120]), rng.integers(0, 256, w_shape).astype(np.uint8)
    wt = sg.add_tensor(Tensor("w", w_shape, key, model.add_buffer(w), quantization=wq))
    bq = Q(0.05 * wq.scale.astype(np.float64), np.zeros(wq.scale.size))
    bt = sg.add_tensor(Tensor("b", (cout,), "int32", model.add_buffer(
        rng.integers(-3000, 3000, cout).astype(np.int32)), quantization=bq))
    c = sg.add_tensor(Tensor("conv", (), key, quantization=Q([0.2], [-7 + lift])))
    y = sg.add_tensor(Tensor("pool", (), key, quantization=Q([0.2], [-7 + lift])))
    sg.operators.append(operator("CONV_2D", [x, wt, bt], [c], padding=padding, stride_w=1,
                                 stride_h=1, fused_activation_function=act))
    sg.operators.append(operator("MAX_POOL_2D", [c], [y], padding=1, stride_w=pool,
                                 stride_h=pool, filter_width=pool, filter_height=pool))
    sg.inputs, sg.outputs = [x], [y]
    model.subgraphs.append(sg)
    return save(model)


@pytest.mark.parametrize("shape,cout,kernel,padding,act,pool,key", [
    ((1, 8, 8, 1), 16, 3, 0, 1, 2, "int8"),      # the digits CNN's first layer
    ((1, 7, 7, 3), 8, 3, 0, 0, 2, "int8"),       # no activation (negative sums), a row dropped
    ((1, 9, 9, 2), 4, 3, 1, 3, 3, "int8"),       # VALID, RELU6, a 3x3 pool (9 taps), a row dropped
    ((1, 6, 6, 4), 6, 3, 0, 0, 2, "uint8"),      # uint8 (no sign flip)
])
def test_int8_conv_max_pool_fused_matches_the_ops_and_litert(shape, cout, kernel, padding, act,
                                                             pool, key):
    """The default resolver's fused CONV_2D + MAX_POOL_2D (one step): the bits of the two ops
    one by one, within 1 of LiteRT's default path (its optimized kernels' contract)."""
    from tests.opmodel import run_litert
    content = int8_conv_pool_model(shape, cout, kernel, padding, act, pool, key)
    fused = Interpreter(model_content=content)
    plain = Interpreter(model_content=content, experimental_preserve_all_tensors=True)
    for it in (fused, plain):
        it.allocate_tensors()
    assert len(fused._main.run_ops) == 1 and len(plain._main.run_ops) == 2
    info = np.iinfo(key)
    rng = np.random.default_rng(3)
    for k in range(20):
        x = rng.integers(info.min, info.max + 1, shape).astype(key)
        outs = []
        for it in (fused, plain):
            it.set_tensor(it.get_input_details()[0]["index"], x)
            it.invoke()
            outs.append(it.get_tensor(it.get_output_details()[0]["index"]).copy())
        np.testing.assert_array_equal(outs[0], outs[1], err_msg=f"input {k}")
        theirs = run_litert(content, [x], reference=False)[0]
        assert np.abs(outs[0].astype(int) - theirs).max() <= 1, f"input {k}"
    assert assert_steps_match_unbound(fused) == 1
