"""Every ONNX lowering, by family: importing this module fills the registry, so this list reads
as the converter's coverage table."""
from __future__ import annotations

from .lower import LOWERINGS

from . import lower_math  # noqa: E402,F401  elementwise arithmetic, activations, comparisons, Erf
from . import lower_nn  # noqa: E402,F401  Conv, BatchNormalization, Gemm, MatMul, Softmax
from . import lower_pool  # noqa: E402,F401  MaxPool AveragePool GlobalAveragePool GlobalMaxPool
from . import lower_norm  # noqa: E402,F401  LayerNormalization InstanceNormalization
from . import lower_reduce  # noqa: E402,F401  ReduceMean ReduceSum ... ArgMax ArgMin
from . import lower_shape  # noqa: E402,F401  Reshape, Concat, Slice, Gather, Shape, Constant, ...
from . import lower_pad  # noqa: E402,F401  Pad (constant, reflect, edge, wrap)
from . import lower_spatial  # noqa: E402,F401  ConvTranspose DepthToSpace SpaceToDepth
from . import lower_resize  # noqa: E402,F401  Resize Upsample
from . import lower_index  # noqa: E402,F401  TopK GatherElements GatherND NonZero CumSum
from . import lower_detection  # noqa: E402,F401  NonMaxSuppression
from . import lower_rnn  # noqa: E402,F401  LSTM GRU (unrolled)
from . import lower_einsum  # noqa: E402,F401  Einsum
from . import lower_control  # noqa: E402,F401  If
from . import lower_qdq  # noqa: E402,F401  QuantizeLinear DequantizeLinear (QDQ models)


def supported_ops() -> list:
    """The ONNX op types (default domain) the converter can lower, sorted."""
    return sorted(LOWERINGS)
