"""edgelite.interpreter: runs `.tflite` models on the CPU; a drop-in for LiteRT's Interpreter.

Needs only numpy and flatbuffers.
"""
from .api import Interpreter, OpResolverType, ResizeError
from .kernels import register_custom_op
from .kernels.registry import KernelError
from .plan import UnsupportedOpsError
from .signature import SignatureRunner


def load_delegate(library, options=None):
    """A delegate by name (e.g. "opencl"), as LiteRT's `load_delegate`; see edgelite.delegates."""
    from edgelite.delegates import load_delegate as _load
    return _load(library, options)


__all__ = ["Interpreter", "OpResolverType", "SignatureRunner", "load_delegate",
           "register_custom_op", "KernelError", "ResizeError", "UnsupportedOpsError"]
