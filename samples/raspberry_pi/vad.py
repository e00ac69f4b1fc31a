"""Voice activity detection with Silero VAD: speech segments from a WAV file or the microphone
(sounddevice), 32 ms chunks at 16 kHz, eight chunks an invoke, the LSTM state carried over.

    python vad.py --input speech.wav        # or no --input: the microphone"""
from __future__ import annotations

import json
import sys

import numpy as np

import common
from edgelite.tasks import audio

RATE, CHUNK, CONTEXT = 16000, 512, 64


class Detector:
    """The model with its recurrent state: feed(samples) -> each chunk's speech probability."""

    def __init__(self, it):
        self.it = it
        details = {d["name"]: d for d in it.get_input_details()}
        self.input, self.h, self.c = details["input"], details["h"], details["c"]
        self.batch = int(self.input["shape"][0])
        outputs = {d["name"]: d["index"] for d in it.get_output_details()}
        self.probs, self.hn, self.cn = outputs["speech_probs"], outputs["hn"], outputs["cn"]
        self.state = [np.zeros(self.h["shape"], np.float32), np.zeros(self.c["shape"], np.float32)]
        self.tail = np.zeros(CONTEXT, np.float32)   # the last samples before the next chunk
        self.pending = np.zeros(0, np.float32)

    def feed(self, samples: np.ndarray) -> np.ndarray:
        """Probabilities of the whole chunks that `samples` complete (buffered until a full
        invoke's worth, `batch` chunks)."""
        self.pending = np.concatenate([self.pending, samples.astype(np.float32)])
        out = []
        step = self.batch * CHUNK
        while len(self.pending) >= step:
            block, self.pending = self.pending[:step], self.pending[step:]
            out.append(self._invoke(block))
        return np.concatenate(out) if out else np.zeros(0, np.float32)

    def flush(self) -> np.ndarray:
        """The rest, zero-padded to a full invoke; only the real chunks' probabilities."""
        n = -(-len(self.pending) // CHUNK)
        if not n:
            return np.zeros(0, np.float32)
        block = np.zeros(self.batch * CHUNK, np.float32)
        block[:len(self.pending)] = self.pending
        self.pending = np.zeros(0, np.float32)
        return self._invoke(block)[:n]

    def _invoke(self, block: np.ndarray) -> np.ndarray:
        x = audio.chunks(block, CHUNK, CONTEXT, before=self.tail)
        self.tail = block[-CONTEXT:]
        it = self.it
        it.set_tensor(self.input["index"], x)
        it.set_tensor(self.h["index"], self.state[0])
        it.set_tensor(self.c["index"], self.state[1])
        it.invoke()
        self.state = [it.get_tensor(self.hn).copy(), it.get_tensor(self.cn).copy()]
        return it.get_tensor(self.probs).copy().reshape(-1)


def wav_blocks(path, seconds: float):
    samples, rate = audio.read_wav(path)
    samples = audio.resample(samples, rate, RATE)
    step = int(seconds * RATE)
    for k in range(0, len(samples), step):
        yield samples[k:k + step]


def microphone_blocks(seconds: float, limit: int):
    try:
        import sounddevice
    except ImportError:
        raise SystemExit("no microphone: pip install sounddevice, or pass --input FILE.wav") \
            from None
    with sounddevice.InputStream(samplerate=RATE, channels=1, dtype="float32") as stream:
        k = 0
        while not limit or k < limit:
            block, _ = stream.read(int(seconds * RATE))
            yield block[:, 0]
            k += 1


def main(argv=None) -> int:
    p = common.parser(__doc__.splitlines()[0], "silero_vad.tflite")
    p.add_argument("--threshold", type=float, default=0.5, help="speech probability")
    p.add_argument("--min-speech", type=float, default=0.25, help="shortest segment (s)")
    p.add_argument("--min-silence", type=float, default=0.1, help="silence that ends one (s)")
    args = p.parse_args(argv)
    detector = Detector(common.make_interpreter(args))
    seconds = detector.batch * CHUNK / RATE
    blocks = wav_blocks(args.input, seconds) if args.input else \
        microphone_blocks(seconds, args.max_frames)
    stages, probs = common.Stages(), []
    try:
        for k, block in enumerate(blocks):
            with stages("inference"):
                p_block = detector.feed(block)
            probs.append(p_block)
            times = stages.frame_done()
            if args.json:
                print(json.dumps({"block": k, "probs": p_block.tolist(), "ms": times}))
            elif p_block.size:
                bar = "".join("#" if v >= args.threshold else "." for v in p_block)
                print(f"{k * seconds:7.2f} s  {bar}  [{times.get('inference', 0):.1f} ms]",
                      flush=True)
    except KeyboardInterrupt:
        pass
    probs.append(detector.flush())
    probs = np.concatenate(probs)
    segments = audio.speech_segments(probs, CHUNK / RATE, args.threshold,
                                     min_speech=args.min_speech, min_silence=args.min_silence)
    if args.json:
        print(json.dumps({"segments": segments, "chunks": len(probs)}))
    for start, end in segments:
        print(f"speech {start:.2f} - {end:.2f} s", file=sys.stderr if args.json else sys.stdout)
    print(f"{len(probs)} chunks ({len(probs) * CHUNK / RATE:.2f} s of audio), "
          f"{stages.fps * seconds:.1f}x real time", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
