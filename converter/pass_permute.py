"""Permute: a chain of TRANSPOSE and RESHAPE ops (each one's output read by the next alone)
moves data as one permutation of the finest factors of its dims. Composed, it is at most one
RESHAPE -> TRANSPOSE -> RESHAPE, or one RESHAPE when the permutation keeps memory order.

HF MobileViT's unfold (to NCHW, reshape, transpose, reshape, transpose, reshape: [1, 16, 16, C]
-> [4, 64, C]) is [nh, ph, nw, pw, C] -> [ph, pw, nh, nw, C]: one 5-D transpose, not three.

Factors: each dim of the chain's input is one factor (size-1 dims none); a RESHAPE regroups the
current factors in memory order, splitting a factor where a new dim ends inside it (everywhere
it occurs, the input's dims too); a TRANSPOSE permutes the dims' factor lists. At the end the
output's factors are a permutation of the input's; factors next to each other in both are one.
Fixed shapes only: a RESHAPE whose target the graph computes (dynamic dims) ends a chain, and
TRANSPOSEs alone compose to one TRANSPOSE with no RESHAPE (whose constant target would fix open
dims). An open batch alone is found as before, by converting at two batch sizes.

A FULLY_CONNECTED in a chain maps its input's last dim (its factors L) to a new one (N): it is
moved to the chain's start when L are the input's last factors in order, or to its end when N's
factors are the output's last: the rest is one permutation again. Swin's window partition, qkv
projection and head split ([1, 56, 56, 288]: [nh, wh, nw, ww, 3, heads, d] -> [3, nh, nw, heads,
wh, ww, d]) is one 7-D transpose, its head merge, output projection and window reverse one 6-D.
"""
from __future__ import annotations

import numpy as np

from edgelite.schema import Model, remove_dead

from .builder import TRANSPOSE_MAX_RANK
from .editor import Editor
from .pass_layout import moves_data

# LiteRT 2.3 refuses more dims ("Transpose op only supports 1D-8D input arrays"). Its XNNPACK
# delegate takes 6 at most: a 7-D TRANSPOSE runs in the builtin kernel, Swin's [8, 7, 8, 7, 3, 3,
# 32] in 0.56 ms where XNNPACK's 6-D + 5-D pair takes 0.35 (builtin alone: 0.63 vs 0.85, edgelite
# 0.47 vs 0.58; benchmarks/bench_permute.py: the whole Swin-T 1.00-1.06x in LiteRT). 6 here
# leaves Swin 34 transposes instead of 24.
MAX_RANK = TRANSPOSE_MAX_RANK


def compose_permutations(model: Model) -> bool:
    """Rewrite chains of TRANSPOSE/RESHAPE as at most one RESHAPE->TRANSPOSE->RESHAPE."""
    changed = False
    for sg in model.subgraphs:
        ed = Editor(model, sg)
        for chain in _chains(ed):
            changed |= _rewrite_best(ed, chain)
        if changed:
            remove_dead(sg)
    return changed


# -- chains ------------------------------------------------------------------------------------

def _link(ed: Editor, op) -> bool:
    """An op a chain may hold: a TRANSPOSE with a constant perm, a RESHAPE with a constant
    (or no) target, a FULLY_CONNECTED with 2-D weights; shapes fully known."""
    if op.op == "TRANSPOSE":
        ok = ed.transpose_perm(op) is not None
    elif op.op == "RESHAPE":
        ok = len(op.inputs) < 2 or op.inputs[1] < 0 or ed.value(op.inputs[1]) is not None
    elif op.op == "FULLY_CONNECTED":
        w = ed.shape(op.inputs[1])
        ok = len(w) == 2 and w[0] > 1 and w[1] > 1 and len(op.outputs) == 1 and \
            ed.shape(op.inputs[0])[-1:] != () and w[1] == ed.shape(op.inputs[0])[-1]
    else:
        return False
    return ok and all(d >= 0 for t in (op.inputs[0], op.outputs[0]) for d in ed.shape(t))


