"""The table of per-op facts (schema/ops.py) is well formed; tests/test_ops_table.py checks the
layers against it."""
from __future__ import annotations

from edgelite.schema import ops
from edgelite.schema.ops import ACTIVATION_BOUNDS, OPS, Activation, facts
from edgelite.schema.options import ACTIVATIONS, OPERATOR_CODES, default_options, options_kind
from edgelite.schema.versions import FEATURES


def test_every_row_is_a_builtin_op_once():
    assert set(OPS) <= set(OPERATOR_CODES), sorted(set(OPS) - set(OPERATOR_CODES))
    assert not set(ops._PLAIN) & set(ops._ROWS), "an op in both _PLAIN and _ROWS"
    assert len(ops._PLAIN) == len(set(ops._PLAIN))


def test_positions_are_consistent():
    for op, f in OPS.items():
        if f.weight_axis is not None:
            assert f.weights, op
        assert f.bias is None or f.bias not in f.weights, op
        if f.bias is not None:
            assert f.weights, op
        assert f.data is None or f.data, op


def test_fused_activations_are_the_format_codes():
    for op, f in OPS.items():
        if f.fused_as is not None:
            assert f.fused_as.name == op and f.clamp == ACTIVATION_BOUNDS[f.fused_as]
        if f.activation is not None:
            assert f.activation == "fused_activation_function", op
            assert options_kind(op) is not None, op
            assert f.activation in default_options(op).fields, op
    assert facts("RELU").clamp == (0.0, float("inf"))
    assert facts("RELU_0_TO_1").clamp == (0.0, 1.0) and facts("RELU_0_TO_1").fused_as is None
    assert Activation.SIGMOID == 6 and set(ACTIVATION_BOUNDS) == {
        Activation.RELU, Activation.RELU_N1_TO_1, Activation.RELU6}


def test_activation_is_the_formats_enum():
    """Activation holds ActivationFunctionType's codes (from the .fbs), and SIGMOID besides."""
    for code, name in ACTIVATIONS.items():
        assert Activation[name] == code
    assert {a.name for a in Activation} - set(ACTIVATIONS.values()) == {"SIGMOID"}


def test_version_rules_name_known_features():
    for op, f in OPS.items():
        v = f.versions
        assert all(name in FEATURES and n > 1 for name, n in v.features), op
        assert min(v.int8, v.int16, v.hybrid, v.minimum) >= 1, op
        assert tuple(int(x) for x in v.introduced.split(".")) >= (1, 5, 0), op


def test_ops_without_a_row_have_the_defaults():
    f = facts("STABLEHLO_ADD")
    assert f is ops.NO_FACTS and f.data == (0,) and not f.side_effects and not f.weights
    assert ops.data_input("SPLIT") == 1 and ops.data_input("CONCATENATION") == 0
    assert facts("BATCH_MATMUL").weights_when_constant
    assert not facts("CONV_2D").weights_when_constant
    assert not facts("CONCATENATION").weights_when_constant   # every input data, no weights
