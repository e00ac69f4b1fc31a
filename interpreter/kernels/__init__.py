"""The kernels, one module per family. FAMILIES is the coverage table: each module and the ops
(and custom codes) it registers. A module is imported the first time one of its ops is looked up
(registry.py), so importing the interpreter compiles no kernel file; iterating `KERNELS` (or
`registry.load_all()`) imports them all. tests/interpreter/test_kernel_families.py checks the
table against what each module registers: a new kernel module or op is one entry here."""
from .registry import (CUSTOM_OPS, KernelError, Node, TensorInfo, declare, register,  # noqa: F401
                       register_custom_op)
from .registry import KERNELS as _KERNELS

FAMILIES = {
    "elementwise": (
        "ADD DIV EQUAL FLOOR_DIV FLOOR_MOD GREATER GREATER_EQUAL LESS LESS_EQUAL LOGICAL_AND "
        "LOGICAL_NOT LOGICAL_OR MAXIMUM MINIMUM MUL NOT_EQUAL POW SELECT SELECT_V2 "
        "SQUARED_DIFFERENCE SUB"),
    "unary": "ABS CEIL COS EXP FLOOR LOG NEG ROUND RSQRT SIGN SIN SQRT SQUARE",
    "activations": (
        "CUMSUM ELU GELU HARD_SWISH L2_NORMALIZATION LEAKY_RELU LOGISTIC LOG_SOFTMAX PRELU RELU "
        "RELU6 RELU_0_TO_1 RELU_N1_TO_1 SOFTMAX TANH"),
    "reduce": "ARG_MAX ARG_MIN MEAN REDUCE_ALL REDUCE_ANY REDUCE_MAX REDUCE_MIN REDUCE_PROD SUM",
    "convert": "CAST DEQUANTIZE QUANTIZE",  # from float32, and from integers: requantization
    "control": "ASSIGN_VARIABLE CALL_ONCE IF READ_VARIABLE VAR_HANDLE WHILE",
    "lstm": "UNIDIRECTIONAL_SEQUENCE_LSTM",
    "where": "WHERE",  # data-dependent output shape
    "shape_ops": "BROADCAST_TO EXPAND_DIMS FILL RANGE RANK RESHAPE SHAPE SQUEEZE ZEROS_LIKE",
    "layout": "CONCATENATION PACK REVERSE_V2 SPLIT SPLIT_V TILE TRANSPOSE UNPACK",
    "conv_int8": "CONV_2D DEPTHWISE_CONV_2D",  # int8, uint8
    "fully_connected_int8": "BATCH_MATMUL FULLY_CONNECTED",  # int8, uint8
    "pool_int8": "AVERAGE_POOL_2D MAX_POOL_2D",  # int8, uint8, int16
    "conv": "CONV_2D DEPTHWISE_CONV_2D TRANSPOSE_CONV",
    "fully_connected": "BATCH_MATMUL FULLY_CONNECTED",
    "pool": "AVERAGE_POOL_2D L2_POOL_2D MAX_POOL_2D",
    "resize": "DEPTH_TO_SPACE RESIZE_BILINEAR RESIZE_NEAREST_NEIGHBOR SPACE_TO_DEPTH",
    "elementwise_int8": "ADD MAXIMUM MINIMUM MUL SUB",  # int8, uint8
    "activations_int8": (  # int8, uint8
        "HARD_SWISH LEAKY_RELU LOGISTIC RELU RELU6 RELU_0_TO_1 RELU_N1_TO_1 TANH"),
    "softmax_int8": "L2_NORMALIZATION LOG_SOFTMAX SOFTMAX",  # int8, uint8
    "slicing": "SLICE STRIDED_SLICE",
    "gather": "EMBEDDING_LOOKUP GATHER GATHER_ND TOPK_V2",
    "pad": "MIRROR_PAD PAD PADV2",
    "conv_int16": "BATCH_MATMUL CONV_2D DEPTHWISE_CONV_2D FULLY_CONNECTED",  # 16x8
    "hybrid": (  # float activations, int8 weights
        "BATCH_MATMUL CONV_2D DEPTHWISE_CONV_2D FULLY_CONNECTED"),
    "hybrid_lstm": "UNIDIRECTIONAL_SEQUENCE_LSTM",  # float activations, int8 weights
    "activations_int16": "LEAKY_RELU LOGISTIC RELU RELU6 SOFTMAX TANH",  # int16
    "elementwise_int16": "ADD MAXIMUM MINIMUM MUL SUB",  # int16
    "transpose_conv_int8": "TRANSPOSE_CONV",  # int8, uint8, int16
    "reduce_int8": (  # int8, uint8, int16
        "ARG_MAX ARG_MIN MEAN REDUCE_MAX REDUCE_MIN REDUCE_PROD SUM"),
    "resize_int8": (  # int8, uint8, int16
        "DEPTH_TO_SPACE RESIZE_BILINEAR RESIZE_NEAREST_NEIGHBOR SPACE_TO_DEPTH"),
    "binary_int8": (  # int8, uint8, int16
        "DIV EQUAL GREATER GREATER_EQUAL LESS LESS_EQUAL NOT_EQUAL PRELU SQUARED_DIFFERENCE"),
    "unary_int8": "ABS EXP GELU LOG NEG RSQRT SQRT",  # int8, uint8, int16
    "misc": "ADD_N ATAN2 BROADCAST_ARGS BUCKETIZE FAKE_QUANT LOCAL_RESPONSE_NORMALIZATION",
    "scatter": (
        "DYNAMIC_UPDATE_SLICE MATRIX_DIAG MATRIX_SET_DIAG ONE_HOT REVERSE_SEQUENCE SCATTER_ND"),
    "segment": (
        "SEGMENT_SUM UNIQUE UNSORTED_SEGMENT_MAX UNSORTED_SEGMENT_MIN UNSORTED_SEGMENT_PROD "
        "UNSORTED_SEGMENT_SUM"),
    "space_batch": "BATCH_TO_SPACE_ND SPACE_TO_BATCH_ND",
    "nms": "NON_MAX_SUPPRESSION_V4 NON_MAX_SUPPRESSION_V5",
    "detection": "TFLite_Detection_PostProcess",  # custom op of SSD detectors
    "mediapipe_ops": (  # MediaPipe's custom ops
        "Convolution2DTransposeBias Landmarks2TransformMatrix MaxPoolingWithArgmax2D "
        "MaxUnpooling2D Resampler TransformLandmarks TransformTensorBilinear"),
    "conv3d": "CONV_3D CONV_3D_TRANSPOSE",
    "rnn": "BIDIRECTIONAL_SEQUENCE_RNN RNN SVDF UNIDIRECTIONAL_SEQUENCE_RNN",
    "bidirectional_lstm": "BIDIRECTIONAL_SEQUENCE_LSTM",
    "float16": (  # float16
        "ADD COS EQUAL FLOOR GREATER GREATER_EQUAL LESS LESS_EQUAL LOGISTIC MAXIMUM MINIMUM MUL "
        "NEG NOT_EQUAL SIN SOFTMAX TANH"),
    "bitwise": "BITCAST BITWISE_XOR RIGHT_SHIFT",
    "complex": "COMPLEX_ABS IMAG REAL RFFT2D",
    "sparse": "DENSIFY EMBEDDING_LOOKUP_SPARSE SPARSE_TO_DENSE",
    "window": "DILATE REDUCE_WINDOW",
    "lstm_full": "LSTM",  # one step, full kernel
    "random_ops": "RANDOM_UNIFORM",  # Philox, bit-exact
}
declare(FAMILIES)


def __getattr__(name: str):
    """`KERNELS` from the package is the whole table: every kernel module imported first."""
    if name == "KERNELS":
        from .registry import load_all
        load_all()
        return _KERNELS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
