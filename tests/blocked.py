"""Code run in a fresh interpreter where the heavy optional packages cannot be imported: what the
light-import tests of the schema, the interpreter, on-device training and the runtime-only
command line run their code under."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import REPO_ROOT

# What the runtime install (numpy and flatbuffers) leaves out.
HEAVY = ("onnx", "onnxruntime", "typer", "click", "rich", "pydantic", "pyopencl",
         "ai_edge_litert", "tensorflow", "scipy", "torch")


def blocker(blocked=HEAVY) -> str:
    """Code for the child's first lines: a meta path finder that refuses the `blocked` packages
    (their names in BLOCKED there, for the child's own checks of sys.modules)."""
    return textwrap.dedent(f"""
        import sys
        BLOCKED = {tuple(blocked)!r}

        class Blocker:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError(f"{{name}} is blocked in this test")
                return None

        sys.meta_path.insert(0, Blocker())
        if BLOCKED:
            try:
                __import__(BLOCKED[0])
            except ImportError:
                pass
            else:
                raise SystemExit("the blocker does not work")
    """)


def run_blocked(code: str, blocked=HEAVY, timeout: int = 120) -> subprocess.CompletedProcess:
    """Run `code` (dedented) in a fresh interpreter, from the repository root, with the blocker
    installed first."""
    return subprocess.run([sys.executable, "-c", blocker(blocked) + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT)


def assert_runs_blocked(code: str) -> None:
    """`code` runs under the blocker, imports none of the blocked packages (checked after it)
    and exits cleanly."""
    result = run_blocked(textwrap.dedent(code) + textwrap.dedent("""
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
        assert not loaded, loaded
        print("ok")
    """))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok", result.stdout
