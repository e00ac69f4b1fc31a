"""`edgelite compare FLOAT.tflite QUANT.tflite --data FILE.npz`: per-layer error of a quantized
model against its float original.

Both models run in edgelite's interpreter, keeping every tensor, on the same samples. Each op
output of the float model that the quantized one also has (same tensor name and shape) is
compared after dequantizing: max |error|, RMSE, SNR (dB: signal power over error power) and the
cosine similarity. Errors grow along the network; the layer where the SNR falls off a cliff is the
one to look at (its range, its per-channel scales, or keep it float).

Works with the runtime install alone (numpy and flatbuffers).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from .common import echo, fail
from .params import Arg, Opt

DEFAULT_SAMPLES = 32


def compare_command(
    float_model: Annotated[Path, Arg("the float .tflite model")],
    quant_model: Annotated[Path, Arg("its quantized .tflite version")],
    data: Annotated[Path | None, Opt(
        "--data", help="an .npz of float inputs: keyed by input name or input_0, ... (or x, or "
        "the one array there is), samples along the first axis; model (NHWC) or ONNX (NCHW) "
        "layout. Default: seeded random values in [-1, 1]")] = None,
    key: Annotated[str | None, Opt(
        "--key", help="the --data array to feed (a one-input model)")] = None,
    samples: Annotated[int, Opt("--samples", min=1, help="how many samples to run")] = \
        DEFAULT_SAMPLES,
    worst: Annotated[int, Opt("--worst", min=0, help="list only the N layers of lowest SNR")] = 0,
    as_json: Annotated[bool, Opt("--json", help="print one JSON document instead of text")] = False,
) -> None:
    """Per-layer error of a quantized model against its float original."""
    try:
        rows, notes = compare_files(float_model, quant_model, data, key, samples)
    except (ValueError, OSError) as e:
        fail(str(e))
    if worst:
        rows = sorted(rows, key=lambda r: r["snr_db"])[:worst]
    if as_json:
        echo(json.dumps({"notes": notes, "layers": rows}, indent=1))
    else:
        echo("\n".join(notes + table_lines(rows)))


def compare_files(float_path: Path, quant_path: Path, data: Path | None, key: str | None,
                  count: int) -> tuple:
    """(rows, notes): one row per shared op output, in the float model's op order."""
    import numpy as np

    from edgelite.interpreter import Interpreter

    runs = []
    for path in (float_path, quant_path):
        if not path.is_file():
            raise ValueError(f"no such file: {path}")
        it = Interpreter(model_path=str(path), experimental_preserve_all_tensors=True)
        it.allocate_tensors()
        runs.append(it)
    fl, qu = runs
    feeds, notes = _feeds(fl, data, key, count)
    pairs = shared_outputs(fl, qu)
    if not pairs:
        raise ValueError("the models share no op output (same tensor name and shape): is the "
                         "second one a quantization of the first?")
    stats = {name: np.zeros(5) for name, _, _, _ in pairs}    # err^2, f^2, q^2, f q, n
    worst = {name: 0.0 for name, _, _, _ in pairs}
    q_inputs = qu.get_input_details()
    for sample in feeds:
        _run(fl, fl.get_input_details(), sample)
        _run(qu, q_inputs, [_as_input(v, d) for v, d in zip(sample, q_inputs)])
        for name, fi, qi, _ in pairs:
            f = fl.get_tensor(fi).astype(np.float64)
            q = dequantized(qu, qi)
            e = q - f
            stats[name] += [np.sum(e * e), np.sum(f * f), np.sum(q * q), np.sum(f * q), f.size]
            worst[name] = max(worst[name], float(np.abs(e).max(initial=0.0)))
    rows = []
    for name, _, qi, (index, op) in pairs:
        err2, f2, q2, fq, n = stats[name]
        detail = qu.get_tensor_details()[qi]
        scale = detail["quantization"][0]
        rows.append({
            "op_index": index, "op": op, "tensor": name,
            "dtype": np.dtype(detail["dtype"]).name, "scale": scale,
            "max_abs_error": worst[name], "rmse": float(np.sqrt(err2 / n)),
            "rms": float(np.sqrt(f2 / n)),
            "snr_db": float(10 * np.log10(f2 / err2)) if err2 > 0 else float("inf"),
            "cosine": float(fq / np.sqrt(f2 * q2)) if f2 > 0 and q2 > 0 else 1.0,
        })
    notes.insert(0, f"{float_path.name} vs {quant_path.name}: {len(rows)} shared op outputs, "
                    f"{len(feeds)} samples")
    return rows, notes


