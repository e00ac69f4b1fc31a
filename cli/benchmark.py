"""`edgelite benchmark MODEL`: what TFLite's `benchmark_model` gives, for edgelite's interpreter.

The flags keep benchmark_model's names where they fit, in both spellings (`--num-runs` and
`--num_runs`); the output lines are benchmark_model's (`count= first= curr= min= max= avg= std=`,
`Inference timings in us: ...`, the memory footprint), and `--op-profile` prints its three
tables (run order, top by computation time, summary by node type). `--json` writes the keys of
LiteRT's `litert-benchmark --result_json` (ai-edge-litert 2.3) plus edgelite's own.
`--compare litert,onnxruntime[=MODEL.onnx]` times the peers in the same process, in alternating
blocks with the same thread count, and prints the ratios.

From Python:

    from edgelite.cli.benchmark import benchmark
    facts = benchmark("model.tflite", num_runs=20, op_profile=True, compare="litert")
    facts["latency"]["median_ms"], facts["compare"]["litert"]["ratio"]
"""
from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Annotated

from .common import CliError, echo, fail, load_model, one_line
from .params import Arg, Opt
from .progress import Progress, note

BLOCK_S = 0.2          # --compare: a block of one runtime's runs lasts about this long
MIN_BLOCKS = 4         # --compare: blocks per runtime at least
PAUSE_S = 0.05         # --compare: before each block (BLAS and XNNPACK threads spin after a call)
TOP_OPS = 10           # rows of the "Top by Computation Time" table
NO_SIGNATURE = "<placeholder signature>"   # LiteRT's name of subgraph 0 when no signature has it
PEERS = {"litert": ("ai_edge_litert", "ai-edge-litert"),
         "onnxruntime": ("onnxruntime", "onnxruntime")}


def benchmark_command(
    model: Annotated[Path, Arg("the .tflite model file")],
    num_runs: Annotated[int, Opt("--num-runs", "--num_runs", min=1,
                                 help="timed invokes at least (benchmark_model's default)")] = 50,
    warmup_runs: Annotated[int, Opt("--warmup-runs", "--warmup_runs", min=0,
                                    help="warm-up invokes at least")] = 1,
    warmup_min_secs: Annotated[float, Opt("--warmup-min-secs", "--warmup_min_secs", min=0,
                                          help="warm up for at least this long")] = 0.5,
    min_secs: Annotated[float, Opt("--min-secs", "--min_secs", min=0,
                                   help="time invokes for at least this long")] = 1.0,
    max_secs: Annotated[float, Opt("--max-secs", "--max_secs", min=0,
                                   help="stop timing after this long, whatever --num-runs "
                                   "says")] = 150.0,
    num_threads: Annotated[int, Opt("--num-threads", "--num_threads", min=1,
                                    help="num_threads of every runtime (litert-benchmark's "
                                    "default, 1)")] = 1,
    delegate: Annotated[str | None, Opt(
        "--delegate", metavar="opencl[:fp16]", help="run partitions on a delegate: opencl, or "
        "opencl:fp16 for half-precision tensors")] = None,
    signature: Annotated[str | None, Opt(
        "--signature", help="benchmark this signature instead of subgraph 0")] = None,
    inputs: Annotated[list[str], Opt(
        "--input", metavar="NAME=FILE", help="an input's value from a .npy (or a one-array "
        ".npz); NAME is the input's name or input_K; repeatable. Default: seeded random "
        "inputs")] = None,
    op_profile: Annotated[bool, Opt(
        "--op-profile", "--enable_op_profiling", help="time each step of the plan: "
        "benchmark_model's run-order, top and by-type tables")] = False,
    compare: Annotated[str | None, Opt(
        "--compare", metavar="litert,onnxruntime[=MODEL.onnx]", help="time these runtimes "
        "too, alternating with edgelite in this process, same threads; onnxruntime runs the "
        ".onnx named, else MODEL's name with .onnx")] = None,
    as_json: Annotated[bool, Opt("--json", help="print one JSON document (litert-benchmark's "
                                 "--result_json keys and edgelite's) instead of text")] = False,
    quiet: Annotated[bool, Opt("--quiet", "-q", help="no progress on stderr")] = False,
) -> None:
    """Benchmark a .tflite model in edgelite's interpreter, as TFLite's benchmark_model does."""
    facts = benchmark(model, num_runs=num_runs, warmup_runs=warmup_runs,
                      warmup_min_secs=warmup_min_secs, min_secs=min_secs, max_secs=max_secs,
                      num_threads=num_threads, delegate=delegate, signature=signature,
                      input_files=inputs or [], op_profile=op_profile, compare=compare,
                      quiet=quiet)
    echo(json.dumps(facts, indent=1) if as_json else "\n".join(benchmark_text(facts)))


