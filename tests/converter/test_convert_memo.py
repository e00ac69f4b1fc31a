"""The imports of one conversion share the initializers' arrays and the constants made from them
(converter/memo.py): a model with dynamic dims is imported several times, and its weights are
decoded, transposed and scaled once. The converted file is the same as without sharing."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper

from edgelite.converter import memo
from edgelite.converter.convert import convert_onnx
from tests.converter import dynamic_models


def _without_memo(monkeypatch):
    """convert_onnx with the memo off: every import decodes and folds on its own."""
    import contextlib

    monkeypatch.setattr(memo, "conversion", contextlib.nullcontext)


def test_made_is_shared_inside_a_conversion_only():
    w = np.arange(100, dtype=np.float32)
    calls = []

    def make():
        calls.append(1)
        return [w * 2]

    assert memo.made("t", [w], 1, make) is not memo.made("t", [w], 1, make)  # outside: no memo
    with memo.conversion():
        init = numpy_helper.from_array(w, "w")
        a = memo.initializer(init)
        assert memo.initializer(init) is a and not a.flags.writeable
        calls.clear()
        first = memo.made("t", [a], 1, make)
        assert memo.made("t", [a], 1, make) is first and len(calls) == 1
        assert memo.made("t", [a], 2, make) is not first   # other params: made again
        assert not first[0].flags.writeable                # shared values are read-only
        # An array the memo does not hold is never matched by its address.
        calls.clear()
        loose = w.copy()
        memo.made("t", [loose], 1, make)
        memo.made("t", [loose], 1, make)
        assert len(calls) == 2


def test_made_keys_parameters_by_their_whole_contents():
    """Parameters that print alike are other keys: numpy arrays past 1000 elements (repr
    elides their middles), inside Options too, and -0.0 beside 0.0; what cannot be keyed is
    refused."""
    from edgelite.schema import Options

    w = np.arange(100, dtype=np.float32)
    a, b = np.zeros(2000, np.float32), np.zeros(2000, np.float32)
    b[1000] = 1.0
    assert repr(a) == repr(b)
    with memo.conversion():
        held = memo.initializer(numpy_helper.from_array(w, "w"))
        for first, second in [(a, b), (Options("T", v=a), Options("T", v=b)), (0.0, -0.0),
                              ((slice(0, 2), 1), (slice(0, 3), 1))]:
            one = memo.made("p", [held], first, lambda: [held * 2])
            assert memo.made("p", [held], first, lambda: [held * 3]) is one
            assert memo.made("p", [held], second, lambda: [held * 3]) is not one
        with pytest.raises(TypeError, match="type object cannot be part of a key"):
            memo.made("p", [held], (1, object()), lambda: [held])
        with pytest.raises(TypeError, match="type ndarray cannot"):
            memo.made("p", [held], np.array([None]), lambda: [held])


@pytest.mark.parametrize("build", [dynamic_models.attention_encoder,
                                   dynamic_models.text_recognizer])
def test_dynamic_conversion_decodes_each_weight_once(build, monkeypatch):
    proto, _ = build()
    decoded = []
    real = numpy_helper.to_array

    def counting(tensor, *a, **k):
        decoded.append(tensor.name)
        return real(tensor, *a, **k)

    monkeypatch.setattr(numpy_helper, "to_array", counting)
    shared = convert_onnx(proto).content
    weights = [init.name for init in proto.graph.initializer]
    counts = {name: decoded.count(name) for name in weights}
    assert all(n <= 1 for n in counts.values()), counts

    decoded.clear()
    _without_memo(monkeypatch)
    alone = convert_onnx(proto).content
    assert max(decoded.count(name) for name in weights) > 1   # several imports, as the memo says
    assert shared == alone
