"""A trivial delegate for testing the shared partitioning: it "supports" a chosen set of op types
and runs a partition with the CPU kernels on arrays of its own, so a tensor that crosses the
boundary is visibly copied (and counted) while the ones inside stay private."""
from __future__ import annotations

import numpy as np

from edgelite.interpreter.delegation import Delegate


class NumpyDelegate(Delegate):
    name = "numpy"

    def __init__(self, ops, options=None):
        super().__init__(options)
        self.ops = set(ops)
        self.partitions = []

    def support(self, node):
        return None if node.op in self.ops else f"{node.op} is not in {sorted(self.ops)}"

    def prepare(self, partition):
        self.partitions.append(partition)
        own = {}
        for node in partition.nodes:
            for t in node.outputs:
                own[t.index] = np.zeros(t.shape, t.dtype)
        for t in partition.inputs:
            own[t.index] = np.zeros(t.shape, t.dtype)

        def value(t):
            return None if t is None else (t.data if t.data is not None else own[t.index])

        steps = [(run, [value(t) for t in node.inputs] + [own[t.index] for t in node.outputs])
                 for node, run in zip(partition.nodes, partition.cpu_runs)]
        ins = [own[t.index] for t in partition.inputs]
        outs = [own[t.index] for t in partition.outputs]
        stats = self.stats

        def run(*arrays):
            for mine, host in zip(ins, arrays):
                np.copyto(mine, host)
                stats.to_device += 1
                stats.bytes_to_device += host.nbytes
            for kernel, args in steps:
                kernel(*args)
            for mine, host in zip(outs, arrays[len(ins):]):
                np.copyto(host, mine)
                stats.to_host += 1
                stats.bytes_to_host += host.nbytes
            stats.invokes += 1
        return run
