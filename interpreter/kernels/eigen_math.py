"""Eigen's float32 tanh and logistic, as LiteRT's tensor_utils::ApplyTanhToVector and
ApplySigmoidToVector compute them (Eigen array expressions, `array().tanh()` / `.logistic()`),
for the BUILTIN_REF paths that must match LiteRT bit for bit: the fused TANH of RnnBatchStep
(RNN, UNIDIRECTIONAL_SEQUENCE_RNN, BIDIRECTIONAL_SEQUENCE_RNN), SVDF and the dynamic-range
FULLY_CONNECTED, and the dynamic-range LSTM's gates (LstmStepHybrid).

Eigen's fast tanh (EIGEN_FAST_MATH, its default) is a [9/8] rational approximation of odd
numerator and even denominator, on the input clamped to [-c, c]:

    tanh(x) ~= (x^3 P(x^2) + x) / Q(x^2),  P of degree 3, Q of degree 4 (Q(0) = 1),

each polynomial by Horner's rule (ppolevl), every multiply and add rounded to float32 apart
(LiteRT's x86 wheel is built for SSE without FMA: no fused pmadd; c = 7.90738964080810547, the
non-FMA clamp). Its scalar path is the same function. Measured against LiteRT 2.3.0's RNN TANH
on 16384 values (normal, uniform in [-10, 10] and tiny): identical bits; numpy's tanh differs
on 57% of them, by up to 4 ulp. The logistic's packet and scalar paths differ (see
eigen_logistic_); measured against LiteRT's LOGISTIC kernel without XNNPACK (an Eigen
expression too) on 16384 values and on tails: identical bits, NaN and infinities included.
An ARM or FMA build of LiteRT would round differently (other clamps, fused multiply-adds).
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


_HALF, _ONE = F32(0.5), F32(1.0)
_LOG2E = F32(1.44269504088896341)
_C1, _C2 = F32(-0.693359375), F32(2.12194440e-4)
_P = tuple(F32(v) for v in (0.49999141693115234375, 0.16666877269744873046875,
                             4.1898667812347412109375e-2, 8.33471305668354034423828125e-3))


def _logistic_packets(v: np.ndarray) -> None:
    """scalar_logistic_op<float>'s packet path, in place: exp(x) / (1 + exp(x)) with exp(x) =
    exp(x / 2)^2, exp(x / 2) = 2^m exp(r) by Cephes' two-part range reduction and a degree-5
    polynomial; 0 below -104, x clamped above at 16.6355324."""
    with np.errstate(invalid="ignore", over="ignore"):   # -inf and NaN: the masks decide
        _logistic_packets_of(v)


def _logistic_packets_of(v: np.ndarray) -> None:
    zero = v < F32(-104)
    x = np.minimum(v, F32(16.6355324)).astype(F32, copy=False)
    x = x * _HALF
    m = np.floor(x * _LOG2E + _HALF)
    r = m * _C1 + x
    r = m * _C2 + r
    r2 = r * r
    p_even = r2 * _P[2] + _P[0]
    p_odd = r2 * _P[3] + _P[1]
    p = r * p_odd + p_even
    p = r2 * p + (r + _ONE)
    e = np.ldexp(p, m.astype(np.int32))
    e = e * e
    np.divide(e, e + _ONE, out=v)
    v[zero] = 0


def _libm_expf():
    """The C library's expf (what LiteRT's scalar path calls), or None where ctypes finds no
    libm: glibc's expf is not correctly rounded (measured: 215 of 400000 values one ulp from
    float64 exp rounded once)."""
    global _EXPF
    if _EXPF is False:
        _EXPF = None
        try:
            import ctypes
            import ctypes.util
            name = ctypes.util.find_library("m")
            if name:
                f = ctypes.CDLL(name).expf
                f.restype, f.argtypes = ctypes.c_float, [ctypes.c_float]
                _EXPF = f
        except (OSError, AttributeError):
            _EXPF = None
    return _EXPF


_EXPF = False   # not looked up yet


def _logistic_scalars(v: np.ndarray) -> None:
    """scalar_logistic_op<float>'s scalar path, in place: e = expf(min(x, 16.6355324)) (libm's
    through ctypes, else float64 exp rounded once), e / (1 + e) in float32. At most 3 + 3
    values a vector take it."""
    x = np.minimum(v, F32(16.6355324))
    expf = _libm_expf()
    if expf is None:
        with np.errstate(over="ignore"):
            e = np.exp(x.astype(np.float64)).astype(F32)
    else:
        e = np.array([expf(t) for t in x.reshape(-1).tolist()], F32).reshape(x.shape)
    np.divide(e, e + _ONE, out=v)


PACKET = 4   # LiteRT's x86 wheel: SSE packets of 4 floats (measured: a 4103-long LOGISTIC
#              takes the packet path on its first 4100 values, libm's on the last 3)


def eigen_logistic_(v: np.ndarray, offset: int = 0) -> None:
    """v = Eigen's logistic(v) in place, over v's values in order as one Eigen vector whose
    first value lies `offset` floats past a 16-byte boundary: Eigen's assignment loop takes
    the values before the first aligned one and the last (size - head) % 4 by the scalar path,
    the rest by packets of 4 (the two paths differ in the last place). v: float32."""
    if not v.flags.c_contiguous:
        flat = np.ascontiguousarray(v)
        eigen_logistic_(flat, offset)
        v[...] = flat
        return
    flat = v.reshape(-1)
    n = flat.size
    head = min((-offset) % PACKET, n)
    end = head + (n - head) // PACKET * PACKET
    if head:
        _logistic_scalars(flat[:head])
    if end > head:
        _logistic_packets(flat[head:end])
    if end < n:
        _logistic_scalars(flat[end:])
