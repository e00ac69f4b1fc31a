// An int8 model's 1x1 convolution (stride 1) as an integer matrix product ("int8": "integer",
// quant_int.build_conv): out[M, N] = requant(A[M, K] . W[K, N] + bias), A the stored
// activations (q - zero point: integers of at most 255 in magnitude, in float or half), W the
// weights less their zero point (int16 pairs), int32 accumulators, TFLite's requantization
// (common.cl's mbqm) in the epilogue: BUILTIN_REF's values bit for bit, as the float kernels'
// exact sums, with 16-bit products that x86's pmaddwd makes two per 32-bit lane:
//   INT_DOT 512: vpmaddwd on 512-bit vectors (AVX512-BW), 16 channels a vector
//   INT_DOT 256: vpmaddwd on 256-bit vectors (AVX2), 8 channels a vector
//   INT_DOT 0:   the same sums in portable OpenCL C (8 channels a vector)
// INT_VNNI 1 (quant_int.vnni: a CPU with AVX512-VNNI, or AVX-VNNI for 256): the products and
// their adds as one vpdpwssd, in a function of the target "avx512vnni" / "avxvnni" that the
// kernel calls (the work-group function PoCL makes of a kernel takes the device's CPU, which
// lacks the feature whatever the kernel's own target says; LLVM then cannot select the
// instruction, and a called function keeps its own target: one call per work-item).
// INT_U8 1 (with INT_VNNI; quant_int.u8_offset): four products a 32-bit lane, vpdpbusd (u8 x
// s8): a row's values made unsigned by `off` (the input's zero point less its type's lowest:
// q - zero point + off = q - lowest, 0 .. 255), the weights' int8 quads, and the bias less
// off x each channel's weight sum (folded at prepare), so the sums are the same int32 values.
// A work-item converts its TM rows of A to int16 pairs (u8 quads) once (a private [TM, K / KPER]
// copy, K <= KMAX), then computes every panel of PANEL = 2 vectors of channels from `p0` on:
// per pair (quad) of k, one vector of weights a vector, the row's pair broadcast, one DOT.
// W is packed [panels, KS, PANEL, KPER] (KS = K / KPER rounded up, zeros beyond K and N), int16
// (int8 with INT_U8); the epilogue's int32 rows per panel [3, PANEL]: bias, multiplier, shift
// (quant_int.Requant);
// REQUANT 2 (a FULLY_CONNECTED, FcRequant): the bias, then PANEL float64 multipliers, and the
// reference's round(double(acc + bias) * multiplier), halves away from zero.
#ifndef TM
#define TM 8
#endif
#ifndef INT_DOT
#define INT_DOT 0
#endif
#define KMAX2 1024
#undef SW_
#undef IW_
#undef LANES
#undef DOT
#undef SPLAT
#undef LOADW
#ifndef INT_VNNI
#define INT_VNNI 0
#endif
#ifndef INT_U8
#define INT_U8 0
#endif
#undef INT_TARGET
#undef KPER
#undef PACK_ROW
#undef PACK16
#if INT_U8
#define KPER 4
#else
#define KPER 2
#endif
#if INT_DOT == 512 && INT_U8
typedef short short32_ __attribute__((ext_vector_type(32)));
#define SW_ short32_
#define IW_ int16
#define LANES 16
#define INT_TARGET __attribute__((target("avx512vnni"), noinline))
#define DOT(acc, x, w) __builtin_ia32_vpdpbusd512((acc), __builtin_bit_cast(int16, (x)), \
                                                  __builtin_bit_cast(int16, (w)))
#define SPLAT(v) __builtin_bit_cast(short32_, (int16)(v))
#define LOADW(p) __builtin_bit_cast(short32_, vload16(0, (__global const int*)(p)))
#elif INT_DOT == 256 && INT_U8
#define SW_ short16
#define IW_ int8
#define LANES 8
#define INT_TARGET __attribute__((target("avxvnni"), noinline))
#define DOT(acc, x, w) __builtin_ia32_vpdpbusd256((acc), as_int8(x), as_int8(w))
#define SPLAT(v) as_short16((int8)(v))
#define LOADW(p) vload16(0, (p))
#elif INT_DOT == 512
typedef short short32_ __attribute__((ext_vector_type(32)));
#define SW_ short32_
#define IW_ int16
#define LANES 16
#if INT_VNNI
#define INT_TARGET __attribute__((target("avx512vnni"), noinline))
#define DOT(acc, x, w) __builtin_ia32_vpdpwssd512((acc), __builtin_bit_cast(int16, (x)), \
                                                  __builtin_bit_cast(int16, (w)))
