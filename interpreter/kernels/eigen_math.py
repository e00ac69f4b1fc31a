"""Eigen's float32 tanh, as LiteRT's tensor_utils::ApplyTanhToVector computes it (an Eigen array
expression, `array().tanh()`), for the BUILTIN_REF paths that must match LiteRT bit for bit: the
recurrent kernels' fused TANH (RnnBatchStep: RNN, UNIDIRECTIONAL_SEQUENCE_RNN,
BIDIRECTIONAL_SEQUENCE_RNN; SVDF's ApplyActivationToVector).

Eigen's fast tanh (EIGEN_FAST_MATH, its default) is a [9/8] rational approximation of odd
numerator and even denominator, on the input clamped to [-c, c]:

    tanh(x) ~= (x^3 P(x^2) + x) / Q(x^2),  P of degree 3, Q of degree 4 (Q(0) = 1),

each polynomial by Horner's rule (ppolevl), every multiply and add rounded to float32 apart
(LiteRT's x86 wheel is built without FMA: no fused pmadd; c = 7.90738964080810547, the non-FMA
clamp). Measured against LiteRT 2.3.0's RNN TANH on 16384 values (normal, uniform in [-10, 10]
and tiny): identical bits, packet lanes and scalar tail alike; numpy's tanh differs from it on
more than half of them, by up to 2 ulp.
"""
from __future__ import annotations

import numpy as np

F32 = np.float32

_CLAMP = F32(7.90738964080810547)
_ALPHA = tuple(F32(v) for v in (1.394553628e-8, 2.102733560e-5, 3.520756727e-3,
                                 1.340216100e-1))
_BETA = tuple(F32(v) for v in (8.015776984e-7, 3.326951409e-4, 2.597254514e-2,
                                4.673548340e-1, 1.0))


def _horner(x2: np.ndarray, coeffs: tuple, out: np.ndarray) -> np.ndarray:
    """out = ppolevl(x2, coeffs): ((c0 x2 + c1) x2 + c2) ..., each step rounded apart."""
    np.multiply(x2, coeffs[0], out=out)
    np.add(out, coeffs[1], out=out)
    for c in coeffs[2:]:
        np.multiply(out, x2, out=out)
        np.add(out, c, out=out)
    return out


def eigen_tanh_(v: np.ndarray) -> None:
    """v = Eigen's tanh(v) in place (float32 array)."""
    x = np.clip(v, -_CLAMP, _CLAMP).astype(F32, copy=False)
    x2 = x * x
    x3 = x2 * x
    p = _horner(x2, _ALPHA, np.empty_like(x))
    q = _horner(x2, _BETA, np.empty_like(x))
    np.multiply(x3, p, out=p)
    np.add(p, x, out=p)
    np.divide(p, q, out=v)
