"""Timing-free guards of the default resolver's hybrid (dynamic-range) convolutions (issue 17,
goal 6): the passes over the input and the output one convolution makes, counted by the size of
what each numpy pass writes, never timed."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import Interpreter, OpResolverType
from tests.interpreter.cases_hybrid import hybrid_case
from tests.interpreter.case_data import conv_options
from tests.opmodel import run_interpreter

PASSES = ("multiply", "rint", "add", "subtract", "copyto", "clip", "minimum", "maximum")


def passes(content, feeds, monkeypatch) -> list:
    """[(numpy function, elements it wrote)] of one invoke, the functions wrapped before the
    interpreter is built (kernels bind theirs at prepare); reductions count as passes of the
    array they read."""
    seen, on = [], [False]

    class Counted:
        def __init__(self, name, f):
            self.name, self.f = name, f

        def __call__(self, *args, **kw):
            if on[0]:
                target = kw.get("out", args[-1] if len(args) > 1 else args[0])
                target = target[0] if isinstance(target, tuple) else target
                seen.append((self.name, int(np.size(target))))
            return self.f(*args, **kw)

        def __getattr__(self, attr):
            return getattr(self.f, attr)
    with monkeypatch.context() as m:
        for name in PASSES:
            m.setattr(np, name, Counted(name, getattr(np, name)))
        it = Interpreter(model_content=content)
        run_interpreter(it, feeds)
        on[0] = True
        it.invoke()
    return seen


@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("cout", [8, 96])
def test_a_hybrid_1x1_makes_two_passes_over_its_input(per_channel, cout, monkeypatch):
    """A 1x1 CONV_2D, a projection (EfficientNet's and DenseNet's) or an expansion: q =
    round(x * inv) in two passes over the input, the row scale on the weights, the bias and
    the clamp on the output (hybrid_conv.pointwise_run; an expansion's q copied into a buffer
    with a column of ones, as opaque rows: not a pass of input-sized values); dequantize_rows
    then the float kernel made three over the input (and an expansion a fourth, its copy)."""
    case = hybrid_case("p", "CONV_2D", (1, 12, 10, 48), (cout, 1, 1, 48), conv_options(act=3),
                       per_channel=per_channel)
    size_in, size_out = 12 * 10 * 48, 12 * 10 * cout
    seen = passes(case.model, case.feeds, monkeypatch)
    over_input = [name for name, n in seen if n == size_in]
    assert over_input == ["multiply", "rint"], seen
    assert len([n for _, n in seen if n == size_out]) <= 2, seen     # bias, clamp
    assert [name for name, n in seen if n == 48 * cout] == ["multiply"], seen  # W * scale


@pytest.mark.parametrize("stride", [1, 2])
def test_a_batch1_hybrid_depthwise_quantizes_into_its_padded_buffer(stride, monkeypatch):
    """EfficientNet's hybrid depthwise layers: x * inv written straight into the taps' padded
    buffer (no dequantized copy of the input, then a copy into the buffer; at stride 2 into
    its column phases), rounded there, the row scale on the tiled tap weights: multiplies
    writing the input's size and the weights', one rint, no copyto (dequantize_rows then the
    float kernel: two multiplies of the input, a rint, a copy)."""
    h, w, c = 24, 20, 8
    case = hybrid_case("d", "DEPTHWISE_CONV_2D", (1, h, w, c), (1, 3, 3, c),
                       conv_options(stride=stride, depth_multiplier=1), axis=3)
    seen = passes(case.model, case.feeds, monkeypatch)
    wo = -(-w // stride)
    multiplied = sum(n for name, n in seen if name == "multiply")
    assert multiplied == h * w * c + 3 * 3 * wo * c, seen     # x * inv, the taps' weights
    assert [name for name, _ in seen].count("rint") == 1, seen
    assert not [n for name, n in seen if name == "copyto" and n >= h * w * c // 2], seen


def test_the_1x1_projection_matches_the_two_pass_form():
    """The same values as dequantize_rows then a float GEMM, to float32 rounding, and the
    integer sums of BUILTIN_REF to float32 rounding (test_quantized_passes has the cases)."""
    case = hybrid_case("p", "CONV_2D", (1, 9, 7, 40), (6, 1, 1, 40), conv_options(),
                       x_shift=0.7)
    got = run_interpreter(Interpreter(model_content=case.model), case.feeds)[0]
    want = run_interpreter(Interpreter(model_content=case.model,
                                       experimental_op_resolver_type=OpResolverType.BUILTIN_REF),
                           case.feeds)[0]
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * np.abs(want).max())


def test_a_large_hybrid_3x3_conv_copies_no_im2col(monkeypatch):
    """DenseNet's 3x3 growth layers (56x56x128 -> 32): one GEMM of the image by all nine taps'
    weights and nine adds of shifted sub-rectangles of its product over the output, each tap
    the pixels inside the image (hybrid_conv.shifted_conv_run); im2col copied nine times the
    input first, a padded layout multiplied the zero border too. Counted: the elements numpy
    writes by copyto, by the adds, and the GEMMs' shapes."""
    h, w, c, o = 30, 28, 8, 5
    case = hybrid_case("s", "CONV_2D", (1, h, w, c), (o, 3, 3, c), conv_options(act=1))
    products = []
    real = np.matmul

    class Spy:
        def __call__(self, a, b, *args, **kw):
            products.append((np.shape(a), np.shape(b)))
            return real(a, b, *args, **kw)

        def __getattr__(self, attr):
            return getattr(real, attr)
    monkeypatch.setattr(np, "matmul", Spy())
    seen = passes(case.model, case.feeds, monkeypatch)
    copied = sum(n for name, n in seen if name == "copyto")
    assert copied < h * w * c, seen                  # no im2col (9 x the input)
    assert products[-1][1] == (c, 9 * o), products   # one GEMM, every tap's weights side by side
    assert products[-1][0] == (h * w, c), products   # of the image's pixels: no zero border
    adds = [n for name, n in seen if name == "add"]
    assert len(adds) == 9 and adds[0] == h * w * o, seen   # the first tap covers the output
    assert sum(adds) == sum(r * k for r in (h, h - 1, h - 1) for k in (w, w - 1, w - 1)) * o
    # the row scale on the [C, 9 * O] weights, not a pass over the input
    assert [name for name, n in seen if n == h * w * c] == ["multiply", "rint"], seen


