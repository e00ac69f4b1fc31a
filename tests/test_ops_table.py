"""One table of per-op facts (edgelite.schema.ops): every op a layer names has a row, the layers'
views of it are what it says, and docs/supported_ops.md is what the registries say."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from edgelite.schema.ops import OPS, data_input
from edgelite.schema.options import OPERATOR_CODES

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location("supported_ops",
                                                  ROOT / "tools" / "supported_ops.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_op_a_layer_names_has_a_row():
    from edgelite.converter.pass_layout import RULES as LAYOUT
    from edgelite.converter.quantize import full_integer, rules, weights_only
    from edgelite.delegates.opencl.fuse import CLAMPING
    from edgelite.delegates.opencl.ops import OPS as OPENCL
    from edgelite.interpreter.kernels.registry import KERNELS
    from edgelite.interpreter.training import RULES as GRADIENTS
    from edgelite.interpreter.training.params import LAYERS

    named = {
        "kernels": set(KERNELS), "opencl": set(OPENCL) | CLAMPING, "gradients": set(GRADIENTS),
        "training layers": set(LAYERS), "quantization": set(rules.OUTPUT) | set(rules.FIXED)
        | set(rules.DATA) | rules.SAME_PARAMS_CONSTANTS | set(full_integer.RESHAPES),
        "int4 weights": set(weights_only.INT4_OPS),
        # (its ELEMENTWISE also names ONES_LIKE, which is no builtin op of the format)
        "layout pass": set(LAYOUT) & set(OPERATOR_CODES),
    }
    missing = {layer: sorted(ops - set(OPS)) for layer, ops in named.items() if ops - set(OPS)}
    assert not missing, f"ops without a row in schema/ops.py: {missing}"
    assert CLAMPING <= set(OPENCL)


def test_the_kernels_add_no_data_inputs_of_their_own():
    from edgelite.interpreter.kernels.registry import DATA_INPUT

    assert DATA_INPUT == {op: data_input(op) for op in OPS if data_input(op)}


def test_supported_ops_page_is_current():
    """In a fresh process: other tests register kernels of their own in this one."""
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "supported_ops.py"), "--check"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


def test_supported_ops_check_fails_on_a_stale_page(tmp_path, monkeypatch):
    tool = _tool()
    monkeypatch.setattr(tool, "PAGE", tmp_path / "supported_ops.md")
    assert tool.main(["--check"]) == 1
    assert tool.main([]) == 0
    assert tool.main(["--check"]) == 0
    tool.PAGE.write_text(tool.PAGE.read_text(encoding="utf-8").replace("✓", "", 1),
                         encoding="utf-8")
    assert tool.main(["--check"]) == 1
