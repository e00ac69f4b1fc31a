"""`edgelite train` with damaged data files (issue 19): a truncated `.npz`, one whose CRC does
not match (BadZipFile), an `--eval` file without the model's input key (KeyError) are each one
`error:` line naming the flag and the file, never a traceback, and nothing is trained."""
from __future__ import annotations

import zipfile

import numpy as np
import pytest

from tests.cli.helpers import invoke
from tests.cli.test_cli_files import digits  # noqa: F401  (the fixture)


def _bad_crc(source, target) -> None:
    """`source` with one byte of its first array's data changed (the stored CRC then fails)."""
    raw = bytearray(source.read_bytes())
    with zipfile.ZipFile(source) as z:
        info = z.infolist()[0]
    # the local header: 30 bytes, the name, the extra field; the data follows
    name_len = int.from_bytes(raw[info.header_offset + 26:info.header_offset + 28], "little")
    extra_len = int.from_bytes(raw[info.header_offset + 28:info.header_offset + 30], "little")
    at = info.header_offset + 30 + name_len + extra_len + info.compress_size - 1
    raw[at] ^= 0xFF
    target.write_bytes(bytes(raw))


@pytest.mark.parametrize("flag", ["--data", "--eval"])
def test_damaged_npz_is_one_error_line(digits, tmp_path, flag):  # noqa: F811
    model, x, y = digits
    good = tmp_path / "train.npz"
    raw = good.read_bytes()
    (tmp_path / "cut.npz").write_bytes(raw[:len(raw) // 2])
    _bad_crc(good, tmp_path / "crc.npz")
    np.savez(tmp_path / "wrongkey.npz", pixels=x, labels=y)
    for name in ("cut.npz", "crc.npz", "wrongkey.npz"):
        args = ["--data", tmp_path / name] if flag == "--data" else \
            ["--data", good, "--eval", tmp_path / name]
        result = invoke(["train", str(model), *map(str, args)])
        assert result.exit_code == 1, (name, result.output)
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert any(ln.startswith("error: ") and flag in ln and name in ln for ln in lines), \
            (name, result.stderr)
        assert "Traceback" not in result.stderr and "internal" not in result.stderr, \
            result.stderr
        assert "loss" not in result.stdout, (name, result.stdout)
