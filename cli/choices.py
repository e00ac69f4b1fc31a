"""The commands' fixed choices, as enums (typer and argparse both list them in --help). Their
values are the names the converter and the training builder take; tests check they agree."""
from __future__ import annotations

import enum


class Quantize(str, enum.Enum):
    dynamic = "dynamic"
    dynamic_int4 = "dynamic-int4"
    int8 = "int8"
    int16x8 = "int16x8"
    float16 = "float16"


class Calibration(str, enum.Enum):
    minmax = "minmax"
    percentile = "percentile"
    mse = "mse"


class Loss(str, enum.Enum):
    sparse_softmax_cross_entropy = "sparse_softmax_cross_entropy"
    softmax_cross_entropy = "softmax_cross_entropy"
    mean_squared_error = "mean_squared_error"
    binary_cross_entropy = "binary_cross_entropy"


class Optimizer(str, enum.Enum):
    adam = "adam"
    sgd = "sgd"


def value(choice) -> str | None:
    """An enum member's value (None stays None)."""
    return None if choice is None else getattr(choice, "value", choice)
