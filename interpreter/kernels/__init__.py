"""The kernels. Importing this package registers every kernel; each module below is one family,
so this list reads as the coverage table."""
from .registry import (KERNELS, CUSTOM_OPS, KernelError, Node, TensorInfo, register,  # noqa: F401
                       register_custom_op)

from . import elementwise  # noqa: F401  ADD SUB MUL DIV ... comparisons, logic, SELECT
from . import unary  # noqa: F401  ABS NEG EXP LOG SQRT RSQRT SQUARE SIN COS FLOOR CEIL ROUND SIGN
from . import activations  # noqa: F401  RELU ... GELU LOGISTIC TANH SOFTMAX L2_NORMALIZATION CUMSUM
from . import reduce  # noqa: F401  MEAN SUM REDUCE_* ARG_MAX ARG_MIN
from . import convert  # noqa: F401  CAST DEQUANTIZE QUANTIZE (from float32, and from integers: requantization)
from . import control  # noqa: F401  CALL_ONCE IF WHILE VAR_HANDLE READ_VARIABLE ASSIGN_VARIABLE
from . import lstm  # noqa: F401  UNIDIRECTIONAL_SEQUENCE_LSTM
from . import where  # noqa: F401  WHERE (data-dependent output shape)
from . import shape_ops  # noqa: F401  RESHAPE SQUEEZE EXPAND_DIMS SHAPE RANK BROADCAST_TO FILL ...
from . import layout  # noqa: F401  TRANSPOSE CONCATENATION PACK UNPACK SPLIT SPLIT_V TILE REVERSE_V2
from . import conv_int8  # noqa: F401  CONV_2D DEPTHWISE_CONV_2D (int8, uint8)
from . import fully_connected_int8  # noqa: F401  FULLY_CONNECTED BATCH_MATMUL (int8, uint8)
from . import pool_int8  # noqa: F401  MAX_POOL_2D AVERAGE_POOL_2D (int8, uint8, int16)
from . import conv  # noqa: F401  CONV_2D DEPTHWISE_CONV_2D TRANSPOSE_CONV
from . import fully_connected  # noqa: F401  FULLY_CONNECTED BATCH_MATMUL
from . import pool  # noqa: F401  AVERAGE_POOL_2D MAX_POOL_2D L2_POOL_2D
from . import resize  # noqa: F401  RESIZE_BILINEAR RESIZE_NEAREST_NEIGHBOR DEPTH_TO_SPACE SPACE_TO_DEPTH
from . import elementwise_int8  # noqa: F401  ADD SUB MUL MAXIMUM MINIMUM (int8, uint8)
from . import activations_int8  # noqa: F401  RELU RELU6 LEAKY_RELU HARD_SWISH LOGISTIC TANH (int8, uint8)
from . import softmax_int8  # noqa: F401  SOFTMAX LOG_SOFTMAX L2_NORMALIZATION (int8, uint8)
from . import slicing  # noqa: F401  SLICE STRIDED_SLICE
from . import gather  # noqa: F401  GATHER GATHER_ND EMBEDDING_LOOKUP TOPK_V2
from . import pad  # noqa: F401  PAD PADV2 MIRROR_PAD
from . import conv_int16  # noqa: F401  CONV_2D DEPTHWISE_CONV_2D FULLY_CONNECTED BATCH_MATMUL (16x8)
from . import hybrid, hybrid_lstm  # noqa: F401  CONV_2D DEPTHWISE_CONV_2D FULLY_CONNECTED BATCH_MATMUL UNIDIRECTIONAL_SEQUENCE_LSTM (float activations, int8 weights)
from . import activations_int16  # noqa: F401  RELU RELU6 LEAKY_RELU LOGISTIC TANH SOFTMAX (int16)
from . import elementwise_int16  # noqa: F401  ADD SUB MUL MAXIMUM MINIMUM (int16)
from . import transpose_conv_int8  # noqa: F401  TRANSPOSE_CONV (int8, uint8, int16)
from . import reduce_int8  # noqa: F401  MEAN SUM REDUCE_PROD REDUCE_MAX REDUCE_MIN ARG_MAX ARG_MIN (int8, uint8, int16)
from . import resize_int8  # noqa: F401  RESIZE_BILINEAR RESIZE_NEAREST_NEIGHBOR DEPTH_TO_SPACE SPACE_TO_DEPTH (int8, uint8, int16)
from . import binary_int8  # noqa: F401  PRELU SQUARED_DIFFERENCE DIV EQUAL NOT_EQUAL LESS LESS_EQUAL GREATER GREATER_EQUAL (int8, uint8, int16)
from . import unary_int8  # noqa: F401  ABS NEG SQRT RSQRT EXP LOG GELU (int8, uint8, int16)
from . import misc  # noqa: F401  ADD_N ATAN2 (also float16) BROADCAST_ARGS FAKE_QUANT BUCKETIZE LOCAL_RESPONSE_NORMALIZATION
from . import scatter  # noqa: F401  SCATTER_ND DYNAMIC_UPDATE_SLICE ONE_HOT MATRIX_DIAG MATRIX_SET_DIAG REVERSE_SEQUENCE
from . import segment  # noqa: F401  SEGMENT_SUM UNSORTED_SEGMENT_SUM / PROD / MAX / MIN UNIQUE
from . import space_batch  # noqa: F401  SPACE_TO_BATCH_ND BATCH_TO_SPACE_ND
from . import nms  # noqa: F401  NON_MAX_SUPPRESSION_V4 NON_MAX_SUPPRESSION_V5
from . import detection  # noqa: F401  TFLite_Detection_PostProcess (custom op of SSD detectors)
from . import mediapipe_ops  # noqa: F401  MediaPipe's custom ops (Convolution2DTransposeBias MaxPoolingWithArgmax2D MaxUnpooling2D Landmarks2TransformMatrix TransformTensorBilinear TransformLandmarks Resampler)
from . import conv3d  # noqa: F401  CONV_3D CONV_3D_TRANSPOSE
from . import rnn  # noqa: F401  RNN UNIDIRECTIONAL_SEQUENCE_RNN BIDIRECTIONAL_SEQUENCE_RNN SVDF
from . import bidirectional_lstm  # noqa: F401  BIDIRECTIONAL_SEQUENCE_LSTM
from . import float16  # noqa: F401  ADD MUL MAXIMUM MINIMUM comparisons NEG FLOOR SIN COS TANH LOGISTIC SOFTMAX (float16)
from . import bitwise  # noqa: F401  BITWISE_XOR RIGHT_SHIFT BITCAST
from . import complex  # noqa: F401  COMPLEX_ABS RFFT2D REAL IMAG
from . import sparse  # noqa: F401  DENSIFY SPARSE_TO_DENSE EMBEDDING_LOOKUP_SPARSE
from . import window  # noqa: F401  DILATE REDUCE_WINDOW
from . import lstm_full  # noqa: F401  LSTM (one step, full kernel)
from . import random_ops  # noqa: F401  RANDOM_UNIFORM (Philox, bit-exact)
