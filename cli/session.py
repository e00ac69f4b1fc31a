"""A model in edgelite's interpreter as the commands use it: one entry point (subgraph 0 or a
signature) with its ports, feeding arrays, timing invokes and steps. Reusable from Python:

    from edgelite.cli.session import Session
    session = Session(Path("m.tflite"), edgelite.schema.load("m.tflite"), None, threads=1)
    outputs = session.invoke([value for value, _, _ in session.random_feeds()])
"""
from __future__ import annotations

from pathlib import Path

SEED = 0                # of the random inputs used without --data


class Refused(Exception):
    """A problem with what the user gave (names, shapes, dtypes): its message is the error."""


def random_inputs(specs, seed: int = SEED) -> list:
    """Seeded random arrays for (shape, dtype) pairs: floats in [-1, 1), integers over their
    type's range (int32/int64 in [0, 10): they are often indices), booleans."""
    import numpy as np

    rng = np.random.default_rng(seed)
    arrays = []
    for shape, dtype in specs:
        dtype = np.dtype(dtype)
        if dtype.kind == "f":
            arrays.append(rng.uniform(-1, 1, shape).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.integers(0, 2, shape).astype(bool))
        elif dtype.itemsize >= 4:
            arrays.append(rng.integers(0, 10, shape).astype(dtype))
        else:
            info = np.iinfo(dtype)
            arrays.append(rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype))
    return arrays


def step_times(plan, repeat: int, num_threads: int | None = None) -> list:
    """Median seconds of each step of a prepared plan (`SubgraphPlan`) over `repeat` runs on the
    inputs it holds."""
    import statistics
    import time

    from edgelite.interpreter import threads

    clock = time.perf_counter
    times = [[0.0] * repeat for _ in plan.steps]
    with threads.limit(num_threads):
        for r in range(repeat):
            for i, (run, args) in enumerate(plan.steps):
                start = clock()
                run(*args)
                times[i][r] = clock() - start
    return [statistics.median(t) for t in times]


def op_type_profile(plan, seconds: list) -> list:
    """Step times summed by op type, slowest first: [{op, steps, ms, share}]."""
    by_type: dict = {}
    for oi, s in zip(plan.step_ops, seconds):
        entry = by_type.setdefault(plan.sg.operators[oi].op, [0, 0.0])
        entry[0] += 1
        entry[1] += s
    total = sum(seconds) or 1.0
    return [{"op": op, "steps": n, "ms": s * 1e3, "share": s / total}
            for op, (n, s) in sorted(by_type.items(), key=lambda kv: -kv[1][1])]


def duration(ms: float) -> str:
    return f"{ms:.3g} ms" if ms >= 1 else f"{ms * 1e3:.3g} µs"


def percentiles_ms(seconds: list) -> dict:
    import numpy as np

    p10, p50, p90 = np.percentile(np.asarray(seconds) * 1e3, [10, 50, 90])
    return {"median": float(p50), "p10": float(p10), "p90": float(p90), "runs": len(seconds)}


