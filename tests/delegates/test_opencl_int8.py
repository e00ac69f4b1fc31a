"""int8 models on the OpenCL delegate with "int8": "dequantize" (delegates/opencl/quant.py):
every op of the shared int8 models runs on the device in one partition, on real values with
dequantized weights, and its outputs stay within one step of the output scale of LiteRT's
BUILTIN_REF (the reference int8 kernels). Without the option int8 ops stay on the CPU."""
from __future__ import annotations

import os

import numpy as np
import pytest

from edgelite.interpreter import Interpreter
from edgelite.interpreter.delegation import DelegateError, placement

pytestmark = pytest.mark.opencl


def _delegate(**options):
    pytest.importorskip("pyopencl", reason="pyopencl is not installed: pip install -e '.[dev]'")
    from edgelite.delegates import load_delegate
    try:
        return load_delegate("opencl", options)
    except DelegateError as e:
        if "int8" in str(e):
            raise
        pytest.skip(f"no OpenCL device: {e}")


def _reference(path, **kw):
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    it = litert.Interpreter(model_path=str(path),
                            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF,
                            **kw)
    it.allocate_tensors()
    return it


def _on_device(it, delegate) -> None:
    where = [p for p in placement(it) if p["where"] != "folded"]
    assert all(p["where"] == delegate.name for p in where), \
        [(p["op"], p["reason"]) for p in where if p["where"] != delegate.name]
    launches = [getattr(run, "launches", None) for run, _ in it._runtime.plans[0].steps]
    assert len(launches) == 1 and launches[0], launches  # one partition, no CPU step


def _digits_outputs(models_dir, **options):
    """The digits CNN int8 whole on the delegate (`options`) and BUILTIN_REF on the first 120
    test images, quantized: (ours, theirs, label) an image."""
    path = models_dir / "digits_cnn_int8.tflite"
    delegate = _delegate(**options)
    it = Interpreter(model_path=str(path), experimental_delegates=[delegate])
    it.allocate_tensors()
    _on_device(it, delegate)
    ref = _reference(path)
    d, o = it.get_input_details()[0], it.get_output_details()[0]
    assert d["dtype"] == np.int8
    scale, zero = d["quantization"]
    data = np.load(models_dir / "digits.npz")
    for x, y in zip(data["x_test"][:120], data["y_test"][:120]):
        q = np.clip(np.round(x.reshape(d["shape"]) / scale) + zero, -128, 127).astype(np.int8)
        it.set_tensor(d["index"], q)
        it.invoke()
        ref.set_tensor(ref.get_input_details()[0]["index"], q)
        ref.invoke()
        yield (it.get_tensor(o["index"]),
               ref.get_tensor(ref.get_output_details()[0]["index"]), y)


def _mobilenet_inputs(models_dir, shape) -> list:
    """MobileNetV2 int8's reference input and two random images."""
    xs = [np.load(models_dir / "refs" / "mobilenet_v2_int8.npz")["input_0"]]
    return xs + [np.random.default_rng(k).integers(-128, 128, shape).astype(np.int8)
                 for k in range(2)]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_digits_int8_dequantized_within_one_step(models_dir, precision):
    diffs, right, right_ref = [], 0, 0
    for ours, theirs, y in _digits_outputs(models_dir, precision=precision, int8="dequantize"):
        ours, theirs = ours.astype(np.int32), theirs.astype(np.int32)
        diffs.append(np.abs(ours - theirs).ravel())
        right += int(np.argmax(ours) == y)
        right_ref += int(np.argmax(theirs) == y)
    diffs = np.concatenate(diffs)
    # measured: max 1 step, 84 % of the outputs equal (360 test images, fp32 and fp16)
    assert diffs.max() <= 1, diffs.max()
    assert np.mean(diffs == 0) >= 0.7, np.mean(diffs == 0)
    assert abs(right - right_ref) <= 1, (right, right_ref)


