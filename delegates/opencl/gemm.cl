// CONV_2D and FULLY_CONNECTED as tiled matrix products, NHWC: out[M, N] = A[M, K] . W[K, N].
// Each work-item computes TM rows x (NV vectors of VW) columns in registers. The weights are
// packed at prepare in panels of PANEL = VW * NV columns, each panel [K, PANEL] contiguous (a
// work-item streams one panel front to back), zeros beyond N. Per panel, float32 scales then
// biases (`sb`, [panels, 2, PANEL]): the epilogue computes acc * scale + bias.
//   gemm:   A is a [M, lda] matrix (1x1 convolutions with stride 1, fully connected layers)
//   conv_2d: A is the im2col of an NHWC input, read in place (any kernel, stride, dilation,
//            padding); K = KH * KW * C in (ky, kx, c) order, as the packed weights. A work-item
//            computes TM neighbouring output pixels of one output row.
// Epilogue: scale and bias, then (rc > 0) a residual [M, rc] added (rc <= N; zeros beyond rc,
// a fused channel PAD), then the clamp. Whatever costs nothing at run time is an argument, not
// a define (the residual, mt, the launch order): fewer programs for PoCL to compile.

#undef STF
#undef TI
#undef LDI
#undef ACC_PANEL
#ifndef TM
#define TM 4
#endif
#ifndef NV
#define NV 1
#endif
#define PANEL (VW * NV)
#undef SBN
#undef EPI
#undef LOAD_E
// The epilogue of a panel's accumulators: acc * scale + bias, or (REQUANT: an int8 model's
// integer convolution, quant_int.py) the integer requantization, clamped; SBN per-channel
// rows beside each panel (scales, biases / biases, multipliers, shifts).
#if defined(REQUANT) && REQUANT == 2  // FULLY_CONNECTED: per channel a bias, a double multiplier
#define SBN 3
#define EPI(a, j) CAT(requant_fc, VW)((a), s_[j], e_[j], lo, hi)
#define LOAD_E(sbp) CAT(double, VW) e_[NV]; \
    _Pragma("unroll") for (int j = 0; j < NV; j++) \
        e_[j] = CAT(vload, VW)(0, (__global const double*)((sbp) + PANEL) + j * VW);
#elif defined(REQUANT)
#define SBN 3
#define EPI(a, j) CAT(requant, VW)((a), s_[j], c_[j], e_[j], lo, hi)
#define LOAD_E(sbp) floatV e_[NV]; \
    _Pragma("unroll") for (int j = 0; j < NV; j++) e_[j] = LDFV(sbp, 2 * PANEL + j * VW);
#else
#define SBN 2
#define EPI(a, j) fma((a), s_[j], c_[j])
#define LOAD_E(sbp)
#endif

#define ACC_INIT(acc) \
    _Pragma("unroll") for (int j = 0; j < NV; j++) \
        _Pragma("unroll") for (int i = 0; i < TM; i++) acc[i][j] = (floatV)(0.0f);

#if VW == 1
#define STF(v, p) (*(p) = (v))
#else
#define STF(v, p) CAT(vstore, VW)((v), 0, (p))
#endif

// Rows m0 .. m0 + rows - 1 of the tile to out[m, :N]; sbp: the panel's scales and biases.
// A whole tile (all TM rows, the panel inside N and the residual's rc) stores vectors; the
// rest (a last row tile, a last panel) goes through a private copy and one scalar loop:
// TM x NV tail paths, as there were, made each kernel take the compiler twice as long.
#define ACC_STORE(acc, sbp, out, m0, rows, n0, N) { \
    floatV s_[NV], c_[NV]; \
    _Pragma("unroll") for (int j = 0; j < NV; j++) { \
        s_[j] = LDFV(sbp, j * VW); c_[j] = LDFV(sbp, PANEL + j * VW); } \
    LOAD_E(sbp) \
    if ((rows) >= TM && (n0) + PANEL <= (N) && (rc == 0 || (n0) + PANEL <= rc)) { \
        _Pragma("unroll") for (int i = 0; i < TM; i++) { \
            const size_t m_ = (size_t)(m0) + i; \
            _Pragma("unroll") for (int j = 0; j < NV; j++) { \
                const int n_ = (n0) + j * VW; \
                floatV v_ = EPI(acc[i][j], j); \
                if (rc > 0) v_ += LDV(res, m_ * rc + n_); \
                STV(CLAMP(v_, lo, hi), out, m_ * (N) + n_); } } \
    } else { \
        float t_[TM][PANEL]; \
        _Pragma("unroll") for (int i = 0; i < TM; i++) \
            _Pragma("unroll") for (int j = 0; j < NV; j++) \
                STF(EPI(acc[i][j], j), &t_[i][j * VW]); \
        const int nc_ = min(PANEL, (N) - (n0)); \
        for (int i = 0; i < min((rows), TM); i++) { \
            const size_t m_ = (size_t)(m0) + i; \
            for (int n = 0; n < nc_; n++) { \
                float v_ = t_[i][n]; \
                if ((n0) + n < rc) v_ += LD(res, m_ * rc + (n0) + n); \
                ST(CLAMP(v_, lo, hi), out, m_ * (N) + (n0) + n); } } } }

