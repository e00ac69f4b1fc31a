"""How a command declares its parameters, without importing typer.

A command is a plain function whose parameters are annotated `Annotated[TYPE, Arg(...)]` or
`Annotated[TYPE, Opt("--flag", help=...)]`, as typer's annotated style does. `frontends.py` turns
the same functions into a typer app where typer is installed (the `convert` extra) and into an
argparse parser where it is not, so `edgelite run` and `inspect` work with the runtime install
alone (numpy and flatbuffers) on a device.

TYPE is one of: str, int, float, bool (a flag), Path, an Enum of str values (the choices),
`X | None` (optional, default None), or `list[str]` (a repeatable option).
"""
from __future__ import annotations


class Arg:
    """A positional argument."""

    def __init__(self, help: str, *, metavar: str | None = None):
        self.help, self.metavar = help, metavar


class Opt:
    """An option: its flags ("--data", or "-o", "--output"), help, an optional lower bound for
    numbers, and a metavar."""

    def __init__(self, *flags: str, help: str, min: float | None = None,
                 metavar: str | None = None):
        if not flags or not all(f.startswith("-") for f in flags):
            raise ValueError(f"option flags must start with '-': {flags}")
        self.flags, self.help, self.min, self.metavar = flags, help, min, metavar