#else
#define DOT(acc, x, w) ((acc) + __builtin_bit_cast(int16, __builtin_ia32_pmaddwd512((x), (w))))
#endif
#define SPLAT(v) __builtin_bit_cast(short32_, (int16)(v))
#define LOADW(p) __builtin_bit_cast(short32_, vload16(0, (__global const int*)(p)))
#elif INT_DOT == 256
#define SW_ short16
#define IW_ int8
#define LANES 8
#if INT_VNNI
#define INT_TARGET __attribute__((target("avxvnni"), noinline))
#define DOT(acc, x, w) __builtin_ia32_vpdpwssd256((acc), as_int8(x), as_int8(w))
#else
#define DOT(acc, x, w) ((acc) + as_int8(__builtin_ia32_pmaddwd256((x), (w))))
#endif
#define SPLAT(v) as_short16((int8)(v))
#define LOADW(p) vload16(0, (p))
#else
#define SW_ short16
#define IW_ int8
#define LANES 8
#define DOT(acc, x, w) ((acc) + convert_int8((x).even) * convert_int8((w).even) \
                        + convert_int8((x).odd) * convert_int8((w).odd))
#define SPLAT(v) as_short16((int8)(v))
#define LOADW(p) vload16(0, (p))
#endif
#ifndef INT_TARGET
#define INT_TARGET
#endif
#define PANEL_I (2 * LANES)
#ifdef HALF
#define ST_LANES(v, p) CAT(vstore_half, LANES)((v), 0, (p))
#define LD_LANES(p) CAT(vload_half, LANES)(0, (p))
#else
#define ST_LANES(v, p) CAT(vstore, LANES)((v), 0, (p))
#define LD_LANES(p) CAT(vload, LANES)(0, (p))
#endif
// v (LANES floats) to o: all of them, or the first `left` where the row ends before LANES.
#define STORE_LANES(v, o, left) do { \
    if ((left) >= LANES) { ST_LANES((v), (o)); } else { \
        float t_[LANES]; \
        CAT(vstore, LANES)((v), 0, t_); \
        for (int n_ = 0; n_ < (left); n_++) ST(t_[n_], (o), n_); } } while (0)
// RES_ADD (quant_int.plan_residuals): the integer ADD of the product's output and `res` (a
// tensor of the output's shape, written before) in the epilogue, as integer.cl's add_integer
// (both shifted left by 20, rescaled by m1, e1 / m2, e2, summed, rescaled by mo, eo, clamped to
// [alo, ahi]): the product's own output never reaches memory, and the ADD is no launch.
#ifdef RES_ADD
#define RES_ARGS , __global const T* restrict res, int m1, int e1, int m2, int e2, int mo, \
    int eo, float alo, float ahi
#define RES_PASS , res, m1, e1, m2, e2, mo, eo, alo, ahi
#define RES_INT(q, at) clamp(CAT(mbqm, LANES)( \
    CAT(mbqm, LANES)((q) << 20, (IW_)(m1), (IW_)(e1)) \
    + CAT(mbqm, LANES)(CAT(convert_int, LANES)(LD_LANES(res + (at))) << 20, (IW_)(m2), \
                       (IW_)(e2)), (IW_)(mo), (IW_)(eo)), (IW_)((int)alo), (IW_)((int)ahi))
#else
#define RES_ARGS
#define RES_PASS
#define RES_INT(q, at) (q)
#endif

