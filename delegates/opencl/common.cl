// Shared by every program. Defines set by the host before this text:
//   HALF  - tensors are stored as half (vload_half / vstore_half; arithmetic stays in float)
//   VW    - vector width of the kernels that take one (1, 2, 4, 8, 16)
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#ifndef VW
#define VW 1
#endif
#if VW == 1
typedef float floatV;
#else
typedef CAT(float, VW) floatV;
#endif

#ifdef HALF
typedef half T;
#define LD(p, i) vload_half(0, (p) + (i))
#define ST(v, p, i) vstore_half((v), 0, (p) + (i))
#if VW == 1
#define LDV(p, i) vload_half(0, (p) + (i))
#define STV(v, p, i) vstore_half((v), 0, (p) + (i))
#else
#define LDV(p, i) CAT(vload_half, VW)(0, (p) + (i))
#define STV(v, p, i) CAT(vstore_half, VW)((v), 0, (p) + (i))
#endif
#else
typedef float T;
#define LD(p, i) ((p)[i])
#define ST(v, p, i) ((p)[i] = (v))
#if VW == 1
#define LDV(p, i) ((p)[i])
#define STV(v, p, i) ((p)[i] = (v))
#else
#define LDV(p, i) CAT(vload, VW)(0, (p) + (i))
#define STV(v, p, i) CAT(vstore, VW)((v), 0, (p) + (i))
#endif
#endif

// Float32 vectors of VW (per-channel weight scales and biases, always float).
#if VW == 1
#define LDFV(p, i) ((p)[i])
#else
#define LDFV(p, i) CAT(vload, VW)(0, (p) + (i))
#endif

// Weights (constants): half with HALF unless WEIGHTS_FLOAT. Biases are float32 always (half
// ones cost random-weight MobileNetV2 about as much accuracy as rounding its input did). Half
// weights of convolutions and matrix products are stored divided by a per-output-channel scale
// (helpers.half_scales), which the epilogue multiplies back with the bias: acc * scale + bias.
#if defined(HALF) && !defined(WEIGHTS_FLOAT)
typedef half TW_;
#else
typedef float TW_;
#endif
#if defined(HALF) && !defined(WEIGHTS_FLOAT)
#define LDW(p, i) vload_half(0, (p) + (i))
#if VW == 1
#define LDWV(p, i) vload_half(0, (p) + (i))
#else
#define LDWV(p, i) CAT(vload_half, VW)(0, (p) + (i))
#endif
#else
#define LDW(p, i) ((p)[i])
#if VW == 1
#define LDWV(p, i) ((p)[i])
#else
#define LDWV(p, i) CAT(vload, VW)(0, (p) + (i))
#endif
#endif

// 16 values at p[i], whatever VW is: tensors (LD16) and weights (LDW16).
#ifdef HALF
#define LD16(p, i) vload_half16(0, (p) + (i))
#else
#define LD16(p, i) vload16(0, (p) + (i))
#endif
#if defined(HALF) && !defined(WEIGHTS_FLOAT)
#define LDW16(p, i) vload_half16(0, (p) + (i))
#else
#define LDW16(p, i) vload16(0, (p) + (i))
#endif

// Store the first `count` (< VW) lanes of v at p[0..count).
#if VW == 1
#define ST_TAIL(v, p, count) ST((v), (p), 0)
#else
#define ST_TAIL(v, p, count) do { \
    float tail_[VW]; CAT(vstore, VW)((v), 0, tail_); \
    for (int l_ = 0; l_ < (count); l_++) ST(tail_[l_], (p), l_); } while (0)
#endif

#define CLAMP(v, lo, hi) fmin(fmax((v), (lo)), (hi))
