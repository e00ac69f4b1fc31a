"""`edgelite train MODEL.tflite --data FILE.npz --epochs N`: fine-tune a model in edgelite's
interpreter, with a progress display (loss, steps/s), checkpoints, and a frozen export.

MODEL is a training model (with a `train` signature, e.g. from `tflite-convert --train`) or any
`.tflite`, which is then extended at run time (`--trainable`, `--loss`, `--optimizer`). The .npz's
keys are the `train` signature's input names (the model's inputs and `labels`) or, as for
`edgelite run --data`, input_K / x and y; a leading sample axis; images in either layout.

Works with the runtime install alone (numpy and flatbuffers): training runs on the device.
`--workers N` (N > 1) trains data-parallel on Ray instead (edgelite.distributed, the
`distributed` extra): N worker actors and a parameter server, `--mode sync|async`;
`--batch-size` is then the global batch, split across the workers.
"""
from __future__ import annotations

import contextlib
import enum
import json
import sys
import time
import zipfile
from pathlib import Path
from typing import Annotated

from .choices import Loss, Optimizer, value
from .common import (CliError, check_writable, echo, fail, load_model, positive_number,
                     read_npz, write_output)
from .params import Arg, Opt

REFRESH_S = 0.25  # how often the progress line is redrawn on a terminal
Mode = enum.Enum("Mode", [("sync", "sync"), ("async", "async")], type=str, module=__name__)


def train_command(
    model: Annotated[Path, Arg("the .tflite model (a training model, or any model to extend at "
                               "run time)")],
    data: Annotated[Path, Opt(
        "--data", help="an .npz keyed by the train signature's input names (the model's inputs "
        "and 'labels'; 'y' is taken for 'labels'), samples along the first axis")],
    epochs: Annotated[int, Opt("--epochs", min=1, help="passes over --data")] = 1,
    batch_size: Annotated[int, Opt("--batch-size", min=1, help="samples per training step")] = 32,
    trainable: Annotated[str | None, Opt(
        "--trainable", metavar="last:N|all|PATTERN", help="what trains when MODEL has no train "
        "signature: last:N (the last N layers with weights; default last:1), all, or glob "
        "patterns of tensor names, comma-separated")] = None,
    loss: Annotated[Loss | None, Opt(
        "--loss", help="the loss, when MODEL has no train signature (default "
        "sparse_softmax_cross_entropy)")] = None,
    optimizer: Annotated[Optimizer | None, Opt(
        "--optimizer", help="the optimizer, when MODEL has no train signature (default adam)")] \
        = None,
    learning_rate: Annotated[float | None, Opt(
        "--learning-rate", min=0, help="the optimizer's step size, when MODEL has no train "
        "signature (default: the optimizer's own)")] = None,
    output: Annotated[str | None, Opt(
        "--output", help="the model output the loss scores (default: the first)")] = None,
    evaluate_on: Annotated[Path | None, Opt(
        "--eval", help="an .npz like --data: classification accuracy after each epoch")] = None,
    checkpoint: Annotated[Path | None, Opt(
        "--checkpoint", help="save every variable here after each epoch (atomically)")] = None,
    resume: Annotated[bool, Opt("--resume", help="start from --checkpoint if it exists")] = False,
    export: Annotated[Path | None, Opt(
        "--export", help="write the trained model here, weights baked in (runs anywhere)")] = None,
    save_training: Annotated[Path | None, Opt(
        "--save-training", help="write the training model (train/infer/save/restore signatures) "
        "here, e.g. to train it in LiteRT")] = None,
    seed: Annotated[int, Opt("--seed", help="of the shuffling")] = 0,
    threads: Annotated[int | None, Opt(
        "--threads", min=1, help="num_threads of the interpreter (default: the runtime's)")] = None,
    logdir: Annotated[Path | None, Opt(
        "--logdir", help="write TensorBoard scalars here: loss per step, learning rate and "
        "(with --eval) accuracy per epoch")] = None,
    workers: Annotated[int, Opt(
        "--workers", min=1, help="data-parallel workers on Ray (edgelite[distributed]); 1: this "
        "process alone")] = 1,
    mode: Annotated[Mode, Opt(
        "--mode", help="with --workers: sync (average every worker's gradients each step) or "
        "async (apply each as it arrives)")] = Mode.sync,
    max_staleness: Annotated[int | None, Opt(
        "--max-staleness", min=0, help="async: refuse (and recompute) gradients computed on "
        "weights more than this many updates old")] = None,
    as_json: Annotated[bool, Opt(
        "--json", help="print one JSON document (losses per step, ...) instead of text")] = False,
) -> None:
    """Fine-tune a .tflite model on the device: loss and steps/s as it trains."""
    positive_number(learning_rate, "--learning-rate")
    options = {k: v for k, v in dict(trainable=trainable, loss=value(loss),
                                     optimizer=value(optimizer), learning_rate=learning_rate,
                                     output=output).items()
               if v is not None}
    try:
        with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
            if workers > 1:
                from ._train_distributed import train_distributed

                if logdir is not None:
                    fail("--logdir is for single-process training (drop it, or --workers 1)")

                summary = train_distributed(
                    model, data, epochs, batch_size, options, evaluate_on, checkpoint, resume,
                    export, save_training, seed, threads, workers, value(mode), max_staleness)
            else:
                summary = _train(model, data, epochs, batch_size, options, evaluate_on,
                                 checkpoint, resume, export, save_training, seed, threads, logdir)
        if as_json:
            echo(json.dumps(summary))
    except CliError:
        raise
    except (ValueError, RuntimeError, OSError) as e:  # GradientError is a ValueError
        fail(f"{model.name}: {' '.join(str(e).split())}")


