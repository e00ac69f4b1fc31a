"""The fuzz test's worker and its case generator.

A case is a seed: `make_case(seed, corpus)` deterministically picks a model file and a mutation
and returns the mutated bytes. The worker process reads seeds on stdin, one a line, and for each
runs `load`, then `save`, then `load` of what was saved (which must equal the first), then the
interpreter (allocate + invoke), under a per-case alarm and an address space limit, and answers
one JSON line. Allowed outcomes: "ran" / "allocated" / "run_error" (loaded, saved, and the
interpreter ran it or refused it with a clear error), "save_error" (loaded; the writer refused
with ModelError), "model_error" (the loader refused with ModelError).
Anything else is a failure the parent reports with the seed.

Run one case by hand:  python -m tests.schema.fuzz_worker --show SEED CORPUS.json
"""
from __future__ import annotations

import inspect
import json
import random
import re
import resource
import signal
import struct
import sys
import time
import traceback

SLOWDOWN = 8   # a case may take this many times the clean model's run before the alarm
KINDS = {  # mutation kind -> weight
    "bit_flip": 3, "byte_overwrite": 3, "word_overwrite": 3, "truncate": 1, "splice": 1,
    "duplicate": 1, "vector_length": 3, "shape_value": 2, "field_value": 3,
}
INTERESTING_BYTES = (0x00, 0xFF, 0x7F, 0x80, 0x01, 0xFE)
INTERESTING_WORDS = (0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFF, 0x10000, 0x7FFF,
                     0x40000000, 0xFFFFFFFE, 0x100, 0xFF)


# --- where the interesting fields of a file are --------------------------------------------

def _field_offsets() -> dict:
    """(table, accessor) -> vtable slot, read from the generated bindings (no hard-coded ids)."""
    from edgelite.schema import tflite_generated as fb
    wanted = {
        "Model": ["OperatorCodes", "Subgraphs", "Buffers", "Metadata", "SignatureDefs"],
        "SubGraph": ["Tensors", "Inputs", "Outputs", "Operators"],
        "Tensor": ["Shape", "Type", "Buffer", "Name", "ShapeSignature"],
        "Operator": ["OpcodeIndex", "Inputs", "Outputs", "BuiltinOptionsType", "CustomOptions",
                     "Intermediates"],
        "Buffer": ["Data", "Offset", "Size"],
        "OperatorCode": ["DeprecatedBuiltinCode", "BuiltinCode", "Version"],
        "QuantizationParameters": ["Scale", "ZeroPoint", "QuantizedDimension"],
        "Metadata": ["Buffer"], "SignatureDef": ["Inputs", "Outputs", "SubgraphIndex"],
    }
    out = {}
    for table, names in wanted.items():
        for name in names:
            src = inspect.getsource(getattr(getattr(fb, table), name))
            out[table, name] = int(re.search(r"Offset\((\d+)\)", src).group(1))
    return out


