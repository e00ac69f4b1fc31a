"""Pre- and post-processing for on-device apps (edgelite.tasks), numpy only: what the Raspberry Pi
samples (samples/raspberry_pi/) share, for users to import instead of copying.

- `image`: PNG read/write without Pillow, bilinear resize, letterbox, normalization into a
  model's input (float or quantized), boxes and masks drawn into frames.
- `detection`: SSD anchors (MediaPipe's SsdAnchorsCalculator), box decoding against them, IoU,
  hard and weighted non-maximum suppression.
- `ocr`: PP-OCR's steps around the two networks: text regions from the detector's probability
  map (DB post-processing on axis-aligned boxes), crops for the recognizer, CTC greedy decoding.
- `audio`: WAV read, mono float, resampling, fixed-size chunks with context, speech segments from
  per-chunk probabilities.

Nothing here imports OpenCV, Pillow, the interpreter or the converter.
"""
