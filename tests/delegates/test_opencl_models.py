"""Whole models on the OpenCL delegate against edgelite's CPU interpreter: every float model of
the shared models, and MobileNetV2 converted from ONNX by edgelite's converter; transfers only at
partition edges; a graph split around an op the delegate lacks."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from edgelite.interpreter import Interpreter
from edgelite.interpreter.delegation import placement
from tests.delegates.compare import TOLERANCE, assert_matches
from tests.delegates.graphs import Graph

FLOAT_MODELS = {"digits_cnn": "digits_cnn_tfl", "mobilenet_v2": "mobilenet_v2",
                "mp_face_detection": "mp_face_detection", "mp_hand_landmark": "mp_hand_landmark"}


def _run(content_or_path, x, delegates=()):
    kw = {"model_content": content_or_path} if isinstance(content_or_path, bytes) \
        else {"model_path": str(content_or_path)}
    it = Interpreter(**kw, experimental_delegates=list(delegates))
    it.allocate_tensors()
    d = it.get_input_details()[0]
    it.set_tensor(d["index"], np.asarray(x).reshape(d["shape"]).astype(d["dtype"]))
    it.invoke()
    return it, [it.get_tensor(o["index"]).copy() for o in it.get_output_details()]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", sorted(FLOAT_MODELS))
def test_float_model_on_opencl_matches_cpu(name, precision, models_dir, opencl, caplog):
    delegate = opencl(precision)
    path = models_dir / f"{name}.tflite"
    x = np.load(models_dir / "refs" / f"{FLOAT_MODELS[name]}.npz")["input_0"]
    _, ref = _run(path, x)
    before = delegate.stats.to_device, delegate.stats.to_host
    with caplog.at_level(logging.INFO, logger="edgelite.delegates"):
        it, ours = _run(path, x, [delegate])
    assert_matches(ours, ref, TOLERANCE[precision])
    where = [p for p in placement(it) if p["where"] != "folded"]
    assert all(p["where"] == delegate.name for p in where), \
        [(p["op"], p["reason"]) for p in where if p["where"] != delegate.name]
    assert f"{len(where)} ops in 1 partitions on OpenCL" in caplog.text
    # One partition: the model's inputs go in, its outputs come out, nothing else.
    moved = delegate.stats.to_device - before[0], delegate.stats.to_host - before[1]
    assert moved == (len(it.get_input_details()), len(it.get_output_details()))


@pytest.mark.parametrize("precision, weights", [("fp32", "fp32"), ("fp16", "fp32"),
                                                ("fp16", "fp16")])
def test_converted_mobilenet_v2_on_opencl_matches_cpu(precision, weights, models_dir, opencl):
    """Random-weight MobileNetV2 amplifies rounding: with half weights it measured 0.96-1.18e-2
    (3 inputs) before biases stayed float32, half weights got per-channel scales and the
    model's input stayed float32 (0.70-0.80e-2 after, on PoCL)."""
    from edgelite.delegates import load_delegate
    from tests.converter.test_convert_models import converted
    opencl(precision)  # skips without a device
    delegate = load_delegate("opencl", {"precision": precision, "weights": weights})
    content = converted(models_dir, "syn_mobilenetv2").content
    shape = Interpreter(model_content=content).get_input_details()[0]["shape"]
    for seed in range(3):
        x = np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)
        _, ref = _run(content, x)
        it, ours = _run(content, x, [delegate])
        assert_matches(ours, ref, TOLERANCE[precision])
    assert all(p["where"] == delegate.name for p in placement(it) if p["where"] != "folded")


def test_tiny_half_weights_keep_their_precision(opencl):
    """Weights below half's normal range (|w| < 6.1e-5, as BN folding can leave) are stored
    over a per-channel scale, not as half subnormals (a few significant bits at 1e-6)."""
    rng = np.random.default_rng(4)
    g = Graph()
    x = g.input((1, 6, 6, 8))
    w = rng.standard_normal((12, 3, 3, 8)).astype(np.float32) * np.float32(1e-6)
    g.output(g.op("CONV_2D", [x, g.const(w), g.const(np.zeros(12, np.float32))], padding=0,
                  stride_h=1, stride_w=1))
    content = g.save()
    xv = rng.standard_normal((1, 6, 6, 8)).astype(np.float32) * np.float32(1e3)
    _, ref = _run(content, xv)
    _, ours = _run(content, xv, [opencl("fp16")])
    assert_matches(ours, ref, TOLERANCE["fp16"])


