"""Attention: the transposes that split heads and transpose keys fold away.

Exporters write multi-head attention as per-head reshapes and transposes around two
BATCH_MATMULs: q, k and v each reshaped to [batch, seq, heads, dim] and transposed to
[batch, heads, seq, dim] (k to [batch, heads, dim, seq]), the context transposed back. Three
passes leave one transpose for q, k and v together and the one after the context:

- `fold_matmul_transposes`: a transpose of a BATCH_MATMUL input that swaps its last two axes
  becomes the op's adj_x / adj_y flag (k^T: a transpose to [b, h, dim, seq] becomes one to
  [b, h, seq, dim] read with adj_y, the same perm q and v have);
- `merge_parallel_projections`: FULLY_CONNECTED ops on the same input whose outputs are each
  reshaped and transposed alike (q, k and v as three Linear layers) become one FULLY_CONNECTED
  with the weights stacked, whose output the gathers of `merge_head_transposes` take apart;
- `merge_head_transposes`: gathers of one tensor (the fused q/k/v projection) whose slices are
  each reshaped and transposed alike become one reshape and one transpose of the whole tensor,
  then the gathers.
"""
from __future__ import annotations

import math

import numpy as np

from edgelite.schema import Model, remove_dead

from . import memo
from .editor import Editor
from .pass_layout import ELEMENTWISE, moves_data


def _swap_last(perm) -> tuple:
    return tuple(perm[:-2]) + (perm[-1], perm[-2])


def _identity(perm) -> bool:
    return tuple(perm) == tuple(range(len(perm)))


def fold_matmul_transposes(model: Model) -> bool:
    """A TRANSPOSE into BATCH_MATMUL that swaps the last two axes becomes adj_x / adj_y."""
    changed = False
    for sg in model.subgraphs:
        ed = Editor(model, sg)
        for op in list(sg.operators):
            if op.op != "BATCH_MATMUL":
                continue
            for k, flag in ((0, "adj_x"), (1, "adj_y")):
                if _fold_input(ed, op, k, flag):
                    changed = True
        if changed:
            remove_dead(sg)
    return changed


def _fold_input(ed: Editor, op, k: int, flag: str) -> bool:
    t = op.inputs[k]
    transpose = ed.producer(t)
    perm = ed.transpose_perm(transpose)
    if perm is None or len(perm) < 2 or (k == 0 and t == op.inputs[1]):
        return False
    rest = _swap_last(perm)
    flipped = op.options.replace(**{flag: not getattr(op.options, flag)})
    if _identity(rest):
        ed.set_input(op, k, transpose.inputs[0])
    elif k == 1 and perm[-2] == len(perm) - 1 and ed.only_read_by(t, op):
        # the source's last axis stays last: [b, s, h, d] -> [b, h, d, s] becomes [b, h, s, d]
        shape = ed.shape(t)
        ed.sg.tensors[t].shape = _swap_last(shape)
        ed.set_input(transpose, 1, ed.const(np.array(rest, np.int32),
                                            f"{ed.sg.tensors[t].name}/perm"))
    else:
        return False
    op.options = flipped
    return True


# -- parallel projections ------------------------------------------------------------------------

def _head_split(ed: Editor, t: int):
    """(reshape target, perm) when t reaches a RESHAPE and then a TRANSPOSE through scalar
    elementwise ops only (a branch `merge_head_transposes` takes: q scaled before its heads are
    split, as Whisper's)."""
    branch = _branch(ed, t)
    if branch is None or not branch[0]:
        return None
    return ed.shape(branch[0][-1].outputs[0]), ed.transpose_perm(branch[2])


def _projection(ed: Editor, op):
    """(weights, bias or None) of a plain float FULLY_CONNECTED with constant parameters."""
    if op.op != "FULLY_CONNECTED" or len(op.inputs) < 2 or op.options.weights_format != 0:
        return None
    w = ed.value(op.inputs[1])
    bias = op.inputs[2] if len(op.inputs) > 2 else -1
    b = ed.value(bias) if bias >= 0 else None
    tensors = [ed.sg.tensors[t] for t in (op.inputs[0], op.inputs[1], op.outputs[0])]
    if w is None or w.ndim != 2 or (bias >= 0 and b is None) or any(
            t.dtype != "float32" or t.quantization is not None for t in tensors):
        return None
    return w, b


