"""`TFLiteConverter`: the Python API, shaped like TensorFlow's `tf.lite.TFLiteConverter`.

    converter = TFLiteConverter.from_onnx("model.onnx")
    converter.input_shapes = {"x": (1, 3, 48, 192)}   # fixes dynamic dims (-1 keeps one open)
    tflite_bytes = converter.convert()

    converter = TFLiteConverter.from_torch(module, (torch.randn(1, 3, 224, 224),))

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


class TrainingOptions:
    """What `TFLiteConverter.training` holds: the converted model gets `train`, `infer`, `save`
    and `restore` signatures (edgelite.interpreter.training), so it fine-tunes on the device in
    edgelite and in stock LiteRT."""

    def __init__(self, trainable: str = "last:1", loss: str = "sparse_softmax_cross_entropy",
                 optimizer: str = "adam", learning_rate: float | None = None):
        self.trainable, self.loss = trainable, loss
        self.optimizer, self.learning_rate = optimizer, learning_rate


class TFLiteConverter:
    """Converts an ONNX model into `.tflite` bytes, with TensorFlow's `tf.lite.TFLiteConverter`
    settings: set the attributes, then call `convert()`.

        converter = TFLiteConverter.from_onnx("model.onnx")
        converter.optimizations = [Optimize.DEFAULT]
        converter.representative_dataset = samples     # full integer int8
        tflite_bytes = converter.convert()

    Attributes:
        optimizations: [Optimize.DEFAULT] to quantize (what kind: the settings below);
            empty (the default) for a float model.
        representative_dataset: calibration samples for full integer quantization: a callable
            or iterable of samples (a list of arrays in input order, or a dict by input name)
            or a dict {input name: samples along the first axis}, in the ONNX model's layout.
        target_spec: target_spec.supported_ops (a set of OpsSet: TFLITE_BUILTINS_INT8 for
            integer ops only, EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8 for
            16x8) and target_spec.supported_types ({numpy.float16}: float16 weights; {"int4"}:
            int4 weights).
        inference_input_type: numpy.int8 (numpy.int16 for 16x8) for integer model inputs;
            None or numpy.float32 keeps them float.
        inference_output_type: the same for the model's outputs.
        input_shapes: {input name: shape} fixing an input's dynamic dims (-1 keeps a dim
            dynamic; dims the ONNX file leaves open stay dynamic without it),
            e.g. {"x": [1, 3, 224, 224]}.
        keep_io_layout: True keeps every input and output in ONNX's layout (NCHW) instead of
            the .tflite's NHWC.
        calibration: how activation ranges are calibrated: "minmax" (the extremes seen),
            "percentile" (99.99th percentiles) or "mse" (least quantization error).
        training: a TrainingOptions: add train, infer, save and restore signatures so the
            model fine-tunes on the device; None (the default) for inference only.
        last_conversion: what the latest convert() made (content, model, op counts, warnings,
            and seconds: the whole conversion, calibration included); None before it.
    """

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
        self.training = None                # a TrainingOptions: add the training signatures
        self.last_conversion = None   # the Conversion of the latest convert() (summary facts)

    @property
    def onnx_model(self):
        """What convert() converts: the path or onnx.ModelProto given to from_onnx, or the
        ModelProto that from_torch / from_exported_program exported."""
        return self._model

    @classmethod
    def from_onnx(cls, model, input_shapes: dict | None = None) -> "TFLiteConverter":
        """`model`: a path to an `.onnx` file (external data beside it) or an onnx.ModelProto.
        `input_shapes`: {input name: shape} for inputs with dynamic dims."""
        return cls(model, input_shapes)

    @classmethod
    def from_torch(cls, module, example_inputs, dynamic_shapes=None, *, input_names=None,
                   exporter: str = "torchscript", opset: int = 18) -> "TFLiteConverter":
        """A torch.nn.Module, exported now by torch's ONNX exporter (in memory; needs the
        `torch` extra), then converted like an ONNX model: no TensorFlow.

        `example_inputs`: a tensor or a tuple of tensors (the shapes it is exported at).
        `dynamic_shapes`: which input axes stay dynamic, by input name or in input order:
        {axis: name} (a torch.export.Dim is named by its name) or a list of axes, e.g.
        {"x": {0: "batch"}}. `input_names`: the ONNX (and .tflite) input names; default
        forward's parameter names. `exporter`: "torchscript" (torch.onnx.export's
        TorchScript exporter, the quicker) or "dynamo" (torch.export, needs onnxscript)."""
        from .torch_export import export_onnx

        proto = export_onnx(module, example_inputs, dynamic_shapes, input_names, exporter, opset)
        return cls(proto)

    @classmethod
    def from_exported_program(cls, program, input_shapes: dict | None = None,
                              opset: int = 18) -> "TFLiteConverter":
        """A torch.export program (a torch.export.ExportedProgram, or the path of the .pt2 that
        torch.export.save wrote), exported by torch's ONNX exporter (needs the `torch` extra
        and onnxscript), then converted like an ONNX model. Its dynamic dims stay dynamic;
        `input_shapes` fixes them as from_onnx's does."""
        from .torch_export import export_program

        return cls(export_program(program, opset), input_shapes)

    def convert(self) -> bytes:
        """The `.tflite` model as bytes; raises `ConversionError` (a ValueError) with one message
        that names every problem."""
        import time

        from .convert import convert_onnx
        from .quantize.conversion import request_from   # quantization hook (converter/quantize)
        from .quantize.qdq import request_for           # QDQ models: integer (quantize/qdq.py)

        start = time.perf_counter()
        request = request_for(self) or request_from(self)
        self.last_conversion = convert_onnx(self._model, self.input_shapes,
                                            keep_io_layout=self.keep_io_layout)
        if request is not None:
            request.apply(self.last_conversion)
        if self.training is not None:
            self._add_training()
        # the whole conversion: import and passes, calibration, quantization, training signatures
        self.last_conversion.seconds = time.perf_counter() - start
        return self.last_conversion.content

    def _add_training(self) -> None:
        from edgelite.interpreter.training import make_trainable
        from edgelite.schema import save

        from .errors import ConversionError

        if self.optimizations:
            raise ConversionError("training signatures need a float model: quantize the "
                                  "fine-tuned model afterwards instead")
        t = self.training
        try:
            model = make_trainable(self.last_conversion.model, trainable=t.trainable,
                                   loss=t.loss, optimizer=t.optimizer,
                                   learning_rate=t.learning_rate)
        except ValueError as e:
            raise ConversionError(f"cannot add training signatures: {e}") from None
        self.last_conversion.model = model
        self.last_conversion.content = save(model)
