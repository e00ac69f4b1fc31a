"""Non-finite inputs (NaN, +-inf) are legal data: no kernel raises on them, and each gives LiteRT's
non-finite pattern (the same outputs NaN, +inf, -inf; integers equal). A pinned set of the cases
tools/nonfinite_sweep.py found differing: CAST of floats to integers (LiteRT saturates, NaN to
the type's greatest value), QUANTIZE (the reference kernel's int32 cast, XNNPACK's saturation
under the default resolver), float16 ADD / MUL under the default resolver (XNNPACK: no clamp to
+-65504; a fused clamp takes NaN to its lower bound), UNIQUE (LiteRT's std::map), FAKE_QUANT (NaN
to the range's floor, as std::max(nudged_min, x)), UNSORTED_SEGMENT_MAX / MIN (NaN skipped)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.interpreter.op_cases import all_cases
from tests.opmodel import run_edgelite, run_litert

pytest.importorskip("ai_edge_litert", reason="LiteRT (ai-edge-litert) is the oracle")

KINDS = ("nan_all", "+inf_all", "-inf_all", "nan_one", "+inf_one", "-inf_one")
_VALUE = {"nan": np.nan, "+inf": np.inf, "-inf": -np.inf}
PINNED = ["convert:cast_float32_to_int8", "convert:cast_float32_to_uint8",
          "convert:cast_float32_to_int32", "convert:cast_float32_to_uint32",
          "convert:cast_float64_to_int64", "convert:cast_float16_to_uint16",
          "convert:quantize_int8_zp-7", "convert:quantize_int8_zp0",
          "convert:quantize_uint8_zp128", "convert:quantize_int16_zp0",
          "convert:quantize_int8_per_channel_axis0",
          "float16:add_none", "float16:add_relu", "float16:add_relu_n1_to_1",
          "float16:add_tanh", "float16:mul_none", "float16:mul_relu6",
          "segment:unique_float32_int32", "segment:unique_float32_int64",
          "misc:fake_quant0", "misc:fake_quant3", "segment:unsorted_segment_max_float32",
          "segment:unsorted_segment_min_2d_ids"]
_CASES = {p.id: p.values[0] for p in all_cases("CASES") if p.id in PINNED}


def nonfinite(x: np.ndarray, kind: str) -> np.ndarray:
    value, where = kind.split("_")
    if where == "all":
        return np.full_like(x, _VALUE[value])
    x = x.copy()
    x.reshape(-1)[x.size // 2] = _VALUE[value]
    return x


def assert_same_pattern(ours: list, theirs: list) -> None:
    """Floats: the same elements NaN, +inf and -inf; integers: equal."""
    assert len(ours) == len(theirs)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert a.shape == b.shape and a.dtype == b.dtype, (k, a.shape, b.shape)
        if a.dtype.kind == "f":
            for test in (np.isnan, np.isposinf, np.isneginf):
                np.testing.assert_array_equal(test(a), test(b), err_msg=f"output {k} {test}")
        else:
            np.testing.assert_array_equal(a, b, err_msg=f"output {k}")


def test_pinned_cases_exist():
    assert sorted(_CASES) == sorted(PINNED)


@pytest.mark.parametrize("reference", [False, True], ids=["default", "builtin_ref"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case_id", PINNED)
def test_nonfinite_input_matches_litert(case_id, kind, reference):
    from edgelite.interpreter import OpResolverType
    case = _CASES[case_id]
    feeds = [np.asarray(f) for f in case.feeds]
    first = next(k for k, f in enumerate(feeds) if f.dtype.kind == "f")
    feeds[first] = nonfinite(feeds[first], kind)
    resolver = OpResolverType.BUILTIN_REF if reference else OpResolverType.AUTO
    ours = run_edgelite(case.model, feeds, experimental_op_resolver_type=resolver)
    assert_same_pattern(ours, run_litert(case.model, feeds, reference))


# Finite floats past the integer range too: LiteRT's CAST saturates (truncating in range).
EDGES = [200.7, -200.7, 127.9, -128.9, -3.7, 3.7, 255.9, 256.5, -0.7, 65535.9, 65536.0,
         2.0 ** 31, -2.0 ** 31, 2.0 ** 31 - 128, 4e9, -4e9, 2.0 ** 63, -2.0 ** 63, 1e30, -1e30]


@pytest.mark.parametrize("case_id", [c for c in PINNED if "cast" in c or "quantize" in c])
@pytest.mark.parametrize("reference", [False, True], ids=["default", "builtin_ref"])
def test_out_of_range_floats_convert_as_litert(case_id, reference):
    from edgelite.interpreter import OpResolverType
    case = _CASES[case_id]
    x = np.asarray(case.feeds[0]).copy()
    with np.errstate(over="ignore"):
        edges = np.array(EDGES, np.float64).astype(x.dtype)
    n = min(x.size, edges.size)
    x.reshape(-1)[:n] = edges[:n]
    resolver = OpResolverType.BUILTIN_REF if reference else OpResolverType.AUTO
    ours = run_edgelite(case.model, [x], experimental_op_resolver_type=resolver)
    theirs = run_litert(case.model, [x], reference)
    np.testing.assert_array_equal(ours[0].reshape(-1)[:n], theirs[0].reshape(-1)[:n])


# UNIQUE: LiteRT's std::map finds, for NaN, the least key so far (a NaN first: the only key).
NAN_SEQUENCES = [[3, np.nan, 1, np.nan, -2, np.nan, 5, np.nan, 2],
                 [np.inf, np.nan, -0.0, 0.0, np.nan, 0.0, 7, 7, 2],
                 [-np.inf, 2, np.nan, 7, 1, 0, 7, 7, 2],
                 [np.nan, 1, np.nan, 1, np.inf, np.inf, 7, 7, 2]]


@pytest.mark.parametrize("values", NAN_SEQUENCES, ids=["mid", "signed_zeros", "minus_inf",
                                                       "nan_first"])
def test_unique_with_nan_matches_litert(values):
    case = _CASES["segment:unique_float32_int32"]
    x = np.array(values, np.float32)
    assert x.shape == np.shape(case.feeds[0])
    ours = run_edgelite(case.model, [x])
    theirs = run_litert(case.model, [x], True)
    np.testing.assert_array_equal(ours[0], theirs[0])    # NaN equal to NaN here
    np.testing.assert_array_equal(ours[1], theirs[1])


# MAXIMUM / MINIMUM (float16 and float32): TFLite's el1 > el2 ? el1 : el2 skips a NaN first
# operand only (numpy's maximum propagates both).
MIN_MAX = ["float16:maximum_broadcast", "float16:minimum_broadcast",
           "elementwise:maximum_broadcast1", "elementwise:minimum_broadcast1",
           "elementwise:maximum_broadcast4", "elementwise:minimum_broadcast2"]
_MIN_MAX = {p.id: p.values[0] for p in all_cases("CASES") if p.id in MIN_MAX}


@pytest.mark.parametrize("reference", [False, True], ids=["default", "builtin_ref"])
@pytest.mark.parametrize("operand", [0, 1])
@pytest.mark.parametrize("case_id", MIN_MAX)
def test_min_max_nan_operand_as_litert(case_id, operand, reference):
    from edgelite.interpreter import OpResolverType
    feeds = [np.asarray(f).copy() for f in _MIN_MAX[case_id].feeds]
    feeds[operand].reshape(-1)[:2] = np.nan
    resolver = OpResolverType.BUILTIN_REF if reference else OpResolverType.AUTO
    ours = run_edgelite(_MIN_MAX[case_id].model, feeds, experimental_op_resolver_type=resolver)
    theirs = run_litert(_MIN_MAX[case_id].model, feeds, reference)
    assert np.isnan(theirs[0]).any() == (operand == 1)
    assert_same_pattern(ours, theirs)


# -- hybrid (dynamic-range) kernels ---------------------------------------------------------------
# LiteRT quantizes a float row holding NaN or inf by casting NaN to int (undefined in C; x86 gives
# INT32_MIN, clamped to -127): its outputs there are finite garbage, or NaN / inf. Ours are NaN
# where a quantized row held NaN or inf (the asymmetric zero point raised "cannot convert float
# NaN to integer" before), and non-finite wherever LiteRT's are.

HYBRID = ["hybrid:fully_connected_asymmetric_relu", "hybrid:fully_connected_per_channel_asymmetric",
          "hybrid:conv_2d_per_channel", "hybrid:conv_2d_1x1_expansion_relu",
          "hybrid:conv_2d_one_pixel_reduce", "hybrid:batch_matmul_asymmetric_adj_y",
          "int4:hybrid_conv_2d"]
_HYBRID = {p.id: p.values[0] for p in all_cases("CASES") if p.id in HYBRID}


def _recurrent_models() -> dict:
    from edgelite.schema import load, save
    from tests.interpreter.test_lstm import _lstm_model
    from tests.interpreter.test_rnn import _Builder

    lstm = load(_lstm_model(hybrid=True))
    op = lstm.subgraphs[0].operators[0]
    op.options = op.options.replace(asymmetric_quantize_inputs=True)
    b = _Builder(4).input((2, 3, 4))
    b.qconst(5, 4, scale=0.01).qconst(5, 5, scale=0.02).const(5).variable(2, 5)
    b.qconst(4, 4, scale=0.012).qconst(4, 4, scale=0.02).const(4).variable(2, 4)
    b.input((2, 3, 4)).qconst(5, 4, scale=0.03).qconst(4, 4, scale=0.01)
    return {
        "unidirectional_sequence_lstm": save(lstm),
        "rnn": _Builder(2).input((3, 6)).qconst(5, 6, scale=0.01).qconst(5, 5, scale=0.015)
        .const(5).variable(3, 5).build("RNN", [(3, 5)], fused_activation_function=4,
                                       asymmetric_quantize_inputs=True),
        "bidirectional_sequence_rnn": b.build(
            "BIDIRECTIONAL_SEQUENCE_RNN", [(2, 3, 5), (2, 3, 4)], time_major=False,
            fused_activation_function=4, asymmetric_quantize_inputs=True),
        "svdf": _Builder(5).input((2, 5)).qconst(6, 5, scale=0.01).qconst(6, 4, scale=0.02)
        .const(3).variable(2, 24).build("SVDF", [(2, 3)], rank=2, fused_activation_function=1,
                                        asymmetric_quantize_inputs=True),
    }


def _hybrid_model(name: str) -> tuple:
    if name in _HYBRID:
        return _HYBRID[name].model, [np.asarray(f) for f in _HYBRID[name].feeds]
    from edgelite.interpreter import Interpreter
    content = _recurrent_models()[name]
    it = Interpreter(model_content=content)
    rng = np.random.default_rng(3)
    return content, [rng.uniform(-1, 1, d["shape"]).astype(np.float32)
                     for d in it.get_input_details()]


@pytest.mark.parametrize("reference", [False, True], ids=["default", "builtin_ref"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", HYBRID + ["unidirectional_sequence_lstm", "rnn",
                                          "bidirectional_sequence_rnn", "svdf"])
def test_hybrid_nonfinite_input_is_non_finite_where_litert_is(name, kind, reference):
    from edgelite.interpreter import OpResolverType
    content, feeds = _hybrid_model(name)
    feeds = [nonfinite(f, kind) if f.dtype.kind == "f" else f for f in feeds]
    resolver = OpResolverType.BUILTIN_REF if reference else OpResolverType.AUTO
    ours = run_edgelite(content, feeds, experimental_op_resolver_type=resolver)
    theirs = run_litert(content, feeds, reference)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        missing = np.isfinite(a) & ~np.isfinite(b)
        assert not missing.any(), f"{int(missing.sum())} outputs finite where LiteRT's are not"
        if kind == "nan_all" and not reference:
            assert np.isnan(a).all()      # every row quantized from NaN: NaN throughout
