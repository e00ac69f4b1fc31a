// Shared by every program, once at its top. Defines set by the host before this text:
//   HALF          - tensors are stored as half (vload_half / vstore_half; arithmetic stays in
//                   float)
//   WEIGHTS_FLOAT - under HALF, weights stay float32
// A program then holds one instance of a kernel file per set of defines that a partition
// uses (device.py): the instance's defines, SUFFIX (appended to its kernels' names, see
// KERNEL), vector.cl (what depends on VW) and the file, then #undef of those defines.
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
// TARGET: the host puts `__attribute__((target("arch=CPU")))` here on PoCL's CPU device, CPU
// the one PoCL's built-in library was compiled for (pocl_cpu.py): LLVM inlines the library's
// functions (vload16, fma, fmax, ...) only into kernels whose CPU has all of its features.
#ifndef TARGET
#define TARGET
#endif
#define KERNEL(name) TARGET CAT(name, SUFFIX)

#ifdef HALF
typedef half T;
#define LD(p, i) vload_half(0, (p) + (i))
#define ST(v, p, i) vstore_half((v), 0, (p) + (i))
#define LD16(p, i) vload_half16(0, (p) + (i))
#else
typedef float T;
#define LD(p, i) ((p)[i])
#define ST(v, p, i) ((p)[i] = (v))
#define LD16(p, i) vload16(0, (p) + (i))
#endif

// Weights (constants): half with HALF unless WEIGHTS_FLOAT. Biases are float32 always (half
// ones cost random-weight MobileNetV2 about as much accuracy as rounding its input did). Half
// weights of convolutions and matrix products are stored divided by a per-output-channel scale
// (helpers.half_scales), which the epilogue multiplies back with the bias: acc * scale + bias.
#if defined(HALF) && !defined(WEIGHTS_FLOAT)
#define HALF_WEIGHTS 1
typedef half TW_;
#define LDW(p, i) vload_half(0, (p) + (i))
#define LDW16(p, i) vload_half16(0, (p) + (i))
#else
typedef float TW_;
#define LDW(p, i) ((p)[i])
#define LDW16(p, i) vload16(0, (p) + (i))
#endif

#define CLAMP(v, lo, hi) fmin(fmax((v), (lo)), (hi))

// Integer requantization (the "int8": "integer" mode, quant_int.py), TFLite's double-rounding
// MultiplyByQuantizedMultiplier: RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(
// x * 2^left, m), right), bit for bit (m >= 0, so SRDHM never saturates; its nudge reduces to
// one floor shift, as in interpreter/kernels/fixed_point.py), in intN / longN vectors.
// RoundingDivideByPOT(h, r) is (h + 2^(r-1) - [h < 0]) >> r for r > 0 (h for r = 0): the
// same floor as its remainder test, exact while |x| < 2^30 (quant_int.py checks the bound).
// requantN: an accumulator (a float holding an exact integer, |acc| < 2^24, checked at
// prepare) plus the int32 bias, through mbqm, clamped to [lo, hi] (the output's integer range
// minus its zero point: tensors are stored as q - zero_point). b, m, e: the bias, multiplier
// and shift, int32 bits in float lanes (one per-channel array beside the weights).
// SRDHM's product is of two sign-extended int32 (long), which LLVM makes one vpmuldq per 32-bit
// pair (SSE4.1, AVX2, AVX-512 alike); mul_hi would be PoCL's library routine, five vpmulld on
// 16-bit halves: measured 1.7x slower on gemm_int.cl's shallow 1x1 convolutions.
#define MBQM_DEF(N, IT, UT, LT) \
inline IT mbqm##N(IT x, IT m, IT e) { \
    const IT right = max(-e, (IT)(0)); \
    x = as_##IT(as_##UT(x) << as_##UT(max(e, (IT)(0)))); \
    const IT h = convert_##IT((convert_##LT(x) * convert_##LT(m) + (LT)(1L << 30)) >> 31); \
    const IT nudge = as_##IT((((UT)(1)) << as_##UT(right)) >> 1) \
                     + select((IT)(0), h >> 31, right > (IT)(0)); \
    return (h + nudge) >> right; }
#define REQUANT_DEF(N, FT, IT) \
inline FT requant##N(FT acc, FT b, FT m, FT e, float lo, float hi) { \
    const IT r = mbqm##N(convert_##IT(acc) + as_##IT(b), as_##IT(m), as_##IT(e)); \
    return fmin(fmax(convert_##FT(r), lo), hi); }
MBQM_DEF(1, int, uint, long)
MBQM_DEF(2, int2, uint2, long2)
MBQM_DEF(4, int4, uint4, long4)
MBQM_DEF(8, int8, uint8, long8)
MBQM_DEF(16, int16, uint16, long16)
REQUANT_DEF(1, float, int)
REQUANT_DEF(2, float2, int2)
REQUANT_DEF(4, float4, int4)
REQUANT_DEF(8, float8, int8)
REQUANT_DEF(16, float16, int16)
// requant_fcN: FULLY_CONNECTED's reference requantization, round(double(acc + b) * eff),
// halves away from zero (OpenCL's round), clamped (devices with doubles only: quant_int.py).
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define REQUANT_FC_DEF(N, FT, IT, DT) \
inline FT requant_fc##N(FT acc, FT b, DT eff, float lo, float hi) { \
    const DT v = (convert_##DT(acc) + convert_##DT(as_##IT(b))) * eff; \
    return fmin(fmax(convert_##FT(round(v)), lo), hi); }
REQUANT_FC_DEF(4, float4, int4, double4)
REQUANT_FC_DEF(8, float8, int8, double8)
REQUANT_FC_DEF(16, float16, int16, double16)
#endif
