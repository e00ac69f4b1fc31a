"""Importing Ray, with one clear error when it is not installed (the runtime never imports it)."""
from __future__ import annotations

INSTALL = "pip install 'edgelite[distributed]' (or: pip install 'ray[data]')"


def ray():
    """The `ray` module; an ImportError naming the extra when it is missing."""
    try:
        import ray as module
    except ImportError as e:
        raise ImportError(f"edgelite.distributed needs Ray: {INSTALL}") from e
    return module


def init(num_cpus: int | None = None, address: str | None = None):
    """ray.init once (a local cluster unless `address` or $RAY_ADDRESS names one)."""
    r = ray()
    if not r.is_initialized():
        options = {"include_dashboard": False, "log_to_driver": False}
        if address is not None:
            options["address"] = address
        elif num_cpus is not None:
            options["num_cpus"] = num_cpus
        r.init(**options)
    return r


def actor(cls, num_cpus: float, **options):
    """`cls` as a Ray actor class with a fractional CPU share (on a 2-CPU machine whole CPUs
    for every actor would leave a pool waiting forever)."""
    return ray().remote(num_cpus=num_cpus, **options)(cls)
