"""The int8 kernels' bound steps (conv_int8, fully_connected_int8) and the int8 chains
(fusion_int8.py) are steps of calls (kernels/steps.py: calls_step, or joined into a line of
Python where a stage ends in one), so plan.compile_steps writes them into run_steps as their
calls: no Python frame for the step, its stages or its requantizer's passes (issue 17; they
were closures, a frame each, the chain's stages in a generated function of their own).
Timing-free guards: the steps inlined, the invoke's Python frames, and the inlined plan giving
bit for bit what the same plan gives with every step unbound (its kernels' own runs; the chains
op by op through int8 buffers), step after step of the wake-word model's streaming state, and
within 1 of LiteRT's default path (the default resolver's contract, as test_int8_chain).
Speed: benchmarks/bench_overhead.py --models."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import Interpreter, plan
from edgelite.interpreter.plan import bind_step
from tests.interpreter.frames import INVOKE_FRAMES, python_calls
from tests.numpy_dispatch import NUMPY2_DISPATCH

# (model, its steps written as calls, Python frames an invoke runs at most). mwk_okay_nabu:
# its first CONV_2D and its five int8 chains (21 bound steps; its variables' reads and writes,
# the ring's concat copy and the score's lookups stay calls of their own: 17 frames, 24 when
# the int8 steps were closures). digits_cnn_int8: its conv + pool and its chain (5 frames).
MODELS = [("mwk_okay_nabu", 6, 17), ("digits_cnn_int8", 2, INVOKE_FRAMES)]
INT8_MODULES = ("edgelite.interpreter.fusion_int8", "edgelite.interpreter.kernels.conv_int8",
                "edgelite.interpreter.kernels.fully_connected_int8")


def _feeds(it, count, seed=5) -> list:
    d = it.get_input_details()[0]
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, d["shape"]).astype(d["dtype"]) for _ in range(count)]


def _stream(it, feeds) -> np.ndarray:
    d, o = it.get_input_details()[0], it.get_output_details()[0]
    outs = []
    for x in feeds:
        it.set_tensor(d["index"], x)
        it.invoke()
        outs.append(np.array(it.get_tensor(o["index"]), copy=True))
    return np.array(outs)


@pytest.mark.parametrize("name,inlined,frames", MODELS)
def test_int8_steps_are_written_into_run_steps(models_dir, name, inlined, frames):
    it = Interpreter(model_path=str(models_dir / f"{name}.tflite"))
    it.allocate_tensors()
    it.invoke()
    p = it._main
    assert p.run_steps.inlined == inlined, p.run_steps.source
    int8 = 0
    for oi, (run, args) in zip(p.step_ops, p.steps):
        if oi in p.run_ops and run.__module__ in INT8_MODULES:
            step = bind_step(run, list(args))
            assert getattr(step, "calls", None) is not None or \
                getattr(step, "source", None) is not None, (run.__qualname__, step)
            int8 += 1
    assert int8 == inlined


@NUMPY2_DISPATCH
@pytest.mark.parametrize("name,inlined,frames", MODELS)
def test_int8_inlined_invoke_frames(models_dir, name, inlined, frames):
    it = Interpreter(model_path=str(models_dir / f"{name}.tflite"))
    it.allocate_tensors()
    it.invoke()
    assert python_calls(it.invoke) <= frames


@pytest.mark.parametrize("name", [name for name, _, _ in MODELS])
def test_inlined_int8_steps_give_the_unbound_plans_bits(models_dir, name, monkeypatch):
    """40 invokes of random inputs (the wake-word model's ring buffers and variables moving
    on): the inlined plan's outputs equal the unbound plan's bit for bit (plan.bind_step off
    at allocate: every step its kernel's `run`, each chain op by op), and are within 1 of
    LiteRT's (its default path), as test_int8_chain compares them."""
    path = str(models_dir / f"{name}.tflite")
    inlined = Interpreter(model_path=path)
    inlined.allocate_tensors()
    with monkeypatch.context() as m:
        m.setattr(plan, "bind_step", lambda run, args: None)
        unbound = Interpreter(model_path=path)
        unbound.allocate_tensors()
    assert inlined._main.run_steps.inlined and unbound._main.run_steps.bound == 0
    feeds = _feeds(inlined, 40)
    ours = _stream(inlined, feeds)
    np.testing.assert_array_equal(ours, _stream(unbound, feeds))
    pytest.importorskip("ai_edge_litert", reason="LiteRT (ai-edge-litert) is the oracle")
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    theirs = LiteRT(model_path=path)
    theirs.allocate_tensors()
    assert np.abs(ours.astype(np.int64) - _stream(theirs, feeds)).max() <= 1
