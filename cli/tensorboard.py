"""TensorBoard scalars without TensorFlow: event files written by hand (a TFRecord of `Event`
protocol buffers, encoded here: only scalars need writing, and the runtime install has no
protobuf). `edgelite train --logdir DIR` writes loss per step, learning rate and accuracy per
epoch; the Python training loop takes the same writer as its step callback:

    from edgelite.cli.tensorboard import SummaryWriter
    with SummaryWriter("runs/a") as tb:
        fit(interpreter, x, y, epochs=3, callback=tb.step_callback("loss"))
        tb.add_scalar("accuracy", evaluate(interpreter, x_val, y_val), step=3)

The format: each record is `uint64 length, uint32 masked crc32c(length), data, uint32 masked
crc32c(data)` (little-endian), the first event names the file version "brain.Event:2", and a
scalar is `Event{wall_time=1, step=2, summary=5 {value=1 {tag=1, simple_value=2}}}`.
"""
from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path

_CRC_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1   # Castagnoli, reflected
    _CRC_TABLE.append(_c)
_COUNTER = [0]   # event files made by this process (several writers in one second)


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data: bytes) -> bytes:
    """One TFRecord around `data`."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", _masked(length)) + data + struct.pack("<I", _masked(data))


# -- protocol buffer encoding (the fields an Event of scalars has) --------------------------------

def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1          # negative int64 as protobuf does: ten bytes
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _bytes_field(field: int, data: bytes) -> bytes:
    return _key(field, 2) + _varint(len(data)) + data


def event(wall_time: float, step: int = 0, file_version: str | None = None,
          scalars: dict | None = None) -> bytes:
    """An encoded `tensorflow.Event`."""
    out = _key(1, 1) + struct.pack("<d", wall_time)
    if step:
        out += _key(2, 0) + _varint(int(step))
    if file_version is not None:
        out += _bytes_field(3, file_version.encode())
    if scalars:
        values = b"".join(_bytes_field(1, _bytes_field(1, tag.encode()) + _key(2, 5)
                                       + struct.pack("<f", float(v)))
                          for tag, v in scalars.items())
        out += _bytes_field(5, values)
    return out


class SummaryWriter:
    """Scalars into a new event file in `logdir` (made if missing), flushed after each write,
    so TensorBoard shows a run while it trains."""

    def __init__(self, logdir, filename_suffix: str = ""):
        self.logdir = Path(logdir)
        self.logdir.mkdir(parents=True, exist_ok=True)
        _COUNTER[0] += 1
        name = (f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}."
                f"{os.getpid()}.{_COUNTER[0]}{filename_suffix}")
        self.path = self.logdir / name
        self._file = open(self.path, "wb")
        self._write(event(time.time(), file_version="brain.Event:2"))

    def _write(self, data: bytes) -> None:
        self._file.write(record(data))
        self._file.flush()

    def add_scalar(self, tag: str, value: float, step: int, wall_time: float | None = None):
        self.add_scalars({tag: value}, step, wall_time)

    def add_scalars(self, values: dict, step: int, wall_time: float | None = None) -> None:
        """Several tags at one step, in one event."""
        self._write(event(time.time() if wall_time is None else wall_time, step,
                          scalars=values))

    def step_callback(self, tag: str = "loss", then=None):
        """A callback for `edgelite.interpreter.training.fit(..., callback=)`: each step's loss
        at a global step that runs on across epochs; `then(epoch, step, loss)` is called after
        it (e.g. a progress display)."""
        steps = [0]

        def callback(epoch: int, step: int, loss: float) -> None:
            steps[0] += 1
            self.add_scalar(tag, loss, steps[0])
            if then is not None:
                then(epoch, step, loss)

        callback.global_step = lambda: steps[0]
        return callback

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> "SummaryWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