def _split_graph() -> bytes:
    """conv -> relu6 -> FLOOR (no OpenCL kernel) -> depthwise -> add -> mean."""
    rng = np.random.default_rng(1)
    g = Graph()
    x = g.input((1, 10, 12, 8))
    w = rng.standard_normal((16, 3, 3, 8)).astype(np.float32) * 0.3
    y = g.op("CONV_2D", [x, g.const(w), g.const(np.zeros(16, np.float32))], padding=0,
             stride_h=1, stride_w=1, fused_activation_function=3)
    y = g.op("FLOOR", [g.op("MUL", [y, g.const(np.float32([3.0]))])])
    dw = rng.standard_normal((1, 3, 3, 16)).astype(np.float32)
    z = g.op("DEPTHWISE_CONV_2D", [y, g.const(dw), g.const(np.ones(16, np.float32))],
             padding=0, stride_h=2, stride_w=2, depth_multiplier=1)
    z = g.op("ADD", [z, g.const(rng.standard_normal(16).astype(np.float32))])
    g.output(g.op("MEAN", [z, g.const(np.int32([1, 2]))], keep_dims=False))
    return g.save()


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_unsupported_op_in_the_middle_splits_in_two_and_transfers_at_the_edges(precision,
                                                                               opencl):
    delegate = opencl(precision)
    content = _split_graph()
    x = np.random.default_rng(2).standard_normal((1, 10, 12, 8)).astype(np.float32)
    _, ref = _run(content, x)
    stats = delegate.stats
    before = (stats.to_device, stats.to_host, stats.bytes_to_device)
    it, ours = _run(content, x, [delegate])
    where = placement(it)
    assert [p["where"] for p in where] == ["OpenCL"] * 2 + ["CPU"] + ["OpenCL"] * 3
    assert [p["partition"] for p in where] == [0, 0, None, 1, 1, 1]
    assert "FLOOR has no OpenCL kernel" in where[2]["reason"]
    # Partition 0: x in, MUL's output out; partition 1: FLOOR's output in, MEAN's out.
    assert (stats.to_device - before[0], stats.to_host - before[1]) == (2, 2)
    assert stats.bytes_to_device - before[2] == (10 * 12 * 8 + 10 * 12 * 16) * 4
    if precision == "fp32":  # FLOOR turns a rounding difference into a whole unit
        assert_matches(ours, ref, TOLERANCE[precision])
    it.invoke()
    assert (stats.to_device - before[0], stats.to_host - before[1]) == (4, 4)


def test_no_opencl_is_a_clear_error(monkeypatch):
    """No platform or no pyopencl: load_delegate raises DelegateError naming the fix."""
    import builtins

    from edgelite.delegates import DelegateError, load_delegate
    from edgelite.delegates.opencl import device
    real_import = builtins.__import__

    def no_pyopencl(name, *args, **kwargs):
        if name == "pyopencl" or name.startswith("pyopencl."):
            raise ImportError("blocked")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_pyopencl)
    with pytest.raises(DelegateError, match="pip install 'edgelite\\[opencl\\]'"):
        load_delegate("opencl")
    monkeypatch.setattr(builtins, "__import__", real_import)

    class NoPlatforms:
        class device_type:
            GPU, CPU, ACCELERATOR = 4, 2, 8

        @staticmethod
        def get_platforms():
            raise RuntimeError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")
    monkeypatch.setattr(device, "_import_cl", lambda: NoPlatforms)
    with pytest.raises(DelegateError, match="no OpenCL platform found"):
        load_delegate("opencl")
    with pytest.raises(DelegateError, match="precision"):
        load_delegate("opencl", {"precision": "int4"})


