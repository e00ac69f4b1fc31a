"""Chains of Transpose and Reshape composed into one TRANSPOSE (converter/pass_permute.py): HF
MobileViT's unfold and fold, Swin's window partition and reverse around its attention, random
chains; each checked against onnxruntime in edgelite and LiteRT, transposes counted."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from edgelite.converter.pass_permute import MAX_RANK, _moves, compose, permutation
from tests.converter.onnx_cases import check, convert, model, node, w

pytest.importorskip("ai_edge_litert.interpreter",
                    reason="LiteRT (ai-edge-litert) is the oracle: pip install -e '.[dev]'")

I64 = np.int64


def _shape(name: str, dims) -> tuple:
    return name, np.array(dims, I64)


def _times(b: int, k: int) -> int:
    """A target dim holding the batch times k: -1 when the batch is open (b == -1)."""
    return k if b == 1 else -1


def _mobilevit(c=8, h=8, p=2, batch=1):
    """Conv -> unfold -> MatMul + residual -> fold -> Conv, as HF MobileViT writes them (an
    open batch as -1 in the targets)."""
    n, a = (h // p) ** 2, p * p
    b = 1 if batch == 1 else -1
    shapes = dict([
        _shape("u1", [_times(b, c * (h // p)), p, h // p, p]), _shape("u2", [b, c, n, a]),
        _shape("u3", [_times(b, a), n, c]), _shape("f1", [b, a, n, c]),
        _shape("f2", [_times(b, c * (h // p)), h // p, p, p]), _shape("f3", [b, c, h, h])])
    nodes = [node("Conv", ["x", "W0"], ["c0"]),
             node("Reshape", ["c0", "u1"], ["r1"]),
             node("Transpose", ["r1"], ["t1"], perm=[0, 2, 1, 3]),
             node("Reshape", ["t1", "u2"], ["r2"]),
             node("Transpose", ["r2"], ["t2"], perm=[0, 3, 2, 1]),
             node("Reshape", ["t2", "u3"], ["patches"]),
             node("MatMul", ["patches", "Wm"], ["mm"]),
             node("Relu", ["mm"], ["act"]),
             node("Add", ["patches", "act"], ["res"]),
             node("Reshape", ["res", "f1"], ["g1"]),
             node("Transpose", ["g1"], ["s1"], perm=[0, 3, 2, 1]),
             node("Reshape", ["s1", "f2"], ["g2"]),
             node("Transpose", ["g2"], ["s2"], perm=[0, 2, 1, 3]),
             node("Reshape", ["s2", "f3"], ["folded"]),
             node("Conv", ["folded", "W1"], ["y"])]
    return model(nodes, [("x", [batch, 3, h, h])], ["y"],
                 {"W0": w(c, 3, 1, 1), "Wm": w(c, c), "W1": w(4, c, 1, 1), **shapes})


def test_mobilevit_unfold_and_fold_are_one_transpose_each():
    conversion = check(_mobilevit())
    assert conversion.transposes == 2, conversion.ops_out


def _swin(h=8, ws=4, c=12, heads=3, batch=1):
    """Swin's block: window partition, qkv projection, head split, attention, head merge,
    output projection, window reverse, residual (torchvision's shifted_window_attention)."""
    d, nw, n = c // heads, h // ws, ws * ws
    b = 1 if batch == 1 else -1
    shapes = dict([
        _shape("p1", [b, nw, ws, nw, ws, c]), _shape("p2", [_times(b, nw * nw), n, c]),
        _shape("q1", [_times(b, nw * nw), n, 3, heads, d]),
        _shape("m1", [_times(b, nw * nw), n, c]),
        _shape("v1", [b, nw, nw, ws, ws, c]), _shape("v2", [b, h, h, c])])
    nodes = [node("Relu", ["x"], ["xr"]),
             node("Reshape", ["xr", "p1"], ["a1"]),
             node("Transpose", ["a1"], ["a2"], perm=[0, 1, 3, 2, 4, 5]),
             node("Reshape", ["a2", "p2"], ["windows"]),
             node("MatMul", ["windows", "Wqkv"], ["qkv0"]),
             node("Add", ["qkv0", "Bqkv"], ["qkv1"]),
             node("Reshape", ["qkv1", "q1"], ["qkv2"]),
             node("Transpose", ["qkv2"], ["qkv"], perm=[2, 0, 3, 1, 4]),
             node("Gather", ["qkv", "i0"], ["q"], axis=0),
             node("Gather", ["qkv", "i1"], ["k"], axis=0),
             node("Gather", ["qkv", "i2"], ["v"], axis=0),
             node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             node("MatMul", ["q", "kt"], ["logits"]),
             node("Add", ["logits", "bias"], ["biased"]),
             node("Softmax", ["biased"], ["attn"], axis=-1),
             node("MatMul", ["attn", "v"], ["o"]),
             node("Transpose", ["o"], ["o1"], perm=[0, 2, 1, 3]),
             node("Reshape", ["o1", "m1"], ["o2"]),
             node("MatMul", ["o2", "Wp"], ["o3"]),
             node("Add", ["o3", "Bp"], ["o4"]),
             node("Reshape", ["o4", "v1"], ["b1"]),
             node("Transpose", ["b1"], ["b2"], perm=[0, 1, 3, 2, 4, 5]),
             node("Reshape", ["b2", "v2"], ["back"]),
             node("Add", ["x", "back"], ["y"])]
    inits = {"Wqkv": w(c, 3 * c), "Bqkv": w(3 * c), "Wp": w(c, c), "Bp": w(c),
             "bias": w(heads, n, n), "i0": np.array(0, I64), "i1": np.array(1, I64),
             "i2": np.array(2, I64), **shapes}
    return model(nodes, [("x", [batch, h, h, c])], ["y"], inits)


def test_swin_window_attention_has_two_transposes():
    """Partition + qkv + head split is one 7-D transpose (the projection moved before it),
    head merge + projection + reverse one 6-D (the projection moved after it)."""
    conversion = check(_swin())
    assert conversion.transposes == 2, conversion.ops_out
    sg = conversion.model.subgraphs[0]
    ranks = sorted(len(sg.tensors[op.inputs[0]].shape) for op in sg.operators
                   if op.op == "TRANSPOSE")
    assert ranks == [6, 7]


def _random_steps(rng, shape, n: int, transpose_first: bool = True) -> list:
    """n steps [("transpose", perm) | ("reshape", shape)] on `shape`: transposes permute the
    dims, reshapes regroup the current order of the input dims' prime factors (so the chain is
    a permutation of those factors)."""
    dims = [_primes(d) for d in shape]
    steps = []
    for k in range(n):
        if (k % 2 == 0) == transpose_first and len(dims) > 1:
            perm = tuple(int(p) for p in rng.permutation(len(dims)))
            dims = [dims[p] for p in perm]
            steps.append(("transpose", perm))
            continue
        seq = [f for fs in dims for f in fs]
        cuts = sorted(int(c) for c in rng.choice(np.arange(len(seq) + 1),
                                                 size=int(rng.integers(0, 4)), replace=True))
        bounds = [0] + cuts + [len(seq)]
        dims = [seq[i:j] for i, j in zip(bounds, bounds[1:])]
        steps.append(("reshape", tuple(int(np.prod(g)) for g in dims)))
    return steps


def _random_chain(seed: int):
    """A random chain of Transpose and Reshape on a [2, 6, 4, 3]-like input, between Relus."""
    rng = np.random.default_rng(seed)
    shape = [int(d) for d in rng.choice([2, 3, 4, 6], size=int(rng.integers(3, 5)))]
    nodes, inits, t = [node("Relu", ["x"], ["t0"])], {}, "t0"
    for k, (kind, arg) in enumerate(_random_steps(rng, shape, int(rng.integers(3, 7)))):
        out = f"t{k + 1}"
        if kind == "transpose":
            nodes.append(node("Transpose", [t], [out], perm=list(arg)))
        else:
            inits[f"s{k}"] = np.array(arg, I64)
            nodes.append(node("Reshape", [t, f"s{k}"], [out]))
        t = out
    nodes.append(node("Relu", [t], ["y"]))
    return model(nodes, [("x", shape)], ["y"], inits)


def _primes(d: int) -> list:
    out, p = [], 2
    while d > 1:
        while d % p == 0:
            out.append(p)
            d //= p
        p += 1
    return out


@pytest.mark.parametrize("seed", range(12))
def test_random_chain_is_one_transpose(seed):
    conversion = check(_random_chain(seed))
    assert conversion.transposes <= 1, conversion.ops_out
    assert conversion.ops_out.get("RESHAPE", 0) <= 2, conversion.ops_out


def _apply(x, steps):
    for kind, arg in steps:
        x = x.transpose(arg) if kind == "transpose" else x.reshape(arg)
    return x


@pytest.mark.parametrize("seed", range(200))
def test_compose_matches_numpy(seed):
    """The composed reshape -> transpose -> reshape moves every element where the chain does."""
    rng = np.random.default_rng(seed)
    shape = [int(d) for d in rng.choice([1, 2, 3, 4, 6], size=int(rng.integers(2, 5)))]
    steps = _random_steps(rng, shape, int(rng.integers(1, 7)), bool(seed % 2))
    x = np.arange(int(np.prod(shape))).reshape(shape)
    want = _apply(x, steps)
    factors = compose(shape, steps)
    in_seq = [f for fs in factors.source for f in fs]
    out_seq = [f for fs in factors.dims for f in fs]
    emit = _moves(factors.sizes, in_seq, out_seq, shape, want.shape)
    assert emit is not None
    assert sum(kind == "transpose" for kind, _ in emit) <= 1
    np.testing.assert_array_equal(_apply(x, emit), want)


def test_compose_refuses_a_cut_inside_a_factor():
    """[6] -> transpose of [2, 3] -> [3, 2] -> [2, 3] cuts the 3 of [3, 2] at 2: no factors."""
    assert compose((2, 3), [("transpose", (1, 0)), ("reshape", (2, 3))]) is None


def test_no_transpose_past_litert_rank():
    """Nine factors no two of which stay together: no composed TRANSPOSE (LiteRT 2.3 refuses
    more than 8 dims, test_litert_transpose_rank)."""
    sizes = [2] * 9
    in_seq, out_seq = list(range(9)), [8, 6, 4, 2, 0, 7, 5, 3, 1]
    assert len(permutation(sizes, in_seq, out_seq)[1]) == 9 > MAX_RANK
    assert _moves(sizes, in_seq, out_seq, (512,), (512,)) is None
    assert _moves(sizes, in_seq[:8], [f for f in out_seq if f != 8], (256,), (256,)) is not None


def test_litert_runs_a_transpose_of_max_rank():
    """MAX_RANK is LiteRT's: it runs an 8-D TRANSPOSE (a 9-D one it refuses at prepare:
    "Transpose op only supports 1D-8D input arrays")."""
    ai_edge_litert = pytest.importorskip("ai_edge_litert.interpreter")
    from edgelite.schema import save

    perm = list(range(MAX_RANK))[::-1]
    conversion = convert(model([node("Transpose", ["x"], ["y"], perm=perm)],
                               [("x", [2] * MAX_RANK)], ["y"]))
    interpreter = ai_edge_litert.Interpreter(model_content=save(conversion.model))
    interpreter.allocate_tensors()
    x = np.arange(2 ** MAX_RANK, dtype=np.float32).reshape([2] * MAX_RANK)
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    np.testing.assert_array_equal(
        interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), x.transpose(perm))


