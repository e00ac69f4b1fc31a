"""Errors about model files."""


class ModelError(ValueError):
    """A model file is corrupt, truncated, hostile or uses something edgelite cannot represent.

    The message says what is wrong and where (subgraph / operator / tensor index and name)."""