def merge_parallel_projections(model: Model) -> bool:
    """FULLY_CONNECTED ops on one input, each output split into heads alike: one op."""
    changed = False
    for sg in model.subgraphs:
        ed = Editor(model, sg)
        groups: dict = {}
        for op in sg.operators:
            params = _projection(ed, op)
            split = _head_split(ed, op.outputs[0]) if params is not None else None
            if split is not None:
                o = op.options
                key = (op.inputs[0], params[0].shape, split, o.fused_activation_function,
                       o.keep_num_dims)
                groups.setdefault(key, []).append((op, params))
        for members in groups.values():
            if len(members) > 1:
                _merge_projections(ed, members)
                changed = True
        if changed:
            remove_dead(sg)
    return changed


def _merge_projections(ed: Editor, members) -> None:
    first = members[0][0]
    n, units = len(members), members[0][1][0].shape[0]
    name = ed.sg.tensors[first.outputs[0]].name
    w = ed.const(np.concatenate([p[0] for _, p in members]), f"{name}/stacked_weights")
    bias = -1
    if any(p[1] is not None for _, p in members):   # Whisper's k has none: zeros there
        bias = ed.const(np.concatenate([np.zeros(units, np.float32) if p[1] is None else p[1]
                                        for _, p in members]), f"{name}/stacked_bias")
    out_shape = ed.shape(first.outputs[0])
    fused = ed.tensor(f"{name}/stacked", out_shape[:-1] + (n * units,), "float32")
    heads = ed.tensor(f"{name}/stacked_heads", out_shape[:-1] + (n, units), "float32")
    fc = ed.new_op("FULLY_CONNECTED", [first.inputs[0], w, bias], [fused], first.options)
    reshape = ed.new_op("RESHAPE", [fused, ed.const(np.array(ed.shape(heads), np.int32),
                                                    f"{name}/stacked_shape")], [heads],
                        {"new_shape": ed.shape(heads)})
    ed.insert_before(first, fc)
    ed.insert_before(first, reshape)
    axis = len(out_shape) - 1
    for i, (op, _) in enumerate(members):
        gather = ed.new_op("GATHER", [heads, ed.const(np.array(i, np.int32), f"{name}/part{i}")],
                           list(op.outputs), {"axis": axis})
        ed.remove(op)
        ed.insert_after(reshape, gather)


# -- head transposes -----------------------------------------------------------------------------

def _scalar_elementwise(ed: Editor, op, t: int) -> bool:
    """An elementwise op on t whose other inputs are constants of one value."""
    if op.op not in ELEMENTWISE or len(op.outputs) != 1 or op.op in ("CAST", "SELECT_V2"):
        return False
    for x in op.inputs:
        if x != t and (ed.value(x) is None or ed.value(x).size != 1 or len(ed.shape(x)) > 1):
            return False
    return op.inputs.count(t) == 1


def _sole_reader(ed: Editor, t: int):
    """The one op that reads t (t not an output), or None. With dynamic dims a RESHAPE's target
    is computed from the SHAPE of its own input: SHAPE readers of t whose values reach only that
    RESHAPE's target do not count (they go with the reshape)."""
    readers = ed.readers(t)
    if ed.is_output(t) or not readers:
        return None
    main = [op for op in readers if op.op != "SHAPE"]
    if len(main) != 1:
        return None
    op = main[0]
    if len(main) < len(readers) and not (
            op.op == "RESHAPE" and len(op.inputs) > 1 and ed.value(op.inputs[1]) is None and
            all(_reaches_only(ed, s.outputs[0], op.inputs[1], 8)
                for s in readers if s.op == "SHAPE")):
        return None
    return op


def _reaches_only(ed: Editor, t: int, target: int, depth: int) -> bool:
    """Every use of t's value is on the way to tensor `target` (a few ops of shape arithmetic)."""
    if t == target:
        return True
    readers = ed.readers(t)
    if depth == 0 or ed.is_output(t) or not readers:
        return False
    return all(len(op.outputs) == 1 and _reaches_only(ed, op.outputs[0], target, depth - 1)
               for op in readers)


def _branch(ed: Editor, t: int):
    """([reshapes], [elementwise ops], transpose) reading slice t, each op the one reader of the
    one before (reshapes in a row, as dynamo's views, count as the last one)."""
    reshapes, chain = [], []
    while True:
        op = _sole_reader(ed, t)
        if op is None:
            return None
        if op.op == "RESHAPE":
            reshapes.append(op)   # scalar elementwise ops run on the slice in any shape
        elif _scalar_elementwise(ed, op, t):
            chain.append(op)
        else:
            perm = ed.transpose_perm(op)
            if perm is None or op.inputs[0] != t or not moves_data(perm, ed.shape(t)):
                return None   # a transpose of size-1 dims is a reshape: nothing to merge
            return reshapes, chain, op
        t = op.outputs[0]


