"""schema/bindings.py serves the generated module's names, compiled one statement at a time."""
from __future__ import annotations

import dis
import re
import subprocess
import sys
import textwrap

import numpy as np

from edgelite.schema import bindings, load
from edgelite.schema import tflite_generated as full
from tests.conftest import REPO_ROOT
from tests.opmodel import In, op_model


def _top_level_names() -> set:
    text = open(bindings.SOURCE, encoding="utf-8").read()
    return set(re.findall(r"^(?:class|def) (\w+)", text, re.M))


def test_every_generated_class_and_function_is_served():
    names = _top_level_names()
    assert len(names) > 1000
    for name in sorted(names):
        ours, theirs = getattr(bindings, name), getattr(full, name)
        assert ours.__name__ == theirs.__name__ == name
        assert type(ours) is type(theirs)
        if isinstance(ours, type):   # the same members, the enums' values alike
            assert ({k: v for k, v in vars(ours).items() if not callable(v)}.keys()
                    == {k: v for k, v in vars(theirs).items() if not callable(v)}.keys())
            for k, v in vars(theirs).items():
                if isinstance(v, int):
                    assert vars(ours)[k] == v, (name, k)


def test_an_unknown_name_is_an_attribute_error():
    assert getattr(bindings, "NoSuchTable", None) is None
    try:
        bindings.NoSuchTable  # noqa: B018
    except AttributeError as e:
        assert "NoSuchTable" in str(e)
    else:
        raise AssertionError("no AttributeError")


def test_code_keeps_the_generated_file_and_its_line_numbers():
    """Tracebacks point into tflite_generated.py at the right line; the loader tells a read
    error of the bindings from its own bugs by that file name."""
    for name in ("Model", "Conv2DOptionsT", "TensorStart"):
        ours, theirs = getattr(bindings, name), getattr(full, name)
        method = (ours.__dict__.get("Init") or ours.__dict__.get("InitFromBuf")
                  if isinstance(ours, type) else ours)
        ref = (theirs.__dict__.get("Init") or theirs.__dict__.get("InitFromBuf")
               if isinstance(theirs, type) else theirs)
        code = getattr(method, "__func__", method).__code__
        ref_code = getattr(ref, "__func__", ref).__code__
        assert code.co_filename == bindings.SOURCE
        assert code.co_firstlineno == ref_code.co_firstlineno


def test_a_model_loads_with_a_few_tables_compiled():
    """In a fresh process: loading a convolution compiles the tables the loader reads and the
    options it meets, not the schema (about 1,100 classes and functions)."""
    code = textwrap.dedent("""
        import sys
        import numpy as np
        from edgelite.schema import bindings, load
        from tests.opmodel import In, op_model
        content = op_model("CONV_2D", [In((1, 4, 4, 2)), np.ones((3, 1, 1, 2), np.float32),
                                       np.zeros(3, np.float32)])
        defined_before = len(bindings._defined)
        model = load(content)
        assert model.subgraphs[0].operators[0].options.kind == "Conv2DOptions"
        print(defined_before, len(bindings._defined), len(bindings._chunks))
    """)
    # the writer (op_model) imports the whole module; the bindings count only their own
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO_ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    before, after, left = map(int, out.stdout.split())
    assert after - before <= 40, (before, after)
    assert left > 1000


def test_threads_never_see_a_half_loaded_class():
    """Eight threads ask for tables at once in a fresh process; each gets classes whose
    methods run (every name they call is defined)."""
    code = textwrap.dedent("""
        import threading
        import numpy as np
        from edgelite.schema import bindings
        from tests.opmodel import In, op_model
        content = op_model("ADD", [In((2, 3)), np.ones(3, np.float32)])
        errors, barrier = [], threading.Barrier(8)
        def read():
            try:
                barrier.wait()
                root = bindings.Model.GetRootAs(content, 0)
                sg = root.Subgraphs(0)
                assert sg.Tensors(0).ShapeAsNumpy().tolist() == [2, 3]
                assert root.OperatorCodes(0).BuiltinCode() == bindings.BuiltinOperator.ADD
                sg.Operators(0).BuiltinOptions()
            except Exception as e:
                errors.append(repr(e))
        threads = [threading.Thread(target=read) for _ in range(8)]
        for t in threads: t.start()
        for t in threads: t.join()
        assert not errors, errors
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO_ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_loads_the_same_through_either_module():
    """What the loader reads through the bindings equals what the whole module reads."""
    content = op_model("DEPTHWISE_CONV_2D", [In((1, 5, 5, 2)), np.ones((1, 3, 3, 2), np.float32),
                                             np.zeros(2, np.float32)],
                       options=dict(stride_w=2, stride_h=2, padding=1))
    model = load(content)
    op = model.subgraphs[0].operators[0]
    raw = full.Model.GetRootAs(content, 0).Subgraphs(0).Operators(0)
    table = raw.BuiltinOptions()
    ref = full.DepthwiseConv2DOptionsT.InitFromBuf(table.Bytes, table.Pos)
    assert op.options.fields["stride_w"] == ref.strideW == 2
    assert op.options.fields["padding"] == ref.padding


def test_without_the_source_the_whole_module_serves():
    """An install without .py files (bytecode only): the bindings fall back to importing the
    whole generated module, and models load as before."""
    code = textwrap.dedent("""
        import builtins, io
        real_open = builtins.open
        def no_source(path, *args, **kwargs):
            if str(path).endswith("tflite_generated.py"):
                raise FileNotFoundError(path)
            return real_open(path, *args, **kwargs)
        builtins.open = no_source
        import numpy as np
        from edgelite.schema import bindings, load
        builtins.open = real_open
        assert bindings._whole is not None
        from tests.opmodel import In, op_model
        model = load(op_model("ADD", [In((2, 3)), np.ones(3, np.float32)]))
        assert model.subgraphs[0].operators[0].opcode.builtin == "ADD"
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO_ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def _names_dis(code) -> set:
    """The global names `code` and the code nested in it read, as dis decodes them."""
    reads = ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS")
    found = {i.argval for i in dis.get_instructions(code) if i.opname in reads}
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            found |= _names_dis(const)
    return found


def test_the_fast_name_scan_reads_what_dis_reads():
    """bindings._names decodes the bytecode itself; on every statement of the generated file it
    finds exactly the global reads that dis finds."""
    text = open(bindings.SOURCE, encoding="utf-8").read()
    starts = [m.start() for m in bindings._TOP.finditer(text)] + [len(text)]
    checked = 0
    for a, b in zip(starts, starts[1:]):
        code = compile(text[a:b], bindings.SOURCE, "exec")
        assert bindings._names(code) == _names_dis(code), text[a:a + 60]
        checked += 1
    assert checked > 1000
