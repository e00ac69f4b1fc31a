"""A bound int8 kernel step as a stage of a chain (fusion_int8.py): the op before writes this
one's input straight into its float32 patches, as floor(clip(s)) (exact integers), instead of
an int8 output this op then copies in; two numpy calls a link instead of four (clip, cast and
the top-bit flip of the producer's requantization, the consumer's copy).

A kernel's bound run (plan.bind_step) carries `.stage`, a Stage, where it can be one; its
prepared run says so beforehand with `stage_out` (it can give a Stage) and `stage_in` (its Stage
has a `head`)."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import common
from .joined_steps import joined
from .steps import call

# The kernels' clip as a call's function, looked up on each call (tests/interpreter/
# numpy_calls.py counts it through a wrapper put there)
CLIP = (common, "clip")


def copy(dest, src) -> tuple:
    """copyto(dest, src, casting="unsafe") as a call (steps.call), by its C function."""
    return call(common.raw(np.copyto), dest, src, casting="unsafe")


def requantized(passes: tuple) -> tuple:
    """The requantizer's three passes (requantize.bind_finish's `passes`) as calls: clip in
    place, the cast into the output's bytes, the top-bit flip (int8 held as uint8 floors;
    none where `lift` is None: uint8)."""
    s, lo, hi, out, lift = passes
    return (call(CLIP, s, lo, hi, s), copy(out, s),
            None if lift is None else call((np, "bitwise_xor"), out, lift, out))


class Stage(NamedTuple):
    """The chain runs these inline (no Python frame a stage): `copies` (copyto pairs),
    `compute` (steps.call calls; numpy's by (module, name) where tests count them), then for
    the last stage `passes` inline or `finish`."""
    head: np.ndarray | None   # the float32 patches the input's values go into, None: no input
    copies: tuple             # ((dest, src), ...): the input into them (what the chain skips)
    compute: tuple            # (steps.call(...), ...): the patches to s
    s: np.ndarray             # float32, contiguous: the output is floor(clip(s, lo, hi)) - lift
    lo: np.ndarray            # 0-d float32 bounds
    hi: np.ndarray
    lift: int                 # 0, or 128 (int8 held as uint8 floors)
    passes: tuple | None      # (s, lo, hi, uint8 output, lift): clip, cast, flip (last stage)
    finish: object            # or a bound step (calls, a line, or a function): s to the output

    def ending(self) -> tuple:
        """What takes s to the op's output: the passes' calls, or `finish`."""
        return requantized(self.passes) if self.passes is not None else (self.finish,)

    def step(self):
        """The op's bound step (plan.bind_step) as this stage alone: its copies, compute and
        ending as one step of calls (steps.joined: a line of the plan's run_steps, no frame),
        `.stage` this stage (for fusion_int8)."""
        step = joined(*[copy(dest, src) for dest, src in self.copies], *self.compute,
                      *self.ending())
        step.stage = self
        return step


def finished(tail) -> tuple:
    """A requantizer's bound finish (requantize.bind_finish) as calls: its passes inline, else
    one call of it."""
    return requantized(tail.passes) if tail.passes is not None else (call(tail),)


def requantized_step(head, copies: tuple, compute: tuple, tail):
    """The bound step (plan.bind_step) of an int8 kernel that runs `copies` (copyto pairs),
    `compute` (calls) and then `tail`, its requantizer's bound finish (requantize.bind_finish),
    on fixed arrays: with the tail's `passes`, a Stage's step (the passes inline; `.stage`:
    fusion_int8 may chain it); without, the same calls then one call of the tail (no stage).
    One step of calls either way (a line of the plan's run_steps)."""
    if tail.passes is None:
        return joined(*[copy(dest, src) for dest, src in copies], *compute, call(tail))
    s, lo, hi, _, lift = tail.passes
    return Stage(head, copies, compute, s, lo, hi, int(lift), tail.passes, None).step()
