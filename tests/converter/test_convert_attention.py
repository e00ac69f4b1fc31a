"""Attention as exporters write it, built with onnx.helper: torch's MultiheadAttention (one
q/k/v projection, Gather of q, k, v), Hugging Face BERT-style (three Linear layers, keys
transposed for the score matmul) and a ViT-style patch embedding in front. Each converts with
at most two TRANSPOSE ops per attention block (one for q, k and v together, one after the
context), keys read through BATCH_MATMUL's adj_y, and matches onnxruntime in both runtimes."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from tests.converter.onnx_cases import F, check, model, node, w

I64 = np.int64
S, D, H = 6, 8, 2          # sequence, model width, heads
HD = D // H


def _torch_mha(x: str, out: str, p: str):
    """torch.nn.MultiheadAttention's export on [S, 1, D] (batch_first=False), as in
    ../shared/models/syn_transformer.onnx."""
    nodes = [node("MatMul", [x, f"{p}Win"], [f"{p}proj0"]),
             node("Add", [f"{p}proj0", f"{p}bin"], [f"{p}proj"]),
             node("Reshape", [f"{p}proj", f"{p}s3"], [f"{p}view"]),
             node("Unsqueeze", [f"{p}view", f"{p}zero"], [f"{p}unsq"]),
             node("Transpose", [f"{p}unsq"], [f"{p}tr"], perm=[3, 1, 2, 0, 4]),
             node("Squeeze", [f"{p}tr", f"{p}three"], [f"{p}qkv"])]
    for i, part in enumerate("qkv"):
        nodes += [node("Gather", [f"{p}qkv", f"{p}i{i}"], [f"{p}{part}0"], axis=0),
                  node("Reshape", [f"{p}{part}0", f"{p}heads"], [f"{p}{part}1"]),
                  node("Transpose", [f"{p}{part}1"], [f"{p}{part}2"], perm=[1, 0, 2])]
    nodes += [node("Reshape", [f"{p}q2", f"{p}s4"], [f"{p}q3"]),
              node("Reshape", [f"{p}v2", f"{p}s4"], [f"{p}v3"]),
              node("Transpose", [f"{p}k2"], [f"{p}kt"], perm=[0, 2, 1]),
              node("Reshape", [f"{p}kt", f"{p}s4t"], [f"{p}k3"]),
              node("Mul", [f"{p}q3", f"{p}scale"], [f"{p}qs"]),
              node("Mul", [f"{p}k3", f"{p}scale"], [f"{p}ks"]),
              node("MatMul", [f"{p}qs", f"{p}ks"], [f"{p}scores"]),
              node("Softmax", [f"{p}scores"], [f"{p}probs"], axis=-1),
              node("MatMul", [f"{p}probs", f"{p}v3"], [f"{p}ctx"]),
              node("Transpose", [f"{p}ctx"], [f"{p}ctx_t"], perm=[2, 0, 1, 3]),
              node("Reshape", [f"{p}ctx_t", f"{p}s2"], [f"{p}ctx2"]),
              node("Gemm", [f"{p}ctx2", f"{p}Wout", f"{p}bout"], [f"{p}o2"], transB=1),
              node("Reshape", [f"{p}o2", f"{p}s3o"], [out])]
    inits = {f"{p}Win": w(D, 3 * D), f"{p}bin": w(3 * D), f"{p}s3": np.array([S, 1, 3, D], I64),
             f"{p}zero": np.array([0], I64), f"{p}three": np.array([3], I64),
             f"{p}heads": np.array([S, H, HD], I64), f"{p}s4": np.array([1, H, S, HD], I64),
             f"{p}s4t": np.array([1, H, HD, S], I64),
             f"{p}scale": np.array([HD ** -0.25], F), f"{p}s2": np.array([S, D], I64),
             f"{p}Wout": w(D, D), f"{p}bout": w(D), f"{p}s3o": np.array([S, 1, D], I64)}
    inits.update({f"{p}i{i}": np.array(i, I64) for i in range(3)})
    return nodes, inits


def _bert_attention(x: str, out: str, p: str, key_perm: str = "two_step"):
    """Hugging Face BERT's self-attention on [1, S, D]: Linear q, k, v; heads split by
    Reshape + Transpose; k transposed again (`two_step`) or in one Transpose."""
    nodes, inits = [], {}
    for part in "qkv":
        nodes += [node("MatMul", [x, f"{p}W{part}"], [f"{p}{part}0"]),
                  node("Add", [f"{p}{part}0", f"{p}b{part}"], [f"{p}{part}1"]),
                  node("Reshape", [f"{p}{part}1", f"{p}heads"], [f"{p}{part}2"])]
        if part == "k" and key_perm == "one_step":
            nodes.append(node("Transpose", [f"{p}k2"], [f"{p}kt"], perm=[0, 2, 3, 1]))
        else:
            nodes.append(node("Transpose", [f"{p}{part}2"], [f"{p}{part}3"], perm=[0, 2, 1, 3]))
        inits.update({f"{p}W{part}": w(D, D), f"{p}b{part}": w(D)})
    if key_perm == "sdpa":   # torch's scaled_dot_product_attention: q and k scaled first
        for part in "qk":
            nodes.append(node("Mul", [f"{p}{part}3", f"{p}root_scale"], [f"{p}{part}s"]))
            nodes[[n.output[0] for n in nodes].index(f"{p}{part}3")].output[0] = f"{p}{part}3u"
            nodes[-1].input[0] = f"{p}{part}3u"
            nodes[-1].output[0] = f"{p}{part}3"
        inits[f"{p}root_scale"] = np.array(HD ** -0.25, F)
    if key_perm in ("two_step", "sdpa"):
        nodes.append(node("Transpose", [f"{p}k3"], [f"{p}kt"], perm=[0, 1, 3, 2]))
    nodes += [node("MatMul", [f"{p}q3", f"{p}kt"], [f"{p}scores0"]),
              node("Div", [f"{p}scores0", f"{p}sqrt_d"], [f"{p}scores1"]),
              node("Add", [f"{p}scores1", f"{p}mask"], [f"{p}scores"]),
              node("Softmax", [f"{p}scores"], [f"{p}probs"], axis=-1),
              node("MatMul", [f"{p}probs", f"{p}v3"], [f"{p}ctx"]),
              node("Transpose", [f"{p}ctx"], [f"{p}ctx_t"], perm=[0, 2, 1, 3]),
              node("Reshape", [f"{p}ctx_t", f"{p}flat"], [f"{p}ctx2"]),
              node("MatMul", [f"{p}ctx2", f"{p}Wo"], [f"{p}o0"]),
              node("Add", [f"{p}o0", f"{p}bo"], [out])]
    inits.update({f"{p}heads": np.array([1, S, H, HD], I64), f"{p}sqrt_d": np.array(HD ** 0.5, F),
                  f"{p}mask": np.where(np.tri(S) > 0, 0, -1e4).astype(F)[None, None],
                  f"{p}flat": np.array([1, S, D], I64), f"{p}Wo": w(D, D), f"{p}bo": w(D)})
    return nodes, inits


def _gpt2_attention(x: str, out: str, p: str, split: str = "split"):
    """GPT-2's attention on [1, S, D]: one q/k/v projection split in three on the last axis
    (Split, or Slice x 3), heads split by Reshape + Transpose, keys transposed for the score."""
    nodes = [node("MatMul", [x, f"{p}Wqkv"], [f"{p}qkv0"]),
             node("Add", [f"{p}qkv0", f"{p}bqkv"], [f"{p}qkv"])]
    inits = {f"{p}Wqkv": w(D, 3 * D), f"{p}bqkv": w(3 * D)}
    if split == "split":
        nodes.append(node("Split", [f"{p}qkv", f"{p}sizes"], [f"{p}{c}0" for c in "qkv"],
                          axis=2))
        inits[f"{p}sizes"] = np.array([D, D, D], I64)
    else:
        for i, c in enumerate("qkv"):
            nodes.append(node("Slice", [f"{p}qkv", f"{p}b{i}", f"{p}e{i}", f"{p}ax"],
                              [f"{p}{c}0"]))
            inits.update({f"{p}b{i}": np.array([i * D], I64),
                          f"{p}e{i}": np.array([(i + 1) * D], I64)})
        inits[f"{p}ax"] = np.array([2], I64)
    for c in "qkv":
        nodes += [node("Reshape", [f"{p}{c}0", f"{p}heads"], [f"{p}{c}1"]),
                  node("Transpose", [f"{p}{c}1"], [f"{p}{c}2"], perm=[0, 2, 1, 3])]
    nodes += [node("Transpose", [f"{p}k2"], [f"{p}kt"], perm=[0, 1, 3, 2]),
              node("MatMul", [f"{p}q2", f"{p}kt"], [f"{p}scores0"]),
              node("Mul", [f"{p}scores0", f"{p}scale"], [f"{p}scores"]),
              node("Softmax", [f"{p}scores"], [f"{p}probs"], axis=-1),
              node("MatMul", [f"{p}probs", f"{p}v2"], [f"{p}ctx"]),
              node("Transpose", [f"{p}ctx"], [f"{p}ctx_t"], perm=[0, 2, 1, 3]),
              node("Reshape", [f"{p}ctx_t", f"{p}flat"], [f"{p}ctx2"]),
              node("MatMul", [f"{p}ctx2", f"{p}Wo"], [out])]
    inits.update({f"{p}heads": np.array([1, S, H, HD], I64), f"{p}scale": np.array(HD ** -0.5, F),
                  f"{p}flat": np.array([1, S, D], I64), f"{p}Wo": w(D, D)})
    return nodes, inits


def _layer_norm(x: str, out: str, p: str):
    return [node("LayerNormalization", [x, f"{p}g", f"{p}b"], [out], axis=-1)], {
        f"{p}g": 1 + w(D, scale=0.1), f"{p}b": w(D, scale=0.1)}


def _encoder(block, layers: int, x_shape):
    nodes, inits, x = [], {}, "x"
    for k in range(layers):
        attention, params = block(x, f"att{k}", f"l{k}_")
        norm, norm_params = _layer_norm(f"res{k}", f"h{k}", f"l{k}_ln")
        nodes += attention + [node("Add", [x, f"att{k}"], [f"res{k}"])] + norm
        inits.update(params)
        inits.update(norm_params)
        x = f"h{k}"
    nodes.append(node("Identity", [x], ["y"]))
    return model(nodes, [("x", x_shape)], ["y"], inits)


def _matmul_flags(conversion) -> list:
    return [(bool(op.options.adj_x), bool(op.options.adj_y))
            for op in conversion.model.subgraphs[0].operators if op.op == "BATCH_MATMUL"]


@pytest.mark.parametrize("layers", [1, 2])
def test_torch_multihead_attention(layers):
    conversion = check(_encoder(_torch_mha, layers, [S, 1, D]))
    assert conversion.transposes <= 2 * layers, conversion.ops_out
    assert _matmul_flags(conversion) == [(False, True), (False, False)] * layers
    assert conversion.ops_out["FULLY_CONNECTED"] == 2 * layers     # in and out projections
    assert conversion.ops_out["MUL"] == 2 * layers     # LayerNorm's: q and k's scales folded


@pytest.mark.parametrize("key_perm", ["two_step", "one_step", "sdpa"])
def test_bert_self_attention(key_perm):
    block = lambda x, out, p: _bert_attention(x, out, p, key_perm)  # noqa: E731
    conversion = check(_encoder(block, 2, [1, S, D]))
    assert conversion.transposes <= 4, conversion.ops_out
    assert _matmul_flags(conversion) == [(False, True), (False, False)] * 2
    # q, k and v: one FULLY_CONNECTED with the weights stacked, plus the output projection
    assert conversion.ops_out["FULLY_CONNECTED"] == 4
    assert "DIV" not in conversion.ops_out         # 1 / sqrt(d) folded into q's rows


@pytest.mark.parametrize("split", ["split", "slice"])
def test_gpt2_attention(split):
    block = lambda x, out, p: _gpt2_attention(x, out, p, split)  # noqa: E731
    conversion = check(_encoder(block, 2, [1, S, D]))
    assert conversion.transposes <= 4, conversion.ops_out
    assert _matmul_flags(conversion) == [(False, True), (False, False)] * 2
    assert "SPLIT" not in conversion.ops_out and "STRIDED_SLICE" not in conversion.ops_out
    assert conversion.ops_out["MUL"] == 4            # LayerNorm's: the scores' scale folded


def test_vit_patch_embedding_then_attention():
    """Conv patches [1, D, 2, 3] -> Reshape [1, D, 6] -> Transpose [1, 6, D]: the flatten of
    the NHWC conv output needs no transpose, the block keeps its two."""
    nodes = [node("Conv", ["img", "Wp", "bp"], ["patches"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Reshape", ["patches", "flat_shape"], ["flat"]),
             node("Transpose", ["flat"], ["x"], perm=[0, 2, 1])]
    attention, inits = _bert_attention("x", "att", "v_")
    nodes += attention + [node("Add", ["x", "att"], ["y"])]
    inits.update({"Wp": w(D, 3, 2, 2), "bp": w(D), "flat_shape": np.array([1, D, S], I64)})
    conversion = check(model(nodes, [("img", [1, 3, 4, 6])], ["y"], inits))
    assert conversion.transposes <= 2, conversion.ops_out
    assert conversion.io_layout["inputs"][0]["perm"] == [0, 2, 3, 1]


def test_transposed_lhs_becomes_adj_x():
    proto = model([node("Transpose", ["a"], ["at"], perm=[0, 2, 1]),
                   node("MatMul", ["at", "b"], ["y"])], [("a", [2, 5, 3]), ("b", [2, 5, 4])],
                  ["y"])
    conversion = check(proto)
    assert conversion.ops_out == {"BATCH_MATMUL": 1}
    assert _matmul_flags(conversion) == [(True, False)]


def test_cross_attention_keeps_separate_projections():
    """q from one input, k and v from another: k and v share one projection, q keeps its own;
    the result still matches."""
    nodes, inits = _bert_attention("x", "att", "c_")
    for n in nodes:
        if n.op_type == "MatMul" and n.input[1] in ("c_Wk", "c_Wv"):
            n.input[0] = "mem"
    proto = model(nodes + [node("Identity", ["att"], ["y"])], [("x", [1, S, D]),
                                                              ("mem", [1, S, D])], ["y"], inits)
    conversion = check(proto)
    assert conversion.transposes <= 3, conversion.ops_out
    assert conversion.ops_out["FULLY_CONNECTED"] == 3


def test_unlike_branches_are_left_alone():
    """Gathers whose slices are transposed differently: no merge, same numbers."""
    nodes = [node("Gather", ["x", "i0"], ["a"], axis=0), node("Gather", ["x", "i1"], ["b"], axis=0),
             node("Transpose", ["a"], ["at"], perm=[1, 0, 2]),
             node("Transpose", ["b"], ["bt"], perm=[2, 1, 0]),
             node("Add", ["at", "bt"], ["y"])]
    proto = model(nodes, [("x", [2, 4, 4, 4])], ["y"],
                  {"i0": np.array(0, I64), "i1": np.array(1, I64)})
    conversion = check(proto)
    assert Counter(conversion.ops_out)["GATHER"] == 2


# -- the feed-forward half: GPT-2's tanh GELU --------------------------------------------------

@pytest.mark.parametrize("cube", ["pow", "mul"])
@pytest.mark.parametrize("half_first", [True, False])
def test_tanh_gelu_becomes_one_op(cube, half_first):
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), as GPT-2's NewGELUActivation
    exports: one GELU with approximate=True."""
    nodes = [node("Pow", ["x", "three"], ["x3"])] if cube == "pow" else [
        node("Mul", ["x", "x"], ["x2"]), node("Mul", ["x2", "x"], ["x3"])]
    nodes += [node("Mul", ["c", "x3"], ["cx3"]), node("Add", ["x", "cx3"], ["inner"]),
              node("Mul", ["inner", "k"], ["scaled"]), node("Tanh", ["scaled"], ["t"]),
              node("Add", ["one", "t"], ["t1"])]
    if half_first:
        nodes += [node("Mul", ["half", "x"], ["hx"]), node("Mul", ["hx", "t1"], ["y"])]
    else:
        nodes += [node("Mul", ["x", "t1"], ["xt"]), node("Mul", ["xt", "half"], ["y"])]
    proto = model(nodes, [("x", [2, 16])], ["y"],
                  {"three": np.array(3, F), "c": np.array(0.044715, F),
                   "k": np.array(np.sqrt(2 / np.pi), F), "one": np.array(1, F),
                   "half": np.array(0.5, F)})
    conversion = check(proto, {"x": np.linspace(-5, 5, 32, dtype=F).reshape(2, 16)})
    assert conversion.ops_out == {"GELU": 1}
    (op,) = conversion.model.subgraphs[0].operators
    assert op.options.approximate


