"""Model-parallel execution: one model's plan cut into stages on different Ray actors, pipelined
over a stream of inputs.

    pipe = Pipeline("model.tflite", stages=2)
    for outputs in pipe.map(stream_of_feeds):   # in order; stage 0 runs input i+1 while
        ...                                      # stage 1 runs input i

The cuts are the delegate partitioner's (`edgelite.interpreter.partition`): for each stage a
claiming delegate takes that stage's operators (a contiguous range of the plan, balanced by
operator count unless `cuts` gives the first operator of each later stage), the plan groups
them into one partition, and the partition's boundary is what moves: its inputs (the tensors it
reads and does not write, constants excluded) and its outputs (the tensors it writes that a
later stage or the caller reads). Each stage is then a `.tflite` of its own (its operators, plus
any constant-folded producers of what it reads, and those boundary tensors as graph inputs and
outputs) in an edgelite Interpreter on its actor; the boundary tensors travel as Ray objects
(Send/Recv: the object store, zero-copy on one node). The same kernels run on the same shapes,
so the outputs equal the single-process run bit for bit.
"""
from __future__ import annotations

import copy
from collections import deque
from dataclasses import dataclass

import numpy as np

from . import _ray


@dataclass
class Stage:
    """One stage: its operators (indices in subgraph 0), boundary tensors and model bytes."""

    ops: list
    inputs: list      # tensor indices read from the model's inputs or earlier stages
    outputs: list     # tensor indices later stages or the caller read
    content: bytes


class _Claim:
    """A delegate that claims a set of operators and records the partitions the plan makes."""

    def __init__(self, ops: set):
        from edgelite.interpreter.delegation import Delegate

        class Claim(Delegate):
            name = "stage"

            def support(inner, node):  # noqa: N805
                return None if node.index in ops else "another stage"

            def prepare(inner, partition):  # noqa: N805
                self.partitions.append(partition)
                runs = partition.cpu_runs

                def run(*arrays):  # never called: the stage models run instead
                    raise RuntimeError(f"the stage claim ran ({len(runs)} nodes)")
                return run

        self.partitions: list = []
        self.delegate = Claim()


def _side_effects(sg) -> list:
    from edgelite.schema.graph import has_side_effects

    return [f"{k} ({op.opcode.name})" for k, op in enumerate(sg.operators)
            if has_side_effects(op)]


def cut(model, stages: int = 2, cuts: list | None = None) -> list:
    """The stages of `model` (a Model, bytes or path): a list of `Stage`."""
    from edgelite.interpreter import Interpreter
    from edgelite.interpreter.training import as_model
    from edgelite.schema import save

    ir = as_model(model)
    sg = ir.subgraphs[0]
    bad = _side_effects(sg)
    if bad:
        raise ValueError(f"a model with side effects (variables, control flow) cannot be cut "
                         f"into stages: operators {', '.join(bad[:5])}")
    n = len(sg.operators)
    if cuts is None:
        if not 1 <= stages <= n:
            raise ValueError(f"{stages} stages for a model of {n} operators")
        cuts = [round(k * n / stages) for k in range(1, stages)]
    bounds = [0, *cuts, n]
    if any(a >= b for a, b in zip(bounds, bounds[1:])):
        raise ValueError(f"cuts {cuts}: each stage needs at least one operator of 0..{n - 1}")
    content = save(ir)
    out = []
    for a, b in zip(bounds, bounds[1:]):
        claim = _Claim(set(range(a, b)))
        it = Interpreter(model_content=content, experimental_delegates=[claim.delegate])
        it.allocate_tensors()
        parts = claim.partitions
        ops = sorted(node.index for p in parts for node in p.nodes)
        inputs = list(dict.fromkeys(t.index for p in parts for t in p.inputs))
        outputs = list(dict.fromkeys(t.index for p in parts for t in p.outputs))
        inputs = [t for t in inputs if t not in outputs]  # one partition feeding another
        out.append(Stage(ops, inputs, outputs, _stage_model(ir, ops, inputs, outputs)))
    return out


