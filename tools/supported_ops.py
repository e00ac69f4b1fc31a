"""Write docs/supported_ops.md: every builtin op of the op table (edgelite.schema.ops) and where it
runs, each column read from the registry that decides it.

    python tools/supported_ops.py          # (re)write the page
    python tools/supported_ops.py --check  # exit 1 when the checked-in page is not current

tests/test_ops_table.py runs the check, so the page follows the registries.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parent.parent / "docs" / "supported_ops.md"
CPU_KEYS = ("float32", "int8", "int16", "hybrid")
YES = "✓"


def registries() -> dict:
    """What each layer supports, from its own registry."""
    from edgelite.converter.lowerings import supported_ops as onnx_ops
    from edgelite.converter.quantize.rules import OUTPUT
    from edgelite.delegates.opencl.ops import OPS as OPENCL
    from edgelite.interpreter.kernels.registry import CUSTOM_OPS, KERNELS
    from edgelite.interpreter.training import RULES as GRADIENTS

    custom = sorted(name for name, prepare in CUSTOM_OPS.items()     # edgelite's, not a user's
                    if getattr(prepare, "__module__", "").startswith("edgelite."))
    return {"kernels": KERNELS, "custom": custom, "opencl": set(OPENCL),
            "gradients": set(GRADIENTS), "quantize": set(OUTPUT), "onnx": onnx_ops()}


def _notes(f) -> str:
    notes = []
    if f.activation:
        notes.append("fused activation")
    if f.side_effects:
        notes.append("side effects")
    if f.versions.introduced != "1.5.0":
        notes.append(f"TFLite {f.versions.introduced}+")
    return ", ".join(notes)


def _wrapped(words: list, width: int = 100) -> list:
    lines, line = [], ""
    for w in words:
        if line and len(line) + 2 + len(w) > width:
            lines.append(line + ",")
            line = w
        else:
            line = f"{line}, {w}" if line else w
    return lines + ([line] if line else [])


def render() -> str:
    from edgelite.schema.ops import OPS
    from edgelite.schema.options import OPERATOR_CODES

    r = registries()
    kernels = r["kernels"]
    rows = []
    for op, f in OPS.items():
        keys = kernels.get(op, {})
        other = ", ".join(sorted(k for k in keys if k not in CPU_KEYS))
        marks = [YES if k in keys else "" for k in CPU_KEYS]
        marks += [other, YES if op in r["opencl"] else "", YES if op in r["gradients"] else "",
                  YES if op in r["quantize"] else "", _notes(f)]
        rows.append(f"| {op} | " + " | ".join(marks) + " |")
    count = {k: sum(k in kernels.get(op, {}) for op in OPS) for k in CPU_KEYS}
    without = sorted(set(OPERATOR_CODES) - set(OPS) - {"PLACEHOLDER_FOR_GREATER_OP_CODES"})
    return "\n".join([
        "# Supported ops",
        "",
        "<!-- Written by `python tools/supported_ops.py` from edgelite's registries; do not edit "
        "(tests/test_ops_table.py fails when it is not current). -->",
        "",
        "Every builtin op of edgelite's op table (`edgelite.schema.ops`), and where it runs:",
        "",
        "- **float32, int8, int16, hybrid**: the CPU interpreter has a kernel for that "
        "arithmetic (the kernel registry, `edgelite.interpreter.kernels`; hybrid: float "
        "activations with int8 weights); **other types**: the other types it has kernels for.",
        "- **OpenCL**: the OpenCL delegate runs it (`delegates/opencl/ops.py`; float tensors, "
        "and a node can still decline: the delegate reports which ops run where).",
        "- **gradient**: on-device training has a gradient rule for it "
        "(`edgelite.interpreter.training.RULES`).",
        "- **quantize**: full-integer quantization (int8, 16x8) can make it integer "
        "(`converter/quantize/rules.py`), where the interpreter has the kernel.",
        "- **notes**: from the op table: the converter may fuse an activation into it; it has "
        "side effects (it runs where the file puts it); the TFLite release that first ran it.",
        "",
        f"{len(OPS)} ops: {count['float32']} with float32 kernels, {count['int8']} int8, "
        f"{count['int16']} int16, {count['hybrid']} hybrid; {len(r['opencl'])} on OpenCL, "
        f"{len(r['gradients'])} with gradients.",
        "",
        "| op | float32 | int8 | int16 | hybrid | other types | OpenCL | gradient | quantize "
        "| notes |",
        "|---|:-:|:-:|:-:|:-:|---|:-:|:-:|:-:|---|",
        *rows,
        "",
        "## Custom ops",
        "",
        "The interpreter's kernels for custom ops (a model's `custom_code`; add your own with "
        "`register_custom_op`): " + ", ".join(f"`{c}`" for c in r["custom"]) + ".",
        "",
        "## Builtin ops without kernels",
        "",
        "The format's other builtin ops (a model using one fails to prepare, naming it):",
        "",
        *_wrapped(without),
        "",
        "## ONNX ops the converter lowers",
        "",
        f"{len(r['onnx'])} op types of the default ONNX domain "
        "(`edgelite.converter.lowerings`):",
        "",
        *_wrapped(r["onnx"]),
        "",
    ])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when the page is not what the registries say")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not PAGE.exists() or PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE} is not current: run python tools/supported_ops.py", file=sys.stderr)
            return 1
        return 0
    PAGE.parent.mkdir(exist_ok=True)
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