def test_tanh_without_the_gelu_constants_stays():
    nodes = [node("Pow", ["x", "three"], ["x3"]), node("Mul", ["c", "x3"], ["cx3"]),
             node("Add", ["x", "cx3"], ["inner"]), node("Mul", ["inner", "k"], ["scaled"]),
             node("Tanh", ["scaled"], ["t"]), node("Add", ["one", "t"], ["t1"]),
             node("Mul", ["x", "t1"], ["xt"]), node("Mul", ["xt", "half"], ["y"])]
    proto = model(nodes, [("x", [2, 16])], ["y"],
                  {"three": np.array(3, F), "c": np.array(0.05, F),
                   "k": np.array(np.sqrt(2 / np.pi), F), "one": np.array(1, F),
                   "half": np.array(0.5, F)})
    assert "GELU" not in check(proto).ops_out


@pytest.mark.parametrize("affine", ["identity", "learned"])
def test_layer_norm_ops(affine):
    """LayerNormalization: MEAN, SQUARED_DIFFERENCE, MEAN, ADD, RSQRT, SUB, MUL, and the MUL and
    ADD of scale and bias unless they are ones and zeros (a freshly initialized model's)."""
    scale, bias = (np.ones(D, F), np.zeros(D, F)) if affine == "identity" else (w(D), w(D))
    proto = model([node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)],
                  [("x", [1, S, D])], ["y"], {"g": scale, "b": bias})
    ops = check(proto).ops_out
    core = {"MEAN": 2, "SQUARED_DIFFERENCE": 1, "ADD": 1, "RSQRT": 1, "SUB": 1, "MUL": 1}
    if affine == "learned":
        core.update(ADD=2, MUL=2)
    assert ops == core