# -- the measurement ------------------------------------------------------------------------------

def benchmark(model, *, num_runs: int = 50, warmup_runs: int = 1, warmup_min_secs: float = 0.5,
              min_secs: float = 1.0, max_secs: float = 150.0, num_threads: int = 1,
              delegate: str | None = None, signature: str | None = None,
              input_files: list = (), input_arrays: dict | None = None,
              op_profile: bool = False, compare: str | list | None = None,
              quiet: bool = True) -> dict:
    """The facts `edgelite benchmark` reports, as a JSON-ready dict (see `benchmark_text`).
    `input_arrays`: {input name or input_K: array}, as `--input` files give them. Raises
    CliError on a bad model, input or peer."""
    path = Path(model)
    start_rss = _reset_peak_rss()
    ir = load_model(path)
    peers = _parse_compare(compare, path)
    arrays = dict(input_arrays or {})
    arrays.update(_read_inputs(input_files))
    try:
        ours = _Edgelite(path, ir, num_threads, delegate, signature, arrays)
    except CliError:
        raise
    except Exception as e:  # the interpreter's and delegate's errors name the op and tensor
        fail(f"{path.name}: {one_line(e)}")
    init_rss = _rss_mb()
    peers = _make_peers(peers, path, num_threads, ours.values)
    facts = {
        "model": str(path),
        "model_size_mb": round(path.stat().st_size / 2**20, 2),
        "accelerators": ours.accelerators,
        "signature": ours.signature_key,
        "fully_accelerated": ours.fully_accelerated,
        "num_threads": num_threads,
        "runtime": "edgelite",
        "delegate": delegate,
        "inputs": ours.input_facts,
    }
    try:
        warm = _warmup(ours.invoke, warmup_runs, warmup_min_secs, max_secs, quiet)
        if peers:
            runners = {"edgelite": ours.invoke}
            for name, runner in peers.items():
                runners[name] = runner.invoke
            samples = _alternating(runners, num_runs, min_secs, max_secs, quiet)
            times = samples["edgelite"]
        else:
            times = _timed(ours.invoke, num_runs, min_secs, max_secs, quiet)
        outputs = ours.outputs()
    except CliError:
        raise
    except Exception as e:
        fail(f"{path.name}: {one_line(e)}")
    facts["latency"] = _latency(ours.init_s, warm, times)
    facts["throughput_mb_s"] = round(ours.input_bytes / 2**20 / statistics.mean(times), 2)
    facts["warmup_us"] = _stats_us(warm)
    facts["timings_us"] = _stats_us(times)
    facts["memory"] = {
        "init_footprint_mb": _delta(init_rss, start_rss),
        "overall_footprint_mb": _delta(_rss_mb(), start_rss),
        "peak_rss_mb": _peak_rss_mb(),
        "arena_bytes": ours.plan.arena_bytes, "live_bytes": ours.plan.live_bytes}
    facts["placement"] = ours.placement_facts()
    if peers:
        facts["compare"] = {name: _peer_facts(samples[name], times, peer, outputs)
                            for name, peer in peers.items()}
    if op_profile:
        facts["op_profile"] = _op_profile(ours, num_runs, quiet)
    return facts


