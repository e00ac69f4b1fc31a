"""Training steps per second: the digits head fine-tuned on the device.

    python benchmarks/bench_training.py [--batch 32] [--blocks 15] [--json OUT]

The recipe of the issue's digits test: `digits_cnn` (converted from ONNX when onnx is installed,
else its .tflite twin), both FULLY_CONNECTED layers trainable (`last:2`), Adam lr 1e-3, batches of
32 real images. One step = the forward pass through the frozen convolutions, the loss, the
gradients of the head and the Adam update. Timed, 1 thread, in alternating blocks:

- edgelite's `train` signature;
- LiteRT's `train` signature on the same file (default kernels, XNNPACK);
- torch CPU, where installed: the same network, convolutions frozen (no_grad), the head trained
  by torch.optim.Adam.

Times are the calling thread's CPU time (`time.thread_time`) per step, median over blocks, so
other work on a shared machine does not count. Then edgelite's step is taken apart: each plan
step timed alone, summed by part (variables, frozen forward, loss, backward, optimizer).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # before numpy loads OpenBLAS

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PAUSE_S = 0.02


def models_dir() -> Path:
    return Path(os.environ.get("EDGELITE_MODELS", ROOT.parent / "shared" / "models"))


def training_model(models: Path) -> tuple:
    """(training .tflite bytes, source Model, data) for the digits recipe."""
    from edgelite.interpreter.training import make_trainable, reinitialize
    from edgelite.schema import load, save

    try:
        from edgelite.converter import TFLiteConverter
        source = load(TFLiteConverter.from_onnx(str(models / "digits_cnn.onnx")).convert())
    except ImportError:
        source = load(models / "digits_cnn.tflite")
    sg = source.subgraphs[0]
    fcs = [op for op in sg.operators if op.opcode.builtin == "FULLY_CONNECTED"]
    reinitialize(source, [sg.tensors[op.inputs[1]].name for op in fcs], seed=0)
    content = save(make_trainable(source, trainable="last:2", optimizer="adam",
                                  learning_rate=1e-3))
    data = np.load(models / "digits.npz")
    return content, source, data


def _blocks(steps: dict, batches: list, blocks: int, per_block: int) -> dict:
    """CPU seconds per step of each runtime, median over alternating blocks."""
    times = {name: [] for name in steps}
    k = 0
    for _ in range(blocks):
        for name, step in steps.items():
            time.sleep(PAUSE_S)
            start = time.thread_time()
            for _ in range(per_block):
                step(batches[k % len(batches)])
                k += 1
            times[name].append((time.thread_time() - start) / per_block)
    return {name: float(np.median(t)) for name, t in times.items()}


def torch_step(source, data, batch):
    """The same step in torch, or None when torch is not installed."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    sg = source.subgraphs[0]
    convs = [op for op in sg.operators if op.opcode.builtin == "CONV_2D"]
    fcs = [op for op in sg.operators if op.opcode.builtin == "FULLY_CONNECTED"]

    def const(t):
        return torch.tensor(np.array(source.constant(sg, t)))

    conv_layers = []
    for op in convs:
        w = const(op.inputs[1]).permute(0, 3, 1, 2).contiguous()  # OHWI -> OIHW
        conv = torch.nn.Conv2d(w.shape[1], w.shape[0], w.shape[2], padding="same")
        conv.weight.data, conv.bias.data = w, const(op.inputs[2])
        conv_layers += [conv, torch.nn.ReLU(), torch.nn.MaxPool2d(2)]
    features = torch.nn.Sequential(*conv_layers).requires_grad_(False)
    head = torch.nn.Sequential(torch.nn.Linear(128, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    for layer, op in zip((head[0], head[2]), fcs):
        layer.weight.data, layer.bias.data = const(op.inputs[1]), const(op.inputs[2])
    opt = torch.optim.Adam(head.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.tensor(data["x_train"])   # NCHW
    y = torch.tensor(data["y_train"])

    def step(idx):
        with torch.no_grad():
            f = features(x[idx]).permute(0, 2, 3, 1).reshape(len(idx), -1)  # NHWC flatten
        loss = loss_fn(head(f), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    return step


def profile(it, batch: dict, runs: int = 20) -> dict:
    """Seconds per part of edgelite's train step: each plan step timed alone."""
    from edgelite.interpreter.training import training_facts

    runner = it.get_signature_runner("train")
    runner(**batch)
    plan = it._runtime.subgraph(training_facts(it._model)["subgraphs"]["train"])
    parts: dict = {}
    for _ in range(runs):
        for (run, args), oi in zip(plan.steps, plan.step_ops):
            op = plan.sg.operators[oi]
            name = plan.sg.tensors[op.outputs[0]].name if op.outputs else op.op
            part = ("variables" if op.op in ("VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE",
                                             "CALL_ONCE")
                    else "backward" if name.startswith("grad/")
                    else "loss" if name.startswith("loss")
                    else "optimizer" if name.startswith("optimizer") else "frozen forward")
            start = time.perf_counter()
            run(*args)
            parts[part] = parts.get(part, 0.0) + time.perf_counter() - start
    return {k: v / runs for k, v in parts.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--blocks", type=int, default=15)
    parser.add_argument("--steps-per-block", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    from ai_edge_litert.interpreter import Interpreter as LiteRT

    from edgelite.interpreter import Interpreter

    content, source, data = training_model(models_dir())
    x = np.ascontiguousarray(data["x_train"].transpose(0, 2, 3, 1))
    y = data["y_train"].astype(np.int32)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    batches = [order[i:i + args.batch] for i in range(0, len(y) - args.batch + 1, args.batch)]
    ours = Interpreter(model_content=content, num_threads=1)
    theirs = LiteRT(model_content=content, num_threads=1)
    name = next(iter(ours.get_signature_runner("infer").get_input_details()))
    runners = {"edgelite": ours.get_signature_runner("train"),
               "LiteRT": theirs.get_signature_runner("train")}
    steps = {k: (lambda idx, r=r: r(**{name: x[idx], "labels": y[idx]})["loss"])
             for k, r in runners.items()}
    torch_fn = torch_step(source, data, args.batch)
    if torch_fn is not None:
        steps["torch CPU"] = torch_fn
    for step in steps.values():   # warm up (allocation, first-call costs)
        for idx in batches[:3]:
            step(idx)
    seconds = _blocks(steps, batches, args.blocks, args.steps_per_block)
    parts = profile(ours, {name: x[batches[0]], "labels": y[batches[0]]})

    print(f"digits head, batch {args.batch}, 1 thread, CPU time per step (median of "
          f"{args.blocks} blocks of {args.steps_per_block} steps)\n")
    print("| runtime | ms / step | steps / s | vs edgelite |")
    print("|---|---:|---:|---:|")
    for k, s in seconds.items():
        print(f"| {k} | {s * 1e3:.3f} | {1 / s:.0f} | {seconds['edgelite'] / s:.2f}x |")
    total = sum(parts.values())
    print("\nedgelite's step by part (each plan step timed alone)\n")
    print("| part | ms | share |")
    print("|---|---:|---:|")
    for k, s in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"| {k} | {s * 1e3:.3f} | {s / total:.0%} |")
    print(f"| sum | {total * 1e3:.3f} | |")
    if args.json:
        args.json.write_text(json.dumps({"batch": args.batch, "seconds_per_step": seconds,
                                         "edgelite_parts": parts,
                                         "load": os.getloadavg()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