def _interpreter(model: Path, options: dict, threads):
    from edgelite.interpreter import Interpreter
    from edgelite.interpreter.training import make_trainable, training_facts
    from edgelite.schema import save

    ir = load_model(model)
    facts = training_facts(ir)
    if facts is not None:
        if options:
            fail(f"{model.name} is already a training model (loss {facts['loss']}, optimizer "
                 f"{facts['optimizer']['name']}); drop --{', --'.join(options)}"
                 .replace("learning_rate", "learning-rate"))
        return Interpreter(model_path=str(model), num_threads=threads), ir
    trained = make_trainable(ir, **{"trainable": "last:1", **options})
    return Interpreter(model_content=save(trained), num_threads=threads), trained


def _train(model, data, epochs, batch_size, options, evaluate_on, checkpoint, resume, export,
           save_training, seed, threads, logdir=None) -> None:
    import numpy as np

    from edgelite.interpreter.training import (evaluate, export_frozen, fit,
                                               restore_checkpoint, save_checkpoint,
                                               training_facts)
    from edgelite.schema import save

    for flag, path in (("--checkpoint", checkpoint), ("--export", export),
                       ("--save-training", save_training)):
        if path is not None and not (flag == "--checkpoint" and resume and path.is_file()):
            check_writable(path, flag)
    it, ir = _interpreter(model, options, threads)
    facts = training_facts(ir)
    labels = facts["labels"]
    runner = it.get_signature_runner("train")
    arrays = read_npz(data)
    inputs, target, notes = _columns(runner.get_input_details(), labels, arrays, data, "--data")
    classes = _classes(it, facts)
    _check_labels(target, classes, data, "--data")
    n = len(target)
    for note in notes:
        echo(note)
    values = sum(int(np.prod(facts["variables"][p])) for p in facts["trainable"])
    opt = facts["optimizer"]
    echo(f"training {len(facts['trainable'])} weights ({values:,} values): "
         f"{facts['loss']}, {opt['name']} lr {opt['learning_rate']:g}; {n} samples, "
         f"batch {batch_size}, {-(-n // batch_size)} steps per epoch")
    wrote = []
    if save_training is not None:
        write_output(save_training, save(ir), "--save-training")
        wrote.append(save_training)
    if resume and checkpoint is not None and checkpoint.exists():
        try:
            restore_checkpoint(it, checkpoint)
        except (OSError, EOFError, zipfile.BadZipFile) as e:
            fail(f"cannot read --checkpoint {checkpoint}: {getattr(e, 'strerror', None) or e}")
        echo(f"resumed from {checkpoint}")
    holdout = None
    if evaluate_on is not None:
        held = read_npz(evaluate_on, "--eval")
        holdout = _columns(runner.get_input_details(), labels, held, evaluate_on, "--eval")[:2]
        _check_labels(holdout[1], classes, evaluate_on, "--eval")
    steps = -(-n // batch_size)
    board = _Board(logdir) if logdir is not None else None
    summary = {"losses": [], "epoch_losses": [], "steps_per_second": [], "workers": 1}
    for epoch in range(epochs):
        progress = _Progress(epoch, epochs, steps)
        history = fit(it, inputs, target, epochs=1, batch_size=batch_size,
                      seed=seed + epoch, callback=board.step(progress) if board else progress)
        line = (f"epoch {epoch + 1}/{epochs}  loss {history.epoch_losses[0]:.4f}  "
                f"{history.steps_per_second:.0f} steps/s")
        summary["losses"] += history.losses
        summary["epoch_losses"] += history.epoch_losses
        summary["steps_per_second"].append(history.steps_per_second)
        if holdout is not None:
            accuracy = evaluate(it, *holdout)
            line += f"  accuracy {accuracy:.2%}"
            summary["accuracy"] = accuracy
        if board:
            board.epoch(epoch + 1, history.epoch_losses[0], opt["learning_rate"],
                        accuracy if holdout is not None else None)
        progress.done(line)
        if checkpoint is not None:
            try:
                save_checkpoint(it, checkpoint)
            except OSError as e:
                fail(f"cannot write --checkpoint {checkpoint}: {e.strerror or e}")
            wrote += [checkpoint] if checkpoint not in wrote else []
    if board:
        board.writer.close()
        wrote.append(board.writer.path)
    if export is not None:
        write_output(export, export_frozen(it), "--export")
        wrote.append(export)
    for path in wrote:
        echo(f"wrote {path} ({path.stat().st_size:,} bytes)")
    summary["steps_per_second"] = float(np.median(summary["steps_per_second"]))
    return summary


class _Board:
    """TensorBoard scalars of a run (`tensorboard.py`): loss per step, per-epoch figures."""

    def __init__(self, logdir):
        from .tensorboard import SummaryWriter

        self.writer, self.global_step = SummaryWriter(logdir), 0

    def step(self, then):
        def callback(epoch, step, loss):
            self.global_step += 1
            self.writer.add_scalar("loss", loss, self.global_step)
            then(epoch, step, loss)
        return callback

    def epoch(self, epoch, loss, learning_rate, accuracy) -> None:
        values = {"epoch_loss": loss, "learning_rate": learning_rate}
        if accuracy is not None:
            values["accuracy"] = accuracy
        self.writer.add_scalars(values, self.global_step)


def _columns(details: dict, labels: str, arrays: dict, path: Path, flag: str) -> tuple:
    """({input name: samples}, labels, notes) from an .npz, by the rule `run --data` follows:
    an input by its name, input_K, or x (one input); the labels by their name or y (numbers:
    an array of class names is not labels); images in either layout."""
    import numpy as np

    from edgelite.interpreter.feeds import find_key, guess_perm, input_keys, to_layout

    names = [n for n in details if n != labels]
    inputs, notes = {}, []
    for k, name in enumerate(names):
        keys = input_keys([name], k, len(names))
        key = find_key(arrays, keys)
        if key is None:
            fail(f"{flag} {path.name} has no array for input {' or '.join(map(repr, keys))} "
                 f"(it has: {', '.join(sorted(arrays)) or 'nothing'})")
        d = details[name]
        value = np.asarray(arrays[key])
        want = [-1, *[int(s) for s in d["shape"][1:]]]
        is_float = np.dtype(d["dtype"]).kind == "f"
        value, moved = to_layout(value, want, guess_perm(len(want), is_float))
        if moved:
            notes.append(f"{flag} {key!r}{moved}")
        inputs[name] = value
    found = [c for c in (labels, "y") if c in arrays and arrays[c].dtype.kind in "iufb"]
    if not found:
        fail(f"{flag} {path.name} has no labels: an array {labels!r} or 'y' of numbers (it has: "
             f"{', '.join(sorted(arrays)) or 'nothing'})")
    target = arrays[found[0]]
    sizes = {len(a) for a in [*inputs.values(), target] if np.ndim(a)}
    if len(sizes) != 1:
        fail(f"the arrays of {flag} {path.name} have different sample counts {sorted(sizes)}")
    return inputs, target, notes


def _classes(it, facts: dict):
    """The number of classes a sparse (class index) loss scores, else None."""
    if facts["loss"] != "sparse_softmax_cross_entropy":
        return None
    runner = it.get_signature_runner("infer")
    details = runner.get_output_details()
    detail = details.get(facts["output"]) or next(iter(details.values()))
    shape = [int(d) for d in detail["shape"]]
    return shape[-1] if shape else None


def _check_labels(target, classes, path: Path, flag: str) -> None:
    """Refuse labels that would train on nonsense: no samples, class indices outside
    0..classes-1 (or not whole numbers), NaN or infinite targets."""
    import numpy as np

    target = np.asarray(target)
    if target.ndim == 0 or len(target) == 0:
        fail(f"{flag} {path.name} has no samples (its arrays have {target.shape[:1] or 'no'} "
             "samples along the first axis)")
    if target.dtype.kind == "f" and not np.isfinite(target).all():
        fail(f"{flag} {path.name}: the labels hold NaN or infinite values")
    if classes is None:
        return
    if target.dtype.kind == "f" and (target != np.round(target)).any():
        fail(f"{flag} {path.name}: the labels are class indices for this loss "
             f"(sparse_softmax_cross_entropy), but some are not whole numbers")
    low, high = int(target.min()), int(target.max())
    if low < 0 or high >= classes:
        bad = low if low < 0 else high
        count = int(((target < 0) | (target >= classes)).sum())
        fail(f"{flag} {path.name}: label {bad} is not a class of the model's output "
             f"(0..{classes - 1}); {count} of {target.size} labels are out of range")


class _Progress:
    """The step callback: a redrawn `epoch e/E step s/S loss` line on a terminal."""

    def __init__(self, epoch: int, epochs: int, steps: int):
        self.head = f"epoch {epoch + 1}/{epochs}"
        self.steps = steps
        self.tty = sys.stdout.isatty()
        self.start = self.last = time.perf_counter()

    def __call__(self, _epoch: int, step: int, loss: float) -> None:
        now = time.perf_counter()
        if self.tty and now - self.last >= REFRESH_S:
            rate = (step + 1) / max(now - self.start, 1e-9)
            sys.stdout.write(f"\r{self.head}  step {step + 1}/{self.steps}  loss {loss:.4f}  "
                             f"{rate:.0f} steps/s")
            sys.stdout.flush()
            self.last = now

    def done(self, line: str) -> None:
        if self.tty:
            sys.stdout.write("\r\033[K")
        echo(line)