class _Edgelite:
    """edgelite's interpreter on one entry point, with its inputs set: `invoke()` runs it."""

    def __init__(self, path: Path, ir, threads: int, delegate: str | None,
                 signature: str | None, arrays: dict):
        from edgelite.interpreter import Interpreter

        self.ir, self.threads = ir, threads
        delegates = [_load_delegate(delegate)] if delegate else None
        start = time.perf_counter()
        it = Interpreter(model_path=str(path), num_threads=threads,
                         experimental_delegates=delegates)
        self.interpreter = it
        keys = [s.signature_key for s in ir.signature_defs]
        if signature is not None:
            if signature not in keys:
                fail(f"{path.name} has no signature {signature!r} (it has: "
                     f"{', '.join(map(repr, keys)) or 'none'})")
            runner = it.get_signature_runner(signature)
            runner.allocate_tensors()
            details = list(runner.get_input_details().items())
            subgraph = ir.signature_defs[keys.index(signature)].subgraph_index
            self.signature_key = signature
        else:
            it.allocate_tensors()
            details = [(d["name"], d) for d in it.get_input_details()]
            subgraph = 0
            self.signature_key = next((s.signature_key for s in ir.signature_defs
                                       if s.subgraph_index == 0), NO_SIGNATURE)
        self.init_s = time.perf_counter() - start
        self.plan = it._runtime.subgraph(subgraph)
        values, self.input_facts = _feeds(details, arrays, path)
        self.values = values
        self.input_bytes = sum(v.nbytes for v in values)
        if signature is not None:
            feeds = {name: v for (name, _), v in zip(details, values)}
            out_names = list(runner.get_output_details())
            self._outputs = None
            self.invoke = lambda: self._keep(runner(**feeds), out_names)
        else:
            for (_, d), v in zip(details, values):
                it.set_tensor(d["index"], v)
            self.invoke = it.invoke
            self._out_index = [d["index"] for d in it.get_output_details()]
        self.delegate = delegates[0] if delegates else None

    def _keep(self, result: dict, names: list) -> None:
        self._outputs = [result[n] for n in names]

    def outputs(self) -> list:
        if hasattr(self, "_out_index"):
            return [self.interpreter.get_tensor(t) for t in self._out_index]
        return list(self._outputs or [])

    @property
    def accelerators(self) -> list:
        return ([self.delegate.name] if self.delegate else []) + ["CPU"]

    @property
    def fully_accelerated(self) -> bool:
        """As LiteRT says: every op on the accelerators asked for (the CPU alone: True)."""
        if self.delegate is None:
            return True
        return all(p.where != "CPU" for p in self.plan.placement)

    def placement_facts(self) -> dict | None:
        if self.delegate is None:
            return None
        from edgelite.interpreter.partition import summary

        placed = self.plan.placement
        return {"delegate": self.delegate.name, "device": self.delegate.device_name(),
                "summary": summary(placed, self.delegate.name, self.delegate.device_name()),
                "ops": [p.as_dict() for p in placed]}


def _load_delegate(spec: str):
    from edgelite.interpreter import load_delegate
    from edgelite.interpreter.delegation import DelegateError

    name, _, precision = spec.partition(":")
    options = {"precision": precision} if precision else {}
    try:
        return load_delegate(name, options)
    except DelegateError as e:
        fail(f"--delegate {spec}: {one_line(e)}")


