"""Fusions: per-channel MUL / ADD into convolution and fully connected weights and biases (which
is how BatchNormalization and bias adds disappear), activations into their producer's fused
activation, the HardSwish patterns into HARD_SWISH, and explicit pads into SAME padding."""
from __future__ import annotations

import numpy as np

from edgelite.interpreter.kernels.common import activation_code
from edgelite.schema import Model
from edgelite.schema.ops import OPS, Activation

from .editor import Editor
from .lower_nn import SAME, VALID, same_equivalent

# Linear ops a per-channel MUL / ADD folds into: weights with an output-channel axis, a bias, and
# a fused activation (the folded op's). Which, and where, is the op table's to say.
LINEAR = {op: f for op, f in OPS.items()
          if f.weight_axis is not None and f.bias is not None and f.activation}
# Ops whose float kernels (edgelite's and LiteRT's) apply a fused RELU / RELU_N1_TO_1 / RELU6.
TAKES_ACTIVATION = frozenset(op for op, f in OPS.items() if f.activation)
# RELU, RELU_N1_TO_1 and RELU6: the fused activation each computes.
FUSED_AS = {op: f.fused_as for op, f in OPS.items() if f.fused_as is not None}


def _each_op(model: Model, kinds):
    """(editor, op) for every op of `kinds` still in the graph; passes edit through the
    editor, which keeps its maps current (linear in the graph's size)."""
    for sg in model.subgraphs:
        ed = Editor(model, sg)
        for op in list(sg.operators):
            if op.op in kinds and ed.has(op):
                yield ed, op


def _close(value, target: float) -> bool:
    return value is not None and value.size == 1 and abs(float(value.reshape(-1)[0]) - target) \
        <= 1e-6 * max(1.0, abs(target))


# -- per-channel MUL / ADD into weights and biases -----------------------------------------------

def _linear_operand(ed: Editor, op, positions=(0, 1)):
    """(linear producer, per-channel vector, position of the linear input) when `op` combines
    the output of a CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED (float, constant weights, no
    fused activation, no other reader) with a constant that varies only along channels."""
    for k in positions:
        y, c = op.inputs[k], op.inputs[1 - k]
        producer = ed.producer(y)
        if producer is None or producer.op not in LINEAR or activation_code(producer.options):
            continue
        f = LINEAR[producer.op]
        value = ed.value(c)
        weights = ed.value(producer.inputs[f.weights[0]])
        if value is None or weights is None or weights.dtype != np.float32:
            continue
        if not ed.only_read_by(y, op) or len(producer.outputs) != 1:
            continue
        bias = producer.inputs[f.bias] if len(producer.inputs) > f.bias else -1
        if bias >= 0 and ed.value(bias) is None:
            continue
        units = weights.shape[f.weight_axis]
        y_shape = ed.shape(y)
        if not y_shape or y_shape[-1] != units or value.ndim > len(y_shape):
            continue
        if value.size not in (1, units) or (value.size == units and value.shape[-1] != units):
            continue
        vector = np.broadcast_to(value.reshape(-1).astype(np.float64), (units,))
        return producer, vector, k
    return None


def _weights_of(ed: Editor, producer) -> np.ndarray:
    return ed.value(producer.inputs[LINEAR[producer.op].weights[0]])


def _bias_of(ed: Editor, producer, units: int) -> np.ndarray:
    k = LINEAR[producer.op].bias
    bias = producer.inputs[k] if len(producer.inputs) > k else -1
    return np.zeros(units) if bias < 0 else ed.value(bias).astype(np.float64)


def _absorb(ed: Editor, producer, op, weights, bias) -> None:
    """`producer` with new weights and bias now computes `op`'s output (and its activation)."""
    name = ed.sg.tensors[op.outputs[0]].name
    f = LINEAR[producer.op]
    inputs = list(producer.inputs) + [-1] * (f.bias + 1 - len(producer.inputs))
    inputs[f.weights[0]] = ed.const(weights.astype(np.float32, copy=False), f"{name}/weights")
    inputs[f.bias] = ed.const(bias.astype(np.float32), f"{name}/bias")
    ed.set_inputs(producer, inputs)
    producer.options = producer.options.replace(
        fused_activation_function=activation_code(op.options))
    ed.set_outputs(producer, op.outputs)
    ed.remove(op)


