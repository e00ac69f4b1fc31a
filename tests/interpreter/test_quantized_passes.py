"""Timing-free guards of the int8 and hybrid hot paths (issue 17): how many numpy passes and
kernel runs a step costs, counted, never timed; and the shortcuts they take checked against the
plain arithmetic they replace."""
import numpy as np
import pytest

from edgelite.interpreter.kernels import hybrid
from edgelite.interpreter.kernels.fixed_point import round_half_away


def _neon_round(y: np.ndarray) -> np.ndarray:
    """tensor_utils' NEON rounding as LiteRT's x86 build runs it: trunc(y +- 0.5) in float32 for
    blocks of 8 values, std::round for the rest."""
    v = y.shape[1] // 8 * 8
    out = y.copy()
    head = y[:, :v]
    out[:, :v] = np.trunc(head + np.copysign(np.float32(0.5), head))
    out[:, v:] = round_half_away(y[:, v:])
    return out


def _rows(kind: str, rng, size: int = 29) -> np.ndarray:
    x = rng.normal(0, 2, (4, size)).astype(np.float32)
    x[:, 3] = 0.0
    x[:, 5] = -0.0
    if kind == "nonnegative":
        x = np.abs(x)
    elif kind == "nonpositive":
        x = -np.abs(x)
    return x


@pytest.mark.parametrize("kind", ["mixed", "nonnegative", "nonpositive"])
def test_symmetric_quantization_equals_neon_rounding(kind):
    rng = np.random.default_rng(3)
    x = _rows(kind, rng)
    q, half, scales = np.empty_like(x), np.empty_like(x), np.empty(4, np.float32)
    hybrid.quantize_rows_symmetric(x, q, scales, half)
    r = np.maximum(np.abs(x.min(1)), np.abs(x.max(1)))
    inv = (np.float32(127) / r).astype(np.float32)
    want = _neon_round(x * inv[:, None])
    assert np.array_equal(q, want)
    assert np.array_equal(scales, (r / np.float32(127)).astype(np.float32))


@pytest.mark.parametrize("kind", ["mixed", "nonnegative", "nonpositive"])
@pytest.mark.parametrize("centered", [False, True])
def test_asymmetric_quantization_equals_clamped_neon_rounding(kind, centered):
    rng = np.random.default_rng(4)
    x = _rows(kind, rng, 45)
    if kind == "mixed":     # a range symmetric about 0: its top rounds to 128, the clamp runs
        m = np.abs(x[0]).max()
        x[0, :2] = -m, m
    q, half = np.empty_like(x), np.empty_like(x)
    scales, offsets = np.empty(4, np.float32), np.empty(4, np.float32)
    hybrid.quantize_rows_asymmetric(x, q, scales, offsets, half, centered=centered)
    inv = (1.0 / scales.astype(np.float64)).astype(np.float32)
    unclamped = _neon_round(x * inv[:, None]) + offsets[:, None]
    full = np.clip(unclamped, -128, 127)
    assert np.array_equal(q, full - offsets[:, None] if centered else full)
    if kind == "mixed":
        assert unclamped.max() > 127, "no row needs the clamp: the test would not see it skipped"


def _hybrid_conv_cases():
    from tests.interpreter.cases_hybrid import CASES
    return [c for c in CASES if c.id.startswith(("conv_2d", "depthwise_conv_2d"))]


def _built_kernels(monkeypatch) -> list:
    built = []
    real = hybrid._float_kernel
    monkeypatch.setattr(hybrid, "_float_kernel",
                        lambda node, w, *a, **k: built.append(w.shape) or real(node, w, *a, **k))
    return built


def test_hybrid_deep_conv_runs_one_grouped_kernel(monkeypatch):
    """Under BUILTIN_REF a hybrid CONV_2D whose sums pass float32's exact range (DenseNet's 3x3
    over 128 channels) builds one float kernel (two channel groups), not one per weight digit."""
    from edgelite.interpreter import OpResolverType
    from tests.opmodel import run_edgelite
    built = _built_kernels(monkeypatch)
    case = next(c for c in _hybrid_conv_cases() if c.id == "conv_2d_deep_two_groups")
    run_edgelite(case.model, case.feeds,
                 experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    assert built == [(12, 3, 3, 64)], built


@pytest.mark.parametrize("case", _hybrid_conv_cases(), ids=lambda c: c.id)
def test_default_hybrid_conv_is_one_float_kernel_near_the_reference(case, monkeypatch):
    """The default resolver's hybrid convolution is one float kernel on dequantized weights
    (bias and activation fused: no pass of its own over the output), or at batch 1 its own
    products (hybrid_conv: 1x1, large stride-1 kxk, depthwise; no float kernel), within float32
    rounding of the exact integer sums of BUILTIN_REF."""
    from edgelite.interpreter import OpResolverType
    from tests.opmodel import run_edgelite
    want = run_edgelite(case.model, case.feeds,
                        experimental_op_resolver_type=OpResolverType.BUILTIN_REF)[0]
    built = _built_kernels(monkeypatch)
    got = run_edgelite(case.model, case.feeds)[0]
    assert len(built) == (0 if _no_float_kernel(case) else 1), built
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * np.abs(want).max())