def _feeds(details: list, arrays: dict, path: Path) -> tuple:
    """The value of each input (from `arrays` by name or input_K, else seeded random) and what
    the report says of it."""
    import numpy as np

    from .session import random_inputs

    used, values, facts = set(), [], []
    for k, (name, d) in enumerate(details):
        shape, dtype = [int(s) for s in d["shape"]], np.dtype(d["dtype"])
        key = next((n for n in (name, d["name"], f"input_{k}") if n in arrays), None)
        if key is None:
            value, source = random_inputs([(shape, dtype)], seed=k)[0], "random"
        else:
            used.add(key)
            value, source = np.asarray(arrays[key]), f"--input {key}"
            if list(value.shape) != shape and list(value.shape) == shape[1:] and shape[:1] == [1]:
                value = value[None]
            if list(value.shape) != shape:
                fail(f"--input {key}: input {name!r} has shape {shape}, the file's array "
                     f"{list(value.shape)}")
            if value.dtype != dtype:
                if not (value.dtype.kind in "biuf" and dtype.kind == "f"):
                    fail(f"--input {key}: input {name!r} is {dtype.name}, the file's array "
                         f"{value.dtype.name}")
                value = value.astype(dtype)
        values.append(np.ascontiguousarray(value))
        facts.append({"name": name, "shape": shape, "dtype": dtype.name, "source": source})
    unknown = sorted(set(arrays) - used)
    if unknown:
        names = [n for n, _ in details]
        fail(f"--input {', '.join(unknown)}: {path.name} has no such input (it has: "
             f"{', '.join(names)}, or input_0..input_{len(names) - 1})")
    return values, facts


def _read_inputs(specs: list) -> dict:
    import numpy as np

    from .common import check_file

    arrays = {}
    for spec in specs:
        name, sep, file = spec.partition("=")
        if not sep or not name or not file:
            fail(f"--input {spec!r}: give NAME=FILE (a .npy, or an .npz of one array)")
        check_file(Path(file))
        try:
            loaded = np.load(file, allow_pickle=False)
        except Exception as e:  # noqa: BLE001  any unreadable file is one refusal
            fail(f"--input {spec}: cannot read {file}: {one_line(e)}")
        if not isinstance(loaded, np.ndarray):
            with loaded:
                if len(loaded.files) != 1:
                    fail(f"--input {spec}: {file} holds {len(loaded.files)} arrays "
                         f"({', '.join(loaded.files)}); give a .npy or a one-array .npz")
                loaded = loaded[loaded.files[0]]
        arrays[name] = loaded
    return arrays


# -- timing loops ---------------------------------------------------------------------------------

def _warmup(invoke, runs: int, min_secs: float, max_secs: float, quiet: bool) -> list:
    note(f"Running benchmark for at least {runs} iterations and at least {min_secs:g} seconds "
         f"but terminate if exceeding {max_secs:g} seconds. (warm-up)", quiet)
    return _loop(invoke, runs, min_secs, max_secs, quiet, "warm-up")


def _timed(invoke, runs: int, min_secs: float, max_secs: float, quiet: bool) -> list:
    note(f"Running benchmark for at least {runs} iterations and at least {min_secs:g} seconds "
         f"but terminate if exceeding {max_secs:g} seconds.", quiet)
    return _loop(invoke, runs, min_secs, max_secs, quiet, "benchmark")


def _loop(invoke, runs: int, min_secs: float, max_secs: float, quiet: bool, what: str) -> list:
    """Seconds of single invokes: at least `runs` and `min_secs`, at most `max_secs`."""
    clock, times = time.perf_counter, []
    start = clock()
    with Progress(what, total=runs or None, quiet=quiet or not runs) as bar:
        while True:
            elapsed = clock() - start
            if len(times) >= runs and elapsed >= min_secs or times and elapsed >= max_secs:
                break
            t = clock()
            invoke()
            times.append(clock() - t)
            bar.advance()
    return times


