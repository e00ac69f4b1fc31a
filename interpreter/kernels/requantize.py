"""Requantization, the hot path of conv-like integer kernels: integer accumulators (held exactly
in float arrays) to the output type, as TFLite's MultiplyByQuantizedMultiplier and clamp do.

`Requantizer` is the double-rounding arithmetic of 8-bit kernels (fixed_point.mbqm) reordered
into few in-place passes; `WideRequantizer` the single-rounding one of 16x8 kernels (mbqm64).
"""
from __future__ import annotations

import numpy as np

from .common import clip, clip_
from .common import raw as c_function
from .fixed_point import mbqm, mbqm64, reduced_multiplier

TINY = 1 << 11       # outputs up to this many requantize in float64 (exact; beyond, the float32
                     # path with its few redone outputs costs less: MobileNetV2 -0.1 ms)
SIGN_PASSES = 2 ** -7  # 2 delta from which negative sums get their own passes (see Requantizer)


ROW_VALUES = 1 << 16   # the most values in a row of per-channel vectors tiled along pixels
FLAT_VALUES = 1 << 12  # outputs up to this many: bound passes on vectors tiled over them all


def _row_pixels(tile: int, channels: int) -> int:
    """The pixels of a row of tiled per-channel vectors: `tile` (an output row), or its largest
    divisor that keeps the row within ROW_VALUES (a very wide output would tile vectors of
    millions of values at prepare)."""
    tile, cap = max(1, tile), max(1, ROW_VALUES // max(1, channels))
    if tile <= cap:
        return tile
    return next(d for d in range(cap, 0, -1) if tile % d == 0)


def exact_rounding(node) -> bool:
    """Whether a node's integer kernels must round exactly as TFLite's reference kernels: under
    OpResolverType.BUILTIN_REF (see interpreter.plan.Runtime.reference), and for a node prepared
    outside an interpreter."""
    runtime = getattr(node, "runtime", None)
    return runtime is None or bool(getattr(runtime, "reference", True))


class Requantizer:
    """Integer accumulators (held exactly in a float array, last axis = channels) -> output:
    clamp(MultiplyByQuantizedMultiplier(acc + bias, m_c, shift_c) + zero_point).

    Exact int64 path, reordered for few in-place passes: the bias folds into srdhm's rounding
    constant, (acc + bias) * m + 2^30 = acc * m + (bias * m + 2^30); the zero point folds into
    RoundingDivideByPOT's, ((y + half - [y < 0]) >> r) + zp = (y + half + (zp << r) - [y < 0]) >> r.

    The two roundings of TFLite collapse into one floor, since floor((floor(u) + k) / n) =
    floor((u + k) / n): for a = acc + bias, a right shift r and R = m 2^-(31 + r),
        result = floor(a R + zp + 1/2 + d - 2 d [a R < -d]),   d = 2^-(r + 1) (0 when r = 0)
    ([a R < -d] is exactly SRDHM's result being negative).

    Small outputs (`tiny`, at most TINY of them): float64 holds that sum exactly over the clamp
    range (every term is a multiple of 2^-(31 + r)), so one floor is the result.

    Fast path (float32, exact integer accumulators below 2^24): s = a R + zp + 1/2 + d + shift
    (plus 128 for int8, so that a truncating cast to uint8 floors it) is within `error` of that
    value shifted, bounded in prepare over the clamp range only (outside it the monotonic steps
    clip whatever the rounding); floor(s) is the result unless frac(s) < width = shift + error.
    Those elements are found as floor(s) != floor(s - width) (a second truncating cast) and
    redone exactly; `-2 d [..]` either gets three passes of its own (wide band) or widens the
    flagged band (see _prepare_fast). The passes: multiply, add (per-channel vectors tiled to
    rows of `tile` pixels, long inner loops), clip, cast, subtract, cast, compare, xor. Exact
    while the accumulators fit int32, as in TFLite (overflow there is undefined).

    `bias_in_acc`: the caller's accumulators already hold the bias (a ones column in the GEMM).
    `scaled_error`: the caller multiplies by `real` itself (folded into float weights), within
    that bound of acc * real; see `scaled()` and `finish()`."""

    def __init__(self, multiplier, shift, zero_point: int, lo: int, hi: int, shape: tuple,
                 bias=None, acc_bound=None, tile: int = 1, bias_in_acc: bool = False,
                 scaled_error=None, exact: bool = True):
        multiplier = np.asarray(multiplier, np.int64)
        shift = np.asarray(shift, np.int64)
        channels = shape[-1]
        multiplier = np.broadcast_to(multiplier, (channels,)).copy()
        shift = np.broadcast_to(shift, (channels,)).copy()
        left = np.maximum(shift, 0)
        right = np.maximum(-shift, 0)
        self.multiplier, self.shift, self.zero_point = multiplier, shift, int(zero_point)
        self.channels = channels
        self.bias = np.zeros(channels, np.int64) if bias is None else \
            np.broadcast_to(np.asarray(bias, np.int64), (channels,)).copy()
        # The bias the arithmetic still has to add (none when the accumulators hold it).
        self.add_bias = np.zeros(channels, np.int64) if bias_in_acc else self.bias
        self.bias_in_acc = bool(bias_in_acc)
        self.m = multiplier << left
        self.c1 = self.add_bias * self.m + (1 << 30)
        half = np.where(right > 0, np.int64(1) << np.maximum(right - 1, 0), 0)
        self.c2 = half + (np.int64(zero_point) << right)
        self.right = right
        self.all_right = bool(np.all(right > 0))
        self.some_right = bool(np.any(right > 0)) and not self.all_right
        self.lo, self.hi = int(lo), int(hi)
        self.rounds_exactly = bool(exact)
        size = int(np.prod(shape))
        self.rmask = (right > 0).astype(np.int64)
        self.tile = _row_pixels(int(tile), channels)
        self.signed = self.sign_copy = False
        self.fast = (acc_bound is not None or scaled_error is not None) and \
            self._prepare_fast(scaled_error)
        # Small outputs: exact in float64 (fewer numpy calls, nothing to redo).
        exact64 = (acc_bound is not None or scaled_error is not None) and self._prepare_tiny()
        self.tiny = exact64 and acc_bound is not None and size <= TINY
        self.tiny_bounds = np.float64(self.lo), np.float64(self.hi)
        # The work buffers __call__ takes (see Scratch): shapes and dtypes.
        if self.tiny:
            self.specs = [((size,), np.float64), ((size,), np.bool_), ((size,), np.float64)]
        elif self.fast:
            self.specs = [((size,), np.float32), ((size,), np.uint8),
                          ((-(-size // 64) * 64,), np.bool_)] + \
                ([((size,), np.float32)] if self.signed else [])
        else:
            self.specs = [((size,), np.int64), ((size,), np.bool_)] + \
                ([((size,), np.int64)] if self.some_right else [])

    def _prepare_fast(self, scaled_error) -> bool:
        # s holds the result + `lift` >= 0: a truncating cast to uint8 floors it.
        lift = 128 if self.lo < 0 else 0
        if np.any(self.shift > 0) or np.any(self.multiplier <= 0) or \
                self.lo + lift < 0 or self.hi + lift > 255:
            return False
        real = self.multiplier.astype(np.float64) * np.exp2(self.shift.astype(np.float64) - 31)
        delta = np.where(self.right > 0, np.exp2(-(self.right.astype(np.float64) + 1)), 0.0)
        base = self.zero_point + lift + 0.5 + delta
        if not self.bias_in_acc:
            base = base + self.bias.astype(np.float64) * real
        # Outputs whose exact value lies outside [lo - 1, hi + 2] (lifted) are clipped whatever
        # the rounding (consecutive values are R < 1 apart and every step is monotonic): only
        # those inside need the error bound, and there |a R| <= `reach`.
        t_max = max(abs(self.lo + lift), abs(self.hi + lift)) + 2.0
        reach = np.maximum(np.abs(self.lo + lift - 1 - base), np.abs(self.hi + lift + 2 - base))
        if scaled_error is None:
            # |fl(a fl(R)) - a R| <= 2^-23 |a R| (1 + 2^-24).
            product = 2.0 ** -23 * (1 + 2.0 ** -20) * reach
        else:
            product = np.broadcast_to(np.asarray(scaled_error, np.float64), real.shape)
        # Negative `a` round with -2 delta. When they can land inside the clamp range, either
        # s takes that too, as s - 2 delta [s < zp + lift + 1/2] (a R < -delta exactly when
        # SRDHM's result is negative; near that threshold both floors agree), three passes
        # and one more rounding; or the 2 delta band above each integer is flagged and redone,
        # which costs less while the band is narrow (right shifts of 7 and more).
        band = 2 * float(delta.max()) if self.lo < self.zero_point else 0.0
        self.signed = band > SIGN_PASSES
        # s against a R + base + shift: the products' error and the sums' roundings; the
        # offset's own rounding is part of `shift` (exact: the float32 offset minus base).
        error = product + (1 + self.signed) * 2.0 ** -24 * (1 + 2.0 ** -20) * (t_max + 1)
        offset = (base + error).astype(np.float32)
        low = offset.astype(np.float64) - base < error
        offset[low] = np.nextafter(offset[low], np.float32(np.inf))
        shift = offset.astype(np.float64) - base
        if np.any(shift < error):
            return False
        # s - shift - error <= a R + base <= s: floor(s) is right unless frac(s) is below
        # shift + error (+ the band).
        width = float(np.max(shift + error)) + (0.0 if self.signed else band)
        # floor(s) != floor(fl(s - w)) flags every fraction below `width`: w has room for
        # the rounding of s - w (s < 256: a grid of 2^-16 at most).
        width += 2.0 ** -16
        if width > 1 / 8 or (self.signed and 2 * float(delta.max()) + width > 1 / 2):
            return False
        if self.signed:
            self.sign_vector = (2 * delta).astype(np.float32)
            self.sign_rows = np.tile(self.sign_vector, self.tile)
            self.sign_below = np.float32(self.zero_point + lift + 0.5)
        # Not `exact`: the -2 d of negative sums in three passes, not four, and none of them
        # a bool -> float cast: s' + copysign(d, s' - (below - d)) with s' = s - d (the -d
        # folded into the offset); the same floor but where s' + d is within a rounding of
        # `below`, as the flagged band is (within 1 of the reference, as LiteRT's kernels).
        self.sign_copy = self.signed and not self.rounds_exactly
        if self.sign_copy:
            offset = (offset.astype(np.float64) - delta).astype(np.float32)
            self.copysign_vector = delta.astype(np.float32)
            self.copysign_rows = np.tile(self.copysign_vector, self.tile)
            threshold = (self.zero_point + lift + 0.5 - delta).astype(np.float32)
            self.threshold_vector = threshold
            self.threshold_rows = np.tile(threshold, self.tile)
        self.real = real.astype(np.float32)
        self.offset = offset
        self.real_rows = np.tile(self.real, self.tile)
        self.offset_rows = np.tile(self.offset, self.tile)
        self.lift = lift
        self.bounds = np.float32(self.lo + lift + 0.5), np.float32(self.hi + lift + 0.5)
        self.width = np.nextafter(np.float32(width), np.float32(1))
        # _redo: TFLite's arithmetic as one floor shift per element (see the class doc):
        # t = acc M + bias M + 2^30 (< 0 exactly when SRDHM's result is), then
        # (t + half - [t < 0] neg) >> (31 + r) + zero point, half = 2^(30 + r) when r > 0;
        # half and the zero point fold into one constant. Negative t only matter while they
        # can land above lo (lo < zp); otherwise both roundings clip to lo.
        total = 31 + self.right
        half = np.where(self.right > 0, np.int64(1) << (30 + self.right), 0)
        self.redo_m = self.multiplier.copy()
        self.redo_c = self.c1 + half + (np.int64(self.zero_point) << total)
        self.redo_total = total
        self.redo_signed = self.lo < self.zero_point and bool(np.any(self.right > 0))
        self.redo_below = half + (np.int64(self.zero_point) << total)   # t < 0, shifted
        self.redo_neg = np.where(self.right > 0, np.int64(1) << 31, 0)
        return True

    def _prepare_tiny(self) -> bool:
        """float64 holds a R + zp + 1/2 + d - 2 d [a < 0] exactly (every term a multiple of
        2^-(31 + r)) for every output inside the clamp range, so one floor gives TFLite's
        result: no near-edge elements to redo."""
        if np.any(self.shift > 0) or np.any(self.multiplier <= 0):
            return False
        real = self.multiplier.astype(np.float64) * np.exp2(self.shift.astype(np.float64) - 31)
        delta = np.where(self.right > 0, np.exp2(-(self.right.astype(np.float64) + 1)), 0.0)
        base = self.zero_point + 0.5 + delta + self.add_bias.astype(np.float64) * real
        t_max = max(abs(self.lo), abs(self.hi)) + 2.0
        units = np.exp2(31.0 + self.right.astype(np.float64))          # grid steps per unit
        if np.any((t_max + np.abs(base) + 1) * units >= 2.0 ** 52) or \
                np.any(np.abs(self.add_bias).astype(np.float64) * self.multiplier >= 2.0 ** 52):
            return False
        rows = lambda v: np.tile(np.asarray(v, np.float64), self.tile)    # noqa: E731
        self.tiny_rows = (rows(real), rows(base), rows(-self.add_bias), rows(2 * delta))
        self.tiny_vectors = (real, base, (-self.add_bias).astype(np.float64), 2 * delta)
        # Negative `a` (rounded with -2d) matter unless they all clamp to lo.
        self.tiny_negative = self.lo < self.zero_point
        return True

    def exact(self, acc, channel=slice(None)) -> np.ndarray:
        """TFLite's arithmetic, step by step, on integer accumulators of the given channels
        (by default, `acc`'s last axis holds every channel); the bias is added unless the
        accumulators hold it."""
        acc = np.asarray(acc, np.int64) + self.add_bias[channel]
        y = mbqm(acc, self.multiplier[channel], self.shift[channel]) + self.zero_point
        return np.clip(y, self.lo, self.hi)

    def _redo(self, acc: np.ndarray, channel: np.ndarray) -> np.ndarray:
        """`exact` in few numpy calls (fast path only): integer accumulators of channels."""
        t = acc.astype(np.int64)
        t *= self.redo_m[channel]
        t += self.redo_c[channel]
        if self.redo_signed:
            t -= (t < self.redo_below[channel]) * self.redo_neg[channel]
        t >>= self.redo_total[channel]
        clip_(t, self.lo, self.hi)
        return t

    def work(self) -> list:
        """Work buffers of its own, for callers without a Scratch."""
        return [np.empty(shape, dtype) for shape, dtype in self.specs]

    def _rows(self, n: int):
        """The 2-D shape the per-channel vectors broadcast over, and those vectors."""
        row = self.tile * self.channels
        if n % row == 0:
            return (n // row, row), self.real_rows, self.offset_rows
        return (n // self.channels, self.channels), self.real, self.offset

    def __call__(self, acc: np.ndarray, out: np.ndarray, work: list, exact_acc=None) -> None:
        """acc: (p, channels) exact integers as float32/float64, at most `shape`'s size;
        out: the contiguous (p, channels) output; work: buffers as `specs` says. With
        `exact_acc(flat indices) -> int64 accumulators` the fast path overwrites `acc` (a
        contiguous float32 array) and asks it for the few it redoes; otherwise `acc` is kept."""
        n = acc.size
        if self.tiny:
            row = self.tile * self.channels
            shape, (real, base, limit, twice) = \
                ((n // row, row), self.tiny_rows) if n % row == 0 else \
                ((n // self.channels, self.channels), self.tiny_vectors)
            a = acc.reshape(shape)
            v = work[0][:n].reshape(shape)
            np.multiply(a, real, out=v)
            np.add(v, base, out=v)
            if self.tiny_negative:      # (a `where=` subtract is 4x slower)
                negative = work[1][:n].reshape(shape)
                adjust = work[2][:n].reshape(shape)
                np.less(a, limit, out=negative)
                np.multiply(negative, twice, out=adjust)
                np.subtract(v, adjust, out=v)
            np.floor(v, out=v)
            clip(v, *self.tiny_bounds, out=out.reshape(shape), casting="unsafe")
            return
        if self.fast:
            shape, real, offset = self._rows(n)
            if exact_acc is None:
                s = work[0][:n]
                np.multiply(acc.reshape(shape), real, out=s.reshape(shape))
                exact_acc = acc.reshape(-1).__getitem__
            else:
                s = acc.reshape(-1)
                np.multiply(s.reshape(shape), real, out=s.reshape(shape))
            s2 = s.reshape(shape)
            np.add(s2, offset, out=s2)
            self._finish(s, out, work, exact_acc)
            return
        a = work[0][:n].reshape(acc.shape)
        np.copyto(a, acc, casting="unsafe")
        np.multiply(a, self.m, out=a)
        np.add(a, self.c1, out=a)
        if self.all_right or self.some_right:
            neg = work[1][:n].reshape(acc.shape)
            np.less(a, 0, out=neg)
            if self.some_right:
                negi = work[2][:n].reshape(acc.shape)
                np.multiply(neg, self.rmask, out=negi)
                neg = negi
        np.right_shift(a, 31, out=a)
        np.add(a, self.c2, out=a)
        if self.all_right or self.some_right:
            np.subtract(a, neg, out=a)
        np.right_shift(a, self.right, out=a)
        clip_(a, self.lo, self.hi)
        np.copyto(out, a, casting="unsafe")

    def scaled(self, products: np.ndarray, out: np.ndarray, work: list, exact_acc) -> None:
        """products: contiguous float32 (p, channels) approximations of acc * real (within
        the `scaled_error` given to the constructor; overwritten); exact_acc(flat indices) ->
        the exact int64 accumulators there (without bias), for the few near a rounding edge."""
        n = products.size
        if not self.fast:
            flat = out.reshape(-1)
            every = np.arange(n)
            flat[:] = self.exact(exact_acc(every), every % self.channels)
            return
        shape, _, offset = self._rows(n)
        s = products.reshape(-1)
        np.add(s.reshape(shape), offset, out=s.reshape(shape))
        self._finish(s, out, work, exact_acc)

    def finish(self, s: np.ndarray, out: np.ndarray, work: list, exact_acc) -> None:
        """s: contiguous float32 (p, channels) approximations of acc * real + `offset` (the
        caller's float weights carry both; within the `scaled_error` given; overwritten);
        exact_acc as for `scaled`."""
        self._finish(s.reshape(-1), out, work, exact_acc)

    def bind_finish(self, s: np.ndarray, out: np.ndarray, work: list, add_offset: bool):
        """`scaled(s, out, work, _)` (add_offset) or `finish(s, out, work, _)` on fixed arrays:
        a function of no arguments, with its reshapes, 0-d bounds and constants made once
        (plan.bind_step); the same passes, so the same bits. Not `exact` fast path only (the
        exact one redoes elements of the caller's arrays): None otherwise."""
        if not self.fast or self.rounds_exactly:
            return None
        n = s.size
        shape, _, offset = self._rows(n)
        s2 = s.reshape(shape)
        s1 = s.reshape(-1)
        raw = out.reshape(-1).view(np.uint8)
        lo, hi = (np.array(b, np.float32) for b in self.bounds)
        lift = np.array(self.lift, np.uint8) if self.lift else None
        signed = self.signed
        if signed:   # (sign_copy: not `exact`, which bound runs are)
            rows = shape[1] != self.channels
            half = self.copysign_rows if rows else self.copysign_vector
            threshold = self.threshold_rows if rows else self.threshold_vector
            adjust = work[3][:n].reshape(shape)
        if n <= FLAT_VALUES:
            # Small outputs: the per-channel vectors tiled over the whole output, every pass
            # on equal 1-d shapes (a broadcast costs numpy ~0.5 µs a call more than none).
            whole = n // self.channels
            s2, offset = s1, np.tile(self.offset, whole)
            if signed:
                half, threshold = np.tile(self.copysign_vector, whole), \
                    np.tile(self.threshold_vector, whole)
                adjust = work[3][:n]

        # (numpy's functions looked up on each call, as tests/interpreter/test_quantized_passes.py
        # counts them; copyto's C function, one frame less)
        copyto = c_function(np.copyto)

        def run():
            if add_offset:
                np.add(s2, offset, s2)
            if signed:
                np.subtract(s2, threshold, adjust)
                np.copysign(half, adjust, adjust)
                np.add(s2, adjust, s2)
            clip(s1, lo, hi, s1)        # in place, then the cast: cheaper than clip's cast
            copyto(raw, s1, casting="unsafe")
            if lift is not None:
                np.bitwise_xor(raw, lift, raw)
        # Its three passes' arrays, for a caller that runs them inline (a frame less):
        # clip(s, lo, hi, s), copyto(raw, s, casting="unsafe"), bitwise_xor(raw, lift, raw).
        run.passes = None if add_offset or signed or lift is None else (s1, lo, hi, raw, lift)
        return run

    def _finish(self, s, out, work, exact_acc) -> None:
        """out = floor(clip(s)) - lift; the elements whose fraction is below `width` (their
        floor moves when `width` is subtracted) are redone exactly.

        Not `exact` (LiteRT's optimized kernels' contract: at most 1 from the reference): the
        flagged elements keep floor(s), one more than TFLite's result or equal: s exceeds the
        exact sum by less than `width` (< 1/8, the -2 d band included when it has no passes
        of its own). Few elements: a fraction `width` of those inside the clamp range."""
        n = s.size
        below = work[1][:n]
        flags = work[2]
        if self.sign_copy:
            shape, _, _ = self._rows(n)
            s2, adjust = s.reshape(shape), work[3][:n].reshape(shape)
            rows = shape[1] != self.channels
            np.subtract(s2, self.threshold_rows if rows else self.threshold_vector, out=adjust)
            np.copysign(self.copysign_rows if rows else self.copysign_vector, adjust,
                        out=adjust)
            np.add(s2, adjust, out=s2)
        elif self.signed:
            shape, _, _ = self._rows(n)
            twice = self.sign_rows if shape[1] != self.channels else self.sign_vector
            s2, negative, adjust = s.reshape(shape), flags[:n].reshape(shape), \
                work[3][:n].reshape(shape)
            np.less(s2, self.sign_below, out=negative)
            np.copyto(adjust, negative)          # (a bool-float multiply is 3x slower)
            np.multiply(adjust, twice, out=adjust)
            np.subtract(s2, adjust, out=s2)
        flat = out.reshape(-1)
        raw = flat.view(np.uint8)
        if not self.rounds_exactly:           # clip and cast in one call (s is not read again)
            clip(s, *self.bounds, out=raw, casting="unsafe")
            if self.lift:
                np.bitwise_xor(raw, np.uint8(self.lift), out=raw)
            return
        clip_(s, *self.bounds)
        np.copyto(raw, s, casting="unsafe")
        np.subtract(s, self.width, out=s)
        np.copyto(below, s, casting="unsafe")
        near = _differing(raw, below, flags)
        if self.lift:
            np.bitwise_xor(raw, np.uint8(self.lift), out=raw)
        if near.size:
            flat[near] = self._redo(exact_acc(near), near % self.channels)


EIGHT = np.arange(8)
WHOLE_WORDS = 64    # the most 8-byte words whose every byte is redone rather than found
BY_WORDS = 1 << 15  # elements from which the flags are found through 8-byte words


def _differing(raw: np.ndarray, below: np.ndarray, words: np.ndarray) -> np.ndarray:
    """Flat indices where two uint8 arrays may differ: compared as 8-byte words (an eighth of
    the flags to scan); few differing words give all their 8 indices (redoing an equal element
    is harmless), more give exactly the differing bytes. `words`: a bool work buffer."""
    n = raw.size
    if n < BY_WORDS:
        flags = words[:n]
        np.not_equal(raw, below, out=flags)
        return flags.nonzero()[0]
    n8 = n & ~7
    a, b = raw[:n8].view(np.uint64), below[:n8].view(np.uint64)
    flags = words[:n8 >> 3]
    np.not_equal(a, b, out=flags)
    wi = flags.nonzero()[0]
    if wi.size <= WHOLE_WORDS:
        near = (wi[:, None] * 8 + EIGHT).reshape(-1)
    else:
        j = np.flatnonzero(np.take(a, wi).view(np.uint8) != np.take(b, wi).view(np.uint8))
        near = np.take(wi, j >> 3) * 8 + (j & 7)
    if n8 < n:
        near = np.concatenate([near, np.flatnonzero(raw[n8:] != below[n8:n]) + n8])
    return near


class WideRequantizer:
    """Integer accumulators (exact integers in a float64 array, last axis = channels) -> output:
    clamp(MultiplyByQuantizedMultiplier(int64 acc + bias, m_c, shift_c)) as the 16x8 kernels.

    That rounding is single: floor((acc + bias) * r_c / 2^t_c + 1/2) with 16-bit r_c. While
    |acc + bias| * r_c < 2^52 every step is exact in float64 (scaling by 2^-t is exact), so
    it runs as one multiply, one add, a clip and a floor; otherwise in int64 as TFLite does."""

    def __init__(self, multiplier, shift, lo: int, hi: int, channels: int, bias=None,
                 acc_bound=None, zero_point: int = 0):
        shift = np.broadcast_to(np.asarray(shift, np.int64), (channels,)).copy()
        if np.any(shift > 14):
            raise ValueError(f"output multiplier exponent {int(shift.max())} is too large")
        self.multiplier = np.broadcast_to(np.asarray(multiplier, np.int64), (channels,)).copy()
        self.shift = shift
        self.reduced = reduced_multiplier(self.multiplier)
        self.total = 15 - shift
        self.bias = np.zeros(channels, np.int64) if bias is None else \
            np.broadcast_to(np.asarray(bias, np.int64), (channels,)).copy()
        self.lo, self.hi, self.zero_point = int(lo), int(hi), int(zero_point)
        self.scale = self.reduced.astype(np.float64) * np.exp2(-self.total.astype(np.float64))
        self.offset = self.bias.astype(np.float64) * self.scale + 0.5 + self.zero_point
        self.fast = False
        if acc_bound is not None:
            bound = np.asarray(acc_bound, np.float64) + np.abs(self.bias).astype(np.float64)
            self.fast = bool(np.all(bound * self.reduced < 2.0 ** 52)
                             and np.all(bound * self.scale + 1 < 2.0 ** 31)
                             and np.all(np.abs(self.bias) < 2 ** 52))

    def exact(self, acc) -> np.ndarray:
        """TFLite's arithmetic on integer accumulators (every channel on the last axis)."""
        y = mbqm64(np.asarray(acc, np.int64) + self.bias, self.multiplier, self.shift)
        return np.clip(y + self.zero_point, self.lo, self.hi)

    def __call__(self, acc: np.ndarray, out: np.ndarray) -> None:
        """acc: float64 (..., channels), overwritten; out: the integer output, same shape."""
        if self.fast:
            np.multiply(acc, self.scale, out=acc)
            np.add(acc, self.offset, out=acc)
            clip_(acc, self.lo, self.hi)
            np.floor(acc, out=out, casting="unsafe")
        else:
            np.copyto(out, self.exact(acc), casting="unsafe")
