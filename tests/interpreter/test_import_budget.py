"""Start-up, timing-free: what `import edgelite.interpreter` and running a model import.

The import's cost without cached bytecode is compiling edgelite's own source (numpy's and the
standard library's `.pyc` come installed), so its guards are which modules load and how many bytes
of edgelite source they hold. `benchmarks/bench_import.py` measures the seconds (goal: 0.2 s).
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np

from tests.blocked import assert_runs_blocked, blocker
from tests.conftest import REPO_ROOT
from tests.opmodel import In, op_model

# Modules a model's load and invoke must not import: the whole generated schema (19,800 lines;
# schema/bindings.py compiles the tables used), the writer that needs it, the metadata
# bindings, and the layers above the interpreter.
NOT_FOR_INFERENCE = ("edgelite.schema.tflite_generated", "edgelite.schema.writer",
                     "edgelite.schema.metadata_schema_generated", "edgelite.schema.metadata",
                     "edgelite.converter", "edgelite.delegates", "edgelite.cli",
                     "edgelite.distributed", "edgelite.interpreter.training")

# Bytes of edgelite source that `import edgelite.interpreter` compiles: 207 kB (24 modules) once
# the generated schema (680 kB) and the kernel modules (~480 kB, now imported as their ops are
# looked up) left the import path; 1.35 MB before. Raise it only with a reason: every 100 kB is
# ~25 ms of CPU at each start without bytecode. 262 kB: arena.plan's step index (+0.8 kB, 16,000
# tensors planned in 0.25 s instead of 6.4 s).
SOURCE_BUDGET = 262_000


def _conv_model(tmp_path):
    path = tmp_path / "conv.tflite"
    path.write_bytes(op_model("CONV_2D", [In((1, 6, 6, 3)), np.ones((4, 3, 3, 3), np.float32),
                                          np.zeros(4, np.float32)],
                              options=dict(stride_w=1, stride_h=1, padding=1,
                                           fused_activation_function=1)))
    return path


def test_inference_imports_no_schema_writer_converter_or_delegates(tmp_path):
    path = _conv_model(tmp_path)
    assert_runs_blocked(f"""
        import numpy as np
        from edgelite.interpreter import Interpreter
        it = Interpreter(model_path={str(path)!r})
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], np.ones((1, 6, 6, 3), np.float32))
        it.invoke()
        out = it.get_tensor(it.get_output_details()[0]["index"])
        assert out.shape == (1, 4, 4, 4) and (out == 27).all(), out
        forbidden = {NOT_FOR_INFERENCE!r}
        loaded = sorted(m for m in sys.modules if m.startswith(forbidden))
        assert not loaded, f"inference imported {{loaded}}"
    """)


def test_import_compiles_at_most_the_source_budget():
    code = blocker() + textwrap.dedent("""
        import json, os
        import edgelite.interpreter
        sizes = {n: os.path.getsize(m.__file__) for n, m in list(sys.modules.items())
                 if n.startswith("edgelite") and getattr(m, "__file__", None)}
        print(json.dumps(sizes))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO_ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    sizes = json.loads(out.stdout)
    total = sum(sizes.values())
    largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:8]
    assert total <= SOURCE_BUDGET, (f"import edgelite.interpreter compiles {total} bytes of "
                                    f"source (budget {SOURCE_BUDGET}); largest: {largest}")
    assert not any(n.startswith(NOT_FOR_INFERENCE) for n in sizes), sorted(sizes)
