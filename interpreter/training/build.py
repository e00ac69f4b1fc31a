"""Training models: a model plus the signatures `train`, `infer`, `save` and `restore`.

`make_trainable` turns the trainable weights into resource variables (VAR_HANDLE /
READ_VARIABLE / ASSIGN_VARIABLE) set by an initializer subgraph that CALL_ONCE runs, as TFLite
models do it, and adds:

- `train`: the model's inputs and the labels -> "loss"; one optimizer step on the variables;
- `infer`: the model's inputs -> its outputs, with the current weights (subgraph 0, so a plain
  `invoke()` runs the trained model too);
- `save`: -> every variable (weights and optimizer state) by name;
- `restore`: every variable by name -> nothing; sets them.

With `gradients=True` two more, so that another process (a parameter server) can own the
optimizer and its state:

- `gradients`: the model's inputs and the labels -> "loss" and "grad:<weight>" per trainable
  weight (the same loss and backward pass as `train`; nothing is updated);
- `apply`: "grad:<weight>" per trainable weight -> nothing; one optimizer step on the variables
  (the arithmetic of `train`'s update, given the gradients).

Every op is a builtin and every batch dimension stays open (-1), so the same file trains at any
batch size in edgelite and in stock runtimes. A metadata entry ("edgelite_training", JSON) records
what was built, for `export` and the command line.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgelite.schema import Model, SignatureDef, Tensor, load
from edgelite.schema.graph import remove_dead

from .emit import Emitter, GradientError
from .forward import copy_forward
from .gradients import backward
from .losses import get_loss
from .optimizers import get_optimizer
from .params import Param, select

META_KEY = "edgelite_training"
LABELS = "labels"
LOSS = "loss"
GRAD = "grad:"  # the gradients / apply signatures' name of a weight's gradient: GRAD + name


@dataclass
class _Variable:
    name: str
    shape: tuple
    init: object  # Param (its weights) or a numpy array (optimizer state)


def as_model(model) -> Model:
    """A Model from a Model, `.tflite` bytes or a path."""
    if isinstance(model, Model):
        return model
    if isinstance(model, (str, Path)):
        return load(Path(model))
    return load(bytes(model))


def io_names(model: Model, subgraph: int = 0) -> tuple:
    """({input name: tensor}, {output name: tensor}) of a subgraph: its signature's names when
    it has one, else the tensors' names."""
    sg = model.subgraphs[subgraph]
    for s in model.signature_defs:
        if s.subgraph_index == subgraph and set(s.inputs.values()) == set(sg.inputs):
            return dict(s.inputs), dict(s.outputs)
    return ({sg.tensors[t].name: t for t in sg.inputs},
            {sg.tensors[t].name: t for t in sg.outputs})


