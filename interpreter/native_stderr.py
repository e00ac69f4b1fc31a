"""Native libraries' chatter on file descriptor 2, filtered out.

LiteRT's C++ side logs INFO lines ("INFO: Created TensorFlow Lite XNNPACK delegate for CPU.") and
PoCL's OpenCL compiler prints warning counts ("1 warning generated.") straight to the process's
standard error, where neither Python's warnings filters nor a replaced `sys.stderr` reach.
`filtered_stderr` points descriptor 2 at a temporary file around a call, then writes back every
line that is not chatter: errors and anything else still reach the user, in their order.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile

FD = 2


@contextlib.contextmanager
def filtered_stderr(chatter: str):
    """Around the block, drop the lines written to descriptor 2 that match the regular
    expression `chatter` (whole lines); the other lines are written back when the block ends."""
    _flush()
    try:
        saved = os.dup(FD)
    except OSError:     # no descriptor 2 (a detached process): nothing to filter
        yield
        return
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), FD)
        try:
            yield
        finally:
            _flush()
            os.dup2(saved, FD)
            os.close(saved)
            captured.seek(0)
            pattern = re.compile(chatter)
            kept = [line for line in captured.read().decode("utf-8", "replace")
                    .splitlines(keepends=True) if not pattern.fullmatch(line.rstrip("\r\n"))]
            if kept:
                sys.stderr.write("".join(kept))
                _flush()


def _flush() -> None:
    """Python's own buffered stderr text goes out before descriptor 2 changes hands."""
    try:
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):
        pass