// The model's input may stay float32 under HALF (IN_F32: the first convolution reads it as
// given, not rounded to half).
#ifdef IN_F32
#define TI float
#define LDI(p, i) ((p)[i])
#else
#define TI T
#define LDI(p, i) LD(p, i)
#endif

// acc[i][:] += x_i[k] * panel[k, :] for k < K; x_i = rows[i], panel advanced past K rows.
#define ACC_STEP(acc, x, wk) { \
        floatV b_[NV]; \
        _Pragma("unroll") for (int j = 0; j < NV; j++) b_[j] = LDWV(wk, j * VW); \
        _Pragma("unroll") for (int i = 0; i < TM; i++) { \
            floatV x_ = (floatV)(x); \
            _Pragma("unroll") for (int j = 0; j < NV; j++) \
                acc[i][j] = fma(x_, b_[j], acc[i][j]); } }
#if defined(HALF) && !defined(IN_F32)
// Half inputs 8 values of a row at a time, converted into a private array that the products
// broadcast from: a scalar vload_half per value made fp16 gemm 3x slower than fp32 on PoCL,
// 4 at a time from a float4 8% slower than this.
#define ACC_PANEL(acc, rows, wk, K) { \
    int k_ = 0; \
    for (; k_ + 8 <= (K); k_ += 8) { \
        float x8_[TM][8]; \
        _Pragma("unroll") for (int i = 0; i < TM; i++) \
            vstore8(vload_half8(0, rows[i] + k_), 0, x8_[i]); \
        _Pragma("unroll") for (int u = 0; u < 8; u++) { \
            ACC_STEP(acc, x8_[i][u], wk); wk += PANEL; } } \
    for (; k_ < (K); k_++, wk += PANEL) ACC_STEP(acc, LDI(rows[i], k_), wk); }
#else
#define ACC_PANEL(acc, rows, wk, K) \
    for (int k_ = 0; k_ < (K); k_++, wk += PANEL) ACC_STEP(acc, LDI(rows[i], k_), wk)
#endif

// Work-item ids: (panel, group of mt row tiles), or with panel_major (group, panel): the items
// of one panel run one after another, so a panel is read from memory once (layers whose
// weights outweigh their input: few rows, many weights).

__kernel void KERNEL(gemm)(__global const TI* restrict a, __global const TW_* restrict w,
                           __global const float* restrict sb, __global T* restrict out, int M,
                           int K, int N, int lda, float lo, float hi,
                           __global const T* restrict res, int rc, int mt, int panel_major)
{
    const int id0 = get_global_id(0), id1 = get_global_id(1);
    const int n0 = (panel_major ? id1 : id0) * PANEL;
    const int group = panel_major ? id0 : id1;
    if (n0 >= N) return;
    for (int t = 0; t < mt; t++) {
        const int m0 = (group * mt + t) * TM;
        if (m0 >= M) return;
        floatV acc[TM][NV];
        ACC_INIT(acc);
        __global const TI* rows[TM];
        _Pragma("unroll") for (int i = 0; i < TM; i++)
            rows[i] = a + (size_t)min(m0 + i, M - 1) * lda;
        __global const TW_* wk = w + (size_t)n0 * K;
        ACC_PANEL(acc, rows, wk, K);
        ACC_STORE(acc, sb + SBN * n0, out, m0, M - m0, n0, N);
    }
}

