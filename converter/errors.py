"""The converter's errors: one class for everything a user can fix, one message each."""
from __future__ import annotations


class ConversionError(ValueError):
    """The model cannot be converted; the message says which node or tensor and why."""


class UnsupportedOpsError(ConversionError):
    """The model uses ONNX nodes the converter cannot lower; the message lists all of them."""

    def __init__(self, problems: list):
        self.problems = list(problems)
        super().__init__(f"{len(self.problems)} ONNX node(s) cannot be converted:\n  "
                         + "\n  ".join(self.problems))
