"""The OpenCL delegate: partitions of a model run as OpenCL kernels (pyopencl), on a GPU or any
OpenCL device, PoCL's CPU device included (there it is edgelite's compiled CPU path).

    load_delegate("opencl", {"precision": "fp32" | "fp16", "weights": (as precision) | "fp32",
                             "device": None | "gpu" | "cpu" |
                             index | "platform:device" | part of a name,
                             "threads": None | n, "int8": "cpu" | "dequantize",
                             "hybrid": "dequantize" | "cpu",
                             "max_partitions": 0, "min_nodes_per_partition": 1})

Tensors stay on the device inside a partition; weights are packed and uploaded once, when the
interpreter prepares (and kept when it prepares again, after resize_tensor_input). Before its
kernels are built a partition's nodes are fused (fuse.py): RELUs, residual ADDs, zero PADs and,
on CPU devices, depthwise convolutions fold into the convolution next to them, so one invoke
is a few dozen launches and one wait; `benchmarks/bench_opencl.py --profile` times each launch.

With "fp16" every tensor is stored as half (vload_half / vstore_half, which every device has)
and arithmetic stays in float32: half arithmetic would need cl_khr_fp16. Three things stay
float32 there, as GPU runtimes keep them: biases, a per-output-channel scale of half weights
(helpers.half_scales: the weights are stored over it), and a partition input read only by
convolutions (the model's image, not rounded before the first layer).
"weights": "fp32" keeps weights in float32 under fp16 activations (see tests/delegates).
"threads" (CPU devices): the compute units kernels run on, a sub-device of that many (PoCL runs
a worker thread per compute unit; default the interpreter's num_threads, all of them outside an
interpreter; POCL_MAX_PTHREAD_COUNT caps them). PoCL 3.0 runs a sub-device's kernels on all of
its workers, so on PoCL one thread is its "basic" device (kernels on the invoking thread), and
the first delegate of a process with "threads" of 2 or more sets PoCL's worker pool (device.py:
_first_listing); the delegates after it share that pool.
"int8": "dequantize" runs int8 / uint8 ops as float ops on their real values, weights
dequantized once (quant.py: outputs within a few steps of BUILTIN_REF's); "integer" runs
CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, ADD, MEAN, MAX_POOL_2D and reshapes with TFLite's
integer arithmetic (quant_int.py: BUILTIN_REF's outputs bit for bit; other int8 ops stay on the
CPU); the default "cpu" leaves int8 ops to the CPU kernels (an int8 model whose other ops sit
between its convolutions would split into many partitions: benchmarks/README.md).
"hybrid": "dequantize" (the default) runs hybrid (dynamic-range: float activations, int8
weights) CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED as float ops on weights dequantized once
at prepare, as GPU delegates do (quant.py: is_hybrid, hybrid_reason; accuracy against LiteRT's
integer hybrid kernels in tests/delegates/test_opencl_hybrid.py); "cpu" leaves them to the CPU.
"""
from __future__ import annotations

import weakref

from edgelite.interpreter.delegation import Delegate, DelegateError, Partition

from .device import for_work, open_device
from .fuse import plan as plan_fusions
from .graph import Builder
from .ops import CUSTOM_OPS, OPS
from .quant import Views, has_quantized, hybrid_reason, is_hybrid
from .quant import reason as int8_reason
from .quant_int import BUILDS as INTEGER_BUILDS
from .quant_int import PARAMETRIZED, IntViews, parameters, plan_integer
from .quant_int import reason as integer_reason

PRECISIONS = ("fp32", "fp16")
INT8 = ("cpu", "dequantize", "integer")
HYBRID = ("dequantize", "cpu")
# an int8 mode -> why a node cannot run in it, the float views its builders see
_INT8_MODES = {"dequantize": (int8_reason, Views), "integer": (integer_reason, IntViews)}