class Session:
    """One entry point of a model in edgelite's interpreter: subgraph 0 through the Interpreter
    API, or a signature through its runner. Ports are dicts: name, keys (names --data may use),
    index, shape, dtype, quantization."""

    def __init__(self, path: Path, ir, signature: str | None, threads: int | None,
                 reference: bool = False):
        from edgelite.interpreter import Interpreter, OpResolverType
        from edgelite.interpreter.feeds import model_perms

        self.path, self.ir, self.signature, self.threads = path, ir, signature, threads
        kind = OpResolverType.BUILTIN_REF if reference else OpResolverType.AUTO
        self.interpreter = Interpreter(model_path=str(path), num_threads=threads,
                                       experimental_op_resolver_type=kind)
        if signature is None:
            self.runner, subgraph = None, 0
            self.interpreter.allocate_tensors()
            aliases: dict = {}   # tensor -> its names in signatures of subgraph 0
            for sig in ir.signature_defs:
                if sig.subgraph_index == 0:
                    for name, t in [*sig.inputs.items(), *sig.outputs.items()]:
                        aliases.setdefault(t, []).append(name)
            self.inputs = [_port(d, d["name"], aliases.get(d["index"], []), perm)
                           for d, perm in zip(self.interpreter.get_input_details(),
                                              model_perms(ir))]
            self.outputs = [_port(d, d["name"], aliases.get(d["index"], []))
                            for d in self.interpreter.get_output_details()]
        else:
            keys = [s.signature_key for s in ir.signature_defs]
            if signature not in keys:
                raise Refused(f"{path.name} has no signature {signature!r} (it has: "
                               f"{', '.join(map(repr, keys)) or 'none'})")
            self.runner = self.interpreter.get_signature_runner(signature)
            self.runner.allocate_tensors()
            subgraph = ir.signature_defs[keys.index(signature)].subgraph_index
            self.inputs = [_port(d, n, []) for n, d in self.runner.get_input_details().items()]
            self.outputs = [_port(d, n, []) for n, d in self.runner.get_output_details().items()]
        # The execution plan, for --profile (the interpreter keeps one per subgraph).
        self.plan = self.interpreter._runtime.subgraph(subgraph)

    def random_feeds(self) -> list:
        arrays = random_inputs([(p["shape"], p["dtype"]) for p in self.inputs])
        return [(a, False, f"random (seed {SEED})") for a in arrays]

    def match(self, arrays: dict, path: Path) -> list:
        """(array, per_sample, where from) for each input, from the arrays of an .npz, in the
        model's layout or the other (`edgelite.interpreter.feeds`)."""
        from edgelite.interpreter.feeds import find_key, input_keys, to_layout

        feeds, missing = [], []
        for k, port in enumerate(self.inputs):
            names = input_keys(port["keys"], k, len(self.inputs))
            key = find_key(arrays, names)
            if key is None:
                missing.append(" or ".join(map(repr, names)))
                continue
            value, note = _convert(arrays[key], port, key)
            value, moved = to_layout(value, port["shape"], port["perm"])
            feeds.append(_fit(value, port, key) + (f"--data {key!r}{moved}{note}",))
        if missing:
            raise Refused(f"--data {path.name} has no array for input {'; '.join(missing)} "
                           f"(it has: {', '.join(arrays) or 'nothing'})")
        counts = {len(v) for v, per_sample, _ in feeds if per_sample}
        if len(counts) > 1:
            raise Refused(f"--data inputs hold different numbers of samples: {sorted(counts)}")
        return feeds

    def invoke(self, values: list) -> list:
        if self.runner is not None:
            out = self.runner(**{p["name"]: v for p, v in zip(self.inputs, values)})
            return [out[p["name"]] for p in self.outputs]
        for p, v in zip(self.inputs, values):
            self.interpreter.set_tensor(p["index"], v)
        self.interpreter.invoke()
        return [self.interpreter.get_tensor(p["index"]) for p in self.outputs]

    def latencies(self, values: list, repeat: int) -> list:
        """Seconds of `repeat` invokes after a warm-up one; a signature's runner call includes
        copying its inputs in and outputs out."""
        import time

        call = self.interpreter.invoke if self.runner is None else lambda: self.invoke(values)
        clock, times = time.perf_counter, []
        self.invoke(values)
        for _ in range(repeat):
            start = clock()
            call()
            times.append(clock() - start)
        return times


def _port(details: dict, name: str, aliases: list, perm="guess") -> dict:
    """An input or output: its names, index, shape, dtype, quantization, and for inputs the
    permutation from the other layout (`edgelite.interpreter.feeds`)."""
    import numpy as np

    from edgelite.interpreter.feeds import guess_perm

    keys = list(dict.fromkeys([name, details["name"], *aliases]))
    dtype = np.dtype(details["dtype"])
    shape = [int(d) for d in details["shape"]]
    if perm == "guess":
        perm = guess_perm(len(shape), dtype.kind == "f")
    return {"name": name, "keys": keys, "index": details["index"], "shape": shape,
            "dtype": dtype, "quantization": details["quantization"], "perm": perm}




def _convert(value, port: dict, key: str):
    """`value` in the input's dtype, and a note saying how it got there ("" if unchanged)."""
    import numpy as np

    want, scale, zero_point = port["dtype"], *port["quantization"]
    if value.dtype == want:
        return value, ""
    if want.kind == "f" and value.dtype.kind in "biuf":
        return value.astype(want), f" (cast from {value.dtype})"
    if want.kind in "iu" and value.dtype.kind == "f" and scale > 0:
        info = np.iinfo(want)
        q = np.clip(np.round(value / scale) + zero_point, info.min, info.max).astype(want)
        return q, f" (quantized: scale {scale:.6g}, zero point {zero_point})"
    if want.kind in "iu" and value.dtype.kind in "iub":
        info = np.iinfo(want)
        if value.size == 0 or (value.min() >= info.min and value.max() <= info.max):
            return value.astype(want), f" (cast from {value.dtype})"
    raise Refused(f"input {port['name']!r} is {want.name}; --data {key!r} is {value.dtype} "
                   "and cannot be converted to it")


def _fit(value, port: dict, key: str) -> tuple:
    """(value, per_sample): the whole array when it has the input's shape, else samples along
    its first axis when the input has a batch of 1."""
    shape, got = tuple(port["shape"]), value.shape
    if got == shape:
        return value, False
    if shape and shape[0] == 1:
        if got == shape[1:]:
            return value[None], False
        if len(got) == len(shape) and got[1:] == shape[1:] and got[0] > 0:
            return value, True
    batch = f" (or [N, {', '.join(map(str, shape[1:]))}]: N samples)" if shape[:1] == (1,) else ""
    raise Refused(f"input {port['name']!r} has shape {list(shape)}{batch}; --data {key!r} has "
                   f"shape {list(got)}")
