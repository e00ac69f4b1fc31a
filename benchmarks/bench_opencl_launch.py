"""What a kernel launch costs on the delegate's CPU device, apart from the kernel's work.

    python benchmarks/bench_opencl_launch.py [--threads 1,2] [--launches 1,40] [--groups 1,64]

A kernel that does nothing, enqueued `launches` times over `groups` work-groups of one
work-item (the delegate's CPU launches use local size 1), then the queue finished: median wall
and CPU time of the process per batch, each thread count in a process of its own (PoCL starts
its workers once a process: device.open_device). On PoCL one thread is its "basic" device
(kernels on the calling thread), more its pthread device (worker threads that wake per
kernel). 40 launches is about one invoke of MobileNetV2 or hand landmarks.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time

EMPTY = "__kernel void empty(__global float* a) { if (get_global_id(0) == 0 && a[0] < 0) " \
        "a[0] = 1; }"


def measure(threads: int, launches: list, groups: list, repeats: int = 300) -> None:
    from edgelite.delegates.opencl.device import open_device
    dev = open_device("cpu", threads=threads)
    cl = dev.cl
    program = cl.Program(dev.context, EMPTY).build()
    buf = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, 64)  # held: the kernel uses it
    kernel = cl.Kernel(program, "empty")
    kernel.set_arg(0, buf)
    for g in groups:
        for n in launches:
            wall, cpu = [], []
            for _ in range(repeats):
                w, c = time.perf_counter(), time.process_time()
                for _ in range(n):
                    cl.enqueue_nd_range_kernel(dev.queue, kernel, (g,), (1,))
                dev.queue.finish()
                wall.append(time.perf_counter() - w)
                cpu.append(time.process_time() - c)
            wall.sort()
            cpu.sort()
            print(f"| {dev.name} | {threads} | {n} | {g} | {wall[repeats // 2] * 1e6:.0f} us | "
                  f"{cpu[repeats // 2] * 1e6:.0f} us |", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--launches", default="1,40")
    ap.add_argument("--groups", default="1,64")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child process's count
    args = ap.parse_args(argv)
    launches = [int(v) for v in args.launches.split(",")]
    groups = [int(v) for v in args.groups.split(",")]
    if args.one:
        measure(args.one, launches, groups)
        return
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"### Empty-kernel launches + finish (load {load})\n")
    print("| device | threads | launches | work-groups | wall | CPU |")
    print("|---|---:|---:|---:|---:|---:|")
    for t in args.threads.split(","):
        subprocess.run([sys.executable, __file__, "--one", t, "--launches", args.launches,
                        "--groups", args.groups], check=True)


if __name__ == "__main__":
    main()
