"""One partition on the device: its buffers, its kernel launches, and the step that runs them.

`Builder` is what an op's `build` sees: `tensor(info)` names a tensor's device buffer (bound
after every op is built, once lifetimes are known), `const(array)` uploads a constant now,
`alias(out, inp)` lets a reshape share its input's buffer, `launch(...)` adds a kernel call.
Tensors inside a partition share buffers when their lifetimes do not overlap (greedy best fit);
the partition's inputs and outputs are the only transfers.
"""
from __future__ import annotations

import numpy as np

from edgelite.interpreter.kernels.registry import KernelError

from .fuse import Fusion
from .helpers import half_scales
from .quant import to_device, to_host

# Bytes past every buffer's end: a kernel's last vector may read on (and ignore) up to 15
# values past a tensor whose channels are not a multiple of its vector width.
SLACK = 64


class PartitionError(KernelError, RuntimeError):
    """A partition failed while running: names the operator whose kernel failed (a
    KernelError, so the interpreter passes it on as it is; a RuntimeError, as LiteRT's)."""


def _failure(error, label, labels) -> PartitionError:
    """The error for `error` raised while enqueueing `label`'s kernel, or (label None) while
    moving tensors or waiting for the queue, when the failing kernel is not known."""
    what = f"{type(error).__name__}: {error}"
    if label is not None:
        node, kernel, _ = label
        return PartitionError(f"subgraph {node.subgraph} operator {node.index} ({node.op}) "
                              f"on OpenCL: kernel {kernel} failed: {what}")
    nodes = {n.index: n for n, *_ in labels if n is not None}
    ops = ", ".join(f"{i} ({n.op})" for i, n in sorted(nodes.items()))
    sub = next(iter(nodes.values())).subgraph if nodes else "?"
    return PartitionError(f"subgraph {sub}: an OpenCL partition failed while moving tensors or "
                          f"running (one of operators {ops}): {what}")


class TensorRef:
    """A placeholder for a tensor's device buffer in a launch's arguments."""

    __slots__ = ("index", "wide")

    def __init__(self, index: int, wide: bool = False):
        self.index = index
        self.wide = wide  # the kernel can read it as float32 (IN_F32) under half storage


