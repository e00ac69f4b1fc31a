"""Cases for the elementwise kernels (see test_ops.py)."""
import numpy as np

from tests.opmodel import In, case

rng = np.random.default_rng(0)
x23 = rng.standard_normal((2, 3)).astype(np.float32)

CASES = [
    case("add_relu_broadcast", "ADD", [In((2, 3)), np.arange(3, dtype=np.float32)], [x23],
         options=dict(fused_activation_function=1)),
]
