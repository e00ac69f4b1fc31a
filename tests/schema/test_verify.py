"""The FlatBuffers verifier (schema/verify.py): the files LiteRT's verifier rejects, edgelite's
rejects too, before reading anything (issue 19: a corrupt file that LiteRT refuses ran with
outputs 0.13 off); every sound file passes."""
from __future__ import annotations

import pytest

from edgelite.schema import ModelError, load, save
from edgelite.schema.verify import schema, verify
from tests.schema import hostile
from tests.schema._litert import tflite_files


@pytest.mark.parametrize("kind", hostile.CORRUPTIONS)
def test_a_fault_litert_verifier_rejects_is_rejected(kind):
    """Each fault: LiteRT says "not a valid Flatbuffer buffer"; edgelite's load says which
    field of which table is wrong (an unterminated name and an odd vtable size loaded and ran
    before)."""
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    content = hostile.corrupt(kind)
    with pytest.raises(ValueError, match="not a valid Flatbuffer buffer"):
        LiteRT(model_content=content)
    with pytest.raises(ModelError, match=r"the FlatBuffers verifier refuses it.*Model"):
        load(content)


def test_the_messages_name_the_field():
    with pytest.raises(ModelError, match=r"Model\.subgraphs\[0\]\.tensors\[0\]\.name: the "
                                         r"string at byte \d+ has no terminating 0"):
        verify(hostile.corrupt("unterminated_name"))
    with pytest.raises(ModelError, match=r"Model\.subgraphs\[0\]\.tensors\[0\]\.shape: a vector "
                                         r"of \d+ elements at byte \d+"):
        verify(hostile.corrupt("shape_past_end"))


def test_sound_files_pass():
    """The shared models (when present), the large format, and models built here verify."""
    for path in tflite_files():
        verify(path.read_bytes())
    verify(save(hostile.fully_connected(), large=True))
    verify(hostile.conv())
    verify(hostile.while_loop())


def test_the_schema_is_read_whole():
    """Every table, union and enum of tflite.fbs is known to the verifier (a parse that
    dropped a table would leave its fields unchecked)."""
    from edgelite.schema import tflite_generated as fb
    s = schema()
    generated = {name for name in dir(fb) if hasattr(getattr(fb, name), "GetRootAs")}
    assert generated - {"ReduceWindowOptions"} <= set(s.tables), generated - set(s.tables)
    assert s.root == "Model"
    assert len(s.unions["BuiltinOptions"]) > 120 and set(s.unions["BuiltinOptions"].values()) \
        <= set(s.tables) | {"ReduceWindowOptions"}
    conv_fields = {name: slot for name, slot, _ in s.tables["Conv2DOptions"]}
    assert conv_fields["padding"] == 4 and conv_fields["stride_w"] == 6
