"""Post-training quantization of a float model's IR.

    from edgelite.converter.quantize import quantize_model
    int8 = quantize_model(model, "int8", representative_dataset=samples)

Modes:
- "int8": full integer. Activations calibrated by running the float model in edgelite's
  interpreter over the representative dataset (asymmetric int8), weights symmetric int8 per
  channel, biases int32; ops without an int8 kernel stay float between QUANTIZE / DEQUANTIZE.
  `inference_input_type` / `inference_output_type` "int8" make the model's inputs / outputs
  int8 (default float32).
- "int16x8": the same with int16 activations (zero point 0) and int64 biases.
- "dynamic": int8 weights (per channel for convolutions), float activations: hybrid kernels
- "dynamic-int4": the same with int4 weights (two a byte) for FULLY_CONNECTED and CONV_2D
  quantize the activations on the fly. No dataset needed.
- "float16": float16 weights behind DEQUANTIZE. No dataset needed.

`quantize` returns the Report too (which ops stayed float, and why).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgelite.schema import Model

from .calibrate import METHODS, calibrate, samples
from .full_integer import Report, fold_float16_dequantize, quantize_integer
from .weights_only import MIN_WEIGHT_ELEMENTS, quantize_dynamic, quantize_float16

MODES = ("int8", "int16x8", "dynamic", "dynamic-int4", "float16")
_ACTIVATIONS = {"int8": "int8", "int16x8": "int16"}


@dataclass
class Quantized:
    model: Model
    report: Report
    ranges: dict | None = None    # calibrated {tensor index: (lo, hi)} of the float model


def quantize(model: Model, mode: str, representative_dataset=None, *,
             inference_input_type="float32", inference_output_type="float32",
             calibration: str = "minmax", percentile: float = 99.99, progress: bool = True,
             min_weight_elements: int = MIN_WEIGHT_ELEMENTS) -> Quantized:
    """Quantize a float model (the IR; not changed). See the module docstring for the modes."""
    if mode not in MODES:
        raise ValueError(f"unknown quantization mode {mode!r}; choose one of {', '.join(MODES)}")
    if mode in ("dynamic", "dynamic-int4"):
        return Quantized(*quantize_dynamic(model, min_weight_elements,
                                           4 if mode == "dynamic-int4" else 8))
    if mode == "float16":
        return Quantized(*quantize_float16(model))
    if representative_dataset is None:
        raise ValueError(f"{mode} quantization needs a representative dataset to calibrate the "
                         "activations: give representative_dataset")
    import copy
    float_model = copy.deepcopy(model)
    fold_float16_dequantize(float_model)
    data = samples(representative_dataset, float_model)
    ranges = calibrate(float_model, data, calibration, percentile, progress)
    act = _ACTIVATIONS[mode]
    m, report = quantize_integer(float_model, ranges, act, _type_name(inference_input_type),
                                 _type_name(inference_output_type))
    report.notes.insert(0, f"calibrated on {len(data)} samples ({calibration})")
    return Quantized(m, report, ranges)


def quantize_model(model: Model, mode: str, representative_dataset=None, **options) -> Model:
    """The quantized copy of `model` (see `quantize` for the options)."""
    return quantize(model, mode, representative_dataset, **options).model


def _type_name(value) -> str:
    if value is None:
        return "float32"
    if isinstance(value, str):
        return value
    return np.dtype(value).name


__all__ = ["quantize", "quantize_model", "Quantized", "Report", "MODES", "METHODS", "calibrate",
           "samples"]