def find_sites(content: bytes) -> dict:
    """Byte positions of vector lengths, shape values and scalar fields in a sound file:
    {"vector_length": [pos...], "shape_value": [pos...], "field_value": [(pos, size)...]}."""
    from edgelite.schema import tflite_generated as fb
    slots = _field_offsets()
    sites = {"vector_length": [], "shape_value": [], "field_value": []}

    def vec(tab, table, name):
        o = tab.Offset(slots[table, name])
        if o:
            start = tab.Vector(o)
            sites["vector_length"].append(start - 4)
            return start, tab.VectorLen(o)
        return None, 0

    def scalar(tab, table, name, size):
        o = tab.Offset(slots[table, name])
        if o:
            sites["field_value"].append((tab.Pos + o, size))

    root = fb.Model.GetRootAs(content, 0)
    for name in ("OperatorCodes", "Subgraphs", "Buffers", "Metadata", "SignatureDefs"):
        vec(root._tab, "Model", name)
    for i in range(root.OperatorCodesLength()):
        t = root.OperatorCodes(i)._tab
        scalar(t, "OperatorCode", "DeprecatedBuiltinCode", 1)
        scalar(t, "OperatorCode", "BuiltinCode", 4)
        scalar(t, "OperatorCode", "Version", 4)
    for i in range(root.BuffersLength()):
        t = root.Buffers(i)._tab
        vec(t, "Buffer", "Data")
        scalar(t, "Buffer", "Offset", 8)
        scalar(t, "Buffer", "Size", 8)
    for i in range(root.MetadataLength()):
        scalar(root.Metadata(i)._tab, "Metadata", "Buffer", 4)
    for i in range(root.SignatureDefsLength()):
        t = root.SignatureDefs(i)._tab
        vec(t, "SignatureDef", "Inputs")
        vec(t, "SignatureDef", "Outputs")
        scalar(t, "SignatureDef", "SubgraphIndex", 4)
    for si in range(root.SubgraphsLength()):
        sg = root.Subgraphs(si)
        for name in ("Tensors", "Inputs", "Outputs", "Operators"):
            vec(sg._tab, "SubGraph", name)
        for ti in range(sg.TensorsLength()):
            t = sg.Tensors(ti)
            start, n = vec(t._tab, "Tensor", "Shape")
            sites["shape_value"].extend(start + 4 * k for k in range(n))
            vec(t._tab, "Tensor", "Name")
            vec(t._tab, "Tensor", "ShapeSignature")
            scalar(t._tab, "Tensor", "Type", 1)
            scalar(t._tab, "Tensor", "Buffer", 4)
            q = t.Quantization()
            if q is not None:
                vec(q._tab, "QuantizationParameters", "Scale")
                vec(q._tab, "QuantizationParameters", "ZeroPoint")
                scalar(q._tab, "QuantizationParameters", "QuantizedDimension", 4)
        for oi in range(sg.OperatorsLength()):
            t = sg.Operators(oi)._tab
            for name in ("Inputs", "Outputs", "CustomOptions", "Intermediates"):
                vec(t, "Operator", name)
            scalar(t, "Operator", "OpcodeIndex", 4)
            scalar(t, "Operator", "BuiltinOptionsType", 1)
    return sites


# --- mutations ------------------------------------------------------------------------------

def _put(data: bytearray, pos: int, value: int, size: int) -> None:
    if 0 <= pos and pos + size <= len(data):
        data[pos:pos + size] = (value % (1 << (8 * size))).to_bytes(size, "little")


def mutate(kind: str, data: bytes, other: bytes, sites: dict, rng: random.Random) -> bytes:
    d = bytearray(data)
    n = len(d)
    if kind == "bit_flip":
        for _ in range(rng.randint(1, 8)):
            d[rng.randrange(n)] ^= 1 << rng.randrange(8)
    elif kind == "byte_overwrite":
        for _ in range(rng.randint(1, 4)):
            d[rng.randrange(n)] = rng.choice(INTERESTING_BYTES)
    elif kind == "word_overwrite":
        for _ in range(rng.randint(1, 3)):
            _put(d, rng.randrange(0, n - 3) & ~3, rng.choice(INTERESTING_WORDS + (n, n - 4)), 4)
    elif kind == "truncate":
        cut = rng.choice([rng.randrange(n), n - rng.randint(1, 64), rng.randrange(64)])
        d = d[:max(cut, 0)]
    elif kind == "splice":
        a, b = rng.randrange(n), rng.randrange(len(other))
        d = d[:a] + bytearray(other[b:])
    elif kind == "duplicate":
        a = rng.randrange(n)
        size = rng.randint(1, min(4096, n - a))
        region = d[a:a + size]
        at = rng.randrange(n)
        if rng.random() < 0.5:
            d[at:at] = region  # insert: shifts every later offset
        else:
            d[at:at + size] = region
    elif kind == "vector_length":
        for _ in range(rng.randint(1, 2)):
            pos = rng.choice(sites["vector_length"])
            old = struct.unpack_from("<I", d, pos)[0]
            value = rng.choice([0x7FFFFFFF, 0xFFFFFFFF, 0x80000000, 0x10000, n // 4, n // 4 - 1,
                                n, old + 1, old * 2 + 1, old + 1000, 0, 0x3FFFFFFF])
            _put(d, pos, value, 4)
    elif kind == "shape_value":
        for _ in range(rng.randint(1, 3)):
            pos = rng.choice(sites["shape_value"])
            _put(d, pos, rng.choice([0x7FFFFFFF, 0x40000000, 0x10000, -1, -2, 0, 0x80000000,
                                     65535, 3, 1 << 20]), 4)
    elif kind == "field_value":
        for _ in range(rng.randint(1, 2)):
            pos, size = rng.choice(sites["field_value"])
            bits = 8 * size
            _put(d, pos, rng.choice([0, 1, -1, 127, 128, 255, 0x7FFF, 1 << (bits - 1),
                                     (1 << (bits - 1)) - 1, n, n + 16, 2 ** 31 - 1, 150, 200,
                                     rng.randrange(256)]), size)
    return bytes(d)


