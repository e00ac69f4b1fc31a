"""Shared test helpers: where the shared real models live; a guard that onnxruntime oracles run
at ORT_ENABLE_BASIC."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SKIP_REASON = "shared models not found: set EDGELITE_MODELS or clone beside ../shared/models"


def find_models_dir() -> Path | None:
    """The shared models folder ($EDGELITE_MODELS, else <repo>/../shared/models), or None."""
    env = os.environ.get("EDGELITE_MODELS")
    path = Path(env) if env else REPO_ROOT.parent / "shared" / "models"
    return path if path.is_dir() else None


def models_dir() -> Path:
    """The shared models folder; skips the calling test when it is missing (fails instead when
    EDGELITE_REQUIRE_MODELS=1, as CI sets it, so CI always runs these tests)."""
    path = find_models_dir()
    if path is None:
        if os.environ.get("EDGELITE_REQUIRE_MODELS") == "1":
            pytest.fail(SKIP_REASON + " (EDGELITE_REQUIRE_MODELS=1)")
        pytest.skip(SKIP_REASON)
    return path


@pytest.fixture(name="models_dir", scope="session")
def models_dir_fixture() -> Path:
    return models_dir()


@pytest.fixture(scope="session")
def sample_dir(tmp_path_factory) -> Path:
    """A folder where samples/make_default_model.py has run once for the whole session:
    default.tflite, default.onnx, default_test.npz, and stdout.txt (what the script printed)."""
    import subprocess
    import sys
    out = tmp_path_factory.mktemp("sample")
    run = subprocess.run([sys.executable, str(REPO_ROOT / "samples" / "make_default_model.py"),
                          "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    (out / "stdout.txt").write_text(run.stdout)
    return out


# -- onnxruntime runs at ORT_ENABLE_BASIC, or the test fails ---------------------------------------
# Above BASIC onnxruntime swaps QDQ groups for fused integer kernels whose results depend on the
# CPU (issue 11: 37 LSB on an AVX2 CPU without VNNI), so a test whose oracle ran there passes or
# fails by machine. tests/oracles.py makes every session; this catches one made any other way.
# The check is installed when onnxruntime is first imported (an import hook: nothing imports
# onnxruntime for the tests that do not use it) and costs one comparison per session.

ORT_GUARD_MESSAGE = ("onnxruntime session above ORT_ENABLE_BASIC ({level}): its optimized "
                     "kernels give different numbers on different CPUs; make the session with "
                     "tests.oracles.onnxruntime_session")


def _ort_level_check(ort, sess_options) -> None:
    __tracebackhide__ = True
    basic = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL if sess_options is None else \
        sess_options.graph_optimization_level      # onnxruntime's default is ENABLE_ALL
    if int(level) > int(basic):
        name = getattr(level, "name", str(level))
        pytest.fail(ORT_GUARD_MESSAGE.format(
            level=name + (", the default with no SessionOptions" if sess_options is None
                          else "")))


def _guard_onnxruntime(ort) -> None:
    """Replace ort.InferenceSession by a subclass that checks its SessionOptions first."""
    base = ort.InferenceSession
    if getattr(base, "_edgelite_guarded", False):
        return

    class InferenceSession(base):
        _edgelite_guarded = True

        def __init__(self, path_or_bytes, sess_options=None, *args, **kwargs):
            __tracebackhide__ = True
            _ort_level_check(ort, sess_options)
            super().__init__(path_or_bytes, sess_options, *args, **kwargs)

    InferenceSession.__qualname__ = base.__qualname__
    InferenceSession.__module__ = base.__module__
    ort.InferenceSession = InferenceSession


class _OnnxruntimeImportHook:
    """A meta path finder that only wraps the loader of `onnxruntime` itself."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "onnxruntime":
            return None
        import importlib.machinery
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_guard(module):
            exec_module(module)
            _guard_onnxruntime(module)

        spec.loader.exec_module = exec_and_guard
        return spec


if "onnxruntime" in sys.modules:            # imported before the tests' conftest (a plugin)
    _guard_onnxruntime(sys.modules["onnxruntime"])
else:
    sys.meta_path.insert(0, _OnnxruntimeImportHook())


# -- every file the converter writes in a test loads and allocates in stock LiteRT -----------------
# (issue 12: a file LiteRT refuses is a converter bug, whatever the test checks). Installed when
# pytest configures, before any test module is imported, so a module that imports
# `convert_onnx` by name (`from edgelite.converter.convert import convert_onnx`) gets the checked
# one too; TFLiteConverter.convert also checks what it adds after convert_onnx (quantization,
# training signatures). EDGELITE_LITERT_GUARD=0 turns it off.

_LITERT_GUARD: list = []   # (owner, attribute name, original) to restore


def _litert_allocates(content: bytes, what: str) -> None:
    __tracebackhide__ = True
    from ai_edge_litert.interpreter import Interpreter

    from edgelite.converter.check import quiet_litert
    try:
        with quiet_litert():
            Interpreter(model_content=content).allocate_tensors()
    except Exception as e:  # noqa: BLE001  any refusal is the finding
        raise AssertionError(f"LiteRT refuses a file {what}: "
                             f"{type(e).__name__}: {str(e)[:300]}") from None


def _install_litert_guard() -> None:
    if os.environ.get("EDGELITE_LITERT_GUARD") == "0":
        return
    try:
        import ai_edge_litert.interpreter  # noqa: F401
        from edgelite.converter import api
        from edgelite.converter import convert as convert_module
    except ImportError:   # no converter or no LiteRT installed: nothing to guard
        return
    original = convert_module.convert_onnx
    original_convert = api.TFLiteConverter.convert

    def convert_onnx(*args, **kwargs):
        __tracebackhide__ = True
        conversion = original(*args, **kwargs)
        _litert_allocates(conversion.content, "the converter wrote")
        conversion._litert_checked = conversion.content
        return conversion

    def convert(self):
        __tracebackhide__ = True
        content = original_convert(self)
        if getattr(self.last_conversion, "_litert_checked", None) is not content:
            _litert_allocates(content, "TFLiteConverter.convert made (quantized or trainable)")
        return content

    convert_onnx.__wrapped__ = original
    convert.__wrapped__ = original_convert
    convert_module.convert_onnx = convert_onnx
    api.TFLiteConverter.convert = convert
    _LITERT_GUARD.extend([(convert_module, "convert_onnx", original),
                          (api.TFLiteConverter, "convert", original_convert)])


def pytest_configure(config):
    _install_litert_guard()


def pytest_unconfigure(config):
    while _LITERT_GUARD:
        owner, name, original = _LITERT_GUARD.pop()
        setattr(owner, name, original)
