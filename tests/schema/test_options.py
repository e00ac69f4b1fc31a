"""Options tables: the IR's field names are the .fbs field names, defaults round-trip."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from edgelite.schema import default_options, options_kind
from edgelite.schema.options import OPTIONS2_CODES, OPTIONS_CODES, _field_names

FBS = Path(__file__).resolve().parents[2] / "schema" / "tflite.fbs"


def _fbs_tables() -> dict:
    text = re.sub(r"//[^\n]*", "", FBS.read_text())
    tables = {}
    for name, body in re.findall(r"table\s+(\w+)[^{]*\{([^}]*)\}", text):
        fields = []
        for decl in body.split(";"):
            m = re.match(r"\s*(\w+)\s*:", decl)
            if m and not re.search(r"\bdeprecated\b", decl):
                fields.append(m.group(1))
        tables[name] = fields
    return tables


TABLES = _fbs_tables()
KINDS = sorted(k for k in {**OPTIONS_CODES, **OPTIONS2_CODES} if k in TABLES)


def test_every_options_union_member_is_parsed():
    assert len(KINDS) > 100


@pytest.mark.parametrize("kind", KINDS)
def test_field_names_are_the_fbs_names(kind):
    assert [snake for snake, _ in _field_names(kind)] == TABLES[kind]


def test_string_fields_load_as_str(models_dir):
    from edgelite.schema import load
    model = load(models_dir / "mwk_okay_nabu.tflite")
    names = [op.options.shared_name for sg in model.subgraphs for op in sg.operators
             if op.op == "VAR_HANDLE"]
    assert names and all(isinstance(n, str) and n for n in names)


def test_conv_dilation_fields():
    opts = default_options("DEPTHWISE_CONV_2D", dilation_w_factor=2)
    assert opts.dilation_w_factor == 2 and opts.dilation_h_factor == 1
    assert options_kind("AVERAGE_POOL_2D") == "Pool2DOptions"