def make_case(seed: int, corpus: list, cache: dict | None = None) -> tuple:
    """(model name, mutation kind, mutated bytes) for a seed. `corpus`: [{name, path, weight}]."""
    cache = {} if cache is None else cache
    rng = random.Random(seed)
    entry = rng.choices(corpus, weights=[c["weight"] for c in corpus])[0]
    kind = rng.choices(list(KINDS), weights=list(KINDS.values()))[0]
    data = _read(entry["path"], cache)
    other = _read(rng.choice(corpus)["path"], cache)
    key = ("sites", entry["path"])
    if key not in cache:
        cache[key] = find_sites(data)
    sites = cache[key]
    if kind in ("vector_length", "shape_value", "field_value") and not sites[kind]:
        kind = "bit_flip"
    return entry["name"], kind, mutate(kind, data, other, sites, rng)


def _read(path: str, cache: dict) -> bytes:
    if path not in cache:
        with open(path, "rb") as f:
            cache[path] = f.read()
    return cache[path]


# --- the worker -----------------------------------------------------------------------------

class CaseTimeout(BaseException):
    """The per-case alarm fired (a BaseException, so no `except Exception` swallows it)."""


def _on_alarm(signum, frame):
    raise CaseTimeout()


def _limit_memory(extra_bytes: int) -> None:
    with open("/proc/self/status") as f:
        size_kb = int(re.search(r"VmSize:\s+(\d+)", f.read()).group(1))
    limit = size_kb * 1024 + extra_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def run_case(data: bytes, budget_bytes: int = 64 << 20) -> tuple:
    from edgelite.schema import ModelError, load, save
    try:
        model = load(data)
    except ModelError as e:
        return "model_error", str(e)[:300]
    try:
        saved = save(model)
    except ModelError as e:
        return "save_error", str(e)[:300]
    try:
        reloaded = load(saved)
    except ModelError as e:
        return "failure", f"the writer made a file the loader refuses: {e}"[:600]
    if model.get_metadata("min_runtime_version") is None:  # the one thing the writer adds
        reloaded.metadata = reloaded.metadata[:-1]
        reloaded.buffers = reloaded.buffers[:-1]
    if reloaded != model:
        return "failure", ("saved and reloaded, the model differs: "
                           f"{_first_difference(model, reloaded)}")
    return run_interpreter(data, budget_bytes)


