"""DEPTHWISE_CONV_2D at num_threads > 1 (issue 17, goal 5): the output rows of each tap grid
in parts that the invoke's thread shares with the worker threads (interpreter/workers.py).
numpy releases the GIL inside einsum and add, so two parts run on two cores. conv.py's
depthwise_conv_2d builds this run instead of its own above SPLIT_MACS multiply-adds."""
from __future__ import annotations

import numpy as np

from .. import threads, workers
from .common import F32

# Multiply-adds of a layer below which one thread runs it all: a part handed to a worker costs
# ~10-20 µs (a wake-up and the GIL), a layer of 2**18 multiply-adds ~60 µs.
SPLIT_MACS = 1 << 18


def depthwise_rows(grids, weights, const_w, b, act, shape, want, runtime=None):
    """DEPTHWISE_CONV_2D's run at num_threads > 1: each grid's output rows in parts shared
    with the worker threads (interpreter/workers.py), the bias and activation on each part; every
    value is the same sum of the same products as one thread's."""
    n, ho, wo, o = shape
    einsum, add = np.einsum, np.add
    rest = range(1, len(weights))
    row_bias = None if b is None else np.empty(wo * o, F32)
    if b is not None and b.data is not None:
        row_bias[:] = np.tile(np.reshape(b.data, -1).astype(F32), wo)
    runtime_bias = b is not None and b.data is None
    cuts_for = {}   # helpers -> each grid's row cuts

    def cuts_of(helpers):
        cuts = cuts_for.get(helpers)
        if cuts is None:
            cuts = cuts_for[helpers] = [
                [int(c) for c in np.linspace(0, g.end - g.start, helpers + 2)] for g in grids]
        return cuts

    def run(x, w, bias, out):
        if const_w is None:
            grids[0].tile_weights(weights, w)
        if runtime_bias:
            row_bias[:] = np.tile(np.reshape(bias, -1), wo)
        acc = out.reshape(n, ho, wo * o)
        # the plan's choice (threads.rows_first; OpenBLAS's threads otherwise hold the cores)
        helpers = threads.effective(want) - 1 if getattr(runtime, "split_rows", False) else 0
        for grid, cuts in zip(grids, cuts_of(max(helpers, 0))):
            workers.wake(helpers)   # during the copy into the padded buffer
            views, partial = grid.views(x)

            def part(i, views=views, partial=partial, start=grid.start, cuts=cuts):
                s = slice(cuts[i], cuts[i + 1])
                band = acc[:, start + cuts[i]:start + cuts[i + 1]]
                einsum("ijnyk,ijk->nyk", views[0][:, :, :, s], weights[0], out=band)
                for g in rest:
                    p = partial[:, s]
                    einsum("ijnyk,ijk->nyk", views[g][:, :, :, s], weights[g], out=p)
                    add(band, p, out=band)
                if row_bias is not None:
                    add(band, row_bias, out=band)
                if act is not None:
                    act(band)
            workers.run_parts(part, len(cuts) - 1, helpers)
    return run
