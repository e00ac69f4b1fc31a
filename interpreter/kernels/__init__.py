"""The kernels. Importing this package registers every kernel; each module below is one family,
so this list reads as the coverage table."""
from .registry import KERNELS, CUSTOM_OPS, KernelError, Node, TensorInfo, register, register_custom_op

from . import elementwise  # noqa: F401  ADD SUB MUL DIV ... and unary math
from . import control  # noqa: F401  CALL_ONCE IF WHILE VAR_HANDLE READ_VARIABLE ASSIGN_VARIABLE
from . import lstm  # noqa: F401  UNIDIRECTIONAL_SEQUENCE_LSTM
from . import shape_ops  # noqa: F401  RESHAPE SQUEEZE EXPAND_DIMS SHAPE RANK BROADCAST_TO FILL ...
from . import layout  # noqa: F401  TRANSPOSE CONCATENATION PACK UNPACK SPLIT SPLIT_V TILE REVERSE_V2