// A row of K values at `row` (T storage) packed into `dst` as int16 pairs (u8 quads: each
// value + off), zeros beyond K: the product's private rows (KS_ = K / KPER rounded up).
#if INT_U8
#define PACK_ROW(dst, row, K_, KS_, off_) { int k_ = 0; \
    for (; 4 * k_ + 16 <= (K_); k_ += 4) \
        vstore4(as_int4(convert_uchar16(convert_int16(LD16((row), 4 * k_)) + (off_))), 0, \
                &(dst)[k_]); \
    for (; k_ < (KS_); k_++) { \
        uchar4 u_ = (uchar4)(0); \
        if (4 * k_ < (K_)) u_.s0 = (uchar)(convert_int(LD((row), 4 * k_)) + (off_)); \
        if (4 * k_ + 1 < (K_)) u_.s1 = (uchar)(convert_int(LD((row), 4 * k_ + 1)) + (off_)); \
        if (4 * k_ + 2 < (K_)) u_.s2 = (uchar)(convert_int(LD((row), 4 * k_ + 2)) + (off_)); \
        if (4 * k_ + 3 < (K_)) u_.s3 = (uchar)(convert_int(LD((row), 4 * k_ + 3)) + (off_)); \
        (dst)[k_] = as_int(u_); } }
#else
#define PACK_ROW(dst, row, K_, KS_, off_) { int k_ = 0; \
    for (; 2 * k_ + 16 <= (K_); k_ += 8) \
        vstore8(as_int8(convert_short16(LD16((row), 2 * k_))), 0, &(dst)[k_]); \
    for (; 2 * k_ + 1 < (K_); k_++) \
        (dst)[k_] = as_int((short2)(convert_short(LD((row), 2 * k_)), \
                                    convert_short(LD((row), 2 * k_ + 1)))); \
    if ((K_) & 1) (dst)[k_] = as_int((short2)(convert_short(LD((row), (K_) - 1)), (short)(0))); }
#endif

// 16 requantized values q (int16) stored as the products' private rows at channel c
#if INT_U8
#define PACK16(q, o, row, c) vstore4(as_int4(convert_uchar16((q) + (o))), 0, &(row)[(c) / 4])
#else
#define PACK16(q, o, row, c) vstore8(as_int8(convert_short16(q)), 0, &(row)[(c) / 2])
#endif

#ifndef BLOCK_FUSED
// DW_FUSED (quant_int.build_conv: a depthwise convolution that fuse.py folded into the 1x1
// one, depth multiplier 1, K a multiple of 16): `a` is the depthwise's input [n, H, W, K], and
// a work-item computes its TM rows of A (the depthwise's output pixels) itself: KH x KW taps
// (SH, SW, DH, DW as depthwise.cl; padding taps skipped: 0 = the zero point) of exact
// products in float, the depthwise's requantization (mbqm16: its int32 bias, multiplier and
// shift, dwr [3, K]) and clamp [dlo, dhi], packed straight into the private rows: the
// depthwise's output never reaches memory, and it is one launch, not two.
#ifdef DW_FUSED
#define DW_ARGS , __global const TW_* restrict dww, __global const int* restrict dwr, int H, \
    int W, int Ho, int Wo, int pt, int pl, int dlo, int dhi
#define DW_PASS , dww, dwr, H, W, Ho, Wo, pt, pl, dlo, dhi
#else
#define DW_ARGS
#define DW_PASS
#endif

