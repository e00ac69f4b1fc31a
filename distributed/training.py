"""Data-parallel fine-tuning on Ray: workers compute gradients, a parameter server applies them.

    result = fit(model, {"image": x}, y, workers=2, mode="sync", epochs=5, batch_size=32)
    result.losses; result.interpreter()    # an edgelite Interpreter with the trained variables

The model is built once with `make_trainable(..., gradients=True)`: every worker actor holds an
edgelite Interpreter of it and runs its `gradients` signature (inputs + labels -> loss and
grad:<weight>) on its part of each batch; the parameter-server actor holds another and runs
`apply` (gradients -> one optimizer step), so the variables and the optimizer state (SGD momentum,
Adam's moments and powers) live in the server only, updated by the same ops `train` uses.

The schedule is the single-process one (`edgelite train`): epoch e visits
`default_rng(seed + e).permutation(n)` in global batches of `batch_size` (the last one smaller);
worker k takes the k-th of `np.array_split(batch, workers)`, its shard of that step.

- `sync`: every step the server hands out its weights, waits for every worker's part and applies
  the sample-weighted mean of their gradients: the gradient of the combined batch's mean loss,
  so the run is single-process training on the combined batch (to float rounding).
- `async`: each worker loops on its own (pull weights, compute, push); the server applies each
  push as it arrives. A push computed on weights `s` versions old has staleness s; one over
  `max_staleness` is refused and the worker recomputes the same step on fresh weights. The
  staleness seen is reported (a histogram) with the refusals.

Exactly once: every update carries a sequence number. In `sync` it is the global step: the
server applies step s only when its version is s (an earlier step is a duplicate and ignored;
all parts of a step are applied together, in one `apply`). In `async` it is (worker, step): the
server applies a worker's step only if it is the next one after the last it applied for that
worker; a duplicate is acknowledged without applying, a step ahead is answered with the step to
rewind to. With a checkpoint path the server writes, after every applied update and before it
acknowledges it, its variables, version and per-worker sequence numbers in one file (a temporary
file fsynced, then os.replace: a reader sees the old checkpoint or the new, never half of one).
So an acknowledged update is in the checkpoint; an update the server applied but did not
checkpoint died with it and is recomputed (gradients are a function of the weights and the
step's samples), once. A dead worker is replaced by a new actor with the same rank that resumes
at the server's next step for it; a dead server is restarted from its checkpoint and the driver
and workers resume from the version and sequence numbers it reports.
"""
from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import _ray

GRAD = "grad:"


# -- the model and the schedule ------------------------------------------------------------

def training_content(model, **options) -> bytes:
    """The training model (bytes) with `gradients` and `apply` signatures: `model` is any
    `.tflite` (a Model, bytes or path; `options` go to make_trainable) or a training model
    already built with gradients=True."""
    from edgelite.interpreter.training import as_model, make_trainable, training_facts
    from edgelite.schema import save

    ir = as_model(model)
    facts = training_facts(ir)
    if facts is None:
        return save(make_trainable(ir, **{"trainable": "last:1", **options}, gradients=True))
    if "gradients" not in facts["subgraphs"] or "apply" not in facts["subgraphs"]:
        raise ValueError("this training model has no gradients/apply signatures: build it with "
                         "make_trainable(..., gradients=True), or pass the source model")
    if options:
        raise ValueError(f"the model is already a training model; drop {sorted(options)}")
    return save(ir)


