// Elementwise ops, selected by an op code argument. The codes (OP_ADD, ... for binary_flat and
// binary_4d; UN_RELU, ... for unary) are #defines generated from the host's tables (ops.py:
// BINARY, UNARY) and put before this text when the program is built (device.define_codes).

// Type-generic (scalars and vectors): a macro.
#define binary_op(op, a, b) \
    ((op) == OP_ADD ? (a) + (b) : (op) == OP_SUB ? (a) - (b) : (op) == OP_MUL ? (a) * (b) : \
     (op) == OP_DIV ? (a) / (b) : (op) == OP_MAXIMUM ? fmax((a), (b)) : \
     (op) == OP_MINIMUM ? fmin((a), (b)) : (op) == OP_PRELU ? ((a) >= 0.0f ? (a) : (a) * (b)) : \
     (op) == OP_SQUARED_DIFFERENCE ? ((a) - (b)) * ((a) - (b)) : pow((a), (b)))

// Both inputs of the output's size (bstride 1), or b repeating every `bsize` values (a
// per-channel vector: bsize % VW == 0; a scalar: bsize 1 with VW 1), VW values per item.
__kernel void KERNEL(binary_flat)(__global const T* restrict a, __global const T* restrict b,
                                  __global T* restrict out, int n, int bsize, int op, float lo,
                                  float hi)
{
    const int i = get_global_id(0) * VW;
    if (i >= n) return;
    floatV x = LDV(a, i);
    floatV y = bsize == 1 ? (floatV)(LD(b, 0)) : LDV(b, i % bsize);
    floatV r = binary_op(op, x, y);
    STV(CLAMP(r, lo, hi), out, i);
}

// Any broadcast of rank <= 4: shape d (out), strides sa, sb (0 on broadcast dimensions).
__kernel void KERNEL(binary_4d)(__global const T* restrict a, __global const T* restrict b,
                                __global T* restrict out, int4 d, int4 sa, int4 sb, int op,
                                float lo, float hi)
{
    const int i3 = get_global_id(0), i2 = get_global_id(1), i01 = get_global_id(2);
    if (i3 >= d.w || i2 >= d.z || i01 >= d.x * d.y) return;
    const int i0 = i01 / d.y, i1 = i01 % d.y;
    int ia = i0 * sa.x + i1 * sa.y + i2 * sa.z + i3 * sa.w;
    int ib = i0 * sb.x + i1 * sb.y + i2 * sb.z + i3 * sb.w;
    size_t o = (((size_t)i0 * d.y + i1) * d.z + i2) * d.w + i3;
    float x = LD(a, ia), y = LD(b, ib);
    float r = binary_op(op, x, y);
    ST(CLAMP(r, lo, hi), out, o);
}

// Unary op codes UN_<op>: generated (see the top); UN_GELU_TANH is GELU with approximate.

__kernel void KERNEL(unary)(__global const T* restrict in, __global T* restrict out, int n, int op,
                            float alpha)
{
    const int i = get_global_id(0) * VW;
    if (i >= n) return;
    floatV x = LDV(in, i), y;
    switch (op) {
    case UN_RELU: y = fmax(x, 0.0f); break;
    case UN_RELU6: y = CLAMP(x, 0.0f, 6.0f); break;
    case UN_RELU_N1_TO_1: y = CLAMP(x, -1.0f, 1.0f); break;
    case UN_RELU_0_TO_1: y = CLAMP(x, 0.0f, 1.0f); break;
    case UN_LEAKY_RELU: y = x >= 0.0f ? x : x * alpha; break;
    case UN_LOGISTIC: y = 1.0f / (1.0f + exp(-x)); break;
    case UN_TANH: y = tanh(x); break;
    case UN_HARD_SWISH: y = x * CLAMP(x + 3.0f, 0.0f, 6.0f) / 6.0f; break;
    case UN_GELU: y = 0.5f * x * (1.0f + erf(x * 0.70710678118654752f)); break;
    case UN_GELU_TANH:
        y = 0.5f * x * (1.0f + tanh(0.7978845608028654f * (x + 0.044715f * x * x * x))); break;
    case UN_ELU: y = x >= 0.0f ? x : expm1(x); break;
    case UN_ABS: y = fabs(x); break;
    case UN_NEG: y = -x; break;
    case UN_EXP: y = exp(x); break;
    case UN_SQRT: y = sqrt(x); break;
    case UN_RSQRT: y = rsqrt(x); break;
    case UN_SQUARE: y = x * x; break;
    default: y = log(x); break;
    }
    STV(y, out, i);
}
