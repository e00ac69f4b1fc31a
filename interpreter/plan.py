"""The execution plan of a subgraph: prepared kernels in a flat list over preallocated arrays.

`prepare()` walks the operators in order, asks each kernel to validate and infer its outputs,
folds operators whose inputs are all constant, then plans memory (one arena shared by tensors
whose lifetimes do not overlap) and binds every step to its arrays. `invoke()` is a tight loop.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from edgelite.schema.graph import has_side_effects
from edgelite.schema.validate import SUBGRAPH_FIELDS
from edgelite.schema.litert_versions import LITERT_VERSION
from edgelite.schema.litert_versions import VERSIONS as LITERT_VERSIONS
from edgelite.schema.model import NUMPY_DTYPES, Model

from . import arena, budget, fusion
from .kernels import registry
from .kernels.registry import KernelError, Node, TensorInfo
from .partition import delegate_steps
from .views import plan_views


class UnsupportedOpsError(RuntimeError):
    """The model uses operators edgelite has no kernel for; the message lists all of them."""


class UnsupportedVersionError(UnsupportedOpsError, ValueError):
    """An operator's version is one no runtime registers (above the highest LiteRT's builtin
    resolver has, schema/litert_versions.py): a ValueError, as LiteRT raises when it is made."""


class Runtime:
    """What the subgraphs of one interpreter share: the model, their plans, resource variables."""

    def __init__(self, model: Model, preserve_all: bool = False, delegates=(),
                 reference: bool = False, model_bytes: int | None = None):
        self.model = model
        # One allocation budget for every plan and kernel of this interpreter (budget.py); its
        # limit follows the main subgraph's input sizes (set at each prepare of subgraph 0).
        self.model_bytes = model_bytes if model_bytes is not None else \
            sum(b.nbytes for b in model.buffers)
        self.budget = budget.Budget(budget.default_limit(self.model_bytes))
        self.preserve_all = preserve_all
        # OpResolverType.BUILTIN_REF: integer kernels round exactly as TFLite's reference
        # kernels; otherwise they may differ by 1 in the last place, as LiteRT's optimized ones.
        self.reference = reference
        self.delegates = list(delegates)
        self.plans: dict = {}
        self.resources: dict = {}      # resource id -> np.ndarray value
        self._resource_ids: dict = {}  # (container, shared_name) -> id
        self.variables: dict = {}      # (subgraph, tensor) -> persistent array (is_variable)
        self.once_done: set = set()    # CALL_ONCE subgraphs already run
        self._nesting = None

    def nesting(self) -> int:
        """How deep control flow nests from subgraph 0: the longest chain of subgraphs that call
        one another (IF, WHILE, CALL_ONCE...). A cycle is not followed (prepare refuses it)."""
        if self._nesting is None:
            calls = [sorted({v for op in sg.operators if op.options is not None
                             for name, v in op.options.fields.items()
                             if name in SUBGRAPH_FIELDS and isinstance(v, int)
                             and 0 <= v < len(self.model.subgraphs)})
                     for sg in self.model.subgraphs]
            depth: dict = {}
            stack = [(0, iter(calls[0]))]
            on_path = {0}
            while stack:                      # iterative depth-first: no recursion here
                s, children = stack[-1]
                child = next(children, None)
                if child is None:
                    stack.pop()
                    on_path.discard(s)
                    depth[s] = 1 + max((depth.get(c, 0) for c in calls[s]
                                        if c not in on_path), default=0)
                elif child not in depth and child not in on_path:
                    on_path.add(child)
                    stack.append((child, iter(calls[child])))
            self._nesting = depth.get(0, 1)
        return self._nesting

    def subgraph(self, index: int) -> "SubgraphPlan":
        plan = self.plans.get(index)
        if plan is None:
            plan = self.plans[index] = SubgraphPlan(self, index)
        return plan

    def resource_id(self, container: str, shared_name: str, owner) -> int:
        """The id of a resource variable: one per (container, shared_name); an empty name makes a
        variable private to the op that declares it."""
        key = (container, shared_name) if shared_name else ("", owner)
        return self._resource_ids.setdefault(key, len(self._resource_ids) + 1)

    def check_supported(self) -> None:
        """Raise UnsupportedVersionError for an operator version above the highest LiteRT
        registers (as LiteRT refuses it), then UnsupportedOpsError listing every operator
        without a kernel, in every subgraph.

        Deliberate leniency: a version *below* LiteRT's lowest (BROADCAST_TO 1, which LiteRT
        registers from 2) runs; edgelite's writer gave that version before."""
        for code in {op.opcode for sg in self.model.subgraphs for op in sg.operators}:
            span = LITERT_VERSIONS.get(code.builtin)
            if span is not None and code.version > span[1]:
                raise UnsupportedVersionError(
                    f"Didn't find op for builtin opcode '{code.builtin}' version "
                    f"'{code.version}': no runtime has it (LiteRT {LITERT_VERSION} registers "
                    f"versions {span[0]}..{span[1]}); the file is corrupt or from a newer "
                    "toolchain")
        missing = []
        for si, sg in enumerate(self.model.subgraphs):
            infos = _static_infos(self.model, si)
            for oi, op in enumerate(sg.operators):
                node = _node(self, si, sg, oi, op, infos)
                if registry.lookup(node) is None:
                    missing.append(_describe_missing(node))
        if missing:
            raise UnsupportedOpsError(
                f"edgelite has no kernel for {len(missing)} operator(s):\n  "
                + "\n  ".join(missing))