def _stage_model(ir, ops: list, inputs: list, outputs: list) -> bytes:
    """A model of subgraph 0's `ops` (and the producers of constants they read that the plan
    folded), reading `inputs` and writing `outputs` as its graph inputs and outputs."""
    from edgelite.schema import save
    from edgelite.schema.graph import producers, remove_dead

    sg = ir.subgraphs[0]
    made = producers(sg)
    keep, todo = set(ops), list(ops)
    given = set(inputs)
    while todo:  # folded producers (constant inputs only) of what the stage reads
        for t in sg.operators[todo.pop()].inputs:
            if t >= 0 and t not in given and t in made and made[t] not in keep:
                keep.add(made[t])
                todo.append(made[t])
    part = copy.copy(sg)
    part.operators = [sg.operators[k] for k in sorted(keep)]
    part.inputs, part.outputs = list(inputs), list(outputs)
    remove_dead(part)
    new = copy.copy(ir)
    new.subgraphs = [part, *ir.subgraphs[1:]]
    new.signature_defs = []
    new.metadata = []
    return save(new)


class StageActor:
    """A Ray actor: one stage's Interpreter; takes the tensors it needs by index."""

    def __init__(self, content: bytes, inputs: list, outputs: list, threads: int | None = 1):
        from edgelite.interpreter import Interpreter

        self.it = Interpreter(model_content=content, num_threads=threads)
        self.inputs, self.outputs = inputs, outputs
        self.details = self.it.get_input_details()
        self.out_details = self.it.get_output_details()
        self.shapes = None
        self.count = 0

    def invocations(self) -> int:
        return self.count

    def run(self, *parts: dict) -> dict:
        """{tensor index: value} of its outputs, from the merged {tensor index: value} parts
        (the model's inputs and earlier stages' outputs)."""
        values = {}
        for p in parts:
            values.update(p)
        feeds = [np.asarray(values[t]) for t in self.inputs]
        shapes = [f.shape for f in feeds]
        if shapes != self.shapes:
            for d, f in zip(self.details, feeds):
                self.it.resize_tensor_input(d["index"], list(f.shape))
            self.it.allocate_tensors()
            self.shapes = shapes
        for d, f in zip(self.details, feeds):
            self.it.set_tensor(d["index"], f)
        self.it.invoke()
        self.count += 1
        return {t: self.it.get_tensor(d["index"]).copy()
                for t, d in zip(self.outputs, self.out_details)}


class Pipeline:
    """Stages of one model on `stages` actors; `map(feeds)` pipelines a stream through them."""

    def __init__(self, model, stages: int = 2, cuts: list | None = None,
                 num_cpus: float = 0.5, threads: int | None = 1, depth: int = 4):
        from edgelite.interpreter.training import as_model

        ray = _ray.ray()
        if not ray.is_initialized():
            _ray.init()
        self.ray, self.depth = ray, depth
        ir = as_model(model)
        sg = ir.subgraphs[0]
        self.input_names = [sg.tensors[t].name for t in sg.inputs]
        self.input_tensors = list(sg.inputs)
        self.output_names = [sg.tensors[t].name for t in sg.outputs]
        self.output_tensors = list(sg.outputs)
        self.stages = cut(ir, stages, cuts)
        cls = _ray.actor(StageActor, num_cpus)
        self.actors = [cls.remote(s.content, s.inputs, s.outputs, threads) for s in self.stages]

    def _submit(self, feeds: dict):
        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise ValueError(f"no value for inputs {missing}; the model takes "
                             f"{self.input_names}")
        refs = [self.ray.put({t: np.asarray(feeds[n]) for n, t in
                              zip(self.input_names, self.input_tensors)})]
        for actor in self.actors:  # stage k waits for the refs; nothing waits here
            refs.append(actor.run.remote(*refs))
        return refs

    def _collect(self, refs) -> dict:
        values = {}
        for part in self.ray.get(refs[1:]):
            values.update(part)
        return {n: values[t] for n, t in zip(self.output_names, self.output_tensors)}

    def map(self, stream):
        """The outputs ({name: array}) of each feeds dict of `stream`, in order, with up to
        `depth` inputs in flight."""
        pending = deque()
        for feeds in stream:
            pending.append(self._submit(feeds))
            if len(pending) >= self.depth:
                yield self._collect(pending.popleft())
        while pending:
            yield self._collect(pending.popleft())

    def __call__(self, **feeds) -> dict:
        return self._collect(self._submit(feeds))
