"""The onnxruntime oracle, pinned to a path that gives the same numbers on every x86-64 CPU.

onnxruntime above ORT_ENABLE_BASIC rewrites QDQ groups into its own fused integer kernels
(QLinearConv, MatMulIntegerToFloat, ...) whose arithmetic depends on the CPU: on an AVX2 CPU
without VNNI its int8 convolution was 37 output LSB away from what numpy, LiteRT, unoptimized
onnxruntime and edgelite agree on (issue 11). At ORT_ENABLE_BASIC it runs the graph as written, up
to rewrites that do not depend on the CPU (constant folding, redundant nodes removed, Conv fused
with a following Add / Mul / BatchNormalization), on one thread, so it is an oracle for what the
ONNX model computes and not for one CPU's kernels. Every test makes its sessions here;
tests/conftest.py fails a test whose session runs above BASIC.
"""
from __future__ import annotations

import os


def onnxruntime_session(model, *, threads: int = 1, **options):
    """An onnxruntime CPU InferenceSession on `model` (a ModelProto, serialized bytes or a path)
    at ORT_ENABLE_BASIC on `threads` intra-op threads; `options` set more SessionOptions
    attributes (log_severity_level=3, ...)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    for name, value in options.items():
        setattr(so, name, value)
    if hasattr(model, "SerializeToString"):
        model = model.SerializeToString()
    elif isinstance(model, os.PathLike):
        model = os.fspath(model)
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def onnxruntime_run(model, feeds: dict, output_names=None, **options) -> list:
    """onnxruntime_session(model).run(output_names, feeds)."""
    return onnxruntime_session(model, **options).run(output_names, feeds)
