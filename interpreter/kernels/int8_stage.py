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



class Stage(NamedTuple):
    """The chain runs these itself (no Python frame a stage): `copies` (copyto pairs),
    `compute` ((function, args, keywords) calls; by name where tests count them), then for
    the last stage `passes` inline or `finish`."""
    head: np.ndarray | None   # the float32 patches the input's values go into, None: no input
    copies: tuple             # ((dest, src), ...): the input into them (what the chain skips)
    compute: tuple            # ((function, ufunc name or (module, name), args, keywords),
                              # ...): the patches to s
    s: np.ndarray             # float32, contiguous: the output is floor(clip(s, lo, hi)) - lift
    lo: np.ndarray            # 0-d float32 bounds
    hi: np.ndarray
    lift: int                 # 0, or 128 (int8 held as uint8 floors)
    passes: tuple | None      # (s, lo, hi, uint8 output, lift): clip, cast, flip (last stage)
    finish: object            # or a function of no arguments: s to the op's output
