"""Optimizers as ops: each emits the update of every trainable weight and of its own state.

State lives in resource variables like the weights do: per-weight slots named
"<weight>/<slot>" and shared scalars named "<optimizer>/<name>". The arithmetic follows torch's
`torch.optim.SGD` and `torch.optim.Adam`, so a run can be checked against a torch or numpy
reference step by step.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .emit import Emitter, GradientError


@dataclass
class SGD:
    """w -= lr * v with v = momentum * v + g (v = g without momentum)."""

    learning_rate: float = 0.01
    momentum: float = 0.0

    def slots(self) -> list:
        return ["momentum"] if self.momentum else []

    def scalars(self) -> dict:
        return {}

    def apply(self, em: Emitter, items: list, state: dict) -> dict:
        """{variable name: its new value} for `items` [(weight name, value, gradient)];
        `state` maps the optimizer's variable names to their current values."""
        new = {}
        for name, w, g in items:
            step = g
            if self.momentum:
                step = em.add(em.scale(state[f"{name}/momentum"], float(self.momentum)), g)
                new[f"{name}/momentum"] = step
            new[name] = em.sub(w, em.scale(step, float(self.learning_rate)))
        return new

    def describe(self) -> dict:
        return {"name": "sgd", "learning_rate": self.learning_rate, "momentum": self.momentum}


@dataclass
class Adam:
    """torch.optim.Adam: m and v running moments, bias-corrected; the powers of beta1 and beta2
    are kept as variables (multiplied once per step)."""

    learning_rate: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-8

    def slots(self) -> list:
        return ["m", "v"]

    def scalars(self) -> dict:
        return {"adam/beta1_power": np.float32(1.0), "adam/beta2_power": np.float32(1.0)}

    def apply(self, em: Emitter, items: list, state: dict) -> dict:
        b1, b2 = float(self.beta1), float(self.beta2)
        p1 = em.scale(state["adam/beta1_power"], b1)
        p2 = em.scale(state["adam/beta2_power"], b2)
        new = {"adam/beta1_power": p1, "adam/beta2_power": p2}
        step_size = em.div(em.scalar(self.learning_rate), em.sub(em.scalar(1.0), p1))
        root_c2 = em.op("SQRT", [em.sub(em.scalar(1.0), p2)])
        for name, w, g in items:
            m = em.add(em.scale(state[f"{name}/m"], b1), em.scale(g, 1.0 - b1))
            v = em.add(em.scale(state[f"{name}/v"], b2), em.scale(em.mul(g, g), 1.0 - b2))
            denom = em.add(em.div(em.op("SQRT", [v]), root_c2), em.scalar(self.epsilon))
            new[f"{name}/m"], new[f"{name}/v"] = m, v
            new[name] = em.sub(w, em.mul(step_size, em.div(m, denom)))
        return new

    def describe(self) -> dict:
        return {"name": "adam", "learning_rate": self.learning_rate, "beta1": self.beta1,
                "beta2": self.beta2, "epsilon": self.epsilon}


OPTIMIZERS = {"sgd": SGD, "adam": Adam}


def get_optimizer(optimizer, learning_rate: float | None = None):
    """An optimizer object from a name ("adam", "sgd") or an instance; `learning_rate` overrides
    the default of a named one."""
    if isinstance(optimizer, (SGD, Adam)):
        if learning_rate is not None:
            optimizer.learning_rate = learning_rate
        return optimizer
    cls = OPTIMIZERS.get(str(optimizer).lower())
    if cls is None:
        raise GradientError(f"unknown optimizer {optimizer!r}; optimizers: "
                            f"{', '.join(OPTIMIZERS)} (or an SGD(...) / Adam(...) instance)")
    return cls() if learning_rate is None else cls(learning_rate=learning_rate)