def test_transposes_in_a_row_stay_one_transpose_with_open_dims():
    """Transposes alone compose to one TRANSPOSE of the input's own dims: no RESHAPE whose
    constant target would fix the open height and width."""
    proto = model([node("Relu", ["x"], ["r"]),
                   node("Transpose", ["r"], ["t1"], perm=[0, 2, 1, 3]),
                   node("Transpose", ["t1"], ["t2"], perm=[0, 1, 3, 2]),
                   node("Transpose", ["t2"], ["t3"], perm=[3, 1, 2, 0]),
                   node("Relu", ["t3"], ["y"])], [("x", [2, "h", "w", 5])], ["y"])
    conversion = check(proto)
    assert conversion.ops_out.get("TRANSPOSE") == 1 and "RESHAPE" not in conversion.ops_out, \
        conversion.ops_out
    sg = conversion.model.subgraphs[0]
    assert sg.tensors[sg.inputs[0]].shape_signature == (2, -1, -1, 5)


@pytest.mark.parametrize("build, channels_first", [(_mobilevit, True), (_swin, False)])
def test_open_batch_keeps_the_transposes_down(build, channels_first):
    """With an open batch (the graphs at two batch sizes differ only in it) the composed
    transposes stay, and both runtimes match onnxruntime at batches 1, 2 and 3."""
    from tests.converter.test_convert_dynamic import check_sizes

    proto = build(batch="n")
    out = proto.graph.output[0]
    out_dims = [4, 8, 8] if channels_first else [8, 8, 12]
    out.CopyFrom(helper.make_tensor_value_info(out.name, TensorProto.FLOAT, ["n"] + out_dims))
    conversion = convert(proto)
    assert conversion.transposes == 2, conversion.ops_out
    sg = conversion.model.subgraphs[0]
    assert sg.tensors[sg.inputs[0]].shape_signature[0] == -1
    rest = [3, 8, 8] if channels_first else [8, 8, 12]
    check_sizes(proto, conversion, [[[n] + rest] for n in (1, 2, 3)])
