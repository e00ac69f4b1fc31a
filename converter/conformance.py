"""ONNX node conformance: convert each of ONNX's backend node test cases (their inputs stay graph
inputs), run it in edgelite's interpreter and compare with the expected outputs.

The cases and the scoring come from `onnx_node_tests.py` (the shared tools folder: it generates the
cases from the installed onnx and compares with onnx's own tolerances). The denominator is every
case whose ops are all in ISSUE_OPS, less the exclusions listed in `conformance_exclusions.txt`
(dtypes `.tflite` cannot hold, training mode), each with its reason.

    python benchmarks/onnx_conformance.py          # counts per op
"""
from __future__ import annotations

import fnmatch
import os
import sys
from pathlib import Path

import numpy as np

from .lower import body_graphs

# The converter's op list (issue 4).
ISSUE_OPS = frozenset("""
Add Sub Mul Div Pow Sqrt Reciprocal Neg Abs Exp Log Sin Cos Tanh Sigmoid HardSigmoid HardSwish
Relu LeakyRelu PRelu Elu Selu Gelu Erf Softplus Clip Min Max Sum Where Equal Less Greater
LessOrEqual GreaterOrEqual Not And Or Cast Floor Ceil Round Sign Conv ConvTranspose Gemm MatMul
BatchNormalization InstanceNormalization LayerNormalization MaxPool AveragePool GlobalAveragePool
GlobalMaxPool ReduceMean ReduceSum ReduceMax ReduceMin ReduceProd ReduceL2 ArgMax ArgMin Softmax
LogSoftmax Reshape Flatten Squeeze Unsqueeze Transpose Concat Split Slice Gather GatherElements
Expand Tile Pad Resize Upsample DepthToSpace SpaceToDepth Shape Size ConstantOfShape Range
Constant Identity Dropout If LSTM GRU TopK CumSum Einsum
""".split())

EXCLUSIONS_FILE = Path(__file__).with_name("conformance_exclusions.txt")
TOOL_NAME = "onnx_node_tests.py"


def tool():
    """The shared `onnx_node_tests` module ($EDGELITE_SHARED_TOOLS, else ../shared/tools beside
    the repository, else `tools` beside $EDGELITE_MODELS), or None."""
    candidates = [os.environ.get("EDGELITE_SHARED_TOOLS"),
                  Path(__file__).resolve().parents[1].parent / "shared" / "tools",
                  os.environ.get("EDGELITE_MODELS") and Path(os.environ["EDGELITE_MODELS"]).parent
                  / "tools"]
    folder = next((Path(c) for c in candidates if c and (Path(c) / TOOL_NAME).is_file()), None)
    if folder is None:
        return None
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    import onnx_node_tests
    return onnx_node_tests


def case_root(module) -> str:
    """The folder of generated cases; generated (~10 s) when there is none."""
    try:
        return module.find_root()
    except FileNotFoundError:
        module.generate(os.path.dirname(module.DEFAULT_GENERATED))
        return module.find_root()


def load_exclusions(path: Path = EXCLUSIONS_FILE) -> list:
    """[(case-name pattern, reason)] from the exclusions file: `pattern  # reason` lines."""
    rules = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        pattern, _, reason = line.partition("#")
        rules.append((pattern.strip(), reason.strip()))
    return rules


def excluded(name: str, rules: list) -> str | None:
    """The reason `name` is excluded, or None."""
    for pattern, reason in rules:
        if fnmatch.fnmatchcase(name, pattern):
            return reason
    return None


def all_ops(graph) -> set:
    """Op types of a graph and of every subgraph in it ("domain::Op" outside the default)."""
    ops = set()
    for node in graph.node:
        ops.add(node.op_type if node.domain in ("", "ai.onnx") else
                f"{node.domain}::{node.op_type}")
        for _, g in body_graphs(node):
            ops |= all_ops(g)
    return ops


# ONNX element types a `.tflite` tensor cannot hold, by name.
UNHOLDABLE = {8: "string", 14: "complex64", 15: "complex128", 16: "bfloat16",
              17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2", 20: "float8e5m2fnuz",
              21: "uint4", 22: "int4", 23: "float4e2m1", 24: "float8e8m0", 25: "uint2",
              26: "int2"}


