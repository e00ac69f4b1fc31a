"""MixConv blocks (channel split -> row slices -> depthwise convolutions -> concat) run as one
depthwise step (interpreter/mixconv.py): with the reference kernels' rounding (BUILTIN_REF, the
fusion turned on there: BUILTIN_REF itself runs op by op) the same bits as LiteRT's reference
kernels, within 1 of LiteRT by default, on a model built with the IR and on micro-wake-word's
streaming model (its state compared step by step)."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import Interpreter, OpResolverType, mixconv
from edgelite.schema import Model, Subgraph, Tensor, save
from edgelite.schema.model import QuantizationParameters as Q
from tests.opmodel import const_tensor as _const
from tests.opmodel import operator as _op
from tests.opmodel import run_both

litert = pytest.importorskip("ai_edge_litert.interpreter",
                             reason="LiteRT (ai-edge-litert) is the oracle: "
                                    "pip install -e '.[dev]'")

H, W, C = 8, 3, 4               # each of the 3 branches has C channels
# (first row, rows, kernel height): every branch gives 2 output rows
BRANCHES = ((4, 4, 3), (0, H, 7), (1, 6, 5))


def _q(scale, zp=0, axis=0) -> Q:
    scale = np.atleast_1d(np.asarray(scale, np.float32))
    return Q(scale, np.full(scale.size, zp, np.int64), axis)


def _mixconv_model(seed=0, per_tensor=True) -> bytes:
    """x [1, 8, 3, 12] int8 -> SPLIT(3) -> rows [4, 8) / all / [1, 7) -> DEPTHWISE_CONV_2D of
    heights 3 / 7 / 5 (2x1 kernels wide, RELU6; per-channel, per-tensor, per-channel weights)
    -> CONCATENATION -> out [1, 2, 2, 12]. (XNNPACK refuses the per-tensor one: `per_tensor`
    False makes every branch per-channel.)"""
    rng = np.random.default_rng(seed)
    model = Model()
    sg = Subgraph(name="main")
    xq, oq = _q(0.05, 3), _q(0.02, -7)
    x = sg.add_tensor(Tensor("x", (1, H, W, 3 * C), "int8", quantization=xq))
    axis = _const(model, sg, "axis", np.array([3], np.int32))
    parts = [sg.add_tensor(Tensor(f"part{i}", (1, H, W, C), "int8", quantization=xq))
             for i in range(3)]
    ops = [_op("SPLIT", [axis, x], parts, num_splits=3)]
    outs = []
    for i, ((first, rows, k), part) in enumerate(zip(BRANCHES, parts)):
        src = part
        if rows != H:
            src = sg.add_tensor(Tensor(f"rows{i}", (1, rows, W, C), "int8", quantization=xq))
            begin = _const(model, sg, f"begin{i}", np.array([0, first, 0, 0], np.int32))
            end = _const(model, sg, f"end{i}", np.array([1, first + rows, W, C], np.int32))
            step = _const(model, sg, f"step{i}", np.ones(4, np.int32))
            ops.append(_op("STRIDED_SLICE", [part, begin, end, step], [src]))
        scales = rng.uniform(0.002, 0.02, 1 if i == 1 and per_tensor else C)
        wq = _q(scales, 0, 3)
        w = sg.add_tensor(Tensor(f"w{i}", (1, k, 2, C), "int8", model.add_buffer(
            rng.integers(-127, 128, (1, k, 2, C)).astype(np.int8)), quantization=wq))
        b = sg.add_tensor(Tensor(f"b{i}", (C,), "int32", model.add_buffer(
            rng.integers(-3000, 3000, C).astype(np.int32)),
            quantization=_q(np.broadcast_to(scales * 0.05, (C,)), 0, 0)))
        y = sg.add_tensor(Tensor(f"y{i}", (1, 2, 2, C), "int8", quantization=oq))
        ops.append(_op("DEPTHWISE_CONV_2D", [src, w, b], [y], padding=1, stride_w=1, stride_h=1,
                       depth_multiplier=1, fused_activation_function=3))
        outs.append(y)
    out = sg.add_tensor(Tensor("out", (1, 2, 2, 3 * C), "int8", quantization=oq))
    ops.append(_op("CONCATENATION", outs, [out], axis=-1))
    sg.operators, sg.inputs, sg.outputs = ops, [x], [out]
    model.subgraphs = [sg]
    return save(model)


def _fused(content: bytes) -> bool:
    """Whether BUILTIN_REF runs the model's MixConv as one step (UNDER_REFERENCE)."""
    it = Interpreter(model_content=content,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    return _running(it) == [("CONCATENATION", "depthwise_conv_2d")]


def _running(it) -> list:
    """The operators of subgraph 0 that run a step, with the kernel each runs."""
    plan = it._runtime.subgraph(0)
    return [(plan.sg.operators[oi].opcode.name, run.__qualname__.split(".")[0])
            for oi, (run, _) in zip(plan.step_ops, plan.steps) if run.__name__ != "_view_step"]


def test_mixconv_is_one_depthwise_step():
    it = Interpreter(model_content=_mixconv_model())
    it.allocate_tensors()
    assert _running(it) == [("CONCATENATION", "depthwise_conv_2d")]
    kept = Interpreter(model_content=_mixconv_model(), experimental_preserve_all_tensors=True)
    kept.allocate_tensors()
    assert [op for op, _ in _running(kept)].count("DEPTHWISE_CONV_2D") == 3


@pytest.fixture
def fused_under_reference(monkeypatch):
    monkeypatch.setattr(mixconv, "UNDER_REFERENCE", True)


def test_reference_runs_op_by_op():
    it = Interpreter(model_content=_mixconv_model(),
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    assert [op for op, _ in _running(it)].count("DEPTHWISE_CONV_2D") == 3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mixconv_bit_exact_to_litert_reference(seed, fused_under_reference):
    rng = np.random.default_rng(seed + 10)
    content, per_channel = _mixconv_model(seed), _mixconv_model(seed, per_tensor=False)
    assert _fused(content)
    for _ in range(3):
        x = rng.integers(-128, 128, (1, H, W, 3 * C)).astype(np.int8)
        ours, theirs = run_both(content, [x], reference=True)
        np.testing.assert_array_equal(ours[0], theirs[0])
        ours, theirs = run_both(per_channel, [x], reference=False)
        assert np.abs(ours[0].astype(int) - theirs[0]).max() <= 1


def _assigned(path, runtime) -> list:
    """(resource id, the tensor ASSIGN_VARIABLE writes it from) of subgraph 0."""
    plan = runtime.subgraph(0)
    return [(int(np.asarray(plan.infos[op.inputs[0]].data).reshape(-1)[0]), op.inputs[1])
            for op in plan.sg.operators if op.opcode.name == "ASSIGN_VARIABLE"]


def test_wake_word_mixconv_state_bit_exact(models_dir, fused_under_reference):
    """mwk_okay_nabu's three MixConv blocks as three steps, under BUILTIN_REF: its output and
    its six ring buffers (the variables) LiteRT's reference kernels' bits, 40 steps on."""
    path = str(models_dir / "mwk_okay_nabu.tflite")
    ours = Interpreter(model_path=path, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    ours.allocate_tensors()
    assert [k for op, k in _running(ours) if op == "CONCATENATION"].count(
        "depthwise_conv_2d") == 3
    ref = litert.Interpreter(model_path=path, experimental_preserve_all_tensors=True,
                             experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)
    ref.allocate_tensors()
    d, o = ours.get_input_details()[0], ours.get_output_details()[0]
    rng = np.random.default_rng(5)
    for step in range(40):
        x = (rng.integers(-128, 128, d["shape"]) // (1 + step % 3)).astype(np.int8)
        for it in (ours, ref):
            it.set_tensor(d["index"], x)
            it.invoke()
        np.testing.assert_array_equal(ours.get_tensor(o["index"]), ref.get_tensor(o["index"]))
        for rid, t in _assigned(path, ours._runtime):
            np.testing.assert_array_equal(ours._runtime.resources[rid], ref.get_tensor(t),
                                          err_msg=f"step {step}, state of tensor {t}")
