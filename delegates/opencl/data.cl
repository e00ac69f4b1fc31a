// Data movement and the rest.

// out[i] = in[index[i]], or `fill` where index[i] < 0 (padding). Index tables are computed at
// prepare by running the op's CPU kernel on the positions of its input.
__kernel void KERNEL(gather)(__global const T* restrict in, __global const int* restrict index,
                             __global T* restrict out, int n, float fill)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    int k = index[i];
    ST(k >= 0 ? LD(in, k) : fill, out, i);
}

// One input of a concatenation: [outer, inner] into columns [offset, offset + inner) of
// [outer, total], with the op's fused clamp.
__kernel void KERNEL(concatenation)(__global const T* restrict in, __global T* restrict out,
                                    int outer, int inner, int total, int offset, float lo,
                                    float hi)
{
    const int i = get_global_id(0), o = get_global_id(1);
    if (i >= inner || o >= outer) return;
    ST(CLAMP(LD(in, (size_t)o * inner + i), lo, hi), out, (size_t)o * total + offset + i);
}

// MEAN / SUM over the middle of [outer, R, inner]: VW values of `inner` per item.
__kernel void KERNEL(reduce_mid)(__global const T* restrict in, __global T* restrict out, int outer,
                                 int R, int inner, float scale)
{
    const int i = get_global_id(0) * VW, o = get_global_id(1);
    if (i >= inner || o >= outer) return;
    __global const T* p = in + (size_t)o * R * inner + i;
    floatV acc = 0.0f;
    for (int r = 0; r < R; r++) acc += LDV(p, (size_t)r * inner);
    STV(acc * scale, out, (size_t)o * inner + i);
}

// SOFTMAX over rows of L values, one row per item.
__kernel void KERNEL(softmax)(__global const T* restrict in, __global T* restrict out, int rows,
                              int L, float beta)
{
    const int r = get_global_id(0);
    if (r >= rows) return;
    __global const T* x = in + (size_t)r * L;
    __global T* y = out + (size_t)r * L;
    float m = -INFINITY;
    for (int i = 0; i < L; i++) m = fmax(m, LD(x, i));
    float s = 0.0f;
    for (int i = 0; i < L; i++) s += exp((LD(x, i) - m) * beta);
    float inv = 1.0f / s;
    for (int i = 0; i < L; i++) ST(exp((LD(x, i) - m) * beta) * inv, y, i);
}

// RESIZE_BILINEAR, NHWC: per output row / column the two source rows / columns and the weight
// of the second (tables from the CPU kernel's arithmetic).
__kernel void KERNEL(resize_bilinear)(__global const T* restrict in, __global T* restrict out,
                                      __global const int* restrict ys,
                                      __global const float* restrict fy,
                                      __global const int* restrict xs,
                                      __global const float* restrict fx, int H, int W, int C,
                                      int Ho, int Wo)
{
    const int c = get_global_id(0), ox = get_global_id(1), row = get_global_id(2);
    if (c >= C || ox >= Wo) return;
    const int b = row / Ho, oy = row % Ho;
    const int y0 = ys[2 * oy], y1 = ys[2 * oy + 1], x0 = xs[2 * ox], x1 = xs[2 * ox + 1];
    const float dy = fy[oy], dx = fx[ox];
    __global const T* p0 = in + (size_t)(b * H + y0) * W * C + c;
    __global const T* p1 = in + (size_t)(b * H + y1) * W * C + c;
    float v = LD(p0, x0 * C) * (1.0f - dy) * (1.0f - dx) + LD(p1, x0 * C) * dy * (1.0f - dx)
            + LD(p0, x1 * C) * (1.0f - dy) * dx + LD(p1, x1 * C) * dy * dx;
    ST(v, out, ((size_t)row * Wo + ox) * C + c);
}

// BATCH_MATMUL: out[b, m, n] = sum_k x[b, m, k] y[b, k, n], through strides (adjoints and
// broadcast batches are strides too).
__kernel void KERNEL(batch_matmul)(__global const T* restrict x, __global const T* restrict y,
                                   __global T* restrict out, int M, int N, int K, int batches,
                                   int xsb, int xsm, int xsk, int ysb, int ysk, int ysn, int nb1,
                                   int xsb0, int ysb0)
{
    const int n = get_global_id(0), m = get_global_id(1), b = get_global_id(2);
    if (n >= N || m >= M || b >= batches) return;
    // batch b = (b0, b1) over a [*, nb1] batch grid: x and y stride each part separately
    const int b0 = b / nb1, b1 = b % nb1;
    __global const T* px = x + b0 * xsb0 + b1 * xsb + m * xsm;
    __global const T* py = y + b0 * ysb0 + b1 * ysb + n * ysn;
    float acc = 0.0f;
    for (int k = 0; k < K; k++) acc = fma(LD(px, k * xsk), LD(py, k * ysk), acc);
    ST(acc, out, ((size_t)b * M + m) * N + n);
}

// TRANSPOSE_CONV, NHWC: out[b, oy, ox, co] = bias[co] + sum over (ky, kx) with
// oy + pt - ky = iy * sh (same for x) of in[b, iy, ix, :] . w[co, ky, kx, :].
__kernel void KERNEL(transpose_conv)(__global const T* restrict in, __global const TW_* restrict w,
                                     __global const float* restrict bias, __global T* restrict out,
                                     int H, int W, int C, int Ho, int Wo, int Co, int KH, int KW,
                                     int sh, int sw, int pt, int pl, float lo, float hi)
{
    const int co = get_global_id(0), ox = get_global_id(1), row = get_global_id(2);
    if (co >= Co || ox >= Wo) return;
    const int b = row / Ho, oy = row % Ho;
    float acc = bias[co];
    for (int ky = 0; ky < KH; ky++) {
        int ty = oy + pt - ky;
        if (ty < 0 || ty % sh) continue;
        int iy = ty / sh;
        if (iy >= H) continue;
        for (int kx = 0; kx < KW; kx++) {
            int tx = ox + pl - kx;
            if (tx < 0 || tx % sw) continue;
            int ix = tx / sw;
            if (ix >= W) continue;
            __global const T* p = in + ((size_t)(b * H + iy) * W + ix) * C;
            __global const TW_* q = w + ((size_t)(co * KH + ky) * KW + kx) * C;
            for (int c = 0; c < C; c++) acc = fma(LD(p, c), LDW(q, c), acc);
        }
    }
    ST(CLAMP(acc, lo, hi), out, ((size_t)row * Wo + ox) * Co + co);
}

// DEQUANTIZE of an int8 / uint8 / float16 tensor computed on the device.
__kernel void KERNEL(dequantize_int8)(__global const char* restrict in, __global T* restrict out,
                                      int n, float scale, int zp)
{
    const int i = get_global_id(0);
    if (i < n) ST(((float)in[i] - zp) * scale, out, i);
}

__kernel void KERNEL(dequantize_uint8)(__global const uchar* restrict in,
                                       __global T* restrict out, int n, float scale, int zp)
{
    const int i = get_global_id(0);
    if (i < n) ST(((float)in[i] - zp) * scale, out, i);
}

__kernel void KERNEL(dequantize_float16)(__global const half* restrict in,
                                         __global T* restrict out, int n)
{
    const int i = get_global_id(0);
    if (i < n) ST(vload_half(i, in), out, i);
}
