"""Checkpoints (every variable of a training model in an `.npz`, written atomically) and the
frozen export (the inference model with the trained weights baked in as constants).

Both work through the `save` / `restore` signatures, so they take an edgelite interpreter or a
LiteRT one alike.
"""
from __future__ import annotations

import dataclasses
import glob
import os
import tempfile
from pathlib import Path

import numpy as np

from edgelite.schema import (Metadata, Model, SignatureDef, Subgraph, drop_unused_buffers,
                             save)

from .build import META_KEY, as_model, training_facts
from .emit import GradientError


def atomic_write(path, write) -> None:
    """Call `write(file)` on a temporary file beside `path`, flush it to disk, then rename it
    over `path`: a crash at any point leaves either the old file or the new one, never a part.
    The temporary file goes when the write fails; one left by a killed process (its name holds
    the writer's pid) goes on the next write to `path`."""
    path = Path(path)
    remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(prefix=f"{_TMP_PREFIX.format(name=path.name)}{os.getpid()}.",
                               suffix=".tmp", dir=path.parent)
    _WRITING.add(tmp)
    try:
        os.chmod(tmp, 0o666 & ~_umask())   # as a plain open() would make it (mkstemp: 0600)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    finally:
        _WRITING.discard(tmp)
    try:  # make the rename itself durable
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def _umask() -> int:
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


_TMP_PREFIX = ".{name}."
_WRITING: set = set()   # this process's temporary files being written (by other threads too)


def remove_stale_temporaries(path) -> list:
    """Remove the temporary files of `atomic_write(path)` whose writer is no longer running
    (killed mid-write); returns their paths. A live writer's file is left alone."""
    path = Path(path)
    prefix = _TMP_PREFIX.format(name=path.name)
    removed = []
    try:
        candidates = list(path.parent.glob(f"{glob.escape(prefix)}*.tmp"))
    except OSError:
        return removed
    for tmp in candidates:
        pid = tmp.name[len(prefix):].split(".", 1)[0]
        if not pid.isdigit() or str(tmp) in _WRITING or _running(int(pid)):
            continue
        try:
            tmp.unlink()
            removed.append(tmp)
        except OSError:
            pass
    return removed


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return False   # not in _WRITING: a failed write's leftover
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True    # it exists (another user's): leave it
    return True


def saved(interpreter) -> dict:
    """Every variable by name, through the `save` signature (its unused input, when the model
    was built with make_trainable(save_input=...), fed with zeros)."""
    runner = interpreter.get_signature_runner("save")
    feeds = {n: np.zeros([int(x) for x in d["shape"]], d["dtype"])
             for n, d in runner.get_input_details().items()}
    return {k: np.asarray(v) for k, v in runner(**feeds).items()}


def save_checkpoint(interpreter, path) -> dict:
    """Write every variable (run through the `save` signature) to `path` (.npz); returns them."""
    values = saved(interpreter)
    atomic_write(path, lambda f: np.savez(f, **values))
    return values


def load_checkpoint(path) -> dict:
    with np.load(Path(path)) as data:
        return {k: data[k] for k in data.files}


def _check(values: dict, want: dict, what: str) -> None:
    """GradientError listing every missing, unknown or misshapen variable at once."""
    problems = [f"missing {n!r}" for n in want if n not in values]
    problems += [f"unknown {n!r}" for n in values if n not in want]
    problems += [f"{n!r} has shape {list(np.shape(values[n]))}, the model's is {list(s)}"
                 for n, s in want.items() if n in values and tuple(np.shape(values[n])) != s]
    if problems:
        raise GradientError(f"{what} does not fit the model: " + "; ".join(problems))


def restore_checkpoint(interpreter, source) -> None:
    """Set every variable from a checkpoint file (or a dict of arrays), through `restore`."""
    values = load_checkpoint(source) if isinstance(source, (str, Path)) else dict(source)
    runner = interpreter.get_signature_runner("restore")
    details = runner.get_input_details()
    _check(values, {n: tuple(int(d) for d in v["shape"]) for n, v in details.items()},
           f"checkpoint {source}" if isinstance(source, (str, Path)) else "the values")
    runner(**{n: np.asarray(values[n], details[n]["dtype"]) for n in details})


def export_frozen(source, values=None) -> bytes:
    """The `.tflite` bytes of the inference model with trained weights as constants: no
    variables, no training subgraphs, one `serving_default` signature; runs anywhere.

    source: an edgelite Interpreter of a training model (its current weights are used unless
    `values` says otherwise), or a training model (Model, bytes, path) with `values`: a dict
    {variable name: array} or a checkpoint path."""
    if hasattr(source, "_model") and hasattr(source, "get_signature_runner"):
        model = source._model
        if values is None:
            values = saved(source)
    else:
        model = as_model(source)
    if isinstance(values, (str, Path)):
        values = load_checkpoint(values)
    facts = training_facts(model)
    if facts is None:
        raise GradientError("not a training model (no edgelite_training metadata)")
    if values is None:
        raise GradientError("export_frozen needs the trained values (a dict or a checkpoint)")
    want = {n: tuple(facts["variables"][n]) for n in facts["trainable"]}
    _check({n: values[n] for n in want if n in values}, want, "the values")
    return save(_frozen(model, facts, values))


def _frozen(model: Model, facts: dict, values: dict) -> Model:
    frozen = Model(buffers=list(model.buffers), description=model.description,
                   version=model.version,
                   metadata=[Metadata(m.name, m.buffer) for m in model.metadata
                             if m.name != META_KEY])
    infer = model.subgraphs[0]
    sg = Subgraph(tensors=[dataclasses.replace(t) for t in infer.tensors],
                  inputs=list(infer.inputs), outputs=list(infer.outputs), name="main")
    trained = set(facts["trainable"])
    init = facts["subgraphs"]["init"]
    handles = {}
    for op in infer.operators:
        name = op.opcode.builtin
        if name == "CALL_ONCE" and op.options.init_subgraph_index == init:
            continue
        if name == "VAR_HANDLE" and op.options.shared_name in trained:
            handles[op.outputs[0]] = op.options.shared_name
            continue
        if name == "READ_VARIABLE" and op.inputs[0] in handles:
            var = handles[op.inputs[0]]
            value = np.ascontiguousarray(values[var], np.float32)
            sg.tensors[op.outputs[0]].buffer = frozen.add_buffer(value)
            continue
        sg.operators.append(op)
    frozen.subgraphs = [sg] + [_copy(other) for other in
                               model.subgraphs[1:facts["source_subgraphs"]]]
    infer_sig = next(s for s in model.signature_defs if s.signature_key == "infer")
    frozen.signature_defs = [SignatureDef("serving_default", 0, dict(infer_sig.inputs),
                                          dict(infer_sig.outputs))]
    drop_unused_buffers(frozen)
    return frozen


def _copy(sg: Subgraph) -> Subgraph:
    """A subgraph whose tensors can be changed without touching `sg`'s."""
    return Subgraph(tensors=[dataclasses.replace(t) for t in sg.tensors], inputs=list(sg.inputs),
                    outputs=list(sg.outputs), operators=list(sg.operators), name=sg.name)
