"""`filtered_stderr` drops native libraries' chatter from descriptor 2 and keeps the rest."""
from __future__ import annotations

import os

from edgelite.interpreter.native_stderr import filtered_stderr


def test_chatter_dropped_the_rest_kept_in_order(capfd):
    with filtered_stderr(r"INFO: .*"):
        os.write(2, b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n")
        os.write(2, b"ERROR: a real problem\n")
        os.write(2, b"INFO: more chatter\nlast words, no newline")
    os.write(2, b"\nafter\n")
    err = capfd.readouterr().err
    assert err == "ERROR: a real problem\nlast words, no newline\nafter\n"


def test_descriptor_restored_after_an_exception(capfd):
    try:
        with filtered_stderr(r"noise"):
            os.write(2, b"noise\nkept\n")
            raise KeyError("boom")
    except KeyError:
        pass
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "kept\nafter\n"