def make_trainable(model, trainable="last:1", loss: str = "sparse_softmax_cross_entropy",
                   optimizer="adam", learning_rate: float | None = None,
                   output: str | None = None, labels: str = LABELS,
                   gradients: bool = False, save_input: str | None = None) -> Model:
    """A new Model that trains `model` (a Model, bytes or a path; not modified) on the device.

    trainable: "last:N" (the weights and biases of the last N layers with weights), "all", or
      glob patterns of tensor names (a list or comma-separated); the rest stays constant.
    loss: a name from `losses.LOSSES`; output: which model output it scores (default: the
      first); labels: the name of the labels input of `train`.
    optimizer: "adam", "sgd", or an `Adam(...)` / `SGD(...)` instance.
    gradients: also emit the `gradients` and `apply` signatures (see the module's doc).
    save_input: give `save` one unused float32 [1] input of this name (LiteRT's Java/Kotlin
      `runSignature` refuses a signature without inputs); off by default because LiteRT's
      Python runner then needs it fed too: `save(unused=np.zeros(1, np.float32))`."""
    src = as_model(model)
    sg = src.subgraphs[0]
    inputs, outputs = io_names(src)
    out_name = output if output is not None else next(iter(outputs))
    if out_name not in outputs:
        raise GradientError(f"no output {out_name!r}; outputs: {list(outputs)}")
    if labels in inputs:
        raise GradientError(f"the labels name {labels!r} is already an input; pass labels=...")
    loss_def = get_loss(loss)
    opt = get_optimizer(optimizer, learning_rate)
    params = select(src, sg, trainable, outputs[out_name])
    variables = [_Variable(p.name, p.value.shape, p) for p in params]
    variables += [_Variable(f"{p.name}/{slot}", p.value.shape, np.zeros(p.value.shape, np.float32))
                  for p in params for slot in opt.slots()]
    variables += [_Variable(n, np.shape(v), np.asarray(v, np.float32))
                  for n, v in opt.scalars().items()]

    new = Model(subgraphs=list(src.subgraphs), buffers=list(src.buffers),
                description=src.description, version=src.version,
                metadata=[m for m in src.metadata if m.name != META_KEY])
    first = len(src.subgraphs)
    index = {"init": first, "train": first + 1, "save": first + 2, "restore": first + 3}
    new.subgraphs.append(_init(new, src, variables))
    infer = _infer(new, src, params, index["init"], inputs, outputs)
    new.subgraphs[0] = infer.sg
    train, logits = _train(new, src, params, variables, opt, loss_def, index["init"], inputs,
                           outputs[out_name], labels)
    parts = {"train": train, "infer": infer,
             "save": _save(new, variables, index["init"], save_input),
             "restore": _restore(new, variables, index["init"])}
    new.subgraphs += [train.sg, parts["save"].sg, parts["restore"].sg]
    if gradients:
        index["gradients"], index["apply"] = len(new.subgraphs), len(new.subgraphs) + 1
        parts["gradients"] = _train(new, src, params, variables, None, loss_def, index["init"],
                                    inputs, outputs[out_name], labels)[0]
        parts["apply"] = _apply(new, params, variables, opt, index["init"])
        new.subgraphs += [parts["gradients"].sg, parts["apply"].sg]
    where = {**index, "infer": 0}
    new.signature_defs = [SignatureDef(key, where[key], part.inputs, part.outputs)
                          for key, part in parts.items()]
    facts = {"format": 1, "loss": loss_def.name, "optimizer": opt.describe(),
             "output": out_name, "logits": logits, "labels": labels,
             "trainable": [p.name for p in params],
             "variables": {v.name: list(v.shape) for v in variables},
             "subgraphs": {"infer": 0, **index}, "source_subgraphs": first}
    new.set_metadata(META_KEY, json.dumps(facts).encode())
    return new


def training_facts(model: Model) -> dict | None:
    """What make_trainable recorded in a training model, or None for other models."""
    raw = model.get_metadata(META_KEY)
    return None if raw is None else json.loads(raw.decode())


# -- subgraphs -------------------------------------------------------------------------------

def _handles(em: Emitter, names: list, init: int) -> dict:
    em.scope = "variables"
    em.side_effect("CALL_ONCE", [], init_subgraph_index=init)
    return {n: em.op("VAR_HANDLE", [], templates=[Tensor(f"{n}/handle", (), "resource")],
                     container="", shared_name=n) for n in names}


def _reads(em: Emitter, handles: dict, shapes: dict) -> dict:
    return {n: em.op("READ_VARIABLE", [h], templates=[Tensor(n, shapes[n], "float32")])
            for n, h in handles.items()}


