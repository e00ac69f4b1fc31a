"""Cases for DILATE and REDUCE_WINDOW (see test_ops.py)."""
import numpy as np

from tests.opmodel import In, Out, case

rng = np.random.default_rng(3)


def values(shape, dt):
    if dt == "bool":
        return rng.random(shape) < 0.6
    if dt.startswith("float"):
        return rng.standard_normal(shape).astype(dt)
    return rng.integers(-5 if dt[0] == "i" else 0, 6, shape).astype(dt)


CASES = []
for dt in ("float32", "int8", "uint8", "int16", "int32", "int64", "float64", "bool"):
    for shape, dil in (((2, 3), (2, 3)), ((3,), (1,)), ((1, 2, 2, 3), (1, 2, 3, 1)),
                       ((4, 1), (3, 5))):
        pad = np.array(True if dt == "bool" else 7, dt)
        CASES.append(case(f"dilate_{dt}_{'x'.join(map(str, shape))}", "DILATE",
                          [In(shape, dt), np.array(dil, np.int32), pad], [values(shape, dt)],
                          outputs=[Out(dtype=dt)]))

NAMES = {1: "add", 2: "mul", 3: "min", 4: "max", 5: "all", 6: "any"}
# (shape, window, strides, dilations)
WINDOWS = [((4, 5), (2, 2), (1, 1), (1, 1)), ((6, 7), (3, 2), (2, 3), (1, 1)),
           ((1, 7, 6, 2), (1, 2, 3, 1), (1, 2, 1, 1), (1, 2, 2, 1)), ((5,), (5,), (1,), (1,)),
           ((8,), (2,), (3,), (3,))]
for fn, name in NAMES.items():
    types = ("bool",) if fn >= 5 else ("float32", "int32", "int64", "int8", "int16")
    for dt in types:
        for k, (shape, w, s, d) in enumerate(WINDOWS):
            if fn == 2 and dt != "float32" and k != 0:
                continue  # integer products overflow fast
            init = {1: 0, 2: 1, 3: 100, 4: -100, 5: True, 6: False}[fn]
            x = values(shape, dt)
            CASES.append(case(f"reduce_window_{name}_{dt}_{k}", "REDUCE_WINDOW",
                              [In(shape, dt), np.array(init, dt), np.array(w, np.int64),
                               np.array(s, np.int64), np.array(d, np.int64)], [x],
                              outputs=[Out(dtype=dt)], options=dict(reduce_function=fn)))