def exclusion_reason(model) -> str | None:
    """Why a case leaves the denominator by the issue's rules, read from its model: a type
    `.tflite` cannot hold (an input, output, initializer, Cast target or constant), a value
    that is not a tensor (sequences, optionals), or training mode. None when it stays."""
    from onnx import helper

    types, kinds, training = set(), set(), False
    graphs = [model.graph]
    while graphs:
        g = graphs.pop()
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            kind = vi.type.WhichOneof("value")
            if kind != "tensor_type":
                kinds.add(kind.replace("_type", ""))
            else:
                types.add(vi.type.tensor_type.elem_type)
        types.update(init.data_type for init in g.initializer)
        for node in g.node:
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            if node.op_type in ("Cast", "CastLike") and "to" in attrs:
                types.add(attrs["to"])
            for a in node.attribute:
                if a.HasField("t"):
                    types.add(a.t.data_type)
                if a.HasField("g"):
                    graphs.append(a.g)
                graphs.extend(a.graphs)
            if node.op_type == "BatchNormalization" and attrs.get("training_mode"):
                training = True
            if node.op_type == "Dropout" and len(node.input) > 2 and node.input[2]:
                training = True
    bad = sorted(UNHOLDABLE[t] for t in types if t in UNHOLDABLE)
    if bad:
        return f"{', '.join(bad)}: no .tflite tensor type"
    if kinds:
        return f"{', '.join(sorted(kinds))} values: .tflite tensors only"
    if training:
        return "training mode"
    return None


def in_scope(case, rules: list) -> tuple:
    """(counted, reason): whether a case is in the denominator, and why not."""
    import onnx

    ops = all_ops(onnx.load(case.model_path, load_external_data=False).graph)
    outside = sorted(ops - ISSUE_OPS)
    if outside:
        return False, f"ops outside the list: {', '.join(outside)}"
    reason = excluded(case.name, rules)
    if reason:
        return False, reason
    return True, ""


def run_case(case, runtime: str = "edgelite") -> list:
    """Convert the case's model (inputs kept as graph inputs) and run it in edgelite's
    interpreter (or LiteRT's: runtime="litert") on the case's inputs; the outputs in ONNX's
    layout and order."""
    import onnx

    from .convert import convert_onnx

    if runtime == "edgelite":
        from edgelite.interpreter import Interpreter
    else:
        from ai_edge_litert.interpreter import Interpreter
    proto = onnx.load(case.model_path)
    shapes = {name: np.shape(value) for name, value in case.inputs.items()}
    try:
        conversion = convert_onnx(proto, shapes)
    except ValueError as e:  # the tool keeps a message's first line: keep them all
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        raise ValueError(f"{type(e).__name__}: {' | '.join(lines)}") from None
    layout = conversion.io_layout
    feeds = [np.array(np.transpose(np.asarray(case.inputs[entry["name"]]), entry["perm"]),
                      order="C") for entry in layout["inputs"]]
    it = Interpreter(model_content=conversion.content)
    for detail, value in zip(it.get_input_details(), feeds):
        if list(detail["shape"]) != list(value.shape):
            it.resize_tensor_input(detail["index"], list(value.shape))
    it.allocate_tensors()
    for detail, value in zip(it.get_input_details(), feeds):
        it.set_tensor(detail["index"], value)
    it.invoke()
    return [np.transpose(np.array(it.get_tensor(detail["index"])), np.argsort(entry["perm"]))
            for detail, entry in zip(it.get_output_details(), layout["outputs"])]


def counted_cases(module, root: str | None = None, rules: list | None = None):
    """(cases in the denominator, {case name: reason} of the others)."""
    rules = load_exclusions() if rules is None else rules
    keep, skipped = [], {}
    for case in module.iter_cases(root):
        ok, reason = in_scope(case, rules)
        if ok:
            keep.append(case)
        else:
            skipped[case.name] = reason
    return keep, skipped


def score(module, cases: list, runtime: str = "edgelite") -> dict:
    """The tool's score of `runtime` (edgelite, or LiteRT on the same conversions) on `cases`
    (warnings silenced)."""
    import warnings

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return module.score(lambda case: run_case(case, runtime), cases)


def per_op(result: dict, cases: list) -> dict:
    """{op: [passed, counted]} over the counted cases that test ONNX ops directly (a case
    counts under each op of its graph, as the tool counts), and under "(expanded)" the cases
    that run a function's body (`*_expanded*`: other ops spelled in the listed ones)."""
    status = {name: value[0] for name, value in result["cases"].items()}
    table: dict = {}
    for case in cases:
        key = case.name if case.data_set.endswith("_0") else \
            f"{case.name}/{os.path.basename(case.data_set)}"
        for op in ["(expanded)"] if case.expanded else sorted(set(case.op_types)):
            row = table.setdefault(op, [0, 0])
            row[1] += 1
            row[0] += status.get(key) == "pass"
    return dict(sorted(table.items()))


def run(root: str | None = None, pattern: str | None = None, runtime: str = "edgelite"):
    """Score `runtime` on the denominator: (result, counted cases, {excluded case: reason}).
    `pattern` keeps only case names containing it."""
    module = tool()
    if module is None:
        raise FileNotFoundError(f"{TOOL_NAME} not found: set EDGELITE_SHARED_TOOLS or clone "
                                "beside ../shared/tools")
    root = root or case_root(module)
    cases, skipped = counted_cases(module, root)
    if pattern:
        cases = [c for c in cases if pattern in c.name]
    return score(module, cases, runtime), cases, skipped
