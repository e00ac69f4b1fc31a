// DEPTHWISE_CONV_2D and the 2-D pools, NHWC. A work-item computes TW neighbouring output
// pixels of one row for VW channels. The kernel window (KH, KW), strides (SH, SW) and
// dilations (DH, DW) are compile-time constants: the taps unroll, their offsets fold.
// Channels need not be a multiple of VW: the last vector of a pixel reads on into the next
// pixel (buffers have slack at the end) and stores only its own lanes. Depth multiplier
// DM > 1 (VW 1 only): output channel c reads input channel c / DM. Weights [KH * KW, CP],
// scales and biases [2, CP] (float32), CP = C rounded up to VW.
#ifndef DM
#define DM 1
#endif
#ifndef TW
#define TW 4
#endif
#ifndef IS_MAX
#define IS_MAX 1
#endif
#ifndef DH
#define DH 1
#define DW 1
#endif

// Pixels t < count of the tile, VW channels from c0 of C, to row `row` of out.
#define STORE_TILE(acc, out, row, ox0, count, c0, C) \
    _Pragma("unroll") for (int t = 0; t < TW; t++) \
        if (t < (count)) { \
            __global T* o_ = out + ((size_t)(row) * Wo + (ox0) + t) * (C) + (c0); \
            if ((c0) + VW <= (C)) STV(acc[t], o_, 0); \
            else ST_TAIL(acc[t], o_, (C) - (c0)); }

__kernel void KERNEL(depthwise_conv_2d)(__global const T* restrict in,
                                        __global const TW_* restrict w,
                                        __global const float* restrict sb,
                                        __global T* restrict out, int H, int W, int C, int Cin,
                                        int Ho, int Wo, int pt, int pl, float lo, float hi)
{
    const int c0 = get_global_id(0) * VW;
    const int ox0 = get_global_id(1) * TW;
    const int row = get_global_id(2);  // b * Ho + oy
    if (c0 >= C || ox0 >= Wo) return;
    const int b = row / Ho, oy = row % Ho;
    const int CP = (C + VW - 1) / VW * VW;
    const int ix0 = ox0 * SW - pl;
    floatV acc[TW];
    _Pragma("unroll") for (int t = 0; t < TW; t++) acc[t] = (floatV)(0.0f);
    const bool inside = ix0 >= 0 && ix0 + (TW - 1) * SW + (KW - 1) * DW < W;
    _Pragma("unroll") for (int ky = 0; ky < KH; ky++) {
        const int iy = oy * SH - pt + ky * DH;
        if (iy < 0 || iy >= H) continue;
        // pixel ix0 of row iy; only offsets that land inside the row are read
        __global const T* src = in + ((size_t)(b * H + iy) * W) * Cin + c0 / DM;
        if (inside) {
            src += ix0 * Cin;
            _Pragma("unroll") for (int kx = 0; kx < KW; kx++) {
                floatV wv = LDWV(w, (ky * KW + kx) * CP + c0);
                _Pragma("unroll") for (int t = 0; t < TW; t++)
                    acc[t] = fma(LDV(src, (t * SW + kx * DW) * Cin), wv, acc[t]);
            }
        } else {
            _Pragma("unroll") for (int kx = 0; kx < KW; kx++) {
                floatV wv = LDWV(w, (ky * KW + kx) * CP + c0);
                _Pragma("unroll") for (int t = 0; t < TW; t++) {
                    int ix = ix0 + t * SW + kx * DW;
                    if (ix >= 0 && ix < W) acc[t] = fma(LDV(src, ix * Cin), wv, acc[t]);
                }
            }
        }
    }
    const floatV scale = LDFV(sb, c0), bias = LDFV(sb, CP + c0);
#ifdef REQUANT  // an int8 model's integer depthwise convolution: scale = bias, bias = multiplier
    const floatV shift = LDFV(sb, 2 * CP + c0);
    _Pragma("unroll") for (int t = 0; t < TW; t++)
        acc[t] = CAT(requant, VW)(acc[t], scale, bias, shift, lo, hi);
#else
    _Pragma("unroll") for (int t = 0; t < TW; t++)
        acc[t] = CLAMP(fma(acc[t], scale, bias), lo, hi);
#endif
    STORE_TILE(acc, out, row, ox0, Wo - ox0, c0, C);
}

// MAX_POOL_2D (IS_MAX 1) and AVERAGE_POOL_2D (IS_MAX 0; divides by the taps inside the input,
// as TFLite): one body, named after the op it is. Window KH x KW, strides SH, SW.
#if IS_MAX
__kernel void KERNEL(max_pool_2d)
#else
__kernel void KERNEL(average_pool_2d)
#endif
    (__global const T* restrict in, __global T* restrict out, int H, int W, int C, int Ho, int Wo,
     int pt, int pl, float lo, float hi)
{
    const int c0 = get_global_id(0) * VW;
    const int ox0 = get_global_id(1) * TW;
    const int row = get_global_id(2);
    if (c0 >= C || ox0 >= Wo) return;
    const int b = row / Ho, oy = row % Ho;
    floatV acc[TW];
    int count[TW];
    _Pragma("unroll") for (int t = 0; t < TW; t++) {
        acc[t] = IS_MAX ? -INFINITY : 0.0f;
        count[t] = 0;
    }
    for (int ky = 0; ky < KH; ky++) {
        int iy = oy * SH - pt + ky;
        if (iy < 0 || iy >= H) continue;
        __global const T* src = in + (size_t)(b * H + iy) * W * C + c0;
        for (int kx = 0; kx < KW; kx++) {
            _Pragma("unroll") for (int t = 0; t < TW; t++) {
                int ix = (ox0 + t) * SW - pl + kx;
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
        acc[t] = CLAMP(v, lo, hi);
    }
    STORE_TILE(acc, out, row, ox0, Wo - ox0, c0, C);
}