def test_shared_transformer_keeps_two_transposes_per_block(models_dir):
    """../shared/models/syn_transformer.onnx (torch, 2 encoder layers): 10 transposes before
    the attention passes, 2 per block now; its outputs are checked in test_convert_models."""
    from tests.converter.test_convert_models import converted

    conversion = converted(models_dir, "syn_transformer")
    assert conversion.transposes == 4, conversion.ops_out
    assert _matmul_flags(conversion) == [(False, True), (False, False)] * 2
    assert sum(conversion.ops_out.values()) <= 78, conversion.ops_out


@pytest.mark.parametrize("batch", [1, 2])
def test_passes_settle_without_undoing_each_other(monkeypatch, batch):
    """No round of the pipeline brings back an earlier graph (pipeline.optimize would stop
    there quietly): head merging and transpose pushing do not undo each other, at batch 1
    (more dims of 1) and 2."""
    from edgelite.converter import pipeline

    seen, structure = [], pipeline._structure

    def unique(model):
        s = structure(model)
        assert s not in seen, "a pass undid another"
        seen.append(s)
        return s
    monkeypatch.setattr(pipeline, "_structure", unique)
    shape = [S, batch, D]
    nodes, inits = _torch_mha("x", "y", "t_")
    inits["t_s3"] = np.array([S, batch, 3, D], I64)
    inits["t_heads"] = np.array([S, batch * H, HD], I64)
    inits.update({"t_s4": np.array([batch, H, S, HD], I64),
                  "t_s4t": np.array([batch, H, HD, S], I64),
                  "t_s2": np.array([S * batch, D], I64), "t_s3o": np.array([S, batch, D], I64)})
    check(model(nodes, [("x", shape)], ["y"], inits))
