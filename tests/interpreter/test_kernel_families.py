"""kernels/__init__.py's FAMILIES (which module registers which op) against what the modules
really register, and the lazy loading it drives (registry.py)."""
from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import textwrap

import edgelite.interpreter.kernels as kernels
from edgelite.interpreter.kernels import registry
from tests.conftest import REPO_ROOT


def test_the_table_lists_exactly_what_each_module_registers():
    for info in pkgutil.iter_modules(kernels.__path__):   # every file, listed or not
        importlib.import_module(f"{kernels.__name__}.{info.name}")
    listed: dict = {}
    for module, names in kernels.FAMILIES.items():
        for name in names.split():
            listed.setdefault(name, set()).add(module)
    problems = []
    for name in sorted(set(listed) | set(registry.REGISTERED_BY)):
        have, say = registry.REGISTERED_BY.get(name, set()), listed.get(name, set())
        for module in sorted(have - say):
            problems.append(f"{module} registers {name}: add it to FAMILIES[{module!r}]")
        for module in sorted(say - have):
            problems.append(f"FAMILIES[{module!r}] lists {name}, which {module} does not "
                            "register")
    assert not problems, "\n".join(problems)


def _fresh(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, cwd=REPO_ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_model_imports_only_the_kernels_of_its_ops():
    out = _fresh("""
        import sys
        import numpy as np
        from tests.opmodel import In, op_model
        content = op_model("ADD", [In((2, 3)), np.ones(3, np.float32)])
        from edgelite.interpreter import Interpreter
        before = {m for m in sys.modules if m.startswith("edgelite.interpreter.kernels.")}
        it = Interpreter(model_content=content)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], np.zeros((2, 3), np.float32))
        it.invoke()
        assert (it.get_tensor(it.get_output_details()[0]["index"]) == 1).all()
        after = {m for m in sys.modules if m.startswith("edgelite.interpreter.kernels.")}
        print(" ".join(sorted(m.rpartition(".")[2] for m in before)))
        print(" ".join(sorted(m.rpartition(".")[2] for m in after - before)))
    """)
    before, loaded = (line.split() for line in out.splitlines())
    # ADD's families (float, int8, int16, float16) and what they import; not the convolutions,
    # control flow, MediaPipe's ops ...
    assert {"elementwise", "elementwise_int8", "elementwise_int16", "float16"} <= set(loaded)
    assert not {"conv", "control", "mediapipe_ops", "detection", "lstm"} & set(loaded), loaded
    assert not {"elementwise", "conv"} & set(before), before


def test_an_op_missing_from_the_table_is_still_found():
    """The table decides when a module loads, never whether a kernel is found."""
    out = _fresh("""
        from edgelite.interpreter.kernels import registry
        registry._FAMILIES.pop("SOFTMAX")
        print(sorted(registry.KERNELS.get("SOFTMAX", {})))
    """)
    assert "float32" in out and "int8" in out


def test_a_user_custom_op_of_an_edgelite_name_needs_replace():
    """register_custom_op sees edgelite's own kernel even before its module was imported."""
    _fresh("""
        from edgelite.interpreter import register_custom_op
        try:
            register_custom_op("TFLite_Detection_PostProcess", lambda node: None)
        except ValueError as e:
            assert "already registered" in str(e)
        else:
            raise AssertionError("no error")
        register_custom_op("TFLite_Detection_PostProcess", lambda node: None, replace=True)
        from edgelite.interpreter.kernels import registry
        assert registry.CUSTOM_OPS.get("TFLite_Detection_PostProcess")(None) is None
    """)


def test_iterating_the_table_imports_every_kernel():
    out = _fresh("""
        from edgelite.interpreter.kernels import registry, FAMILIES
        n = len(registry.KERNELS)
        import sys
        missing = [m for m in FAMILIES if f"edgelite.interpreter.kernels.{m}" not in sys.modules]
        print(n, missing)
    """)
    n, missing = out.split(" ", 1)
    assert int(n) > 140 and missing.strip() == "[]"
