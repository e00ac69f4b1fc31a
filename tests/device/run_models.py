"""Run shared models in edgelite's Interpreter and save their outputs: a script with no test
framework and no repository imports, so it runs wherever only edgelite, numpy and flatbuffers are
installed (a numpy 1.24 venv; a Debian arm64/armhf root under qemu).

    python run_models.py MODELS_DIR OUT.npz NAME[:ref] ...

NAME is a model in MODELS_DIR (NAME.tflite), fed refs/<input ref>.npz's input_0; `:ref` runs it
under OpResolverType.BUILTIN_REF. OUT.npz gets `NAME[:ref]/output_K` for each output, and
`NAME[:ref]/seconds` (allocate + one invoke); one line a model is printed.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

# model -> its reference file in refs/ (the manifest's ref_io)
REFS = {
    "digits_cnn": "digits_cnn_tfl",
    "digits_cnn_int8": "digits_cnn_int8_tfl",
    "mobilenet_v2": "mobilenet_v2",
    "mobilenet_v2_int8": "mobilenet_v2_int8",
    "mp_face_detection": "mp_face_detection",
    "mp_hand_landmark": "mp_hand_landmark",
    "mwk_okay_nabu": "mwk_okay_nabu",
}


def run(models_dir: Path, spec: str) -> tuple[list, float]:
    from edgelite.interpreter import Interpreter, OpResolverType

    name, _, mode = spec.partition(":")
    kwargs = {"experimental_op_resolver_type": OpResolverType.BUILTIN_REF} if mode == "ref" else {}
    x = np.load(models_dir / "refs" / f"{REFS.get(name, name)}.npz")["input_0"]
    start = time.perf_counter()
    it = Interpreter(model_path=str(models_dir / f"{name}.tflite"), num_threads=1, **kwargs)
    it.allocate_tensors()
    detail = it.get_input_details()[0]
    it.set_tensor(detail["index"], x.reshape(detail["shape"]).astype(detail["dtype"]))
    it.invoke()
    outputs = [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]
    return outputs, time.perf_counter() - start


def outputs(saved, spec: str) -> list:
    """The outputs of `spec` in a file this script wrote (or, for spec "", a refs/ file)."""
    prefix = f"{spec}/" if spec else ""
    return [saved[f"{prefix}output_{k}"] for k in range(len(saved.files))
            if f"{prefix}output_{k}" in saved.files]


def assert_same(ours: list, theirs: list, rtol: float, what: str) -> None:
    """Float outputs within `rtol` of the largest |theirs|; integer outputs equal."""
    assert len(ours) == len(theirs), f"{len(ours)} outputs vs {len(theirs)} from {what}"
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert a.shape == b.shape and a.dtype == b.dtype, \
            f"output {k}: {a.dtype}{a.shape} vs {b.dtype}{b.shape} from {what}"
        if np.issubdtype(b.dtype, np.floating):
            err = float(np.max(np.abs(a.astype(np.float64) - b), initial=0))
            bound = rtol * float(np.max(np.abs(b), initial=0))
            assert err <= bound, f"output {k}: max abs error {err:.3g} > {bound:.3g} vs {what}"
        else:
            differ = int(np.count_nonzero(a != b))
            assert not differ, f"output {k}: {differ} of {b.size} values differ from {what}"


def main(argv: list) -> int:
    models_dir, out, specs = Path(argv[0]), argv[1], argv[2:]
    saved = {}
    for spec in specs:
        outputs, seconds = run(models_dir, spec)
        for k, y in enumerate(outputs):
            saved[f"{spec}/output_{k}"] = y
        saved[f"{spec}/seconds"] = np.float64(seconds)
        print(f"{spec}: {len(outputs)} outputs in {seconds:.2f} s", flush=True)
    np.savez(out, **saved)
    print(f"numpy {np.__version__}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
