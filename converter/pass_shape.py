"""Shape arithmetic in the graph (dynamic dims): SHAPE of a TRANSPOSE reads the transpose's
input and gathers its dims in the transpose's order, so that no TRANSPOSE stays only to be
measured (a channels-last input read by a SHAPE)."""
from __future__ import annotations

import numpy as np

from edgelite.schema import Model, remove_dead
from edgelite.schema.validate import INT32_MAX

from .dim_source import moved_ones, source
from .editor import Editor


def shape_through_transpose(model: Model) -> bool:
    changed = False
    for sg in model.subgraphs:
        ed = Editor(model, sg)
        for op in list(sg.operators):
            if op.op != "SHAPE" or not ed.has(op):
                continue
            producer = ed.producer(op.inputs[0])
            perm = ed.transpose_perm(producer)
            if perm is None:
                continue
            out = op.outputs[0]
            dtype = sg.tensors[out].dtype
            measured = ed.tensor(f"{sg.tensors[out].name}/unpermuted", sg.tensors[out].shape,
                                 dtype)
            ed.set_inputs(op, [producer.inputs[0]])
            ed.set_outputs(op, [measured])
            index = ed.const(np.array(perm, np.int32), f"{sg.tensors[out].name}/perm")
            gather = ed.new_op("GATHER", [measured, index], [out], {"axis": 0})
            ed.insert_after(op, gather)
            changed = True
    return changed


def squeeze_through_transpose(model: Model) -> bool:
    """A RESHAPE that only drops size-1 dims, its target computed while running (it follows
    dynamic dims), reading a TRANSPOSE: a SQUEEZE of the transpose's input, then what is left of
    the permutation (often nothing: NHWC [b, 1, w, c] to a sequence [b, w, c] keeps no TRANSPOSE).
    In the graphs that compute shapes a dynamic dim is never 1 (a batch starts at 2), so a
    size-1 dim here is a fixed one."""
    changed = False
    for sg in model.subgraphs:
        ed = Editor(model, sg)
        for op in list(sg.operators):
            if op.op != "RESHAPE" or not ed.has(op) or len(op.inputs) < 2 or \
                    ed.value(op.inputs[1]) is not None:
                continue
            producer = ed.producer(op.inputs[0])
            perm = ed.transpose_perm(producer)
            if perm is None:
                continue
            dropped = dropped_ones(ed.shape(op.inputs[0]), ed.shape(op.outputs[0]))
            if not dropped:
                continue
            x = producer.inputs[0]
            gone = sorted(perm[a] for a in dropped)
            left = [p for a, p in enumerate(perm) if a not in dropped]
            order = sorted(left)
            rest = [order.index(p) for p in left]
            out = op.outputs[0]
            tensor = sg.tensors[out]
            squeezed = out if rest == sorted(rest) else ed.tensor(
                f"{tensor.name}/squeezed", tuple(ed.shape(x)[p] for p in order),
                tensor.dtype)
            sg.tensors[squeezed].quantization = sg.tensors[x].quantization
            new_ops = [ed.new_op("SQUEEZE", [x], [squeezed], {"squeeze_dims": tuple(gone)})]
            if squeezed != out:
                new_ops.append(ed.new_op("TRANSPOSE", [squeezed, ed.const(
                    np.array(rest, np.int32), f"{tensor.name}/perm")], [out]))
            for new in new_ops:
                ed.insert_before(op, new)
            ed.remove(op)
            for new in new_ops:   # the editor's maps: the new ops write `out` now
                ed.set_outputs(new, new.outputs)
            changed = True
    return changed


def dropped_ones(in_shape, out_shape):
    """The axes of `in_shape` a reshape to `out_shape` drops, when it only drops size-1 dims
    (the others in order, [] when it drops none); else None. Read the other way, the axes of
    size-1 dims that a reshape from `out_shape` to `in_shape` inserts."""
    moved = moved_ones(in_shape, out_shape)
    return moved[1] if moved is not None and not moved[2] else None