def _describe_missing(node: Node) -> str:
    where = f"subgraph {node.subgraph} operator {node.index}"
    if node.is_custom and node.op in registry.UNAVAILABLE_CUSTOM_OPS:
        return f"{where}: custom op {node.op!r}: {registry.UNAVAILABLE_CUSTOM_OPS[node.op]}"
    if node.is_custom:
        return (f"{where}: custom op {node.op!r} is not registered "
                "(register a Python kernel with edgelite.interpreter.register_custom_op)")
    key = registry.arithmetic(node)
    have = registry.supported_keys(node.op)
    if have:
        return f"{where}: {node.op} with {key} arithmetic (edgelite has {', '.join(have)})"
    return f"{where}: {node.op} (no kernel in edgelite)"


def _static_infos(model: Model, si: int, shapes: dict | None = None) -> list:
    sg = model.subgraphs[si]
    graph_inputs = set(sg.inputs)
    written = {t for op in sg.operators for t in op.outputs}
    infos = []
    for i, t in enumerate(sg.tensors):
        data = None
        dtype = NUMPY_DTYPES.get(t.dtype, np.dtype(object))
        if i not in graph_inputs and not t.is_variable and t.dtype in NUMPY_DTYPES \
                and t.dtype not in ("resource", "variant"):   # handles: a buffer means nothing
            data = model.constant(sg, i)
            if data is None and 0 in t.shape and i not in written:
                data = np.zeros(t.shape, NUMPY_DTYPES[t.dtype])  # an empty constant
        elif t.dtype == "int4" and i not in graph_inputs and not t.is_variable:
            # int4 weights: unpacked to int8 values once (kernels see type_name "int4")
            data, dtype = model.constant(sg, i), np.dtype(np.int8)
        shape = shapes.get(i, t.shape) if shapes else t.shape
        infos.append(TensorInfo(i, t.name, tuple(shape), dtype, t.dtype, t.quantization, data,
                                t.is_variable))
    return infos


def _node(runtime, si, sg, oi, op, infos) -> Node:
    return Node(op=op.opcode.name, index=oi,
                inputs=[infos[t] if t >= 0 else None for t in op.inputs],
                outputs=[infos[t] for t in op.outputs], options=op.options,
                custom_options=op.custom_options, subgraph=si,
                is_custom=op.opcode.builtin == "CUSTOM", runtime=runtime)


def memory_limit() -> int:
    """Bytes this process may allocate (budget.machine_limit; a plan's budget is smaller)."""
    return budget.machine_limit()


def _prepare_node(node: Node):
    """The kernel's `run` for a node; every failure names the operator."""
    from .checks import check_arity, check_signature   # (prepare only: not at import)
    prepare = registry.lookup(node)
    if prepare is None:
        raise UnsupportedOpsError(_describe_missing(node))
    check_signature(node)
    try:
        run = prepare(node)
        check_arity(node, run)
        budget.check_outputs(node)
        return run
    except budget.MemoryBudgetError as e:
        if str(e).startswith("subgraph "):
            raise
        raise budget.MemoryBudgetError(f"subgraph {node.subgraph} operator {node.index} "
                                       f"({node.op}): {e}") from None
    except (KernelError, UnsupportedOpsError):
        raise
    except Exception as e:  # a kernel's own check missed it: still name the operator
        raise node.fail(f"cannot be prepared: {type(e).__name__}: {e}") from e


