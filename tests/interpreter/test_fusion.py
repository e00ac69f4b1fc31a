"""Chains the plan fuses into one step (interpreter/fusion.py, issue 17): the fused step gives
what the ops give one by one (edgelite with every tensor kept, which fuses nothing) and what
LiteRT gives; a chain whose intermediate tensor is observable is not fused."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import Interpreter, OpResolverType
from edgelite.schema import Model, Subgraph, Tensor, save
from tests.opmodel import const_tensor, operator, run_interpreter, run_litert

RELU, RELU6 = 1, 3
SAME, VALID = 0, 1


def conv_pool_model(shape, out_channels, kernel, stride, padding, act, pool, pool_stride=None,
                    pool_padding=VALID, pool_act=0, conv_is_output=False, seed=0) -> bytes:
    """x -> CONV_2D (+ act) -> MAX_POOL_2D -> y; the convolution's output also a graph output
    when `conv_is_output`."""
    rng = np.random.default_rng(seed)
    model, sg = Model(), Subgraph(name="main")
    x = sg.add_tensor(Tensor("x", shape, "float32"))
    w = const_tensor(model, sg, "w", rng.standard_normal(
        (out_channels, kernel, kernel, shape[3])).astype(np.float32))
    b = const_tensor(model, sg, "b", rng.standard_normal(out_channels).astype(np.float32))
    c = sg.add_tensor(Tensor("conv", (), "float32"))
    y = sg.add_tensor(Tensor("pool", (), "float32"))
    sg.operators.append(operator("CONV_2D", [x, w, b], [c], padding=padding, stride_w=stride,
                                 stride_h=stride, fused_activation_function=act))
    ps = pool_stride or pool
    sg.operators.append(operator("MAX_POOL_2D", [c], [y], padding=pool_padding, stride_w=ps,
                                 stride_h=ps, filter_width=pool, filter_height=pool,
                                 fused_activation_function=pool_act))
    sg.inputs, sg.outputs = [x], [y, c] if conv_is_output else [y]
    model.subgraphs.append(sg)
    return save(model)


def edgelite(content, x, **kwargs):
    it = Interpreter(model_content=content, **kwargs)
    outs = run_interpreter(it, [x])
    return it, outs


CASES = [  # shape, out channels, kernel, stride, padding, act, pool
    ((1, 8, 8, 1), 16, 3, 1, SAME, RELU, 2),          # the digits CNN's first layer
    ((1, 4, 4, 16), 32, 3, 1, SAME, RELU, 2),         # ... and its second
    ((1, 7, 7, 3), 8, 3, 1, SAME, 0, 2),              # a row and a column the pool drops
    ((2, 9, 9, 2), 4, 3, 1, VALID, RELU6, 3),         # batch 2, a 3x3 pool, RELU6
    ((1, 10, 10, 2), 5, 3, 2, SAME, RELU, 2),         # a strided convolution
    ((1, 6, 6, 3), 4, 5, 1, SAME, RELU, 2),           # a 5x5 kernel
]


@pytest.mark.parametrize("shape,o,k,s,padding,act,pool", CASES)
def test_fused_conv_max_pool_matches_the_ops_one_by_one_and_litert(shape, o, k, s, padding,
                                                                    act, pool):
    content = conv_pool_model(shape, o, k, s, padding, act, pool)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    it, fused = edgelite(content, x)
    assert len(it._main.run_ops) == 1, "the convolution and its pool should run as one step"
    _, one_by_one = edgelite(content, x, experimental_preserve_all_tensors=True)
    np.testing.assert_allclose(fused[0], one_by_one[0], rtol=1e-6, atol=1e-6)
    theirs = run_litert(content, [x], reference=False)
    np.testing.assert_allclose(fused[0], theirs[0], rtol=1e-5, atol=1e-5)
    if act == RELU:   # NaN goes through the fused maximum as through the pool
        x[0, 0, 0, 0] = np.nan
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        assert np.isnan(it.get_tensor(it.get_output_details()[0]["index"])).any()


@pytest.mark.parametrize("why,kwargs,options", [
    ("the convolution's output is a graph output", {}, dict(conv_is_output=True)),
    ("the pool's windows overlap", {}, dict(pool_stride=1)),
    ("the pool has its own activation", {}, dict(pool_act=RELU)),
    ("every tensor is kept", dict(experimental_preserve_all_tensors=True), {}),
    ("BUILTIN_REF runs each op on its own",
     dict(experimental_op_resolver_type=OpResolverType.BUILTIN_REF), {}),
])
def test_an_observable_or_unfusable_chain_runs_op_by_op(why, kwargs, options):
    content = conv_pool_model((1, 8, 8, 1), 16, 3, 1, SAME, RELU, 2, **options)
    x = np.random.default_rng(2).standard_normal((1, 8, 8, 1)).astype(np.float32)
    it, ours = edgelite(content, x, **kwargs)
    assert len(it._main.run_ops) == 2, why
    theirs = run_litert(content, [x], reference=False)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
