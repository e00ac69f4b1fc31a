"""edgelite.schema needs numpy and flatbuffers only: it loads and saves a model in a process where
onnx, typer and pyopencl cannot be imported."""
from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCKED = ("onnx", "onnxruntime", "typer", "pyopencl", "ai_edge_litert", "tensorflow")

# Runs first in the child: a meta path finder that refuses the blocked packages.
BLOCKER = textwrap.dedent(f"""
    import sys
    BLOCKED = {BLOCKED!r}

    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{{name}} is blocked in this test")
            return None

    sys.meta_path.insert(0, Blocker())
    try:
        import onnx
    except ImportError:
        pass
    else:
        raise SystemExit("the blocker does not work")
""")


def run_blocked(code: str, cwd=None, env=None) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter where the heavy optional packages are unimportable."""
    return subprocess.run([sys.executable, "-c", BLOCKER + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=120, cwd=cwd, env=env)


def test_schema_loads_and_saves_without_heavy_packages(models_dir):
    result = run_blocked(f"""
        import edgelite.schema as s
        model = s.load({str(models_dir / "mwk_okay_nabu.tflite")!r})
        data = s.save(model)
        assert s.load(data).subgraphs[0].operators
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
        assert not heavy, heavy
        print("OK", len(data))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("OK")