def test_device_choice_and_program_reuse(opencl, monkeypatch):
    """Devices by kind, index, name or PYOPENCL_CTX; a second interpreter of a model builds no
    program (one context and one program cache per device and process)."""
    import pyopencl as cl

    from edgelite.delegates import DelegateError, load_delegate
    from edgelite.delegates.opencl.device import _added, choose
    delegate = opencl("fp32")
    dev = delegate.dev.device
    kind = "gpu" if dev.type & cl.device_type.GPU else "cpu"
    assert choose(cl, kind) == dev or dev.type & cl.device_type.GPU
    assert choose(cl, dev.name[:5]).name == dev.name
    # a platform by its version (pip's PoCL and a system one share the platform's name)
    version = dev.platform.version.split(" Linux")[0].split("OpenCL 3.0 ")[-1]
    assert choose(cl, version).platform.version == dev.platform.version, version
    monkeypatch.setenv("PYOPENCL_CTX", "0:0")
    # PoCL's "basic" device (device._first_listing adds it for one thread) counts last
    first = sorted(cl.get_platforms()[0].get_devices(), key=_added)[0]
    assert choose(cl).int_ptr == first.int_ptr and not _added(first)
    with pytest.raises(DelegateError, match="no OpenCL device matches 'no such device'"):
        load_delegate("opencl", {"device": "no such device"})
    content = _split_graph()
    x = np.zeros((1, 10, 12, 8), np.float32)
    _run(content, x, [delegate])
    builds = delegate.dev.builds
    again = load_delegate("opencl", {"precision": "fp32"})
    assert again.dev is delegate.dev
    _run(content, x, [again])
    assert delegate.dev.builds == builds


def test_resize_reuses_the_packed_weights(opencl):
    """A resized input prepares the partition again: same results as the CPU, and the
    weights are not packed and uploaded a second time."""
    rng = np.random.default_rng(3)
    g = Graph()
    x = g.input((1, 8, 8, 6))
    y = g.op("CONV_2D", [x, g.const(rng.standard_normal((24, 3, 3, 6)).astype(np.float32)),
                         g.const(np.zeros(24, np.float32))], padding=0, stride_h=1, stride_w=1)
    y = g.op("DEPTHWISE_CONV_2D", [y, g.const(rng.standard_normal((1, 3, 3, 24)).astype(
        np.float32)), g.const(np.ones(24, np.float32))], padding=0, stride_h=2, stride_w=2,
        depth_multiplier=1)
    g.output(g.op("MEAN", [y, g.const(np.int32([1, 2]))], keep_dims=False))
    content = g.save()
    delegate = opencl("fp32")
    it = Interpreter(model_content=content, experimental_delegates=[delegate])
    uploaded = []
    for shape in ((1, 8, 8, 6), (1, 13, 11, 6)):
        it.resize_tensor_input(it.get_input_details()[0]["index"], shape)
        it.allocate_tensors()
        uploaded.append(sum(getattr(run, "uploaded", 0)
                            for run, _ in it._runtime.plans[0].steps))
        xv = rng.standard_normal(shape).astype(np.float32)
        it.set_tensor(it.get_input_details()[0]["index"], xv)
        it.invoke()
        ref = Interpreter(model_content=content)
        ref.resize_tensor_input(ref.get_input_details()[0]["index"], shape)
        ref.allocate_tensors()
        ref.set_tensor(ref.get_input_details()[0]["index"], xv)
        ref.invoke()
        out = it.get_output_details()[0]["index"]
        assert_matches([it.get_tensor(out)], [ref.get_tensor(out)], TOLERANCE["fp32"])
    assert uploaded[0] >= 24 * 9 * 6 * 4 and uploaded[1] < 64, uploaded


def test_a_failing_kernel_is_named(opencl):
    """An error inside a partition names the operator whose kernel failed, not the
    partition's first one."""
    from edgelite.delegates.opencl.graph import PartitionError
    delegate = opencl("fp32")
    it, _ = _run(_split_graph(), np.zeros((1, 10, 12, 8), np.float32), [delegate])
    run = next(r for r, _ in it._runtime.plans[0].steps if getattr(r, "calls", None)
               and len(r.calls) == 3)  # partition 1: depthwise, add, mean
    kernel, gsize, _ = run.calls[2]
    run.calls[2] = (kernel, (7,) + gsize[1:], (2,) + (1,) * (len(gsize) - 1))  # 7 % 2 != 0
    with pytest.raises(PartitionError, match=r"operator 5 \(MEAN\) on OpenCL: kernel "
                                             r"reduce_mid failed"):
        it.invoke()