def _alternating(invokes: dict, runs: int, min_secs: float, max_secs: float,
                 quiet: bool) -> dict:
    """Seconds of single invokes of each runtime, in blocks of about BLOCK_S in alternating
    order with a pause before each: until every runtime has `runs` invokes and `min_secs` of
    them, and MIN_BLOCKS blocks; at most `max_secs` in all."""
    clock = time.perf_counter
    per_block = {}
    for name, invoke in invokes.items():   # each runtime warms up; block sizes from its speed
        warm = []
        t0 = clock()
        while len(warm) < 3 or clock() - t0 < BLOCK_S:
            t = clock()
            invoke()
            warm.append(clock() - t)
        per_block[name] = max(1, int(BLOCK_S / statistics.median(warm)))
    note(f"Running {', '.join(invokes)} in alternating blocks: at least {runs} iterations and "
         f"{min_secs:g} seconds each, at most {max_secs:g} seconds in all.", quiet)
    samples = {name: [] for name in invokes}
    names, start, b = list(invokes), clock(), 0
    with Progress("compare", total=None, quiet=quiet) as bar:
        while True:
            done = all(len(t) >= runs and sum(t) >= min_secs for t in samples.values())
            if (done and b >= MIN_BLOCKS) or (b and clock() - start >= max_secs):
                break
            for name in names if b % 2 == 0 else names[::-1]:
                time.sleep(PAUSE_S)
                invoke, times = invokes[name], samples[name]
                for _ in range(per_block[name]):
                    t = clock()
                    invoke()
                    times.append(clock() - t)
            b += 1
            bar.advance()
    return samples


# -- statistics -----------------------------------------------------------------------------------

def _percentile(seconds: list, p: float) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(seconds), p))   # linear, as litert-benchmark's


def _latency(init_s: float, warm: list, times: list) -> dict:
    """litert-benchmark's `latency` object (milliseconds; sample std)."""
    ms = 1e3
    return {
        "init_ms": round(init_s * ms, 6),
        "warmup_first_ms": round(warm[0] * ms, 6) if warm else 0,
        "warmup_avg_ms": round(statistics.mean(warm) * ms, 6) if warm else 0,
        "num_warmup_runs": len(warm),
        "avg_ms": round(statistics.mean(times) * ms, 6),
        "min_ms": round(min(times) * ms, 6),
        "max_ms": round(max(times) * ms, 6),
        "median_ms": round(statistics.median(times) * ms, 6),
        "std_ms": round(statistics.stdev(times) * ms, 6) if len(times) > 1 else 0,
        "p5_ms": round(_percentile(times, 5) * ms, 6),
        "p95_ms": round(_percentile(times, 95) * ms, 6),
        "num_runs": len(times),
    }


def _stats_us(seconds: list) -> dict:
    """benchmark_model's `count= first= curr= min= max= avg= std=` (µs; population std)."""
    if not seconds:
        return {"count": 0}
    us = [s * 1e6 for s in seconds]
    return {"count": len(us), "first": round(us[0]), "curr": round(us[-1]),
            "min": round(min(us)), "max": round(max(us)), "avg": round(statistics.mean(us), 1),
            "std": round(statistics.pstdev(us))}


def _peer_facts(peer_times: list, our_times: list, peer, our_outputs: list) -> dict:
    ours, theirs = statistics.median(our_times), statistics.median(peer_times)
    facts = {"package": peer.package, "model": str(peer.model), "init_ms": round(
        peer.init_s * 1e3, 6), "median_ms": round(theirs * 1e3, 6),
        "p5_ms": round(_percentile(peer_times, 5) * 1e3, 6),
        "p95_ms": round(_percentile(peer_times, 95) * 1e3, 6), "num_runs": len(peer_times),
        "edgelite_median_ms": round(ours * 1e3, 6), "edgelite_num_runs": len(our_times),
        "ratio": round(ours / theirs, 3)}
    facts["max_abs_diff"] = _max_diff(our_outputs, peer.outputs()) if peer.same_inputs else None
    return facts


def _max_diff(ours: list, theirs: list) -> float | None:
    import numpy as np

    if len(ours) != len(theirs) or any(a.shape != b.shape for a, b in zip(ours, theirs)):
        return None
    return max((float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)), initial=0))
                for a, b in zip(ours, theirs)), default=0.0)


# -- peers ----------------------------------------------------------------------------------------

