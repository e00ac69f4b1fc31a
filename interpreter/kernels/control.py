"""Control flow and resource variables: CALL_ONCE IF WHILE VAR_HANDLE READ_VARIABLE ASSIGN_VARIABLE.

Subgraphs run through `node.runtime.subgraph(i)` (an execution plan of their own); variables live in
`node.runtime.resources`, keyed by the id VAR_HANDLE gives at prepare.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .registry import register

ANY = ("none", "float32", "float16", "int8", "uint8", "int16", "int32", "int64", "bool",
       "resource", "variant", "uint32", "uint16", "uint64", "float64", "complex64")


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else (value or "")


@register("VAR_HANDLE", *ANY)
def var_handle(node):
    if len(node.outputs) != 1:
        raise node.fail(f"expected 1 output (the resource handle), got {len(node.outputs)}")
    opts = node.options
    rid = node.runtime.resource_id(_text(opts.container), _text(opts.shared_name),
                                   (node.subgraph, node.index))
    out = node.outputs[0]
    out.data = np.full(out.shape, rid, np.int32)
    return None


def _resource_id(node) -> int:
    handle = node.input(0)
    if handle.data is None:
        raise node.fail("the resource handle is not known before running (it must come from a "
                        "VAR_HANDLE in the same subgraph)")
    return int(np.asarray(handle.data).reshape(-1)[0])


WHOLE = slice(None)


def _bytes(a: np.ndarray, write: bool = True):
    """The bytes of a C-contiguous array (writable where `write`) as a flat memoryview, else
    None (no bytes: empty, Python objects)."""
    if not a.flags.c_contiguous or (write and not a.flags.writeable) or a.size == 0 \
            or a.dtype.hasobject:
        return None
    return memoryview(a.reshape(-1).view(np.uint8))


@register("READ_VARIABLE", "resource")
def read_variable(node):
    rid = _resource_id(node)
    resources = node.runtime.resources
    name = node.outputs[0].name

    def run(handle, out):
        value = resources.get(rid)
        if value is None:
            raise RuntimeError(f"READ_VARIABLE {name!r}: the variable was never assigned")
        if value.shape != out.shape:
            raise RuntimeError(f"READ_VARIABLE {name!r}: the variable has shape {value.shape}, "
                               f"the model declares {out.shape}")
        np.copyto(out, value, casting="unsafe")

    def bind(handle, out):
        """`run` on the plan's fixed arrays (plan.bind_step), the checks the same: the bytes
        through memoryviews when the variable's array is C-contiguous and of the output's
        type, else `run` (np.copyto and its cast). A memoryview's slice assignment is one
        memmove, 0.06 µs (np.copyto 0.3 µs on these few hundred bytes); the variable's view is
        made again only when its array changes (an ASSIGN of another shape,
        reset_all_variables)."""
        dest = _bytes(out)
        if dest is None:
            return None
        get, put, shape, dtype = resources.get, dest.__setitem__, out.shape, out.dtype
        last = [WHOLE, None]    # the variable's array (none yet), its bytes

        def read():
            value = get(rid)
            if value is not last[0]:
                last[:] = value, None if value is None or value.shape != shape \
                    or value.dtype != dtype else _bytes(value, False)
            if last[1] is None:
                run(handle, out)          # (its error, or its cast)
            else:
                put(WHOLE, last[1])
        return read
    run.bind = bind
    return run


@register("ASSIGN_VARIABLE", "resource")
def assign_variable(node):
    node.expect_inputs(2)
    rid = _resource_id(node)
    resources = node.runtime.resources

    def run(handle, value):
        current = resources.get(rid)
        if current is None or current.shape != value.shape or current.dtype != value.dtype:
            resources[rid] = np.array(value)
        else:
            np.copyto(current, value)

    def bind(handle, value):
        """`run` on the plan's fixed arrays (plan.bind_step): the bytes through memoryviews
        into the variable's array (as READ_VARIABLE's bind)."""
        source = _bytes(value, False)
        if source is None:
            return None
        get, shape, dtype = resources.get, value.shape, value.dtype
        last = [WHOLE, None]    # the variable's array (none yet), the setter of its bytes

        def assign():
            current = get(rid)
            if current is not last[0]:
                if current is None or current.shape != shape or current.dtype != dtype \
                        or _bytes(current) is None:
                    run(handle, value)
                    return
                last[:] = current, _bytes(current).__setitem__
            last[1](WHOLE, source)
        return assign
    run.bind = bind
    return run


@register("CALL_ONCE", *ANY)
def call_once(node):
    index = node.options.init_subgraph_index
    runtime = node.runtime
    plan = runtime.subgraph(index)
    if plan.sg.inputs:
        raise node.fail(f"init subgraph {index} takes {len(plan.sg.inputs)} inputs; CALL_ONCE "
                        "gives it none")

    def run(*_):
        if index not in runtime.once_done:
            plan.call([])
            runtime.once_done.add(index)
    return run


def _prepared(node, index: int, inputs: list, role: str) -> object:
    """The plan of subgraph `index`, prepared for `inputs` (TensorInfos) shapes: prepared once
    (an IF whose branches are one subgraph, or a chain of them, prepares each subgraph once,
    not once per path), again only when the shapes differ."""
    plan = node.runtime.subgraph(index)
    if len(plan.sg.inputs) != len(inputs):
        raise node.fail(f"{role} subgraph {index} takes {len(plan.sg.inputs)} inputs, got "
                        f"{len(inputs)}")
    if plan.preparing:
        raise node.fail(f"{role} subgraph {index} is being prepared already: the subgraphs "
                        "call each other in a cycle (recursion), which no runtime can run")
    for t, info in zip(plan.sg.inputs, inputs):
        if info is None:
            raise node.fail(f"an omitted input goes to {role} subgraph {index}")
        if plan.sg.tensors[t].dtype != info.type_name:
            raise node.fail(f"{role} subgraph {index}'s input tensor {t} is "
                            f"{plan.sg.tensors[t].dtype}, the op gives it {info.type_name}")
    shapes = [tuple(info.shape) for info in inputs]
    if plan.ready and all(plan.arrays[t] is not None and plan.arrays[t].shape == shape
                          for t, shape in zip(plan.sg.inputs, shapes)):
        return plan
    for t, shape in zip(plan.sg.inputs, shapes):
        plan.resize_input(t, shape)
    plan.prepare()
    return plan


def _check_outputs(node, plan, role: str, index: int, want: list) -> None:
    """`plan`'s outputs are as many as `want` (TensorInfos) and of their types."""
    outs = plan.sg.outputs
    if len(outs) != len(want):
        raise node.fail(f"{role} subgraph {index} gives {len(outs)} outputs, the op needs "
                        f"{len(want)}")
    for k, (t, info) in enumerate(zip(outs, want)):
        if plan.sg.tensors[t].dtype != info.type_name:
            raise node.fail(f"{role} subgraph {index}'s output {k} is "
                            f"{plan.sg.tensors[t].dtype}, the op's is {info.type_name}")


