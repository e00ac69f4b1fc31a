"""Audio for streaming models: WAV files as mono float32 (stdlib `wave`, no soundfile),
resampling, fixed-size chunks with the samples before them as context (Silero VAD's input), and
speech segments from per-chunk probabilities."""
from __future__ import annotations

import wave

import numpy as np

SAMPLE_WIDTHS = {1: np.uint8, 2: np.int16, 4: np.int32}


def read_wav(path) -> tuple:
    """A PCM WAV file as (mono float32 samples in [-1, 1], sample rate)."""
    with wave.open(str(path), "rb") as f:
        width, channels, rate = f.getsampwidth(), f.getnchannels(), f.getframerate()
        data = f.readframes(f.getnframes())
    if width not in SAMPLE_WIDTHS:
        raise ValueError(f"{path}: {8 * width}-bit samples; 8, 16 or 32-bit PCM expected")
    x = np.frombuffer(data, SAMPLE_WIDTHS[width]).astype(np.float32)
    x = (x - 128) / 128 if width == 1 else x / float(2 ** (8 * width - 1))
    return x.reshape(-1, channels).mean(axis=1), rate


def write_wav(path, samples: np.ndarray, rate: int) -> None:
    """Mono float samples in [-1, 1] as a 16-bit PCM WAV file."""
    pcm = np.clip(np.round(np.asarray(samples, np.float64) * 32767), -32768, 32767)
    with wave.open(str(path), "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(rate)
        f.writeframes(pcm.astype("<i2").tobytes())


def resample(samples: np.ndarray, rate: int, new_rate: int) -> np.ndarray:
    """Linear-interpolation resampling (enough for 22.05/44.1/48 kHz speech to 16 kHz models:
    it low-passes nothing, so tones above the new Nyquist fold back)."""
    samples = np.asarray(samples, np.float32)
    if rate == new_rate:
        return samples
    n = int(round(len(samples) * new_rate / rate))
    t = np.arange(n, dtype=np.float64) * (rate / new_rate)
    return np.interp(t, np.arange(len(samples)), samples).astype(np.float32)


def chunks(samples: np.ndarray, size: int, context: int = 0,
           before: np.ndarray | None = None) -> np.ndarray:
    """The signal as (N, context + size) rows: chunk k is samples [k*size, (k+1)*size) preceded
    by the `context` samples before it: for the first chunk, the end of `before` (the stream's
    previous samples; zeros when None). The last chunk is zero-padded."""
    samples = np.asarray(samples, np.float32)
    n = -(-len(samples) // size) if len(samples) else 0
    padded = np.zeros(context + n * size, np.float32)
    padded[context:context + len(samples)] = samples
    if before is not None and context:
        tail = np.asarray(before, np.float32)[-context:]
        padded[context - len(tail):context] = tail
    index = np.arange(n)[:, None] * size + np.arange(context + size)[None, :]
    return padded[index]


def speech_segments(probs: np.ndarray, chunk_seconds: float, threshold: float = 0.5,
                    release: float | None = None, min_speech: float = 0.25,
                    min_silence: float = 0.1) -> list:
    """(start, end) seconds of speech from per-chunk speech probabilities, with hysteresis as
    Silero's own iterator: speech starts at a chunk >= threshold, ends after `min_silence`
    seconds below `release` (threshold - 0.15 by default); segments shorter than `min_speech`
    are dropped."""
    release = threshold - 0.15 if release is None else release
    segments, start, quiet_since = [], None, None
    for k, p in enumerate(np.asarray(probs, np.float64).reshape(-1)):
        t = k * chunk_seconds
        if start is None:
            if p >= threshold:
                start, quiet_since = t, None
        elif p < release:
            quiet_since = t if quiet_since is None else quiet_since
            if t + chunk_seconds - quiet_since >= min_silence:
                segments.append((start, quiet_since))
                start, quiet_since = None, None
        else:
            quiet_since = None
    if start is not None:
        segments.append((start, len(np.asarray(probs).reshape(-1)) * chunk_seconds))
    return [(a, b) for a, b in segments if b - a >= min_speech]
