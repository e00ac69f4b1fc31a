"""ONNX QDQ models, the import half: QuantizeLinear / DequantizeLinear as TFLite ops.

A QDQ model (onnxruntime's `quantize_static`, PyTorch's and TensorFlow's exporters) is a float
graph with fake quantization: activations pass through QuantizeLinear -> DequantizeLinear pairs,
weights and biases are integer initializers behind DequantizeLinear. Imported here:
- QuantizeLinear of an activation -> QUANTIZE (float32 -> int8 / uint8, the node's scale and
  zero point on the output tensor); DequantizeLinear of an activation -> DEQUANTIZE;
- QuantizeLinear / DequantizeLinear of constants are folded (ONNX's arithmetic: round half to
  even, per-axis scales): the weights become the float constants q x scale, exactly.
So the converted graph is a float model that computes what the QDQ model computes (up to the
rounding rule of QUANTIZE), and the float lowerings and passes apply to it unchanged (the layout
pass moves transposes through QUANTIZE / DEQUANTIZE like any elementwise op).
`drop_identity_pairs` (a pipeline pass) removes pairs that cannot change a value, so that the
pair behind a flatten does not hide the FULLY_CONNECTED that absorbs its transpose.
`converter/quantize/qdq.py` then turns the pairs into integer ops.
"""
from __future__ import annotations

import numpy as np

from edgelite.schema import (Model, Operator, OperatorCode, QuantizationParameters,
                             default_options, remove_dead, replace_uses)

from .editor import Editor
from .lower import const_input, lowers

QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")
# Integer types whose QuantizeLinear / DequantizeLinear of activations become TFLite ops, and
# those that then become integer ops (int16 pairs stay fake quantization, QUANTIZE/DEQUANTIZE).
LOWERED_TYPES = ("int8", "uint8", "int16")
ACTIVATION_TYPES = ("int8", "uint8")
# Ops whose outputs hold only values of their data input (moved, copied, selected, or zero
# padding): an input on a quantization grid leaves the output on it.
VALUE_MOVING = frozenset({
    "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "TRANSPOSE", "GATHER", "GATHER_ND", "SLICE",
    "STRIDED_SLICE", "PAD", "MIRROR_PAD", "SPLIT", "SPLIT_V", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH",
    "RESIZE_NEAREST_NEIGHBOR", "BROADCAST_TO", "TILE", "UNPACK", "REVERSE_V2",
    "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "MAX_POOL_2D", "REDUCE_MAX", "REDUCE_MIN",
})
DATA_INPUT = {"SPLIT": 1}


# -- ONNX's arithmetic on constants --------------------------------------------------------------

def along(values: np.ndarray, axis: int | None, rank: int) -> np.ndarray:
    """A per-axis parameter shaped to broadcast against a rank-`rank` tensor."""
    values = np.asarray(values)
    if values.ndim == 0 or axis is None:
        return values.reshape(())
    shape = [1] * rank
    shape[axis] = -1
    return values.reshape(shape)


def quantize_array(x, scale, zero_point, axis: int | None) -> np.ndarray:
    """ONNX QuantizeLinear: saturate(round_half_even(x / scale) + zero_point)."""
    x = np.asarray(x, np.float32)
    zero_point = np.asarray(zero_point)
    info = np.iinfo(zero_point.dtype)
    q = np.rint(x / along(scale, axis, x.ndim).astype(np.float32)) + \
        along(zero_point, axis, x.ndim).astype(np.float64)
    return np.clip(q, info.min, info.max).astype(zero_point.dtype)


def dequantize_array(q, scale, zero_point, axis: int | None) -> np.ndarray:
    """ONNX DequantizeLinear: (q - zero_point) x scale in float32."""
    q = np.asarray(q)
    centered = q.astype(np.int64) - along(zero_point, axis, q.ndim).astype(np.int64)
    return (centered.astype(np.float32) * along(scale, axis, q.ndim).astype(np.float32)) \
        .astype(np.float32)


# -- the lowerings -------------------------------------------------------------------------------

def _params(b, n, x_rank: int, int_dtype=None):
    """(scale, zero point, axis or None) of a Q/DQ node; zero point typed as the integers."""
    if int(n.attr("block_size", 0) or 0):
        raise n.fail("blocked quantization (block_size) is not supported")
    scale = np.asarray(const_input(b, n, 1, "the scale"), np.float32)
    zp_t = n.input(2)
    if zp_t >= 0:
        zero_point = np.asarray(const_input(b, n, 2, "the zero point"))
    else:
        dtype = int_dtype or _output_dtype(n)
        zero_point = np.zeros(scale.shape, dtype)
    if scale.ndim > 1 or zero_point.ndim > 1 or zero_point.size != scale.size:
        raise n.fail(f"scale {list(scale.shape)} and zero point {list(zero_point.shape)} must be "
                     "scalars or one matching 1-D array")
    if scale.size == 1:   # a 1-D scale of one value is per tensor (as onnxruntime reads it)
        return scale.reshape(()), zero_point.reshape(()), None
    return scale, zero_point, int(n.attr("axis", 1)) % max(x_rank, 1)