def _no_float_kernel(case) -> bool:
    """A batch-1 DEPTHWISE_CONV_2D (hybrid_conv.depthwise_run), or a batch-1, stride-1 CONV_2D
    that runs its own GEMM: 1x1 (hybrid_conv.pointwise_run; one pixel: a one-row
    FULLY_CONNECTED), or kxk where hybrid_conv.shifted_applies (hybrid_conv.shifted_conv_run)."""
    from edgelite.schema import load
    sg = load(case.model).subgraphs[0]
    op = sg.operators[0]
    w = sg.tensors[op.inputs[1]]
    shape, opts = case.feeds[0].shape, op.options
    if op.opcode.name == "DEPTHWISE_CONV_2D":
        return shape[0] == 1
    if op.opcode.name != "CONV_2D" or shape[0] != 1 or not opts.stride_h == opts.stride_w == 1:
        return False
    if tuple(w.shape[1:3]) == (1, 1):
        return True
    from types import SimpleNamespace
    from edgelite.interpreter.kernels import hybrid_conv
    return hybrid_conv.shifted_applies(SimpleNamespace(options=opts), shape, tuple(w.shape))


class _Counted:
    """A numpy function or ufunc that counts its calls (attributes such as .reduce pass
    through uncounted)."""

    def __init__(self, name, f, counts):
        self.name, self.f, self.counts = name, f, counts

    def __call__(self, *args, **kwargs):
        self.counts[self.name] = self.counts.get(self.name, 0) + 1
        return self.f(*args, **kwargs)

    def __getattr__(self, attr):
        return getattr(self.f, attr)


COUNTED = ("copyto", "matmul", "einsum", "take", "multiply", "add", "subtract", "bitwise_xor",
           "floor", "rint", "right_shift", "left_shift", "bitwise_or", "not_equal", "less",
           "where")


def _numpy_calls(it, monkeypatch) -> dict:
    """The numpy calls (by name, plus the kernels' clip) of one invoke of an allocated
    interpreter that has run once."""
    import sys
    from edgelite.interpreter.kernels import common
    counts = {}
    with monkeypatch.context() as m:
        for name in COUNTED:
            m.setattr(np, name, _Counted(name, getattr(np, name), counts))
        from edgelite.interpreter.kernels import conv_int8    # bound depthwise: np's c_einsum
        m.setattr(conv_int8, "einsum", _Counted("einsum", conv_int8.einsum, counts))
        real = common.clip
        clip = _Counted("clip", real, counts)
        for module in list(sys.modules.values()):      # every kernel module's clip
            if getattr(module, "__name__", "").startswith("edgelite.interpreter.kernels") \
                    and getattr(module, "clip", None) is real:
                m.setattr(module, "clip", clip)
        it.invoke()
    return counts


def test_int8_mobilenet_v2_numpy_passes(monkeypatch):
    """MobileNetV2 int8 under the default resolver, counted per invoke: one GEMM per CONV_2D
    and FULLY_CONNECTED (36), one einsum per depthwise column phase (21: four stride-2 layers
    have two), one clip per convolution (52) and ADD (10) and 3 in the head, which casts to the
    output too (one copyto per layer: its input's cast to float32), no 65536-entry table gathers
    for the ADDs, and at most 335 numpy calls in all (4 per 1x1 convolution: input cast,
    matmul, clip into the output, sign flip; the float model makes about 190, the extra being
    the int8 -> float32 casts and sign flips at each layer)."""
    from edgelite.interpreter import Interpreter
    from tests.conftest import models_dir
    from tests.interpreter.numpy_calls import numpy_calls
    it = Interpreter(model_path=str(models_dir() / "mobilenet_v2_int8.tflite"), num_threads=1)
    it.allocate_tensors()
    d = it.get_input_details()[0]
    it.set_tensor(d["index"], np.random.default_rng(0).integers(-128, 128, d["shape"])
                  .astype(d["dtype"]))
    it.invoke()
    counts = _numpy_calls(it, monkeypatch)
    # (the bound GEMMs call np.dot's C function, which only the profiler sees)
    gemms = numpy_calls(it.invoke, monkeypatch)
    assert gemms.get("matmul", 0) + gemms.get("dot", 0) == 36, gemms
    assert counts.get("einsum") == 21, counts
    assert counts.get("clip", 0) <= 65, counts
    assert counts.get("take", 0) <= 2, counts            # MEAN / SOFTMAX's, not the ADDs'
    assert counts.get("copyto", 0) <= 59, counts           # one per layer, and the stem's
    assert sum(counts.values()) <= 335, counts
