"""Copying a model's forward graph into a subgraph under construction.

Inputs open their batch dimension; chosen tensors (the trainable weights) are replaced by given
ones (their variables' values); constants keep pointing at the model's buffers, so frozen weights
stay bit-for-bit what they were. A RESHAPE whose target shape bakes in the declared batch (what
exporters often write, e.g. [1, 128]) gets -1 there, so the graph runs at any batch size.
"""
from __future__ import annotations

import numpy as np

from edgelite.schema import Model, Subgraph, Tensor

from .emit import Emitter, GradientError


def input_signature(tensor: Tensor, open_batch: bool) -> tuple:
    sig = tuple(tensor.shape_signature) if tensor.shape_signature is not None \
        else tuple(tensor.shape)
    if open_batch and sig:
        sig = (-1,) + sig[1:]
    return sig


def copy_forward(em: Emitter, src: Model, sg: Subgraph, replace: dict, open_batch: bool = True,
                 skip: set = frozenset()) -> dict:
    """Emit every operator of `sg` (but those in `skip`, by index) into `em`; returns {source
    tensor: emitted tensor}. `replace` maps source tensors to emitted ones used instead."""
    tmap = dict(replace)
    for t in sg.inputs:
        if t in tmap:
            continue
        tensor = sg.tensors[t]
        tmap[t] = em.input(tensor.name, tensor.shape, input_signature(tensor, open_batch),
                           tensor.dtype, tensor.quantization)

    def resolve(t: int) -> int:
        if t < 0:
            return -1
        if t not in tmap:
            tensor = sg.tensors[t]
            if tensor.is_variable:  # state an op keeps between invokes (LSTM cells)
                tmap[t] = em.state(tensor)
            elif src.buffers[tensor.buffer].nbytes == 0:
                raise GradientError(f"tensor {t} {tensor.name!r} is read before any operator "
                                    "writes it")
            else:
                tmap[t] = em.buffer_const(tensor.buffer, tensor.shape, tensor.dtype,
                                          tensor.name, tensor.quantization)
        return tmap[t]

    for index, op in enumerate(sg.operators):
        if index in skip:
            continue
        inputs = [resolve(t) for t in op.inputs]
        options = op.options
        if op.opcode.builtin == "RESHAPE":
            inputs, options = _open_reshape(em, inputs, options)
        templates = [Tensor(sg.tensors[t].name, sg.tensors[t].shape, sg.tensors[t].dtype,
                            quantization=sg.tensors[t].quantization) for t in op.outputs]
        em.scope = templates[0].name if templates else op.op
        outs = em.op(op.opcode.builtin, inputs, options=options, templates=templates,
                     opcode=op.opcode, custom_options=op.custom_options)
        outs = [] if outs is None else outs if isinstance(outs, list) else [outs]
        tmap.update(zip(op.outputs, outs))
    return tmap


def _open_reshape(em: Emitter, inputs: list, options) -> tuple:
    """RESHAPE's target with -1 for the batch when it states the declared batch."""
    x = inputs[0]
    if not em.sig(x) or em.sig(x)[0] != -1:
        return inputs, options
    declared = em.shape(x)[0]
    has_shape_input = len(inputs) > 1 and inputs[1] >= 0
    if has_shape_input:
        value = em.value(inputs[1])
        if value is None:
            return inputs, options
    else:
        value = getattr(options, "new_shape", None) if options is not None else None
        if not value:
            return inputs, options
    value = [int(d) for d in np.asarray(value).reshape(-1)]
    if not value or value[0] != declared or value.count(-1) > 1:
        return inputs, options
    if -1 in value:  # resolve the stretch at the declared batch; the batch takes the -1
        known = int(np.prod([d for d in value if d != -1]))
        value[value.index(-1)] = int(np.prod(em.shape(x))) // max(known, 1)
    opened = [-1] + value[1:]
    if has_shape_input:
        inputs = [x, em.i32(opened)] + inputs[2:]
    if options is not None and getattr(options, "new_shape", None):
        options = options.replace(new_shape=tuple(opened))
    return inputs, options
