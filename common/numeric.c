/*
 * Host versions of the CUDA float conversions and the activation quantizers
 * (see moetune/numeric.h). Written on the bit patterns so that the result
 * does not depend on the compiler's FP contraction or the rounding mode,
 * except where rint() is the documented rule.
 *
 * May call: libc, libm.
 */
#include "moetune/numeric.h"

#include <math.h>
#include <string.h>

static uint32_t f2u(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float u2f(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Drop the low `bits` bits of u with round-to-nearest-even; a carry moves
 * into the exponent field, which is what we want for both formats. */
static uint32_t rne_shift(uint32_t u, unsigned bits)
{
    uint32_t half = 1u << (bits - 1), rem = u & ((1u << bits) - 1);
    uint32_t base = u >> bits;
    if (rem > half || (rem == half && (base & 1u)))
        base++;
    return base;
}

uint16_t mt_f32_to_bf16(float x)
{
    uint32_t u = f2u(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return 0x7fff;
    return (uint16_t)rne_shift(u, 16);
}

float mt_bf16_to_f32(uint16_t b) { return u2f((uint32_t)b << 16); }

uint16_t mt_f32_to_f16(float x)
{
    uint32_t u = f2u(x), a = u & 0x7fffffffu;
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    if (a > 0x7f800000u)
        return 0x7fff;
    if (a >= 0x477ff000u) /* >= 65520: rounds past the largest half */
        return sign | 0x7c00u;
    if (a >= 0x38800000u) /* >= 2^-14: normal half */
        return (uint16_t)(sign | (rne_shift(a, 13) - (112u << 10)));
    /* Subnormal half: multiples of 2^-24; scaling by a power of two is exact,
     * and the integer that comes out is also the encoding (1024 = 2^-14). */
    return (uint16_t)(sign | (uint16_t)rintf(u2f(a) * 16777216.0f));
}

float mt_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f)
        return m ? u2f(0x7fffffffu) : u2f(sign | 0x7f800000u);
    if (e == 0)
        return u2f(sign | f2u((float)m * (1.0f / 16777216.0f)));
    return u2f(sign | ((e + 112u) << 23) | (m << 13));
}

uint8_t mt_f32_to_e4m3(float x)
{
    uint32_t u = f2u(x), a = u & 0x7fffffffu;
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    if (a > 0x7f800000u)
        return 0x7f;
    if (a >= 0x43e00000u) /* >= 448 (inf too): saturate to the max normal */
        return sign | 0x7e;
    if (a >= 0x3c800000u) /* >= 2^-6: normal e4m3 */
        return (uint8_t)(sign | (rne_shift(a, 20) - (120u << 3)));
    /* Subnormal e4m3: multiples of 2^-9; the rounded multiple is the code. */
    return (uint8_t)(sign | (uint8_t)rintf(u2f(a) * 512.0f));
}

float mt_e4m3_to_f32(uint8_t v)
{
    uint32_t sign = (uint32_t)(v & 0x80u) << 24, e = (v >> 3) & 0xfu, m = v & 7u;
    if ((v & 0x7f) == 0x7f)
        return u2f(0x7fffffffu);
    if (e == 0)
        return u2f(sign | f2u((float)m * (1.0f / 512.0f)));
    return u2f(sign | ((e + 120u) << 23) | (m << 20));
}

float mt_round_elem(float x, mt_dtype dt)
{
    switch (dt) {
    case MT_DTYPE_BF16: return mt_bf16_to_f32(mt_f32_to_bf16(x));
    case MT_DTYPE_FP16: return mt_f16_to_f32(mt_f32_to_f16(x));
    default: return x;
    }
}

float mt_act_scale(float amax, mt_dtype qdt)
{
    if (amax == 0.0f)
        return 1.0f;
    return amax / (qdt == MT_DTYPE_INT8 ? MT_INT8_QMAX : MT_E4M3_MAX);
}

int8_t mt_quant_int8(float x, float s)
{
    float v = x / s;
    if (isnan(v))
        return 0;
    v = rintf(v);
    if (v > 127.0f)
        v = 127.0f;
    if (v < -127.0f)
        v = -127.0f;
    return (int8_t)v;
}

uint8_t mt_quant_e4m3(float x, float s) { return mt_f32_to_e4m3(x / s); }

float mt_quant_value(float x, float s, mt_dtype qdt)
{
    if (qdt == MT_DTYPE_INT8)
        return (float)mt_quant_int8(x, s);
    return mt_e4m3_to_f32(mt_quant_e4m3(x, s));
}

float mt_silu(float x) { return x / (1.0f + expf(-x)); }

float mt_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }

static float sat_int(float x, float lo, float hi)
{
    if (isnan(x))
        return 0.0f;
    x = rintf(x);
    return x < lo ? lo : x > hi ? hi : x;
}

mt_status mt_to_float(const void *src, mt_dtype dt, size_t n, float *dst)
{
    for (size_t i = 0; i < n; i++) {
        switch (dt) {
        case MT_DTYPE_BF16: dst[i] = mt_bf16_to_f32(((const uint16_t *)src)[i]); break;
        case MT_DTYPE_FP16: dst[i] = mt_f16_to_f32(((const uint16_t *)src)[i]); break;
        case MT_DTYPE_FP32: dst[i] = ((const float *)src)[i]; break;
        case MT_DTYPE_FP8_E4M3: dst[i] = mt_e4m3_to_f32(((const uint8_t *)src)[i]); break;
        case MT_DTYPE_INT8: dst[i] = (float)((const int8_t *)src)[i]; break;
        case MT_DTYPE_UINT8: dst[i] = (float)((const uint8_t *)src)[i]; break;
        case MT_DTYPE_INT32: dst[i] = (float)((const int32_t *)src)[i]; break;
        default: return MT_ERR_DTYPE;
        }
    }
    return MT_OK;
}

mt_status mt_from_float(const float *src, size_t n, mt_dtype dt, void *dst)
{
    for (size_t i = 0; i < n; i++) {
        float x = src[i];
        switch (dt) {
        case MT_DTYPE_BF16: ((uint16_t *)dst)[i] = mt_f32_to_bf16(x); break;
        case MT_DTYPE_FP16: ((uint16_t *)dst)[i] = mt_f32_to_f16(x); break;
        case MT_DTYPE_FP32: ((float *)dst)[i] = x; break;
        case MT_DTYPE_FP8_E4M3: ((uint8_t *)dst)[i] = mt_f32_to_e4m3(x); break;
        case MT_DTYPE_INT8: ((int8_t *)dst)[i] = (int8_t)sat_int(x, -128.0f, 127.0f); break;
        case MT_DTYPE_UINT8: ((uint8_t *)dst)[i] = (uint8_t)sat_int(x, 0.0f, 255.0f); break;
        case MT_DTYPE_INT32:
            /* 2147483520 is the largest float below 2^31. */
            ((int32_t *)dst)[i] = (int32_t)sat_int(x, -2147483648.0f, 2147483520.0f);
            break;
        default: return MT_ERR_DTYPE;
        }
    }
    return MT_OK;
}