__kernel void KERNEL(conv_2d)(__global const TI* restrict in, __global const TW_* restrict w,
                              __global const float* restrict sb, __global T* restrict out, int H,
                              int W, int C, int Ho, int Wo, int kh, int kw, int sh, int sw, int dh,
                              int dw, int pt, int pl, int N, float lo, float hi,
                              __global const T* restrict res, int rc)
{
    const int n0 = get_global_id(0) * PANEL;
    const int ox0 = get_global_id(1) * TM;
    const int row = get_global_id(2);  // b * Ho + oy
    if (n0 >= N || ox0 >= Wo) return;
    const int b = row / Ho, oy = row % Ho;
    const int iy0 = oy * sh - pt, ix0 = ox0 * sw - pl;
    const int kwc = kw * C;
    floatV acc[TM][NV];
    ACC_INIT(acc);
    // Every tap of every pixel of the tile inside the row, and the kw * C values a pixel
    // reads from it contiguous: one plain loop per kernel row.
    const bool inside = dw == 1 && ix0 >= 0 && ix0 + (TM - 1) * sw + kw - 1 < W;
    __global const TW_* wk = w + (size_t)n0 * kh * kwc;
    for (int ky = 0; ky < kh; ky++) {
        const int iy = iy0 + ky * dh;
        if (iy < 0 || iy >= H) {
            wk += (size_t)kwc * PANEL;
            continue;
        }
        __global const TI* src = in + (size_t)(b * H + iy) * W * C;
        if (inside) {
            __global const TI* rows[TM];
            _Pragma("unroll") for (int i = 0; i < TM; i++) rows[i] = src + (ix0 + i * sw) * C;
            ACC_PANEL(acc, rows, wk, kwc);
            continue;
        }
        for (int kx = 0; kx < kw; kx++) {
            __global const TI* rows[TM];
            float keep[TM];  // 0 for taps in the padding: they read pixel 0 and add nothing
            _Pragma("unroll") for (int i = 0; i < TM; i++) {
                int ix = ix0 + i * sw + kx * dw;
                bool in_row = ix >= 0 && ix < W;
                keep[i] = in_row ? 1.0f : 0.0f;
                rows[i] = src + (in_row ? ix * C : 0);
            }
            for (int c = 0; c < C; c++, wk += PANEL) {
                floatV b_[NV];
                _Pragma("unroll") for (int j = 0; j < NV; j++) b_[j] = LDWV(wk, j * VW);
                _Pragma("unroll") for (int i = 0; i < TM; i++) {
                    floatV x_ = (floatV)(LDI(rows[i], c) * keep[i]);
                    _Pragma("unroll") for (int j = 0; j < NV; j++)
                        acc[i][j] = fma(x_, b_[j], acc[i][j]);
                }
            }
        }
    }
    ACC_STORE(acc, sb + SBN * n0, out, row * Wo + ox0, Wo - ox0, n0, N);
}

#if defined(KH) && !defined(EXPAND)
// DEPTHWISE_CONV_2D (depth multiplier 1) and the 1x1 CONV_2D that reads its output, in one
// pass: a work-item computes the depthwise output of TM neighbouring pixels of one row, all C
// channels (16 a vector, clamped), into its scratch in local memory (L1-sized), then every
// panel of the 1x1 convolution from there. The depthwise tensor never reaches memory. Window
// (KH, KW) compile-time, strides and dilations arguments (each was one more kernel to compile;
// a unit stride and dilation loads each input pixel once, as the compile-time 1 let the
// compiler do: 6% of fp16's depthwise time); depthwise weights [KH * KW, CP] and scales and
// biases [2, CP], CP = C rounded up to 16; 1x1 weights in panels of K = C.
// The (TM - 1) * S + KW input pixels of a row that TM outputs of stride S read, each loaded
// (converted) once, zeros for those in the padding (a clamped load, then a select: no branch
// per tap), then every tap from registers. Rows of 7 or 14 outputs (MobileNetV2's, with
// TM = 7) have no work-item inside the row, so the per-tap path had run every one of them:
// the depthwise took 55-80% of these kernels' time.
#undef DW_WINDOW
#undef DW_S2
#define DW_WINDOW(S) { \
    float16 x[(TM - 1) * (S) + KW]; \
    _Pragma("unroll") for (int u = 0; u < (TM - 1) * (S) + KW; u++) { \
        const int ix = ix0 + u; \
        if (inside) { x[u] = LD16(src, ix * C); continue; } \
        const float16 v = LD16(src, clamp(ix, 0, W - 1) * C); \
        x[u] = ix >= 0 && ix < W ? v : (float16)(0.0f); } \
    _Pragma("unroll") for (int kx = 0; kx < KW; kx++) { \
        const float16 wv = LDW16(wy, kx * CP); \
        _Pragma("unroll") for (int t = 0; t < TM; t++) d[t] = fma(x[t * (S) + kx], wv, d[t]); } }