def fold_gather_of_gather(model: Model) -> bool:
    """GATHER(GATHER(v, i), j) of a vector v along axis 0, i and j constants: GATHER(v, i[j])
    (a SHAPE read through a transpose, then one dim of it, is one GATHER of the SHAPE)."""
    changed = False
    for sg in model.subgraphs:
        ed = Editor(model, sg)
        for op in sg.operators:
            inner = ed.producer(op.inputs[0]) if op.op == "GATHER" else None
            if inner is None or inner.op != "GATHER" or len(ed.shape(inner.inputs[0])) != 1 or \
                    op.options.axis != 0 or inner.options.axis != 0 or \
                    op.options.batch_dims or inner.options.batch_dims:
                continue
            i, j = ed.value(inner.inputs[1]), ed.value(op.inputs[1])
            if i is None or j is None or i.ndim != 1 or j.size == 0 or \
                    j.min() < 0 or j.max() >= i.size:
                continue
            index = np.array(i[j], np.int32)   # 0-d for a scalar j (ascontiguousarray: 1-d)
            ed.set_inputs(op, [inner.inputs[0], ed.const(
                index, f"{sg.tensors[op.inputs[1]].name}/composed")])
            changed = True
        if changed:
            remove_dead(sg)
    return changed


def measure_at_source(model: Model, early: bool = False) -> bool:
    """A SHAPE measures the earliest tensor that has the dims it is read for
    (`dim_source.source`): GATHER(SHAPE(t), i) becomes GATHER(SHAPE(s), j) and a SHAPE read
    whole becomes SHAPE(s) where s has t's dims in order; SHAPEs of one tensor then merge
    (`dedupe_ops`), and so does what is computed from them. `early`: not a SHAPE whose values
    reach a RESHAPE's target (the attention passes take such a SHAPE with its reshape)."""
    changed = False
    for sg in model.subgraphs:
        ed = Editor(model, sg)
        for op in list(sg.operators):
            if op.op != "SHAPE" or not ed.has(op):
                continue
            if early and _feeds_reshape_target(ed, op.outputs[0]):
                continue
            measured = op.inputs[0]
            rank = len(ed.shape(measured))
            whole, axes = source(ed, measured, range(rank))
            if whole != measured and list(axes) == list(range(len(ed.shape(whole)))):
                ed.set_inputs(op, [whole])
                changed = True
                continue
            for reader in list(ed.readers(op.outputs[0])):
                changed |= _gather_at_source(ed, op, reader)
        if changed:
            remove_dead(sg)
    return changed


def _feeds_reshape_target(ed, t: int, depth: int = 8) -> bool:
    """Whether the values of t reach a RESHAPE's target within `depth` ops."""
    front = [t]
    for _ in range(depth):
        after = []
        for x in front:
            for reader in ed.readers(x):
                if reader.op == "RESHAPE" and len(reader.inputs) > 1 and reader.inputs[1] == x:
                    return True
                after.extend(reader.outputs)
        front = after[:64]
        if not front:
            return False
    return False   # shape arithmetic is a few ops: what is further is other values


def measure_at_source_early(model: Model) -> bool:
    """`measure_at_source` before the attention passes: a SHAPE read for other shapes (T5's
    position bias measures q's heads) no longer keeps q's projection from merging with k's and
    v's."""
    changed = False
    while measure_at_source(model, early=True) | fold_gather_of_gather(model):
        changed = True   # a dim of a dim: measured at its source in this round too
    return changed


def _gather_at_source(ed, shape_op, gather) -> bool:
    if gather.op != "GATHER" or gather.inputs[0] != shape_op.outputs[0] or \
            gather.options.axis != 0 or gather.options.batch_dims:
        return False
    index = ed.value(gather.inputs[1])
    rank = len(ed.shape(shape_op.inputs[0]))
    if index is None or index.size == 0 or index.min() < -rank or index.max() >= rank:
        return False
    flat = [int(i) % rank for i in index.reshape(-1)]
    src, axes = source(ed, shape_op.inputs[0], flat)
    if src == shape_op.inputs[0]:
        return False
    sg = ed.sg
    old = sg.tensors[shape_op.outputs[0]]
    measured = ed.tensor(f"{sg.tensors[src].name}/shape", (len(ed.shape(src)),), old.dtype)
    ed.insert_before(gather, ed.new_op("SHAPE", [src], [measured], shape_op.options))
    new_index = np.array(axes, np.int32).reshape(index.shape)
    ed.set_inputs(gather, [measured, ed.const(new_index, f"{old.name}/at_source")])
    return True


SHARED_CONSTANT_ELEMENTS = 64   # shape vectors, axes, indices, perms: not weights
SHARED_DTYPES = frozenset({"int32", "int64", "bool"})


