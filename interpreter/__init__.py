"""edgelite.interpreter: runs `.tflite` models on the CPU; a drop-in for LiteRT's Interpreter.

Needs only numpy and flatbuffers.
"""
from .api import ConcurrentUseError, Interpreter, OpResolverType, ResizeError
from .compat import InterpreterWithCustomOps  # tflite_runtime.interpreter's other name
from .delegation import Delegate, load_delegate  # as LiteRT's; found by name (delegation.py)
from .kernels import register_custom_op
from .kernels.registry import KernelError
from .plan import UnsupportedOpsError
from .signature import SignatureRunner


__all__ = ["ConcurrentUseError", "Delegate", "Interpreter", "InterpreterWithCustomOps",
           "OpResolverType", "SignatureRunner",
           "load_delegate", "register_custom_op", "KernelError", "ResizeError",
           "UnsupportedOpsError"]
