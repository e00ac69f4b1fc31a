"""Cases for RFFT2D, COMPLEX_ABS, REAL and IMAG (see test_ops.py)."""
import numpy as np

from tests.opmodel import In, Out, case

rng = np.random.default_rng(11)


def cplx(shape, dt):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)


CASES = []
for op in ("REAL", "IMAG", "COMPLEX_ABS"):
    for dt, real in (("complex64", "float32"), ("complex128", "float64")):
        for shape in ((5,), (2, 3, 4), ()):
            CASES.append(case(f"{op.lower()}_{dt}_{len(shape)}d", op, [In(shape, dt)],
                              [cplx(shape, dt)], outputs=[Out(dtype=real)]))

# RFFT2D: fft_length equal to, smaller than (crop) and larger than (zero pad) the input.
for shape, length in (((4, 8), (4, 8)), ((2, 4, 8), (4, 4)), ((3, 5), (4, 8)),
                      ((1, 2, 8, 16), (8, 16)), ((6, 3), (2, 2)), ((2, 16), (2, 32)),
                      ((3, 4), (1, 4))):
    x = rng.standard_normal(shape).astype(np.float32)
    CASES.append(case(f"rfft2d_{'x'.join(map(str, shape))}_{length[0]}x{length[1]}", "RFFT2D",
                      [In(shape), np.array(length, np.int32)], [x],
                      outputs=[Out(dtype="complex64")], rtol=1e-5, atol=1e-5))
