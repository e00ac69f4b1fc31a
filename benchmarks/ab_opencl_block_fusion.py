"""Is a whole inverted-residual block in one kernel faster than the delegate's two launches?

    python benchmarks/ab_opencl_block_fusion.py [--blocks 112x16x96x24s2,56x24x144,...]
                                                [--seconds 2] [--tm 8]
    python benchmarks/ab_opencl_block_fusion.py --models mobilenet_v2,mp_hand_landmark
                                                [--precision fp32] [--threads 1]

The second form: whole models through the delegate without (A) and with (B) fuse.py's block
fusion (gemm.cl's expand_depthwise_then_conv_2d, which the prototype below led to), one
process, alternating, beside LiteRT.

A MobileNetV2 residual block: 1x1 CONV_2D C -> E (RELU6), DEPTHWISE_CONV_2D 3x3 stride 1 SAME
(RELU6), 1x1 CONV_2D E -> C, ADD of the block's input. The delegate runs it as two launches
(fuse.py): the expand as `gemm` (the E-channel tensor written to memory), then
`depthwise_conv_2d_then_conv_2d` reading it (the depthwise tensor stays in L1, the residual
in its epilogue). The prototype here (PROTO, not in the delegate) never writes the expanded
tensor: a work-item owns a strip of TM output columns over all rows and keeps a ring of the
three expanded input rows it needs (TM + 2 pixels x E channels, in local memory), so each
expanded pixel is computed (TM + 2) / TM times (halo columns), once per row; then the depthwise
of its TM pixels (local memory) and the projection with the residual.

Both run on the delegate's device (PoCL's basic device: 1 thread) in one process, in
alternating blocks: A = the delegate's launches re-enqueued as they are (its own kernels and
buffers), B = the prototype's launch; each followed by finish. Reported: median CPU time of
the process per run, B / A, and the prototype's max abs difference from the numpy
interpreter's output (random weights, std 0.3 / sqrt(fan-in)).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PROTO = r"""
// x [H, W, C]; we [C, EP] (packed: EP = E rounded up to 16 * NVE, zeros beyond E), be [EP];
// wd [9, EP], bd [EP]; wp in panels [NP / PANEL, EP, PANEL] (PANEL = VWP * NVP, NP = N
// rounded up to it), bp [NP]; out [Ho, Wo, N]. Stride S (define), SAME padding pt, pl; RES:
// the block's input added (S 1, N == C).
#define P ((TM - 1) * S + 3)  // pixels of an expanded row a strip reads: TM outputs, the halo
__kernel void KERNEL(block)(__global const float* restrict x, __global const float* restrict we,
                            __global const float* restrict be, __global const float* restrict wd,
                            __global const float* restrict bd, __global const float* restrict wp,
                            __global const float* restrict bp, __global float* restrict out,
                            __local float* restrict scratch, int H, int W, int C, int EP, int N,
                            int NP, int Ho, int Wo, int pt, int pl)
{
    const int ox0 = get_global_id(0) * TM;
    if (ox0 >= Wo) return;
    const int ix0 = ox0 * S - pl;
    __local float* ring = scratch + get_local_id(0) * (3 * P * EP + TM * EP);
    __local float* tile = ring + 3 * P * EP;  // the depthwise output of the strip's TM pixels
    for (int oy = 0; oy < Ho; oy++) {
        // the expanded rows this output row needs and the ring lacks: all three at first
        const int lo = oy * S - pt;
        for (int iy = (oy == 0 ? lo : lo + 3 - S); iy <= lo + 2; iy++) {
            __local float* er = ring + ((iy + 3) % 3) * P * EP;
            if (iy < 0 || iy >= H) {
                for (int i = 0; i < P * EP; i += 16) vstore16((float16)(0.0f), 0, er + i);
                continue;
            }
            __global const float* xr = x + (size_t)iy * W * C;
            for (int e0 = 0; e0 < EP * !(SKIP & 1); e0 += 16 * NVE) {
                float16 acc[P][NVE];
                _Pragma("unroll") for (int p = 0; p < P; p++)
                    _Pragma("unroll") for (int j = 0; j < NVE; j++) acc[p][j] = (float16)(0.0f);
                for (int k = 0; k < C; k++) {
                    float16 wv[NVE];
                    _Pragma("unroll") for (int j = 0; j < NVE; j++)
                        wv[j] = vload16(0, we + (size_t)k * EP + e0 + 16 * j);
                    _Pragma("unroll") for (int p = 0; p < P; p++) {
                        const int ix = clamp(ix0 + p, 0, W - 1);
                        const float16 xv = (float16)(xr[ix * C + k]);
                        _Pragma("unroll") for (int j = 0; j < NVE; j++)
                            acc[p][j] = fma(xv, wv[j], acc[p][j]);
                    }
                }
                _Pragma("unroll") for (int j = 0; j < NVE; j++) {
                    const float16 b = vload16(0, be + e0 + 16 * j);
                    _Pragma("unroll") for (int p = 0; p < P; p++) {
                        const int ix = ix0 + p;
                        const float16 v = (ix < 0 || ix >= W) ? (float16)(0.0f)
                            : clamp(acc[p][j] + b, 0.0f, 6.0f);
                        vstore16(v, 0, er + p * EP + e0 + 16 * j);
                    }
                }
            }
        }
        // the depthwise 3x3 of the TM pixels from the ring, RELU6, into the tile
        for (int e0 = 0; e0 < EP * !(SKIP & 2); e0 += 16) {
            float16 d[TM];
            _Pragma("unroll") for (int t = 0; t < TM; t++) d[t] = vload16(0, bd + e0);
            _Pragma("unroll") for (int ky = 0; ky < 3; ky++) {
                __local const float* er = ring + ((lo + ky + 3) % 3) * P * EP + e0;
                float16 r[P];
                _Pragma("unroll") for (int p = 0; p < P; p++) r[p] = vload16(0, er + p * EP);
                _Pragma("unroll") for (int kx = 0; kx < 3; kx++) {
                    const float16 wv = vload16(0, wd + (ky * 3 + kx) * EP + e0);
                    _Pragma("unroll") for (int t = 0; t < TM; t++)
                        d[t] = fma(r[t * S + kx], wv, d[t]);
                }
            }
            _Pragma("unroll") for (int t = 0; t < TM; t++)
                vstore16(clamp(d[t], 0.0f, 6.0f), 0, tile + t * EP + e0);
        }
        // the projection of the TM pixels (NVP vectors of VWP channels a panel), the bias and
        // (RES) the residual
        const int tm = min(TM, Wo - ox0);
        for (int n0 = 0; n0 < NP * !(SKIP & 4); n0 += VWP * NVP) {
            CAT(float, VWP) acc[TM][NVP];
            _Pragma("unroll") for (int j = 0; j < NVP; j++) {
                const CAT(float, VWP) b = CAT(vload, VWP)(0, bp + n0 + j * VWP);
                _Pragma("unroll") for (int t = 0; t < TM; t++) acc[t][j] = b;
            }
            __global const float* wk = wp + (size_t)n0 * EP;  // the panel's [EP, VWP * NVP]
            for (int k = 0; k < EP; k++, wk += VWP * NVP) {
                CAT(float, VWP) wv[NVP];
                _Pragma("unroll") for (int j = 0; j < NVP; j++)
                    wv[j] = CAT(vload, VWP)(0, wk + j * VWP);
                _Pragma("unroll") for (int t = 0; t < TM; t++) {
                    const CAT(float, VWP) xv = (CAT(float, VWP))(tile[t * EP + k]);
                    _Pragma("unroll") for (int j = 0; j < NVP; j++)
                        acc[t][j] = fma(xv, wv[j], acc[t][j]);
                }
            }
            for (int t = 0; t < tm; t++) {
                const size_t o = ((size_t)oy * Wo + ox0 + t) * N + n0;
                float tv[VWP * NVP];
                _Pragma("unroll") for (int j = 0; j < NVP; j++)
                    CAT(vstore, VWP)(acc[t][j], 0, tv + j * VWP);
                for (int n = 0; n < min(VWP * NVP, N - n0); n++)
                    out[o + n] = tv[n] + (RES ? x[o + n] : 0.0f);
            }
        }
    }
}
#undef P
"""


def block_model(h: int, c: int, e: int, n: int, stride: int, rng):
    """The block's .tflite and its weights: expand, depthwise (stride), project, and the
    residual ADD where stride 1 and n == c."""
    sys.path.insert(0, str(REPO / "tests" / "delegates"))
    from graphs import Graph

    def w(*shape, fan):
        return (rng.standard_normal(shape) * 0.3 / np.sqrt(fan)).astype(np.float32)

    g = Graph()
    x = g.input((1, h, h, c))
    we, be = w(e, 1, 1, c, fan=c), w(e, fan=1)
    wd, bd = w(1, 3, 3, e, fan=9), w(e, fan=1)
    wp, bp = w(n, 1, 1, e, fan=e), w(n, fan=1)
    y = g.op("CONV_2D", [x, g.const(we), g.const(be)], padding=0, stride_h=1, stride_w=1,
             fused_activation_function=3)
    y = g.op("DEPTHWISE_CONV_2D", [y, g.const(wd), g.const(bd)], padding=0, stride_h=stride,
             stride_w=stride, depth_multiplier=1, fused_activation_function=3)
    y = g.op("CONV_2D", [y, g.const(wp), g.const(bp)], padding=0, stride_h=1, stride_w=1)
    g.output(g.op("ADD", [y, x]) if stride == 1 and n == c else y)
    return g.save(), (we, be, wd, bd, wp, bp)


PROJECT = {}  # N -> (VWP, NVP) given by --project
# MobileNetV2's blocks with an expansion (HxCxE[xN[sS]]: input size, channels in, expanded,
# out, stride): the 7 stride-1 residual shapes and the 4 stride-2 ones
BLOCKS = ["112x16x96x24s2", "56x24x144", "56x24x144x32s2", "28x32x192", "28x32x192x64s2",
          "14x64x384", "14x64x384x96", "14x96x576", "14x96x576x160s2", "7x160x960",
          "7x160x960x320"]


def project_tiles(n: int) -> tuple:
    """(VWP, NVP) of the projection's panel: the delegate's choice (ops_conv._tiles), two
    16-wide vectors above 16 channels (24 padded to 32: measured 0.86 vs 0.97 of A with
    three 8-wide ones), else one; --project overrides."""
    if n in PROJECT:
        return PROJECT[n]
    return (16, 2) if n > 16 else (16 if n > 8 else 8, 1)


def packed(weights, c: int, e: int, n: int, nve: int):
    we, be, wd, bd, wp, bp = weights
    vwp, nvp = project_tiles(n)
    ep = -(-e // (16 * nve)) * 16 * nve
    pwe = np.zeros((c, ep), np.float32)
    pwe[:, :e] = we.reshape(e, c).T
    pbe = np.zeros(ep, np.float32)
    pbe[:e] = be
    pwd = np.zeros((9, ep), np.float32)
    pwd[:, :e] = wd.reshape(9, e)
    pbd = np.zeros(ep, np.float32)
    pbd[:e] = bd
    panel = vwp * nvp
    np_ = -(-n // panel) * panel
    pwp = np.zeros((ep, np_), np.float32)
    pwp[:e, :n] = wp.reshape(n, e).T
    pwp = np.ascontiguousarray(pwp.reshape(ep, np_ // panel, panel).transpose(1, 0, 2))
    pbp = np.zeros(np_, np.float32)
    pbp[:n] = bp
    return [pwe, pbe, pwd, pbd, pwp, pbp], ep, np_


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", default=",".join(BLOCKS))
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--tm", type=int, default=8)
    ap.add_argument("--nve", type=int, default=2)
    # phases left out (a bitmask: 1 the expand, 2 the depthwise, 4 the projection): where the
    # prototype's time goes (its output is then wrong)
    ap.add_argument("--skip", type=int, default=0)
    ap.add_argument("--project", default="")  # N:VWP:NVP,...: the projection's panel
    # whole models through the delegate, without and with fuse.py's block fusion, instead
    ap.add_argument("--models", default="")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--threads", type=int, default=1)  # --models: the delegate's and LiteRT's
    args = ap.parse_args(argv)
    if args.models:
        models_ab(args.models, args.seconds, args.precision, args.threads)
        return
    for item in filter(None, args.project.split(",")):
        n, vwp, nvp = (int(v) for v in item.split(":"))
        PROJECT[n] = (vwp, nvp)
    import pyopencl as cl

    from edgelite.delegates import load_delegate
    from edgelite.delegates.opencl import device
    from edgelite.interpreter import Interpreter
    rng = np.random.default_rng(0)
    print(f"### One inverted-residual block: the delegate's 2 launches (A) vs one fused kernel "
          f"(B, TM {args.tm}, NVE {args.nve}); 1 thread, median CPU time per run\n")
    print("| block (H=W x C x E) | load | A launches | A | B | B / A | B max abs error | "
          "A max abs error |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for spec in args.blocks.split(","):
        h, c, e, n, stride = block_spec(spec)
        content, weights = block_model(h, c, e, n, stride, rng)
        x = rng.standard_normal((1, h, h, c)).astype(np.float32)
        ref = Interpreter(model_content=content)
        ref.allocate_tensors()
        ref.set_tensor(ref.get_input_details()[0]["index"], x)
        ref.invoke()
        want = ref.get_tensor(ref.get_output_details()[0]["index"]).copy()
        d = load_delegate("opencl", {"precision": "fp32"})
        it = Interpreter(model_content=content, experimental_delegates=[d])
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        got_a = it.get_tensor(it.get_output_details()[0]["index"]).copy()
        run = next(r for r, _ in it._runtime.plans[0].steps if getattr(r, "calls", None))
        dev = d.device_for(it._runtime)
        vwp, nvp = project_tiles(n)
        defines = {"SUFFIX": "_0", "TM": args.tm, "NVE": args.nve, "VWP": vwp, "NVP": nvp,
                   "SKIP": args.skip, "S": stride, "RES": int(stride == 1 and n == c)}
        src = dev.target + "".join(f"#define {k} {v}\n" for k, v in defines.items()) \
            + device._text("common") + PROTO
        prog = cl.Program(dev.context, src).build(
            options=["-cl-mad-enable", "-cl-no-signed-zeros"])
        arrays, ep, np_ = packed(weights, c, e, n, args.nve)
        mf = cl.mem_flags
        bufs = [cl.Buffer(dev.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
                for a in [x.reshape(-1)] + arrays]
        out = cl.Buffer(dev.context, mf.READ_WRITE, want.nbytes)
        ho = -(-h // stride)
        pad = max((ho - 1) * stride + 3 - h, 0) // 2  # SAME: the smaller half first
        per = (3 * ((args.tm - 1) * stride + 3) * ep + args.tm * ep) * 4
        kernel = prog.block_0
        kernel.set_args(*bufs, out, cl.LocalMemory(per), *(np.int32(v) for v in
                                                           (h, h, c, ep, n, np_, ho, ho, pad,
                                                            pad)))
        strips = -(-ho // args.tm)

        def fused(queue=dev.queue, kernel=kernel, strips=strips):
            cl.enqueue_nd_range_kernel(queue, kernel, (strips,), (1,))
            queue.finish()

        def delegate(queue=dev.queue, calls=run.calls):
            for call in calls:
                cl.enqueue_nd_range_kernel(queue, *call)
            queue.finish()

        fused()
        got_b = np.empty_like(want)
        cl.enqueue_copy(dev.queue, got_b, out)
        cpu = {"A": [], "B": []}
        end = time.perf_counter() + 2 * args.seconds
        while time.perf_counter() < end:
            for name, f in (("A", delegate), ("B", fused)):
                stop = time.perf_counter() + 0.1
                while time.perf_counter() < stop:
                    t = time.process_time()
                    f()
                    cpu[name].append(time.process_time() - t)
        med = {k: float(np.median(v)) * 1e3 for k, v in cpu.items()}
        load = open("/proc/loadavg").read().split()[0]
        print(f"| {spec} | {load} | {len(run.calls)} | {med['A']:.3f} ms | "
              f"{med['B']:.3f} ms | {med['B'] / med['A']:.2f} | "
              f"{np.max(np.abs(got_b - want)):.1e} | {np.max(np.abs(got_a - want)):.1e} |",
              flush=True)


def models_ab(names: str, seconds: float, precision: str, threads: int = 1) -> None:
    """Whole models: the delegate without the block fusion (A: fuse.EXPAND_MIN past every
    tensor) against with it (B), and LiteRT, one process, alternating (bench_opencl.latency);
    A2, a second interpreter without it, gives the noise of the same runs (A2 / A)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_opencl as bo
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    from edgelite.delegates import load_delegate
    from edgelite.delegates.opencl import fuse
    from edgelite.interpreter import Interpreter
    print(f"### The delegate without (A) and with (B) the block fusion; {precision}, {threads} "
          f"thread(s), {bo.machine()}\n")
    print("| model | load | A | B | LiteRT | launches A / B | B / A CPU | A2 / A CPU (noise) | "
          "A / LiteRT CPU | B / LiteRT CPU | max abs A - B |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    default = fuse.EXPAND_MIN
    for name in names.split(","):
        path = bo.models_dir(None) / f"{name}.tflite"
        x = bo._input(path)
        runners, launches = {}, {}
        for key, least in (("A", 1 << 62), ("B", default), ("A2", 1 << 62)):
            fuse.EXPAND_MIN = least
            try:
                d = load_delegate("opencl", {"precision": precision, "threads": threads})
                runners[key] = bo._prepared(Interpreter(model_path=str(path),
                                                        experimental_delegates=[d]), x)
            finally:
                fuse.EXPAND_MIN = default
            launches[key] = sum(len(getattr(r, "calls", ()) or ())
                                for r, _ in runners[key]._runtime.plans[0].steps)
        runners["LiteRT"] = bo._prepared(LiteRT(model_path=str(path), num_threads=threads), x)
        diff = max(float(np.max(np.abs(a - b))) for a, b in
                   zip(bo._outputs(runners["A"]), bo._outputs(runners["B"])))
        wall, cpu = bo.latency(runners, seconds)
        w = {k: v[len(v) // 2] * 1e3 for k, v in wall.items()}
        c = {k: v[len(v) // 2] * 1e3 for k, v in cpu.items()}
        load = open("/proc/loadavg").read().split()[0]
        cells = " | ".join(f"{w[k]:.2f} / {c[k]:.2f} ms" for k in ("A", "B", "LiteRT"))
        print(f"| {name} | {load} | {cells} | {launches['A']} / {launches['B']} | "
              f"{c['B'] / c['A']:.3f} | {c['A2'] / c['A']:.3f} | {c['A'] / c['LiteRT']:.3f} | "
              f"{c['B'] / c['LiteRT']:.3f} | {diff:.1e} |", flush=True)
    print("\nEach cell: median wall / median CPU time of the process per invoke.")


def block_spec(text: str) -> tuple:
    """HxCxE[xN[sS]] -> (H, C, E, N, S): N defaults to C, the stride S to 1."""
    parts = text.split("x")
    h, c, e = (int(v) for v in parts[:3])
    n, stride = c, 1
    if len(parts) > 3:
        last, _, st = parts[3].partition("s")
        n, stride = int(last), int(st or 1)
    return h, c, e, n, stride


if __name__ == "__main__":
    main()
