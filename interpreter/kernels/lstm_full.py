"""LSTM (the one-step op, full kernel type), float32: one time step of TFLite's LSTM cell on
[batch, n_input], with its state in the variable tensors 18 (output state) and 19 (cell state).

The inputs are laid out as UNIDIRECTIONAL_SEQUENCE_LSTM's, so the step is that kernel run on a
sequence of one: CIFG, peepholes, projection, layer normalization and clipping come with it."""
from __future__ import annotations

import dataclasses

from edgelite.schema import Options

from .lstm import X, unidirectional_sequence_lstm
from .registry import Node, register

FULL, BASIC = 0, 1


@register("LSTM", "float32")
def lstm(node):
    opts = node.options
    if int(opts.kernel_type or FULL) != FULL:
        raise node.fail("only the FULL kernel type is supported (BASIC is the 5-input "
                        "quantized cell)")
    if len(node.inputs) not in (20, 24):
        raise node.fail(f"expected 20 or 24 inputs, got {len(node.inputs)}")
    if len(node.outputs) != 1:
        raise node.fail(f"expected 1 output, got {len(node.outputs)}")
    x = node.input(X)
    if len(x.shape) != 2:
        raise node.fail(f"input must be rank 2 [batch, n_input], got {list(x.shape)}")
    batch, n_input = x.shape
    for k, t in enumerate(node.inputs[1:18], 1):
        if t is not None and t.type_name != "float32":
            raise node.fail(f"input {k} is {t.type_name}: only float32 weights are supported "
                            "(no hybrid or quantized LSTM)")
    step = Node(op="LSTM", index=node.index, subgraph=node.subgraph, runtime=node.runtime,
                inputs=[dataclasses.replace(x, shape=(batch, 1, n_input))] + node.inputs[1:],
                outputs=[dataclasses.replace(node.outputs[0])],
                options=Options("UnidirectionalSequenceLSTMOptions",
                                fused_activation_function=opts.fused_activation_function,
                                cell_clip=opts.cell_clip, proj_clip=opts.proj_clip,
                                time_major=False))
    run_sequence = unidirectional_sequence_lstm(step)
    n_output = step.outputs[0].shape[2]
    node.outputs[0].shape = (batch, n_output)

    def run(x_values, *arrays):
        run_sequence(x_values.reshape(batch, 1, n_input), *arrays[:-1],
                     arrays[-1].reshape(batch, 1, n_output))
    return run
