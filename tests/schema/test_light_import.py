"""edgelite.schema needs numpy and flatbuffers only: it loads and saves a model in a process where
onnx, typer and pyopencl cannot be imported."""
from __future__ import annotations

from tests.blocked import assert_runs_blocked


def test_schema_loads_and_saves_without_heavy_packages(models_dir):
    assert_runs_blocked(f"""
        import edgelite.schema as s
        model = s.load({str(models_dir / "mwk_okay_nabu.tflite")!r})
        data = s.save(model)
        assert s.load(data).subgraphs[0].operators
    """)