def merge_head_transposes(model: Model) -> bool:
    """Slices of one tensor along one axis (scalar GATHERs, a SPLIT into equal parts, equal
    STRIDED_SLICEs), each reshaped and transposed alike: one RESHAPE and one TRANSPOSE of the
    tensor, then GATHERs along axis 0."""
    changed = False
    for sg in model.subgraphs:
        ed = Editor(model, sg)
        gathered: dict = {}
        sliced: dict = {}
        splits = []
        for op in sg.operators:
            if op.op == "GATHER" and op.options.batch_dims == 0:
                gathered.setdefault(op.inputs[0], []).append(op)
            elif op.op == "STRIDED_SLICE":
                sliced.setdefault(op.inputs[0], []).append(op)
            elif op.op in ("SPLIT", "SPLIT_V") and len(op.outputs) > 1:
                splits.append(op)
        for x, gathers in gathered.items():
            changed |= _merge_gathers(ed, x, gathers)
        for x, slices in sliced.items():
            changed |= _merge_slices(ed, x, slices)
        for op in splits:
            changed |= _merge_split(ed, op)
        if changed:
            remove_dead(sg)
    return changed


def _plan(ed: Editor, shape, axis: int, slices):
    """(branches, at, whole perm) when every slice (a tensor: shape without `axis`) is
    reshaped and transposed alike, else None."""
    branches = [_branch(ed, t) for t in slices]
    if any(b is None for b in branches):
        return None
    reshapes = {ed.shape(r[-1].outputs[0]) if r else None for r, _, _ in branches}
    perms = {ed.transpose_perm(t) for _, _, t in branches}
    if len(reshapes) != 1 or len(perms) != 1:
        return None
    (target,), (perm,) = reshapes, perms
    if target is None:
        split_shape, at = tuple(shape), axis
    else:
        at = _split_point(shape, axis, target)
        if at is None:
            return None
        split_shape = tuple(target[:at]) + (shape[axis],) + tuple(target[at:])
    rest = [i for i in range(len(split_shape)) if i != at]
    return branches, split_shape, (at,) + tuple(rest[p] for p in perm)


def _merge_gathers(ed: Editor, x: int, gathers) -> bool:
    shape = ed.shape(x)
    if len(gathers) < 2 or len(ed.readers(x)) != len(gathers) or ed.is_output(x) or \
            ed.sg.tensors[x].quantization is not None:
        return False
    axis = gathers[0].options.axis % len(shape)
    for g in gathers:
        index = ed.value(g.inputs[1])
        if g.options.axis % len(shape) != axis or index is None or index.ndim != 0:
            return False
    plan = _plan(ed, shape, axis, [g.outputs[0] for g in gathers])
    if plan is None:
        return False
    first = min(gathers, key=ed.sg.operators.index)
    _rewrite(ed, x, first, gathers, plan)
    return True


def _merge_split(ed: Editor, split) -> bool:
    """A SPLIT into n equal parts along axis a: parts 0..n-1 of its input."""
    data, at = (1, 0) if split.op == "SPLIT" else (0, 2)
    x, axis = split.inputs[data], ed.value(split.inputs[at])
    shape, n = ed.shape(x), len(split.outputs)
    if axis is None or axis.size != 1:
        return False
    axis = int(axis.reshape(-1)[0]) % len(shape)
    if any(ed.shape(t)[axis] * n != shape[axis] for t in split.outputs):
        return False
    return _merge_parts(ed, x, axis, n, [(split, k, k) for k in range(n)])


def _slice_part(ed: Editor, op):
    """(axis, begin, size) of a STRIDED_SLICE that takes one run of one axis, else None."""
    o = op.options
    values = [ed.value(t) for t in op.inputs[1:4]]
    shape = ed.shape(op.inputs[0])
    if o.ellipsis_mask or o.new_axis_mask or o.shrink_axis_mask or o.offset or any(
            v is None or v.shape != (len(shape),) for v in values):
        return None
    cut = []
    for i, (d, begin, end, stride) in enumerate(zip(shape, *values)):
        begin = 0 if o.begin_mask >> i & 1 else int(begin) + (d if begin < 0 else 0)
        end = d if o.end_mask >> i & 1 else int(end) + (d if end < 0 else 0)
        begin, end = min(max(begin, 0), d), min(max(end, 0), d)
        if stride != 1:
            return None
        if (begin, end) != (0, d):
            cut.append((i, begin, end - begin))
    return cut[0] if len(cut) == 1 and cut[0][2] > 0 else None


