"""Tensors that are views of another tensor's array, so that the ops moving them run no step.

`plan._aliases` already makes a RESHAPE, SQUEEZE or EXPAND_DIMS output a view of its input. This
adds two kinds, each only where the view is C-contiguous (kernels bind reshapes of their arrays
at allocate; a reshape of a non-contiguous view would be a copy, silently stale):

- a slice: a STRIDED_SLICE or SLICE with constant parameters (its kernel's `run.view`) reads
  its output as a view of its input, and so do SPLIT, SPLIT_V and UNPACK (`run.views`) when
  every output can be one;
- a part: the inputs of a CONCATENATION that copies raw values (every input quantized as the
  output) are views of the parts of its output, so their producers write there directly; the
  inputs that cannot be (a subgraph input, a constant, a view already, parts that would not be
  contiguous) are copied into their parts by a step of bound copies.

A streaming model (micro-wake-word's ring buffers: READ_VARIABLE -> CONCATENATION(state, new)
-> STRIDED_SLICE(tail) -> ASSIGN_VARIABLE) then runs only its READ and ASSIGN copies: the
variable read writes into the head of the concatenation, the producer of the new frame into its
tail, and the slice the ASSIGN reads is the concatenation's tail.

`plan_views` returns the specs left and `make(arrays)`, which sets every aliased tensor's array
(views of views in order); the lifetimes of a view's uses are its root's.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from . import mixconv
from .kernels.common import activation_code, raw

CONCAT_OPS = frozenset({"CONCATENATION"})


class Views:
    """Tensor -> (parent tensor, function of the parent's array giving its own)."""

    def __init__(self, infos, reshapes: dict):
        self.parent: dict = {t: (root, _reshaped(infos[t].shape))
                             for t, root in reshapes.items()}

    def root(self, t: int) -> int:
        while t in self.parent:
            t = self.parent[t][0]
        return t

    def roots(self) -> dict:
        return {t: self.root(t) for t in self.parent}

    def make(self, arrays: list) -> None:
        done: set = set()

        def build(t):
            if t in done or t not in self.parent:
                return
            p, fn = self.parent[t]
            build(p)
            arrays[t] = fn(arrays[p])
            done.add(t)
        for t in self.parent:
            build(t)


def _reshaped(shape):
    return lambda a: a.view().reshape(shape)


def _contiguous(fn, info_in, info_out) -> bool:
    """`fn` on a C-contiguous array of the input's shape gives a C-contiguous view of the
    output's shape (probed on a scratch array of that shape)."""
    probe = np.empty(info_in.shape, info_in.dtype)
    try:
        view = fn(probe)
    except (ValueError, IndexError, TypeError):
        return False
    return (view.shape == tuple(info_out.shape) and view.flags.c_contiguous
            and view.dtype == info_out.dtype and np.shares_memory(view, probe))


def _parts(shapes: list, axis: int):
    """Views of the consecutive blocks of `shapes` along `axis`, given the output's array."""
    starts = np.cumsum([0] + [s[axis] for s in shapes])

    def part(k):
        index = (slice(None),) * axis + (slice(int(starts[k]), int(starts[k + 1])),)
        return lambda a: a[index]
    return [part(k) for k in range(len(shapes))]


def _raw_concat(op, infos, ins: list, outs: list):
    """The axis of a CONCATENATION that copies raw values (one output, no activation, every
    input of the output's type and quantization), or None."""
    if len(outs) != 1 or not ins or any(t < 0 for t in ins) or len(set(ins)) != len(ins):
        return None
    opts = op.options
    if opts is None or activation_code(opts):
        return None
    out = infos[outs[0]]
    rank = len(out.shape)
    if rank == 0 or any(len(infos[t].shape) != rank or infos[t].dtype != out.dtype
                        for t in ins):
        return None
    if any(infos[t].scale != out.scale or infos[t].zero_point != out.zero_point for t in ins):
        return None
    axis = int(opts.axis)
    axis = axis + rank if axis < 0 else axis
    return axis if 0 <= axis < rank else None


def plan_views(plan, specs: list, own: set, reshapes: dict):
    """(the specs left, {tensor: root}, Views) for `plan` (a SubgraphPlan) whose `_aliases` gave
    `reshapes` ({tensor: root}) and left `specs`."""
    views = Views(plan.infos, reshapes)
    infos, dynamic, ops = plan.infos, plan.dynamic, plan.sg.operators
    if plan.runtime.delegates:
        return specs, views.roots(), views
    specs = mixconv.fuse(plan, specs, own, reshapes)
    written = {t for _, _, _, outs in specs for t in outs}

    def free(t) -> bool:
        """A tensor that may become a view: written by one step, no subgraph input or output,
        constant, variable or view already."""
        return (t >= 0 and t not in own and t not in dynamic and t in written
                and t not in views.parent and infos[t].data is None
                and not infos[t].is_variable)

    dropped, copies = set(), {}
    for s, (oi, _run, ins, outs) in enumerate(specs):
        if ops[oi].opcode.name not in CONCAT_OPS or not outs:
            continue
        axis = _raw_concat(ops[oi], infos, ins, outs)
        y = outs[0]
        if axis is None or y in dynamic or infos[y].is_variable or infos[y].data is not None:
            continue
        # Parts are contiguous when every axis before `axis` has size 1; the inputs that
        # cannot be views are copied into theirs by a step of bound copies.
        whole = int(np.prod(infos[y].shape[:axis], dtype=np.int64)) == 1
        left = []
        for t, fn in zip(ins, _parts([infos[t].shape for t in ins], axis)):
            if whole and free(t):
                views.parent[t] = (y, fn)
            else:
                left.append((t, fn))
        if left:
            copies[s] = (oi, _copy_parts([fn for _, fn in left]), [t for t, _ in left], [y])
        else:
            dropped.add(s)
    for s, (_oi, run, ins, outs) in enumerate(specs):
        if s in dropped or not outs:
            continue
        if getattr(run, "view", None) is not None and len(outs) == 1:
            k, fns = 0, [run.view]
        elif getattr(run, "views", None) is not None:    # SPLIT, SPLIT_V, UNPACK
            k, whole = run.views
            fns = [lambda a, j=j, whole=whole: whole(a)[j] for j in range(len(outs))]
        else:
            continue
        x = ins[k] if k < len(ins) else -1
        if x < 0 or x in dynamic or infos[x].data is not None or infos[x].is_variable or \
                any(not free(y) or views.root(x) == y or not _contiguous(fn, infos[x], infos[y])
                    for y, fn in zip(outs, fns)):
            continue
        for y, fn in zip(outs, fns):
            views.parent[y] = (x, fn)
        dropped.add(s)
    kept = [copies.get(s, spec) for s, spec in enumerate(specs) if s not in dropped]
    return kept, views.roots(), views


def _copy_parts(parts: list):
    """A raw CONCATENATION's step, its inputs that are no views of its output copied into
    their parts: run(*inputs, out), and its bound form (plan.bind_step)."""
    def concatenation_parts(*arrays):
        out = arrays[-1]
        for part, x in zip(parts, arrays[:-1]):
            np.copyto(part(out), x)

    def bind(*arrays):
        copyto = raw(np.copyto)
        pairs = [(part(arrays[-1]), x) for part, x in zip(parts, arrays[:-1])]
        if len(pairs) == 1:
            return partial(copyto, *pairs[0])

        def copy():
            for dest, x in pairs:
                copyto(dest, x)
        return copy
    concatenation_parts.bind = bind
    return concatenation_parts