def _check_condition(node, info, what: str) -> None:
    """A condition: one bool value (as LiteRT's IF and WHILE check)."""
    if info.type_name != "bool" or int(np.prod(info.shape, dtype=np.int64)) != 1:
        raise node.fail(f"{what} must be one bool value, got {info.type_name} of shape "
                        f"{list(info.shape)}")


def _copy_out(values, outs) -> None:
    for value, out in zip(values, outs):
        np.copyto(out, value, casting="unsafe")


def _output_shapes(plan):
    """The output shapes of a prepared subgraph plan; None when some are known only while
    running."""
    arrays = [plan.arrays[t] for t in plan.sg.outputs]
    return None if any(a is None for a in arrays) else [a.shape for a in arrays]


@register("IF", "bool")
def if_(node):
    opts = node.options
    if not node.inputs:
        raise node.fail("expected the condition and the branches' inputs, got no inputs")
    _check_condition(node, node.input(0), "the condition (input 0)")
    args = node.inputs[1:]
    then_plan = _prepared(node, opts.then_subgraph_index, args, "then")
    else_plan = _prepared(node, opts.else_subgraph_index, args, "else")
    _check_outputs(node, then_plan, "then", opts.then_subgraph_index, node.outputs)
    _check_outputs(node, else_plan, "else", opts.else_subgraph_index, node.outputs)
    shapes, other = _output_shapes(then_plan), _output_shapes(else_plan)

    def branch(cond):
        return then_plan if bool(np.asarray(cond).reshape(-1)[0]) else else_plan

    if shapes is None or shapes != other:
        # The branches give different shapes: the output shape is the taken branch's.
        node.dynamic = True
        return lambda cond, *values: [np.array(v) for v in branch(cond).call(list(values))]
    for out, shape in zip(node.outputs, shapes):
        out.shape = shape
    n_in = len(node.inputs)

    def run(cond, *arrays):
        _copy_out(branch(cond).call(list(arrays[:n_in - 1])), arrays[n_in - 1:])
    return run


@register("WHILE", *ANY)
def while_(node):
    opts = node.options
    if len(node.outputs) != len(node.inputs):
        raise node.fail(f"has {len(node.inputs)} inputs and {len(node.outputs)} outputs: the "
                        "loop variables are both")
    cond = _prepared(node, opts.cond_subgraph_index, node.inputs, "cond")
    if len(cond.sg.outputs) != 1:
        raise node.fail(f"cond subgraph {opts.cond_subgraph_index} gives "
                        f"{len(cond.sg.outputs)} outputs, a condition is 1")
    c = cond.infos[cond.sg.outputs[0]]
    shape = cond.arrays[cond.sg.outputs[0]]
    _check_condition(node, dataclasses.replace(c, shape=c.shape if shape is None
                                               else shape.shape),
                     f"cond subgraph {opts.cond_subgraph_index}'s output")
    body = _prepared(node, opts.body_subgraph_index, node.inputs, "body")
    _check_outputs(node, body, "body", opts.body_subgraph_index, node.inputs)
    shapes = _output_shapes(body)
    n = len(node.inputs)
    # Here, not at import: resource variables, CALL_ONCE and IF need neither (nor hybrid.py).
    from . import while_rnn
    from .while_loop import Loop
    loop = Loop(cond, body)
    try:
        sequence = while_rnn.match(node, cond, body)
    except while_rnn.NoMatch:
        sequence = None
    if sequence is not None:   # a Keras LSTM/GRU layer: one fused sequence kernel
        for out, info in zip(node.outputs, node.inputs):
            out.shape = tuple(info.shape)

        def fused(*arrays):
            values = list(arrays[:n])
            if not sequence.run(values, arrays[n:]):   # the steps do not fit: as it is
                _copy_out(loop.copying(values), arrays[n:])
        return fused

    if shapes is None or shapes != [tuple(t.shape) for t in node.inputs]:
        # The loop variables change shape: the outputs' shapes are known only at the end.
        node.dynamic = True
        return lambda *values: loop.copying(list(values))
    for out, shape in zip(node.outputs, shapes):
        out.shape = shape

    def run(*arrays):
        _copy_out(loop.run(list(arrays[:n])), arrays[n:])
    return run
