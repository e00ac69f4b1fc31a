"""`TFLiteConverter`: the Python API, shaped like TensorFlow's `tf.lite.TFLiteConverter`.

    converter = TFLiteConverter.from_onnx("model.onnx")
    converter.input_shapes = {"x": (1, 3, 48, 192)}   # fixes dynamic dims (-1 keeps one open)
    tflite_bytes = converter.convert()

Importing this module is cheap: onnx and the converter's machinery load in `convert()`.
"""
from __future__ import annotations

import enum


class Optimize(enum.Enum):
    """What `optimizations` may hold (TensorFlow's names)."""

    DEFAULT = "DEFAULT"
    OPTIMIZE_FOR_SIZE = "OPTIMIZE_FOR_SIZE"        # deprecated in TensorFlow: same as DEFAULT
    OPTIMIZE_FOR_LATENCY = "OPTIMIZE_FOR_LATENCY"  # deprecated in TensorFlow: same as DEFAULT
    EXPERIMENTAL_SPARSITY = "EXPERIMENTAL_SPARSITY"


class OpsSet(enum.Enum):
    """What `target_spec.supported_ops` may hold (TensorFlow's names)."""

    TFLITE_BUILTINS = "TFLITE_BUILTINS"
    TFLITE_BUILTINS_INT8 = "TFLITE_BUILTINS_INT8"
    EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8 = \
        "EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8"
    SELECT_TF_OPS = "SELECT_TF_OPS"


class TargetSpec:
    def __init__(self):
        self.supported_ops = {OpsSet.TFLITE_BUILTINS}
        self.supported_types = set()


class TFLiteConverter:
    """Converts an ONNX model into `.tflite` bytes."""

    def __init__(self, model, input_shapes: dict | None = None):
        self._model = model
        self.input_shapes = dict(input_shapes or {})
        self.keep_io_layout = False
        self.optimizations = []
        self.representative_dataset = None
        self.target_spec = TargetSpec()
        self.inference_input_type = None    # None or numpy.float32: float inputs
        self.inference_output_type = None
        self.calibration = "minmax"         # edgelite's: "minmax", "percentile" or "mse" ranges
        self.last_conversion = None   # the Conversion of the latest convert() (summary facts)

    @classmethod
    def from_onnx(cls, model, input_shapes: dict | None = None) -> "TFLiteConverter":
        """`model`: a path to an `.onnx` file (external data beside it) or an onnx.ModelProto.
        `input_shapes`: {input name: shape} for inputs with dynamic dims."""
        return cls(model, input_shapes)

    def convert(self) -> bytes:
        """The `.tflite` model as bytes; raises `ConversionError` (a ValueError) with one message
        that names every problem."""
        from .convert import convert_onnx
        from .quantize.conversion import request_from   # quantization hook (converter/quantize)

        request = request_from(self)
        self.last_conversion = convert_onnx(self._model, self.input_shapes,
                                            keep_io_layout=self.keep_io_layout)
        if request is not None:
            request.apply(self.last_conversion)
        return self.last_conversion.content
