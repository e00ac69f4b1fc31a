"""`edgelite train MODEL.tflite --data FILE.npz --epochs N`: fine-tune a model in edgelite's
interpreter, with a progress display (loss, steps/s), checkpoints, and a frozen export.

MODEL is a training model (with a `train` signature, e.g. from `tflite-convert --train`) or any
`.tflite`, which is then extended at run time (`--trainable`, `--loss`, `--optimizer`). The .npz's
keys are the `train` signature's input names (the model's inputs and `labels`), arrays in the
model's layout with a leading sample axis.

Importing this module stays cheap (typer only); numpy and the interpreter load when it runs.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Optional

import typer

REFRESH_S = 0.25  # how often the progress line is redrawn on a terminal


def train_command(
    model: Path = typer.Argument(..., help="the .tflite model (a training model, or any model "
                                           "to extend at run time)"),
    data: Path = typer.Option(..., "--data", help="an .npz keyed by the train signature's input "
                                                  "names (the model's inputs and 'labels')"),
    epochs: int = typer.Option(1, "--epochs", min=1),
    batch_size: int = typer.Option(32, "--batch-size", min=1),
    trainable: Optional[str] = typer.Option(
        None, "--trainable", help="what trains when MODEL has no train signature: last:N (the "
        "last N layers with weights; default last:1), all, or glob patterns of tensor names, "
        "comma-separated"),
    loss: Optional[str] = typer.Option(
        None, "--loss", help="sparse_softmax_cross_entropy (default), softmax_cross_entropy, "
                             "mean_squared_error, binary_cross_entropy"),
    optimizer: Optional[str] = typer.Option(None, "--optimizer", help="adam (default) or sgd"),
    learning_rate: Optional[float] = typer.Option(None, "--learning-rate"),
    output: Optional[str] = typer.Option(None, "--output",
                                         help="the model output the loss scores (default: first)"),
    evaluate_on: Optional[Path] = typer.Option(
        None, "--eval", help="an .npz like --data: classification accuracy after each epoch"),
    checkpoint: Optional[Path] = typer.Option(
        None, "--checkpoint", help="save every variable here after each epoch (atomically)"),
    resume: bool = typer.Option(False, "--resume", help="start from --checkpoint if it exists"),
    export: Optional[Path] = typer.Option(
        None, "--export", help="write the trained model here, weights baked in (runs anywhere)"),
    save_training: Optional[Path] = typer.Option(
        None, "--save-training", help="write the training model (train/infer/save/restore "
                                      "signatures) here, e.g. to train it in LiteRT"),
    seed: int = typer.Option(0, "--seed", help="of the shuffling"),
    threads: Optional[int] = typer.Option(None, "--threads", min=1),
) -> None:
    """Fine-tune a .tflite model on the device: loss and steps/s as it trains."""
    options = {k: v for k, v in dict(trainable=trainable, loss=loss, optimizer=optimizer,
                                     learning_rate=learning_rate, output=output).items()
               if v is not None}
    try:
        _train(model, data, epochs, batch_size, options, evaluate_on, checkpoint, resume, export,
               save_training, seed, threads)
    except typer.Exit:
        raise
    except (ValueError, RuntimeError, OSError) as e:  # GradientError is a ValueError
        _fail(f"{model.name}: {' '.join(str(e).split())}")


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def _npz(path: Path) -> dict:
    import numpy as np

    if not path.is_file():
        _fail(f"no such file: {path}")
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def _interpreter(model: Path, options: dict, threads):
    from edgelite.interpreter import Interpreter
    from edgelite.interpreter.training import make_trainable, training_facts
    from edgelite.schema import ModelError, load, save

    if not model.is_file():
        _fail(f"no such file: {model}")
    try:
        ir = load(model)
    except ModelError as e:
        _fail(f"{model}: {e}")
    facts = training_facts(ir)
    if facts is not None:
        if options:
            _fail(f"{model.name} is already a training model (loss {facts['loss']}, optimizer "
                  f"{facts['optimizer']['name']}); drop --{', --'.join(options)}"
                  .replace("learning_rate", "learning-rate"))
        return Interpreter(model_path=str(model), num_threads=threads), ir
    trained = make_trainable(ir, **{"trainable": "last:1", **options})
    return Interpreter(model_content=save(trained), num_threads=threads), trained


def _train(model, data, epochs, batch_size, options, evaluate_on, checkpoint, resume, export,
           save_training, seed, threads) -> None:
    import numpy as np

    from edgelite.interpreter.training import (evaluate, export_frozen, fit,
                                               restore_checkpoint, save_checkpoint,
                                               training_facts)
    from edgelite.schema import save

    it, ir = _interpreter(model, options, threads)
    facts = training_facts(ir)
    wanted = list(it.get_signature_runner("train").get_input_details())
    arrays = _npz(data)
    missing = [n for n in wanted if n not in arrays]
    if missing:
        _fail(f"--data {data.name} lacks {missing}; the train signature takes {wanted} "
              f"(it has {sorted(arrays)})")
    labels = facts["labels"]
    inputs = {n: arrays[n] for n in wanted if n != labels}
    sizes = {len(a) for a in arrays.values() if np.ndim(a)}
    if len(sizes) != 1:
        _fail(f"the arrays of --data {data.name} have different sample counts {sorted(sizes)}")
    n = sizes.pop()
    values = sum(int(np.prod(facts["variables"][p])) for p in facts["trainable"])
    opt = facts["optimizer"]
    typer.echo(f"training {len(facts['trainable'])} weights ({values:,} values): "
               f"{facts['loss']}, {opt['name']} lr {opt['learning_rate']:g}; {n} samples, "
               f"batch {batch_size}, {-(-n // batch_size)} steps per epoch")
    if save_training is not None:
        save_training.write_bytes(save(ir))
    if resume and checkpoint is not None and checkpoint.exists():
        restore_checkpoint(it, checkpoint)
        typer.echo(f"resumed from {checkpoint}")
    holdout = _npz(evaluate_on) if evaluate_on is not None else None
    steps = -(-n // batch_size)
    for epoch in range(epochs):
        progress = _Progress(epoch, epochs, steps)
        history = fit(it, inputs, arrays[labels], epochs=1, batch_size=batch_size,
                      seed=seed + epoch, callback=progress)
        line = (f"epoch {epoch + 1}/{epochs}  loss {history.epoch_losses[0]:.4f}  "
                f"{history.steps_per_second:.0f} steps/s")
        if holdout is not None:
            accuracy = evaluate(it, {k: holdout[k] for k in inputs}, holdout[labels])
            line += f"  accuracy {accuracy:.2%}"
        progress.done(line)
        if checkpoint is not None:
            save_checkpoint(it, checkpoint)
    if export is not None:
        export.write_bytes(export_frozen(it))
        typer.echo(f"wrote {export} ({export.stat().st_size:,} bytes)")


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
        typer.echo(line)
