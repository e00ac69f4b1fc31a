"""Images as numpy arrays (H, W, C) uint8 RGB: PNG files without Pillow, resizing, letterboxing,
a model's input made from a frame, and boxes and masks drawn into frames."""
from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# PNG colour type -> channels (palette images are expanded to RGB)
PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def read_png(path) -> np.ndarray:
    """An 8-bit, non-interlaced PNG as uint8 (H, W, C): C is 1 (grey), 2, 3 (RGB) or 4 (RGBA);
    palette images come back RGB(A)."""
    data = Path(path).read_bytes()
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError(f"{path}: not a PNG file")
    pos, chunks, idat = len(PNG_SIGNATURE), {}, []
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IDAT":
            idat.append(body)
        else:
            chunks.setdefault(kind, body)
        pos += 12 + length
        if kind == b"IEND":
            break
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    if depth != 8 or interlace or colour not in PNG_CHANNELS:
        raise ValueError(f"{path}: only 8-bit non-interlaced PNGs are read without Pillow "
                         f"(this one: depth {depth}, colour type {colour}, interlace {interlace})")
    channels = PNG_CHANNELS[colour]
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), np.uint8)
    rows = raw.reshape(height, 1 + width * channels)
    image = _unfilter(rows[:, 0], rows[:, 1:].astype(np.int32), channels)
    image = image.reshape(height, width, channels)
    if colour == 3:
        palette = np.frombuffer(chunks[b"PLTE"], np.uint8).reshape(-1, 3)
        if b"tRNS" in chunks:
            alpha = np.full(len(palette), 255, np.uint8)
            trns = np.frombuffer(chunks[b"tRNS"], np.uint8)
            alpha[:len(trns)] = trns
            palette = np.concatenate([palette, alpha[:, None]], axis=1)
        image = palette[image[..., 0]]
    return image


def _unfilter(filters: np.ndarray, rows: np.ndarray, bpp: int) -> np.ndarray:
    """PNG's five row filters undone (rows: int32 (H, W*C)); uint8 out."""
    out = np.zeros_like(rows)
    previous = np.zeros(rows.shape[1], np.int32)
    for y, kind in enumerate(filters):
        row = rows[y]
        if kind == 0:
            line = row
        elif kind == 1:      # Sub: a running sum per channel
            line = np.cumsum(row.reshape(-1, bpp), axis=0).reshape(-1) & 255
        elif kind == 2:      # Up
            line = (row + previous) & 255
        elif kind in (3, 4):  # Average, Paeth: each byte needs the one bpp before it
            line = np.array(_sequential(kind, row.tolist(), previous.tolist(), bpp), np.int32)
        else:
            raise ValueError(f"PNG row {y}: unknown filter type {kind}")
        out[y] = line
        previous = line
    return out.astype(np.uint8)


def _sequential(kind: int, row: list, up: list, bpp: int) -> list:
    """The Average (3) or Paeth (4) filter undone on one row, byte by byte."""
    out = row[:]
    for i in range(len(row)):
        a = out[i - bpp] if i >= bpp else 0
        b = up[i]
        if kind == 3:
            out[i] = (row[i] + ((a + b) >> 1)) & 255
            continue
        c = up[i - bpp] if i >= bpp else 0
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        out[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    return out


def write_png(path, image: np.ndarray) -> None:
    """uint8 (H, W), (H, W, 1), (H, W, 3) or (H, W, 4) as a PNG (no filtering)."""
    image = np.asarray(image)
    if image.dtype != np.uint8:
        raise ValueError(f"write_png takes uint8 images, not {image.dtype}")
    if image.ndim == 2:
        image = image[..., None]
    height, width, channels = image.shape
    colour = {1: 0, 2: 4, 3: 2, 4: 6}[channels]
    rows = np.concatenate([np.zeros((height, 1), np.uint8), image.reshape(height, -1)], axis=1)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0)
    Path(path).write_bytes(PNG_SIGNATURE + chunk(b"IHDR", header)
                           + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)) + chunk(b"IEND", b""))


def load_image(path) -> np.ndarray:
    """An image file as uint8 RGB (H, W, 3), through Pillow where it is installed; without it,
    8-bit PNGs are still read (read_png)."""
    path = Path(path)
    try:
        from PIL import Image
    except ImportError:
        return to_rgb(read_png(path))
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def to_rgb(image: np.ndarray) -> np.ndarray:
    """Grey, grey+alpha, RGB or RGBA uint8 as RGB (alpha dropped)."""
    if image.ndim == 2:
        image = image[..., None]
    if image.shape[2] in (1, 2):
        return np.repeat(image[..., :1], 3, axis=2)
    return image[..., :3]


