"""edgelite.converter: ONNX import, graph passes, quantization, training-signature export (the
command line, `edgelite convert` and `tflite-convert`, is `edgelite.cli`).

    from edgelite.converter import TFLiteConverter
    tflite_bytes = TFLiteConverter.from_onnx("model.onnx").convert()
"""
from .api import Optimize, OpsSet, TargetSpec, TFLiteConverter, TrainingOptions
from .errors import ConversionError, UnsupportedOpsError

__all__ = ["TFLiteConverter", "TrainingOptions", "Optimize", "OpsSet", "TargetSpec",
           "ConversionError", "UnsupportedOpsError"]
