"""Running time with and without converter/pass_permute (chains of TRANSPOSE/RESHAPE composed
into one transpose), side by side in LiteRT (one thread) and edgelite.

    python benchmarks/bench_permute.py MODEL.onnx [MODEL.onnx ...] [--rounds 15]

Each model is converted twice in this process (the pipeline with and without the pass), then
the two files are run alternately, `--rounds` times each; the figure is the median CPU time of
one invoke (`time.thread_time`: a busy machine inflates the wall clock, not this), and the
ratio with / without. Issue 12's corpus models: /tmp/corpus/fixed/tv_swin_t.torchscript.onnx,
hf_mobilevit.torchscript.onnx (tools/torch_corpus.py).
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def _convert(path: str, with_pass: bool):
    import edgelite.converter.pipeline as pipeline
    from edgelite.converter import TFLiteConverter

    saved = list(pipeline.PASSES), list(pipeline.FINAL_PASSES)
    if not with_pass:
        for passes in (pipeline.PASSES, pipeline.FINAL_PASSES):
            passes[:] = [p for p in passes if p.__name__ != "compose_permutations"]
    try:
        converter = TFLiteConverter.from_onnx(path)
        content = converter.convert()
        return content, converter.last_conversion
    finally:
        pipeline.PASSES[:], pipeline.FINAL_PASSES[:] = saved


def _interpreter(runtime: str, content: bytes):
    if runtime == "LiteRT":
        from ai_edge_litert.interpreter import Interpreter
        it = Interpreter(model_content=content, num_threads=1)
    else:
        from edgelite.interpreter import Interpreter
        it = Interpreter(model_content=content)
    it.allocate_tensors()
    rng = np.random.default_rng(0)
    for d in it.get_input_details():
        it.set_tensor(d["index"], rng.standard_normal(d["shape"]).astype(d["dtype"]))
    return it


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    print("| model | transposes | ops | runtime | ms with | ms without | with / without |")
    print("|---|---|---|---|---|---|---|")
    for path in args.models:
        files = {k: _convert(path, k == "with") for k in ("with", "without")}
        counts = " -> ".join(str(files[k][1].transposes) for k in ("without", "with"))
        ops = " -> ".join(str(sum(files[k][1].ops_out.values())) for k in ("without", "with"))
        for runtime in ("LiteRT", "edgelite"):
            its = {k: _interpreter(runtime, content) for k, (content, _) in files.items()}
            times = {k: [] for k in its}
            for _ in range(args.rounds):
                for k, it in its.items():
                    start = time.thread_time()
                    it.invoke()
                    times[k].append(time.thread_time() - start)
            ms = {k: float(np.median(v)) * 1e3 for k, v in times.items()}
            print(f"| {path.rsplit('/', 1)[-1]} | {counts} | {ops} | {runtime} | "
                  f"{ms['with']:.1f} | {ms['without']:.1f} | {ms['with'] / ms['without']:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