def steps_per_epoch(n: int, batch_size: int) -> int:
    return -(-n // batch_size)


def part(n: int, batch_size: int, workers: int, seed: int, step: int, rank: int,
         cache: dict | None = None) -> np.ndarray:
    """The sample indices worker `rank` trains on at global `step`."""
    epoch, b = divmod(step, steps_per_epoch(n, batch_size))
    order = None if cache is None else cache.get(epoch)
    if order is None:
        order = np.random.default_rng(seed + epoch).permutation(n)
        if cache is not None:
            cache.clear()
            cache[epoch] = order
    return np.array_split(order[b * batch_size:(b + 1) * batch_size], workers)[rank]


# -- the actors ----------------------------------------------------------------------------

class Worker:
    """A Ray actor: an edgelite interpreter of the training model and the data; computes the
    gradients of its part of a step on given weights."""

    def __init__(self, content: bytes, rank: int, workers: int, data: dict, labels: str,
                 batch_size: int, seed: int, threads: int | None = 1):
        from edgelite.interpreter import Interpreter

        self.it = Interpreter(model_content=content, num_threads=threads)
        self.rank, self.workers, self.labels = rank, workers, labels
        self.data, self.batch_size, self.seed = data, batch_size, seed
        self.n = len(data[labels])
        self._gradients = self.it.get_signature_runner("gradients")
        self._restore = self.it.get_signature_runner("restore")
        self._details = self._gradients.get_input_details()
        self._variables = {k: np.array(v) for k, v in
                           self.it.get_signature_runner("save")().items()}
        self._orders: dict = {}
        self.computed = 0

    def ping(self) -> int:
        return self.rank

    def pid(self) -> int:
        return os.getpid()

    def compute(self, step: int, weights: dict) -> tuple:
        """(rank, step, samples, mean loss, {grad:<weight>: gradient}) of its part of `step`."""
        idx = part(self.n, self.batch_size, self.workers, self.seed, step, self.rank,
                   self._orders)
        if len(idx) == 0:
            return self.rank, step, 0, 0.0, {}
        self._variables.update(weights)
        self._restore(**self._variables)
        feeds = {k: np.asarray(self.data[k][idx], self._details[k]["dtype"]) for k in self.data}
        out = self._gradients(**feeds)
        self.computed += 1
        loss = float(out.pop("loss"))
        return self.rank, step, len(idx), loss, {k: np.array(v) for k, v in out.items()}

    def run_async(self, server, start: int, stop: int) -> dict:
        """Steps start..stop-1 of its shard against `server`, each pushed as it is computed."""
        ray = _ray.ray()
        version, weights = ray.get(server.pull.remote())
        step, refused = start, 0
        while step < stop:
            _, _, n, loss, grads = self.compute(step, weights)
            status, version, weights, expected = ray.get(
                server.push_async.remote(self.rank, step, version, n, loss, grads))
            if status == "stale":
                refused += 1
            else:
                step = expected
        return {"rank": self.rank, "refused": refused, "computed": self.computed}


class ParameterServer:
    """A Ray actor: the variables and the optimizer state (an edgelite interpreter of the
    training model, its `apply`, `save` and `restore` signatures), the version (updates applied)
    and, for async, the last step applied per worker; an atomic checkpoint after each update."""

    def __init__(self, content: bytes, trainable: list, workers: int, mode: str,
                 max_staleness: int | None = None, checkpoint: str | None = None):
        from edgelite.interpreter import Interpreter

        self.it = Interpreter(model_content=content, num_threads=1)
        self.trainable, self.workers, self.mode = list(trainable), workers, mode
        self.max_staleness, self.checkpoint = max_staleness, checkpoint
        self._apply = self.it.get_signature_runner("apply")
        self._save = self.it.get_signature_runner("save")
        self._restore = self.it.get_signature_runner("restore")
        self.version, self.applied, self.losses = 0, {}, []
        self.staleness, self.refused, self.duplicates, self.resumed = Counter(), 0, 0, False
        self.log: list = []  # (rank, step) per applied update, in order (async)
        if checkpoint is not None and Path(checkpoint).exists():
            self._load(Path(checkpoint))

    def ping(self) -> int:
        return self.version

    def pid(self) -> int:
        return os.getpid()

    def pull(self) -> tuple:
        return self.version, self._weights()

    def weights(self) -> dict:
        return self._weights()

    def variables(self) -> dict:
        return {k: np.array(v) for k, v in self._save().items()}

    def state(self) -> dict:
        return {"version": self.version, "applied": dict(self.applied),
                "losses": list(self.losses), "staleness": dict(self.staleness),
                "refused": self.refused, "duplicates": self.duplicates,
                "resumed": self.resumed, "log": list(self.log)}

    def push_sync(self, step: int, results: list) -> int:
        """Apply global step `step` from every worker's (rank, step, n, loss, grads), once."""
        if step < self.version:
            self.duplicates += 1
            return self.version
        if step > self.version:
            raise ValueError(f"step {step} pushed but the server is at step {self.version}")
        ranks = sorted(r[0] for r in results)
        if ranks != list(range(self.workers)) or any(r[1] != step for r in results):
            raise ValueError(f"step {step} needs one part from each of {self.workers} workers; "
                             f"got ranks {ranks}")
        total = sum(r[2] for r in results)
        loss = sum(r[2] * r[3] for r in results) / total
        grads = {}
        for name in self.trainable:
            key = GRAD + name
            acc = sum(np.float64(r[2]) * r[4][key] for r in results if r[2])
            grads[key] = np.asarray(acc / total, np.float32)
        self._apply(**grads)
        self.version += 1
        self.losses.append(float(loss))
        self._checkpoint()
        return self.version

    def push_async(self, rank: int, step: int, seen: int, n: int, loss: float,
                   grads: dict) -> tuple:
        """(status, version, weights, the worker's next step): status 'applied', 'duplicate'
        (already applied: not again), 'stale' (over max_staleness: recompute on these weights)
        or 'rewind' (a step ahead of the next one, after a server restart)."""
        expected = self.applied.get(rank, -1) + 1
        if step < expected:
            self.duplicates += 1
            return "duplicate", self.version, self._weights(), expected
        if step > expected:
            return "rewind", self.version, self._weights(), expected
        stale = self.version - seen
        if self.max_staleness is not None and stale > self.max_staleness:
            self.refused += 1
            return "stale", self.version, self._weights(), step
        if n:
            self._apply(**{GRAD + k: np.asarray(grads[GRAD + k], np.float32)
                           for k in self.trainable})
            self.losses.append(float(loss))
            self.staleness[stale] += 1
        self.version += 1
        self.applied[rank] = step
        self.log.append((rank, step))
        self._checkpoint()
        return "applied", self.version, self._weights(), step + 1

    # -- internals

    def _weights(self) -> dict:
        values = self._save()
        return {k: np.array(values[k]) for k in self.trainable}

    def _checkpoint(self) -> None:
        if self.checkpoint is None:
            return
        path = Path(self.checkpoint)
        meta = {"version": self.version, "applied": {str(k): v for k, v in self.applied.items()},
                "losses": self.losses, "staleness": {str(k): v for k, v in self.staleness.items()},
                "refused": self.refused, "duplicates": self.duplicates, "log": self.log,
                "mode": self.mode, "workers": self.workers}
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            np.savez(f, __meta__=np.frombuffer(json.dumps(meta).encode(), np.uint8),
                     **{f"var:{k}": v for k, v in self._save().items()})
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def _load(self, path: Path) -> None:
        with np.load(path) as z:
            meta = json.loads(bytes(z["__meta__"]).decode())
            values = {k[4:]: z[k] for k in z.files if k.startswith("var:")}
        if meta["mode"] != self.mode or meta["workers"] != self.workers:
            raise ValueError(f"{path} is a checkpoint of a {meta['mode']} run with "
                             f"{meta['workers']} workers, not {self.mode} with {self.workers}")
        self._restore(**values)
        self.version, self.losses = meta["version"], meta["losses"]
        self.applied = {int(k): v for k, v in meta["applied"].items()}
        self.staleness = Counter({int(k): v for k, v in meta["staleness"].items()})
        self.refused, self.duplicates = meta["refused"], meta["duplicates"]
        self.log = [tuple(x) for x in meta["log"]]
        self.resumed = True


# -- the driver ----------------------------------------------------------------------------

@dataclass
class Result:
    """What a distributed run gives: per-update losses (sync: one per global step, the
    combined batch's), the variables, and the run's facts."""

    content: bytes
    variables: dict
    losses: list
    epoch_losses: list
    steps: int
    seconds: float
    staleness: dict = field(default_factory=dict)  # async: staleness -> updates applied
    refused: int = 0           # async: pushes over max_staleness, recomputed
    duplicates: int = 0        # pushes of an update already applied (not applied again)
    replaced_workers: int = 0
    server_restarts: int = 0
    log: list = field(default_factory=list)

    @property
    def steps_per_second(self) -> float:
        return self.steps / max(self.seconds, 1e-9)

    def interpreter(self, num_threads: int | None = None):
        """An edgelite Interpreter of the training model holding the trained variables."""
        from edgelite.interpreter import Interpreter

        it = Interpreter(model_content=self.content, num_threads=num_threads)
        it.get_signature_runner("restore")(**self.variables)
        return it


class DataParallel:
    """One run: the server, the workers, the loop; `callback(trainer, step, loss)` after each
    sync step (async: every `poll_s` with step = updates applied so far, loss None)."""

    def __init__(self, model, inputs: dict, labels, workers: int = 2, mode: str = "sync",
                 epochs: int = 1, batch_size: int = 32, seed: int = 0,
                 max_staleness: int | None = None, checkpoint=None, num_cpus: float = 0.5,
                 threads: int | None = 1, max_steps: int | None = None, **options):
        from edgelite.interpreter.training import training_facts
        from edgelite.schema import load

        if mode not in ("sync", "async"):
            raise ValueError(f"mode {mode!r}: 'sync' or 'async'")
        if workers < 1 or batch_size < workers:
            raise ValueError(f"{workers} workers need a batch of at least {workers} "
                             f"(--batch-size is the global batch); got {batch_size}")
        self.ray = _ray.ray()
        if not self.ray.is_initialized():
            _ray.init()
        self.content = training_content(model, **options)
        facts = training_facts(load(self.content))
        self.trainable, label_name = facts["trainable"], facts["labels"]
        labels = np.asarray(labels)
        self.n = len(labels)
        self.data_ref = self.ray.put({**{k: np.asarray(v) for k, v in inputs.items()},
                                      label_name: labels})
        self.label_name = label_name
        self.workers_n, self.mode, self.epochs = workers, mode, epochs
        self.batch_size, self.seed, self.max_staleness = batch_size, seed, max_staleness
        self.checkpoint = None if checkpoint is None else str(checkpoint)
        self.num_cpus, self.threads = num_cpus, threads
        self.per_epoch = steps_per_epoch(self.n, batch_size)
        self.total = self.per_epoch * epochs  # sync: global steps; async: steps per worker
        if max_steps is not None:
            self.total = min(self.total, max_steps)
        self.replaced, self.restarts = 0, 0
        self._worker_cls = _ray.actor(Worker, num_cpus)
        self._server_cls = _ray.actor(ParameterServer, num_cpus)
        self.server = self._new_server()
        self.workers = [self._new_worker(k) for k in range(workers)]

    def _new_server(self):
        return self._server_cls.remote(self.content, self.trainable, self.workers_n, self.mode,
                                       self.max_staleness, self.checkpoint)

    def _new_worker(self, rank: int):
        return self._worker_cls.remote(self.content, rank, self.workers_n, self.data_ref,
                                       self.label_name, self.batch_size, self.seed, self.threads)

    def _alive(self, actor) -> bool:
        try:
            self.ray.get(actor.ping.remote(), timeout=60)
            return True
        except self.ray.exceptions.RayError:
            return False

    def _heal(self) -> None:
        """Replace what died: a worker by a new one of the same rank, the server by one
        restarted from its checkpoint (none: an error, the run's state is gone)."""
        if not self._alive(self.server):
            if self.checkpoint is None:
                raise RuntimeError("the parameter server died and the run has no checkpoint to "
                                   "restart it from (pass checkpoint=...)")
            self.server = self._new_server()
            self.restarts += 1
        for k, w in enumerate(self.workers):
            if not self._alive(w):
                self.workers[k] = self._new_worker(k)
                self.replaced += 1

    def run(self, callback=None) -> Result:
        self.ray.get([w.ping.remote() for w in self.workers])  # started: time the steps only
        first = self.ray.get(self.server.ping.remote())
        start = time.perf_counter()
        if self.mode == "sync":
            self._run_sync(callback)
        else:
            self._run_async(callback)
        seconds = time.perf_counter() - start
        state = self.ray.get(self.server.state.remote())
        variables = self.ray.get(self.server.variables.remote())
        losses = state["losses"]
        per = self.per_epoch * (1 if self.mode == "sync" else self.workers_n)
        epoch_losses = [float(np.mean(losses[e:e + per])) for e in range(0, len(losses), per)]
        return Result(self.content, variables, losses, epoch_losses, state["version"] - first,
                      seconds, {int(k): v for k, v in state["staleness"].items()},
                      state["refused"], state["duplicates"], self.replaced, self.restarts,
                      [tuple(x) for x in state["log"]])

    def _run_sync(self, callback) -> None:
        ray = self.ray
        step = ray.get(self.server.ping.remote())
        while step < self.total:
            try:
                weights = self.server.weights.remote()
                parts = ray.get([w.compute.remote(step, weights) for w in self.workers])
                step = ray.get(self.server.push_sync.remote(step, parts))
            except ray.exceptions.RayActorError:  # a worker or the server died
                self._heal()
                step = ray.get(self.server.ping.remote())
                continue
            if callback is not None:
                callback(self, step, sum(p[2] * p[3] for p in parts) / sum(p[2] for p in parts))

    def _run_async(self, callback, poll_s: float = 0.2) -> None:
        ray = self.ray
        stop = self.total

        def launch(rank):
            applied = ray.get(self.server.state.remote())["applied"]
            return self.workers[rank].run_async.remote(self.server, applied.get(rank, -1) + 1,
                                                       stop)

        running = {launch(k): k for k in range(self.workers_n)}
        while running:
            done, _ = ray.wait(list(running), timeout=poll_s)
            for ref in done:
                rank = running.pop(ref)
                try:
                    ray.get(ref)
                except ray.exceptions.RayActorError:
                    # the worker died, or the server did under it (the others' runs then fail
                    # too, each is relaunched the same way against the restarted server)
                    self._heal()
                    running[launch(rank)] = rank
            if callback is not None:
                try:
                    callback(self, ray.get(self.server.ping.remote()), None)
                except ray.exceptions.RayActorError:
                    pass


def fit(model, inputs: dict, labels, workers: int = 2, mode: str = "sync", epochs: int = 1,
        batch_size: int = 32, seed: int = 0, max_staleness: int | None = None, checkpoint=None,
        callback=None, num_cpus: float = 0.5, max_steps: int | None = None,
        **options) -> Result:
    """Data-parallel training of `model` over `inputs` ({input name: samples}) and `labels`
    on Ray (a local cluster unless one is initialized); see the module's doc. `options` go to
    make_trainable (trainable, loss, optimizer, learning_rate, ...); `max_steps` stops early
    (sync: global steps; async: steps of each worker's shard)."""
    return DataParallel(model, inputs, labels, workers, mode, epochs, batch_size, seed,
                        max_staleness, checkpoint, num_cpus, max_steps=max_steps,
                        **options).run(callback)