def _next(ed: Editor, op):
    """The one reader of `op`'s output when the chain goes on through it."""
    out = op.outputs[0]
    readers = ed.readers(out)
    if len(readers) != 1 or ed.is_output(out):
        return None
    reader = readers[0]
    return reader if _link(ed, reader) and reader.inputs[0] == out and \
        out not in reader.inputs[1:] else None


def _chains(ed: Editor) -> list:
    """Maximal chains of two or more linked ops, in graph order."""
    chains, inside = [], set()
    for op in list(ed.sg.operators):
        if id(op) in inside or not _link(ed, op):
            continue
        chain = [op]
        nxt = _next(ed, op)
        while nxt is not None and id(nxt) not in inside:
            chain.append(nxt)
            nxt = _next(ed, nxt)
        inside.update(id(o) for o in chain)
        if len(chain) > 1:
            chains.append(chain)
    return chains


# -- composition -------------------------------------------------------------------------------

class Factors:
    """The chain's input dims as factors (`source`: a list of factor ids per input dim), the
    current dims (`dims`), the factors' sizes, and what a FULLY_CONNECTED consumed (`fc_in`,
    factor ids) and made (`fc_out`, the ids its output dim is split into)."""

    def __init__(self, in_shape):
        self.sizes: list = []
        self.dims = [self._new(d) for d in in_shape]
        self.source = [list(f) for f in self.dims]
        self.fc_in = self.fc_out = None

    def _new(self, d) -> list:
        if d == 1:
            return []
        self.sizes.append(int(d))
        return [len(self.sizes) - 1]

    def transpose(self, perm) -> None:
        self.dims = [self.dims[p] for p in perm]

    def fully_connected(self, n: int) -> None:
        self.fc_in = self.dims[-1]
        self.fc_out = self._new(n)
        self.dims = self.dims[:-1] + [list(self.fc_out)]

    def reshape(self, shape) -> bool:
        """Regroup the current factors into `shape`; False when a dim cannot be cut out."""
        seq = [f for fs in self.dims for f in fs]
        dims, k = [], 0
        for target in shape:
            group, product = [], 1
            while product < target and k < len(seq):
                f = seq[k]
                if product * self.sizes[f] <= target:
                    group.append(f)
                    product *= self.sizes[f]
                    k += 1
                    continue
                if target % product or self.sizes[f] % (target // product):
                    return False
                seq[k:k + 1] = self._split(f, target // product)
            if product != target:
                return False
            dims.append(group)
        self.dims = dims
        return k == len(seq)

    def _split(self, f: int, head: int) -> list:
        """Factor f as two, (head, rest), wherever it occurs."""
        pair = [len(self.sizes), len(self.sizes) + 1]
        self.sizes += [head, self.sizes[f] // head]
        cut = lambda fs: [g for h in fs for g in (pair if h == f else [h])]  # noqa: E731
        self.source = [cut(fs) for fs in self.source]
        # fc_in stays as it is: f comes from the current dims, and a FULLY_CONNECTED took its
        # input's factors out of them (it consumed them), so no later reshape cuts one.
        if self.fc_in is not None:
            self.fc_out = cut(self.fc_out)
        return pair

    def size(self, seq) -> int:
        return int(np.prod([self.sizes[f] for f in seq], dtype=np.int64))


def compose(in_shape, steps) -> Factors | None:
    """The factors of `steps` [("reshape", shape) | ("transpose", perm) | ("fc", n)] applied
    to in_shape; None when a reshape cuts a factor where no whole factor fits."""
    factors = Factors(in_shape)
    for kind, arg in steps:
        if kind == "transpose":
            factors.transpose(arg)
        elif kind == "fc":
            factors.fully_connected(arg)
        elif not factors.reshape(arg):
            return None
    return factors


def permutation(sizes, in_seq, out_seq):
    """(factor shape in input order, perm): out_seq is transpose(reshape(in_seq's factors,
    shape), perm), factors that are next to each other in both taken as one. None when
    out_seq is not a permutation of in_seq."""
    if sorted(in_seq) != sorted(out_seq):
        return None
    where = {f: i for i, f in enumerate(in_seq)}
    runs = []
    for f in out_seq:
        if runs and where[runs[-1][-1]] + 1 == where[f]:
            runs[-1].append(f)
        else:
            runs.append([f])
    in_order = sorted(range(len(runs)), key=lambda r: where[runs[r][0]])
    shape = [int(np.prod([sizes[f] for f in runs[r]], dtype=np.int64)) for r in in_order]
    rank_of = {r: i for i, r in enumerate(in_order)}
    return shape, [rank_of[r] for r in range(len(runs))]


def _moves(sizes, in_seq, out_seq, in_shape, out_shape) -> list | None:
    """The ops that take a tensor of in_shape (factors in_seq) to out_shape (factors out_seq):
    [("reshape", shape) | ("transpose", perm)], or None past LiteRT's TRANSPOSE rank."""
    composed = permutation(sizes, in_seq, out_seq)
    if composed is None:
        return None
    shape, perm = composed
    if perm == sorted(perm):
        return [] if tuple(in_shape) == tuple(out_shape) else [("reshape", tuple(out_shape))]
    if len(perm) > MAX_RANK:
        return None
    emit = [] if tuple(in_shape) == tuple(shape) else [("reshape", tuple(shape))]
    emit.append(("transpose", tuple(perm)))
    if tuple(shape[p] for p in perm) != tuple(out_shape):
        emit.append(("reshape", tuple(out_shape)))
    return emit


def _steps(ed: Editor, chain) -> list:
    steps = []
    for op in chain:
        out = tuple(int(d) for d in ed.shape(op.outputs[0]))
        if op.op == "TRANSPOSE":
            steps.append(("transpose", ed.transpose_perm(op)))
            continue
        if op.op == "FULLY_CONNECTED":
            steps.append(("fc", out[-1]))
        steps.append(("reshape", out))
    return steps


def _moving(ed: Editor, chain) -> int:
    return sum(op.op == "TRANSPOSE" and moves_data(ed.transpose_perm(op), ed.shape(op.inputs[0]))
               for op in chain)


def _plan(ed: Editor, chain):
    """(cost, ops to emit) for `chain` composed, or None. Cost: (moving transposes, ops)."""
    fcs = [op for op in chain if op.op == "FULLY_CONNECTED"]
    if len(fcs) > 1:
        return None
    x, z = chain[0].inputs[0], chain[-1].outputs[0]
    in_shape, out_shape = tuple(ed.shape(x)), tuple(int(d) for d in ed.shape(z))
    factors = compose(in_shape, _steps(ed, chain))
    if factors is None:
        return None
    in_seq = [f for fs in factors.source for f in fs]
    out_seq = [f for fs in factors.dims for f in fs]
    if all(op.op == "TRANSPOSE" for op in chain):
        emit = _transposes(ed, chain)   # no reshapes: their targets would fix dynamic dims
    elif not fcs:
        emit = _moves(factors.sizes, in_seq, out_seq, in_shape, out_shape)
    else:
        emit = _plan_fc(ed, fcs[0], factors, in_seq, out_seq, in_shape, out_shape)
    if emit is None:
        return None
    if not emit and ed.is_output(z) and (x in ed.sg.inputs or ed.is_output(x)):
        emit = [("reshape", out_shape)]
    return (sum(kind == "transpose" for kind, _ in emit), len(emit)), emit


def _transposes(ed: Editor, chain) -> list:
    """TRANSPOSEs in a row as one (none when they cancel)."""
    perm = tuple(range(len(ed.shape(chain[0].inputs[0]))))
    for op in chain:
        perm = tuple(perm[p] for p in ed.transpose_perm(op))
    return [] if perm == tuple(sorted(perm)) else [("transpose", perm)]


def _plan_fc(ed: Editor, fc, factors, in_seq, out_seq, in_shape, out_shape):
    """The FULLY_CONNECTED moved to the chain's start (its input dim's factors end in_seq)
    or its end (its output dim's factors end out_seq), the rest one permutation."""
    k_in, n_out = factors.fc_in, factors.fc_out
    k, n = factors.size(k_in), factors.size(n_out)
    plans = []
    if in_seq[len(in_seq) - len(k_in):] == k_in:
        lead = in_shape[:-1] if in_shape[-1:] == (k,) else (int(np.prod(in_shape)) // k,)
        emit = [] if lead == in_shape[:-1] else [("reshape", lead + (k,))]
        emit.append(("fc", (fc, lead + (n,))))
        moves = _moves(factors.sizes, in_seq[:len(in_seq) - len(k_in)] + n_out, out_seq,
                       lead + (n,), out_shape)
        if moves is not None:
            plans.append(emit + moves)
    if out_seq[len(out_seq) - len(n_out):] == n_out:
        lead = out_shape[:-1] if out_shape[-1:] == (n,) else (int(np.prod(out_shape)) // n,)
        moves = _moves(factors.sizes, in_seq, out_seq[:len(out_seq) - len(n_out)] + k_in,
                       in_shape, lead + (k,))
        if moves is not None:
            emit = moves + [("fc", (fc, lead + (n,)))]
            plans.append(emit if lead == out_shape[:-1] else emit + [("reshape", out_shape)])
    if not plans:
        return None
    return min(plans, key=lambda e: (sum(kind == "transpose" for kind, _ in e), len(e)))


def _rewrite_best(ed: Editor, chain) -> bool:
    """Rewrite the sub-chains of `chain` that compose to fewer transposes (or as many in
    fewer ops), longest first."""
    changed = False
    lo = 0
    while lo < len(chain) - 1:
        for hi in range(len(chain), lo + 1, -1):
            part = chain[lo:hi]
            plan = _plan(ed, part)
            if plan is not None and plan[0] < (_moving(ed, part), len(part)):
                _emit(ed, part, plan[1])
                changed = True
                lo = hi - 1
                break
        lo += 1
    return changed


def _emit(ed: Editor, chain, emit) -> None:
    x, z = chain[0].inputs[0], chain[-1].outputs[0]
    last = chain[-1]
    if not emit:
        ed.replace_uses(z, x)
        for op in chain:
            ed.remove(op)
        return
    name = ed.sg.tensors[z].name
    fc_at = next((k for k, (kind, _) in enumerate(emit) if kind == "fc"), None)
    t = x
    for k, (kind, arg) in enumerate(emit):
        like = ed.sg.tensors[x if fc_at is not None and k < fc_at else z]
        if kind == "reshape":
            shape = arg
        elif kind == "fc":
            shape = arg[1]
        else:
            shape = tuple(ed.shape(t)[p] for p in arg)
        out = z if k == len(emit) - 1 else ed.tensor(f"{name}/permute{k}", shape, like.dtype)
        if out != z:
            ed.sg.tensors[out].quantization = like.quantization
        if kind == "reshape":
            op = ed.new_op("RESHAPE", [t, ed.const(np.array(arg, np.int32),
                                                   f"{name}/permute{k}/shape")],
                           [out], {"new_shape": tuple(arg)})
        elif kind == "fc":
            fc = arg[0]
            op = ed.new_op("FULLY_CONNECTED", [t] + list(fc.inputs[1:]), [out],
                           fc.options.replace(keep_num_dims=len(shape) != 2 or
                                              bool(fc.options.keep_num_dims)))
        else:
            op = ed.new_op("TRANSPOSE", [t, ed.const(np.array(arg, np.int32),
                                                     f"{name}/permute{k}/perm")], [out])
        ed.insert_before(last, op)
        t = out
    for op in chain:
        ed.remove(op)
