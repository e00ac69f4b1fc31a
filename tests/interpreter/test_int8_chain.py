"""int8 chains (interpreter/fusion_int8.py): a producer writing its consumer's float32 patches.
The streaming wake-word model against its ops run one by one (preserve_all_tensors fuses
nothing) and against LiteRT, step after step of its ring buffers: within 1 (the default
resolver's contract: the consumer, prepared for lifted input, rounds its float sums its own
way), almost all equal; a chain's link costs two numpy calls (clip, floor) for the four it
replaces (clip, cast, top-bit flip, the consumer's copy)."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import Interpreter
from tests.interpreter.numpy_calls import numpy_calls
from tests.numpy_dispatch import NUMPY2_DISPATCH


def _stream(it, feeds) -> list:
    it.allocate_tensors()
    d, o = it.get_input_details()[0], it.get_output_details()[0]
    outs = []
    for x in feeds:
        it.set_tensor(d["index"], x)
        it.invoke()
        outs.append(np.array(it.get_tensor(o["index"]), np.int64))
    return outs


def _feeds(it, count, seed=3):
    d = it.get_input_details()[0]
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, d["shape"]).astype(d["dtype"]) for _ in range(count)]


def test_wake_word_chain_against_ops_and_litert(models_dir):
    path = str(models_dir / "mwk_okay_nabu.tflite")
    fused, plain = Interpreter(model_path=path), \
        Interpreter(model_path=path, experimental_preserve_all_tensors=True)
    fused.allocate_tensors()
    kernels = [run.__qualname__.split(".")[0] for run, _ in fused._main.steps]
    assert kernels.count("_chain_run") == 5, kernels
    feeds = _feeds(fused, 60)
    a, b = np.array(_stream(fused, feeds)), np.array(_stream(plain, feeds))
    assert np.abs(a - b).max() <= 1
    assert (a == b).mean() >= 0.9
    pytest.importorskip("ai_edge_litert", reason="LiteRT (ai-edge-litert) is the oracle")
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    c = np.array(_stream(LiteRT(model_path=path), feeds))
    assert np.abs(a - c).max() <= 1


@NUMPY2_DISPATCH
def test_chain_link_calls(models_dir, monkeypatch):
    """digits_cnn_int8: conv + pool -> RESHAPE -> FULLY_CONNECTED -> FULLY_CONNECTED one step;
    each link a clip and a floor into the next op's float row, no int8 between them: the
    step's numpy calls 8 + 5 + 5 = 18 -> 14."""
    it = Interpreter(model_path=str(models_dir / "digits_cnn_int8.tflite"))
    it.allocate_tensors()
    it.invoke()
    plan = it._main
    (run, args), = [(r, a) for r, a in plan.steps if r.__qualname__.startswith("_chain_run")]
    from edgelite.interpreter.plan import bind_step
    bound = bind_step(run, list(args))
    assert bound is not None
    counts = numpy_calls(bound, monkeypatch)
    assert counts["ufuncs"] + counts["builtins"] <= 14, counts
    assert counts.get("floor") == 3 and counts.get("bitwise_xor", 0) == 0, counts


def test_reference_resolver_runs_no_chain(models_dir):
    from edgelite.interpreter import OpResolverType
    it = Interpreter(model_path=str(models_dir / "mwk_okay_nabu.tflite"),
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    assert not any(run.__qualname__.startswith("_chain_run") for run, _ in it._main.steps)