// A work-item's rows m0.. and panels p0.. (the kernel's body: INT_TARGET's function).
INT_TARGET static void CAT(gemm_integer_rows, SUFFIX)(
    __global const T* restrict a, __global const short* restrict w,
    __global const int* restrict rq, __global T* restrict out, int M, int K, int N,
    int per_item, float lo, float hi, int off, int m0, int p0 DW_ARGS RES_ARGS)
{
    const int panels = (N + PANEL_I - 1) / PANEL_I, KS = (K + KPER - 1) / KPER;
    int xs[TM][KMAX2 * 2 / KPER];  // the rows' (x[2k], x[2k + 1]) as int16 pairs (u8 quads)
#ifdef DW_FUSED
    for (int i = 0; i < TM; i++) {
        const int mm = min(m0 + i, M - 1), b = mm / (Ho * Wo), oy = mm % (Ho * Wo) / Wo,
                  ox = mm % Wo;
        for (int c = 0; c < K; c += 16) {
            float16 acc = (float16)(0.0f);
            _Pragma("unroll") for (int ky = 0; ky < KH; ky++) {
                const int iy = oy * SH - pt + ky * DH;
                if (iy < 0 || iy >= H) continue;
                __global const T* src = a + ((size_t)(b * H + iy) * W) * K + c;
                _Pragma("unroll") for (int kx = 0; kx < KW; kx++) {
                    const int ix = ox * SW - pl + kx * DW;
                    if (ix >= 0 && ix < W)
                        acc = fma(LD16(src, (size_t)ix * K), LDW16(dww, (ky * KW + kx) * K + c),
                                  acc);
                }
            }
            const int16 q = clamp(mbqm16(convert_int16(acc) + vload16(0, dwr + c),
                                         vload16(0, dwr + K + c), vload16(0, dwr + 2 * K + c)),
                                  (int16)(dlo), (int16)(dhi));
            PACK16(q, off, xs[i], c);
        }
    }
#else
    for (int i = 0; i < TM; i++) {
        PACK_ROW(xs[i], a + (size_t)min(m0 + i, M - 1) * K, K, KS, off);
    }
#endif
    const int pend = min(p0 + per_item, panels);
    for (int p = p0; p < pend; p++) {
        __global const short* wp = w + (size_t)p * KS * PANEL_I * 2;  // KS x 128 / 64 bytes
        IW_ acc[TM][2];
        _Pragma("unroll") for (int i = 0; i < TM; i++) { acc[i][0] = 0; acc[i][1] = 0; }
        for (int k = 0; k < KS; k++, wp += 4 * LANES) {
            const SW_ w0 = LOADW(wp), w1 = LOADW(wp + 2 * LANES);
            _Pragma("unroll") for (int i = 0; i < TM; i++) {
                const SW_ x = SPLAT(xs[i][k]);
                acc[i][0] = DOT(acc[i][0], x, w0);
                acc[i][1] = DOT(acc[i][1], x, w1);
            }
        }
        __global const int* r = rq + (size_t)p * 3 * PANEL_I;
        for (int j = 0; j < 2; j++) {
            const IW_ b = CAT(vload, LANES)(0, r + j * LANES);
#if defined(REQUANT) && REQUANT == 2
            const CAT(double, LANES) eff = CAT(vload, LANES)(
                0, (__global const double*)(r + PANEL_I) + j * LANES);
#define EPI_I(a, at) CLAMP(CAT(convert_float, LANES)( \
    round(CAT(convert_double, LANES)((a) + b) * eff)), lo, hi)
#else
            const IW_ m = CAT(vload, LANES)(0, r + PANEL_I + j * LANES),
                      e = CAT(vload, LANES)(0, r + 2 * PANEL_I + j * LANES);
#define EPI_I(a, at) CAT(convert_float, LANES)(RES_INT(clamp(CAT(mbqm, LANES)((a) + b, m, \
    e), (IW_)((int)lo), (IW_)((int)hi)), at))
#endif
            const int n0 = p * PANEL_I + j * LANES;
            if (n0 >= N) break;
            for (int i = 0; i < min(TM, M - m0); i++) {
                const size_t at = (size_t)(m0 + i) * N + n0;
                const CAT(float, LANES) v = EPI_I(acc[i][j], at);  // clamped to [lo, hi]
                STORE_LANES(v, out + at, N - n0);
            }
        }
    }
}

