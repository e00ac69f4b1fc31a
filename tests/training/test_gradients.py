"""Every gradient rule and loss against finite differences, in one parametrized suite.

Each case is one op (or one loss) on random inputs. Its gradient graph (`gradient_model`, batch
dimensions open: built for batch 1, run at batch 3) runs in edgelite's float32 interpreter; the
finite differences come from a float64 numpy reference of the op (reference.py), which is first
checked against edgelite's own kernel. The same gradient graph then runs in LiteRT, which must
agree: the backward ops are builtins that stock runtimes execute.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Callable

import numpy as np
import pytest

from edgelite.interpreter import Interpreter
from edgelite.interpreter.training import LOSSES, RULES, gradient_model
from edgelite.interpreter.training.emit import Emitter
from edgelite.schema import (Model, Operator, OperatorCode, Subgraph, Tensor, default_options,
                             dtype_name, save)
from tests.opmodel import run_interpreter
from tests.training import reference as ref

BATCH = 3
rng = np.random.default_rng(20240607)


def normal(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


@dataclass
class Arg:
    value: np.ndarray
    diff: bool = True    # a float graph input to differentiate (else a constant, or a plain
    batch: bool = False  # input when `batch`); batch: dim 0 is open (-1), declared as 1


@dataclass
class Case:
    id: str
    model: Model                 # outputs: values..., then one gradient per `diff` input
    feeds: list                  # arrays, in input order
    diff: list                   # positions in feeds to differentiate
    f: Callable                  # float64 feeds -> the scalar whose gradient the model computes
    check: list = field(default_factory=list)  # (output position, float64 feeds -> expected)
    rtol: float = 2e-4


def op_case(id: str, op: str, args: list, reference: Callable, **options) -> Case:
    model = Model()
    sg = Subgraph(name="main")
    ins, names = [], []
    for k, a in enumerate(args):
        value = np.asarray(a.value)
        if a.diff or a.batch:
            shape = ((1,) + value.shape[1:]) if a.batch else value.shape
            sig = ((-1,) + value.shape[1:]) if a.batch else None
            t = sg.add_tensor(Tensor(f"in{k}", shape, dtype_name(value.dtype),
                                     shape_signature=sig))
            sg.inputs.append(t)
            names.append(f"in{k}")
        else:
            t = sg.add_tensor(Tensor(f"const{k}", value.shape, dtype_name(value.dtype),
                                     buffer=model.add_buffer(value)))
        ins.append(t)
    feeds = [np.asarray(a.value) for a in args if a.diff or a.batch]
    positions = [i for i, a in enumerate([a for a in args if a.diff or a.batch]) if a.diff]
    y = reference(*[np.asarray(a.value, np.float64) if a.value.dtype.kind == "f"
                    else a.value for a in args])
    out = sg.add_tensor(Tensor("y", (1,) + y.shape[1:] if args[0].batch else y.shape))
    sg.outputs = [out]
    sg.operators = [Operator(OperatorCode(op, 0), ins, [out], default_options(op, **options))]
    model.subgraphs = [sg]
    grad_model = gradient_model(model, [names[p] for p in positions])
    seed = normal(*y.shape)
    const_args = [a for a in args]

    def full(feeds64):
        it = iter(feeds64)
        return [next(it) if (a.diff or a.batch) else
                (np.asarray(a.value, np.float64) if a.value.dtype.kind == "f" else a.value)
                for a in const_args]

    def f(feeds64):
        return float(np.sum(reference(*full(feeds64[:-1])) * feeds64[-1]))

    return Case(id, grad_model, feeds + [seed], positions, f,
                check=[(0, lambda feeds64: reference(*full(feeds64[:-1])))])


def loss_case(name: str, shape: tuple, labels: np.ndarray, reference: Callable) -> Case:
    model = Model()
    em = Emitter(model, name)
    pred = em.input("prediction", (1,) + shape[1:], (-1,) + shape[1:])
    lab = em.input("labels", (1,) + labels.shape[1:], (-1,) + labels.shape[1:],
                   dtype_name(labels.dtype))
    loss, grad = LOSSES[name].build(em, pred, lab)
    em.sg.outputs = [loss, grad]
    model.subgraphs = [em.sg]
    x = normal(*shape, scale=2.0)
    return Case(f"loss-{name}", model, [x, labels], [0],
                lambda feeds64: float(reference(feeds64[0], feeds64[1])),
                check=[(0, lambda feeds64: reference(feeds64[0], feeds64[1]))])


def _conv_w(o, kh, kw, i):
    return normal(o, kh, kw, i, scale=0.5)


X4 = partial(normal, BATCH, 5, 6, 3)
NONE_, RELU, RELU_N1, RELU6 = 0, 1, 2, 3


def cases() -> list:
    c = []
    # layers
    x, w, b = normal(BATCH, 6), normal(4, 6), normal(4)
    c.append(op_case("fully_connected", "FULLY_CONNECTED", [Arg(x, batch=True), Arg(w), Arg(b)],
                     ref.fully_connected))
    c.append(op_case("fully_connected-relu", "FULLY_CONNECTED",
                     [Arg(x, batch=True), Arg(w), Arg(b)],
                     partial(ref.fully_connected, code=RELU), fused_activation_function=RELU))
    c.append(op_case("fully_connected-keep_num_dims", "FULLY_CONNECTED",
                     [Arg(normal(BATCH, 2, 6), batch=True), Arg(w), Arg(b)],
                     partial(ref.fully_connected, keep_num_dims=True), keep_num_dims=True))
    c.append(op_case("fully_connected-flatten-no_bias", "FULLY_CONNECTED",
                     [Arg(normal(BATCH, 2, 2, 3), batch=True), Arg(normal(4, 12))],
                     ref.fully_connected))
    for tag, (ax, ay) in {"": (False, False), "-adj_x": (True, False), "-adj_y": (False, True),
                          "-adj_xy": (True, True)}.items():
        a = normal(BATCH, 4, 3) if ax else normal(BATCH, 3, 4)
        bb = normal(BATCH, 5, 4) if ay else normal(BATCH, 4, 5)
        c.append(op_case(f"batch_matmul{tag}", "BATCH_MATMUL", [Arg(a, batch=True),
                                                                 Arg(bb, batch=True)],
                         partial(ref.batch_matmul, adj_x=ax, adj_y=ay), adj_x=ax, adj_y=ay))
    c.append(op_case("batch_matmul-broadcast", "BATCH_MATMUL",
                     [Arg(normal(BATCH, 3, 4), batch=True), Arg(normal(4, 5))], ref.batch_matmul))
    convs = {"s1-same-relu": dict(stride=(1, 1), same=True, code=RELU),
             "s2-valid": dict(stride=(2, 2), same=False), "s2-same": dict(stride=(2, 2), same=True),
             "dilated-same-relu6": dict(dilation=(2, 2), same=True, code=RELU6),
             "s2x1-valid": dict(stride=(2, 1), same=False)}
    for tag, kw in convs.items():
        opts = dict(padding=0 if kw.get("same") else 1, stride_h=kw.get("stride", (1, 1))[0],
                    stride_w=kw.get("stride", (1, 1))[1],
                    dilation_h_factor=kw.get("dilation", (1, 1))[0],
                    dilation_w_factor=kw.get("dilation", (1, 1))[1],
                    fused_activation_function=kw.get("code", 0))
        c.append(op_case(f"conv_2d-{tag}", "CONV_2D",
                         [Arg(X4(), batch=True), Arg(_conv_w(4, 3, 3, 3)), Arg(normal(4))],
                         partial(ref.conv_2d, **kw), **opts))
        m = 2 if tag.startswith("s2") else 1
        c.append(op_case(f"depthwise_conv_2d-{tag}-m{m}", "DEPTHWISE_CONV_2D",
                         [Arg(X4(), batch=True), Arg(_conv_w(1, 3, 3, 3 * m)),
                          Arg(normal(3 * m))],
                         partial(ref.depthwise_conv_2d, **kw), depth_multiplier=m, **opts))
    c.append(op_case("conv_2d-1x1", "CONV_2D", [Arg(X4(), batch=True), Arg(_conv_w(2, 1, 1, 3)),
                                                Arg(normal(2))],
                     partial(ref.conv_2d, same=False), padding=1, stride_h=1, stride_w=1))
    c.append(op_case("conv_2d-tiny-same", "CONV_2D",  # taps that only ever read padding
                     [Arg(normal(BATCH, 1, 2, 3), batch=True), Arg(_conv_w(2, 3, 3, 3)),
                      Arg(normal(2))],
                     partial(ref.conv_2d, same=True), padding=0, stride_h=1, stride_w=1))
    pools = {"2x2-s2-valid": dict(k=(2, 2), stride=(2, 2), same=False),
             "3x3-s1-same": dict(k=(3, 3), stride=(1, 1), same=True),
             "3x3-s2-same-relu": dict(k=(3, 3), stride=(2, 2), same=True, code=RELU),
             "2x3-s1x2-valid": dict(k=(2, 3), stride=(1, 2), same=False)}
    for tag, kw in pools.items():
        opts = dict(padding=0 if kw["same"] else 1, filter_height=kw["k"][0],
                    filter_width=kw["k"][1], stride_h=kw["stride"][0], stride_w=kw["stride"][1],
                    fused_activation_function=kw.get("code", 0))
        for op, fn in (("AVERAGE_POOL_2D", ref.average_pool_2d),
                       ("MAX_POOL_2D", ref.max_pool_2d)):
            c.append(op_case(f"{op.lower()}-{tag}", op, [Arg(X4(), batch=True)],
                             partial(fn, **kw), **opts))
    # arithmetic, with broadcasting
    shapes = {"same": ((BATCH, 3, 4), (BATCH, 3, 4)), "bcast-last": ((BATCH, 3, 4), (4,)),
              "bcast-both": ((BATCH, 1, 4), (BATCH, 3, 1)),
              "bcast-batch": ((BATCH, 3, 4), (1, 3, 1))}
    fns = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "DIV": np.divide}
    for op, fn in fns.items():
        for tag, (sa, sb) in shapes.items():
            a = normal(*sa)
            bv = normal(*sb)
            if op == "DIV":
                bv = (np.sign(bv) * (np.abs(bv) + 0.5)).astype(np.float32)
            c.append(op_case(f"{op.lower()}-{tag}", op,
                             [Arg(a, batch=True), Arg(bv, batch=sb[0] == BATCH)], fn))
    c.append(op_case("add-relu", "ADD", [Arg(normal(BATCH, 5), batch=True), Arg(normal(5))],
                     lambda a, b: np.maximum(a + b, 0), fused_activation_function=RELU))
    c.append(op_case("div-relu6", "DIV", [Arg(normal(BATCH, 5, scale=4), batch=True),
                                          Arg(np.full(5, 0.5, np.float32))],
                     lambda a, b: ref.relu6(a / b), fused_activation_function=RELU6))
    # activations
    x = normal(BATCH, 4, 5, scale=4.0)
    acts = {"RELU": (lambda v: np.maximum(v, 0), {}), "RELU6": (ref.relu6, {}),
            "LEAKY_RELU": (partial(ref.leaky_relu, alpha=0.2), {"alpha": 0.2}),
            "LOGISTIC": (ref.logistic, {}), "TANH": (np.tanh, {}),
            "HARD_SWISH": (ref.hard_swish, {}), "LOG_SOFTMAX": (ref.log_softmax, {})}
    for op, (fn, opts) in acts.items():
        c.append(op_case(op.lower(), op, [Arg(x, batch=True)], fn, **opts))
    c.append(op_case("gelu", "GELU", [Arg(normal(BATCH, 4, 5, scale=2.0), batch=True)],
                     ref.gelu))
    c.append(op_case("gelu-approximate", "GELU", [Arg(normal(BATCH, 4, 5, scale=2.0),
                                                      batch=True)],
                     partial(ref.gelu, approximate=True), approximate=True))
    for beta in (1.0, 0.5):
        c.append(op_case(f"softmax-beta{beta}", "SOFTMAX", [Arg(normal(BATCH, 6), batch=True)],
                         partial(ref.softmax, beta=beta), beta=beta))
    # data movement
    x3 = normal(BATCH, 4, 6)
    c.append(op_case("reshape", "RESHAPE", [Arg(x3, batch=True),
                                            Arg(np.array([-1, 24], np.int32), diff=False)],
                     lambda v, s: v.reshape(-1, 24)))
    c.append(op_case("squeeze", "SQUEEZE", [Arg(normal(BATCH, 1, 5), batch=True)],
                     lambda v: v[:, 0], squeeze_dims=[1]))
    c.append(op_case("expand_dims", "EXPAND_DIMS", [Arg(x3, batch=True),
                                                    Arg(np.array(2, np.int32), diff=False)],
                     lambda v, a: v[:, :, None]))
    c.append(op_case("transpose", "TRANSPOSE", [Arg(normal(BATCH, 2, 3, 4), batch=True),
                                                Arg(np.array([0, 3, 1, 2], np.int32), diff=False)],
                     lambda v, p: v.transpose(0, 3, 1, 2)))
    c.append(op_case("concatenation", "CONCATENATION",
                     [Arg(normal(BATCH, 2, 3), batch=True), Arg(normal(BATCH, 2, 1), batch=True),
                      Arg(normal(BATCH, 2, 4), batch=True)],
                     lambda *v: np.concatenate(v, -1), axis=-1))
    pads = np.array([[0, 0], [1, 2], [0, 3]], np.int32)
    c.append(op_case("pad", "PAD", [Arg(x3, batch=True), Arg(pads, diff=False)],
                     lambda v, p: np.pad(v, p)))
    c.append(op_case("padv2", "PADV2", [Arg(x3, batch=True), Arg(pads, diff=False),
                                        Arg(np.array(0.5, np.float32), diff=False)],
                     lambda v, p, k: np.pad(v, p, constant_values=k)))
    for tag, (axes, keep, fn) in {
            "mean-axis1": ([1], False, lambda v: v.mean(1)),
            "mean-batch-keep": ([0, 2], True, lambda v: v.mean((0, 2), keepdims=True)),
            "mean-all": ([0, 1, 2], False, lambda v: v.mean()),
            "sum-last": ([-1], False, lambda v: v.sum(-1)),
            "sum-batch-keep": ([0], True, lambda v: v.sum(0, keepdims=True))}.items():
        op = tag.split("-")[0].upper()
        c.append(op_case(tag, op, [Arg(x3, batch=True), Arg(np.array(axes, np.int32), diff=False)],
                         lambda v, a, fn=fn: fn(v), keep_dims=keep))
    x5 = normal(BATCH, 7, 5)
    slices = {  # begin, end, strides, masks, numpy view
        "step2": ([0, 1, 0], [0, 6, 5], [1, 2, 1], dict(begin_mask=0b101, end_mask=0b101),
                  lambda v: v[:, 1:6:2, :]),
        "shrink": ([0, 3, 1], [0, 4, 4], [1, 1, 1], dict(begin_mask=1, end_mask=1,
                                                          shrink_axis_mask=0b10),
                   lambda v: v[:, 3, 1:4]),
        "reverse": ([0, -1, 0], [0, -8, 5], [1, -2, 2], dict(begin_mask=0b101, end_mask=0b101),
                    lambda v: v[:, ::-2, ::2]),
    }
    for tag, (bg, en, st, masks, fn) in slices.items():
        c.append(op_case(f"strided_slice-{tag}", "STRIDED_SLICE",
                         [Arg(x5, batch=True), Arg(np.array(bg, np.int32), diff=False),
                          Arg(np.array(en, np.int32), diff=False),
                          Arg(np.array(st, np.int32), diff=False)],
                         lambda v, *_, fn=fn: fn(v), **masks))
    c.append(op_case("gather-axis0-batch_indices", "GATHER",
                     [Arg(normal(7, 3)), Arg(np.array([[1, 4, 1, 0]] * BATCH, np.int32),
                                             diff=False, batch=True)],
                     lambda p, i: np.take(p, i, axis=0), axis=0))
    c.append(op_case("gather-axis1", "GATHER",
                     [Arg(normal(2, 6, 3)), Arg(np.array([5, 0, 5], np.int32), diff=False)],
                     lambda p, i: np.take(p, i, axis=1), axis=1))
    # losses
    c.append(loss_case("sparse_softmax_cross_entropy", (BATCH, 5),
                       np.array([0, 4, 2], np.int32), ref.sparse_softmax_cross_entropy))
    soft = rng.dirichlet(np.ones(5), BATCH).astype(np.float32)
    c.append(loss_case("softmax_cross_entropy", (BATCH, 5), soft, ref.softmax_cross_entropy))
    c.append(loss_case("mean_squared_error", (BATCH, 2, 3), normal(BATCH, 2, 3),
                       ref.mean_squared_error))
    c.append(loss_case("binary_cross_entropy", (BATCH, 4),
                       rng.integers(0, 2, (BATCH, 4)).astype(np.float32),
                       ref.binary_cross_entropy))
    return c


CASES = cases()


def finite_differences(f: Callable, feeds64: list, k: int, h: float = 1e-5) -> np.ndarray:
    x = feeds64[k]
    grad = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + h
        up = f(feeds64)
        x[i] = old - h
        down = f(feeds64)
        x[i] = old
        grad[i] = (up - down) / (2 * h)
    return grad


def _close(got, want, rtol, what):
    scale = max(float(np.max(np.abs(want))), 1e-3)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, err_msg=what)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_gradient_matches_finite_differences(case):
    content = save(case.model)
    outs = run_interpreter(Interpreter(model_content=content), case.feeds)
    feeds64 = [np.array(f, np.float64) if f.dtype.kind == "f" else f for f in case.feeds]
    for pos, expect in case.check:  # the reference computes what the kernel computes
        _close(outs[pos], expect(feeds64), 1e-5, "forward value vs the float64 reference")
    grads = outs[len(outs) - len(case.diff):]
    for k, g in zip(case.diff, grads):
        assert g.shape == case.feeds[k].shape
        _close(g, finite_differences(case.f, feeds64, k), case.rtol,
               f"gradient of input {k} vs finite differences")

    from ai_edge_litert.interpreter import Interpreter as LiteRT
    theirs = run_interpreter(LiteRT(model_content=content), case.feeds)
    for k, (a, b) in enumerate(zip(outs, theirs)):
        _close(a, b, 2e-5, f"output {k}: edgelite vs LiteRT")


def test_every_rule_and_loss_has_a_case():
    ops = {c.id.split("-")[0].upper() for c in CASES}
    assert set(RULES) - {"DEQUANTIZE"} <= ops, set(RULES) - ops
    assert {f"loss-{n}" for n in LOSSES} <= {c.id for c in CASES}
