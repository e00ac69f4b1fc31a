"""QUANTIZE from float32 rounds in float32 (trunc(q + copysign(1/2 - 2^-25, q)), the sign by
its bit) and CAST of floats to 8/16-bit integers saturates by a clip (kernels/convert.py): the
same bits as the float64 rounding they replace, on the values where float32 rounding is hard
(each side of every half, both resolvers, zero points that flip the type's range), against
LiteRT's reference kernel; and timing-free guards of their passes (no np.copysign, no float64
pass, no boolean masks of a saturating cast's input)."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from tests.interpreter.numpy_calls import numpy_calls
from tests.numpy_dispatch import NUMPY2_DISPATCH
from tests.opmodel import In, Out, op_model, run_both


def hard_values(scale: float) -> np.ndarray:
    """x with x / scale (float32) at every half in [-300, 300] and 6 floats either side, and
    just below 1/2 (0.49999997: where q + 0.5 rounds up in float32)."""
    halves = np.arange(-300, 300, dtype=np.float32) + np.float32(0.5)
    near = [halves]
    for direction in (np.inf, -np.inf):
        v = halves
        for _ in range(6):
            v = np.nextafter(v, np.float32(direction))
            near.append(v)
    q = np.concatenate(near + [np.float32([0.49999997, -0.49999997, 0.0, -0.0, 1e9, -1e9])])
    return (q * np.float32(scale)).astype(np.float32)   # scale a power of two: exact


def reference_quantize(x, scale, zero, dtype) -> np.ndarray:
    q = (x / np.float32(scale)).astype(np.float32).astype(np.float64)
    r = np.copysign(np.floor(np.abs(q) + 0.5), q) + zero
    info = np.iinfo(dtype)
    return np.clip(r, info.min, info.max).astype(dtype)


QUANTS = [("int8", 0), ("int8", -7), ("int8", -128), ("uint8", 128), ("uint8", 0),
          ("uint8", 3), ("int16", 0)]


@pytest.mark.parametrize("reference", [False, True], ids=["default", "builtin_ref"])
@pytest.mark.parametrize("dtype,zero", QUANTS)
def test_quantize_rounds_halves_as_float64(dtype, zero, reference):
    pytest.importorskip("ai_edge_litert", reason="LiteRT (ai-edge-litert) is the oracle")
    x = hard_values(0.25)
    model = op_model("QUANTIZE", [In(x.shape)], [Out(dtype=dtype, quant=(0.25, zero))])
    (ours,), (theirs,) = run_both(model, [x], reference)
    np.testing.assert_array_equal(ours, reference_quantize(x, 0.25, zero, dtype))
    if reference:   # (XNNPACK's QUANTIZE rounds exact halves its own way: not followed)
        np.testing.assert_array_equal(ours, theirs)


def test_quantize_per_channel_rounds_halves():
    from tests.opmodel import run_edgelite
    x = np.stack([hard_values(0.25), hard_values(0.5), hard_values(0.125)], axis=1)
    model = op_model("QUANTIZE", [In(x.shape)],
                     [Out(x.shape, "int8", ([0.25, 0.5, 0.125], [0, -3, 5], 1))])
    (ours,) = run_edgelite(model, [x])
    want = np.stack([reference_quantize(x[:, c], s, z, np.int8)
                     for c, (s, z) in enumerate([(0.25, 0), (0.5, -3), (0.125, 5)])], axis=1)
    np.testing.assert_array_equal(ours, want)


def _interpreter(model, x, reference=False):
    from edgelite.interpreter import Interpreter, OpResolverType
    kind = OpResolverType.BUILTIN_REF if reference else OpResolverType.AUTO
    it = Interpreter(model_content=model, experimental_op_resolver_type=kind)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it


@NUMPY2_DISPATCH
@pytest.mark.parametrize("dtype,zero,most", [("int8", 0, 7), ("int8", -128, 8), ("int8", -7, 9),
                                             ("uint8", 128, 8), ("int16", 0, 8)])
def test_quantize_passes(dtype, zero, most, monkeypatch):
    """divide, the sign's two bit operations, add, clip, the cast and numpy's error state (a
    +-128 zero point: the cast and a flip of the top bit; another: trunc and add first); int16
    (the reference kernel's int32 rules) two range reductions instead of the error state. The
    float64 rounding was 11 calls, one a copysign (7x an add's cost)."""
    x = hard_values(0.25)
    model = op_model("QUANTIZE", [In(x.shape)], [Out(dtype=dtype, quant=(0.25, zero))])
    it = _interpreter(model, x)
    counts = numpy_calls(it.invoke, monkeypatch)
    assert not any(counts.get(f) for f in ("copysign", "floor", "absolute")), counts
    assert counts["ufuncs"] + counts["builtins"] <= most, counts


def test_cast_saturating_allocates_nothing():
    """A CAST of floats past the int8 range: a clip into a float buffer made once, then the
    cast (was: boolean masks of the whole input, each invoke: 1.4 ms on 150k values)."""
    x = (np.random.default_rng(0).standard_normal(150_000) * 300).astype(np.float32)
    x[7] = np.nan
    model = op_model("CAST", [In(x.shape)], [Out(dtype="int8")])
    it = _interpreter(model, x)
    out = it.get_tensor(it.get_output_details()[0]["index"])
    with np.errstate(invalid="ignore"):
        want = np.where(np.isnan(x), 127, np.trunc(np.clip(x, -128, 127))).astype(np.int8)
    np.testing.assert_array_equal(out, want)
    tracemalloc.start()
    try:
        it.invoke()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < x.size // 2, peak      # (the old masks: 3 bools a value)
