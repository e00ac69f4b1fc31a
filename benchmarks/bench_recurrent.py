"""Recurrent and control-flow models: edgelite against LiteRT (issue 17, goal 6).

    python benchmarks/bench_recurrent.py [--corpus DIR] [--blocks 15] [--steps 1000000]
                                         [--only SUBSTRING ...] [--json OUT] [--before TREE]

The models:

- the Keras LSTM and GRU text models of the corpus (`tools/tflite_corpus.py keras`: two stacked
  layers over 20 steps, converted by TensorFlow's converter as WHILE loops) as float32, float16
  and dynamic-range files, from `--corpus` (default ~/.cache/edgelite-tflite-corpus); missing
  files are listed, not benchmarked; and every recurrent_*.tflite there (tools/recurrent_corpus.py:
  SimpleRNN, biased LSTM/GRU, GRU with reset_after=False, go_backwards, Bidirectional, batch 4);
- UNIDIRECTIONAL_SEQUENCE_LSTM and UNIDIRECTIONAL_SEQUENCE_RNN ops built here (batch 1, 20 steps,
  16 inputs, 32 cells), and the LSTM dynamic-range (int8 weights by edgelite's quantizer); a
  WHILE running a Keras-size LSTM loop for 20 steps is the corpus's;
- a counter loop of `--steps` iterations (cond: LESS i < N, body: ADD i + 1), built with the
  schema writer: the time of one invoke.

Times are the calling thread's CPU time (`time.thread_time`: a 1-thread invoke runs in the calling
thread, and other processes on a busy machine do not count), edgelite and LiteRT (1 thread, its
defaults: XNNPACK) alternating in blocks of ~20 ms in one process, the median over blocks of the
time per invoke. Every model's outputs are compared with LiteRT's on the same input.

`--before TREE`: also an older edgelite, alternating in the same blocks: TREE is a checkout in a
directory named edgelite (`git worktree add /tmp/wt/edgelite <commit>`); its interpreters are
built first, with its modules, which then leave sys.modules for this tree's. Each row gains the
old tree's time, its ratio to LiteRT and the largest difference between the two trees' outputs.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # before numpy loads OpenBLAS

import numpy as np  # noqa: E402

CORPUS = Path("~/.cache/edgelite-tflite-corpus").expanduser()
KERAS = [f"keras_{m}.{v}.tflite" for m in ("lstm", "gru")
         for v in ("float32", "float16", "dynamic")]
PAUSE_S = 0.02
BLOCK_S = 0.02


def _schema():
    from edgelite import schema
    return schema


def _op(name, ins, outs, **options):
    s = _schema()
    return s.Operator(s.OperatorCode(name, 0), list(ins), list(outs),
                      s.default_options(name, **options))


def _const(model, sg, name, value):
    s = _schema()
    value = np.asarray(value)
    return sg.add_tensor(s.Tensor(name, value.shape, str(value.dtype), model.add_buffer(value)))


def counter_loop(steps: int) -> bytes:
    """i -> WHILE (i < steps) { i + 1 }: `steps` iterations from i = 0."""
    s = _schema()
    model = s.Model(description=f"counter loop of {steps} steps")
    main = s.Subgraph(name="main")
    i = main.add_tensor(s.Tensor("i", (), "int32"))
    out = main.add_tensor(s.Tensor("i_out", (), "int32"))
    main.inputs, main.outputs = [i], [out]
    main.operators = [_op("WHILE", [i], [out], cond_subgraph_index=1, body_subgraph_index=2)]
    cond = s.Subgraph(name="cond")
    ci = cond.add_tensor(s.Tensor("i", (), "int32"))
    n = _const(model, cond, "n", np.int32(steps))
    c = cond.add_tensor(s.Tensor("c", (), "bool"))
    cond.inputs, cond.outputs = [ci], [c]
    cond.operators = [_op("LESS", [ci, n], [c])]
    body = s.Subgraph(name="body")
    bi = body.add_tensor(s.Tensor("i", (), "int32"))
    one = _const(model, body, "one", np.int32(1))
    bo = body.add_tensor(s.Tensor("i2", (), "int32"))
    body.inputs, body.outputs = [bi], [bo]
    body.operators = [_op("ADD", [bi, one], [bo])]
    model.subgraphs = [main, cond, body]
    return s.save(model)


def _sequence_model(op: str, description: str, steps: int, n_in: int, n_cell: int,
                    operands) -> bytes:
    """One `op` over x [1, steps, n_in] -> y [1, steps, n_cell] (TANH, batch-major), its other
    inputs (weights, states) added by `operands(model, sg)`."""
    s = _schema()
    model = s.Model(description=description)
    sg = s.Subgraph(name="main")
    x = sg.add_tensor(s.Tensor("x", (1, steps, n_in)))
    ins = [x] + operands(model, sg)
    y = sg.add_tensor(s.Tensor("y", (1, steps, n_cell)))
    sg.inputs, sg.outputs = [x], [y]
    sg.operators = [_op(op, ins, [y], fused_activation_function=4, time_major=False)]
    model.subgraphs.append(sg)
    return s.save(model)


def _weights(model, sg, rng):
    """w(name, *shape): a constant of `sg`, standard normal * 0.3 from `rng`, float32."""
    def w(name, *shape):
        return _const(model, sg, name, (rng.standard_normal(shape) * 0.3).astype(np.float32))
    return w


def sequence_lstm(steps=20, n_in=16, n_cell=32, seed=0) -> bytes:
    """UNIDIRECTIONAL_SEQUENCE_LSTM, batch 1, batch-major, no peephole/projection/CIFG."""
    s = _schema()
    rng = np.random.default_rng(seed)

    def operands(model, sg):
        w = _weights(model, sg, rng)
        ins = [w(f"w_{g}", n_cell, n_in) for g in "ifco"]
        ins += [w(f"r_{g}", n_cell, n_cell) for g in "ifco"]
        ins += [-1, -1, -1] + [w(f"b_{g}", n_cell) for g in "ifco"] + [-1, -1]
        return ins + [sg.add_tensor(s.Tensor("h", (1, n_cell), is_variable=True)),
                      sg.add_tensor(s.Tensor("c", (1, n_cell), is_variable=True))]
    return _sequence_model("UNIDIRECTIONAL_SEQUENCE_LSTM", "unidirectional sequence LSTM",
                           steps, n_in, n_cell, operands)


def sequence_rnn(steps=20, n_in=16, n_cell=32, seed=0) -> bytes:
    """UNIDIRECTIONAL_SEQUENCE_RNN (tanh), batch 1, batch-major."""
    s = _schema()
    rng = np.random.default_rng(seed)

    def operands(model, sg):
        w = _weights(model, sg, rng)
        return [w("w", n_cell, n_in), w("r", n_cell, n_cell), w("b", n_cell),
                sg.add_tensor(s.Tensor("h", (1, n_cell), is_variable=True))]
    return _sequence_model("UNIDIRECTIONAL_SEQUENCE_RNN", "unidirectional sequence RNN",
                           steps, n_in, n_cell, operands)


def dynamic_range(content: bytes) -> bytes:
    """The model with int8 weights and float activations (edgelite's dynamic-range quantizer,
    every weight quantized): a hybrid UNIDIRECTIONAL_SEQUENCE_LSTM."""
    from edgelite.converter.quantize import quantize
    s = _schema()
    return s.save(quantize(s.load(content), "dynamic", min_weight_elements=0).model)


def _feeds(it, seed=0):
    rng = np.random.default_rng(seed)
    feeds = []
    for d in it.get_input_details():
        shape = tuple(int(v) for v in d["shape"])
        if np.issubdtype(d["dtype"], np.floating):
            feeds.append(rng.standard_normal(shape).astype(d["dtype"]))
        else:
            feeds.append(np.zeros(shape, d["dtype"]))
    return feeds


def _loaded(module, content, feeds=None):
    it = module.Interpreter(model_content=content, num_threads=1)
    it.allocate_tensors()
    feeds = _feeds(it) if feeds is None else feeds
    for d, f in zip(it.get_input_details(), feeds):
        it.set_tensor(d["index"], f)
    it.invoke()
    return it, feeds


def _outputs(it):
    return [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]


def _block(it, calls: int) -> float:
    t = time.thread_time()
    for _ in range(calls):
        it.invoke()
    return (time.thread_time() - t) / calls


def _largest_difference(a_it, b_it) -> float:
    return max((float(np.max(np.abs(a.astype(np.float64) - b))) if a.size else 0.0)
               for a, b in zip(_outputs(a_it), _outputs(b_it)))


def compare(content: bytes, blocks: int, before=None) -> dict:
    """Median CPU time per invoke of both runtimes (and of `before`, an older tree's loaded
    interpreter, where given), alternating, and their largest differences."""
    from ai_edge_litert import interpreter as litert

    from edgelite import interpreter as edgelite
    ours, feeds = _loaded(edgelite, content)
    theirs, _ = _loaded(litert, content, feeds)
    runs = [("edgelite", ours), ("litert", theirs)]
    # the differences after one invoke each: a state kept across invokes parts them later
    diffs = {"max_abs_diff": _largest_difference(ours, theirs)}
    if before is not None:
        runs.append(("before", before))
        diffs["before_diff"] = _largest_difference(ours, before)
    calls = {}
    for name, it in runs:
        once = max(_block(it, 3), 1e-7)
        calls[name] = max(1, int(BLOCK_S / once))
    times = {name: [] for name, _ in runs}
    for _ in range(blocks):
        for name, it in runs:
            time.sleep(PAUSE_S)
            times[name].append(_block(it, calls[name]))
    m = {name: float(np.median(v)) for name, v in times.items()}
    row = {"edgelite_ms": m["edgelite"] * 1e3, "litert_ms": m["litert"] * 1e3,
           "ratio": m["edgelite"] / m["litert"], **diffs}
    if before is not None:
        row.update(before_ms=m["before"] * 1e3, before_ratio=m["before"] / m["litert"])
    return row


def _edgelite_modules() -> list:
    return [n for n in sys.modules if n == "edgelite" or n.startswith("edgelite.")]


def before_interpreters(tree: Path, models: dict) -> dict:
    """An interpreter of the older checkout `tree` for each model, loaded and fed as compare
    feeds this tree's (the same inputs), built with the old tree's modules, which leave
    sys.modules afterwards (as this tree's do before): the next import is this tree's."""
    tree = tree.resolve()
    if tree.name != "edgelite" or not (tree / "interpreter" / "__init__.py").is_file():
        raise SystemExit(f"--before {tree}: not an edgelite checkout in a directory named "
                         "edgelite (git worktree add /tmp/wt/edgelite <commit>)")
    for name in _edgelite_modules():
        del sys.modules[name]
    sys.path.insert(0, str(tree.parent))
    try:
        from edgelite import interpreter as old
        if tree not in Path(old.__file__).resolve().parents:
            raise SystemExit(f"--before {tree}: edgelite came from {old.__file__}")
        return {name: _loaded(old, content)[0] for name, content in models.items()}
    finally:
        sys.path.remove(str(tree.parent))
        for name in _edgelite_modules():
            del sys.modules[name]


def counter(steps: int) -> dict:
    """One invoke of the counter loop in each runtime (CPU seconds), twice, the faster kept."""
    from ai_edge_litert import interpreter as litert

    from edgelite import interpreter as edgelite
    content = counter_loop(steps)
    result = {}
    for name, module in (("edgelite", edgelite), ("litert", litert)):
        it = module.Interpreter(model_content=content, num_threads=1)
        it.allocate_tensors()
        best = None
        for _ in range(2):
            it.set_tensor(it.get_input_details()[0]["index"], np.zeros((), np.int32))
            t = time.thread_time()
            it.invoke()
            spent = time.thread_time() - t
            best = spent if best is None else min(best, spent)
        value = int(it.get_tensor(it.get_output_details()[0]["index"]))
        if value != steps:
            raise SystemExit(f"{name}: the counter loop ended at {value}, not {steps}")
        result[f"{name}_s"] = best
    result["ratio"] = result["edgelite_s"] / result["litert_s"]
    return result


def machine() -> str:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    blas = "?"
    try:
        from threadpoolctl import threadpool_info
        blas = ", ".join(f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')}"
                         for i in threadpool_info() if i.get("user_api") == "blas")
    except ImportError:
        cfg = np.show_config(mode="dicts") if hasattr(np, "show_config") else {}
        blas = str(cfg.get("Build Dependencies", {}).get("blas", {}).get("name", "?"))
    return f"CPU {cpu}; numpy {np.__version__}, BLAS {blas}; OPENBLAS_CORETYPE=" \
           f"{os.environ.get('OPENBLAS_CORETYPE', '(native)')}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, default=CORPUS)
    p.add_argument("--blocks", type=int, default=15)
    p.add_argument("--steps", type=int, default=10 ** 6, help="counter loop iterations (0: skip)")
    p.add_argument("--only", nargs="*", default=None)
    p.add_argument("--json", type=Path)
    p.add_argument("--before", type=Path, help="an older checkout, named edgelite, to time "
                   "alongside (git worktree add /tmp/wt/edgelite <commit>)")
    args = p.parse_args(argv)
    models = {"UNIDIRECTIONAL_SEQUENCE_LSTM (20x16->32)": sequence_lstm(),
              "UNIDIRECTIONAL_SEQUENCE_RNN (20x16->32)": sequence_rnn(),
              "UNIDIRECTIONAL_SEQUENCE_LSTM dynamic-range": dynamic_range(sequence_lstm())}
    missing = []
    for name in KERAS:
        path = args.corpus / name
        if path.exists():
            models[name] = path.read_bytes()
        else:
            missing.append(name)
    for path in sorted(args.corpus.glob("recurrent_*.tflite")):   # tools/recurrent_corpus.py
        models[path.name] = path.read_bytes()
    if args.only:
        models = {k: v for k, v in models.items() if any(s in k for s in args.only)}
    old = None if args.before is None else before_interpreters(args.before, models)
    print(machine())
    if old is None:
        print("\n| model | edgelite ms | LiteRT ms | edgelite/LiteRT | max abs diff |")
        print("|---|---:|---:|---:|---:|")
    else:
        print(f"\nbefore: {args.before}")
        print("\n| model | before ms | edgelite ms | LiteRT ms | before/LiteRT | edgelite/LiteRT "
              "| max abs diff | before - edgelite |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
    rows = {}
    for name, content in models.items():
        r = rows[name] = compare(content, args.blocks, None if old is None else old[name])
        if old is None:
            print(f"| {name} | {r['edgelite_ms']:.3f} | {r['litert_ms']:.3f} | "
                  f"{r['ratio']:.2f}x | {r['max_abs_diff']:.2g} |", flush=True)
        else:
            print(f"| {name} | {r['before_ms']:.4f} | {r['edgelite_ms']:.4f} | "
                  f"{r['litert_ms']:.4f} | {r['before_ratio']:.2f}x | {r['ratio']:.2f}x | "
                  f"{r['max_abs_diff']:.2g} | {r['before_diff']:.2g} |", flush=True)
    if missing:
        print(f"\nnot in {args.corpus} (tools/tflite_corpus.py keras): {', '.join(missing)}")
    if args.steps and not args.only:
        r = rows["counter"] = counter(args.steps)
        print(f"\nWHILE counter loop, {args.steps} steps: edgelite {r['edgelite_s']:.3f} s, "
              f"LiteRT {r['litert_s']:.3f} s ({r['ratio']:.1f}x)")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
