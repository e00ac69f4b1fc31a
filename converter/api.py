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

        self._check_settings()
        self.last_conversion = convert_onnx(self._model, self.input_shapes,
                                            keep_io_layout=self.keep_io_layout)
        return self.last_conversion.content

    def _check_settings(self) -> None:
        import numpy as np

        from .errors import ConversionError

        pending = []
        if self.optimizations:
            pending.append(f"optimizations={list(self.optimizations)}")
        if self.representative_dataset is not None:
            pending.append("representative_dataset")
        if set(self.target_spec.supported_ops) - {OpsSet.TFLITE_BUILTINS}:
            pending.append(f"target_spec.supported_ops={set(self.target_spec.supported_ops)}")
        if self.target_spec.supported_types:
            pending.append(f"target_spec.supported_types={set(self.target_spec.supported_types)}")
        for name in ("inference_input_type", "inference_output_type"):
            value = getattr(self, name)
            if value is not None and np.dtype(value) != np.float32:
                pending.append(f"{name}={np.dtype(value).name}")
        if pending:
            raise ConversionError("quantization is not implemented yet (it lands with the "
                                  "quantization issue); these settings need it: "
                                  + ", ".join(pending)
                                  + ". Leave them at their defaults for a float32 model.")