def test_mobilenet_v2_int8_logits_within_one_step(models_dir, monkeypatch):
    """The logits (the int8 FULLY_CONNECTED's output): the model's own output is a softmax of
    random weights' logits, -128 or -127 everywhere. SOFTMAX is left to the CPU here so that
    the logits leave the partition, where they can be read."""
    from edgelite.delegates.opencl import quant
    monkeypatch.setattr(quant, "INT8_OPS", quant.INT8_OPS - {"SOFTMAX"})
    path = models_dir / "mobilenet_v2_int8.tflite"
    delegate = _delegate(int8="dequantize")
    it = Interpreter(model_path=str(path), experimental_delegates=[delegate],
                     experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    ref = _reference(path, experimental_preserve_all_tensors=True)
    out = ref.get_output_details()[0]["index"]
    logits = [t["index"] for t in ref.get_tensor_details()
              if list(t["shape"]) == [1, 1000] and t["index"] != out]
    assert len(logits) == 1
    where = [p for p in placement(it) if p["where"] != "folded"]
    assert [p["op"] for p in where if p["where"] != delegate.name] == ["SOFTMAX"]
    d = it.get_input_details()[0]
    diffs = []
    for x in _mobilenet_inputs(models_dir, d["shape"]):
        it.set_tensor(d["index"], x)
        it.invoke()
        ref.set_tensor(d["index"], x)
        ref.invoke()
        ours = it.get_tensor(logits[0]).astype(np.int32)
        theirs = ref.get_tensor(logits[0]).astype(np.int32)
        assert theirs.max() - theirs.min() > 100  # logits that say something
        assert np.argmax(ours) == np.argmax(theirs)
        diffs.append(np.abs(ours - theirs).ravel())
    diffs = np.concatenate(diffs)
    # measured: max 1 step, 80 % of the logits equal (5 inputs, fp32 and fp16)
    assert diffs.max() <= 1, diffs.max()
    assert np.mean(diffs == 0) >= 0.65, np.mean(diffs == 0)


def test_int8_stays_on_cpu_by_default(models_dir):
    path = models_dir / "digits_cnn_int8.tflite"
    delegate = _delegate()
    it = Interpreter(model_path=str(path), experimental_delegates=[delegate])
    it.allocate_tensors()
    where = [p for p in placement(it) if p["where"] != "folded"]
    convs = [p for p in where if p["op"] in ("CONV_2D", "FULLY_CONNECTED")]
    assert convs and all(p["where"] == "CPU" and "int8" in p["reason"] for p in convs), convs


def test_int8_option_is_checked():
    with pytest.raises(DelegateError, match="int8 'exact'"):
        _delegate(int8="exact")


def test_quant_reasons():
    """What the dequantized path declines: ops without a real-valued counterpart, hybrid ops
    (float activations beside int8 weights), per-channel activations."""
    from edgelite.delegates.opencl import quant
    from edgelite.interpreter.kernels.registry import Node, TensorInfo
    from edgelite.schema.model import QuantizationParameters

    def tensor(i, type_name, scale=(0.1,), data=None):
        q = QuantizationParameters(scale=np.array(scale, np.float32),
                                   zero_point=np.zeros(len(scale), np.int64))
        return TensorInfo(i, f"t{i}", (1, 4), np.dtype(type_name), type_name, q, data)

    x, y = tensor(0, "int8"), tensor(1, "int8")
    assert quant.reason(Node("ADD", 0, [x, y], [tensor(2, "int8")])) is None
    assert "CAST" in quant.reason(Node("CAST", 0, [x], [tensor(2, "int8")]))
    w = tensor(3, "int8", data=np.ones((1, 4), np.int8))
    assert "hybrid" in quant.reason(Node("FULLY_CONNECTED", 0, [tensor(4, "float32", ()), w],
                                         [tensor(5, "float32", ())]))
    assert "per channel" in quant.reason(Node("ADD", 0, [tensor(6, "int8", (0.1, 0.2)), y],
                                              [tensor(7, "int8")]))
    assert np.allclose(quant.real_value(tensor(8, "int8", data=np.array([[-2, 0, 3, 127]],
                                                                          np.int8))),
                       [[-0.2, 0.0, 0.3, 12.7]])


# -- "int8": "integer": TFLite's integer arithmetic in OpenCL C (quant_int.py) -----------------

def test_mobilenet_v2_int8_integer_is_bit_exact(models_dir):
    """Every CONV_2D, DEPTHWISE_CONV_2D, ADD and the MEAN on the device in one partition, and
    where the CPU has pmaddwd (quant_int.int_dot) the classifier too (int32 sums, gemm_int.cl;
    elsewhere it stays on the CPU: its float32 sums could exceed 2^24); SOFTMAX has no integer
    kernel. The partition's output (the logits after 53 integer ops, or the mean after 52),
    the tensors after it equal BUILTIN_REF's in every value. (Not with
    experimental_preserve_all_tensors: every tensor kept would stop the depthwise folding.)
    fp32 only here: ~11 s on a cold PoCL cache (measured; ~45 s was noted before gemm_int.cl)
    fp16 holds the same integers (|q - zero point| <= 255), checked on the digits CNN and by
    test_gemm_integer_matches_reference (measured on MobileNetV2 too: bit-exact)."""
    from edgelite.delegates.opencl.quant_int import int_dot
    from edgelite.delegates.opencl.quant_int import vnni as vnni_of
    path = models_dir / "mobilenet_v2_int8.tflite"
    delegate = _delegate(int8="integer")
    it = Interpreter(model_path=str(path), experimental_delegates=[delegate])
    it.allocate_tensors()
    cpu = [p["op"] for p in placement(it) if p["where"] not in (delegate.name, "folded")]
    launches = [getattr(run, "launches", None) for run, _ in it._runtime.plans[0].steps]
    kernels = [name for _, name, _ in it._runtime.plans[0].steps[0][0].labels]
    ref = _reference(path, experimental_preserve_all_tensors=True)
    checked = [t["index"] for t in ref.get_tensor_details()
               if list(t["shape"]) in ([1, 1280], [1, 1000])]
    assert len(checked) == 3
    if int_dot(delegate.dev) is None:  # float kernels with exact sums, REQUANT epilogues
        assert cpu == ["FULLY_CONNECTED", "SOFTMAX"], cpu
        assert "2^24" in next(p["reason"] for p in placement(it)
                              if p["op"] == "FULLY_CONNECTED")
        # one partition: 35 convolutions (17 with their depthwise folded in), 10 ADDs, MEAN
        assert launches == [35 + 10 + 1, None, None], launches
    else:  # the 34 1x1 convolutions and the classifier as integer products (gemm_int.cl),
        # the 17 depthwise convolutions inside the launches of the 1x1 ones reading them
        # (DW_FUSED: their outputs never in memory), the three largest blocks' expansions too
        # (BLOCK_FUSED: 112x112x96 and 2 x 56x56x144 never in memory), the 10 residual ADDs
        # in the epilogues of the projections they read (RES_ADD), the first convolution, the
        # MEAN; the mean is inside the partition now (not readable)
        assert cpu == ["SOFTMAX"], cpu
        assert launches == [34 - 3 + 1 + 1 + 1, None], launches
        assert not any(k.startswith("add_integer") for k in kernels), kernels
        res = [dict(d).get("RES_ADD") for name, d in
               delegate.device_for(it._runtime).programs if name == "gemm_int"]
        assert 1 in res, res
        assert sum("gemm_integer" in k for k in kernels) == 35 - 3, kernels
        assert sum(k.startswith("depthwise_conv_2d_then_gemm_integer") for k in kernels) == 14
        assert sum(k.startswith("expand_depthwise_then_gemm_integer") for k in kernels) == 3
        assert not any(k.startswith("depthwise_conv_2d_") and "gemm" not in k
                       for k in kernels), kernels
        # on a CPU with VNNI of pmaddwd's width every integer product is one vpdpwssd
        dev = delegate.device_for(it._runtime)
        vnni = {dict(d).get("INT_VNNI") for name, d in dev.programs if name == "gemm_int"}
        assert vnni == {vnni_of(dev)}, vnni
        # and with VNNI four u8 x s8 products a lane (vpdpbusd: int8 weights, bias folded)
        u8 = {dict(d).get("INT_U8") for name, d in dev.programs if name == "gemm_int"}
        assert u8 == {vnni_of(dev) * (os.environ.get("EDGELITE_OPENCL_U8") != "0")}, u8
        checked = checked[1:]
    d = it.get_input_details()[0]
    for x in _mobilenet_inputs(models_dir, d["shape"]):
        it.set_tensor(d["index"], x)
        it.invoke()
        ref.set_tensor(d["index"], x)
        ref.invoke()
        spreads = []
        for k in checked:
            theirs = ref.get_tensor(k)
            spreads.append(int(theirs.max()) - int(theirs.min()))
            np.testing.assert_array_equal(it.get_tensor(k), theirs)
        assert sorted(spreads)[1] > 100  # the logits (and the mean) say something


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_digits_int8_integer_is_bit_exact(models_dir, precision):
    """The whole model on the device in one partition (convolutions with their fused ReLU,
    max pools, the reshape, both FULLY_CONNECTEDs with the reference's double rounding): its
    outputs equal BUILTIN_REF's on 120 test images, with float32 and half storage."""
    for ours, theirs, _ in _digits_outputs(models_dir, precision=precision, int8="integer"):
        np.testing.assert_array_equal(ours, theirs)


def test_requantization_matches_fixed_point_mbqm():
    """common.cl's mbqm16 / requant16 against interpreter/kernels/fixed_point.py's mbqm (the
    spec, itself checked against LiteRT): every shift a conv multiplier takes (left shifts
    too), accumulators of both signs up to the bound quant_int.py allows, ties."""
    cl = pytest.importorskip("pyopencl", reason="pyopencl is not installed")
    from edgelite.delegates.opencl import device
    from edgelite.interpreter.kernels.fixed_point import mbqm, quantize_multiplier
    dev = device.open_device(None, None) if _has_device() else pytest.skip("no OpenCL device")
    source = dev.target + "#define SUFFIX _0\n" + device._text("common") + """
        __kernel void KERNEL(check)(__global const float* acc, __global const int* bias,
                                    __global const int* m, __global const int* e,
                                    __global int* raw, __global float* out) {
            const int i = get_global_id(0) * 16;
            const float16 a = vload16(0, acc + i);
            const int16 b = vload16(0, bias + i), mm = vload16(0, m + i),
                        ee = vload16(0, e + i);
            vstore16(mbqm16(convert_int16(a) + b, mm, ee), 0, raw + i);
            vstore16(requant16(a, as_float16(b), as_float16(mm), as_float16(ee), -8388608.0f,
                               8388607.0f), 0, out + i);
        }"""
    prog = cl.Program(dev.context, source).build()
    rng = np.random.default_rng(0)
    n = 16 * 4096
    reals = np.exp2(rng.uniform(-31, 4, n))
    reals[:64] = 2.0 ** -(np.arange(64) % 31)  # m = 2^30: x = -1 lands on a rounding tie
    pairs = [quantize_multiplier(float(r)) for r in reals]
    m = np.array([p[0] for p in pairs], np.int64)
    e = np.array([p[1] for p in pairs], np.int64)
    limit = np.floor(2.0 ** 29 / np.exp2(np.maximum(e, 0))).astype(np.int64)
    x = (rng.uniform(-1, 1, n) * np.minimum(limit, 1 << 26)).astype(np.int64)
    x[:64] = [0, 1, -1, (1 << 24) - 1, -(1 << 24) + 1] + list(range(-59, 0))  # small, signs
    acc = np.clip(x, -(1 << 24) + 1, (1 << 24) - 1)  # exact in float32; the rest is bias
    bias = x - acc
    mf = cl.mem_flags
    bufs = [cl.Buffer(dev.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
            for a in (acc.astype(np.float32), bias.astype(np.int32), m.astype(np.int32),
                      e.astype(np.int32))]
    raw, out = np.empty(n, np.int32), np.empty(n, np.float32)
    dsts = [cl.Buffer(dev.context, mf.WRITE_ONLY, a.nbytes) for a in (raw, out)]
    prog.check_0(dev.queue, (n // 16,), None, *bufs, *dsts)
    cl.enqueue_copy(dev.queue, raw, dsts[0])
    cl.enqueue_copy(dev.queue, out, dsts[1])
    want = mbqm(x, m, e)
    np.testing.assert_array_equal(raw, want)
    np.testing.assert_array_equal(out, np.clip(want, -(1 << 23), (1 << 23) - 1))
    assert (np.abs(want) > 1 << 23).any() and (e > 0).any() and (want < 0).any()


def _has_device() -> bool:
    try:
        _delegate()
    except pytest.skip.Exception:
        return False
    return True


@pytest.mark.parametrize("dot,vnni,u8", [(512, 0, 0), (512, 1, 0), (256, 0, 0), (256, 1, 0),
                                         (0, 0, 0), (512, 1, 1), (256, 1, 1)])
@pytest.mark.parametrize("half", [False, True])
def test_gemm_integer_matches_reference(dot, vnni, u8, half):
    """gemm_int.cl's integer product (each INT_DOT: 512- and 256-bit pmaddwd, portable C; with
    INT_VNNI, vpdpwssd where the CPU has it; INT_U8: vpdpbusd of u8 rows, quant_int's folded
    bias) with float and half storage against numpy's int64 sums through fixed_point.mbqm: an
    odd K, a last row tile and a last panel that are partial, a second work-item dimension of
    panels, the extremes of int8 activations less a zero point (-255 .. 255; with INT_U8 the
    int8 range less a zero point of -5 and of uint8 less 200) and of int8 weights."""
    cl = pytest.importorskip("pyopencl", reason="pyopencl is not installed")
    from edgelite.delegates.opencl import device, quant_int
    from edgelite.interpreter.kernels.fixed_point import mbqm, quantize_multiplier
    dev = device.open_device(None, 1) if _has_device() else pytest.skip("no OpenCL device")
    have = quant_int.int_dot(dev) or 0
    if dot > have:
        pytest.skip(f"INT_DOT {dot}: this device's CPU has pmaddwd up to {have} bits")
    if vnni and not quant_int.vnni(dev, dot):
        pytest.skip(f"INT_VNNI with INT_DOT {dot}: this CPU has no {quant_int.VNNI_FLAGS[dot]}")
    tm, lanes = quant_int.GEMM_TM.get(dot, 8), max(dot, 256) // 32
    defines = "#define HALF 1\n" * half + f"#define SUFFIX _0\n#define TM {tm}\n" \
        f"#define INT_DOT {dot}\n#define INT_VNNI {vnni}\n#define INT_U8 {u8}\n"
    prog = cl.Program(dev.context, dev.target + defines + device._text("common")
                      + device._text("gemm_int")).build()
    rng = np.random.default_rng(dot + half)
    m, k, n = 3 * tm + 5, 37, 3 * 2 * lanes + 5
    a = rng.integers(-255, 256, (m, k))
    a[0], a[1] = 255, -255
    off = 0
    if u8:  # stored q - zero point: int8 rows of zero point -5, two uint8 ones of zero point 200
        zero, lowest = (-5, -128) if half else (200, 0)
        off = zero - lowest
        a = rng.integers(lowest, lowest + 256, (m, k)) - zero
        a[0], a[1] = lowest - zero, lowest + 255 - zero
    w = rng.integers(-128, 128, (k, n))
    w[:, 0], w[:, 1] = -128, 127
    reals = np.exp2(rng.uniform(-14, -6, n))
    reals[:3] = 1.5, 0.75, 0.6  # left shift 1, none, none (the rest shift right)
    pairs = [quantize_multiplier(float(r)) for r in reals]
    rq = quant_int.Requant(rng.integers(-5000, 5000, n).astype(np.int32),
                           np.array([p[0] for p in pairs], np.int32),
                           np.array([p[1] for p in pairs], np.int32), -300.0, 300.0)
    wp, rows = quant_int._quads_packed(w.astype(np.float32), rq, lanes, off) if u8 else \
        quant_int._pairs_packed(w.astype(np.float32), rq, lanes)
    store = np.float16 if half else np.float32
    mf = cl.mem_flags
    bufs = [cl.Buffer(dev.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
            for x in (a.astype(store), wp, rows)]
    out = np.empty((m, n), store)
    dst = cl.Buffer(dev.context, mf.WRITE_ONLY, out.nbytes)
    panels = -(-n // (2 * lanes))
    prog.gemm_integer_0(dev.queue, (-(-m // tm), 2), (1, 1), *bufs, dst, np.int32(m),
                        np.int32(k), np.int32(n), np.int32(-(-panels // 2)), np.float32(rq.lo),
                        np.float32(rq.hi), np.int32(off))
    cl.enqueue_copy(dev.queue, out, dst)
    want = np.clip(mbqm(a @ w + rq.bias, rq.multiplier.astype(np.int64),
                        rq.shift.astype(np.int64)), rq.lo, rq.hi)
    np.testing.assert_array_equal(out.astype(np.int64), want)
    assert (want == rq.hi).any() and (want == rq.lo).any() and (np.abs(want) < 250).mean() > 0.5
    assert (rq.shift > 0).any() and (rq.shift == 0).any() and (rq.shift < 0).any()


def test_integer_kernels_use_32_bit_integer_arithmetic():
    """Timing-free guards of the integer path's speed: requantization's product of two
    sign-extended int32 (one vpmuldq a pair; not mul_hi, PoCL's five-vpmulld routine: 1.7x
    slower on shallow 1x1 convolutions), the 1x1 products with int32 accumulators of pmaddwd
    pairs (gemm_int.cl), its clamp on integers."""
    from edgelite.delegates.opencl import device
    common = device._text("common")
    block = common[common.index("#define MBQM_DEF"):common.index("#define REQUANT_DEF")]
    assert "convert_##LT(x) * convert_##LT(m)" in block and "mul_hi" not in block, block
    gemm = device._text("gemm_int")
    assert "__builtin_ia32_pmaddwd512" in gemm and "__builtin_ia32_pmaddwd256" in gemm
    assert "__builtin_ia32_vpdpbusd512" in gemm and "__builtin_ia32_vpdpbusd256" in gemm
    loop = gemm.split("IW_ acc[TM][2]")[1].split("__global const int* r =")[0]
    assert "float" not in loop and "DOT(acc" in loop, loop
    assert "clamp(CAT(mbqm, LANES)" in gemm


def test_u8_offset_takes_the_unsigned_product_only_where_exact(monkeypatch):
    """quant_int.u8_offset: vpdpbusd (INT_U8) for int8 weights on a VNNI CPU, the offset that
    makes stored q - zero point unsigned (int8: zero point + 128, uint8: the zero point);
    weights past int8 (uint8 weights less their zero point) and EDGELITE_OPENCL_U8=0 keep the
    int16 pairs."""
    pytest.importorskip("pyopencl", reason="pyopencl is not installed")
    from types import SimpleNamespace

    from edgelite.delegates.opencl import device, quant_int
    dev = device.open_device(None, 1) if _has_device() else pytest.skip("no OpenCL device")
    dot = quant_int.int_dot(dev)
    if not dot or not quant_int.vnni(dev, dot):
        pytest.skip("this device's CPU has no VNNI of pmaddwd's width")

    def tensor(type_name, zero):
        q = SimpleNamespace(zero_point=np.array([zero]))
        return SimpleNamespace(host=SimpleNamespace(type_name=type_name, quantization=q))
    w = np.array([[-128.0, 127.0]])
    assert quant_int.u8_offset(dev, dot, tensor("int8", -5), w) == 123
    assert quant_int.u8_offset(dev, dot, tensor("uint8", 200), w) == 200
    assert quant_int.u8_offset(dev, dot, tensor("int8", 0), w + [[0, 1]]) is None
    assert quant_int.u8_offset(dev, dot, tensor("int8", 0), w - 1) is None
    monkeypatch.setenv("EDGELITE_OPENCL_U8", "0")
    assert quant_int.u8_offset(dev, dot, tensor("int8", -5), w) is None


def test_okay_nabu_int8_integer_is_bit_exact(models_dir):
    """The streaming wake-word detector (int8, state in resource variables): its convolutions,
    depthwise convolutions and FULLY_CONNECTED on the device with integer kernels, the ops
    without one (STRIDED_SLICE, CONCATENATION, SPLIT_V, LOGISTIC, QUANTIZE, the variables) on
    the CPU, each with its reason; 36 streaming steps equal BUILTIN_REF's (and move)."""
    path = models_dir / "mwk_okay_nabu.tflite"
    delegate = _delegate(int8="integer")
    it = Interpreter(model_path=str(path), experimental_delegates=[delegate])
    it.allocate_tensors()
    where = placement(it)
    on = {p["op"] for p in where if p["where"] == delegate.name}
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"} <= on, where
    assert all(p["reason"] for p in where if p["where"] == "CPU"), where
    ref = _reference(path)
    d, o = it.get_input_details()[0], it.get_output_details()[0]
    rng = np.random.default_rng(3)
    seen = set()
    n = int(np.prod(d["shape"]))
    for step in range(36):  # noise, tones, then silence (-128): noise alone always gives 0
        x = [rng.integers(-128, 128, n), np.sin(np.arange(n) * (0.1 + step % 12)) * 127,
             np.full(n, -128)][step // 12]
        x = np.clip(x, -128, 127).astype(d["dtype"]).reshape(d["shape"])
        for r in (it, ref):
            r.set_tensor(d["index"], x)
            r.invoke()
        ours = it.get_tensor(o["index"])
        np.testing.assert_array_equal(ours, ref.get_tensor(o["index"]))
        seen.add(ours.tobytes())
    assert len(seen) > 1  # the state moves the output


@pytest.mark.parametrize("depth", [2048, 3000])
def test_deep_fully_connected_runs_within_the_private_rows(depth):
    """An int8 FULLY_CONNECTED deeper than gemm_int.cl's private rows (KMAX = 2048) takes the
    float kernel (sums checked below 2^24), one within them the integer product: both equal
    BUILTIN_REF (a depth of 3072 overran the rows and crashed PoCL: ConvNeXt-Tiny int8)."""
    from edgelite.delegates.opencl import quant_int
    from tests.opmodel import In, Out, op_model, run_interpreter, run_litert
    rng = np.random.default_rng(depth)
    units = 40
    w = rng.integers(-3, 4, (units, depth)).astype(np.int8)
    bias = rng.integers(-2000, 2000, units).astype(np.int32)
    model = op_model("FULLY_CONNECTED", [In((2, depth), "int8", (0.05, 3)), w, bias],
                     [Out((2, units), "int8", (0.5, -7))],
                     const_quant={1: ([0.01] * units, [0] * units, 0),
                                  2: ([0.0005] * units, [0] * units, 0)})
    x = rng.integers(-128, 128, (2, depth)).astype(np.int8)
    delegate = _delegate(int8="integer")
    it = Interpreter(model_content=model, experimental_delegates=[delegate])
    ours = run_interpreter(it, [x])
    assert [p["where"] for p in placement(it)] == [delegate.name]
    kernels = [name for _, name, _ in it._runtime.plans[0].steps[0][0].labels]
    on_gemm_int = quant_int.int_dot(delegate.dev) is not None and depth <= quant_int.KMAX
    assert kernels[0].startswith("gemm_integer") == on_gemm_int, kernels
    theirs = run_litert(model, [x])
    np.testing.assert_array_equal(ours[0], theirs[0])
    assert len(np.unique(theirs[0])) > 10


def test_mobilenet_v2_int8_integer_batch_of_two(models_dir):
    """The fused integer launches (a depthwise inside its product, whole blocks, residual ADDs
    in the epilogue) index every image of a batch: MobileNetV2 int8 resized to 2 images (the
    reference input and a random one) equals BUILTIN_REF's, logits too, in the same 34
    launches."""
    from edgelite.delegates.opencl.quant_int import int_dot
    path = models_dir / "mobilenet_v2_int8.tflite"
    delegate = _delegate(int8="integer")
    it = Interpreter(model_path=str(path), experimental_delegates=[delegate])
    d = it.get_input_details()[0]
    shape = [2] + list(d["shape"][1:])
    it.resize_tensor_input(d["index"], shape)
    it.allocate_tensors()
    if int_dot(delegate.dev) is not None:
        assert it._runtime.plans[0].steps[0][0].launches == 34
    ref = _reference(path, experimental_preserve_all_tensors=True)
    ref.resize_tensor_input(d["index"], shape)
    ref.allocate_tensors()
    x = np.concatenate(_mobilenet_inputs(models_dir, d["shape"])[:2])
    for r in (it, ref):
        r.set_tensor(d["index"], x)
        r.invoke()
    logits = next(t["index"] for t in ref.get_tensor_details()
                  if list(t["shape"]) == [2, 1000]
                  and t["index"] != ref.get_output_details()[0]["index"])
    for k in (logits, ref.get_output_details()[0]["index"]):
        np.testing.assert_array_equal(it.get_tensor(k), ref.get_tensor(k))
    ours = it.get_tensor(logits).astype(np.int32)
    # random weights: the logits barely depend on the image, but they do
    assert (ours[0] != ours[1]).any() and ours.max() - ours.min() > 100


@pytest.mark.parametrize("env,launches", [
    ({"EDGELITE_OPENCL_INT_DW": "split"}, 48), ({"EDGELITE_OPENCL_INT_BLOCK": "0"}, 37),
    ({"EDGELITE_OPENCL_INT_RES": "0"}, 44), ({"EDGELITE_OPENCL_U8": "0"}, 34),
    ({"EDGELITE_OPENCL_INT_BLOCK_MIN": "0"}, 32)], ids=lambda v: str(v))
def test_mobilenet_v2_int8_integer_switches_stay_bit_exact(models_dir, monkeypatch, env,
                                                           launches):
    """Each of the integer path's switches (the A/B of bench_opencl_int8.py) leaves MobileNetV2
    int8 bit-exact to BUILTIN_REF; the fused launches they turn off are where they were: the
    split depthwise, unfused blocks and residual ADDs, and the blocks at every size
    (INT_BLOCK_MIN 0 reaches the wide blocks), which nothing else runs."""
    from edgelite.delegates.opencl.quant_int import int_dot
    path = models_dir / "mobilenet_v2_int8.tflite"
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    delegate = _delegate(int8="integer")
    it = Interpreter(model_path=str(path), experimental_delegates=[delegate])
    it.allocate_tensors()
    if int_dot(delegate.dev) is not None:
        assert it._runtime.plans[0].steps[0][0].launches == launches
    ref, d = _reference(path), it.get_input_details()[0]
    x = _mobilenet_inputs(models_dir, d["shape"])[0]
    for r in (it, ref):
        r.set_tensor(d["index"], x)
        r.invoke()
    o = it.get_output_details()[0]["index"]
    np.testing.assert_array_equal(it.get_tensor(o), ref.get_tensor(o))
