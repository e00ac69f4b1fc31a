"""QUANTIZE from integer inputs (requantization), bit-exact to TFLite's reference kernel:
clamp(MultiplyByQuantizedMultiplier(x - input_zero_point, m, shift) + output_zero_point) with the
multiplier of input_scale / output_scale (quantize.cc, reference requantize.h). float32 inputs are
the float kernels' (convert.py)."""
from __future__ import annotations

import numpy as np

from .quantized import TYPE_RANGE, all_values, lookup, mbqm, quant_params, quantize_multiplier
from .registry import register

_OUTPUTS = {"int8": ("uint8", "int8", "int16"), "uint8": ("uint8", "int8", "int16"),
            "int16": ("int8", "int16", "int32"), "int32": ("int8", "int16")}


@register("QUANTIZE", "int8", "uint8", "int16", "int32")
def quantize(node):
    node.expect_inputs(1)
    x, out = node.input(0), node.outputs[0]
    key = x.type_name
    if out.type_name not in _OUTPUTS[key]:
        raise node.fail(f"{key} input with {out.type_name} output is not supported (TFLite "
                        f"requantizes {key} to {', '.join(_OUTPUTS[key])})")
    if out.quantization is not None and out.quantization.scale.size > 1:
        raise node.fail("per-channel output quantization needs a float32 input")
    out.shape = tuple(x.shape)
    s_in, z_in = quant_params(node, 0)
    s_out, z_out = quant_params(node, 0, output=True)
    if key == "int16" and out.type_name == "int16" and (z_in or z_out):
        raise node.fail("int16 to int16 requantization needs zero points of 0")
    m, s = quantize_multiplier(float(s_in) / float(s_out))
    lo, hi = TYPE_RANGE[out.type_name]

    def requantize(v):
        return np.clip(mbqm(v - z_in, m, s) + z_out, lo, hi)

    if key in ("int8", "uint8"):
        return lookup(requantize(all_values(key)).astype(out.dtype))

    def run(x, out):
        np.copyto(out, requantize(x.astype(np.int64)), casting="unsafe")
    return run