def _parse_compare(spec, path: Path) -> dict:
    """{name: peer runner} from "litert,onnxruntime=m.onnx" (or a list of such items)."""
    if not spec:
        return {}
    items = spec if isinstance(spec, (list, tuple)) else spec.split(",")
    found = {}
    for item in (i.strip() for i in items if i.strip()):
        name, _, arg = item.partition("=")
        if name not in PEERS:
            fail(f"--compare {name!r}: the peers are {', '.join(PEERS)}")
        module, package = PEERS[name]
        from .common import installed

        if not installed(module):
            fail(f"--compare {name} needs {package}, which is not installed: "
                 f"pip install {package}")
        found[name] = (name, Path(arg) if arg else None)
    return found


def _make_peers(found: dict, path: Path, threads: int, our_inputs: list) -> dict:
    return {name: (_LiteRT(path, threads, our_inputs) if name == "litert"
                   else _OnnxRuntime(onnx or path.with_suffix(".onnx"), threads))
            for name, (_, onnx) in found.items()}


class _LiteRT:
    package = "ai-edge-litert"
    same_inputs = True

    def __init__(self, path: Path, threads: int, values: list):
        from ai_edge_litert.interpreter import Interpreter

        self.model = path
        start = time.perf_counter()
        it = Interpreter(model_path=str(path), num_threads=threads)
        it.allocate_tensors()
        self.init_s = time.perf_counter() - start
        for d, v in zip(it.get_input_details(), values):
            it.set_tensor(d["index"], v)
        self.it, self.invoke = it, it.invoke

    def outputs(self) -> list:
        return [self.it.get_tensor(d["index"]) for d in self.it.get_output_details()]


