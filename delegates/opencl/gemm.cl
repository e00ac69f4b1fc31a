// CONV_2D and FULLY_CONNECTED as tiled matrix products, NHWC: out[M, N] = A[M, K] . W[K, NP].
// Each work-item computes TM rows x (NV vectors of VW) columns in registers. W and the bias
// are packed at prepare to NP columns (N rounded up to VW * NV), zeros beyond N.
//   gemm:   A is a [M, lda] matrix (1x1 convolutions with stride 1, fully connected layers)
//   conv2d: A is the im2col of an NHWC input, read in place (any kernel, stride, dilation,
//           padding); K = KH * KW * C in (ky, kx, c) order, as the packed weights.

#ifndef TM
#define TM 4
#endif
#ifndef NV
#define NV 1
#endif

#define ACC_INIT(acc, bias, n0) \
    _Pragma("unroll") for (int j = 0; j < NV; j++) { \
        floatV b_ = LDWV(bias, n0 + j * VW); \
        _Pragma("unroll") for (int i = 0; i < TM; i++) acc[i][j] = b_; }

#define ACC_STORE(acc, out, m0, n0, M, N, lo, hi) \
    _Pragma("unroll") for (int i = 0; i < TM; i++) { \
        int m_ = m0 + i; \
        if (m_ < M) { \
            _Pragma("unroll") for (int j = 0; j < NV; j++) { \
                int n_ = n0 + j * VW; \
                floatV v_ = CLAMP(acc[i][j], lo, hi); \
                if (n_ + VW <= N) STV(v_, out, (size_t)m_ * N + n_); \
                else if (n_ < N) ST_TAIL(v_, out + (size_t)m_ * N + n_, N - n_); } } }

__kernel void gemm(__global const T* restrict a, __global const TW_* restrict w,
                   __global const TW_* restrict bias, __global T* restrict out,
                   int M, int K, int N, int NP, int lda, float lo, float hi)
{
    const int n0 = get_global_id(0) * (VW * NV);
    const int m0 = get_global_id(1) * TM;
    if (n0 >= N || m0 >= M) return;
    floatV acc[TM][NV];
    ACC_INIT(acc, bias, n0);
    __global const T* row[TM];
    _Pragma("unroll") for (int i = 0; i < TM; i++) row[i] = a + (size_t)min(m0 + i, M - 1) * lda;
    __global const TW_* wk = w + n0;
    for (int k = 0; k < K; k++, wk += NP) {
        floatV b[NV];
        _Pragma("unroll") for (int j = 0; j < NV; j++) b[j] = LDWV(wk, j * VW);
        _Pragma("unroll") for (int i = 0; i < TM; i++) {
            floatV x = (floatV)(LD(row[i], k));
            _Pragma("unroll") for (int j = 0; j < NV; j++) acc[i][j] = fma(x, b[j], acc[i][j]);
        }
    }
    ACC_STORE(acc, out, m0, n0, M, N, lo, hi);
}

__kernel void conv2d(__global const T* restrict in, __global const TW_* restrict w,
                     __global const TW_* restrict bias, __global T* restrict out,
                     int H, int W, int C, int Ho, int Wo, int KH, int KW, int sh, int sw,
                     int dh, int dw, int pt, int pl, int M, int N, int NP, float lo, float hi)
{
    const int n0 = get_global_id(0) * (VW * NV);
    const int m0 = get_global_id(1) * TM;
    if (n0 >= N || m0 >= M) return;
    floatV acc[TM][NV];
    ACC_INIT(acc, bias, n0);
    int iy0[TM], ix0[TM], img[TM];
    _Pragma("unroll") for (int i = 0; i < TM; i++) {
        int m = min(m0 + i, M - 1);
        int b = m / (Ho * Wo), r = m % (Ho * Wo);
        iy0[i] = (r / Wo) * sh - pt;
        ix0[i] = (r % Wo) * sw - pl;
        img[i] = b * H;
    }
    __global const TW_* wk = w + n0;
    for (int ky = 0; ky < KH; ky++) {
        for (int kx = 0; kx < KW; kx++) {
            __global const T* src[TM];
            float keep[TM];  // 0 for taps in the padding: they read pixel 0 and add nothing
            _Pragma("unroll") for (int i = 0; i < TM; i++) {
                int iy = iy0[i] + ky * dh, ix = ix0[i] + kx * dw;
                bool inside = iy >= 0 && iy < H && ix >= 0 && ix < W;
                keep[i] = inside ? 1.0f : 0.0f;
                src[i] = in + (inside ? ((size_t)(img[i] + iy) * W + ix) * C : 0);
            }
            for (int c = 0; c < C; c++, wk += NP) {
                floatV b[NV];
                _Pragma("unroll") for (int j = 0; j < NV; j++) b[j] = LDWV(wk, j * VW);
                _Pragma("unroll") for (int i = 0; i < TM; i++) {
                    floatV x = (floatV)(LD(src[i], c) * keep[i]);
                    _Pragma("unroll") for (int j = 0; j < NV; j++) acc[i][j] = fma(x, b[j], acc[i][j]);
                }
            }
        }
    }
    ACC_STORE(acc, out, m0, n0, M, N, lo, hi);
}
