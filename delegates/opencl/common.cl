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
