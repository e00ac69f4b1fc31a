"""Progress of a long job, by the commands' conventions: results go to stdout, progress to stderr.

On a terminal a rich progress bar (rich comes with typer, the `convert` extra), else one line per
stage on stderr; `quiet` shows nothing. Where rich is not installed a terminal gets the lines.

    with Progress("benchmark", total=50, quiet=False) as bar:
        for _ in range(50):
            ...
            bar.advance()
"""
from __future__ import annotations

import sys

from .common import installed


class Progress:
    """One stage of a job: `advance(n)` as work gets done, `total` None when it is unknown."""

    def __init__(self, description: str, total: float | None = None, quiet: bool = False,
                 line: bool = True):
        """`line`: off a terminal, write "DESCRIPTION ..." to stderr (off when a note says it)."""
        self.description, self.total, self.quiet, self.line = description, total, quiet, line
        self._rich = None
        self._task = None

    def __enter__(self) -> "Progress":
        if self.quiet:
            return self
        if sys.stderr.isatty() and installed("rich"):
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn)

            self._rich = Progress(TextColumn("{task.description}"), BarColumn(),
                                  MofNCompleteColumn(), TimeElapsedColumn(),
                                  console=Console(stderr=True), transient=True)
            self._rich.start()
            self._task = self._rich.add_task(self.description, total=self.total)
        elif self.line:
            sys.stderr.write(self.description + " ...\n")
            sys.stderr.flush()
        return self

    def advance(self, n: float = 1) -> None:
        if self._rich is not None:
            self._rich.update(self._task, advance=n)

    def update(self, total: float | None = None, description: str | None = None) -> None:
        if self._rich is not None:
            self._rich.update(self._task, total=total, description=description or
                              self.description)

    def __exit__(self, *exc) -> None:
        if self._rich is not None:
            self._rich.stop()


def note(text: str, quiet: bool = False) -> None:
    """A line about the job (not a result) on stderr, unless quiet."""
    if not quiet:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