class _DynamicStep:
    """An operator whose shapes are known only while running: its outputs' shapes depend on input
    values (the kernel set `node.dynamic`), or it reads such a tensor. It is prepared again
    whenever its input shapes change; its outputs are allocated outside the arena and stored in
    the plan's array table."""

    def __init__(self, plan, oi: int, op, node=None, run=None):
        self.plan, self.oi, self.op = plan, oi, op
        self.node, self.run = node, run
        self.shapes = None if node is None else "prepared"

    def _prepare(self, ins: list) -> None:
        plan = self.plan
        infos = list(plan.infos)
        for t, value in zip(self.op.inputs, ins):
            if t >= 0:
                infos[t] = dataclasses.replace(infos[t], shape=value.shape)
        for t in self.op.outputs:
            infos[t] = dataclasses.replace(infos[t], data=None)
        self.node = _node(plan.runtime, plan.index, plan.sg, self.oi, self.op, infos)
        self.run = _prepare_node(self.node)

    def __call__(self) -> None:
        arrays = self.plan.arrays
        ins = [None if t < 0 else arrays[t] for t in self.op.inputs]
        shapes = tuple(None if a is None else a.shape for a in ins)
        if self.shapes != shapes and self.shapes != "prepared":
            self._prepare(ins)
        self.shapes = shapes
        node = self.node
        if node.dynamic:
            outs = self.run(*ins)
        elif node.outputs and all(o.data is not None for o in node.outputs):
            outs = [o.data for o in node.outputs]
        else:
            need = sum(budget.nbytes(o.shape, o.dtype) for o in node.outputs)
            budget.check(node, need, f"its outputs {[list(o.shape) for o in node.outputs]}")
            outs = [np.empty(o.shape, o.dtype) for o in node.outputs]
            self.run(*ins, *outs)
        for t, value in zip(self.op.outputs, outs):
            arrays[t] = value


try:  # numpy's error state is a context variable: set it as np.errstate does (0.15 vs 0.8 µs)
    from numpy._core._ufunc_config import _extobj_contextvar as ERRORS
    with np.errstate(all="ignore"):
        IGNORE_ERRORS = ERRORS.get()
except ImportError:  # numpy < 2
    class _Errors:
        @staticmethod
        def set(_):
            state = np.errstate(all="ignore")
            state.__enter__()
            return state

        @staticmethod
        def reset(state):
            state.__exit__(None, None, None)
    ERRORS, IGNORE_ERRORS = _Errors(), None


def _view_step() -> None:
    """The step of an op whose output is a view of its input (_aliases): nothing to do."""


# Ops whose output is their input's values in another shape: a view of the input (_aliases).
ALIAS_OPS = frozenset({"RESHAPE", "SQUEEZE", "EXPAND_DIMS"})

# Plans of more steps than this run as a loop over `steps` (a generated function's compile time
# grows with its length: ~1 ms per 100 steps); below it, one generated function.
MAX_COMPILED_STEPS = 20000