def fuse_mul_into_weights(model: Model) -> bool:
    """MUL (or DIV) by a per-channel constant after a conv or FC scales its weights and bias."""
    changed = False
    for ed, op in _each_op(model, ("MUL", "DIV")):
        match = _linear_operand(ed, op, (0, 1) if op.op == "MUL" else (0,))
        if match is None:
            continue
        producer, scale, _ = match
        if op.op == "DIV":
            if not scale.all():
                continue
            scale = 1.0 / scale
        axis = LINEAR[producer.op].weight_axis
        weights = _weights_of(ed, producer)
        shape = [1] * weights.ndim
        shape[axis] = -1
        bias = _bias_of(ed, producer, scale.size) * scale
        if op.op == "MUL" and np.array_equal(scale.astype(np.float32), scale):
            # float32 x float32 is exact in float64, so rounding the float64 product once is
            # the float32 product: the same bits without a float64 copy of the weights.
            scaled = weights * scale.astype(np.float32).reshape(shape)
        else:
            scaled = weights.astype(np.float64) * scale.reshape(shape)
        _absorb(ed, producer, op, scaled, bias)
        changed = True
    return changed


def fuse_add_into_bias(model: Model) -> bool:
    """ADD (or SUB) of a per-channel constant after a conv or FC goes into its bias."""
    changed = False
    for ed, op in _each_op(model, ("ADD", "SUB")):
        match = _linear_operand(ed, op, (0, 1) if op.op == "ADD" else (0,))
        if match is None:
            continue
        producer, shift, _ = match
        bias = _bias_of(ed, producer, shift.size) + (shift if op.op == "ADD" else -shift)
        _absorb(ed, producer, op, _weights_of(ed, producer), bias)
        changed = True
    return changed


# -- activations ---------------------------------------------------------------------------------

def fuse_activation(model: Model) -> bool:
    """RELU, RELU_N1_TO_1 and RELU6 become their producer's fused activation."""
    changed = False
    for ed, act in _each_op(model, FUSED_AS):
        x = act.inputs[0]
        producer = ed.producer(x)
        if (producer is None or producer.op not in TAKES_ACTIVATION
                or activation_code(producer.options) or len(producer.outputs) != 1
                or not ed.only_read_by(x, act)
                or ed.sg.tensors[x].dtype != "float32" or producer.options is None):
            continue
        producer.options = producer.options.replace(
            fused_activation_function=int(FUSED_AS[act.op]))
        ed.set_outputs(producer, act.outputs)
        ed.remove(act)
        changed = True
    return changed


# -- HardSwish -----------------------------------------------------------------------------------

def _const_operand(ed: Editor, op, x=None):
    """(other input, constant value) of a two-input op with one constant input; when `x` is
    given the other input must be x."""
    if len(op.inputs) != 2:
        return None, None
    for k in (0, 1):
        value = ed.value(op.inputs[k])
        other = op.inputs[1 - k]
        if value is not None and (x is None or other == x):
            return other, value
    return None, None


def _hard_sigmoid_of(ed: Editor, s: int, x: int):
    """(k, ops) when tensor s computes k * clip(x / 6 + 1/2, 0, 1) (k 1 or 6) through `ops`,
    whose intermediate results nobody else reads."""
    p = ed.producer(s)
    if p is None:
        return None, []
    if p.op == "ADD" and activation_code(p.options) == Activation.RELU6:
        _, three = _const_operand(ed, p, x)
        return (6, [p]) if _close(three, 3.0) else (None, [])
    if p.op == "RELU6":
        q = ed.producer(p.inputs[0])
        if q is not None and q.op == "ADD" and not activation_code(q.options) and \
                ed.only_read_by(p.inputs[0], p) and _close(_const_operand(ed, q, x)[1], 3.0):
            return 6, [q, p]
        return None, []
    if p.op in ("MUL", "DIV") and not activation_code(p.options):
        inner, value = _const_operand(ed, p)
        if p.op == "DIV" and (value is None or p.inputs[1] == inner):
            return None, []
        if inner is None or not _close(value, 1 / 6 if p.op == "MUL" else 6.0):
            return None, []
        k, ops = _hard_sigmoid_of(ed, inner, x)
        if k == 6 and ed.only_read_by(inner, p):
            return 1, ops + [p]
        return None, []
    if p.op == "RELU_0_TO_1":
        add = ed.producer(p.inputs[0])
        if add is None or add.op != "ADD" or activation_code(add.options) or \
                not ed.only_read_by(p.inputs[0], p):
            return None, []
        scaled, half = _const_operand(ed, add)
        mul = ed.producer(scaled) if scaled is not None else None
        if (mul is None or mul.op != "MUL" or activation_code(mul.options) or not _close(half, 0.5)
                or not ed.only_read_by(scaled, add)
                or not _close(_const_operand(ed, mul, x)[1], 1 / 6)):
            return None, []
        return 1, [mul, add, p]
    return None, []