def _init(new: Model, src: Model, variables: list):
    em = Emitter(new, "init")
    sg0 = src.subgraphs[0]
    for v in variables:
        em.scope = v.name
        handle = em.op("VAR_HANDLE", [], templates=[Tensor(f"{v.name}/handle", (), "resource")],
                       container="", shared_name=v.name)
        if isinstance(v.init, Param) and v.init.dequantize is None:
            t = sg0.tensors[v.init.tensor]  # the weights' own buffer: nothing is copied
            value = em.buffer_const(t.buffer, t.shape, t.dtype, f"{v.name}/initial")
        elif isinstance(v.init, Param):
            value = em.const(v.init.value, f"{v.name}/initial")
        elif v.shape and not np.asarray(v.init).any():
            value = em.op("FILL", [em.i32(list(v.shape)), em.scalar(0.0)], dtype="float32")
        else:
            value = em.const(np.asarray(v.init, np.float32), f"{v.name}/initial")
        em.side_effect("ASSIGN_VARIABLE", [handle, value])
    return em.sg


@dataclass
class _Part:
    """A built subgraph and its signature's names."""

    sg: object
    inputs: dict
    outputs: dict


def _infer(new: Model, src: Model, params: list, init: int, inputs: dict, outputs: dict):
    em = Emitter(new, "infer")
    handles = _handles(em, [p.name for p in params], init)
    reads = _reads(em, handles, {p.name: p.value.shape for p in params})
    skip = {p.dequantize for p in params if p.dequantize is not None}
    tmap = copy_forward(em, src, src.subgraphs[0], {p.tensor: reads[p.name] for p in params},
                        skip=skip)
    em.sg.outputs = [tmap[t] for t in outputs.values()]
    return _Part(em.sg, {n: tmap[t] for n, t in inputs.items()},
                 {n: tmap[t] for n, t in outputs.items()})


def _train(new: Model, src: Model, params: list, variables: list, opt, loss_def, init: int,
           inputs: dict, out: int, labels: str):
    """The `train` subgraph; with `opt` None the `gradients` one (loss and gradients out)."""
    em = Emitter(new, "train" if opt is not None else "gradients")
    if opt is None:
        variables = [v for v in variables if isinstance(v.init, Param)]
    handles = _handles(em, [v.name for v in variables], init)
    reads = _reads(em, handles, {v.name: v.shape for v in variables})
    skip = {p.dequantize for p in params if p.dequantize is not None}
    start = len(em.sg.operators)
    sg = src.subgraphs[0]
    tmap = copy_forward(em, src, sg, {p.tensor: reads[p.name] for p in params}, skip=skip)
    forward = em.sg.operators[start:]

    target, beta = out, 1.0  # the logits: the input of a final SOFTMAX / LOGISTIC
    producer = next((op for op in sg.operators if out in op.outputs), None)
    if producer is not None and loss_def.logits_of == producer.opcode.builtin:
        target = producer.inputs[0]
        beta = float(producer.options.beta) if producer.opcode.builtin == "SOFTMAX" else 1.0
    logits = tmap[target]
    em.scope = "loss"
    scaled = logits if beta == 1.0 else em.scale(logits, beta)
    label_shapes = [loss_def.labels(em.shape(scaled, w)) for w in (0, 1)]
    label = em.input(labels, label_shapes[0][0], label_shapes[0][0], label_shapes[0][1],
                     shape_b=label_shapes[1][0])
    loss, grad = loss_def.build(em, scaled, label)
    em.sg.tensors[loss].name = LOSS
    if beta != 1.0:
        grad = em.scale(grad, beta)
    weights = [reads[p.name] for p in params]
    grads = backward(em, forward, {logits: grad}, weights)
    unused = [p.name for p, w in zip(params, weights) if grads[w] is None]
    if unused:
        raise GradientError(f"the loss does not depend on trainable weights {unused}")
    feeds = {**{n: tmap[t] for n, t in inputs.items()}, labels: label}
    if opt is None:
        outs = {LOSS: loss}
        for p in params:  # a tensor of its own per gradient, named as `apply` takes it
            g = em.op("RESHAPE", [grads[reads[p.name]], em.i32(list(p.value.shape))],
                      new_shape=None)
            em.sg.tensors[g].name = GRAD + p.name
            outs[GRAD + p.name] = g
        em.sg.outputs = list(outs.values())
        remove_dead(em.sg)
        return _Part(em.sg, feeds, outs), em.sg.tensors[logits].name
    em.scope = "optimizer"
    items = [(p.name, reads[p.name], grads[reads[p.name]]) for p in params]
    state = {v.name: reads[v.name] for v in variables}
    for name, value in opt.apply(em, items, state).items():
        em.side_effect("ASSIGN_VARIABLE", [handles[name], value])
    em.sg.outputs = [loss]
    remove_dead(em.sg)
    part = _Part(em.sg, feeds, {LOSS: loss})
    return part, em.sg.tensors[logits].name