// stride 2's window in registers only where it and the TM sums fit the 32 of AVX-512
#define DW_S2 ((TM - 1) * 2 + KW + TM <= 30)
__kernel void KERNEL(depthwise_conv_2d_then_conv_2d)(
    __global const T* restrict in, __global const TW_* restrict wd,
    __global const float* restrict sbd, __global const TW_* restrict w,
    __global const float* restrict sb, __global T* restrict out, __local float* restrict scratch,
    int H, int W, int C, int Ho, int Wo, int sh, int sw, int dh, int dw, int pt, int pl,
    float dlo, float dhi, int N, float lo, float hi, __global const T* restrict res, int rc)
{
    const int ox0 = get_global_id(0) * TM;
    const int row = get_global_id(1);  // b * Ho + oy
    if (ox0 >= Wo) return;
    const int b = row / Ho, oy = row % Ho;
    const int CP = (C + 15) / 16 * 16;
    __local float* tile = scratch + (get_local_id(1) * get_local_size(0) + get_local_id(0))
                                    * TM * CP;
    const int ix0 = ox0 * sw - pl;
    const bool inside = ix0 >= 0 && ix0 + (TM - 1) * sw + (KW - 1) * dw < W;
    const bool unit = sw == 1 && dw == 1;
    for (int c0 = 0; c0 < C; c0 += 16) {
        float16 d[TM];
        _Pragma("unroll") for (int t = 0; t < TM; t++) d[t] = (float16)(0.0f);
        // Rows and (off the row's interior) columns stay loops: fully unrolled, a 5x5 window
        // over TM pixels takes the compiler seconds.
        _Pragma("unroll 1") for (int ky = 0; ky < KH; ky++) {
            const int iy = oy * sh - pt + ky * dh;
            if (iy < 0 || iy >= H) continue;
            __global const T* src = in + (size_t)(b * H + iy) * W * C + c0;
            __global const TW_* wy = wd + ky * KW * CP + c0;
            if (unit) {
                DW_WINDOW(1);
                continue;
            }
#if DW_S2
            if (sw == 2 && dw == 1) {
                DW_WINDOW(2);
                continue;
            }
#endif
            if (inside) {
                _Pragma("unroll") for (int kx = 0; kx < KW; kx++) {
                    const float16 wv = LDW16(wy, kx * CP);
                    _Pragma("unroll") for (int t = 0; t < TM; t++)
                        d[t] = fma(LD16(src, (ix0 + t * sw + kx * dw) * C), wv, d[t]);
                }
                continue;
            }
            _Pragma("unroll 1") for (int kx = 0; kx < KW; kx++) {
                const float16 wv = LDW16(wy, kx * CP);
                _Pragma("unroll") for (int t = 0; t < TM; t++) {
                    const int ix = ix0 + t * sw + kx * dw;
                    const bool ok = ix >= 0 && ix < W;
                    const float16 x = LD16(src, (ok ? ix : 0) * C);
                    d[t] = fma(ok ? x : (float16)(0.0f), wv, d[t]);
                }
            }
        }
        const float16 ds = vload16(0, sbd + c0), db = vload16(0, sbd + CP + c0);
#ifdef REQUANT
        const float16 de = vload16(0, sbd + 2 * CP + c0);
        _Pragma("unroll") for (int t = 0; t < TM; t++)
            vstore16(requant16(d[t], ds, db, de, dlo, dhi), 0, tile + t * CP + c0);
#else
        _Pragma("unroll") for (int t = 0; t < TM; t++)
            vstore16(CLAMP(fma(d[t], ds, db), dlo, dhi), 0, tile + t * CP + c0);
#endif
    }
    for (int n0 = 0; n0 < N; n0 += PANEL) {
        floatV acc[TM][NV];
        ACC_INIT(acc);
        __global const TW_* wk = w + (size_t)n0 * C;
        for (int k = 0; k < C; k++, wk += PANEL) {
            floatV b_[NV];
            _Pragma("unroll") for (int j = 0; j < NV; j++) b_[j] = LDWV(wk, j * VW);
            _Pragma("unroll") for (int i = 0; i < TM; i++) {
                floatV x_ = (floatV)(tile[i * CP + k]);
                _Pragma("unroll") for (int j = 0; j < NV; j++)
                    acc[i][j] = fma(x_, b_[j], acc[i][j]);
            }
        }
        ACC_STORE(acc, sb + SBN * n0, out, row * Wo + ox0, Wo - ox0, n0, N);
    }
}
#endif

