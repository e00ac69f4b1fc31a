"""Cases for the integer convolutions' fast requantization (requantize.Requantizer's float32 path
and its exact redo of the outputs near a rounding edge): outputs large enough to leave the small
exact float64 path, found near an edge through 8-byte words (a few words redone whole, many
byte by byte, an odd tail), in place and not, with the scale in the weights or applied after,
negative sums inside the clamp range (no activation, lo < zero point) and outside it (RELU,
RELU6). Bit-exact to LiteRT's reference kernels (see test_ops.py)."""
from tests.interpreter.case_data import conv_options
from tests.interpreter.cases_int8 import conv_case

CASES = [
    # 36855 outputs (odd: a 7-byte tail after the 8-byte words), no activation.
    conv_case("requant_conv_1x1_odd_tail", "CONV_2D", (1, 63, 65, 8), (9, 1, 1, 8),
              conv_options()),
    # 196608 outputs: in place, redone from the patches; many differing words; RELU6.
    conv_case("requant_conv_1x1_large_relu6", "CONV_2D", (1, 64, 64, 16), (48, 1, 1, 16),
              conv_options(act=3), oq=(0.1, -128)),
    conv_case("requant_conv_3x3_same_relu", "CONV_2D", (1, 40, 40, 8), (32, 3, 3, 8),
              conv_options(padding=0, act=1), oq=(0.3, -128)),
    conv_case("requant_depthwise_large", "DEPTHWISE_CONV_2D", (1, 48, 48, 64), (1, 3, 3, 64),
              conv_options(padding=0), oq=(0.05, 2)),
    conv_case("requant_depthwise_stride2_relu6", "DEPTHWISE_CONV_2D", (1, 64, 64, 32),
              (1, 3, 3, 32), conv_options(stride=2, padding=0, act=3), oq=(0.03, -128)),
    # uint8 (per-tensor weights, no lift to a non-negative range).
    conv_case("requant_conv_uint8", "CONV_2D", (1, 32, 32, 8), (12, 1, 1, 8), conv_options(),
              key="uint8", w_zp=131),
    conv_case("requant_depthwise_uint8_relu", "DEPTHWISE_CONV_2D", (1, 40, 40, 16),
              (1, 3, 3, 16), conv_options(padding=0, act=1), key="uint8", w_zp=120,
              oq=(0.5, -100)),
]
