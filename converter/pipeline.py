"""The pass pipeline: small passes `run(model) -> bool`, run in order to a fixed point, with the
model validated after every pass that changed it; then the inputs' and outputs' layouts."""
from __future__ import annotations

import dataclasses

import numpy as np

from edgelite.schema import Model, replace_uses, validate

from .editor import Editor
from .pass_attention import (fold_head_scales, fold_matmul_transposes, merge_head_transposes,
                             merge_parallel_projections)
from .pass_clean import dedupe_ops, remove_dead_ops
from .pass_flatten_fc import fold_flatten_around_fc
from .pass_gather_table import gather_from_transposed_table
from .pass_fuse import (fold_pad_into_window, fuse_activation, fuse_add_into_bias,
                        fuse_hard_swish, fuse_mul_into_weights)
from .pass_permute import compose_permutations
from .pass_layout import (inverse, merge_reshapes, moves_data, push_transposes,
                          transposes_to_reshapes)
from .lower_qdq import drop_identity_pairs
from .pass_shape import (drop_shape_clamps, fold_gather_of_gather, gather_as_vector,
                         measure_at_source, measure_at_source_early, shape_through_transpose,
                         share_small_constants,
                         squeeze_through_transpose)

PASSES = [
    remove_dead_ops,
    compose_permutations,         # chains of TRANSPOSE/RESHAPE (pass_permute.py)
    push_transposes,
    measure_at_source_early,      # before q, k and v projections merge (pass_shape.py)
    fold_matmul_transposes,       # attention (pass_attention.py)
    merge_parallel_projections,
    merge_head_transposes,
    fold_head_scales,
    merge_reshapes,
    dedupe_ops,
    fuse_mul_into_weights,
    fuse_add_into_bias,
    fuse_hard_swish,
    fuse_activation,
    fold_pad_into_window,
    drop_identity_pairs,   # QDQ models (lower_qdq.py)
    shape_through_transpose,   # dynamic dims (pass_shape.py)
    squeeze_through_transpose,
    fold_gather_of_gather,
    share_small_constants,
    drop_shape_clamps,
    gather_as_vector,
    fold_flatten_around_fc,
    gather_from_transposed_table,
]
# After the inputs' and outputs' layouts are settled (a transpose that only moves size-1 dims
# may still cancel against another before that).
# A SHAPE measured at its source (pass_shape.measure_at_source) no longer shows which reshape it
# serves, which the attention passes read: it comes last.
FINAL_PASSES = PASSES + [transposes_to_reshapes, measure_at_source]
MAX_ROUNDS = 50


def optimize(model: Model, passes=None) -> None:
    """Run `passes` (default PASSES) until none changes the model."""
    passes = PASSES if passes is None else passes
    seen = set()
    for _ in range(MAX_ROUNDS):
        changed = False
        for run in passes:
            if run(model):
                changed = True
                validate(model)
        if not changed:
            return
        shape = _structure(model)
        if shape in seen:   # two passes undo each other: the graph is valid, keep it
            return
        seen.add(shape)
    raise RuntimeError(f"the pass pipeline did not settle in {MAX_ROUNDS} rounds")


def _structure(model: Model) -> tuple:
    """The graph up to tensor numbering: each op and its outputs' shapes, in order."""
    return tuple(tuple((op.op, tuple(tuple(sg.tensors[t].shape) for t in op.outputs if t >= 0))
                       for op in sg.operators) for sg in model.subgraphs)


def transpose_count(model: Model) -> int:
    """TRANSPOSE ops that move data (not those that only move size-1 dims: RESHAPEs later)."""
    count = 0
    for sg in model.subgraphs:
        ed = Editor(model, sg)
        for op in sg.operators:
            perm = ed.transpose_perm(op)
            count += perm is not None and moves_data(perm, ed.shape(op.inputs[0]))
    return count


CHANNELS_LAST = {3: (0, 2, 1), 4: (0, 2, 3, 1), 5: (0, 2, 3, 4, 1)}