def compile_steps(specs: list, steps: list):
    """One function that calls every step's kernel with its arrays, generated at allocate:

        def run_steps():
            r0(t1, t2, t3, t4)
            f0(t4, c1, t6); f1(t6, c2, c3, t5)
            ...

    with kernels, arrays and other objects the globals of its own namespace: no loop, no tuple
    unpacked (~0.1 µs a step). Not closure variables: CPython 3.11+ copies every free
    variable into the frame at each call (COPY_FREE_VARS), ~2 ns each, and a plan of 130
    objects paid ~0.25 µs a call for it. A bound step (bind_step) of plain calls
    (kernels/steps.py) is written as its calls on one line: no frame (~0.06 µs). Line s+2 is
    step s (`failed_step`). `steps`: each spec's (kernel, arrays) (a dynamic step's: none).
    Beyond MAX_COMPILED_STEPS, a loop."""
    if len(specs) > MAX_COMPILED_STEPS:
        def run_steps():
            for run, args in steps:
                run(*args)
        run_steps.steps, run_steps.step_lines, run_steps.bound = steps, None, 0
        run_steps.inlined = 0
        return run_steps
    from .kernels.steps import namer, step_line
    bound: dict = {}   # name in run_steps' namespace -> object
    name = namer(bound)
    lines = []
    nbound = ninlined = 0

    for (_, _, ins, outs), (run, args) in zip(specs, steps):
        if isinstance(run, _DynamicStep):   # it reads the array table itself
            lines.append(f"    {name(run, 'r')}()")
            continue
        fixed = bind_step(run, list(args))
        if fixed is not None:
            nbound += 1
            line = step_line(fixed, name)
            ninlined += line is not None
            lines.append(f"    {name(fixed, 'r')}()" if line is None else "    " + line)
            continue
        arrays = []
        for t, a in zip(list(ins) + list(outs), args):
            arrays.append("None" if t < 0 else name(a, "t"))
        lines.append(f"    {name(run, 'r')}({', '.join(arrays)})")
    source = "\n".join(["# run_steps' kernels, arrays and objects are this source's globals",
                         "def run_steps():", *(lines or ["    pass"]), ""])
    namespace: dict = dict(bound)
    exec(compile(source, "<edgelite plan>", "exec"), namespace)  # our own source
    run_steps = namespace["run_steps"]
    run_steps.step_lines = run_steps.__code__.co_firstlineno + 1   # the line of step 0
    run_steps.bound = nbound    # steps bound at allocate (bind_step)
    run_steps.inlined = ninlined   # of those, written as their calls (steps.step_line)
    run_steps.source = source
    return run_steps


def bind_step(run, args: list):
    """The kernel's `run.bind(*args)`, where it has one: a function of no arguments doing what
    `run(*args)` does on these very arrays, with its views, reshapes and scratch made once
    (the plan's arrays never change between allocations). None when the kernel has no `bind`
    or declines (returns None)."""
    bind = getattr(run, "bind", None)
    return None if bind is None else bind(*args)


def failed_step(error: BaseException, run_steps) -> int:
    """The step whose kernel raised `error` inside `run_steps` (from its traceback)."""
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is run_steps.__code__:
            if run_steps.step_lines is None:       # the loop: the frame's `run` is the step
                run = tb.tb_frame.f_locals.get("run")
                return next((s for s, (r, _) in enumerate(run_steps.steps) if r is run), 0)
            return tb.tb_lineno - run_steps.step_lines
        tb = tb.tb_next
    return 0