#if defined(KH) && defined(EXPAND)
// A whole inverted-residual block (fuse.py's `expand`): a 1x1 CONV_2D C -> E, the
// DEPTHWISE_CONV_2D 3x3 (dilation 1, stride S both ways) reading it, and the 1x1 CONV_2D
// reading that (+ its residual), in one pass: neither the expanded nor the depthwise tensor
// reaches memory. A work-item owns a strip of TM output columns of one image, all its rows,
// and keeps in local memory a ring of the three expanded input rows the row needs (P pixels:
// the strip and its halo, EP channels, NVE vectors of 16 at a time), computing only the rows
// it lacks (1 a row at stride 1, 2 at stride 2), then the depthwise of its TM pixels (into
// `tile`, CP channels) and every panel of the projection as depthwise_conv_2d_then_conv_2d.
// Expanded values of pixels outside the image are 0 (the depthwise's zero padding).
// Expand weights [C, EP] over their scales, sbe [2, EP] scales and biases (zeros beyond E);
// the depthwise's as depthwise_conv_2d_then_conv_2d's, the projection's in panels of K = E.
#define P_ ((TM - 1) * EXPAND + 3)
__kernel void KERNEL(expand_depthwise_then_conv_2d)(
    __global const T* restrict in, __global const TW_* restrict we,
    __global const float* restrict sbe, __global const TW_* restrict wd,
    __global const float* restrict sbd, __global const TW_* restrict w,
    __global const float* restrict sb, __global T* restrict out, __local float* restrict scratch,
    int H, int W, int C, int E, int EP, int CP, int Ho, int Wo, int pt, int pl, float elo,
    float ehi, float dlo, float dhi, int N, float lo, float hi, __global const T* restrict res,
    int rc)
{
    const int ox0 = get_global_id(0) * TM, b = get_global_id(1);
    if (ox0 >= Wo) return;
    const int ix0 = ox0 * EXPAND - pl;
    __local float* ring = scratch + (get_local_id(1) * get_local_size(0) + get_local_id(0))
                                    * (3 * P_ * EP + TM * CP);
    __local float* tile = ring + 3 * P_ * EP;
    __global const T* img = in + (size_t)b * H * W * C;
    for (int oy = 0; oy < Ho; oy++) {
        const int top = oy * EXPAND - pt;  // the first input row of the window
        for (int iy = oy == 0 ? top : top + 3 - EXPAND; iy <= top + 2; iy++) {
            __local float* er = ring + ((iy % 3 + 3) % 3) * P_ * EP;
            if (iy < 0 || iy >= H) {
                for (int i = 0; i < P_ * EP; i += 16) vstore16((float16)(0.0f), 0, er + i);
                continue;
            }
            __global const T* xr = img + (size_t)iy * W * C;
            for (int e0 = 0; e0 < EP; e0 += 16 * NVE) {
                float16 acc[P_][NVE];
                _Pragma("unroll") for (int p = 0; p < P_; p++)
                    _Pragma("unroll") for (int j = 0; j < NVE; j++) acc[p][j] = (float16)(0.0f);
                __global const TW_* wk = we + e0;
                int k = 0;
#ifdef HALF
                // half inputs 8 values of a pixel at a time into a private array (a scalar
                // vload_half per value: MobileNetV2 fp16 1.38x the two launches)
                for (; k + 8 <= C; k += 8) {
                    float x8[P_][8];
                    _Pragma("unroll") for (int p = 0; p < P_; p++)
                        vstore8(vload_half8(0, xr + clamp(ix0 + p, 0, W - 1) * C + k), 0, x8[p]);
                    _Pragma("unroll") for (int u = 0; u < 8; u++, wk += EP) {
                        float16 wv[NVE];
                        _Pragma("unroll") for (int j = 0; j < NVE; j++)
                            wv[j] = LDW16(wk, 16 * j);
                        _Pragma("unroll") for (int p = 0; p < P_; p++)
                            _Pragma("unroll") for (int j = 0; j < NVE; j++)
                                acc[p][j] = fma((float16)(x8[p][u]), wv[j], acc[p][j]);
                    }
                }
#endif
                for (; k < C; k++, wk += EP) {
                    float16 wv[NVE];
                    _Pragma("unroll") for (int j = 0; j < NVE; j++) wv[j] = LDW16(wk, 16 * j);
                    _Pragma("unroll") for (int p = 0; p < P_; p++) {
                        const float16 xv = (float16)(LD(xr, clamp(ix0 + p, 0, W - 1) * C + k));
                        _Pragma("unroll") for (int j = 0; j < NVE; j++)
                            acc[p][j] = fma(xv, wv[j], acc[p][j]);
                    }
                }
                _Pragma("unroll") for (int j = 0; j < NVE; j++) {
                    const float16 es = vload16(0, sbe + e0 + 16 * j),
                                  eb = vload16(0, sbe + EP + e0 + 16 * j);
                    _Pragma("unroll") for (int p = 0; p < P_; p++) {
                        const bool off = ix0 + p < 0 || ix0 + p >= W;
                        vstore16(off ? (float16)(0.0f) : CLAMP(fma(acc[p][j], es, eb), elo, ehi),
                                 0, er + p * EP + e0 + 16 * j);
                    }
                }
            }
        }
        for (int c0 = 0; c0 < CP; c0 += 16) {
            float16 d[TM];
            _Pragma("unroll") for (int t = 0; t < TM; t++) d[t] = (float16)(0.0f);
            _Pragma("unroll") for (int ky = 0; ky < 3; ky++) {
                __local const float* er = ring + (((top + ky) % 3 + 3) % 3) * P_ * EP + c0;
                float16 r[P_];
                _Pragma("unroll") for (int p = 0; p < P_; p++) r[p] = vload16(0, er + p * EP);
                _Pragma("unroll") for (int kx = 0; kx < 3; kx++) {
                    const float16 wv = LDW16(wd, (ky * 3 + kx) * CP + c0);
                    _Pragma("unroll") for (int t = 0; t < TM; t++)
                        d[t] = fma(r[t * EXPAND + kx], wv, d[t]);
                }
            }
            const float16 ds = vload16(0, sbd + c0), db = vload16(0, sbd + CP + c0);
            _Pragma("unroll") for (int t = 0; t < TM; t++)
                vstore16(CLAMP(fma(d[t], ds, db), dlo, dhi), 0, tile + t * CP + c0);
        }
        const int row = b * Ho + oy;
        for (int n0 = 0; n0 < N; n0 += PANEL) {
            floatV acc[TM][NV];
            ACC_INIT(acc);
            __global const TW_* wk = w + (size_t)n0 * E;
            for (int k = 0; k < E; k++, wk += PANEL) {
                floatV b_[NV];
                _Pragma("unroll") for (int j = 0; j < NV; j++) b_[j] = LDWV(wk, j * VW);
                _Pragma("unroll") for (int i = 0; i < TM; i++) {
                    floatV x_ = (floatV)(tile[i * CP + k]);
                    _Pragma("unroll") for (int j = 0; j < NV; j++)
                        acc[i][j] = fma(x_, b_[j], acc[i][j]);
                }
            }
            ACC_STORE(acc, sb + SBN * n0, out, row * Wo + ox0, Wo - ox0, n0, N);
        }
    }
}
#undef P_
#endif
