"""RANDOM_UNIFORM is bit-identical to LiteRT's for given seeds, invoke after invoke."""
from __future__ import annotations

import numpy as np
import pytest

from tests.opmodel import In, op_model

litert = pytest.importorskip("ai_edge_litert.interpreter",
                             reason="LiteRT (ai-edge-litert) is the oracle: "
                                    "pip install -e '.[dev]'")
from edgelite import interpreter as edgelite_interpreter  # noqa: E402


def _invokes(interpreter, feeds, times=3):
    interpreter.allocate_tensors()
    outs = []
    for _ in range(times):
        for d, x in zip(interpreter.get_input_details(), feeds):
            interpreter.set_tensor(d["index"], x)
        interpreter.invoke()
        outs.append(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]).copy())
    return outs


def _both(content, feeds=()):
    ours = _invokes(edgelite_interpreter.Interpreter(model_content=content), feeds)
    theirs = _invokes(litert.Interpreter(
        model_content=content, experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF),
        feeds)
    return ours, theirs


# Seeds beyond 32 bits and negative ones: TFLite keeps them in C ints.
@pytest.mark.parametrize("seed,seed2", [(7, 3), (1, 0), (0, 9), (123456789012, 5),
                                        (-3, 2 ** 40 + 7), (5, -1)])
@pytest.mark.parametrize("shape", [(2, 5), (3, 4), (1,), (2, 3, 7)])
def test_random_uniform_is_bit_exact(seed, seed2, shape):
    content = op_model("RANDOM_UNIFORM", [np.array(shape, np.int32)],
                       options=dict(seed=seed, seed2=seed2))
    ours, theirs = _both(content)
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype == np.float32 and a.shape == b.shape == shape
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(ours[0], ours[1])  # the generator advances between invokes


def test_random_uniform_shape_at_run_time():
    content = op_model("RANDOM_UNIFORM", [In((2,), "int32")], options=dict(seed=2, seed2=8))
    ours, theirs = _both(content, [np.array([3, 5], np.int32)])
    np.testing.assert_array_equal(np.stack(ours), np.stack(theirs))


def test_unseeded_random_uniform_differs_between_interpreters():
    content = op_model("RANDOM_UNIFORM", [np.array([64], np.int32)])
    a = _invokes(edgelite_interpreter.Interpreter(model_content=content), (), 1)[0]
    b = _invokes(edgelite_interpreter.Interpreter(model_content=content), (), 1)[0]
    assert not np.array_equal(a, b) and 0 <= a.min() and a.max() < 1
