"""Facts about the format's builtin ops that every layer shares.

`Activation` is the format's ActivationFunctionType (a fused activation's code in an op's
options), plus SIGMOID = 6, which exists only inside TFLite's kernels (the LSTM gates; the
format has no code 6, and LiteRT reads it as NONE where a file holds it).
"""
from __future__ import annotations

import enum


class Activation(enum.IntEnum):
    NONE = 0
    RELU = 1
    RELU_N1_TO_1 = 2
    RELU6 = 3
    TANH = 4
    SIGN_BIT = 5
    SIGMOID = 6     # TFLite-internal: never in a file


# The float range each clamping activation keeps; the others leave values as they are.
ACTIVATION_BOUNDS = {Activation.RELU: (0.0, float("inf")), Activation.RELU_N1_TO_1: (-1.0, 1.0),
                     Activation.RELU6: (0.0, 6.0)}