def _merge_slices(ed: Editor, x: int, slices) -> bool:
    """STRIDED_SLICEs of x, each one run of `size` along one axis at a multiple of `size`:
    parts of x reshaped to [..., d / size, size, ...]."""
    parts = [_slice_part(ed, op) for op in slices]
    if len(slices) < 2 or len(ed.readers(x)) != len(slices) or None in parts or \
            len({(axis, size) for axis, _, size in parts}) != 1:
        return False
    axis, _, size = parts[0]
    d = ed.shape(x)[axis]
    if d % size or any(begin % size for _, begin, _ in parts):
        return False
    return _merge_parts(ed, x, axis, d // size,
                        [(op, 0, begin // size) for op, (_, begin, _) in zip(slices, parts)])


def _merge_parts(ed: Editor, x: int, axis: int, n: int, slices) -> bool:
    """Slices (op, output k, part index) of x's n equal parts along axis: GATHERs of x
    reshaped to [..., n, size / n, ...], then `_rewrite`."""
    shape = ed.shape(x)
    if ed.is_output(x) or ed.sg.tensors[x].quantization is not None:
        return False
    parts = shape[:axis] + (n, shape[axis] // n) + shape[axis + 1:]
    plan = _plan(ed, parts, axis, [op.outputs[k] for op, k, _ in slices])
    if plan is None:
        return False
    first = min((op for op, _, _ in slices), key=ed.sg.operators.index)
    name = ed.sg.tensors[x].name
    stacked = ed.tensor(f"{name}/parts", parts, ed.sg.tensors[x].dtype)
    reshape = ed.new_op("RESHAPE", [x, ed.const(np.array(parts, np.int32), f"{name}/parts")],
                        [stacked], {"new_shape": parts})
    ed.insert_before(first, reshape)
    gathers = []
    for op, k, index in slices:
        gathers.append(ed.new_op("GATHER", [stacked, ed.const(np.array(index, np.int32),
                                                              f"{name}/part{index}")],
                                 [op.outputs[k]], {"axis": axis}))
    for op in {id(op): op for op, _, _ in slices}.values():
        ed.remove(op)
    for g in reversed(gathers):
        ed.insert_after(reshape, g)
    _rewrite(ed, stacked, gathers[0], gathers, plan)
    return True


def _rewrite(ed: Editor, x: int, first, gathers, plan) -> None:
    """One RESHAPE and TRANSPOSE of x before `first`; each gather then reads its slice along
    axis 0, already in the layout its branch's transpose made."""
    branches, split_shape, whole = plan
    name = ed.sg.tensors[x].name
    split = x
    if split_shape != ed.shape(x):
        split = ed.tensor(f"{name}/heads", split_shape, ed.sg.tensors[x].dtype)
        ed.insert_before(first, ed.new_op(
            "RESHAPE", [x, ed.const(np.array(split_shape, np.int32), f"{name}/heads_shape")],
            [split], {"new_shape": split_shape}))
    moved_shape = tuple(split_shape[i] for i in whole)
    moved = ed.tensor(f"{name}/heads_moved", moved_shape, ed.sg.tensors[x].dtype)
    ed.insert_before(first, ed.new_op(
        "TRANSPOSE", [split, ed.const(np.array(whole, np.int32), f"{name}/heads_perm")],
        [moved]))
    for g, (reshapes, chain, transpose) in zip(gathers, branches):
        ed.set_input(g, 0, moved)
        g.options = g.options.replace(axis=0)
        for op in [g] + chain:
            ed.sg.tensors[op.outputs[0]].shape = moved_shape[1:]
        for reshape in reshapes:
            ed.replace_uses(reshape.outputs[0], reshape.inputs[0])
            ed.remove(reshape)
        ed.replace_uses(transpose.outputs[0], transpose.inputs[0])
        ed.remove(transpose)


def _split_point(shape, axis: int, target):
    """k with prod(target[:k]) == prod(shape[:axis]) (the last such), so that
    reshape(x, target[:k] + [shape[axis]] + target[k:]) keeps each slice's reshape; or None."""
    before, after = math.prod(shape[:axis]), math.prod(shape[axis + 1:])
    found = None
    for k in range(len(target) + 1):
        if math.prod(target[:k]) == before and math.prod(target[k:]) == after:
            found = k
    return found


# -- scales ---------------------------------------------------------------------------------------

def fold_head_scales(model: Model) -> bool:
    """MUL (or DIV) by a constant of one value on a head slice of a projection (q or k scaled
    by d^-1/4), or on the scores of a BATCH_MATMUL of one (q k^T / sqrt d): the projection's
    weight and bias rows of that slice are scaled instead."""
    changed = False
    for sg in model.subgraphs:
        ed = Editor(model, sg)
        for op in list(sg.operators):
            if op.op not in ("MUL", "DIV") or not ed.has(op) or \
                    op.options.fused_activation_function != 0:
                continue
            for k in (0, 1) if op.op == "MUL" else (0,):
                factor = ed.value(op.inputs[1 - k])
                if factor is None or factor.size != 1 or len(ed.shape(op.inputs[1 - k])) > 1 \
                        or factor.dtype != np.float32:
                    continue
                factor = float(factor.reshape(-1)[0])
                if op.op == "DIV":
                    if factor == 0:
                        break
                    factor = 1 / factor
                if _fold_scale(ed, op, op.inputs[k], factor):
                    changed = True
                    break
        if changed:
            remove_dead(sg)
    return changed


def _scaled_rows(w: np.ndarray, rows, factor: float) -> np.ndarray:
    out = w.copy()
    out[rows] *= np.float32(factor)
    return out


def _fold_scale(ed: Editor, mul, t: int, factor: float) -> bool:
    if ed.shape(t) != ed.shape(mul.outputs[0]) or not ed.only_read_by(t, mul):
        return False
    data, source = t, ed.producer(t)
    if source is not None and source.op == "BATCH_MATMUL" and not source.options.adj_x:
        t = source.inputs[0]            # scores = (q k^T) * c = (q c) k^T
        if not ed.only_read_by(t, source):
            return False
    found = _slice_rows(ed, t)
    if found is None:
        return False
    fc, rows = found
    w, b = ed.value(fc.inputs[1]), ed.value(fc.inputs[2]) if fc.inputs[2] >= 0 else None
    weights = w
    w = memo.made("fold_scale", [weights], (rows, factor),
                  lambda: [_scaled_rows(weights, rows, factor)])[0]
    name = ed.sg.tensors[fc.inputs[1]].name
    inputs = [fc.inputs[0], ed.const(w, f"{name}/scaled"), fc.inputs[2]]
    if b is not None:
        b = b.copy()
        b[rows] *= np.float32(factor)
        inputs[2] = ed.const(b, f"{ed.sg.tensors[fc.inputs[2]].name}/scaled")
    ed.set_inputs(fc, inputs)
    ed.replace_uses(mul.outputs[0], data)
    ed.remove(mul)
    return True


def _slice_rows(ed: Editor, t: int):
    """(FULLY_CONNECTED, slice of its output units) when t is GATHER(i, axis 0) of a TRANSPOSE
    that moves axis a first, of RESHAPEs of the op's output, and slice i of axis a is a run of
    its units."""
    gather = ed.producer(t)
    if gather is None or gather.op != "GATHER" or gather.options.axis != 0:
        return None
    index = ed.value(gather.inputs[1])
    transpose = ed.producer(gather.inputs[0])
    perm = ed.transpose_perm(transpose)
    if index is None or index.ndim != 0 or perm is None:
        return None
    shape = ed.shape(transpose.inputs[0])
    u = transpose.inputs[0]
    while ed.producer(u) is not None and ed.producer(u).op == "RESHAPE" and \
            len(ed.readers(u)) == 1 and not ed.is_output(u):
        u = ed.producer(u).inputs[0]
    fc = ed.producer(u)
    if fc is None or _projection(ed, fc) is None or fc.options.fused_activation_function != 0 \
            or len(fc.inputs) < 3 or len(ed.readers(u)) != 1 or ed.is_output(u) \
            or ed.is_output(transpose.inputs[0]):
        return None
    units, a = ed.shape(u)[-1], perm[0]
    if math.prod(shape[a:]) != units or math.prod(shape[:a]) * units != math.prod(ed.shape(u)):
        return None
    size = units // shape[a]
    i = int(index)
    return fc, slice(i * size, (i + 1) * size)
