"""Conversion work grows linearly with the graph: a chain four times longer costs about four
times the Python lines executed in the converter and the schema (counted with sys.settrace, not
timed), and the passes rebuild their producer/reader maps a fixed number of times whatever the
length (issue 19: a 40k-node Relu chain took 62.8 s where 5k took 3.2 s). Times are in
benchmarks/bench_convert_scaling.py."""
from __future__ import annotations

import sys

import pytest

from edgelite.converter.convert import convert_onnx
from edgelite.converter.editor import Editor
from tests.converter.chains import chain


def work(model) -> tuple:
    """(lines executed in edgelite's converter and schema, editor map rebuilds) to convert."""
    lines = [0]

    def trace(frame, event, arg):
        if event == "call":
            name = frame.f_code.co_filename
            return trace if ("/converter/" in name or "/schema/" in name) else None
        lines[0] += 1
        return trace

    rebuilds = Editor.rebuilds
    sys.settrace(trace)
    try:
        conversion = convert_onnx(model)
    finally:
        sys.settrace(None)
    return lines[0], Editor.rebuilds - rebuilds, conversion


@pytest.mark.parametrize("kind, n", [("relu", 100), ("add_relu", 100), ("conv_relu", 50)])
def test_conversion_work_is_linear_in_chain_length(kind, n):
    small_lines, small_rebuilds, _ = work(chain(kind, n))
    big_lines, big_rebuilds, conversion = work(chain(kind, 4 * n))
    if kind != "relu":   # every Relu fused, every transpose pair cancelled: the edits were made
        assert conversion.ops_out == {"ADD" if kind == "add_relu" else "CONV_2D": 4 * n}
    # linear: x4 (plus fixed costs, so a little under); the old passes were x11 to x16
    assert big_lines < 5 * small_lines, (small_lines, big_lines)
    assert big_rebuilds == small_rebuilds, (small_rebuilds, big_rebuilds)


def test_editor_keeps_its_maps_current_through_its_edits():
    """After edits made through the editor, its maps equal freshly built ones."""
    model = convert_onnx(chain("add_relu", 6)).model
    sg = model.subgraphs[0]
    ed = Editor(model, sg)
    first, second = sg.operators[0], sg.operators[1]
    relu = ed.new_op("RELU", [first.outputs[0]], [ed.tensor("r", ed.shape(first.outputs[0]),
                                                            "float32")])
    ed.insert_after(first, relu)
    ed.set_input(second, 0, relu.outputs[0])
    ed.replace_uses(sg.operators[-1].outputs[0], sg.operators[-2].outputs[0])
    ed.remove(sg.operators[-1])
    assert ed.has(relu) and not ed.has(first.__class__(first.opcode, [], []))
    fresh = Editor(model, sg)
    assert {t: id(op) for t, op in ed.prod.items()} == {t: id(op) for t, op in fresh.prod.items()}
    assert {t: [id(o) for o in ops] for t, ops in ed.cons.items()} == \
        {t: [id(o) for o in ops] for t, ops in fresh.cons.items()}
    assert [ed._index(op) for op in sg.operators] == list(range(len(sg.operators)))
