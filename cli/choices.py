"""The commands' fixed choices, as enums (typer and argparse both list them in --help). Their
values are the names the converter and the training builder take; tests check they agree."""
from __future__ import annotations

import enum


def _choices(name: str, *values: str):
    """A str enum of `values`; a member's name is its value with dashes as underscores."""
    return enum.Enum(name, [(v.replace("-", "_"), v) for v in values], type=str,
                     module=__name__)


Quantize = _choices("Quantize", "dynamic", "dynamic-int4", "int8", "int16x8", "float16")
Calibration = _choices("Calibration", "minmax", "percentile", "mse")
Loss = _choices("Loss", "sparse_softmax_cross_entropy", "softmax_cross_entropy",
                "mean_squared_error", "binary_cross_entropy")
Optimizer = _choices("Optimizer", "adam", "sgd")


def value(choice) -> str | None:
    """An enum member's value (None stays None)."""
    return None if choice is None else getattr(choice, "value", choice)
