"""What the structured fuzzer's 30,000-seed run found after the any-op family landed (issue 19):
internal exceptions that reached the user wrapped in an error (an OverflowError from a float's
inf in DILATE's dilations, a TypeError from RANDOM_UNIFORM's 0-d shape, numpy's "array is too
big" or OverflowError from a TILE whose output has a dimension past int32 beside a 0), and
files LiteRT refuses as invalid that edgelite ran (DILATE's dilations or REDUCE_WINDOW's window
not of the one type LiteRT takes, RANDOM_UNIFORM's shape not a vector). Each is now a named
refusal, as LiteRT refuses it."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import KernelError
from tests.interpreter.test_hostile_files import _edgelite, _litert, _one_op
from tests.schema import hostile_worker

pytest.importorskip("ai_edge_litert", reason="LiteRT (ai-edge-litert) is the oracle")
BIG = 2 ** 31 - 1
X22 = ((2, 2), "float32")
PAD = ((), "float32")


def _dilate(dtype, dilations):
    return _one_op("DILATE", [X22, ((2,), dtype), PAD], [((2, 3), "float32")],
                   {1: np.array(dilations, dtype), 2: np.float32(0)})


def _reduce_window(dtype):
    from edgelite.schema import load, save
    content = _one_op("REDUCE_WINDOW", [((4,), "float32"), PAD, ((1,), dtype), ((1,), dtype),
                                        ((1,), dtype)], [((3,), "float32")],
                      {1: np.float32(0), 2: np.array([2], dtype), 3: np.array([1], dtype),
                       4: np.array([1], dtype)})
    model = load(content)
    op = model.subgraphs[0].operators[0]
    op.options = op.options.replace(reduce_function=1)   # ADD
    return save(model)


def _random_uniform(shape, value=None):
    consts = {} if value is None else {0: np.array(value, np.int32).reshape(shape)}
    return _one_op("RANDOM_UNIFORM", [(shape, "int32")], [((3,), "float32")], consts)


def _tile(x_shape, dtype, multiples, const_x=False):
    consts = {1: np.array(multiples, dtype)}
    if const_x:
        consts[0] = np.ones(x_shape, np.float32)
    return _one_op("TILE", [(x_shape, "float32"), ((len(multiples),), dtype)],
                   [((1,), "float32")], consts)


def _range(shapes, outputs: int):
    consts = {k: np.full(shape, v, np.int32) for k, (shape, v) in enumerate(zip(shapes,
                                                                            (0, 5, 1)))}
    return _one_op("RANGE", [(shape, "int32") for shape in shapes],
                   [((5,), "int32")] * outputs, consts)


# case -> (file, what edgelite's refusal says)
CASES = {
    "DILATE dilations float inf": (lambda: _dilate("float32", [np.inf, 2]),
                                   r"DILATE\): the dilations \(input 1\) must be int32, got "
                                   r"float32"),
    "DILATE dilations int64": (lambda: _dilate("int64", [1, 2]),
                               r"DILATE\): the dilations \(input 1\) must be int32, got int64"),
    "REDUCE_WINDOW window int32": (lambda: _reduce_window("int32"),
                                   r"REDUCE_WINDOW\): window_shape \(input 2\) must be int64, "
                                   r"got int32"),
    "RANDOM_UNIFORM 0-d shape constant": (lambda: _random_uniform((), 3),
                                          r"RANDOM_UNIFORM\): the shape \(input 0\) must be a "
                                          r"vector, got a tensor of rank 0"),
    "RANDOM_UNIFORM 0-d shape input": (lambda: _random_uniform(()),
                                       r"RANDOM_UNIFORM\): the shape \(input 0\) must be a "
                                       r"vector, got a tensor of rank 0"),
    "RANDOM_UNIFORM 2-d shape": (lambda: _random_uniform((1, 2), [3, 1]),
                                 r"the shape \(input 0\) must be a vector, got a tensor of "
                                 r"rank 2"),
    "LOG_SOFTMAX to int64": (lambda: _one_op("LOG_SOFTMAX", [((2, 3), "float32")],
                                             [((2, 3), "int64")]),
                             r"LOG_SOFTMAX\): the output must be float32 \(the input's type\), "
                             r"got int64"),
    "L2_NORMALIZATION to int32": (lambda: _one_op("L2_NORMALIZATION", [((2, 3), "float32")],
                                                  [((2, 3), "int32")],
                                                  {0: np.ones((2, 3), np.float32)}),
                                  r"L2_NORMALIZATION\): the output must be float32"),
    "SHAPE with 2 outputs": (lambda: _one_op("SHAPE", [((), "float32")],
                                             [((0,), "int32"), ((1, 3), "int32")],
                                             {0: np.float32(1)}),
                             r"SHAPE\): has 2 outputs; SHAPE writes 1"),
    "RANK with 2 outputs": (lambda: _one_op("RANK", [((2, 5), "float32")],
                                            [((), "int32"), ((), "int32")],
                                            {0: np.ones((2, 5), np.float32)}),
                            r"RANK\): has 2 outputs; RANK writes 1"),
    "RANGE with 2 outputs": (lambda: _range([(), (), ()], 2),
                             r"RANGE\): has 2 outputs; RANGE writes 1"),
    "RANGE of a [1, 1] start": (lambda: _range([(1, 1), (), ()], 1),
                                r"RANGE\): the start \(input 0\) must be a scalar, got shape "
                                r"\[1, 1\]"),
    "TILE [1, 2] by [0, 2^31-1]": (lambda: _tile((1, 2), "int32", [0, BIG]),   # seed 13813
                                   r"TILE\): output 0's shape \[0, 4294967294\] has a "
                                   r"dimension past 2\^31-1"),
    "TILE past int32 beside 0": (lambda: _tile((0, 5), "int32", [BIG, BIG]),
                                 r"TILE\): output 0's shape \[0, 10737418235\] has a dimension "
                                 r"past 2\^31-1"),
    "TILE past int64 beside 0": (lambda: _tile((0, 5), "int64", [2 ** 62, 2 ** 62]),
                                 r"TILE\): output 0's shape \[0, 23058430092136939520\] has a "
                                 r"dimension past 2\^31-1"),
    "TILE past int64 folded": (lambda: _tile((0, 5), "int64", [2 ** 62, 2 ** 62], True),
                               r"TILE\): output 0's shape \[0, 23058430092136939520\] has a "
                               r"dimension past 2\^31-1"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refused_by_name_as_litert_refuses(case):
    make, pattern = CASES[case]
    content = make()
    assert _litert(content)[0] == "refused"
    with pytest.raises(KernelError, match=pattern) as info:
        _edgelite(content)
    assert not hostile_worker._is_internal(info.value), info.value


def test_the_valid_forms_still_run_as_in_litert():
    """What the checks above leave alone: int32 dilations, int64 windows, a vector shape."""
    for content in (_dilate("int32", [1, 2]), _reduce_window("int64")):
        outcome, theirs = _litert(content)
        assert outcome == "ran"
        np.testing.assert_array_equal(_edgelite(content)[0], theirs[0])
    content = _random_uniform((2,), [3, 1])
    assert _litert(content)[0] == "ran"
    assert _edgelite(content)[0].shape == (3, 1)


def test_a_dimension_past_int32_while_running_is_named():
    """TILE whose multiples arrive while running: a dimension past int32 beside a 0 (0 bytes,
    which the budget passes) is refused by name, not numpy's "array is too big"."""
    from edgelite.interpreter import Interpreter
    content = _one_op("TILE", [((0, 5), "float32"), ((2,), "int32")], [((1,), "float32")])
    it = Interpreter(model_content=content)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[1]["index"], np.int32([BIG, BIG]))
    with pytest.raises(KernelError, match=r"TILE\): an output \[0, 10737418235\] has a "
                                          r"dimension past 2\^31-1"):
        it.invoke()


def test_an_empty_shape_numpy_cannot_make_is_a_deliberate_leniency_the_other_way():
    """FILL of [0, 2^31-1, 65536, 2^31-1] (fuzz seed 5973): no bytes, but numpy cannot shape an
    array whose other dimensions multiply past 2^63 bytes ("array is too big" before); LiteRT
    runs it (an empty output, which its Python get_tensor cannot give either), edgelite refuses
    it by name."""
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    content = _one_op("FILL", [((4,), "int32"), ((), "float32")], [((1,), "float32")],
                      {0: np.int32([0, BIG, 65536, BIG]), 1: np.float32(1)})
    theirs = LiteRT(model_content=content)
    theirs.allocate_tensors()
    theirs.invoke()
    assert list(theirs.get_output_details()[0]["shape"]) == [0, BIG, 65536, BIG]
    with pytest.raises(KernelError, match=r"FILL\): output 0's shape \[0, 2147483647, 65536, "
                                          r"2147483647\] is empty, but its other dimensions "
                                          r"multiply to \d+, more than an array can have"):
        _edgelite(content)
