"""Facts about the format's builtin ops that every layer shares: one row per op in `OPS`.

A row (`OpFacts`) says which inputs carry the op's data, which hold a layer's weights (and the
axis their per-channel scales run along) and its bias, where its options keep a fused activation,
whether it has side effects (a barrier: no pass reorders across it or drops it as dead), whether
it cannot run without its options table, and which version each feature it uses needs
(`Versions`, read by versions.py). The layers key what is theirs alone off these facts: a
quantization rule's arithmetic (converter/quantize/rules.py), a gradient rule
(interpreter/training), a kernel (interpreter/kernels), an OpenCL builder (delegates/opencl).
Adding an op is one row here plus its kernels; tests/test_ops_table.py checks that every op a
layer names has a row, and tools/supported_ops.py writes docs/supported_ops.md from it.

An op without a row (a StableHLO op, say) has `NO_FACTS`: data input 0, no weights, no fused
activation, no side effects, version 1.

`Activation` is the format's ActivationFunctionType (a fused activation's code in an op's
options), plus SIGMOID = 6, which exists only inside TFLite's kernels (the LSTM gates; the
format has no code 6, and LiteRT reads it as NONE where a file holds it).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from .bindings import ActivationFunctionType

# The format's codes as the generated module has them (from the .fbs), and TFLite's internal
# SIGMOID, which no file holds.
Activation = enum.IntEnum("Activation", {
    **{name: code for name, code in vars(ActivationFunctionType).items()
       if not name.startswith("_")},
    "SIGMOID": 6}, module=__name__)


# The float range each clamping activation keeps; the others leave values as they are.
ACTIVATION_BOUNDS = {Activation.RELU: (0.0, float("inf")), Activation.RELU_N1_TO_1: (-1.0, 1.0),
                     Activation.RELU6: (0.0, 6.0)}


@dataclass(frozen=True)
class Versions:
    """The op version each feature needs (TFLite's op versioning); 1 where nothing is said.

    int8 / int16: the data input is int8 / int16 (16x8). hybrid: the data input is float32 and
    input 1 int8 or uint8. minimum: the first version runtimes register (LiteRT refuses a lower
    one). features: (feature, version) pairs for what the options or quantization decide
    (versions.FEATURES says what each name means). introduced: the TFLite release that first ran
    version 1 (where later than 1.5.0)."""

    int8: int = 1
    int16: int = 1
    hybrid: int = 1
    minimum: int = 1
    features: tuple = ()
    introduced: str = "1.5.0"


@dataclass(frozen=True)
class OpFacts:
    """What every layer may rely on about one builtin op.

    data: the inputs that carry the op's values, activations in a quantized model (None: every
      input); the dtype of the first selects the kernel's arithmetic and the op's version.
    weights: the inputs that hold a layer's weights; weight_axis: their output-channel axis,
      along which per-channel scales run and fusions scale them (None: one scale);
      bias: the bias input. A weight that is also a data input (BATCH_MATMUL's right-hand side)
      is a weight only where it is constant.
    hybrid: float data with int8 weights selects a hybrid kernel.
    activation: the options field holding a fused activation the converter may fill: the
      kernels (edgelite's and LiteRT's, from the op's first version) apply it to the output.
    fused_as: the fused activation this op computes on its own (RELU is RELU's);
      clamp: the range this op clamps its input to (the RELU family).
    side_effects: a barrier: runs where the file puts it, never reordered, never dead (ops
      without outputs are barriers too, whatever their row says).
    options_required: the op cannot run without its options table (no sensible default).
    """

    data: tuple | None = (0,)
    weights: tuple = ()
    weight_axis: int | None = None
    bias: int | None = None
    hybrid: bool = False
    activation: str | None = None
    fused_as: Activation | None = None
    clamp: tuple | None = None
    side_effects: bool = False
    options_required: bool = False
    versions: Versions = Versions()

    def __post_init__(self):
        if self.fused_as is not None and self.clamp is None:
            object.__setattr__(self, "clamp", ACTIVATION_BOUNDS[self.fused_as])

    @property
    def weights_when_constant(self) -> bool:
        """Whether a weight input may carry activations too (then it is a weight where it is
        constant, data where it is not)."""
        return any(self.data is None or k in self.data for k in self.weights)


FUSED = "fused_activation_function"
BINARY = (0, 1)
_LSTM_WEIGHTS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 16)   # gate, recurrent, peephole, projection

# Rows with facts, by family. Not declared yet, though their kernels apply a fused activation in
# edgelite and LiteRT alike: L2_POOL_2D, CONV_3D, CONV_3D_TRANSPOSE (declaring `activation` lets
# the converter fuse into them, a change of what it writes, to make with its own tests).
# TRANSPOSE_CONV's options gained the field late (runtimes before ignore it): nothing fills it.
_ROWS = {
    # convolutions and matrix products
    "CONV_2D": OpFacts(weights=(1,), weight_axis=0, bias=2, hybrid=True, activation=FUSED,
                       options_required=True, versions=Versions(int8=3, int16=4, hybrid=2)),
    "DEPTHWISE_CONV_2D": OpFacts(weights=(1,), weight_axis=3, bias=2, hybrid=True,
                                 activation=FUSED, options_required=True,
                                 versions=Versions(int8=3, int16=5, hybrid=4,
                                                   features=(("dilation", 2),))),
    "FULLY_CONNECTED": OpFacts(weights=(1,), weight_axis=0, bias=2, hybrid=True,
                               activation=FUSED,
                               versions=Versions(int8=4, int16=7, hybrid=3,
                                                 features=(("no_bias", 6), ("keep_num_dims", 5)))),
    # inputs: output shape, weights, data, bias. TFLite numbers int8 weights 2, a bias 3, a
    # fused activation 4; edgelite writes 1, which every runtime runs.
    "TRANSPOSE_CONV": OpFacts(data=(2,), weights=(1,), weight_axis=0, bias=3,
                              options_required=True),
    "BATCH_MATMUL": OpFacts(data=BINARY, weights=(1,), hybrid=True,
                            versions=Versions(int8=2, hybrid=4, introduced="2.3.0")),
    "CONV_3D": OpFacts(options_required=True),
    "CONV_3D_TRANSPOSE": OpFacts(data=(2,)),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": OpFacts(weights=_LSTM_WEIGHTS, hybrid=True,
                                            versions=Versions(hybrid=2, introduced="1.14.0")),
    "EMBEDDING_LOOKUP": OpFacts(hybrid=True),
    # pools
    "AVERAGE_POOL_2D": OpFacts(activation=FUSED, options_required=True,
                               versions=Versions(int8=2, int16=3)),
    "MAX_POOL_2D": OpFacts(activation=FUSED, options_required=True,
                           versions=Versions(int8=2, int16=3)),
    "L2_POOL_2D": OpFacts(options_required=True),
    # elementwise arithmetic
    "ADD": OpFacts(data=BINARY, activation=FUSED, versions=Versions(int8=2, int16=3)),
    "SUB": OpFacts(data=BINARY, activation=FUSED, versions=Versions(int8=2, int16=3)),
    "MUL": OpFacts(data=BINARY, activation=FUSED, versions=Versions(int8=2, int16=4)),
    "DIV": OpFacts(data=BINARY, activation=FUSED),
    "MAXIMUM": OpFacts(data=BINARY, versions=Versions(int8=2)),
    "MINIMUM": OpFacts(data=BINARY, versions=Versions(int8=2)),
    **{op: OpFacts(data=BINARY) for op in (
        "SQUARED_DIFFERENCE", "POW", "FLOOR_DIV", "FLOOR_MOD", "ATAN2", "EQUAL", "NOT_EQUAL",
        "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL", "LOGICAL_AND", "LOGICAL_OR",
        "BITWISE_XOR", "RIGHT_SHIFT")},
    "ADD_N": OpFacts(data=None),
    # activations
    "RELU": OpFacts(fused_as=Activation.RELU, versions=Versions(int8=2)),
    "RELU6": OpFacts(fused_as=Activation.RELU6, versions=Versions(int8=2)),
    "RELU_N1_TO_1": OpFacts(fused_as=Activation.RELU_N1_TO_1),
    "RELU_0_TO_1": OpFacts(clamp=(0.0, 1.0), versions=Versions(introduced="2.13.0")),
    "LEAKY_RELU": OpFacts(versions=Versions(int8=2)),
    "HARD_SWISH": OpFacts(versions=Versions(introduced="1.15.0")),
    "GELU": OpFacts(versions=Versions(introduced="2.9.0")),
    "LOGISTIC": OpFacts(versions=Versions(int8=2, int16=3)),
    "TANH": OpFacts(versions=Versions(int8=2, int16=3)),
    "SOFTMAX": OpFacts(versions=Versions(int8=2, int16=3)),
    "LOG_SOFTMAX": OpFacts(versions=Versions(int8=2)),
    # reductions
    "MEAN": OpFacts(versions=Versions(int8=2, int16=3)),
    "SUM": OpFacts(versions=Versions(int8=2)),
    "REDUCE_MAX": OpFacts(versions=Versions(int8=2)),
    "REDUCE_MIN": OpFacts(versions=Versions(int8=2)),
    "ARG_MAX": OpFacts(versions=Versions(int8=2)),
    "ARG_MIN": OpFacts(versions=Versions(int8=2)),
    "TOPK_V2": OpFacts(versions=Versions(int8=2)),
    "CUMSUM": OpFacts(versions=Versions(introduced="2.4.0")),
    # moving data
    "CONCATENATION": OpFacts(data=None, options_required=True,
                             versions=Versions(int8=2, int16=3)),
    "PACK": OpFacts(data=None, options_required=True, versions=Versions(int8=2)),
    "UNPACK": OpFacts(options_required=True, versions=Versions(int8=2)),
    "SPLIT": OpFacts(data=(1,), options_required=True, versions=Versions(int8=2, int16=4)),
    "SPLIT_V": OpFacts(options_required=True, versions=Versions(int8=2)),
    "GATHER": OpFacts(options_required=True, versions=Versions(int8=2)),
    "DEPTH_TO_SPACE": OpFacts(options_required=True, versions=Versions(int8=2)),
    "SPACE_TO_DEPTH": OpFacts(options_required=True, versions=Versions(int8=2)),
    "PAD": OpFacts(versions=Versions(int8=2)),
    "PADV2": OpFacts(versions=Versions(int8=2)),
    "TRANSPOSE": OpFacts(versions=Versions(int8=2)),
    "SLICE": OpFacts(versions=Versions(int8=2)),
    "STRIDED_SLICE": OpFacts(versions=Versions(int8=2)),
    "RESIZE_BILINEAR": OpFacts(versions=Versions(int8=2)),
    "RESIZE_NEAREST_NEIGHBOR": OpFacts(versions=Versions(int8=2)),
    "BROADCAST_TO": OpFacts(versions=Versions(minimum=2, introduced="2.5.0")),
    "SCATTER_ND": OpFacts(data=(1,)),          # indices, updates, shape
    "ONE_HOT": OpFacts(data=(2,)),             # indices, depth, on value, off value
    "SELECT_V2": OpFacts(versions=Versions(introduced="2.2.0")),
    # quantization
    "QUANTIZE": OpFacts(versions=Versions(features=(("per_channel_output", 3),
                                                    ("int16_output", 2)))),
    "DEQUANTIZE": OpFacts(versions=Versions(int8=2, int16=3,
                                            features=(("float16_input", 3),
                                                      ("per_channel_input", 5)))),
    "DENSIFY": OpFacts(versions=Versions(introduced="2.2.0")),
    # control flow, variables and other state: barriers
    "IF": OpFacts(side_effects=True, options_required=True,
                  versions=Versions(introduced="1.15.0")),
    "WHILE": OpFacts(side_effects=True, options_required=True,
                     versions=Versions(introduced="1.15.0")),
    "CALL_ONCE": OpFacts(side_effects=True, options_required=True,
                         versions=Versions(introduced="2.5.0")),
    "VAR_HANDLE": OpFacts(side_effects=True, versions=Versions(introduced="2.6.0")),
    "READ_VARIABLE": OpFacts(side_effects=True, versions=Versions(introduced="2.6.0")),
    "ASSIGN_VARIABLE": OpFacts(side_effects=True, versions=Versions(introduced="2.6.0")),
    **{op: OpFacts(side_effects=True) for op in (
        "CALL", "HASHTABLE", "HASHTABLE_FIND", "HASHTABLE_IMPORT", "HASHTABLE_SIZE",
        "RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL", "MULTINOMIAL", "CUSTOM")},
}

# Ops with kernels and nothing to say beyond the defaults (data input 0, version 1).
_PLAIN = """
    ABS BATCH_TO_SPACE_ND BIDIRECTIONAL_SEQUENCE_LSTM BIDIRECTIONAL_SEQUENCE_RNN BITCAST
    BROADCAST_ARGS BUCKETIZE CAST CEIL COMPLEX_ABS COS DILATE DYNAMIC_UPDATE_SLICE ELU
    EMBEDDING_LOOKUP_SPARSE EXP EXPAND_DIMS FAKE_QUANT FILL FLOOR GATHER_ND IMAG
    L2_NORMALIZATION LOCAL_RESPONSE_NORMALIZATION LOG LOGICAL_NOT LSTM MATRIX_DIAG
    MATRIX_SET_DIAG MIRROR_PAD NEG NON_MAX_SUPPRESSION_V4 NON_MAX_SUPPRESSION_V5 PRELU RANGE RANK
    REAL REDUCE_ALL REDUCE_ANY REDUCE_PROD REDUCE_WINDOW RESHAPE REVERSE_SEQUENCE REVERSE_V2 RFFT2D
    RNN ROUND RSQRT SEGMENT_SUM SELECT SHAPE SIGN SIN SPACE_TO_BATCH_ND SPARSE_TO_DENSE SQRT
    SQUARE SQUEEZE SVDF TILE UNIDIRECTIONAL_SEQUENCE_RNN UNIQUE UNSORTED_SEGMENT_MAX
    UNSORTED_SEGMENT_MIN UNSORTED_SEGMENT_PROD UNSORTED_SEGMENT_SUM WHERE ZEROS_LIKE
""".split()

NO_FACTS = OpFacts()
OPS = dict(sorted({**{op: NO_FACTS for op in _PLAIN}, **_ROWS}.items()))


def facts(op: str) -> OpFacts:
    """The row of builtin `op` (NO_FACTS for an op the table does not hold)."""
    return OPS.get(op, NO_FACTS)


def data_input(op: str) -> int:
    """The input whose dtype selects `op`'s arithmetic (its first data input)."""
    data = facts(op).data
    return data[0] if data else 0
