"""The interpreter imports and runs a model with only numpy and flatbuffers: onnx, typer and
pyopencl are made unimportable in a fresh process."""
from __future__ import annotations

import numpy as np

from tests.blocked import assert_runs_blocked
from tests.conftest import REPO_ROOT
from tests.opmodel import In, op_model

def test_interpreter_runs_without_heavy_dependencies(tmp_path):
    path = tmp_path / "add.tflite"
    path.write_bytes(op_model("ADD", [In((2, 3)), np.ones(3, np.float32)]))
    assert_runs_blocked(f"""
        import numpy as np
        from edgelite.interpreter import Interpreter
        it = Interpreter(model_path={str(path)!r})
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], np.zeros((2, 3), np.float32))
        it.invoke()
        out = it.get_tensor(it.get_output_details()[0]["index"])
        assert (out == 1).all(), out
    """)


def test_interpreter_never_imports_the_delegates_package():
    """Imports flow one way (schema <- interpreter <- delegates): no import statement under
    interpreter/, at module level or inside a function, names edgelite.delegates."""
    import ast

    upward = []
    for path in sorted((REPO_ROOT / "interpreter").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            upward += [f"{path.relative_to(REPO_ROOT)}:{node.lineno} {n}" for n in names
                       if n == "edgelite.delegates" or n.startswith("edgelite.delegates.")]
    assert not upward, upward


def test_a_delegate_object_runs_without_the_delegates_package(tmp_path):
    """A delegate passed in as an object (the contract is edgelite.interpreter.delegation's)
    partitions and runs, and no edgelite.delegates module is imported for it."""
    path = tmp_path / "add.tflite"
    path.write_bytes(op_model("ADD", [In((2, 3)), np.ones(3, np.float32)]))
    assert_runs_blocked(f"""
        import numpy as np
        from edgelite.interpreter import Interpreter
        from edgelite.interpreter.delegation import Delegate, placement

        class Doubling(Delegate):
            name = "doubling"
            def support(self, node):
                return None
            def prepare(self, partition):
                (run,) = partition.cpu_runs
                consts = [t.data for t in partition.nodes[0].inputs]
                def step(x, out):
                    run(x, consts[1], out)
                    out *= 2
                return step

        it = Interpreter(model_path={str(path)!r}, experimental_delegates=[Doubling()])
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], np.zeros((2, 3), np.float32))
        it.invoke()
        out = it.get_tensor(it.get_output_details()[0]["index"])
        assert (out == 2).all(), out
        assert [p["where"] for p in placement(it)] == ["doubling"], placement(it)
        loaded = sorted(m for m in sys.modules if m.startswith("edgelite.delegates"))
        assert not loaded, loaded
    """)
