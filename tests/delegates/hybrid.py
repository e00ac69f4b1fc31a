"""Float twins of hybrid (dynamic-range) models, the reference a delegate that runs hybrid ops
on dequantized weights (the OpenCL delegate's "hybrid": "dequantize") is held to at the float
tolerance: edgelite's CPU hybrid kernels quantize each input on the fly as LiteRT's do, so
they differ from the float op by that rounding (up to 8e-2 of max |output| on the op cases, a
FULLY_CONNECTED + TANH). A plain module: importing it skips nothing."""
from __future__ import annotations

import numpy as np

from edgelite.schema import load, save
from edgelite.schema.model import unpack_int4

HYBRID_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


def hybrid_ops(content: bytes) -> int:
    """How many hybrid CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED the model holds."""
    model = load(content)
    return sum(_weights(sg, op) is not None for sg in model.subgraphs for op in sg.operators)


def _weights(sg, op):
    """The int8 / uint8 / int4 constant weights of a hybrid op (float32 input), else None."""
    if op.opcode.name not in HYBRID_OPS or len(op.inputs) < 2 or min(op.inputs[:2]) < 0:
        return None
    x, w = sg.tensors[op.inputs[0]], sg.tensors[op.inputs[1]]
    if x.dtype != "float32" or w.dtype not in ("int8", "uint8", "int4") or not w.buffer \
            or w.quantization is None or w.quantization.scale.size == 0:
        return None
    return w


def float_twin(content: bytes) -> bytes:
    """The model with every hybrid op's weights (int8, uint8, int4 two a byte) replaced by
    their real values, float32: scale * (q - zero point), per channel along the quantized
    dimension."""
    model = load(content)
    for sg in model.subgraphs:
        for op in sg.operators:
            w = _weights(sg, op)
            if w is None:
                continue
            q = w.quantization
            raw = model.buffers[w.buffer].data
            data = unpack_int4(raw, w.shape) if w.dtype == "int4" else \
                raw.view(np.dtype(w.dtype)).reshape(w.shape)
            shape = [1] * data.ndim
            if q.scale.size > 1:
                shape[q.quantized_dimension] = -1
            zero = q.zero_point if q.zero_point.size else np.zeros(1, np.int64)
            real = (data.astype(np.float64) - zero.reshape(shape if zero.size > 1 else [1]))
            real = real * q.scale.astype(np.float64).reshape(shape)
            w.buffer = model.add_buffer(real.astype(np.float32))
            w.dtype, w.quantization = "float32", None
    return save(model)
