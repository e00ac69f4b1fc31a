"""`edgelite train ... --workers N --mode sync|async`: data-parallel training on Ray
(edgelite.distributed). The same .npz columns, label checks, --eval, --export and
--save-training as the single-process command; --checkpoint is the parameter server's
checkpoint (written after every update), --resume continues from it."""
from __future__ import annotations

from .common import echo, fail, load_model, write_output


def train_distributed(model, data, epochs, batch_size, options, evaluate_on, checkpoint, resume,
                      export, save_training, seed, threads, workers, mode,
                      max_staleness) -> dict:
    import numpy as np

    from edgelite.interpreter import Interpreter
    from edgelite.interpreter.training import evaluate, export_frozen, training_facts

    from .common import read_npz
    from .train import _check_labels, _classes, _columns

    try:
        from edgelite.distributed import DataParallel, training_content
        from edgelite.distributed._ray import ray
        ray()
    except ImportError as e:
        fail(f"--workers {workers}: {e}")
    ir = load_model(model)
    facts = training_facts(ir)
    if facts is not None and options:
        fail(f"{model.name} is already a training model; drop --{', --'.join(options)}"
             .replace("learning_rate", "learning-rate"))
    content = training_content(ir, **options)
    it = Interpreter(model_content=content, num_threads=threads)
    facts = training_facts(load_model_bytes(content))
    runner = it.get_signature_runner("train")
    arrays = read_npz(data)
    inputs, target, notes = _columns(runner.get_input_details(), facts["labels"], arrays, data,
                                     "--data")
    _check_labels(target, _classes(it, facts), data, "--data")
    for note in notes:
        echo(note)
    if batch_size < workers:
        fail(f"--batch-size {batch_size} is the global batch: at least one sample per worker "
             f"(--workers {workers})")
    holdout = None
    if evaluate_on is not None:
        held = read_npz(evaluate_on, "--eval")
        holdout = _columns(runner.get_input_details(), facts["labels"], held, evaluate_on,
                           "--eval")[:2]
        _check_labels(holdout[1], _classes(it, facts), evaluate_on, "--eval")
    if checkpoint is not None and checkpoint.exists() and not resume:
        checkpoint.unlink()  # a fresh run: the server starts from the model's weights
    n = len(target)
    opt = facts["optimizer"]
    echo(f"training {len(facts['trainable'])} weights on {workers} Ray workers ({mode}): "
         f"{facts['loss']}, {opt['name']} lr {opt['learning_rate']:g}; {n} samples, global "
         f"batch {batch_size}, {-(-n // batch_size)} steps per epoch")
    trainer = DataParallel(content, inputs, target, workers, mode, epochs, batch_size, seed,
                           max_staleness, checkpoint, threads=threads)
    result = trainer.run()
    if result.server_restarts or result.replaced_workers:
        echo(f"healed: {result.replaced_workers} workers replaced, {result.server_restarts} "
             "server restarts")
    for e, loss in enumerate(result.epoch_losses):
        echo(f"epoch {e + 1}/{len(result.epoch_losses)}  loss {loss:.4f}")
    line = f"{result.steps} updates, {result.steps_per_second:.1f} updates/s"
    if mode == "async":
        line += (f"; staleness seen {dict(sorted(result.staleness.items()))}, "
                 f"{result.refused} refused (over --max-staleness)")
    summary = {"losses": result.losses, "epoch_losses": result.epoch_losses,
               "steps_per_second": result.steps_per_second, "workers": workers, "mode": mode,
               "updates": result.steps, "replaced_workers": result.replaced_workers,
               "server_restarts": result.server_restarts}
    if mode == "async":
        summary.update(staleness={str(k): v for k, v in sorted(result.staleness.items())},
                       refused=result.refused, max_staleness=max_staleness)
    trained = result.interpreter(num_threads=threads)
    if holdout is not None:
        accuracy = evaluate(trained, *holdout)
        line += f"; accuracy {accuracy:.2%}"
        summary["accuracy"] = accuracy
    echo(line)
    wrote = []
    if save_training is not None:
        write_output(save_training, content, "--save-training")
        wrote.append(save_training)
    if checkpoint is not None and checkpoint.exists():
        wrote.append(checkpoint)
    if export is not None:
        write_output(export, export_frozen(trained), "--export")
        wrote.append(export)
    for path in wrote:
        echo(f"wrote {path} ({path.stat().st_size:,} bytes)")
    summary["losses"] = [float(x) for x in np.asarray(summary["losses"])]
    return summary


def load_model_bytes(content: bytes):
    from edgelite.schema import load

    return load(content)
