"""WHILE with the loop state swapped by reference (interpreter/kernels/while_loop.py): results
equal to the loop in numpy (and LiteRT's) for even and odd iteration counts, the copying
fallback where the state cannot be swapped, and a timing-free check of the per-iteration work:
Python frames and array copies per iteration, counted with a profile hook over two loop
lengths."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from edgelite.schema import Model, Subgraph, Tensor, save
from tests.opmodel import const_tensor as _const
from tests.opmodel import operator as _op

litert = pytest.importorskip("ai_edge_litert.interpreter",
                             reason="LiteRT (ai-edge-litert) is the oracle: "
                                    "pip install -e '.[dev]'")
from edgelite import interpreter as edgelite_interpreter  # noqa: E402


def _loop_model(body_kind: str, limit: int = 1000) -> bytes:
    """Loop variables (i int32, x float32[3], w float32[3]) while i < limit:
    - "plain": i + 1, x * 0.5 + w, w unchanged (passed through);
    - "swap": i + 1, then x and w exchanged (each output is the other variable's input);
    - "constant": i + 1, x * 0.5 + w, and w's output a constant tensor;
    - "reshape", "reshape_state": as "plain" through RESHAPEs (views in the plan), one of x
      itself in "reshape_state"."""
    model = Model()
    main = Subgraph(name="main")
    ins = [main.add_tensor(Tensor("i", (), "int32")), main.add_tensor(Tensor("x", (3,))),
           main.add_tensor(Tensor("w", (3,)))]
    outs = [main.add_tensor(Tensor("i_out", (), "int32")), main.add_tensor(Tensor("x_out", (3,))),
            main.add_tensor(Tensor("w_out", (3,)))]
    main.inputs, main.outputs = ins, outs
    main.operators = [_op("WHILE", ins, outs, cond_subgraph_index=1, body_subgraph_index=2)]
    cond = Subgraph(name="cond")
    c_ins = [cond.add_tensor(Tensor("i", (), "int32")), cond.add_tensor(Tensor("x", (3,))),
             cond.add_tensor(Tensor("w", (3,)))]
    n = _const(model, cond, "n", np.int32(limit))
    c = cond.add_tensor(Tensor("c", (), "bool"))
    cond.inputs, cond.outputs = c_ins, [c]
    cond.operators = [_op("LESS", [c_ins[0], n], [c])]
    body = Subgraph(name="body")
    i, x, w = (body.add_tensor(Tensor("i", (), "int32")), body.add_tensor(Tensor("x", (3,))),
               body.add_tensor(Tensor("w", (3,))))
    one = _const(model, body, "one", np.int32(1))
    half = _const(model, body, "half", np.float32(0.5))
    i2 = body.add_tensor(Tensor("i2", (), "int32"))
    ops = [_op("ADD", [i, one], [i2])]
    if body_kind == "swap":
        body.outputs = [i2, w, x]
    elif body_kind in ("reshape", "reshape_state"):
        # RESHAPEs inside the body: the plan makes them views of their inputs (no step); in
        # "reshape_state" one is a view of the loop variable x itself.
        row = _const(model, body, "row", np.array([1, 3], np.int32))
        flat = _const(model, body, "flat", np.array([3], np.int32))
        xs = [body.add_tensor(Tensor(f"x{k}", shape)) for k, shape in
              enumerate([(1, 3), (1, 3), (3,), (3,)])]
        if body_kind == "reshape":
            ops += [_op("MUL", [x, half], [xs[3]]), _op("RESHAPE", [xs[3], row], [xs[0]]),
                    _op("RESHAPE", [xs[0], flat], [xs[2]])]
        else:
            ops += [_op("RESHAPE", [x, row], [xs[0]]), _op("MUL", [xs[0], half], [xs[1]]),
                    _op("RESHAPE", [xs[1], flat], [xs[2]])]
        x2 = body.add_tensor(Tensor("x2", (3,)))
        ops.append(_op("ADD", [xs[2], w], [x2]))
        body.outputs = [i2, x2, w]
    else:
        xh, x2 = body.add_tensor(Tensor("xh", (3,))), body.add_tensor(Tensor("x2", (3,)))
        ops += [_op("MUL", [x, half], [xh]), _op("ADD", [xh, w], [x2])]
        w_out = w if body_kind == "plain" else \
            _const(model, body, "w_const", np.array([1, -2, 3], np.float32))
        body.outputs = [i2, x2, w_out]
    body.inputs, body.operators = [i, x, w], ops
    model.subgraphs = [main, cond, body]
    return save(model)


def _run(module, content: bytes, start: int):
    it = module.Interpreter(model_content=content)
    it.allocate_tensors()
    feeds = [np.int32(start), np.array([1.0, 2.0, -3.0], np.float32),
             np.array([0.25, -1.0, 4.0], np.float32)]
    results = []
    for _ in range(2):   # twice: the second invoke starts from the inputs again
        for d, f in zip(it.get_input_details(), feeds):
            it.set_tensor(d["index"], f)
        it.invoke()
        results.append([np.array(it.get_tensor(d["index"])) for d in it.get_output_details()])
    return results


def _expected(kind: str, start: int, limit: int = 1000) -> list:
    i, x, w = start, np.array([1.0, 2.0, -3.0], np.float32), np.array([0.25, -1.0, 4.0],
                                                                       np.float32)
    while i < limit:
        i += 1
        if kind == "swap":
            x, w = w, x
        else:
            x = x * np.float32(0.5) + w
            w = np.array([1, -2, 3], np.float32) if kind == "constant" else w
    return [np.int32(i), x, w]


@pytest.mark.parametrize("kind", ["plain", "swap", "constant", "reshape", "reshape_state"])
@pytest.mark.parametrize("iterations", [0, 1, 2, 3, 10])
def test_while_state(kind, iterations):
    """Against the loop in numpy, and LiteRT where it agrees: LiteRT's WHILE shares the body's
    output buffers with its inputs, so a body that exchanges two variables gives both the same
    value there (x = w = the initial w after one iteration); edgelite exchanges them."""
    content = _loop_model(kind, limit=1000)
    ours = _run(edgelite_interpreter, content, 1000 - iterations)
    want = _expected(kind, 1000 - iterations)
    for result in ours:
        for x, y in zip(result, want):
            np.testing.assert_array_equal(x, y)
    if kind != "swap":
        for result in _run(litert, content, 1000 - iterations):
            for x, y in zip(result, want):
                np.testing.assert_array_equal(x, y)


def _loop_of(it):
    """The Loop of the model's one WHILE op (its run closure holds it)."""
    from edgelite.interpreter.kernels.while_loop import Loop
    run = it._runtime.subgraph(0).steps[0][0]
    cells = [c.cell_contents for c in run.__closure__ or ()]
    return next(c for c in cells if isinstance(c, Loop))


def _work(it, start: int) -> tuple:
    """(Python frames, array copies) that one invoke of the loop from `start` runs."""
    it.set_tensor(it.get_input_details()[0]["index"], np.int32(start))
    counts = {"frames": 0, "copies": 0}

    def hook(frame, event, arg):
        if event == "call":
            counts["frames"] += 1
        elif event == "c_call" and getattr(arg, "__name__", "") in ("copyto", "array", "copy"):
            counts["copies"] += 1
    sys.setprofile(hook)
    try:
        it.invoke()
    finally:
        sys.setprofile(None)
    return counts["frames"], counts["copies"]


@pytest.mark.parametrize("kind, mode", [("plain", "swap"), ("swap", "copy"),
                                        ("constant", "copy"), ("reshape", "swap"),
                                        ("reshape_state", "copy")])
def test_while_work_per_iteration(kind, mode):
    """The guard of issue 17's WHILE speed, without a clock: a swapped loop runs one Python frame
    per op per iteration (the kernels' own) and copies nothing per iteration."""
    it = edgelite_interpreter.Interpreter(model_content=_loop_model(kind, limit=1000))
    it.allocate_tensors()
    for d, f in zip(it.get_input_details()[1:], [np.ones(3, np.float32)] * 2):
        it.set_tensor(d["index"], f)
    _work(it, 0)
    assert _loop_of(it).mode.startswith(mode), _loop_of(it).mode
    short, long = _work(it, 800), _work(it, 400)
    frames, copies = ((b - a) / 400 for a, b in zip(short, long))
    if mode == "swap":
        # cond LESS, body ADD, MUL, ADD: each kernel's run is one frame; nothing else runs.
        assert frames <= 4, f"{frames} Python frames per iteration for 4 ops"
        assert copies == 0, f"{copies} array copies per iteration"
    else:
        assert copies >= 3   # the fallback copies each variable: what the swap saves


def test_while_step_failure_names_its_operator():
    """A kernel failing inside the swapped loop (a GATHER past its table at the 6th iteration)
    names the body's operator, as the op-by-op plan does."""
    model = Model()
    main = Subgraph(name="main")
    i, i_out = main.add_tensor(Tensor("i", (), "int32")), main.add_tensor(Tensor("io", (), "int32"))
    main.inputs, main.outputs = [i], [i_out]
    main.operators = [_op("WHILE", [i], [i_out], cond_subgraph_index=1, body_subgraph_index=2)]
    cond = Subgraph(name="cond")
    ci, c = cond.add_tensor(Tensor("i", (), "int32")), cond.add_tensor(Tensor("c", (), "bool"))
    cond.inputs, cond.outputs = [ci], [c]
    cond.operators = [_op("LESS", [ci, _const(model, cond, "n", np.int32(10))], [c])]
    body = Subgraph(name="body")
    bi, got = body.add_tensor(Tensor("i", (), "int32")), body.add_tensor(Tensor("g", (), "int32"))
    bo = body.add_tensor(Tensor("o", (), "int32"))
    table = _const(model, body, "table", np.arange(5, dtype=np.int32))
    body.inputs, body.outputs = [bi], [bo]
    body.operators = [_op("GATHER", [table, bi], [got], axis=0),
                      _op("ADD", [bi, _const(model, body, "one", np.int32(1))], [bo])]
    model.subgraphs = [main, cond, body]
    it = edgelite_interpreter.Interpreter(model_content=save(model))
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.int32(0))
    with pytest.raises(IndexError, match=r"subgraph 2 operator 0 \(GATHER\): gather index 5"):
        it.invoke()
    assert _loop_of(it).mode == "swap"