class Builder:
    def __init__(self, dev, half: bool, stats, half_weights: bool = True, packed=None):
        self.dev = dev
        self.packed_cache = {} if packed is None else packed  # see `packed`
        self.half_weights = half and half_weights
        self.cl = dev.cl
        self.half = half
        self.stats = stats
        self.storage = np.dtype(np.float16 if half else np.float32)
        self.launches: list = []   # (kernel name, program key, global, local, args)
        self.infos: dict = {}      # tensor index -> TensorInfo
        self.alias_of: dict = {}   # tensor index -> tensor index whose buffer it uses
        self.uses: dict = {}       # tensor index -> [first launch, last launch]
        self.constants: list = []  # keeps constant buffers alive
        self.uploaded = 0          # bytes of constants this partition uploaded (not reused)
        self._const_of: dict = {}  # tensor index -> its constant buffer
        self.fusion = Fusion()     # what fuse.py folded together in this partition
        self.fused: dict = {}      # node index -> (lo, hi) narrowing its clamp (fusion.clamps)
        self.requant: dict = {}    # node index -> its integer parameters (quant_int.py)
        self.node = None           # the node being built: named by its launches
        self.cpu_run = None        # its CPU kernel (gather tables are derived from it)
        self.wide: set = set()     # partition inputs kept float32 under half storage
        self._nothing = None       # see `nothing`
        self.compiled = 0          # kernels first launched at prepare (_compile_kernels)

    # -- what ops call -----------------------------------------------------------------------

    def dtype(self, info) -> np.dtype:
        """How a tensor is stored on the device: float32 as the precision says (a partition
        input that only IN_F32 kernels read stays float32), others as is."""
        if info.dtype != np.float32:
            return info.dtype
        return info.dtype if self._root(info.index) in self.wide else self.storage

    def tensor(self, info, wide: bool = False) -> TensorRef:
        """`info`'s device buffer; `wide`: the kernel also reads it as float32 (IN_F32)."""
        root = self._root(info.index)
        self.infos.setdefault(info.index, info)
        use = self.uses.setdefault(root, [len(self.launches), len(self.launches)])
        use[0] = min(use[0], len(self.launches))
        use[1] = max(use[1], len(self.launches))
        return TensorRef(info.index, wide)

    def const(self, array, dtype=None):
        """A read-only device buffer holding `array` (float32 converted to the storage type)."""
        a = np.asarray(array)
        if dtype is not None:
            a = a.astype(dtype)
        elif a.dtype == np.float32 or a.dtype == np.float64:
            a = a.astype(self.storage)
        a = np.ascontiguousarray(a)
        mf = self.cl.mem_flags
        self.uploaded += a.nbytes
        host = np.zeros(a.nbytes + SLACK, np.uint8)
        host[:a.nbytes] = a.reshape(-1).view(np.uint8)
        buf = self.cl.Buffer(self.dev.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=host)
        self.constants.append(buf)
        return buf

    def weights(self, array):
        """A constant that kernels read as weights (half in fp16 unless weights stay float)."""
        return self.const(array, np.float16 if self.half_weights else np.float32)

    def weight_scales(self, w_kn) -> np.ndarray:
        """Per-column scales of weights [K, N] that kernels multiply back (helpers.half_scales):
        ones unless weights are stored as half (and for integer weights, exact in half)."""
        if not self.half_weights or (self.node is not None and self.node.index in self.requant):
            return np.ones(np.shape(w_kn)[-1], np.float32)
        return half_scales(w_kn)

    def packed(self, node, role: str, params: tuple, source: np.ndarray, make):
        """`make()` (weights packed and uploaded), or what it returned when this node of the
        same interpreter was last prepared with the same `params`: resizing an input re-runs
        prepare, and an op's weights do not change with the input's shape. A sample of
        `source` (the weights before packing) guards the reuse."""
        flat = np.asarray(source).reshape(-1)
        sample = flat[::max(flat.size // 4096, 1)].copy()
        key = (node.subgraph, node.index, role, tuple(np.shape(source)), params)
        hit = self.packed_cache.get(key)
        if hit is not None and np.array_equal(hit[0], sample):
            self.constants.extend(b for b in hit[1] if b is not None)
            return hit[1]
        result = make()
        self.packed_cache[key] = (sample, result)
        return result

    def nothing(self):
        """A buffer for a kernel argument that the kernel does not read (no residual)."""
        if self._nothing is None:
            self._nothing = self.const(np.zeros(1, np.float32))
        return self._nothing

    def value(self, info, wide: bool = False):
        """An op's input: its constant buffer (uploaded once) or its device tensor."""
        if info.data is None:
            return self.tensor(info, wide)
        buf = self._const_of.get(info.index)
        if buf is None:
            buf = self._const_of[info.index] = self.const(info.data)
        return buf

    def alias(self, out, inp) -> None:
        """`out` is `inp` reinterpreted (same values, same order): no kernel, no copy."""
        self.infos.setdefault(out.index, out)
        self.infos.setdefault(inp.index, inp)
        root = self._root(inp.index)
        self.alias_of[out.index] = root
        use = self.uses.setdefault(root, [len(self.launches), len(self.launches)])
        if out.index in self.uses:  # merge a lifetime recorded before the alias
            u = self.uses.pop(out.index)
            use[0], use[1] = min(use[0], u[0]), max(use[1], u[1])

    def launch(self, program: str, kernel: str, global_size, local_size, args,
               defines: dict | None = None) -> None:
        defines = dict(defines or {})
        kind = 0 if self.node is None else getattr(self.requant.get(self.node.index), "kind", 0)
        if kind:  # an integer convolution's epilogue (quant_int.Requant, FcRequant)
            defines["REQUANT"] = kind
        if self.half:
            defines["HALF"] = 1
            if not self.half_weights:
                defines["WEIGHTS_FLOAT"] = 1
        for a in args:
            if isinstance(a, TensorRef):
                self.tensor(self.infos[a.index])
        self.launches.append((program, kernel, defines, tuple(global_size),
                              None if local_size is None else tuple(local_size), args,
                              self.node))

    def _root(self, index: int) -> int:
        while index in self.alias_of:
            index = self.alias_of[index]
        return index

    # -- after every op is built -------------------------------------------------------------

    def finish(self, inputs: list, outputs: list):
        """The partition's step: upload `inputs`, run the launches, download `outputs`."""
        cl, dev = self.cl, self.dev
        end = len(self.launches)
        for t in inputs:
            self.tensor(t)
            self.uses[self._root(t.index)][0] = -1
        for t in outputs:
            self.tensor(t)
            self.uses[self._root(t.index)][1] = end
        self._keep_inputs_float(inputs)
        buffers = self._allocate()

        def buffer(index):
            return buffers[self._root(index)]

        calls, labels = [], []
        dev.build([(launch[0], tuple(sorted(launch[2].items()))) for launch in self.launches])
        for program, name, defines, gsize, lsize, args, node in self.launches:
            labels.append((node, name, gsize))
            kernel = dev.kernel(program, name, defines)
            kernel.set_args(*[buffer(a.index) if isinstance(a, TensorRef) else a for a in args])
            calls.append((kernel, gsize, lsize))
        self._compile_kernels(calls, labels, buffers)
        ins = [(buffer(t.index), self._staging(t), self._quantized(t)) for t in inputs]
        outs = [(buffer(t.index), self._staging(t), self._quantized(t)) for t in outputs]
        queue, stats = dev.queue, self.stats
        enqueue_copy, enqueue_kernel = cl.enqueue_copy, cl.enqueue_nd_range_kernel
        nin, nout = len(ins), len(outs)
        bytes_in = sum(self._host(t).dtype.itemsize * int(np.prod(t.shape)) for t in inputs)
        bytes_out = sum(self._host(t).dtype.itemsize * int(np.prod(t.shape)) for t in outputs)

        def run(*arrays):
            call = None
            try:
                for (buf, staging, info), host in zip(ins, arrays):
                    if info is not None:
                        to_device(host, staging, info)
                        host = staging
                    elif staging is not None:
                        np.copyto(staging, host, casting="unsafe")
                        host = staging
                    enqueue_copy(queue, buf, host, is_blocking=False)
                for call in calls:
                    enqueue_kernel(queue, *call)
                call = None
                for (buf, staging, _info), host in zip(outs, arrays[nin:]):
                    enqueue_copy(queue, staging if staging is not None else host, buf,
                                 is_blocking=False)
                queue.finish()
            except Exception as e:
                raise _failure(e, labels[calls.index(call)] if call is not None else None,
                               labels) from e
            for (_buf, staging, info), host in zip(outs, arrays[nin:]):
                if info is not None:
                    to_host(staging, host, info)
                elif staging is not None:
                    np.copyto(host, staging, casting="unsafe")
            stats.to_device += nin
            stats.to_host += nout
            stats.bytes_to_device += bytes_in
            stats.bytes_to_host += bytes_out
            stats.invokes += 1
        # OpenCL kernels do not hold their argument buffers: the step does.
        run.buffers = (buffers, list(self.constants))
        run.launches = len(calls)
        run.calls, run.labels = calls, labels  # for profiling: benchmarks/bench_opencl.py
        run.uploaded = self.uploaded
        run.compiled = self.compiled
        return run

    def _compile_kernels(self, calls: list, labels: list, buffers: dict) -> None:
        """Launch every kernel (with its sizes) not launched before in this process once now,
        one at a time, on zeroed buffers: PoCL compiles a kernel to machine code at its first
        launch (on a cold start most of the time: MobileNetV2's first invoke took 54 s of 72),
        so that happens while the interpreter prepares, with progress on a terminal, not inside
        the first invoke. With PoCL's cache warm this costs about one invoke; the launch order
        is the partition's, so the zeros flow as data would (no index is read from data)."""
        todo, seen = [], self.dev.first_launched
        for k, (program, name, defines, gsize, lsize, *_) in enumerate(self.launches):
            key = (program, name, tuple(sorted(defines.items())), gsize, lsize)
            if key not in seen:
                seen.add(key)
                todo.append(k)
        if not todo:
            return
        from .device import progress
        cl, queue = self.cl, self.dev.queue
        for buf in set(buffers.values()):
            cl.enqueue_fill_buffer(queue, buf, np.uint8(0), 0, buf.size)
        with progress(f"OpenCL: compiling {len(todo)} kernels", len(todo)) as bar:
            for k in todo:
                try:
                    cl.enqueue_nd_range_kernel(queue, *calls[k])
                    queue.finish()
                except Exception as e:
                    raise _failure(e, labels[k], labels) from e
                bar.advance()
        self.compiled = len(todo)

    def _keep_inputs_float(self, inputs: list) -> None:
        """Under half storage, the partition's float32 inputs that every kernel reading them
        can read as float32 (IN_F32: a first convolution's) stay float32: the model's input
        is not rounded to half (it cost MobileNetV2 3e-3 x max |ref| of its output)."""
        if not self.half:
            return
        wide = {self._root(t.index) for t in inputs if t.dtype == np.float32}
        for launch in self.launches:
            for a in launch[5]:
                if isinstance(a, TensorRef) and not a.wide:
                    wide.discard(self._root(a.index))
        self.wide = wide
        for launch in self.launches:
            if any(isinstance(a, TensorRef) and self._root(a.index) in wide for a in launch[5]):
                launch[2]["IN_F32"] = 1

    @staticmethod
    def _host(info):
        """The model's tensor behind `info` (an int8 tensor's float view: quant.py)."""
        return getattr(info, "host", info)

    def _quantized(self, info):
        """`info` when it is the float view of an int8 tensor (quant.py, quant_int.py: its
        quantization says how the device stores it), else None."""
        return info if self._host(info) is not info else None

    def _staging(self, info):
        """A host array in the device's storage type when it differs from the tensor's."""
        if self.dtype(info) == self._host(info).dtype:
            return None
        return np.empty(info.shape, self.dtype(info))

    def _allocate(self) -> dict:
        """A buffer per root tensor; tensors whose lifetimes do not overlap share one."""
        mf = self.cl.mem_flags
        sizes = {}
        for root in self.uses:
            info = self.infos[root]
            sizes[root] = max(int(np.prod(info.shape, dtype=np.int64))
                              * self.dtype(info).itemsize, 1)
        for out in self.alias_of:
            info = self.infos[out]
            need = int(np.prod(info.shape, dtype=np.int64)) * self.dtype(info).itemsize
            sizes[self._root(out)] = max(sizes.get(self._root(out), 1), need)
        order = sorted(self.uses, key=lambda r: (self.uses[r][0], r))
        free: list = []       # (size, buffer, last use)
        live: list = []
        out = {}
        for root in order:
            first, last = self.uses[root]
            still = []
            for size, buf, end in live:
                (free if end < first else still).append((size, buf, end))
            live = still
            fits = [f for f in free if f[0] >= sizes[root]]
            if fits:
                pick = min(fits, key=lambda f: f[0])
                free.remove(pick)
                size, buf = pick[0], pick[1]
            else:
                size = sizes[root]
                buf = self.cl.Buffer(self.dev.context, mf.READ_WRITE, size + SLACK)
            out[root] = buf
            live.append((size, buf, last))
        return out