def settle_io_layout(model: Model, keep_io_layout: bool) -> dict:
    """Make inputs that reach NHWC ops channels-last (kept when that removes transposes) and
    drop the transposes in front of outputs. Returns {"inputs": [perm], "outputs": [perm]}:
    each .tflite tensor is numpy.transpose(onnx tensor, perm)."""
    sg = model.subgraphs[0]
    layout = {"inputs": [tuple(range(len(sg.tensors[t].shape))) for t in sg.inputs],
              "outputs": [tuple(range(len(sg.tensors[t].shape))) for t in sg.outputs]}
    if keep_io_layout:
        optimize(model, FINAL_PASSES)
        return layout
    _outputs_channels_last(model, layout)
    for k in range(len(sg.inputs)):
        sg = model.subgraphs[0]   # a rejected trial restores a copy
        perm = CHANNELS_LAST.get(len(sg.tensors[sg.inputs[k]].shape))
        if perm is None or sg.tensors[sg.inputs[k]].dtype != "float32":
            continue
        before = _cost(model)
        saved, saved_outputs = _snapshot(model), list(layout["outputs"])
        _make_input_channels_last(model, k, perm)
        optimize(model)
        _outputs_channels_last(model, layout)
        if _cost(model) < before:
            layout["inputs"][k] = perm
        else:
            _restore(model, saved)
            layout["outputs"] = saved_outputs
    optimize(model, FINAL_PASSES)
    return layout


def _cost(model: Model) -> tuple:
    """Transposes that move data, then all transposes."""
    return transpose_count(model), sum(op.op == "TRANSPOSE" for sg in model.subgraphs
                                       for op in sg.operators)


def _outputs_channels_last(model: Model, layout: dict) -> None:
    """An output written by a TRANSPOSE to channels-first is given channels-last instead."""
    sg = model.subgraphs[0]
    ed = Editor(model, sg)
    changed = False
    for k, t in enumerate(list(sg.outputs)):
        producer = ed.producer(t)
        perm = ed.transpose_perm(producer)
        if perm is None or inverse(perm) != CHANNELS_LAST.get(len(perm)) or \
                list(layout["outputs"][k]) != sorted(layout["outputs"][k]):
            continue
        source = producer.inputs[0]
        if source in sg.inputs or source in sg.outputs:
            continue
        sg.outputs[k] = source
        layout["outputs"][k] = tuple(np.array(layout["outputs"][k])[list(inverse(perm))])
        changed = True
    if changed:
        optimize(model)


def _make_input_channels_last(model: Model, k: int, perm) -> None:
    sg = model.subgraphs[0]
    ed = Editor(model, sg)
    t = sg.inputs[k]
    tensor = sg.tensors[t]
    onnx_shape = tensor.shape
    original = ed.tensor(f"{tensor.name}/onnx_layout", onnx_shape, tensor.dtype)
    replace_uses(sg, t, original)
    tensor.shape = tuple(onnx_shape[i] for i in perm)
    perm_t = ed.const(np.array(inverse(perm), np.int32), f"{tensor.name}/perm")
    sg.operators.insert(0, ed.new_op("TRANSPOSE", [t, perm_t], [original]))


def _snapshot(model: Model):
    """A copy of the subgraphs that passes cannot touch (they replace options and buffers,
    never edit them in place; `copy.deepcopy` cannot copy `Options`)."""
    subgraphs = []
    for sg in model.subgraphs:
        ops = [dataclasses.replace(op, inputs=list(op.inputs), outputs=list(op.outputs),
                                   intermediates=list(op.intermediates))
               for op in sg.operators]
        subgraphs.append(dataclasses.replace(
            sg, tensors=[dataclasses.replace(t) for t in sg.tensors], inputs=list(sg.inputs),
            outputs=list(sg.outputs), operators=ops))
    return subgraphs, len(model.buffers)


def _restore(model: Model, saved) -> None:
    subgraphs, n_buffers = saved
    model.subgraphs = subgraphs
    del model.buffers[n_buffers:]
