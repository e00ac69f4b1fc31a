"""Einsum forms against onnxruntime, through edgelite and LiteRT."""
from __future__ import annotations

import pytest

from edgelite.converter.lower_einsum import parse
from tests.converter.onnx_cases import check, model, node

EQUATIONS = {
    "bij,bjk->bik": [(2, 3, 4), (2, 4, 5)],
    "bhqd,bhkd->bhqk": [(1, 2, 5, 4), (1, 2, 6, 4)],
    "bhqk,bhkd->bhqd": [(1, 2, 5, 6), (1, 2, 6, 4)],
    "ij->ji": [(3, 4)],
    "ii->i": [(4, 4)],
    "...ii->...i": [(2, 3, 3)],
    "i,j->ij": [(3,), (4,)],
    "bi,bi->b": [(3, 5), (3, 5)],
    "ij,jk,kl->il": [(2, 3), (3, 4), (4, 5)],
    "abc->": [(2, 3, 4)],
    "abc->ca": [(2, 3, 4)],
    "...ij,...jk->...ik": [(2, 1, 3, 4), (2, 5, 4, 2)],
    "ij,ij->ij": [(3, 4), (3, 4)],
    "ij,kj": [(3, 4), (5, 4)],
}


@pytest.mark.parametrize("equation", list(EQUATIONS))
def test_einsum(equation):
    shapes = EQUATIONS[equation]
    names = [f"x{k}" for k in range(len(shapes))]
    proto = model([node("Einsum", names, ["y"], equation=equation)],
                  list(zip(names, [list(s) for s in shapes])), ["y"], opset=12)
    conversion = check(proto)
    assert "TRANSPOSE" not in conversion.ops_out or equation in ("ij->ji", "abc->ca",
                                                                  "bhqd,bhkd->bhqk", "ij,kj")


def test_parse_implicit_output_and_ellipsis():
    assert parse("ij,jk", [2, 2]) == (["ij", "jk"], "ik")
    assert parse("...ij->...ji", [4]) == (["01ij"], "01ji")
    assert parse("b...,b...", [3, 2]) == (["b01", "b1"], "01")
