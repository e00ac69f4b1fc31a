"""reset_all_variables on a streaming model whose state lives in resource variables
(microWakeWord: VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE, initialised by CALL_ONCE).
edgelite starts the model over, as TFLite Micro's interpreter does (its ResetVariableTensors
resets resource variables too): after a reset every tensor of the next invoke is what a fresh
LiteRT interpreter computes. LiteRT 2.3 resets only `is_variable` tensors, so there the ring
buffers carry on; the last test pins that, the difference docs/untrusted_models.md states."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import Interpreter, OpResolverType


def _tensors(it, feeds, reset_before_last: bool) -> dict:
    """Every numeric tensor after streaming `feeds`, reset_all_variables() before the last."""
    it.allocate_tensors()
    d = it.get_input_details()[0]
    for i, x in enumerate(feeds):
        if reset_before_last and i == len(feeds) - 1:
            it.reset_all_variables()
        it.set_tensor(d["index"], x)
        it.invoke()
    out = {}
    for t in it.get_tensor_details():
        if t["dtype"] in (np.int8, np.uint8, np.int32, np.float32) and t["shape"].size \
                and t["shape"].all():
            out[t["index"]] = np.array(it.get_tensor(t["index"]))
    return out


def _feeds(models_dir, count=5):
    x0 = np.load(models_dir / "refs" / "mwk_okay_nabu.npz")["input_0"].astype(np.int64)
    rng = np.random.default_rng(0)
    return [np.clip(x0 + rng.integers(-60, 60, x0.shape), -128, 127).astype(np.int8)
            for _ in range(count)]


def _litert(path):
    pytest.importorskip("ai_edge_litert", reason="LiteRT (ai-edge-litert) is the oracle")
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    from ai_edge_litert.interpreter import OpResolverType as LiteRTResolver
    return LiteRT(model_path=path, experimental_preserve_all_tensors=True,
                  experimental_op_resolver_type=LiteRTResolver.BUILTIN_REF)


def _ours(path):
    return Interpreter(model_path=path, experimental_preserve_all_tensors=True,
                       experimental_op_resolver_type=OpResolverType.BUILTIN_REF)


def _differing(a: dict, b: dict) -> list:
    return [i for i in a if i in b and a[i].shape == b[i].shape and not np.array_equal(a[i], b[i])]


def _three(models_dir, make):
    """A fresh LiteRT's tensors after the last feed; `make`'s after every feed, and after
    every feed with reset_all_variables before the last."""
    path = str(models_dir / "mwk_okay_nabu.tflite")
    feeds = _feeds(models_dir)
    return (_tensors(_litert(path), feeds[-1:], False), _tensors(make(path), feeds, False),
            _tensors(make(path), feeds, True))


def test_reset_starts_the_stream_over_like_a_fresh_litert(models_dir):
    fresh, continued, after_reset = _three(models_dir, _ours)
    assert len(fresh) > 50
    assert _differing(continued, fresh), "the state should change the invoke (a vacuous test)"
    assert set(after_reset) == set(fresh)
    assert _differing(after_reset, fresh) == []


def test_litert_keeps_resource_variables_across_reset(models_dir):
    fresh, continued, after_reset = _three(models_dir, _litert)
    assert _differing(after_reset, continued) == []
    assert _differing(after_reset, fresh)
