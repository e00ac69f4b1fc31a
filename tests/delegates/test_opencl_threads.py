"""Without a "threads" option the OpenCL delegate's CPU device runs as many compute units (PoCL:
worker threads) as the interpreter's num_threads (1 by default, as its BLAS; issue 17); a
partition of small convolutions runs on the calling thread whatever the count (device.for_work)."""
from __future__ import annotations

import numpy as np
import pytest

from .graphs import Graph
from .test_opencl_cpu_path import _pocl_cpu


SHAPE = (1, 20, 22, 24)  # 18 x 20 x 40 outputs of 216 taps: 3.1M multiply-adds


def _model(shape=SHAPE) -> bytes:
    g = Graph()
    x = g.input(shape)
    w = np.random.default_rng(0).standard_normal((40, 3, 3, 24)).astype(np.float32)
    g.output(g.op("CONV_2D", [x, g.const(w), g.const(np.ones(40, np.float32))], padding=0,
                  stride_h=1, stride_w=1, fused_activation_function=1))
    return g.save()


def _run(delegate, num_threads, shape=SHAPE):
    from edgelite.interpreter import Interpreter
    it = Interpreter(model_content=_model(shape), experimental_delegates=[delegate],
                     num_threads=num_threads)
    it.allocate_tensors()
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it, it.get_tensor(it.get_output_details()[0]["index"]).copy()


@pytest.mark.opencl
def test_the_cpu_device_follows_num_threads():
    from edgelite.delegates import load_delegate
    full = _pocl_cpu().dev
    if full.device.max_compute_units < 2:
        pytest.skip("PoCL's CPU device has one compute unit here")
    d = load_delegate("opencl")
    outs = {}
    for num_threads, units in ((None, 1), (-1, 1), (1, 1), (2, 2)):
        it, outs[num_threads] = _run(d, num_threads)
        dev = d.device_for(it._runtime)
        assert dev.threads == units, num_threads
        assert dev.device.max_compute_units == units
        assert dev.first_launched, "the partition did not run on that device"
    assert d.dev is full                  # the delegate's own device stays all of them
    np.testing.assert_array_equal(outs[None], outs[2])
    # a "threads" option wins over num_threads
    two = load_delegate("opencl", {"threads": 2})
    it, _ = _run(two, 1)
    assert two.device_for(it._runtime) is two.dev and two.dev.threads == 2


@pytest.mark.opencl
def test_small_convolutions_run_on_the_calling_thread_at_any_count():
    """At 2 threads a partition whose convolutions average under SPLIT_MIN_MACS multiply-adds
    runs on PoCL's basic device (its tens-of-microseconds kernels lost to the workers' wake-ups:
    BlazeFace 1.04 vs 0.76 ms an invoke, wall and CPU), the same values; a larger one keeps the
    workers."""
    from edgelite.delegates import load_delegate
    from edgelite.delegates.opencl.device import SPLIT_MIN_MACS
    full = _pocl_cpu().dev
    if full.device.max_compute_units < 2:
        pytest.skip("PoCL's CPU device has one compute unit here")
    small = (1, 9, 11, 24)  # 7 x 9 x 40 x 216: 0.54M
    two = load_delegate("opencl", {"threads": 2})
    it, out2 = _run(two, 2, small)
    assert 7 * 9 * 40 * 216 < SPLIT_MIN_MACS <= 18 * 20 * 40 * 216
    step = next(run for run, _ in it._runtime.plans[0].steps if getattr(run, "calls", None))
    context = step.calls[0][0].context
    one = load_delegate("opencl", {"threads": 1})
    it1, out1 = _run(one, 1, small)
    assert context.devices[0].name.startswith("basic")
    assert one.dev.name.startswith("basic")
    np.testing.assert_array_equal(out1, out2)
    it, _ = _run(two, 2)  # 3.1M multiply-adds: PoCL's workers
    step = next(run for run, _ in it._runtime.plans[0].steps if getattr(run, "calls", None))
    assert step.calls[0][0].context.devices[0].name.startswith("pthread")


def test_macs_per_node_is_the_interpreters_count():
    """device.macs_per_node counts each node's multiply-adds as threads.GEMM_SIZE does: a
    TRANSPOSE_CONV's weights are its input 1 (input 2 is the activation: taking it for the
    weights gave 19.7M instead of 3.6M for 28x28x32 -> 56x56x16, 3x3)."""
    from types import SimpleNamespace as N

    from edgelite.delegates.opencl.device import macs_per_node

    def t(i, shape):
        return N(index=i, shape=shape)
    node = N(op="TRANSPOSE_CONV", inputs=[t(0, (4,)), t(1, (16, 3, 3, 32)), t(2, (1, 28, 28, 32))],
             outputs=[t(3, (1, 56, 56, 16))])
    assert macs_per_node([node]) == 28 * 28 * 32 * 16 * 3 * 3
    conv = N(op="CONV_2D", inputs=[t(0, (1, 9, 9, 8)), t(1, (16, 3, 3, 8)), t(2, (16,))],
             outputs=[t(3, (1, 9, 9, 16))])
    assert macs_per_node([node, conv]) == (28 * 28 * 32 * 16 * 9 + 81 * 16 * 72) / 2