def share_small_constants(model: Model) -> bool:
    """Small unquantized integer constants with the same dtype, shape and value become one
    tensor, so that ops computing the same thing from them (the shape arithmetic each layer
    repeats) have the same inputs and merge (`dedupe_ops`)."""
    changed = False
    for sg in model.subgraphs:
        first: dict = {}
        keep: dict = {}
        outputs = set(sg.outputs)
        for op in sg.operators:
            for k, t in enumerate(op.inputs):
                if op.op == "RESHAPE" and k == 1:   # mark_dynamic_dims edits targets alone
                    continue
                if t < 0 or t in keep:
                    if t >= 0 and keep[t] != t:
                        op.inputs[k] = keep[t]
                        changed = True
                    continue
                tensor = sg.tensors[t]
                value = None if t in outputs or tensor.quantization is not None or \
                    tensor.dtype not in SHARED_DTYPES else model.constant(sg, t)
                if value is None or value.size > SHARED_CONSTANT_ELEMENTS or \
                        t in sg.inputs:
                    keep[t] = t
                    continue
                key = (tensor.dtype, tuple(tensor.shape), value.tobytes())
                keep[t] = first.setdefault(key, t)
                if keep[t] != t:
                    op.inputs[k] = keep[t]
                    changed = True
    return changed


def tidy_computed_shapes(model: Model) -> None:
    """After `convert.mark_dynamic_dims` computed reshape targets from SHAPEs (each measuring
    its own reshape's input): those SHAPEs measure at the source and merge with the others."""
    from .pass_clean import dedupe_ops

    for _ in range(10):
        changed = [run(model) for run in (measure_at_source, share_small_constants,
                                          drop_shape_clamps, gather_as_vector, dedupe_ops,
                                          fold_gather_of_gather)]
        if not any(changed):
            return


def drop_shape_clamps(model: Model) -> bool:
    """Shape arithmetic's no-ops, by the bounds of its values (a dim from SHAPE is in
    [0, 2**31 - 1]): a MAXIMUM or MINIMUM that cannot change its operand (ONNX's int64 shape
    clamped to int32 before a CAST), a SELECT_V2 whose constant condition picks one operand."""
    changed = False
    for sg in model.subgraphs:
        ed = Editor(model, sg)
        bounds: dict = {}
        for op in list(sg.operators):
            kept = _unchanged_operand(ed, op, bounds)
            if kept is None or ed.is_output(op.outputs[0]):
                continue
            out = sg.tensors[op.outputs[0]]
            operand = sg.tensors[kept]
            if tuple(operand.shape) != tuple(out.shape) or operand.dtype != out.dtype:
                continue
            ed.replace_uses(op.outputs[0], kept)
            changed = True
        if changed:
            remove_dead(sg)
    return changed


def _unchanged_operand(ed, op, bounds: dict):
    if op.op == "SELECT_V2" and len(op.inputs) == 3:
        cond = ed.value(op.inputs[0])
        if cond is None or cond.size == 0:
            return None
        if not cond.any():
            return op.inputs[2]
        return op.inputs[1] if cond.all() else None
    if op.op not in ("MAXIMUM", "MINIMUM") or len(op.inputs) != 2:
        return None
    a, b = (_bounds(ed, t, bounds) for t in op.inputs)
    if a is None or b is None:
        return None
    if op.op == "MAXIMUM":
        return op.inputs[0] if a[0] >= b[1] else op.inputs[1] if b[0] >= a[1] else None
    return op.inputs[0] if a[1] <= b[0] else op.inputs[1] if b[1] <= a[0] else None