def run_interpreter(data: bytes, budget_bytes: int) -> tuple:
    """Allocate and invoke a loaded model on zero inputs. Allowed: it runs ("ran"), or one clear
    error naming the place: ModelError / KernelError (ValueErrors), UnsupportedOpsError or a
    kernel failure wrapped with its operator (RuntimeErrors), or the plan's own refusal of an
    allocation bigger than the machine. Models whose activations exceed `budget_bytes` (a few
    times the unmutated model's) are allocated but not invoked: their compute would be
    legitimately long, not a hang."""
    import numpy as np
    from edgelite.interpreter import Interpreter, KernelError, UnsupportedOpsError
    from edgelite.schema import ModelError
    try:
        it = Interpreter(model_content=data, num_threads=1)
        it.allocate_tensors()
        plan = it._runtime.subgraph(0)
        if sum(a.nbytes for a in plan.arrays if a is not None) > budget_bytes:
            return "allocated", ""
        for d in it.get_input_details():
            if d["dtype"] is not np.object_:
                it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
        it.invoke()
    except (ModelError, KernelError, UnsupportedOpsError) as e:
        return "run_error", f"{type(e).__name__}: {e}"[:300]
    except RuntimeError as e:
        if str(e).startswith("subgraph "):  # a kernel failure, named by the plan
            return "run_error", str(e)[:300]
        return "failure", traceback.format_exc(limit=-6)[-2000:]
    except MemoryError as e:
        if "more than this machine" in str(e):
            return "run_error", str(e)[:300]
        raise
    return "ran", ""


def _first_difference(a, b) -> str:
    for name in ("description", "version", "signature_defs", "metadata", "buffers"):
        if getattr(a, name) != getattr(b, name):
            return name
    for si, (x, y) in enumerate(zip(a.subgraphs, b.subgraphs)):
        for ti, (t, u) in enumerate(zip(x.tensors, y.tensors)):
            if t != u:
                return f"subgraph {si} tensor {ti}: {t} != {u}"
        for oi, (o, p) in enumerate(zip(x.operators, y.operators)):
            if o != p:
                return f"subgraph {si} operator {oi}: {o} != {p}"
        if (x.inputs, x.outputs, x.name) != (y.inputs, y.outputs, y.name):
            return f"subgraph {si} inputs/outputs/name"
    return "subgraph count"


def worker(corpus_json: str, timeout_s: float, memory_extra: int) -> None:
    with open(corpus_json) as f:
        corpus = json.load(f)
    import edgelite.interpreter  # noqa: F401  (import before measuring the baseline)
    import edgelite.schema  # noqa: F401
    cache: dict = {}
    clean_s = {}   # per model: seconds of a run of the unmutated file (this machine's pace)
    for c in corpus:
        start = time.perf_counter()
        run_case(_read(c["path"], cache))
        clean_s[c["name"]] = time.perf_counter() - start
    _limit_memory(memory_extra)
    signal.signal(signal.SIGALRM, _on_alarm)
    out = sys.stdout
    for line in sys.stdin:
        seed = int(line)
        name = kind = "?"
        limit = timeout_s
        try:
            name, kind, data = make_case(seed, corpus, cache)
            # A slow or busy machine runs every case slower: the alarm is relative to the clean
            # file's time there (a mutation that makes a run 8x slower than the model is a bug).
            limit = max(timeout_s, SLOWDOWN * clean_s[name])
            signal.setitimer(signal.ITIMER_REAL, limit)
            try:
                outcome, detail = run_case(data)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except CaseTimeout:
            outcome, detail = "failure", f"timeout: more than {limit:.2g} s"
        except MemoryError:
            outcome, detail = "failure", "MemoryError: over the address-space limit"
        except Exception:  # noqa: BLE001 -- any other exception is the failure being reported
            outcome, detail = "failure", traceback.format_exc(limit=-6)[-2000:]
        out.write(json.dumps({"seed": seed, "model": name, "kind": kind, "outcome": outcome,
                              "detail": detail}) + "\n")
        out.flush()


def main(argv: list) -> None:
    if argv[:1] == ["--show"]:
        seed, corpus_json = int(argv[1]), argv[2]
        with open(corpus_json) as f:
            corpus = json.load(f)
        name, kind, data = make_case(seed, corpus)
        print(f"seed {seed}: {name}, {kind}, {len(data)} bytes")
        print(run_case(data))
        return
    worker(argv[0], float(argv[1]), int(argv[2]))


if __name__ == "__main__":
    main(sys.argv[1:])