def _output_dtype(n) -> str:
    code = int(n.attr("output_dtype", 0) or 0)
    if not code:
        return "uint8"
    from onnx import helper
    return np.dtype(helper.tensor_dtype_to_np_dtype(code)).name


def activation_params(scale, zero_point) -> QuantizationParameters:
    return QuantizationParameters(scale=np.asarray(scale, np.float32).reshape(1),
                                  zero_point=np.asarray(zero_point, np.int64).reshape(1))


def same_params(a: QuantizationParameters | None, b: QuantizationParameters | None) -> bool:
    return a is not None and b is not None and np.array_equal(a.scale, b.scale) and \
        np.array_equal(a.zero_point, b.zero_point)


@lowers("QuantizeLinear")
def quantize_linear(b, n):
    x = n.input(0)
    scale, zero_point, axis = _params(b, n, b.rank(x))
    value = b.value(x)
    if value is not None:
        return b.const(quantize_array(value, scale, zero_point, axis))
    dtype = zero_point.dtype.name
    if dtype not in LOWERED_TYPES:
        raise n.fail(f"quantizing an activation to {dtype} is not supported (int8, uint8, "
                     "int16)")
    if axis is not None:
        raise n.fail("per-axis quantization of an activation is not supported")
    if b.dtype(x) != "float32":
        raise n.fail(f"the input is {b.dtype(x)}; QUANTIZE takes float32")
    out = b.tensor(f"{b.where}/quantize", b.shape(x), dtype)
    b.sg.tensors[out].quantization = activation_params(scale, zero_point)
    b.add(Operator(OperatorCode("QUANTIZE"), [x], [out], default_options("QUANTIZE")))
    return out


@lowers("DequantizeLinear")
def dequantize_linear(b, n):
    x = n.input(0)
    scale, zero_point, axis = _params(b, n, b.rank(x), b.dtype(x))
    value = b.value(x)
    if value is not None:
        return b.const(dequantize_array(value, scale, zero_point, axis))
    dtype = b.dtype(x)
    if dtype not in LOWERED_TYPES:
        raise n.fail(f"dequantizing a {dtype} activation is not supported (int8, uint8, "
                     "int16)")
    if axis is not None:
        raise n.fail("per-axis dequantization of an activation is not supported")
    tensor = b.sg.tensors[x]
    wanted = activation_params(scale, zero_point.astype(dtype))
    if tensor.quantization is None and x in b.sg.inputs:
        tensor.quantization = wanted        # an integer model input: its parameters
    elif tensor.quantization is None:
        raise n.fail(f"{tensor.name!r} has no quantization parameters: only a QuantizeLinear's "
                     "output or an integer model input can be dequantized")
    elif not same_params(tensor.quantization, wanted):
        raise n.fail(f"it reads {tensor.name!r} with other parameters than the QuantizeLinear "
                     "that wrote it (a Q -> DQ pair must share scale and zero point)")
    return b.op("DEQUANTIZE", [x], dtype="float32")


# -- the pipeline pass ---------------------------------------------------------------------------

def on_grid(ed: Editor, t: int, params: QuantizationParameters, dtype: str) -> bool:
    """Whether float tensor t holds only values of DEQUANTIZE(`dtype` tensor with `params`):
    written by such a DEQUANTIZE, through value-moving ops."""
    op = ed.producer(t)
    while op is not None and op.op in VALUE_MOVING:
        op = ed.producer(op.inputs[DATA_INPUT.get(op.op, 0)])
    if op is None or op.op != "DEQUANTIZE":
        return False
    source = ed.sg.tensors[op.inputs[0]]
    return source.dtype == dtype and same_params(source.quantization, params)


def drop_identity_pairs(model: Model) -> bool:
    """QUANTIZE -> DEQUANTIZE pairs whose input is already on their grid go (identities)."""
    changed = False
    for sg in model.subgraphs:
        if not any(op.op == "QUANTIZE" for op in sg.operators):
            continue
        ed = Editor(model, sg)
        for op in list(sg.operators):
            if op.op != "QUANTIZE" or sg.tensors[op.inputs[0]].dtype != "float32":
                continue
            q = sg.tensors[op.outputs[0]]
            readers = ed.readers(op.outputs[0])
            if not readers or ed.is_output(op.outputs[0]) or \
                    any(r.op != "DEQUANTIZE" or ed.is_output(r.outputs[0]) for r in readers):
                continue
            if not on_grid(ed, op.inputs[0], q.quantization, q.dtype):
                continue
            for r in readers:
                replace_uses(sg, r.outputs[0], op.inputs[0])
            ed.refresh()
            changed = True
        if changed:
            remove_dead(sg)
    return changed