def _bounds(ed, t: int, memo: dict, depth: int = 0):
    """(low, high) of the integer values of tensor t, or None when not known."""
    if t in memo:
        return memo[t]
    tensor = ed.sg.tensors[t]
    found = None
    if tensor.dtype in ("int32", "int64") and depth < 32:
        value = ed.value(t)
        op = ed.producer(t)
        if value is not None:
            found = (int(value.min()), int(value.max())) if value.size else None
        elif op is not None and op.op == "SHAPE":
            found = (0, INT32_MAX)
        elif op is not None and op.op in ("GATHER", "RESHAPE", "SQUEEZE", "EXPAND_DIMS",
                                          "CAST", "STRIDED_SLICE"):
            found = _bounds(ed, op.inputs[0], memo, depth + 1)
            if found is not None and tensor.dtype == "int32" and \
                    not -INT32_MAX - 1 <= found[0] <= found[1] <= INT32_MAX:
                found = None   # a CAST to int32 wraps what it does not hold
        elif op is not None and op.op in ("CONCATENATION", "SELECT_V2", "MAXIMUM", "MINIMUM"):
            parts = op.inputs[1:] if op.op == "SELECT_V2" else op.inputs
            each = [_bounds(ed, k, memo, depth + 1) for k in parts]
            if all(e is not None for e in each):
                low, high = min(e[0] for e in each), max(e[1] for e in each)
                if op.op == "MAXIMUM":
                    low = max(e[0] for e in each)
                if op.op == "MINIMUM":
                    high = min(e[1] for e in each)
                found = (low, high)
    memo[t] = found
    return found


def gather_as_vector(model: Model) -> bool:
    """RESHAPE(GATHER(v, i), [1]) of a 1-D v and a scalar constant i (ONNX's Unsqueeze of one
    dim): GATHER(v, [i]); and a CONCATENATION's neighbouring GATHERs of one vector become one
    GATHER of their indices (a reshape target read from one SHAPE)."""
    changed = False
    for sg in model.subgraphs:
        ed = Editor(model, sg)
        for op in list(sg.operators):
            if not ed.has(op):
                continue
            if op.op == "RESHAPE":
                changed |= _unsqueezed_gather(ed, op)
            elif op.op == "CONCATENATION" and op.options.axis in (0, -1) and \
                    not op.options.fused_activation_function:
                changed |= _merge_gathers(ed, op)
        if changed:
            remove_dead(sg)
    return changed


def _vector_gather(ed, t: int):
    """(vector, index array) when t is GATHER(1-D vector, constant index) along axis 0."""
    op = ed.producer(t)
    if op is None or op.op != "GATHER" or op.options.axis != 0 or op.options.batch_dims or \
            len(ed.shape(op.inputs[0])) != 1:
        return None
    index = ed.value(op.inputs[1])
    return None if index is None or index.ndim > 1 else (op.inputs[0], index)


def _unsqueezed_gather(ed, op) -> bool:
    if tuple(ed.shape(op.outputs[0])) != (1,) or ed.shape(op.inputs[0]) != ():
        return False
    found = _vector_gather(ed, op.inputs[0])
    if found is None:
        return False
    vector, index = found
    name = ed.sg.tensors[op.outputs[0]].name
    gather = ed.new_op("GATHER", [vector, ed.const(index.reshape(1).astype(np.int32),
                                                   f"{name}/index")],
                       [op.outputs[0]], {"axis": 0})
    ed.insert_before(op, gather)
    ed.remove(op)
    ed.set_outputs(gather, gather.outputs)
    return True


def _merge_gathers(ed, op) -> bool:
    pieces = [(t, _vector_gather(ed, t) if len(ed.shape(t)) == 1 else None)
              for t in op.inputs]
    inputs, changed, k = [], False, 0
    while k < len(pieces):
        t, found = pieces[k]
        run = [k]
        while found is not None and run[-1] + 1 < len(pieces) and \
                pieces[run[-1] + 1][1] is not None and \
                pieces[run[-1] + 1][1][0] == found[0]:
            run.append(run[-1] + 1)
        if len(run) == 1:
            inputs.append(t)
            k += 1
            continue
        index = np.concatenate([pieces[j][1][1].reshape(-1) for j in run]).astype(np.int32)
        out = ed.sg.tensors[op.outputs[0]]
        merged = ed.tensor(f"{out.name}/gathered", (index.size,), ed.sg.tensors[t].dtype)
        ed.insert_before(op, ed.new_op("GATHER", [found[0], ed.const(
            index, f"{out.name}/indices")], [merged], {"axis": 0}))
        inputs.append(merged)
        changed = True
        k = run[-1] + 1
    if not changed:
        return False
    out = op.outputs[0]
    if len(inputs) == 1 and ed.sg.tensors[inputs[0]].dtype == ed.sg.tensors[out].dtype and \
            not ed.is_output(out):
        ed.replace_uses(out, inputs[0])
    else:
        ed.set_inputs(op, inputs)
    return True
