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