def fuse_hard_swish(model: Model) -> bool:
    """x * relu6(x + 3) / 6 and x * HardSigmoid(x) (alpha 1/6) become HARD_SWISH(x)."""
    changed = False
    for ed, op in _each_op(model, ("MUL",)):
        if activation_code(op.options) or len(op.inputs) != 2:
            continue
        for x, s in ((op.inputs[0], op.inputs[1]), (op.inputs[1], op.inputs[0])):
            if s == x or not ed.only_read_by(s, op):
                continue
            k, ops = _hard_sigmoid_of(ed, s, x)
            if k is None:
                continue
            final = op
            if k == 6:
                final = _divide_by_six(ed, op)
                if final is None:
                    continue
            for dead in ops + ([op] if final is not op else []):
                ed.remove(dead)
            hard_swish = ed.new_op("HARD_SWISH", [x], list(final.outputs))
            ed.insert_before(final, hard_swish)
            ed.remove(final)
            changed = True
            break
    return changed


def _divide_by_six(ed: Editor, op):
    """The op that divides `op`'s output by 6 (its only reader), or None."""
    y = op.outputs[0]
    readers = ed.readers(y)
    if len(readers) != 1 or ed.is_output(y):
        return None
    nxt = readers[0]
    if activation_code(nxt.options) or nxt.op not in ("MUL", "DIV"):
        return None
    other, value = _const_operand(ed, nxt, y)
    if other is None or (nxt.op == "DIV" and nxt.inputs[0] != y):
        return None
    return nxt if _close(value, 1 / 6 if nxt.op == "MUL" else 6.0) else None


# -- explicit pads into SAME ---------------------------------------------------------------------

def _window(ed: Editor, op):
    """(kernel, strides, dilations) of a windowed NHWC op."""
    o = op.options
    if op.op in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        w = ed.shape(op.inputs[1])
        return (w[1], w[2]), (o.stride_h, o.stride_w), (o.dilation_h_factor, o.dilation_w_factor)
    return (o.filter_height, o.filter_width), (o.stride_h, o.stride_w), (1, 1)


def fold_pad_into_window(model: Model) -> bool:
    """PAD before a VALID convolution (zeros) or max pool (lowest value) folds into SAME
    padding where both read the same windows."""
    changed = False
    for ed, op in _each_op(model, ("CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D")):
        if op.options.padding != VALID:
            continue
        padded = op.inputs[0]
        pad = ed.producer(padded)
        if pad is None or pad.op not in ("PAD", "PADV2") or not ed.only_read_by(padded, op):
            continue
        paddings = ed.value(pad.inputs[1])
        fill = 0.0 if pad.op == "PAD" or len(pad.inputs) < 3 else ed.value(pad.inputs[2])
        if paddings is None or paddings.shape != (4, 2) or paddings[[0, 3]].any() or fill is None:
            continue
        fill = float(np.asarray(fill).reshape(-1)[0])
        if op.op == "MAX_POOL_2D" and fill > float(np.finfo(np.float32).min):
            continue
        if op.op != "MAX_POOL_2D" and fill != 0.0:
            continue
        source = pad.inputs[0]
        kernel, strides, dilations = _window(ed, op)
        pads = [tuple(int(p) for p in paddings[1]), tuple(int(p) for p in paddings[2])]
        if not same_equivalent(pads, ed.shape(source)[1:3], kernel, strides, dilations):
            continue
        ed.set_input(op, 0, source)
        op.options = op.options.replace(padding=SAME)
        ed.remove(pad)
        changed = True
    return changed
