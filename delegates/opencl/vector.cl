// What depends on VW, the vector width of the kernels that take one (1, 2, 4, 8, 16): read
// again before each instance of a kernel file in a program (common.cl), so it starts by
// forgetting the previous instance's.
#undef floatV
#undef LDV
#undef STV
#undef LDWV
#undef LDFV
#undef ST_TAIL
#ifndef VW
#define VW 1
#endif

#if VW == 1
#define floatV float
#else
#define floatV CAT(float, VW)
#endif

// Tensors (LDV, STV), weights (LDWV) and float32 vectors (LDFV: per-channel weight scales and
// biases) of VW values at p[i].
#if VW == 1
#define LDFV(p, i) ((p)[i])
#else
#define LDFV(p, i) CAT(vload, VW)(0, (p) + (i))
#endif
#if defined(HALF) && VW == 1
#define LDV(p, i) vload_half(0, (p) + (i))
#define STV(v, p, i) vstore_half((v), 0, (p) + (i))
#elif defined(HALF)
#define LDV(p, i) CAT(vload_half, VW)(0, (p) + (i))
#define STV(v, p, i) CAT(vstore_half, VW)((v), 0, (p) + (i))
#elif VW == 1
#define LDV(p, i) ((p)[i])
#define STV(v, p, i) ((p)[i] = (v))
#else
#define LDV(p, i) CAT(vload, VW)(0, (p) + (i))
#define STV(v, p, i) CAT(vstore, VW)((v), 0, (p) + (i))
#endif
#if defined(HALF_WEIGHTS) && VW == 1
#define LDWV(p, i) vload_half(0, (p) + (i))
#elif defined(HALF_WEIGHTS)
#define LDWV(p, i) CAT(vload_half, VW)(0, (p) + (i))
#else
#define LDWV(p, i) LDFV(p, i)
#endif

// Store the first `count` (< VW) lanes of v at p[0..count).
#if VW == 1
#define ST_TAIL(v, p, count) ST((v), (p), 0)
#else
#define ST_TAIL(v, p, count) do { \
    float tail_[VW]; CAT(vstore, VW)((v), 0, tail_); \
    for (int l_ = 0; l_ < (count); l_++) ST(tail_[l_], (p), l_); } while (0)
#endif
