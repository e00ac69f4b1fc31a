"""edgelite.interpreter.training: the on-device gradient mode.

    model = make_trainable("digits.tflite", trainable="last:2", optimizer=Adam(1e-3))
    it = Interpreter(model_content=save(model))          # or: it = extend("digits.tflite", ...)
    train = it.get_signature_runner("train")
    loss = train(image=x, labels=y)["loss"]
    save_checkpoint(it, "ckpt.npz"); export_frozen(it) -> .tflite bytes with the weights baked in

Gradients come by graph extension in builtin ops (gradients.py: one rule per op), so the training
file also trains in stock LiteRT. Needs only numpy and flatbuffers.
"""
from .build import (META_KEY, as_model, gradient_model, io_names, make_trainable,
                    training_facts)
from .checkpoint import export_frozen, restore_checkpoint, save_checkpoint
from .emit import GradientError
from .gradients import RULES
from .losses import LOSSES
from .loop import evaluate, extend, fit, predict
from .optimizers import SGD, Adam
from .params import reinitialize

__all__ = ["make_trainable", "extend", "gradient_model", "training_facts", "io_names",
           "as_model", "save_checkpoint", "restore_checkpoint", "export_frozen", "fit",
           "evaluate", "predict", "GradientError", "RULES", "LOSSES", "SGD", "Adam",
           "reinitialize", "META_KEY"]
