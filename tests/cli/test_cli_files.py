"""Files and the command line (issue 19): outputs are written atomically (a full disk leaves the
old file whole, no temporary file behind), tflite-convert never writes over its input, and bad
.npz files, labels and paths are one `error:` line naming the flag and the file."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgelite.interpreter.training.checkpoint import atomic_write, remove_stale_temporaries
from tests.cli.helpers import invoke
from tests.conftest import REPO_ROOT


def conv_model():
    w = numpy_helper.from_array(np.ones([2, 3, 1, 1], np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


# -- tflite-convert ------------------------------------------------------------------------------

def test_convert_never_writes_over_its_input(tmp_path):
    source = tmp_path / "x.tflite"     # really an ONNX file
    onnx.save(conv_model(), source)
    before = source.read_bytes()
    for args in ([source], [source, "-o", source], [source, "-o", tmp_path / "." / "x.tflite"]):
        result = invoke(args, prog="tflite-convert")
        assert result.exit_code == 1, result.output
        assert f"refusing to write over the input {source}" in result.stderr
    assert source.read_bytes() == before


def test_convert_output_errors_name_the_flag_and_path(tmp_path):
    source = tmp_path / "m.onnx"
    onnx.save(conv_model(), source)
    (tmp_path / "adir").mkdir()
    result = invoke([source, "-o", tmp_path / "adir"], prog="tflite-convert")
    assert result.exit_code == 1 and f"cannot write -o {tmp_path / 'adir'}: it is a directory" \
        in result.stderr, result.output
    result = invoke([source, "-o", tmp_path / "no" / "x.tflite"], prog="tflite-convert")
    assert result.exit_code == 1 and f"cannot write -o {tmp_path / 'no' / 'x.tflite'}: no such " \
        f"folder {tmp_path / 'no'}" in result.stderr, result.output


def test_convert_bad_npz_files_are_one_line(tmp_path):
    source = tmp_path / "m.onnx"
    onnx.save(conv_model(), source)
    np.savez(tmp_path / "wrong.npz", wrong=np.zeros((2, 1, 3, 4, 4), np.float32))
    np.savez(tmp_path / "inputs.npz", x=np.zeros((1, 3, 4, 4), np.float32))
    raw = (tmp_path / "inputs.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(raw[:len(raw) // 2])
    out = tmp_path / "m.tflite"
    for args, expect in (
            (["--quantize", "int8", "--calibration-data", tmp_path / "wrong.npz"],
             "a calibration sample has no array for input 'x' (it has wrong)"),
            (["--quantize", "int8", "--calibration-data", tmp_path / "cut.npz"],
             f"--calibration-data {tmp_path / 'cut.npz'}: cannot read it as an .npz"),
            (["--check", "--inputs", tmp_path / "cut.npz"],
             f"--inputs {tmp_path / 'cut.npz'}: cannot read it")):
        result = invoke([source, "-o", out, *args], prog="tflite-convert")
        assert result.exit_code == 1, result.output
        assert expect in result.stderr and "internal" not in result.stderr, result.stderr


def _full_disk(code: str, limit: int, ignore_sigxfsz: bool) -> subprocess.CompletedProcess:
    """Run `code` with files limited to `limit` bytes (RLIMIT_FSIZE: a full disk)."""
    prelude = ("import resource, signal\n"   # Python ignores SIGXFSZ unless told otherwise
               + ("" if ignore_sigxfsz else "signal.signal(signal.SIGXFSZ, signal.SIG_DFL)\n")
               + f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n")
    return subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True,
                          timeout=300, cwd=REPO_ROOT)


@pytest.mark.parametrize("killed", [False, True], ids=["write error", "killed by SIGXFSZ"])
def test_convert_on_a_full_disk_keeps_the_old_output(tmp_path, killed):
    source, out = tmp_path / "m.onnx", tmp_path / "m.tflite"
    onnx.save(conv_model(), source)
    out.write_bytes(b"the old model " * 4)
    run = _full_disk(f"from edgelite.cli import convert_main\n"
                     f"raise SystemExit(convert_main([{str(source)!r}, '-o', {str(out)!r}]))\n",
                     200, ignore_sigxfsz=not killed)
    if killed:
        assert run.returncode == -signal.SIGXFSZ, run.stderr
    else:
        assert run.returncode == 1 and f"error: cannot write -o {out}: File too large" \
            in run.stderr, run.stderr
    assert out.read_bytes() == b"the old model " * 4
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(leftovers) == (1 if killed else 0), leftovers   # a kill cannot clean up
    result = invoke([source, "-o", out], prog="tflite-convert")   # the next write cleans up
    assert result.exit_code == 0, result.output
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


# -- atomic_write and the checkpoint writer ------------------------------------------------------

def test_a_failed_write_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "ckpt.npz"
    path.write_bytes(b"old")

    def broken(f):
        f.write(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, broken)
    assert path.read_bytes() == b"old" and sorted(os.listdir(tmp_path)) == ["ckpt.npz"]


def test_stale_temporaries_of_dead_writers_go_live_ones_stay(tmp_path):
    path = tmp_path / "ckpt.npz"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    stale = tmp_path / f".ckpt.npz.{dead}.abc.tmp"
    live = tmp_path / f".ckpt.npz.{os.getppid()}.def.tmp"   # the process running pytest's parent
    other = tmp_path / f".other.npz.{dead}.ghi.tmp"
    for p in (stale, live, other):
        p.write_bytes(b"x" * 10)
    atomic_write(path, lambda f: f.write(b"new"))
    assert path.read_bytes() == b"new"
    assert not stale.exists() and live.exists() and other.exists()
    assert remove_stale_temporaries(tmp_path / "other.npz") == [other]


def test_killed_save_checkpoint_leaves_the_old_checkpoint_and_the_next_save_cleans_up(tmp_path):
    """SIGKILL in the middle of writing (the write callback kills its own process)."""
    path = tmp_path / "ckpt.npz"
    np.savez(path, w=np.ones(3))
    code = (f"import os, signal, numpy as np\n"
            f"from edgelite.interpreter.training.checkpoint import atomic_write\n"
            f"def write(f):\n"
            f"    f.write(b'partial' * 1000); f.flush(); os.kill(os.getpid(), signal.SIGKILL)\n"
            f"atomic_write({str(path)!r}, write)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=REPO_ROOT,
                         timeout=120)
    assert run.returncode == -signal.SIGKILL
    assert len([p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]) == 1
    with np.load(path) as old:
        assert np.array_equal(old["w"], np.ones(3))
    atomic_write(path, lambda f: np.savez(f, w=np.zeros(3)))
    assert sorted(os.listdir(tmp_path)) == ["ckpt.npz"]


# -- edgelite train ------------------------------------------------------------------------------

@pytest.fixture
def digits(models_dir, tmp_path):
    d = np.load(models_dir / "digits.npz")
    x, y = d["x_train"][:40].transpose(0, 2, 3, 1), d["y_train"][:40]
    np.savez(tmp_path / "train.npz", image=x, labels=y)
    return models_dir / "digits_cnn.tflite", x, y


def _train(*args):
    return invoke(["train", *map(str, args)])


def test_train_refuses_nonsense_data(digits, tmp_path):
    model, x, y = digits
    np.savez(tmp_path / "high.npz", image=x, labels=np.where(y == 3, 99, y))
    np.savez(tmp_path / "negative.npz", image=x, labels=np.full(len(y), -1))
    np.savez(tmp_path / "empty.npz", image=x[:0], labels=y[:0])
    (tmp_path / "text.npz").write_text("not an archive\n")
    (tmp_path / "adir").mkdir()
    for data, expect in (
            ("high.npz", "--data high.npz: label 99 is not a class of the model's output (0..9); "
                         f"{int((y == 3).sum())} of 40 labels are out of range"),
            ("negative.npz", "--data negative.npz: label -1 is not a class of the model's output "
                             "(0..9); 40 of 40 labels are out of range"),
            ("empty.npz", "--data empty.npz has no samples"),
            ("text.npz", f"cannot read --data {tmp_path / 'text.npz'}: not an .npz (a zip of "
                         ".npy arrays, as numpy.savez writes): it does not start as a zip "
                         "archive"),
            ("adir", f"{tmp_path / 'adir'} is a directory, not a file")):
        result = _train(model, "--data", tmp_path / data)
        assert result.exit_code == 1, result.output
        assert f"error: {expect}" in result.stderr, result.stderr
        assert "loss" not in result.stdout
    result = _train(model, "--data", tmp_path / "train.npz", "--eval", tmp_path / "high.npz")
    assert result.exit_code == 1 and "--eval high.npz: label 99" in result.stderr, result.output


def test_train_learning_rate_nan_is_refused(digits, tmp_path):
    model, _, _ = digits
    for frontend in ("typer", "argparse"):
        result = invoke(["train", model, "--data", tmp_path / "train.npz", "--learning-rate",
                         "nan"], frontend=frontend)
        assert result.exit_code != 0 and "--learning-rate" in result.stderr, result.output
        assert "loss" not in result.stdout


def test_train_write_errors_name_the_output(digits, tmp_path):
    model, _, _ = digits
    (tmp_path / "adir").mkdir()
    for flag in ("--export", "--save-training", "--checkpoint"):
        result = _train(model, "--data", tmp_path / "train.npz", flag, tmp_path / "adir")
        assert result.exit_code == 1, result.output
        assert f"error: cannot write {flag} {tmp_path / 'adir'}: it is a directory" \
            in result.stderr, result.stderr
        assert "loss" not in result.stdout   # refused before training


@pytest.mark.parametrize("flag", ["--export", "--save-training"])
def test_train_on_a_full_disk_keeps_the_old_file(digits, tmp_path, flag):
    model, _, _ = digits
    out = tmp_path / "out.tflite"
    out.write_bytes(b"the old model")
    run = _full_disk(f"from edgelite.cli import main\n"
                     f"raise SystemExit(main(['train', {str(model)!r}, '--data', "
                     f"{str(tmp_path / 'train.npz')!r}, {flag!r}, {str(out)!r}]))\n",
                     4096, ignore_sigxfsz=True)
    assert run.returncode == 1 and f"error: cannot write {flag} {out}: File too large" \
        in run.stderr, run.stderr
    assert out.read_bytes() == b"the old model"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