def shared_outputs(fl, qu) -> list:
    """[(name, float tensor index, quantized tensor index, (op index, op))] for the float model's
    op outputs whose name and shape the quantized model has too."""
    sg_f = fl._runtime.model.subgraphs[0]
    sg_q = qu._runtime.model.subgraphs[0]
    by_name = {}
    for op in sg_q.operators:
        for t in op.outputs:
            by_name.setdefault(sg_q.tensors[t].name, t)
    pairs = []
    for index, op in enumerate(sg_f.operators):
        for t in op.outputs:
            tensor = sg_f.tensors[t]
            qt = by_name.get(tensor.name)
            if qt is None or tuple(sg_q.tensors[qt].shape) != tuple(tensor.shape) \
                    or tensor.dtype != "float32":
                continue
            pairs.append((tensor.name, t, qt, (index, op.op)))
    return pairs


def dequantized(it, index: int):
    """A tensor's real values: (q - zero_point) x scale for quantized ones (per channel too)."""
    import numpy as np

    value = it.get_tensor(index)
    if value.dtype.kind == "f":
        return value.astype(np.float64)
    q = it.get_tensor_details()[index]["quantization_parameters"]
    scales, zps, axis = q["scales"], q["zero_points"], q["quantized_dimension"]
    if scales.size == 0:
        return value.astype(np.float64)
    shape = [1] * value.ndim
    if scales.size > 1:
        shape[axis] = -1
    real = value.astype(np.float64) - zps.reshape(shape)
    return real * scales.astype(np.float64).reshape(shape)


def _run(it, details: list, values: list) -> None:
    for d, v in zip(details, values):
        it.set_tensor(d["index"], v)
    it.invoke()


def _as_input(value, detail: dict):
    """A float sample as the quantized model's input type (quantized with its parameters)."""
    import numpy as np

    dtype = np.dtype(detail["dtype"])
    if dtype.kind == "f":
        return value.astype(dtype)
    scale, zero_point = detail["quantization"]
    info = np.iinfo(dtype)
    q = np.sign(value / scale) * np.floor(np.abs(value / scale) + 0.5) + zero_point
    return np.clip(q, info.min, info.max).astype(dtype)


def _feeds(it, data: Path | None, key: str | None, count: int) -> tuple:
    """(samples, notes): each sample a list of float arrays, one per input, shaped like it."""
    import numpy as np

    from edgelite.interpreter.feeds import find_key, input_keys, model_perms

    details = it.get_input_details()
    perms = model_perms(it._runtime.model)
    if data is None:
        rng = np.random.default_rng(0)
        return ([[rng.uniform(-1, 1, d["shape"]).astype(np.float32) for d in details]
                 for _ in range(count)], ["inputs: seeded random values in [-1, 1]"])
    if not data.is_file():
        raise ValueError(f"no such file: {data}")
    with np.load(data, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    columns, notes = [], []
    for k, d in enumerate(details):
        names = [key] if key is not None else input_keys([d["name"]], k, len(details))
        found = find_key(arrays, names)
        if found is None and key is None and len(details) == 1:
            floats = [n for n, a in arrays.items() if a.dtype.kind == "f"]
            found = floats[0] if len(floats) == 1 else None
        if found is None:
            raise ValueError(f"--data {data.name} has no array for input {d['name']!r} (tried "
                             f"{', '.join(map(repr, names))}; it has {', '.join(arrays)}); name "
                             "one with --key")
        column, note = _fit_samples(arrays[found], tuple(int(s) for s in d["shape"]), found,
                                    perms[k])
        columns.append(column)
        notes.append(f"input {d['name']!r}: --data {found!r}{note}")
    n = min(min(len(c) for c in columns), count)
    return [[c[i:i + 1] for c in columns] for i in range(n)], notes


def _fit_samples(a, shape: tuple, name: str, perm) -> tuple:
    """(array of samples [N, *shape[1:]] as float32, how it was made to fit)."""
    import numpy as np

    from edgelite.interpreter.feeds import to_layout

    a, note = to_layout(np.asarray(a, np.float32), shape, perm)
    per = shape[1:]
    if a.shape[1:] == per:
        return a, note
    if a.shape == per:
        return a[None], note
    raise ValueError(f"--data {name!r} has shape {list(a.shape)}; the input takes "
                     f"{list(shape)} (samples along the first axis)")


def table_lines(rows: list) -> list:
    if not rows:
        return []
    head = f"{'#':>4}  {'op':<18} {'tensor':<34} {'dtype':<7} {'max|err|':>9} {'rmse':>9} " \
           f"{'rms':>9} {'SNR dB':>7} {'cosine':>8}"
    lines = [head]
    for r in rows:
        name = r["tensor"] if len(r["tensor"]) <= 34 else "..." + r["tensor"][-31:]
        lines.append(f"{r['op_index']:>4}  {r['op']:<18} {name:<34} {r['dtype']:<7} "
                     f"{r['max_abs_error']:>9.3g} {r['rmse']:>9.3g} {r['rms']:>9.3g} "
                     f"{r['snr_db']:>7.1f} {r['cosine']:>8.5f}")
    return lines
