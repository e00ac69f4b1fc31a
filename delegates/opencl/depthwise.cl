// DEPTHWISE_CONV_2D and the 2-D pools, NHWC. A work-item computes TW neighbouring output
// pixels of one row for VW channels. Depth multiplier DM > 1 (VW 1 only): output channel c
// reads input channel c / DM. Weights [KH * KW, C].
#ifndef DM
#define DM 1
#endif
#ifndef TW
#define TW 4
#endif
#ifndef IS_MAX
#define IS_MAX 1
#endif

__kernel void depthwise(__global const T* restrict in, __global const TW_* restrict w,
                        __global const TW_* restrict bias, __global T* restrict out,
                        int H, int W, int C, int Cin, int Ho, int Wo, int KH, int KW, int sh,
                        int sw, int dh, int dw, int pt, int pl, float lo, float hi)
{
    const int c0 = get_global_id(0) * VW;
    const int ox0 = get_global_id(1) * TW;
    const int row = get_global_id(2);  // b * Ho + oy
    if (c0 >= C || ox0 >= Wo) return;
    const int b = row / Ho, oy = row % Ho;
    floatV acc[TW];
    floatV init = LDWV(bias, c0);
    _Pragma("unroll") for (int t = 0; t < TW; t++) acc[t] = init;
    const int ci = c0 / DM;
    for (int ky = 0; ky < KH; ky++) {
        int iy = oy * sh - pt + ky * dh;
        if (iy < 0 || iy >= H) continue;
        __global const T* src = in + (size_t)(b * H + iy) * W * Cin + ci;
        for (int kx = 0; kx < KW; kx++) {
            floatV wv = LDWV(w, (ky * KW + kx) * C + c0);
            _Pragma("unroll") for (int t = 0; t < TW; t++) {
                int ix = (ox0 + t) * sw - pl + kx * dw;
                if (ix >= 0 && ix < W) acc[t] = fma(LDV(src, ix * Cin), wv, acc[t]);
            }
        }
    }
    _Pragma("unroll") for (int t = 0; t < TW; t++)
        if (ox0 + t < Wo) STV(CLAMP(acc[t], lo, hi), out, ((size_t)row * Wo + ox0 + t) * C + c0);
}

// MAX_POOL_2D (IS_MAX 1) and AVERAGE_POOL_2D (IS_MAX 0; divides by the taps inside the input,
// as TFLite).
__kernel void pool(__global const T* restrict in, __global T* restrict out,
                   int H, int W, int C, int Ho, int Wo, int KH, int KW, int sh, int sw,
                   int pt, int pl, float lo, float hi)
{
    const int c0 = get_global_id(0) * VW;
    const int ox0 = get_global_id(1) * TW;
    const int row = get_global_id(2);
    if (c0 >= C || ox0 >= Wo) return;
    const int b = row / Ho, oy = row % Ho;
    floatV acc[TW];
    int count[TW];
    _Pragma("unroll") for (int t = 0; t < TW; t++) { acc[t] = IS_MAX ? -INFINITY : 0.0f; count[t] = 0; }
    for (int ky = 0; ky < KH; ky++) {
        int iy = oy * sh - pt + ky;
        if (iy < 0 || iy >= H) continue;
        __global const T* src = in + (size_t)(b * H + iy) * W * C + c0;
        for (int kx = 0; kx < KW; kx++) {
            _Pragma("unroll") for (int t = 0; t < TW; t++) {
                int ix = (ox0 + t) * sw - pl + kx;
                if (ix >= 0 && ix < W) {
                    floatV x = LDV(src, ix * C);
                    acc[t] = IS_MAX ? fmax(acc[t], x) : acc[t] + x;
                    count[t]++;
                }
            }
        }
    }
    _Pragma("unroll") for (int t = 0; t < TW; t++) {
        floatV v = IS_MAX ? acc[t] : acc[t] / (float)max(count[t], 1);
        if (ox0 + t < Wo) STV(CLAMP(v, lo, hi), out, ((size_t)row * Wo + ox0 + t) * C + c0);
    }
}
