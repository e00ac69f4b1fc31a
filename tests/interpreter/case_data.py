"""What the op case modules (cases_*.py) share: random values of a type, every value of an 8-bit
type, convolution options, and the convolution forms that every integer arithmetic (int8, 16x8)
runs. The draws take each module's own generator, so its cases keep their values."""
from __future__ import annotations

import numpy as np


def random_values(rng, shape, dt, lo: int = -100, hi: int = 100):
    """Booleans, normal floats, or integers in [lo, hi) clipped to the type's range."""
    if dt == "bool":
        return rng.random(shape) > 0.5
    if dt.startswith("float"):
        return rng.standard_normal(shape).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(max(info.min, lo), min(info.max, hi), shape).astype(dt)


def q8(rng, shape, dtype="int8"):
    """Random values covering the whole 8-bit range."""
    lo, hi = (-128, 128) if dtype == "int8" else (0, 256)
    return rng.integers(lo, hi, shape).astype(dtype)


def every_value(rng, shape, dtype="int8"):
    """All 256 values of the type (each once, then random), so a table is checked whole."""
    lo = -128 if dtype == "int8" else 0
    size = int(np.prod(shape))
    extra = rng.integers(lo, lo + 256, max(0, size - 256))
    values = np.concatenate([np.arange(lo, lo + 256), extra])
    return rng.permutation(values[:size]).reshape(shape).astype(dtype)


def conv_options(stride=1, padding=0, act=0, dilation=1, **extra):
    return dict(stride_w=stride, stride_h=stride, padding=padding, fused_activation_function=act,
                dilation_w_factor=dilation, dilation_h_factor=dilation, **extra)


# (id, op, input shape, weights shape, conv_options, case settings): the strides, dilations,
# groups and channel multipliers each integer convolution kernel is checked on.
CONV_FORMS = [
    ("conv_2d_stride2_valid", "CONV_2D", (2, 9, 8, 4), (5, 3, 2, 4), dict(stride=2, padding=1),
     {}),
    ("conv_2d_dilation2", "CONV_2D", (1, 9, 9, 3), (4, 3, 3, 3), dict(dilation=2), {}),
    ("conv_2d_1x1", "CONV_2D", (1, 6, 6, 16), (8, 1, 1, 16), dict(padding=1), {}),
    ("conv_2d_per_tensor", "CONV_2D", (1, 5, 5, 3), (4, 3, 3, 3), {}, dict(per_channel=False)),
    ("conv_2d_groups", "CONV_2D", (1, 6, 6, 6), (4, 3, 3, 3), {}, {}),
    ("depthwise_conv_2d", "DEPTHWISE_CONV_2D", (1, 8, 8, 6), (1, 3, 3, 6),
     dict(depth_multiplier=1), {}),
    ("depthwise_conv_2d_multiplier2_valid", "DEPTHWISE_CONV_2D", (1, 7, 7, 3), (1, 3, 2, 6),
     dict(padding=1, depth_multiplier=2), {}),
    ("depthwise_conv_2d_dilation_relu", "DEPTHWISE_CONV_2D", (1, 9, 9, 4), (1, 3, 3, 4),
     dict(dilation=2, act=1, depth_multiplier=1), {}),
]


def conv_form_cases(conv_case) -> list:
    """CONV_FORMS as the cases of one arithmetic's `conv_case(id, op, x, w, options, **kw)`."""
    return [conv_case(id_, op, x, w, conv_options(**options), **settings)
            for id_, op, x, w, options, settings in CONV_FORMS]
