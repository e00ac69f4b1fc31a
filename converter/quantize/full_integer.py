"""Full-integer quantization of a float model's IR: int8 activations (or int16 for 16x8), int8
weights, int32 (int64) biases, calibrated ranges.

Three steps over subgraph 0:
1. choose: an op runs integer when `rules` has a rule for it, edgelite has the kernel and its
   weights are constant; every other op touching float tensors stays float (and is reported).
2. parameters: each activation gets its calibrated range's parameters, then in op order the
   rules' constraints: "same" outputs copy their input's, "fixed" outputs take the kernel's,
   "shared" ops (CONCATENATION, MAXIMUM, ...) put their inputs and output on one range (an input
   made only for the op is calibrated onto it; any other is requantized before it).
3. rewrite: a tensor keeps the representation its producer writes; a reader that needs the other
   one gets a QUANTIZE or DEQUANTIZE inserted after the producer (once per tensor). Constants are
   quantized per use: weights per channel, biases on input scale x weight scale, other operands
   on their own range (or the shared one).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from edgelite.schema import Model, Operator, OperatorCode, Tensor, default_options
from edgelite.schema.ops import OPS

from . import params as P
from .rules import FIXED, SAME_PARAMS_CONSTANTS, data_inputs, integer_kernel, rule

CONVERSION = ("QUANTIZE", "DEQUANTIZE")
CLAMPS = tuple(op for op, f in OPS.items() if f.clamp is not None)   # the RELU family
RESHAPES = ("RESHAPE", "SQUEEZE", "EXPAND_DIMS", "TRANSPOSE")


@dataclass
class Report:
    """What a quantization did: the ops left float (with why), conversions inserted."""

    mode: str
    quantized_ops: dict = field(default_factory=dict)    # op -> count
    float_ops: list = field(default_factory=list)      # (operator index, op, reason)
    conversions: int = 0                               # QUANTIZE / DEQUANTIZE inserted
    requantized: int = 0                               # requantizations before shared ops
    notes: list = field(default_factory=list)
    samples: list = field(default_factory=list, repr=False)  # a few calibration samples

    def lines(self) -> list:
        done = ", ".join(f"{op} {n}" for op, n in sorted(self.quantized_ops.items()) if n)
        out = [f"quantization ({self.mode}): {done or 'nothing to quantize'}"]
        if self.float_ops:
            grouped: dict = {}
            for index, op, reason in self.float_ops:
                grouped.setdefault((op, reason), []).append(str(index))
            for (op, reason), where in grouped.items():
                out.append(f"  kept float: {op} (operator{'s' if len(where) > 1 else ''} "
                           f"{', '.join(where)}): {reason}")
        if self.conversions or self.requantized:
            out.append(f"  inserted: {self.conversions} QUANTIZE/DEQUANTIZE at float/integer "
                       f"boundaries, {self.requantized} requantizations")
        out += [f"  note: {n}" for n in self.notes]
        return out


def fold_float16_dequantize(model: Model) -> None:
    """DEQUANTIZE of a constant (float16 weights, as converters write them) becomes the float32
    constant it computes, so quantization sees plain float weights."""
    sg = model.subgraphs[0]
    keep = []
    for op in sg.operators:
        if op.op == "DEQUANTIZE" and len(op.inputs) == 1 and op.inputs[0] not in sg.inputs:
            src = sg.tensors[op.inputs[0]]
            value = model.constant(sg, op.inputs[0])
            if value is not None and src.dtype == "float16":
                out = sg.tensors[op.outputs[0]]
                out.buffer = model.add_buffer(value.astype(np.float32))
                continue
        keep.append(op)
    sg.operators = keep


class _Quantizer:
    def __init__(self, model: Model, ranges: dict, act: str, report: Report,
                 weight_scales=None, keep_float=None):
        self.m, self.sg = model, model.subgraphs[0]
        self.ranges, self.act, self.report = dict(ranges), act, report
        # QDQ import hooks (converter/quantize/qdq.py): given weight scales, ops kept float.
        self.given_scales, self.keep_float = weight_scales, dict(keep_float or {})
        self.is_int: list = []
        self.params: dict = {}            # activation tensor -> (scale, zero point)
        self.const_cache: dict = {}
        self.floats = {i for i, t in enumerate(self.sg.tensors) if t.dtype == "float32"}
        self._producer = {t: i for i, op in enumerate(self.sg.operators) for t in op.outputs}
        self._readers: dict = {}
        for i, op in enumerate(self.sg.operators):
            for t in dict.fromkeys(op.inputs):
                if t >= 0:
                    self._readers.setdefault(t, []).append(i)

    # -- tensors -------------------------------------------------------------------------------

    def constant(self, t: int):
        if t < 0 or t in self.sg.inputs:
            return None
        return self.m.constant(self.sg, t)

    def is_activation(self, t: int) -> bool:
        return t in self.floats and self.constant(t) is None

    def _weights(self, op, r) -> dict:
        """{input: per-channel axis} of `op`'s weights: the rule's, and those that are weights
        where they are constant (BATCH_MATMUL's right-hand side)."""
        weights = dict(r.weights)
        weights.update({k: axis for k, axis in r.constant_weights.items()
                        if k < len(op.inputs) and self.constant(op.inputs[k]) is not None})
        return weights

    # -- 1. which ops run integer ---------------------------------------------------------------

    def choose(self) -> None:
        for i, op in enumerate(self.sg.operators):
            reason = self._why_float(op)
            if reason != "untouched" and i in self.keep_float:
                reason = self.keep_float[i]
            self.is_int.append(reason is None)
            if reason and reason != "untouched":
                self.report.float_ops.append((i, op.op, reason))
            elif reason is None:
                self.report.quantized_ops[op.op] = self.report.quantized_ops.get(op.op, 0) + 1

    def _why_float(self, op) -> str | None:
        tensors = [t for t in (*op.inputs, *op.outputs) if t >= 0]
        if not any(self.sg.tensors[t].dtype == "float32" for t in tensors):
            return "untouched"
        if not integer_kernel(op.op, self.act):
            return f"edgelite has no {self.act} kernel"
        r = rule(op.op)
        if r is None:
            return "no integer quantization rule"
        if r.output == "fixed" and self.act not in FIXED[op.op]:
            return f"no fixed {self.act} output parameters"
        weights = self._weights(op, r)
        data = data_inputs(op, r)
        for k in weights:
            if k < len(op.inputs) and op.inputs[k] >= 0 and self.constant(op.inputs[k]) is None:
                return "its weights are not constant"
        if r.bias and r.bias[0] < len(op.inputs) and op.inputs[r.bias[0]] >= 0 \
                and self.constant(op.inputs[r.bias[0]]) is None:
            return "its bias is not constant"
        for k, t in enumerate(op.inputs):
            if t < 0 or self.sg.tensors[t].dtype != "float32":
                continue
            if self.is_activation(t) and (k not in data or t not in self.ranges):
                return "an input was not calibrated" if k in data else \
                    f"its float input {k} is not constant"
        for t in op.outputs:
            if self.sg.tensors[t].dtype != "float32":
                continue
            if r.output == "none":
                return "it has float outputs"
            if r.output in ("free", "shared") and t not in self.ranges:
                return "an output was not calibrated"
        if r.output == "same" and not self.is_activation(op.inputs[data[0]]) \
                and self.constant(op.inputs[data[0]]) is None:
            return "its data input is not float"
        return None

    # -- 2. activation parameters ---------------------------------------------------------------

    def assign(self) -> None:
        ops = self.sg.operators
        for i, op in enumerate(ops):
            if self.is_int[i] and op.op in CLAMPS:
                self._pull_clamp(i, op)
        for i, op in enumerate(ops):                 # shared ops pull their inputs' ranges in
            r = rule(op.op)
            if not self.is_int[i] or r.output != "shared":
                continue
            acts = [op.inputs[k] for k in data_inputs(op, r) if self.is_activation(op.inputs[k])]
            spans = [self.ranges[t] for t in acts + list(op.outputs)]
            union = (min(s[0] for s in spans), max(s[1] for s in spans))
            for t in op.outputs:
                self.ranges[t] = union
            for t in acts:
                if self._made_only_for(t, i):
                    self.ranges[t] = union
        for t, (lo, hi) in self.ranges.items():
            self.params[t] = P.activation_params(lo, hi, self.act)
        for i, op in enumerate(ops):
            if not self.is_int[i]:
                continue
            r = rule(op.op)
            if r.output == "same":
                source = op.inputs[data_inputs(op, r)[0]]
                if source not in self.params:      # a constant (a GATHER of a table)
                    self.params[source] = P.constant_params(self.constant(source), self.act)
                for t in op.outputs:
                    self.params[t] = self.params[source]
            elif r.output == "fixed":
                scale, zp = FIXED[op.op][self.act]
                for t in op.outputs:
                    self.params[t] = (np.float32(scale), zp)

    def _made_only_for(self, t: int, i: int) -> bool:
        """Whether activation t comes from an integer op with a free output range and only op i
        reads it (so its range may be chosen for op i)."""
        j = self._producer.get(t)
        return (j is not None and self.is_int[j] and rule(self.sg.operators[j].op).output == "free"
                and self._readers.get(t) == [i] and t not in self.sg.outputs)

    def _pull_clamp(self, i: int, op) -> None:
        """A RELU-like op's input made only for it (through reshapes) takes the RELU's output
        range: values the clamp removes saturate instead, and the rest get the RELU output's
        finer steps (as a ReLU fused into the producer would)."""
        out = self.ranges.get(op.outputs[0])
        t, reader, chain = op.inputs[0], i, []
        while out is not None and t in self.ranges and self._readers.get(t) == [reader] \
                and t not in self.sg.outputs:
            chain.append(t)
            j = self._producer.get(t)
            if j is None or not self.is_int[j]:
                return
            producer = self.sg.operators[j]
            if rule(producer.op).output == "free":
                for c in chain:
                    self.ranges[c] = out
                return
            if producer.op not in RESHAPES:
                return
            t, reader = producer.inputs[0], j

    # -- 3. the rewrite ------------------------------------------------------------------------

    def rewrite(self, input_type: str, output_type: str) -> None:
        sg, ops = self.sg, self.sg.operators
        act = self.act
        int_inputs = input_type != "float32"
        int_outputs = output_type != "float32"
        home_int = {}
        for t in range(len(sg.tensors)):
            if not self.is_activation(t):
                continue
            j = self._producer.get(t)
            home_int[t] = self.is_int[j] if j is not None else (t in sg.inputs and int_inputs)
        need_int, need_float = set(), set()
        for i, op in enumerate(ops):
            r = rule(op.op)
            data = set(data_inputs(op, r)) if self.is_int[i] else set()
            for k, t in enumerate(op.inputs):
                if t in home_int:
                    (need_int if k in data else need_float).add(t)
        for t in sg.outputs:
            if t in home_int:
                (need_int if int_outputs else need_float).add(t)
        for t in list(home_int):
            if t in need_int and t not in self.params:
                self.params[t] = P.activation_params(*self.ranges[t], act)

        int_of, float_of, after, before_all = {}, {}, {}, []
        for t, is_int in home_int.items():
            tensor = sg.tensors[t]
            j = self._producer.get(t)
            slot = after.setdefault(j, []) if j is not None else before_all
            if is_int:
                tensor.dtype = act
                tensor.quantization = P.qparams(*self.params[t])
                int_of[t] = t
                if t in need_float:
                    float_of[t] = self._new(f"{tensor.name}/dequantized", tensor.shape, "float32",
                                            None, tensor)
                    slot.append(_op("DEQUANTIZE", [t], [float_of[t]]))
            else:
                float_of[t] = t
                if t in need_int:
                    int_of[t] = self._new(f"{tensor.name}/quantized", tensor.shape, act,
                                          P.qparams(*self.params[t]), tensor)
                    slot.append(_op("QUANTIZE", [t], [int_of[t]]))
        self.report.conversions = sum(len(v) for v in after.values()) + len(before_all)

        new_ops = list(before_all)
        requantized = {}
        for i, op in enumerate(ops):
            if self.is_int[i]:
                new_ops += self._integer_inputs(op, int_of, requantized)
                op.opcode = OperatorCode(op.opcode.builtin, 0, op.opcode.custom_code)
                if act == "int16" and op.options is not None \
                        and "pot_scale_int16" in op.options.fields:
                    op.options = op.options.replace(pot_scale_int16=False)  # general scales
            else:
                op.inputs = [float_of.get(t, t) for t in op.inputs]
            new_ops.append(op)
            new_ops += after.get(i, [])
        self.report.requantized = len(requantized)
        sg.operators = new_ops
        self._outputs(int_of if int_outputs else float_of)

    def _new(self, name, shape, dtype, quantization, like: Tensor) -> int:
        return self.sg.add_tensor(Tensor(name, shape, dtype, quantization=quantization,
                                         shape_signature=like.shape_signature))

    def _integer_inputs(self, op, int_of: dict, requantized: dict) -> list:
        """Rewire `op`'s inputs to their integer tensors and quantized constants; returns the
        requantize ops it needs first."""
        r = rule(op.op)
        data = data_inputs(op, r)
        weights = self._weights(op, r)
        if op.op == "CONV_2D" and (len(op.inputs) < 3 or op.inputs[2] < 0):
            op.inputs = self._zero_bias(op)         # LiteRT's CONV_2D needs a bias
        out_params = self.params.get(op.outputs[0]) if op.outputs else None
        pre = []
        inputs = list(op.inputs)
        if weights:
            inputs = self._weights_and_bias(op, r, weights, inputs)
        for k, t in enumerate(op.inputs):
            if t not in self.floats or k in weights or (r.bias and k == r.bias[0]):
                continue
            if self.is_activation(t):
                q = int_of[t]
                if r.output == "shared" and self.params[t] != out_params:
                    key = (q, out_params)
                    if key not in requantized:
                        src = self.sg.tensors[q]
                        requantized[key] = self._new(f"{src.name}/requantized", src.shape,
                                                     self.act, P.qparams(*out_params), src)
                        pre.append(_op("QUANTIZE", [q], [requantized[key]]))
                    q = requantized[key]
                inputs[k] = q
                continue
            value = self.constant(t)
            if r.output == "shared":
                scale, zp = out_params
            elif op.op in SAME_PARAMS_CONSTANTS:
                scale, zp = self.params[op.inputs[data[0]]]
            else:
                scale, zp = P.constant_params(value, self.act)
            inputs[k] = self._quantized_constant(t, P.quantize_values(value, scale, zp, self.act),
                                                 P.qparams(scale, zp), "q")
        op.inputs = inputs
        return pre

    def _zero_bias(self, op) -> list:
        w = self.sg.tensors[op.inputs[1]]
        t = self.sg.add_tensor(Tensor(f"{w.name}/bias", (w.shape[0],), "float32",
                                      buffer=self.m.add_buffer(np.zeros(w.shape[0], np.float32))))
        self.floats.add(t)
        return list(op.inputs[:2]) + [t]

    def _weights_and_bias(self, op, r, weights: dict, inputs: list) -> list:
        (k, axis), = weights.items()
        w = self.constant(op.inputs[k])
        given = self.given_scales(op, k, w, axis) if self.given_scales else None
        scales = P.weight_scales(w, axis) if given is None else given
        bias_k = r.bias[0] if r.bias and r.bias[0] < len(op.inputs) else None
        bias = self.constant(op.inputs[bias_k]) if bias_k is not None and \
            op.inputs[bias_k] >= 0 else None
        bias_type = "int32" if self.act == "int8" else "int64"
        if bias is not None:
            s_in = self.params[op.inputs[r.bias[1]]][0]
            widened = P.fit_bias(bias, s_in, scales, bias_type)
            if np.any(widened != scales):
                self.report.notes.append(f"{op.op} {self.sg.tensors[op.outputs[0]].name!r}: "
                                         "weight scales widened so the int32 bias fits")
            scales = widened
            b_scales = P.bias_scales(s_in, scales)
            qb = P.quantize_values(bias.astype(np.float64) / b_scales.astype(np.float64), 1.0, 0,
                                   bias_type)
            inputs[bias_k] = self._quantized_constant(
                op.inputs[bias_k], qb, P.qparams(b_scales, np.zeros(b_scales.size, np.int64)),
                "bias")
        qw = P.quantize_weights(w, scales, axis)
        inputs[k] = self._quantized_constant(
            op.inputs[k], qw, P.qparams(scales, np.zeros(scales.size, np.int64),
                                        axis if axis is not None else 0), "w")
        return inputs

    def _quantized_constant(self, t: int, value: np.ndarray, q, role: str) -> int:
        key = (t, role, value.dtype.str, q.scale.tobytes(), q.zero_point.tobytes())
        if key not in self.const_cache:
            src = self.sg.tensors[t]
            self.const_cache[key] = self.sg.add_tensor(Tensor(
                src.name, value.shape, value.dtype.name, buffer=self.m.add_buffer(value),
                quantization=q))
        return self.const_cache[key]

    def _outputs(self, chosen: dict) -> None:
        """Graph outputs read the chosen representation, under the names they had (the other
        representation's tensor takes a suffix: "/int8", "/float")."""
        sg = self.sg
        for k, t in enumerate(sg.outputs):
            new = chosen.get(t, t)
            if new == t:
                continue
            old = sg.tensors[t]
            sg.tensors[new].name = old.name
            old.name = f"{old.name}/{'float' if old.dtype == 'float32' else old.dtype}"
            sg.outputs[k] = new
            for sig in self.m.signature_defs:
                if sig.subgraph_index == 0:
                    sig.outputs = {n: (new if v == t else v) for n, v in sig.outputs.items()}


def _op(builtin: str, inputs: list, outputs: list) -> Operator:
    return Operator(OperatorCode(builtin, 0), list(inputs), list(outputs),
                    default_options(builtin))


def quantize_integer(model: Model, ranges: dict, act: str = "int8",
                     input_type: str = "float32", output_type: str = "float32", *,
                     weight_scales=None, keep_float=None) -> tuple:
    """(quantized copy of `model`, Report) for activation type `act` ("int8" or "int16").
    `weight_scales(op, input, weights, axis)`: the scales to quantize those weights with, or
    None for their own range; `keep_float`: {operator index: why it stays float}."""
    from edgelite.converter.pass_clean import compact

    for name, value in (("input", input_type), ("output", output_type)):
        if value not in ("float32", act):
            raise ValueError(f"inference {name} type {value} does not fit {act} activations "
                             f"(float32 or {act})")
    m = copy.deepcopy(model)
    report = Report("int8" if act == "int8" else "int16x8")
    q = _Quantizer(m, ranges, act, report, weight_scales, keep_float)
    q.choose()
    q.assign()
    q.rewrite(input_type, output_type)
    compact(m)
    return m, report