class SubgraphPlan:
    def __init__(self, runtime: Runtime, index: int):
        self.runtime = runtime
        self.index = index
        self.sg = runtime.model.subgraphs[index]
        self.input_shapes: dict = {}   # tensor -> shape set by resize
        self.ready = False
        self.steps: list = []          # (kernel, its arrays) per step, in order
        self.run_steps = None          # all steps in one generated function (compile_steps)
        self.arrays: list = []
        self.infos: list = []
        self.arena_bytes = 0
        self.live_bytes = 0
        self.preparing = False         # inside prepare (a subgraph reached again is a cycle)
        self.key = ("plan", index)     # what this plan holds of the budget
        self.step_ops: list = []       # operator index of each step (for profiles)
        self.run_ops: list = []        # operator index of each step of run_steps (for errors)
        self.placement: list = []      # Placement per operator, with delegates (delegation.py)
        self.absorbed: list = []       # ops run inside another op's fused step (fusion.py)

    # -- preparation -------------------------------------------------------------------------

    def resize_input(self, tensor: int, shape) -> None:
        self.input_shapes[tensor] = tuple(int(d) for d in shape)
        self.ready = False

    def prepare(self) -> None:
        self.preparing, self.ready = True, False
        try:
            self._prepare()
        finally:
            self.preparing = False

    def _prepare(self) -> None:
        model, sg, si = self.runtime.model, self.sg, self.index
        self.runtime.budget.release(self.key)
        infos = _static_infos(model, si, self.input_shapes)
        if si == 0:
            inputs = sum(budget.nbytes(infos[t].shape, infos[t].dtype) for t in sg.inputs
                         if infos[t].dtype != np.dtype(object))
            self.runtime.budget.limit = budget.default_limit(self.runtime.model_bytes, inputs)
        specs = []  # (op index, run, input tensors, output tensors)
        nodes = {}  # op index -> Node, for delegates
        dynamic: set = set()  # tensors whose shapes are known only while running
        inputs = set(sg.inputs)
        for oi, op in enumerate(sg.operators):
            static_ins = [t for t in op.inputs if t >= 0 and t not in dynamic]
            if any(t in dynamic for t in op.inputs):
                specs.append((oi, _DynamicStep(self, oi, op), static_ins, []))
                dynamic.update(op.outputs)
                continue
            node = _node(self.runtime, si, sg, oi, op, infos)
            for t in op.outputs:   # only a corrupt file has an op write these
                what = "an input of the subgraph" if t in inputs else \
                    "a constant (or a tensor an earlier op wrote)" \
                    if t >= 0 and infos[t].data is not None else None
                if what:
                    raise node.fail(f"writes tensor {t} ({sg.tensors[t].name!r}), {what}")
            for k, t in enumerate(op.inputs):  # sparse weights, read by any op
                if t >= 0 and sg.tensors[t].sparsity is not None and infos[t].data is None \
                        and not infos[t].is_variable and t not in sg.inputs:
                    from .kernels.sparse import densify_input   # sparse files only: not at import
                    densify_input(node, k, model)
            run = _prepare_node(node)
            if node.dynamic:
                specs.append((oi, _DynamicStep(self, oi, op, node, run), static_ins, []))
                dynamic.update(op.outputs)
                continue
            for k, out in enumerate(node.outputs):
                if any(not isinstance(d, (int, np.integer)) or d < 0 for d in out.shape):
                    raise node.fail(f"output {k} has an unknown shape {out.shape}: the kernel "
                                    "must infer it, or set node.dynamic when it depends on values")
                out.shape = tuple(int(d) for d in out.shape)
            if all(o.data is not None for o in node.outputs) and node.outputs:
                continue  # prepare knew the values (e.g. SHAPE of a static tensor)
            if self._foldable(op, node):
                try:
                    values = budget.fold(node, run, self.key)
                except KernelError:
                    raise
                except Exception as e:  # the kernel's checks missed it: still name the op
                    raise node.fail(f"cannot be folded (its inputs are constants): "
                                    f"{type(e).__name__}: {e}") from e
                for o, value in zip(node.outputs, values):
                    o.data = value
                continue
            specs.append((oi, run, list(op.inputs), list(op.outputs)))
            nodes[oi] = node
        self.infos = infos
        self.dynamic = dynamic
        self.absorbed = []   # ops inside a fused step other than its first (fusion.py)
        if not (self.runtime.delegates or self.runtime.preserve_all or self.runtime.reference):
            specs, self.absorbed = fusion.fuse(sg, specs, nodes)   # chains as one step
        if self.runtime.delegates:
            specs, self.placement = delegate_steps(self.runtime.delegates, si, sg, infos, specs,
                                                   nodes, keep_all=self.runtime.preserve_all)
        self._allocate(specs)
        self.ready = True

    @staticmethod
    def _foldable(op, node: Node) -> bool:
        return (not has_side_effects(op) and not node.is_custom
                and all(t is None or t.data is not None for t in node.inputs))

    def _allocate(self, specs: list) -> None:
        infos, sg = self.infos, self.sg
        arrays: list = [None] * len(infos)
        own = set(sg.inputs) | set(sg.outputs)
        if self.runtime.preserve_all:
            own.update(range(len(infos)))
        all_specs = specs
        specs, alias = self._aliases(specs, own)
        heads = dict(alias)   # reshapes: views of their root from its first value on
        specs, alias, views = plan_views(self, specs, own, alias)   # slices, concat parts
        # Lifetimes of the tensors the steps write or read (a view's uses are its root's).
        first: dict = {}
        last: dict = {}
        rooted = [(oi, run, [alias.get(t, t) for t in ins], [alias.get(t, t) for t in outs])
                  for oi, run, ins, outs in specs]
        for s, (_, _, ins, outs) in enumerate(rooted):
            for t in outs:
                first.setdefault(t, s)
                last[t] = max(last.get(t, s), s)
            for t in ins:
                if t >= 0:
                    first.setdefault(t, -1)
                    last[t] = s
        needed = (set(first) | own) - self.dynamic
        self._check_has_data(rooted, first)
        tails = self._tails(specs, alias, heads)
        total = 0
        lifetimes = []
        for t in sorted(needed):
            info = infos[t]
            if info.data is not None:
                arrays[t] = info.data
                continue
            nbytes = budget.nbytes(info.shape, info.dtype)
            total += nbytes
            if info.is_variable or t in own or t in tails or first.get(t, -1) < 0:
                continue
            lifetimes.append(arena.Lifetime(t, nbytes, first[t], last[t]))
        offsets, size = arena.plan(lifetimes)
        in_arena = sum(lt.nbytes for lt in lifetimes)
        self.runtime.budget.charge(self.key, size + total - in_arena,
                                   f"subgraph {self.index}'s tensors (an arena of {size} bytes "
                                   f"and {total - in_arena} bytes outside it)")
        block = arena.allocate(size)
        for lt in lifetimes:
            info = infos[lt.tensor]
            arrays[lt.tensor] = block[offsets[lt.tensor]:offsets[lt.tensor] + lt.nbytes] \
                .view(info.dtype).reshape(info.shape)
        for t in sorted(needed):
            if arrays[t] is None:
                arrays[t] = self._own_array(t, infos[t], tails.get(t))
        views.make(arrays)   # a reshape's, a slice's output, a concat's input: views, no step
        self.arena_bytes = size
        self.live_bytes = arena.live_lower_bound(lifetimes)
        self.arrays = arrays
        # A dynamic step reads the array table itself (its static inputs are listed in its spec
        # only so that their lifetimes cover it).
        # `steps` lists every operator that is not folded, a view (alias) as a step that does
        # nothing (profiles show it, at no cost); run_steps runs the others.
        by_op = {oi: (run, () if isinstance(run, _DynamicStep) else
                      tuple(None if t < 0 else arrays[t] for t in ins)
                      + tuple(arrays[t] for t in outs)) for oi, run, ins, outs in specs}
        # (an op fused into another's step is listed too, as a step doing nothing)
        step_ops = sorted([oi for oi, *_ in all_specs] + self.absorbed) if self.absorbed \
            else [oi for oi, *_ in all_specs]
        self.steps = [by_op.get(oi, (_view_step, ())) for oi in step_ops]
        self.step_ops = step_ops
        self.run_ops = list(by_op)   # operator of each step run_steps runs
        self.run_steps = compile_steps(specs, list(by_op.values()))

    def _aliases(self, specs: list, own: set) -> tuple:
        """(the specs left, {tensor: root}): a RESHAPE, SQUEEZE or EXPAND_DIMS whose output is
        no subgraph input or output (nor a variable) becomes a view of its input's array,
        allocated once for both lifetimes, and runs no step (a copy of 0.6 µs and up)."""
        infos, kept, alias = self.infos, [], {}
        for spec in specs:
            oi, run, ins, outs = spec
            x, y = (ins[0] if ins else -1), (outs[0] if len(outs) == 1 else -1)
            if (not self.runtime.delegates and x >= 0 and y >= 0 and y not in own
                    and self.sg.operators[oi].opcode.name in ALIAS_OPS
                    and not isinstance(run, _DynamicStep)
                    and infos[x].data is None and not infos[x].is_variable
                    and not infos[y].is_variable and x not in self.dynamic
                    and infos[x].dtype == infos[y].dtype
                    and int(np.prod(infos[x].shape)) == int(np.prod(infos[y].shape))):
                alias[y] = alias.get(x, x)
                continue
            kept.append(spec)
        return kept, alias

    def _check_has_data(self, specs: list, first: dict) -> None:
        """A tensor an op reads must have a value: a constant's data, a subgraph input, a
        variable, or an earlier op's output. One with none (its buffer empty: a weight whose
        data is missing, a large-format buffer at offset 1) is refused, as LiteRT refuses it
        ("Input tensor 1 lacks data"); it would run as zeros."""
        inputs = set(self.sg.inputs)
        for s, (oi, _, ins, _) in enumerate(specs):
            for k, t in enumerate(ins):
                if t < 0 or first.get(t, s) >= 0 or t in inputs or t in self.dynamic:
                    continue
                info = self.infos[t]
                tensor = self.sg.tensors[t]
                if info.data is not None or info.is_variable or tensor.dtype not in NUMPY_DTYPES \
                        or tensor.dtype in ("resource", "variant") or 0 in info.shape:
                    continue
                raise KernelError(
                    f"subgraph {self.index} operator {oi} ({self.sg.operators[oi].op}): input "
                    f"{k} is tensor {t} ({tensor.name!r}), which lacks data: its buffer "
                    f"{tensor.buffer} is empty, no operator writes it and it is no input of the "
                    "subgraph")

    def _own_array(self, t: int, info: TensorInfo, tail=None) -> np.ndarray:
        if info.is_variable:
            key = (self.index, t)
            value = self.runtime.variables.get(key)
            if value is None or value.shape != info.shape:
                value = self.runtime.variables[key] = self._variable_initial(t, info)
            return value
        if tail is not None:   # the head of a buffer ending in `tail` (_tails)
            size = int(np.prod(info.shape, dtype=np.int64))
            buffer = np.zeros(size + tail.size, info.dtype)
            buffer[size:] = tail
            return buffer[:size].reshape(info.shape)
        return np.zeros(info.shape, info.dtype)

    def _tails(self, specs: list, alias: dict, heads: dict) -> dict:
        """{tensor: values}: the tensors a kernel reads from the head of a buffer ending in
        those values (its `run.input_tail`, (input position, values): a gathering CONV_2D
        takes its im2col matrix from [x..., 0, 1] and so copies nothing in). Such a tensor is
        allocated on its own, outside the arena; the first kernel asking for it decides."""
        tails: dict = {}
        for _, run, ins, _ in specs:
            want = getattr(run, "input_tail", None)
            if want is None or want[0] >= len(ins) or ins[want[0]] < 0:
                continue
            x = ins[want[0]]
            t = alias.get(x, x)
            if x in alias and heads.get(x) != t:   # a view from elsewhere in its root
                continue
            info = self.infos[t]
            if t not in tails and info.data is None and not info.is_variable \
                    and t not in self.dynamic and info.dtype == want[1].dtype:
                tails[t] = want[1]
        return tails

    def _variable_initial(self, t: int, info: TensorInfo) -> np.ndarray:
        """A variable tensor starts from its buffer's data when it has some, else zeros."""
        buf = self.runtime.model.buffers[self.sg.tensors[t].buffer]
        if buf.nbytes and buf.nbytes == int(np.prod(info.shape)) * info.dtype.itemsize:
            return buf.data.view(info.dtype).reshape(info.shape).copy()
        return np.zeros(info.shape, info.dtype)

    def reset_variables(self) -> None:
        for (si, t), value in self.runtime.variables.items():
            if si == self.index:
                value[...] = self._variable_initial(t, self.infos[t])

    # -- running -----------------------------------------------------------------------------

    def invoke(self) -> None:
        """Run the steps (Interpreter.invoke runs these lines itself: one frame less)."""
        if not self.ready:
            self.prepare()
        token = ERRORS.set(IGNORE_ERRORS)   # np.errstate(all="ignore"), without its frames: as
        try:                                # LiteRT, no warnings for inf/nan arithmetic
            self.run_steps()
        except Exception as e:
            self.raise_named(e)
        finally:
            ERRORS.reset(token)

    def raise_named(self, e: Exception):
        """Raise `e`, which a step of run_steps raised, naming the operator of that step."""
        if isinstance(e, KernelError):
            if str(e).startswith("subgraph "):
                raise e
            oi = self.run_ops[failed_step(e, self.run_steps)]
            raise type(e)(f"subgraph {self.index} operator {oi} ({self.sg.operators[oi].op}): "
                          f"{e}") from None
        oi = self.run_ops[failed_step(e, self.run_steps)]
        raise RuntimeError(f"subgraph {self.index} operator {oi} "
                           f"({self.sg.operators[oi].op}) failed: {type(e).__name__}: {e}") \
            from e

    def call(self, inputs: list) -> list:
        """Run this subgraph on `inputs` (control flow): re-plans when their shapes change and
        returns its output arrays (owned by the plan: copy before the next call)."""
        for t, value in zip(self.sg.inputs, inputs):
            if not self.ready or self.arrays[t].shape != value.shape:
                self.input_shapes[t] = value.shape
                self.ready = False
        if not self.ready:
            self.prepare()
        for t, value in zip(self.sg.inputs, inputs):
            np.copyto(self.arrays[t], value, casting="unsafe")
        self.invoke()
        return [self.arrays[t] for t in self.sg.outputs]