class _OnnxRuntime:
    package = "onnxruntime"
    same_inputs = False   # its own model and layout: timed on seeded random inputs of its own

    def __init__(self, path: Path, threads: int):
        import numpy as np
        import onnxruntime as ort

        from .session import random_inputs

        if not path.exists():
            fail(f"--compare onnxruntime: no ONNX model at {path} (name one: "
                 "--compare onnxruntime=MODEL.onnx)")
        self.model = path
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        types = {"tensor(float)": np.float32, "tensor(float16)": np.float16,
                 "tensor(double)": np.float64, "tensor(int64)": np.int64,
                 "tensor(int32)": np.int32, "tensor(int8)": np.int8,
                 "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_}
        start = time.perf_counter()
        try:
            session = ort.InferenceSession(str(path), options,
                                           providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001  onnxruntime's errors are one refusal here
            fail(f"--compare onnxruntime: {path}: {one_line(e)}")
        self.init_s = time.perf_counter() - start
        specs = [([d if isinstance(d, int) and d > 0 else 1 for d in i.shape],
                  types.get(i.type, np.float32)) for i in session.get_inputs()]
        feeds = {i.name: v for i, v in zip(session.get_inputs(), random_inputs(specs))}
        self._last: list = []
        self.invoke = lambda: self._last.__setitem__(slice(None), session.run(None, feeds))

    def outputs(self) -> list:
        return list(self._last)


# -- memory ---------------------------------------------------------------------------------------

def _status_mb(field: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _rss_mb() -> float | None:
    return _status_mb("VmRSS")


def _reset_peak_rss() -> float | None:
    """The RSS now, with the process's high-water mark reset to it (Linux), so that the peak
    reported is this benchmark's."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    return _rss_mb()


def _peak_rss_mb() -> float | None:
    peak = _status_mb("VmHWM")
    if peak is None:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return round(peak, 1)


def _delta(now: float | None, start: float | None) -> float | None:
    return None if now is None or start is None else round(now - start, 1)


# -- --op-profile ---------------------------------------------------------------------------------

def _op_profile(ours: _Edgelite, runs: int, quiet: bool) -> dict:
    """Each step of the plan timed alone over `runs` runs: benchmark_model's tables as rows."""
    from edgelite.interpreter import threads

    plan = ours.plan
    clock = time.perf_counter
    per_step = [[] for _ in plan.steps]
    totals = []
    with Progress("op profile", total=runs, quiet=quiet) as bar, \
            threads.limit(ours.threads):
        for run, args in plan.steps:    # one untimed pass: what the first invoke prepares
            run(*args)
        for _ in range(runs):
            run_start = clock()
            for i, (run, args) in enumerate(plan.steps):
                t = clock()
                run(*args)
                per_step[i].append(clock() - t)
            totals.append(clock() - run_start)
            bar.advance()
    placed = {p.index: p for p in plan.placement}
    sg = plan.sg
    rows = []
    total_avg = sum(statistics.mean(t) for t in per_step) or 1.0
    for i, (oi, t) in enumerate(zip(plan.step_ops, per_step)):
        op = sg.operators[oi]
        p = placed.get(oi)
        if p is not None and p.where not in ("CPU", "folded"):
            members = [q.index for q in plan.placement if q.where == p.where
                       and q.partition == p.partition]
            kind, name = f"{p.where} partition", f"partition {p.partition} ({len(members)} ops: " \
                f"{members[0]}..{members[-1]})"
        else:
            out = op.outputs[0] if op.outputs else -1
            kind, name = op.op, sg.tensors[out].name if out >= 0 else ""
        rows.append({"step": i, "op_index": oi, "node_type": kind, "name": name,
                     "first_ms": t[0] * 1e3, "avg_ms": statistics.mean(t) * 1e3,
                     "share": statistics.mean(t) / total_avg, "times_called": 1})
    cdf = 0.0
    for r in rows:
        cdf += r["share"]
        r["cdf"] = cdf
    by_type: dict = {}
    for r in rows:
        e = by_type.setdefault(r["node_type"], {"node_type": r["node_type"], "count": 0,
                                                "avg_ms": 0.0, "times_called": 0})
        e["count"] += 1
        e["avg_ms"] += r["avg_ms"]
        e["times_called"] += r["times_called"]
    summary, cdf = sorted(by_type.values(), key=lambda e: -e["avg_ms"]), 0.0
    for e in summary:
        e["share"] = e["avg_ms"] * 1e-3 / total_avg
        cdf += e["share"]
        e["cdf"] = cdf
    top = sorted(rows, key=lambda r: -r["avg_ms"])[:TOP_OPS]
    cdf = 0.0
    top_rows = []
    for r in top:
        cdf += r["share"]
        top_rows.append({**r, "cdf": cdf})
    return {"runs": runs, "subgraph": plan.index, "run_order": rows, "top": top_rows,
            "by_node_type": summary,
            "timings_us": _stats_us(totals), "nodes_observed": len(rows)}


# -- the text report ------------------------------------------------------------------------------

def benchmark_text(f: dict) -> list:
    lat, t, w, m = f["latency"], f["timings_us"], f["warmup_us"], f["memory"]
    lines = [f"The input model file size (MB): {f['model_size_mb']}",
             f"Initialized session in {lat['init_ms']:.3f}ms.",
             f"Num threads: {f['num_threads']}; accelerators: {', '.join(f['accelerators'])}"
             + (f"; signature: {f['signature']}" if f["signature"] not in (None, NO_SIGNATURE)
                else "")]
    if f.get("placement"):
        lines.append(f"Placement: {f['placement']['summary']}")
    lines += [_count_line(w), _count_line(t), "",
              f"Inference timings in us: Init: {round(lat['init_ms'] * 1e3)}, First inference: "
              f"{w.get('first', t.get('first'))}, Warmup (avg): {w.get('avg', 0):g}, "
              f"Inference (avg): {t['avg']:g}",
              f"Inference (median): {lat['median_ms']:.3f} ms, p5 {lat['p5_ms']:.3f} ms, "
              f"p95 {lat['p95_ms']:.3f} ms",
              "Note: as the benchmark tool itself affects memory footprint, the following is "
              "only APPROXIMATE to the actual memory footprint of the model at runtime. Take "
              "the information at your discretion.",
              f"Memory footprint delta from the start of the tool (MB): "
              f"init={_mb(m['init_footprint_mb'])} overall={_mb(m['overall_footprint_mb'])}",
              f"Overall peak memory footprint (MB) via periodic monitoring: "
              f"{_mb(m['peak_rss_mb'])}",
              f"Arena: {m['arena_bytes']:,} bytes (live-tensor lower bound "
              f"{m['live_bytes']:,} bytes)"]
    if f.get("compare"):
        lines += ["", _compare_header(f)]
        from .inspect import table
        from .session import duration

        rows = [["edgelite", duration(lat["median_ms"]),
                 f"{duration(lat['p5_ms'])} - {duration(lat['p95_ms'])}", str(lat["num_runs"]),
                 "1.00x", ""]]
        for name, c in f["compare"].items():
            diff = "" if c["max_abs_diff"] is None else f"max |diff| {c['max_abs_diff']:.3g}"
            rows.append([name, duration(c["median_ms"]),
                         f"{duration(c['p5_ms'])} - {duration(c['p95_ms'])}",
                         str(c["num_runs"]), f"{c['ratio']:.2f}x", diff])

        lines += table([["runtime", "median", "p5-p95", "count", "edgelite/runtime", ""],
                        *rows])
    if f.get("op_profile"):
        lines += [""] + op_profile_text(f["op_profile"])
    return lines


def _compare_header(f: dict) -> str:
    return (f"Side by side in this process, alternating blocks, {f['num_threads']} thread"
            f"{'s' if f['num_threads'] > 1 else ''} each:")


def _count_line(s: dict) -> str:
    if not s.get("count"):
        return "count=0"
    return (f"count={s['count']} first={s['first']} curr={s['curr']} min={s['min']} "
            f"max={s['max']} avg={s['avg']:g} std={s['std']}")


def _mb(value) -> str:
    return "n/a" if value is None else f"{value:g}"


def op_profile_text(p: dict) -> list:
    """benchmark_model's three tables, tab-separated columns as its profiler prints them."""
    head = "\t" + "\t".join(["[node type]".rjust(24), "[first]".rjust(10), "[avg ms]".rjust(10),
                             "[%]".rjust(8), "[cdf%]".rjust(8), "[times called]".rjust(14),
                             "[Name]"])

    def row(r: dict) -> str:
        return "\t" + "\t".join([r["node_type"].rjust(24), f"{r['first_ms']:10.3f}",
                                 f"{r['avg_ms']:10.3f}", f"{r['share']:7.3%}".rjust(8),
                                 f"{r['cdf']:7.3%}".rjust(8), str(r["times_called"]).rjust(14),
                                 f"[{r['name']}]"])

    lines = [f"Operator-wise Profiling Info for Regular Benchmark Runs ({p['runs']} runs, each "
             "step of the plan timed alone):",
             "=" * 30 + " Run Order " + "=" * 30, head, *map(row, p["run_order"]), "",
             "=" * 30 + " Top by Computation Time " + "=" * 30, head, *map(row, p["top"]), "",
             "=" * 30 + " Summary by node type " + "=" * 30,
             "\t" + "\t".join(["[Node type]".rjust(24), "[count]".rjust(8), "[avg ms]".rjust(10),
                               "[avg %]".rjust(10), "[cdf %]".rjust(10),
                               "[times called]".rjust(14)])]
    for e in p["by_node_type"]:
        lines.append("\t" + "\t".join([e["node_type"].rjust(24), str(e["count"]).rjust(8),
                                       f"{e['avg_ms']:10.3f}", f"{e['share']:9.3%}".rjust(10),
                                       f"{e['cdf']:9.3%}".rjust(10),
                                       str(e["times_called"]).rjust(14)]))
    lines += ["", f"Timings (microseconds): {_count_line(p['timings_us'])}",
              f"{p['nodes_observed']} nodes observed"]
    return lines

