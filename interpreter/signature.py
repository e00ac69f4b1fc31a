"""Signature runners: call a model's named entry point with keyword inputs."""
from __future__ import annotations

import numpy as np

from .api import _details, _tfl_type
from . import threads


class SignatureRunner:
    """`runner(**inputs) -> {output name: array}`, as LiteRT's SignatureRunner."""

    def __init__(self, interpreter, signature):
        self._interpreter = interpreter
        self._signature = signature
        runtime = interpreter._runtime
        self._plan = runtime.subgraph(signature.subgraph_index)

    def _shape(self, t):
        plan = self._plan
        if plan.ready and plan.arrays[t] is not None:
            return plan.arrays[t].shape
        return plan.input_shapes.get(t, plan.sg.tensors[t].shape)

    def get_input_details(self) -> dict:
        sg, model = self._plan.sg, self._interpreter._model
        return {n: _details(model, sg, t, self._shape(t))
                for n, t in self._signature.inputs.items()}

    def get_output_details(self) -> dict:
        sg, model = self._plan.sg, self._interpreter._model
        return {n: _details(model, sg, t, self._shape(t))
                for n, t in self._signature.outputs.items()}

    def allocate_tensors(self) -> None:
        with self._interpreter._exclusive("SignatureRunner.allocate_tensors()"):
            self._plan.prepare()

    def __call__(self, **kwargs) -> dict:
        with self._interpreter._exclusive(f"SignatureRunner {self._signature.signature_key!r}"):
            return self._call(kwargs)

    def _call(self, kwargs: dict) -> dict:
        sig, plan = self._signature, self._plan
        for name in kwargs:
            if name not in sig.inputs:
                raise ValueError(f"Invalid Input name ({name}) for SignatureDef "
                                 f"{sig.signature_key!r}; inputs: {list(sig.inputs)}")
        missing = [n for n in sig.inputs if n not in kwargs]
        if missing:
            raise ValueError(f"Missing inputs {missing} for SignatureDef {sig.signature_key!r}")
        values = {}
        for name, value in kwargs.items():
            t = sig.inputs[name]
            value = np.asarray(value)
            want = plan.sg.tensors[t]
            if value.dtype != want.np_dtype:
                raise ValueError(f"Cannot set tensor: Got value of type {_tfl_type(value.dtype)} "
                                 f"but expected type {_tfl_type(want.np_dtype)} for input "
                                 f"{name!r} ({want.name}) of SignatureDef "
                                 f"{sig.signature_key!r}")
            if not plan.ready or plan.arrays[t].shape != value.shape:
                plan.resize_input(t, value.shape)
            values[t] = value
        with threads.limit(self._interpreter._num_threads):
            if not plan.ready:
                plan.prepare()
            for t, value in values.items():
                np.copyto(plan.arrays[t], value)
            plan.invoke()
        return {name: np.array(plan.arrays[t]) for name, t in sig.outputs.items()}
