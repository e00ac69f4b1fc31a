"""The memory planner's arithmetic on random lifetimes: no two tensors alive at one step
overlap, and the live lower bound (one sweep) equals the most bytes alive at any step."""
from __future__ import annotations

import numpy as np

from edgelite.interpreter import arena


def _random_lifetimes(rng, n):
    out = []
    for t in range(n):
        first = int(rng.integers(-1, 40 + n // 4))
        out.append(arena.Lifetime(t, int(rng.integers(1, 5000)), first,
                                  first + int(rng.integers(0, 12))))
    return out


def test_placed_tensors_alive_together_never_overlap():
    rng = np.random.default_rng(3)
    for _ in range(20):
        lts = _random_lifetimes(rng, 60)
        offsets, total = arena.plan(lts)
        for i, a in enumerate(lts):
            assert offsets[a.tensor] % arena.ALIGN == 0
            assert offsets[a.tensor] + a.nbytes <= total
            for b in lts[i + 1:]:
                if a.first <= b.last and b.first <= a.last:
                    assert offsets[a.tensor] + a.nbytes <= offsets[b.tensor] \
                        or offsets[b.tensor] + b.nbytes <= offsets[a.tensor], (a, b)
        assert total >= arena.live_lower_bound(lts)


def _exhaustive(lifetimes):
    """The greedy placement looking at every placed tensor (plan's before its step index)."""
    placed, offsets, total = [], {}, 0
    for lt in sorted(lifetimes, key=lambda x: (-x.nbytes, x.first, x.tensor)):
        size = -(-max(lt.nbytes, 1) // arena.ALIGN) * arena.ALIGN
        offset = 0
        for o, e in sorted((o, e) for o, e, f, la in placed if f <= lt.last and lt.first <= la):
            if offset + size <= o:
                break
            offset = max(offset, e)
        placed.append((offset, offset + size, lt.first, lt.last))
        offsets[lt.tensor] = offset
        total = max(total, offset + size)
    return offsets, total


def test_the_step_index_places_as_the_exhaustive_search():
    rng = np.random.default_rng(5)
    for _ in range(20):
        lts = _random_lifetimes(rng, 200)
        assert arena.plan(lts) == _exhaustive(lts)


def test_live_lower_bound_is_the_most_bytes_alive_at_one_step():
    rng = np.random.default_rng(4)
    for _ in range(50):
        lts = _random_lifetimes(rng, int(rng.integers(0, 40)))
        steps = range(-1, max((lt.last for lt in lts), default=0) + 1)
        brute = max((sum(lt.nbytes for lt in lts if lt.first <= s <= lt.last) for s in steps),
                    default=0)
        assert arena.live_lower_bound(lts) == brute
    assert arena.live_lower_bound([arena.Lifetime(0, 10, 5, 4)]) == 0  # alive at no step
