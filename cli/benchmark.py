"""`edgelite benchmark MODEL`: what TFLite's `benchmark_model` gives, for edgelite's interpreter.

The flags keep benchmark_model's names where they fit, in both spellings (`--num-runs` and
`--num_runs`); the output lines are benchmark_model's (`count= first= curr= min= max= avg= std=`,
`Inference timings in us: ...`, the memory footprint), and `--op-profile` prints its three
tables (run order, top by computation time, summary by node type). `--json` writes the keys of
LiteRT's `litert-benchmark --result_json` (ai-edge-litert 2.3) plus edgelite's own.
`--compare litert,onnxruntime[=MODEL.onnx]` times the peers in the same process, in alternating
blocks with the same thread count, and prints the ratios (`peers.py`); the op profile is
`op_profile.py`.

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

NO_SIGNATURE = "<placeholder signature>"   # LiteRT's name of subgraph 0 when no signature has it


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
    from .op_profile import op_profile as profile_steps
    from .peers import alternating, make_peers, parse_compare, peer_facts

    path = Path(model)
    start_rss = _reset_peak_rss()
    ir = load_model(path)
    peers = parse_compare(compare, path)
    arrays = dict(input_arrays or {})
    arrays.update(_read_inputs(input_files))
    try:
        ours = Edgelite(path, ir, num_threads, delegate, signature, arrays)
    except CliError:
        raise
    except Exception as e:  # the interpreter's and delegate's errors name the op and tensor
        fail(f"{path.name}: {one_line(e)}")
    init_rss = _rss_mb()
    peers = make_peers(peers, path, num_threads, ours.values)
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
            samples = alternating(runners, num_runs, min_secs, max_secs, quiet)
            times = samples["edgelite"]
        else:
            times = _timed(ours.invoke, num_runs, min_secs, max_secs, quiet)
        outputs = ours.outputs()
    except CliError:
        raise
    except Exception as e:
        fail(f"{path.name}: {one_line(e)}")
    facts["latency"] = latency_facts(ours.init_s, warm, times)
    facts["throughput_mb_s"] = round(ours.input_bytes / 2**20 / statistics.mean(times), 2)
    facts["warmup_us"] = stats_us(warm)
    facts["timings_us"] = stats_us(times)
    facts["memory"] = {
        "init_footprint_mb": _delta(init_rss, start_rss),
        "overall_footprint_mb": _delta(_rss_mb(), start_rss),
        "peak_rss_mb": _peak_rss_mb(),
        "arena_bytes": ours.plan.arena_bytes, "live_bytes": ours.plan.live_bytes}
    facts["placement"] = ours.placement_facts()
    if peers:
        facts["compare"] = {name: peer_facts(samples[name], times, peer, outputs)
                            for name, peer in peers.items()}
    if op_profile:
        facts["op_profile"] = profile_steps(ours.plan, ours.threads, num_runs, quiet)
    return facts


class Edgelite:
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
    return timed_loop(invoke, runs, min_secs, max_secs, quiet, "warm-up")


def _timed(invoke, runs: int, min_secs: float, max_secs: float, quiet: bool) -> list:
    note(f"Running benchmark for at least {runs} iterations and at least {min_secs:g} seconds "
         f"but terminate if exceeding {max_secs:g} seconds.", quiet)
    return timed_loop(invoke, runs, min_secs, max_secs, quiet, "benchmark")


def timed_loop(invoke, runs: int, min_secs: float, max_secs: float, quiet: bool, what: str) -> list:
    """Seconds of single invokes: at least `runs` and `min_secs`, at most `max_secs`."""
    clock, times = time.perf_counter, []
    start = clock()
    with Progress(what, total=runs or None, quiet=quiet or not runs, line=False) as bar:
        while True:
            elapsed = clock() - start
            if len(times) >= runs and elapsed >= min_secs or times and elapsed >= max_secs:
                break
            t = clock()
            invoke()
            times.append(clock() - t)
            bar.advance()
    return times


# -- statistics -----------------------------------------------------------------------------------

def percentile(seconds: list, p: float) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(seconds), p))   # linear, as litert-benchmark's


def latency_facts(init_s: float, warm: list, times: list) -> dict:
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
        "p5_ms": round(percentile(times, 5) * ms, 6),
        "p95_ms": round(percentile(times, 95) * ms, 6),
        "num_runs": len(times),
    }


def stats_us(seconds: list) -> dict:
    """benchmark_model's `count= first= curr= min= max= avg= std=` (µs; population std)."""
    if not seconds:
        return {"count": 0}
    us = [s * 1e6 for s in seconds]
    return {"count": len(us), "first": round(us[0]), "curr": round(us[-1]),
            "min": round(min(us)), "max": round(max(us)), "avg": round(statistics.mean(us), 1),
            "std": round(statistics.pstdev(us))}


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
    lines += [count_line(w), count_line(t), "",
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
        from .op_profile import op_profile_text

        lines += [""] + op_profile_text(f["op_profile"])
    return lines


def _compare_header(f: dict) -> str:
    return (f"Side by side in this process, alternating blocks, {f['num_threads']} thread"
            f"{'s' if f['num_threads'] > 1 else ''} each:")


def count_line(s: dict) -> str:
    if not s.get("count"):
        return "count=0"
    return (f"count={s['count']} first={s['first']} curr={s['curr']} min={s['min']} "
            f"max={s['max']} avg={s['avg']:g} std={s['std']}")


def _mb(value) -> str:
    return "n/a" if value is None else f"{value:g}"
