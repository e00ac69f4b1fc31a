"""edgelite.distributed: edgelite beyond one process, on Ray.

Install with `pip install 'edgelite[distributed]'`.

- `fit(model, inputs, labels, workers=2, mode="sync"|"async", ...)`: data-parallel fine-tuning,
  worker actors computing gradients (the `gradients` signature) and a parameter-server actor
  owning the variables and the optimizer (`apply`); faults healed, updates applied exactly once
  (training.py);
- `predict(model, inputs, workers=2, ...)`: batch inference over Ray Data, `map_batches` with an
  actor pool of interpreters, with throughput per worker (inference.py; from the shell:
  `python -m edgelite.distributed predict MODEL --data X.npz -o OUT.npz`);
- `Pipeline(model, stages=2)`: one model cut by the delegate partitioner into stages on
  different actors, pipelined over a stream of inputs (pipeline.py).

Ray is imported when one of these runs, never by the runtime (edgelite.interpreter) and not by
importing this package.
"""
from .inference import Prediction, predict
from .pipeline import Pipeline, Stage, cut
from .training import DataParallel, ParameterServer, Result, Worker, fit, training_content

__all__ = ["fit", "DataParallel", "Result", "Worker", "ParameterServer", "training_content",
           "predict", "Prediction", "Pipeline", "Stage", "cut"]
