"""Complex numbers, as audio front ends (spectrograms) use them: RFFT2D (float32 -> complex64),
COMPLEX_ABS, REAL and IMAG (complex64 -> float32, complex128 -> float64)."""
from __future__ import annotations

import numpy as np

from .registry import register

_PARTS = {"complex64": np.dtype(np.float32), "complex128": np.dtype(np.float64)}


def _complex_to_real(node):
    node.expect_inputs(1)
    x = node.input(0)
    want = _PARTS[x.type_name]
    if node.outputs[0].dtype != want:
        raise node.fail(f"the output of a {x.type_name} input must be {want}, "
                        f"got {node.outputs[0].type_name}")
    node.outputs[0].shape = tuple(x.shape)


@register("REAL", "complex64", "complex128")
def real(node):
    _complex_to_real(node)
    return lambda x, out: np.copyto(out, x.real)


@register("IMAG", "complex64", "complex128")
def imag(node):
    _complex_to_real(node)
    return lambda x, out: np.copyto(out, x.imag)


@register("COMPLEX_ABS", "complex64", "complex128")
def complex_abs(node):
    _complex_to_real(node)
    return lambda x, out: np.abs(x, out=out)


@register("RFFT2D", "float32")
def rfft2d(node):
    """The 2-D FFT of the last two dimensions, cropped or zero-padded to fft_length (two
    powers of 2, a constant), keeping the fft_length[1] / 2 + 1 non-negative frequencies of the
    last one. Computed in float64, as TFLite's kernel does, then rounded to complex64."""
    node.expect_inputs(2)
    x, length = node.input(0), node.input(1)
    if len(x.shape) < 2:
        raise node.fail(f"the input must have rank >= 2, got {list(x.shape)}")
    if length.data is None:
        raise node.fail("fft_length must be a constant")
    if length.type_name != "int32" or length.data.shape != (2,):
        raise node.fail(f"fft_length must be an int32 vector of 2, got {length.type_name}"
                        f"{list(length.shape)}")
    if node.outputs[0].type_name != "complex64":
        raise node.fail(f"the output must be complex64, got {node.outputs[0].type_name}")
    n0, n1 = (int(v) for v in length.data)
    for n in (n0, n1):
        if n < 1 or n & (n - 1):
            raise node.fail(f"fft_length must hold powers of 2, got {[n0, n1]}")
    lead = tuple(x.shape[:-2])
    node.outputs[0].shape = lead + (n0, n1 // 2 + 1)
    h, w = min(n0, x.shape[-2]), min(n1, x.shape[-1])
    padded = np.zeros(lead + (n0, n1), np.float64)

    def run(a, _length, out):
        padded[..., :h, :w] = a[..., :h, :w]
        out[...] = np.fft.rfft2(padded)
    return run
