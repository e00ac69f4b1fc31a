// int8 / uint8 ops with integer arithmetic ("int8": "integer", quant_int.py). Tensors are
// stored as q - zero_point (exact in float and half), so a value read is TFLite's
// `input_offset + q`.

// ADD (add.cc, 8-bit): both inputs shifted left by 20 bits and rescaled to twice the larger
// input scale, summed, rescaled to the output, clamped to [lo, hi] (the output's range minus
// its zero point); same shapes, VW values per item (VW divides n).
#if VW == 1
#define intV_ int
#else
#define intV_ CAT(int, VW)
#endif
__kernel void KERNEL(add_integer)(__global const T* restrict a, __global const T* restrict b,
                                  __global T* restrict out, int n, int m1, int e1, int m2,
                                  int e2, int mo, int eo, float lo, float hi)
{
    const int i = get_global_id(0) * VW;
    if (i >= n) return;
#if VW == 1
#define CONVERT_I convert_int
#define CONVERT_F convert_float
#else
#define CONVERT_I CAT(convert_int, VW)
#define CONVERT_F CAT(convert_float, VW)
#endif
    const intV_ x = CONVERT_I(LDV(a, i)) << 20, y = CONVERT_I(LDV(b, i)) << 20;
    const intV_ s = CAT(mbqm, VW)(x, (intV_)(m1), (intV_)(e1))
                    + CAT(mbqm, VW)(y, (intV_)(m2), (intV_)(e2));
    const intV_ r = CAT(mbqm, VW)(s, (intV_)(mo), (intV_)(eo));
    STV(fmin(fmax(CONVERT_F(r), lo), hi), out, i);
#undef CONVERT_I
#undef CONVERT_F
}
#undef intV_

// MEAN (reduce.h's QuantizedMeanOrSum) over the middle of [outer, R, inner]: the sum of the
// stored values (the zero-point-corrected sum, exact in float32: R x 255 < 2^24) through mbqm
// with 1 / R folded into the multiplier m and shift e, clamped to [lo, hi].
__kernel void KERNEL(mean_integer)(__global const T* restrict in, __global T* restrict out,
                                   int outer, int R, int inner, int m, int e, float lo,
                                   float hi)
{
    const int i = get_global_id(0) * VW, o = get_global_id(1);
    if (i >= inner || o >= outer) return;
    __global const T* p = in + (size_t)o * R * inner + i;
    floatV acc = 0.0f;
    for (int r = 0; r < R; r++) acc += LDV(p, (size_t)r * inner);
    STV(CAT(requant, VW)(acc, (floatV)(0.0f), (floatV)(as_float(m)), (floatV)(as_float(e)), lo,
                         hi), out, (size_t)o * inner + i);
}