def _apply(new: Model, params: list, variables: list, opt, init: int):
    """gradients by name -> one optimizer step, as `train` takes it."""
    em = Emitter(new, "apply")
    values = {p.name: em.input(GRAD + p.name, p.value.shape, p.value.shape) for p in params}
    handles = _handles(em, [v.name for v in variables], init)
    reads = _reads(em, handles, {v.name: v.shape for v in variables})
    em.scope = "optimizer"
    items = [(p.name, reads[p.name], values[p.name]) for p in params]
    state = {v.name: reads[v.name] for v in variables}
    for name, value in opt.apply(em, items, state).items():
        em.side_effect("ASSIGN_VARIABLE", [handles[name], value])
    remove_dead(em.sg)
    return _Part(em.sg, {GRAD + p.name: values[p.name] for p in params}, {})


def _save(new: Model, variables: list, init: int, save_input: str | None = None):
    em = Emitter(new, "save")
    feeds = {} if save_input is None else {save_input: em.input(save_input, (1,), (1,))}
    handles = _handles(em, [v.name for v in variables], init)
    reads = _reads(em, handles, {v.name: v.shape for v in variables})
    em.sg.outputs = [reads[v.name] for v in variables]
    return _Part(em.sg, feeds, {v.name: reads[v.name] for v in variables})


def _restore(new: Model, variables: list, init: int):
    em = Emitter(new, "restore")
    values = {v.name: em.input(v.name, v.shape, v.shape) for v in variables}
    handles = _handles(em, list(values), init)
    for name, value in values.items():
        em.side_effect("ASSIGN_VARIABLE", [handles[name], value])
    return _Part(em.sg, values, {})


# -- gradients of any model ------------------------------------------------------------------

def gradient_model(model, wrt: list) -> Model:
    """A model that computes vector-Jacobian products of `model`'s subgraph 0: its inputs
    followed by one seed per output ("seed:<output>"); its outputs followed by the gradient of
    sum(output * seed) with respect to each tensor named in `wrt` ("grad:<name>"). Batch
    dimensions stay as the model's shape signatures say."""
    src = as_model(model)
    sg = src.subgraphs[0]
    new = Model(subgraphs=list(src.subgraphs), buffers=list(src.buffers), version=src.version)
    em = Emitter(new, "gradients")
    tmap = copy_forward(em, src, sg, {}, open_batch=False)
    forward = list(em.sg.operators)
    seeds = {}
    for t in sg.outputs:
        y = tmap[t]
        seeds[y] = em.input(f"seed:{sg.tensors[t].name}", em.shape(y), em.sig(y),
                            shape_b=em.shape(y, 1))
    by_name = {sg.tensors[t].name: t for t in tmap}
    missing = [n for n in wrt if n not in by_name]
    if missing:
        raise GradientError(f"no tensors named {missing}")
    targets = [tmap[by_name[n]] for n in wrt]
    grads = backward(em, forward, seeds, targets)
    outs = []
    for n, t in zip(wrt, targets):
        if grads[t] is None:
            raise GradientError(f"the outputs do not depend on {n!r}")
        g = em.op("RESHAPE", [grads[t], em.shape_of(t)], new_shape=None)  # a tensor of its own
        em.sg.tensors[g].name = f"grad:{n}"
        outs.append(g)
    em.sg.outputs = [tmap[t] for t in sg.outputs] + outs
    new.subgraphs[0] = em.sg
    new.signature_defs = []
    return new
