"""More Keras recurrent layers through TensorFlow's converter, beside the corpus's keras_lstm and
keras_gru (tools/tflite_corpus.py): the variants the fused WHILE kernel
(interpreter/kernels/while_rnn.py) must recognize, or leave alone, as TensorFlow really writes
them. Random weights *and biases* (Keras starts biases at zero, and the converter then drops the
adds), fixed seeds, float32.

    /work/venv-tf/bin/python tools/recurrent_corpus.py [OUT] [--only NAME ...]

OUT defaults to ~/.cache/edgelite-tflite-corpus; files are recurrent_<name>.tflite.
`benchmarks/bench_recurrent.py` times every recurrent_*.tflite it finds there against LiteRT.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

DEFAULT_OUT = Path("~/.cache/edgelite-tflite-corpus").expanduser()


def models():
    """name -> builder of a keras.Model over [batch, 20, 16] (batch 1 unless the name says; an
    open batch does not convert to builtin ops: TensorListReserve needs a static shape)."""
    import keras
    from keras import layers

    def biased(cls, units, **kw):
        return cls(units, bias_initializer=keras.initializers.RandomNormal(stddev=0.3,
                                                                            seed=1), **kw)

    def stack(first, second=None, batch=1):
        def build():
            x = keras.Input((20, 16), batch_size=batch)
            h = first(x)
            if second is not None:
                h = second(h)
            return keras.Model(x, layers.Dense(10)(h))
        return build

    return {
        "simple_rnn": stack(biased(layers.SimpleRNN, 32, return_sequences=True),
                            biased(layers.SimpleRNN, 24)),
        "lstm_bias": stack(biased(layers.LSTM, 32, return_sequences=True),
                           biased(layers.LSTM, 24)),
        "gru_bias": stack(biased(layers.GRU, 32, return_sequences=True), biased(layers.GRU, 24)),
        "gru_reset_before": stack(biased(layers.GRU, 32, reset_after=False)),
        "lstm_backwards": stack(biased(layers.LSTM, 32, go_backwards=True)),
        "bilstm": stack(layers.Bidirectional(biased(layers.LSTM, 16, return_sequences=True)),
                        biased(layers.LSTM, 24)),
        "lstm_batch4": stack(biased(layers.LSTM, 32), batch=4),
        "lstm_no_bias_hard_sigmoid": stack(layers.LSTM(32, use_bias=False,
                                                       recurrent_activation="hard_sigmoid")),
        "simple_rnn_relu": stack(biased(layers.SimpleRNN, 32, activation="relu")),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT)
    p.add_argument("--only", nargs="*")
    args = p.parse_args(argv)
    import keras
    import tensorflow as tf
    args.out.mkdir(parents=True, exist_ok=True)
    for name, build in models().items():
        if args.only and name not in args.only:
            continue
        keras.utils.set_random_seed(0)
        model = build()
        model(np.zeros(model.inputs[0].shape, np.float32))
        content = tf.lite.TFLiteConverter.from_keras_model(model).convert()
        (args.out / f"recurrent_{name}.tflite").write_bytes(content)
        print(f"recurrent_{name}.tflite: {len(content)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