#ifdef DW_FUSED
__kernel void KERNEL(depthwise_conv_2d_then_gemm_integer)(
#else
__kernel void KERNEL(gemm_integer)(
#endif
    __global const T* restrict a, __global const short* restrict w,
    __global const int* restrict rq, __global T* restrict out, int M, int K, int N,
    int per_item, float lo, float hi, int off DW_ARGS RES_ARGS)
{
    const int m0 = get_global_id(0) * TM, p0 = get_global_id(1) * per_item;
    if (m0 >= M || p0 >= (N + PANEL_I - 1) / PANEL_I) return;
    CAT(gemm_integer_rows, SUFFIX)(a, w, rq, out, M, K, N, per_item, lo, hi, off, m0, p0
                                   DW_PASS RES_PASS);
}
#undef DW_ARGS
#undef DW_PASS
#else  // BLOCK_FUSED
// A whole inverted-residual block (quant_int.plan_blocks: the 1x1 expansion, the 3x3 depthwise
// of stride SH = SW and the 1x1 projection) as one launch, the expanded tensor never in
// memory. A work-item owns a strip of TM output columns from x0 and the output rows r0 .. r1
// of batch b; it keeps the three expanded input rows the depthwise reads (PX = (TM - 1) SW + 3
// pixels of EP channels, float holding exact integers: q - zero point, 0 outside the input =
// padding) in a private ring, computing each input row once as it walks down (the strip's
// halo columns again per strip). The expansion: PX pixels of x (K0 deep) as rows of an
// integer product (the same DOT as above, its own requantization and clamp [elo, ehi]);
// the depthwise: taps from the ring, requantized and clamped [dlo, dhi], packed as the
// projection's rows; the projection: as gemm_integer, TM rows a pass.
#define PANEL_DOT(acc, rows, ks, wpan) \
    _Pragma("unroll") for (int i_ = 0; i_ < TM; i_++) { acc[i_][0] = 0; acc[i_][1] = 0; } \
    for (int k_ = 0; k_ < (ks); k_++) { \
        const SW_ w0_ = LOADW((wpan) + k_ * 4 * LANES); \
        const SW_ w1_ = LOADW((wpan) + k_ * 4 * LANES + 2 * LANES); \
        _Pragma("unroll") for (int i_ = 0; i_ < TM; i_++) { \
            const SW_ x_ = SPLAT((rows)[i_][k_]); \
            acc[i_][0] = DOT(acc[i_][0], x_, w0_); \
            acc[i_][1] = DOT(acc[i_][1], x_, w1_); } }
#define PXT ((PX + TM - 1) / TM * TM)

INT_TARGET static void CAT(block_rows, SUFFIX)(
    __global const T* restrict x, __global const short* restrict we,
    __global const int* restrict rqe, __global const TW_* restrict dww,
    __global const int* restrict dwr, __global const short* restrict wp,
    __global const int* restrict rq, __global T* restrict out, int H, int W, int K0, int E,
    int Ho, int Wo, int N, int pt, int pl, int offx, int elo, int ehi, int dlo, int dhi,
    int offd, float lo, float hi, int b, int x0, int r0, int r1 RES_ARGS)
{
    float16 ring[3][PX][EP / 16];  // vectors: one aligned store a LANES (not vstore's pieces)
    int xe[PXT][K0P];      // the strip's input pixels of a row, u8 quads (int16 pairs)
    int xs[TM][EP / KPER];  // the depthwise's output pixels, the projection's rows
    const int KS0 = (K0 + KPER - 1) / KPER, KSE = (E + KPER - 1) / KPER;
    const int panels = (N + PANEL_I - 1) / PANEL_I, count = min(TM, Wo - x0);
    const int ix0 = x0 * SW - pl;
    int have = -1000;  // the last input row in the ring
    for (int oy = r0; oy < r1; oy++) {
        const int iy0 = oy * SH - pt;
        for (int iy = max(iy0, have + 1); iy <= iy0 + 2; iy++) {
            float16 (*slot)[EP / 16] = ring[(iy + 3) % 3];
            if (iy < 0 || iy >= H) {
                for (int q = 0; q < PX; q++)
                    for (int c = 0; c < EP / 16; c++) slot[q][c] = (float16)(0.0f);
                continue;
            }
            for (int q = 0; q < PXT; q++) {
                __global const T* row = x + ((size_t)(b * H + iy) * W + clamp(ix0 + q, 0, W - 1))
                                            * K0;
                PACK_ROW(xe[q], row, K0, KS0, offx);
            }
            for (int pe = 0; pe < EP / PANEL_I; pe++) {
                __global const short* wpe = we + (size_t)pe * KS0 * PANEL_I * 2;
                __global const int* r = rqe + (size_t)pe * 3 * PANEL_I;
                for (int g0 = 0; g0 < PX; g0 += TM) {
                    IW_ acc[TM][2];
                    int (*rows)[K0P] = xe + g0;
                    PANEL_DOT(acc, rows, KS0, wpe);
                    for (int j = 0; j < 2; j++) {
                        const IW_ bb = CAT(vload, LANES)(0, r + j * LANES),
                                  m = CAT(vload, LANES)(0, r + PANEL_I + j * LANES),
                                  e = CAT(vload, LANES)(0, r + 2 * PANEL_I + j * LANES);
                        for (int i = 0; i < min(TM, PX - g0); i++) {
                            const int ix = ix0 + g0 + i;
                            const CAT(float, LANES) v = ix >= 0 && ix < W
                                ? CAT(convert_float, LANES)(clamp(CAT(mbqm, LANES)(
                                      acc[i][j] + bb, m, e), (IW_)(elo), (IW_)(ehi)))
                                : (CAT(float, LANES))(0.0f);
                            *(CAT(float, LANES)*)((float*)slot[g0 + i] + pe * PANEL_I
                                                  + j * LANES) = v;
                        }
                    }
                }
            }
        }
        have = iy0 + 2;
        for (int t = 0; t < TM; t++) {
            for (int c = 0; c < E; c += 16) {
                float16 acc = (float16)(0.0f);
                _Pragma("unroll") for (int ky = 0; ky < 3; ky++) {
                    float16 (*slot)[EP / 16] = ring[(iy0 + ky + 3) % 3];
                    _Pragma("unroll") for (int kx = 0; kx < 3; kx++)
                        acc = fma(slot[t * SW + kx][c / 16], LDW16(dww, (ky * 3 + kx) * E + c),
                                  acc);
                }
                const int16 q = clamp(mbqm16(convert_int16(acc) + vload16(0, dwr + c),
                                             vload16(0, dwr + E + c),
                                             vload16(0, dwr + 2 * E + c)),
                                      (int16)(dlo), (int16)(dhi));
                PACK16(q, offd, xs[t], c);
            }
        }
        for (int p = 0; p < panels; p++) {
            IW_ acc[TM][2];
            PANEL_DOT(acc, xs, KSE, wp + (size_t)p * KSE * PANEL_I * 2);
            __global const int* r = rq + (size_t)p * 3 * PANEL_I;
            for (int j = 0; j < 2; j++) {
                const int n0 = p * PANEL_I + j * LANES;
                if (n0 >= N) break;
                const IW_ bb = CAT(vload, LANES)(0, r + j * LANES),
                          m = CAT(vload, LANES)(0, r + PANEL_I + j * LANES),
                          e = CAT(vload, LANES)(0, r + 2 * PANEL_I + j * LANES);
                for (int i = 0; i < count; i++) {
                    const size_t at = ((size_t)(b * Ho + oy) * Wo + x0 + i) * N + n0;
                    const CAT(float, LANES) v = CAT(convert_float, LANES)(RES_INT(clamp(
                        CAT(mbqm, LANES)(acc[i][j] + bb, m, e), (IW_)((int)lo), (IW_)((int)hi)),
                        at));
                    STORE_LANES(v, out + at, N - n0);
                }
            }
        }
    }
}

// gid 0: the strip of TM output columns; gid 1: b x RS + the part of RS of the rows (RPI each)
__kernel void KERNEL(expand_depthwise_then_gemm_integer)(
    __global const T* restrict x, __global const short* restrict we,
    __global const int* restrict rqe, __global const TW_* restrict dww,
    __global const int* restrict dwr, __global const short* restrict wp,
    __global const int* restrict rq, __global T* restrict out, int H, int W, int K0, int E,
    int Ho, int Wo, int N, int pt, int pl, int offx, int elo, int ehi, int dlo, int dhi,
    int offd, float lo, float hi, int RS, int RPI, int batches RES_ARGS)
{
    const int x0 = get_global_id(0) * TM, g1 = get_global_id(1);
    const int b = g1 / RS, r0 = g1 % RS * RPI, r1 = min(r0 + RPI, Ho);
    if (x0 >= Wo || b >= batches || r0 >= Ho) return;
    CAT(block_rows, SUFFIX)(x, we, rqe, dww, dwr, wp, rq, out, H, W, K0, E, Ho, Wo, N, pt, pl,
                            offx, elo, ehi, dlo, dhi, offd, lo, hi, b, x0, r0, r1 RES_PASS);
}
#undef PANEL_DOT
#undef PXT
#endif  // BLOCK_FUSED
#undef EPI_I
#undef ST_LANES
#undef STORE_LANES
#undef LD_LANES
#undef RES_ARGS
#undef RES_PASS
#undef RES_INT
#undef PANEL_I
#undef KMAX2
#undef KPER
#undef PACK_ROW
#undef PACK16