@pytest.mark.parametrize("op,x_shape,w_shape,options", [
    ("CONV_2D", (1, 1, 1, 40), (6, 1, 1, 40), conv_options(act=1)),        # squeeze-excite's
    ("FULLY_CONNECTED", (1, 33), (9, 33), dict(fused_activation_function=0,
                                               asymmetric_quantize_inputs=True,
                                               keep_num_dims=False))])
def test_a_one_row_hybrid_product_takes_its_bounds_by_argmin_argmax(op, x_shape, w_shape,
                                                                   options, monkeypatch):
    """A one-row hybrid product (EfficientNet's 32 squeeze-excite convolutions, a batch-1
    FULLY_CONNECTED): the row's bounds by argmin / argmax, no min / max reduction (a quarter
    of their call cost; hybrid_row.RowProduct's form), the same numbers as BUILTIN_REF's to
    float32 rounding (test_quantized_passes)."""
    from edgelite.interpreter.kernels import hybrid
    calls = []
    for name in ("_min", "_max"):
        real = getattr(hybrid, name)
        monkeypatch.setattr(hybrid, name, lambda *a, _f=real, **k: calls.append(1) or _f(*a, **k))
    case = hybrid_case("r", op, x_shape, w_shape, options, per_channel=op == "CONV_2D")
    it = Interpreter(model_content=case.model)
    run_interpreter(it, case.feeds)
    calls.clear()
    it.invoke()
    assert calls == [], calls
