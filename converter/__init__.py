"""edgelite.converter: ONNX import, graph passes, quantization, training-signature export, and the
command line (`cli.py`: `edgelite` and `tflite-convert`)."""
