"""What `tflite_runtime.interpreter` (the older LiteRT wheel most Raspberry Pi and Coral
tutorials import) has beyond `Interpreter`: `InterpreterWithCustomOps`. `edgelite.interpreter`
is that module's drop-in as a whole:

    import edgelite.interpreter as tflite      # was: import tflite_runtime.interpreter as tflite
    it = tflite.Interpreter(model_path="model.tflite", num_threads=2)

(Interpreter, InterpreterWithCustomOps, load_delegate, Delegate, OpResolverType,
SignatureRunner). A Coral tutorial's `load_delegate("libedgetpu.so.1")` and a model compiled for
the Edge TPU get one error naming the Edge TPU.
"""
from __future__ import annotations

from .api import Interpreter
from .kernels import register_custom_op


class InterpreterWithCustomOps(Interpreter):
    """As LiteRT's: an Interpreter whose custom ops come from `custom_op_registerers`.

    LiteRT's registerers are C++ functions (a symbol name, or a callable taking the op
    resolver's address) that edgelite cannot run. Here a registerer is a Python callable that is
    given `register_custom_op` and registers kernels with it; a symbol name is refused, saying
    so."""

    def __init__(self, custom_op_registerers=None, **kwargs):
        for registerer in custom_op_registerers or []:
            if isinstance(registerer, str) or not callable(registerer):
                raise ValueError(
                    f"custom op registerer {registerer!r} is a C++ function, which edgelite "
                    "cannot load: pass a Python callable, which is given register_custom_op, "
                    "or register the kernels with edgelite.interpreter.register_custom_op")
            registerer(register_custom_op)
        super().__init__(**kwargs)