class OpenCLDelegate(Delegate):
    name = "OpenCL"

    def __init__(self, options: dict | None = None):
        super().__init__(options)
        unknown = set(self.options) - {"precision", "weights", "device", "threads", "int8",
                                       "hybrid", "max_partitions", "min_nodes_per_partition"}
        if unknown:
            raise DelegateError(f"unknown option(s) {sorted(unknown)} for the opencl delegate "
                                "(it takes precision, weights, device, threads, int8, hybrid, "
                                "max_partitions, min_nodes_per_partition)")
        self.int8 = str(self.options.get("int8", "cpu")).lower()
        if self.int8 not in INT8:
            raise DelegateError(f"int8 {self.int8!r}: use one of {INT8}")
        self.hybrid = str(self.options.get("hybrid", "dequantize")).lower()
        if self.hybrid not in HYBRID:
            raise DelegateError(f"hybrid {self.hybrid!r}: use one of {HYBRID}")
        self.precision = str(self.options.get("precision", "fp32")).lower()
        self.weights = str(self.options.get("weights", self.precision)).lower()
        for what, value in (("precision", self.precision), ("weights", self.weights)):
            if value not in PRECISIONS:
                raise DelegateError(f"{what} {value!r}: use one of {PRECISIONS}")
        self.dev = open_device(self.options.get("device"), self.options.get("threads"))
        # interpreter runtime -> its packed weights, reused when prepare runs again (resize)
        self._packed = weakref.WeakKeyDictionary()

    def device_for(self, runtime):
        """The device an interpreter's partitions run on: without a "threads" option, a CPU
        device of as many compute units (PoCL: worker threads) as its num_threads (1 by
        default, as its BLAS); `self.dev` outside an interpreter."""
        threads = getattr(runtime, "num_threads", None)
        if self.options.get("threads") is not None or threads is None or not self.dev.is_cpu:
            return self.dev
        return open_device(self.options.get("device"), threads)

    def device_name(self) -> str:
        return f"OpenCL ({self.dev.name}, {self.precision})"

    def _hybrid(self, node) -> bool:
        return self.hybrid == "dequantize" and is_hybrid(node)

    def support(self, node) -> str | None:
        if self._hybrid(node):  # float op on dequantized weights (quant.py)
            why = hybrid_reason(node)
            if why is not None:
                return why
            node = Views().node(node)
        elif self.int8 != "cpu" and not node.is_custom and has_quantized(node):
            reason, views = _INT8_MODES[self.int8]
            why = reason(node, self.dev) if self.int8 == "integer" else reason(node)
            if why is not None:
                return why
            node = views().node(node)
        entry = (CUSTOM_OPS if node.is_custom else OPS).get(node.op)
        if entry is None and node.is_custom:
            return f"custom op {node.op}"
        if entry is None:
            return f"{node.op} has no OpenCL kernel"
        for t in node.outputs:
            if any(d == 0 for d in t.shape):
                return "an empty tensor"
        return entry[0](node)

    def prepare(self, partition: Partition):
        runtime = partition.nodes[0].runtime
        dev = for_work(self.device_for(runtime), partition.nodes, self.options.get("device"))
        # packed weights are buffers of one device's context: kept per interpreter and device
        # (a resize may move a partition to the other PoCL device, device.for_work)
        packed = self._packed.setdefault(runtime, {}).setdefault(dev, {}) \
            if runtime is not None else None
        g = Builder(dev, self.precision == "fp16", self.stats,
                    half_weights=self.weights == "fp16", packed=packed)
        nodes, inputs, outputs = partition.nodes, partition.inputs, partition.outputs
        if any(self._hybrid(n) for n in nodes):  # weights dequantized once (quant.py)
            hybrid = Views()
            nodes = [hybrid.node(n) if self._hybrid(n) else n for n in nodes]
        if self.int8 == "integer":  # int8 tensors as q - zero point (quant_int.py)
            g.requant = {n.index: parameters(n) for n in nodes
                         if n.op in PARAMETRIZED and has_quantized(n)}
        if self.int8 != "cpu":  # int8 tensors as their real values (quant.py) or q - zp
            views = _INT8_MODES[self.int8][1]()
            nodes = [views.node(n) for n in nodes]
            inputs = [views.tensor(t) for t in inputs]
            outputs = [views.tensor(t) for t in outputs]
        g.fusion = plan_fusions(nodes, outputs, self.dev.is_cpu, integer=set(g.requant))
        if self.int8 == "integer":  # integer blocks and residual ADDs (quant_int.py)
            plan_integer(g, nodes, outputs)
        g.fused = g.fusion.clamps
        for node, cpu_run in zip(nodes, partition.cpu_runs):
            g.node, g.cpu_run = node, cpu_run
            if node.index in g.fusion.skipped:
                continue
            if node.index in g.fusion.aliased:  # its producer clamps: same values, same buffer
                g.alias(node.outputs[0], node.inputs[0])
            elif node.index in g.requant and node.op in INTEGER_BUILDS:
                INTEGER_BUILDS[node.op](node, g)
            else:
                (CUSTOM_OPS if node.is_custom else OPS)[node.op][1](node, g)
        return g.finish(inputs, outputs)


__all__ = ["OpenCLDelegate", "DelegateError"]