def resize(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Bilinear resize with pixel centres aligned (OpenCV's INTER_LINEAR, no antialiasing) of an
    (H, W) or (H, W, C) array; float32 out."""
    image = np.asarray(image, np.float32)
    squeeze = image.ndim == 2
    if squeeze:
        image = image[..., None]
    y0, y1, wy = _taps(image.shape[0], height)
    x0, x1, wx = _taps(image.shape[1], width)
    rows = image[y0] * (1 - wy)[:, None, None] + image[y1] * wy[:, None, None]
    out = rows[:, x0] * (1 - wx)[None, :, None] + rows[:, x1] * wx[None, :, None]
    return out[..., 0] if squeeze else out


def _taps(size_in: int, size_out: int) -> tuple:
    centre = (np.arange(size_out, dtype=np.float64) + 0.5) * (size_in / size_out) - 0.5
    centre = np.clip(centre, 0, size_in - 1)
    low = np.floor(centre).astype(np.int64)
    high = np.minimum(low + 1, size_in - 1)
    return low, high, (centre - low).astype(np.float32)


def letterbox(image: np.ndarray, height: int, width: int, fill: float = 0.0) -> tuple:
    """The image scaled to fit (height, width) with its aspect ratio kept, centred, the rest
    `fill`; returns (float32 image, (scale, pad_x, pad_y)) for `unletterbox`."""
    h, w = image.shape[:2]
    scale = min(height / h, width / w)
    new_h, new_w = max(1, round(h * scale)), max(1, round(w * scale))
    scaled = resize(image, new_h, new_w)
    out = np.full((height, width) + scaled.shape[2:], fill, np.float32)
    pad_y, pad_x = (height - new_h) // 2, (width - new_w) // 2
    out[pad_y:pad_y + new_h, pad_x:pad_x + new_w] = scaled
    return out, (scale, pad_x, pad_y)


def unletterbox(points: np.ndarray, transform: tuple) -> np.ndarray:
    """Pixel coordinates (..., 2k) as x, y pairs in the letterboxed image, back in the original."""
    scale, pad_x, pad_y = transform
    points = np.asarray(points, np.float64).copy()
    points[..., 0::2] = (points[..., 0::2] - pad_x) / scale
    points[..., 1::2] = (points[..., 1::2] - pad_y) / scale
    return points


def to_input(image: np.ndarray, detail: dict, mean=0.0, std=255.0,
             layout: str = "NHWC") -> np.ndarray:
    """A float (H, W, C) or (H, W) image already at the model's size, as the model's input:
    (x - mean) / std, then quantized with the input's scale and zero point for an integer input;
    `detail` is one of get_input_details()'s entries. layout "NCHW" for channels-first models."""
    x = (np.asarray(image, np.float32) - np.float32(mean)) / np.float32(std)
    if x.ndim == 2:
        x = x[..., None]
    if layout == "NCHW":
        x = x.transpose(2, 0, 1)
    x = x.reshape(detail["shape"])
    dtype = np.dtype(detail["dtype"])
    if dtype.kind in "iu":
        scale, zero_point = detail["quantization"]
        info = np.iinfo(dtype)
        x = np.clip(np.round(x / scale) + zero_point, info.min, info.max)
    return x.astype(dtype)


def input_size(detail: dict, layout: str = "NHWC") -> tuple:
    """(height, width, channels) of a one-image input."""
    shape = list(detail["shape"])
    if layout == "NCHW":
        _, channels, height, width = shape
    elif len(shape) == 4:
        _, height, width, channels = shape
    else:
        raise ValueError(f"input {detail['name']!r}: shape {shape} is no image (N, H, W, C)")
    return height, width, channels


def draw_box(image: np.ndarray, box, colour=(255, 0, 0), thickness: int = 2) -> None:
    """A rectangle outline (x0, y0, x1, y1 in pixels) drawn into a uint8 RGB image in place."""
    h, w = image.shape[:2]
    x0, y0, x1, y1 = (int(round(v)) for v in box)
    x0, x1 = sorted((min(max(x0, 0), w - 1), min(max(x1, 0), w - 1)))
    y0, y1 = sorted((min(max(y0, 0), h - 1), min(max(y1, 0), h - 1)))
    t = thickness
    colour = np.asarray(colour, np.uint8)
    image[y0:y0 + t, x0:x1 + 1] = colour
    image[max(y1 - t + 1, 0):y1 + 1, x0:x1 + 1] = colour
    image[y0:y1 + 1, x0:x0 + t] = colour
    image[y0:y1 + 1, max(x1 - t + 1, 0):x1 + 1] = colour


def draw_points(image: np.ndarray, points, colour=(0, 255, 0), radius: int = 2) -> None:
    """Small squares at (x, y) pixel points, in place."""
    h, w = image.shape[:2]
    for x, y in np.asarray(points).reshape(-1, 2):
        x, y = int(round(x)), int(round(y))
        image[max(y - radius, 0):min(y + radius + 1, h),
              max(x - radius, 0):min(x + radius + 1, w)] = colour


def box_blur(image: np.ndarray, radius: int) -> np.ndarray:
    """A (2r+1)-wide box blur (separable, edges clamped) of an (H, W, C) image; float32 out."""
    x = np.asarray(image, np.float32)
    for axis in (0, 1):
        pad = [(0, 0)] * x.ndim
        pad[axis] = (radius + 1, radius)
        c = np.cumsum(np.pad(x, pad, mode="edge"), axis=axis)
        n = x.shape[axis]
        x = (np.take(c, np.arange(2 * radius + 1, 2 * radius + 1 + n), axis=axis)
             - np.take(c, np.arange(n), axis=axis)) / (2 * radius + 1)
    return x


def blend(foreground: np.ndarray, background: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """mask * foreground + (1 - mask) * background; mask (H, W) in [0, 1]; uint8 out."""
    m = np.clip(np.asarray(mask, np.float32), 0, 1)[..., None]
    out = m * foreground + (1 - m) * background
    return np.clip(np.round(out), 0, 255).astype(np.uint8)
