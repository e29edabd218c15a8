/*
 * Tests of moetune/numeric.h against CUDA's own host-side conversions
 * (cuda_bf16.h, cuda_fp16.h, cuda_fp8.h are __host__ __device__), bit for
 * bit: every bf16/fp16/e4m3 encoding -> float, and float -> bf16/fp16/e4m3
 * over a dense sweep of all float bit patterns plus the round-half cases.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" {
#include "tests/support.h"
#include "moetune/numeric.h"
}

static uint32_t bits_of(float x)
{
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float x;
    std::memcpy(&x, &u, sizeof x);
    return x;
}

static uint16_t cuda_bf16(float x) { return __bfloat16_as_ushort(__float2bfloat16(x)); }
static uint16_t cuda_f16(float x) { return __half_as_ushort(__float2half(x)); }
static uint8_t cuda_e4m3(float x)
{
    return (uint8_t)__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}
static float cuda_e4m3_to_f32(uint8_t v)
{
    __nv_fp8_e4m3 q;
    q.__x = v;
    return (float)q;
}

/* Count (and print the first few) float -> narrow mismatches for one x. */
struct mismatch_log {
    long n;
};

static void check_one(float x, mismatch_log *log)
{
    uint16_t b = mt_f32_to_bf16(x), cb = cuda_bf16(x);
    uint16_t h = mt_f32_to_f16(x), ch = cuda_f16(x);
    uint8_t q = mt_f32_to_e4m3(x), cq = cuda_e4m3(x);
    if (b != cb || h != ch || q != cq) {
        if (log->n < 8)
            std::printf("x=%a (0x%08x): bf16 %04x/%04x fp16 %04x/%04x e4m3 %02x/%02x (ours/cuda)\n",
                        (double)x, bits_of(x), b, cb, h, ch, q, cq);
        log->n++;
    }
}

static void test_bf16_to_float_all(void **state)
{
    (void)state;
    long bad = 0;
    for (uint32_t v = 0; v < 65536; v++) {
        float ours = mt_bf16_to_f32((uint16_t)v);
        float ref = __bfloat162float(__ushort_as_bfloat16((unsigned short)v));
        bad += bits_of(ours) != bits_of(ref);
    }
    assert_int_equal(bad, 0);
}

static void test_f16_to_float_all(void **state)
{
    (void)state;
    long bad = 0;
    for (uint32_t v = 0; v < 65536; v++) {
        float ours = mt_f16_to_f32((uint16_t)v);
        float ref = __half2float(__ushort_as_half((unsigned short)v));
        if (bits_of(ours) != bits_of(ref) && bad++ < 5)
            std::printf("fp16 %04x: ours %08x cuda %08x\n", v, bits_of(ours), bits_of(ref));
    }
    assert_int_equal(bad, 0);
}

static void test_e4m3_to_float_all(void **state)
{
    (void)state;
    long bad = 0;
    for (uint32_t v = 0; v < 256; v++) {
        float ours = mt_e4m3_to_f32((uint8_t)v), ref = cuda_e4m3_to_f32((uint8_t)v);
        if (bits_of(ours) != bits_of(ref) && bad++ < 5)
            std::printf("e4m3 %02x: ours %08x cuda %08x\n", v, bits_of(ours), bits_of(ref));
    }
    assert_int_equal(bad, 0);
    /* Anchors that do not depend on CUDA's header. */
    assert_true(mt_e4m3_to_f32(0x7e) == 448.0f);
    assert_true(mt_e4m3_to_f32(0x01) == 0x1p-9f);
    assert_true(mt_e4m3_to_f32(0x08) == 0x1p-6f);
    assert_true(std::isnan(mt_e4m3_to_f32(0xff)));
}

/* Every float whose bits are a multiple of a prime stride (> 2^24 values),
 * so all exponents and many mantissa patterns are visited. */
static void test_float_to_narrow_dense(void **state)
{
    (void)state;
    mismatch_log log = {0};
    long count = 0;
    for (uint64_t u = 0; u < (1ull << 32); u += 241, count++)
        check_one(float_of((uint32_t)u), &log);
    assert_true(count > (1l << 24));
    assert_int_equal(log.n, 0);
}

/* All 2^16 top halves with low halves around each format's rounding point:
 * bf16 drops 16 bits (half = 0x8000), fp16 13 bits (half = 0x1000, kept LSB
 * 0x2000), e4m3 20 bits (its half bit lies in the top half, so low 0 and 1
 * give the exact tie and just above it). */
static void test_float_to_narrow_round_half(void **state)
{
    (void)state;
    static const uint32_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x2000, 0x3000,
                                    0x3001, 0x7fff, 0x8000, 0x8001, 0x9000, 0xffff};
    mismatch_log log = {0};
    for (uint32_t hi = 0; hi < 65536; hi++)
        for (uint32_t low : lows)
            check_one(float_of(hi << 16 | low), &log);
    assert_int_equal(log.n, 0);
}

static void test_float_to_narrow_specials(void **state)
{
    (void)state;
    const float specials[] = {
        0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, float_of(0x7f800001), float_of(0xffc00000),
        float_of(1), float_of(0x80000001), float_of(0x007fffff), 0x1p-126f, 0x1p-24f, 0x1p-25f,
        0x1.8p-25f, 0x1p-10f, 0x1.000002p-10f, 0x1p-9f, 0x1.8p-9f, 0x1p-6f, 65504.0f, 65519.99f,
        65520.0f, 65536.0f, 447.99f, 448.0f, 448.01f, 463.99f, 464.0f, 464.01f, 480.0f, 1e30f,
        -448.0f, -464.0f, -465.0f, 3.4028235e38f, -3.4028235e38f,
    };
    mismatch_log log = {0};
    for (float x : specials)
        check_one(x, &log);
    assert_int_equal(log.n, 0);
    /* Anchors of the documented behaviour. */
    assert_int_equal(mt_f32_to_e4m3(INFINITY), 0x7e);
    assert_int_equal(mt_f32_to_e4m3(-1e9f), 0xfe);
    assert_int_equal(mt_f32_to_e4m3(NAN), 0x7f);
    assert_int_equal(mt_f32_to_bf16(NAN), 0x7fff);
    assert_int_equal(mt_f32_to_f16(65520.0f), 0x7c00);
    assert_int_equal(mt_f32_to_f16(1.0f + 0x1p-11f), 0x3c00); /* tie -> even */
    assert_int_equal(mt_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
    assert_int_equal(mt_f32_to_bf16(1.0f + 0x1.8p-7f), 0x3f82);
}

static void test_quantizers(void **state)
{
    (void)state;
    assert_true(mt_act_scale(0.0f, MT_DTYPE_INT8) == 1.0f);
    assert_true(mt_act_scale(0.0f, MT_DTYPE_FP8_E4M3) == 1.0f);
    assert_true(mt_act_scale(254.0f, MT_DTYPE_INT8) == 2.0f);
    assert_true(mt_act_scale(896.0f, MT_DTYPE_FP8_E4M3) == 2.0f);
    assert_int_equal(mt_quant_int8(5.0f, 2.0f), 2);    /* 2.5 -> even */
    assert_int_equal(mt_quant_int8(7.0f, 2.0f), 4);    /* 3.5 -> even */
    assert_int_equal(mt_quant_int8(-7.0f, 2.0f), -4);
    assert_int_equal(mt_quant_int8(1000.0f, 1.0f), 127);
    assert_int_equal(mt_quant_int8(-1000.0f, 1.0f), -127);
    assert_int_equal(mt_quant_int8(NAN, 1.0f), 0);
    assert_int_equal(mt_quant_e4m3(900.0f, 1.0f), 0x7e);
    assert_true(mt_quant_value(3.0f, 2.0f, MT_DTYPE_FP8_E4M3) == 1.5f);
    assert_true(mt_quant_value(-3.0f, 2.0f, MT_DTYPE_INT8) == -2.0f);
    /* x / s is a true division: 1/3 rounds differently from 1 * (1/3). */
    mt_rng r;
    mt_rng_seed(&r, 7);
    for (int i = 0; i < 100000; i++) {
        float x = mt_rng_normal(&r) * 100.0f, s = 0.01f + mt_rng_uniform(&r);
        assert_int_equal(mt_quant_e4m3(x, s), cuda_e4m3(x / s));
        float v = std::rint(x / s);
        int expect = v > 127 ? 127 : v < -127 ? -127 : (int)v;
        assert_int_equal(mt_quant_int8(x, s), expect);
    }
}

/* act_quant_wide.cuh's x / s: RN(1/s) once, then three correctly rounded
 * steps per value, the division itself where the steps are not safe. The
 * same steps here (the build has -ffp-contract=off; std::fma rounds once). */
static float wide_divide(float x, float s)
{
    const float r = 1.0f / s;
    if (std::fabs(s) >= 0x1p-64f && std::fabs(s) <= 0x1p64f) {
        const float q0 = x * r;
        const float q = std::copysign(std::fma(std::fma(-q0, s, x), r, q0), q0);
        if (std::fabs(q) <= 1024.0f)
            return q;
    }
    return x / s;
}

/* Counts the values whose quantization (int8 and e4m3) or quotient, where
 * the quotient is not below the quantizers' resolution, differs. */
static long wide_divide_mismatches(float x, float s)
{
    const float q = wide_divide(x, s), d = x / s;
    long bad = 0;
    if (std::fabs(d) >= 0x1p-12f && bits_of(q) != bits_of(d) && !(std::isnan(q) && std::isnan(d)))
        bad++;
    const float qi = std::rint(q), di = std::rint(d);
    const int qc = std::isnan(q) ? 0 : qi > 127 ? 127 : qi < -127 ? -127 : (int)qi;
    const int dc = std::isnan(d) ? 0 : di > 127 ? 127 : di < -127 ? -127 : (int)di;
    if (qc != dc || cuda_e4m3(q) != cuda_e4m3(d))
        bad++;
    if (bad && std::getenv("MT_TEST_VERBOSE"))
        std::printf("x=%a s=%a: %a against %a\n", (double)x, (double)s, (double)q, (double)d);
    return bad;
}

/* Every bf16 amax of two binades (the steps scale with the exponent) and
 * of the extremes, its e4m3 and int8 scales, against every bf16 and fp16
 * value: those are the values act_quant quantizes (rounded to the element
 * dtype). Then random floats and scales, static scales far from the values,
 * and the specials. */
static void test_wide_divide(void **state)
{
    (void)state;
    std::vector<float> scales(MT_TEST_QUANT_SCALES_MAX);
    scales.resize(mt_test_quant_scales(scales.data()));
    long bad = 0, n = 0;
    for (float s : scales) {
        for (uint32_t b = 0; b < 0x10000; b++) {
            bad += wide_divide_mismatches(mt_bf16_to_f32((uint16_t)b), s);
            bad += wide_divide_mismatches(mt_f16_to_f32((uint16_t)b), s);
            n += 2;
        }
    }
    mt_rng r;
    mt_rng_seed(&r, 11);
    for (int i = 0; i < 2000000; i++, n++) {
        const float x = mt_rng_normal(&r) * std::ldexp(1.0f, (int)(mt_rng_next(&r) % 80) - 40);
        const float s = (0.5f + mt_rng_uniform(&r)) * std::ldexp(1.0f, (int)(mt_rng_next(&r) % 80) - 40);
        bad += wide_divide_mismatches(x, s);
    }
    for (float x : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 3.0e38f, -3.0e38f, 1e-45f, -1e-45f})
        for (float s : {1.0f, 1e-30f, 1e-40f, 3.0e38f, 0x1p-64f, 0x1p64f}) {
            bad += wide_divide_mismatches(x, s);
            n++;
        }
    std::printf("wide divide: %ld values, %ld mismatches\n", n, bad);
    assert_int_equal(bad, 0);
}

/* act_quant_wide.cuh's silu division x / d, d = 1 + expf(-x): from r0, any
 * value within an ulp of 1/d (rcp.approx.f32's bound in the PTX ISA), a
 * Newton step, the quotient and its correction. */
static float silu_division_steps(float x, float d, float r0)
{
    const float r = std::fma(std::fma(-d, r0, 1.0f), r0, r0);
    const float q0 = x * r;
    return std::fma(std::fma(-d, q0, x), r, q0);
}

/* Every bf16 and fp16 x where the steps apply (x in [-40, 2^64], at least
 * 2^-100 in magnitude: the quotient is never zero, so it needs no sign
 * fixed), d = 1 + expf(-x) and its neighbours
 * within 3 ulps (the GPU's expf need not round as the host's) but those of
 * all-ones significand (silu_steps divides there: an r0 an ulp low lands
 * the Newton step on a tie), r0 every float within 2 ulps of RN(1/d): the
 * steps give x / d bit for bit. */
static void test_silu_division_steps(void **state)
{
    (void)state;
    long bad = 0, n = 0;
    for (int dtype = 0; dtype < 2; dtype++)
        for (uint32_t b = 0; b < 0x10000; b++) {
            const float x = dtype ? mt_f16_to_f32((uint16_t)b) : mt_bf16_to_f32((uint16_t)b);
            if (!(x >= -40.0f && x <= 0x1p64f && std::fabs(x) >= 0x1p-100f))
                continue;
            float d = 1.0f + std::exp(-x);
            for (int k = 0; k < 3; k++)
                d = std::nextafter(d, 0.0f);
            for (int k = -3; k <= 3; k++, d = std::nextafter(d, INFINITY)) {
                if ((bits_of(d) & 0x7fffff) == 0x7fffff)
                    continue;   /* d of all-ones significand: silu_steps divides */
                float r0 = 1.0f / d;
                for (int j = 0; j < 2; j++)
                    r0 = std::nextafter(r0, 0.0f);
                for (int j = -2; j <= 2; j++, r0 = std::nextafter(r0, INFINITY), n++) {
                    const float q = silu_division_steps(x, d, r0), want = x / d;
                    if (bits_of(q) != bits_of(want) && (bad++ < 8 || std::getenv("MT_TEST_VERBOSE")))
                        std::printf("x=%a d=%a r0=%a: %a against %a\n", (double)x, (double)d,
                                    (double)r0, (double)q, (double)want);
                }
            }
        }
    std::printf("silu division steps: %ld cases, %ld mismatches\n", n, bad);
    assert_int_equal(bad, 0);
}

static void test_activations(void **state)
{
    (void)state;
    assert_true(mt_silu(0.0f) == 0.0f);
    assert_float_equal(mt_silu(1.0f), 0.7310586f, 1e-6);
    assert_float_equal(mt_silu(-2.0f), -0.2384058f, 1e-6);
    assert_float_equal(mt_gelu(1.0f), 0.8413447f, 1e-6);
    assert_float_equal(mt_gelu(-1.0f), -0.1586553f, 1e-6);
    assert_true(mt_gelu(0.0f) == 0.0f);
}

static void test_array_conversions(void **state)
{
    (void)state;
    const float src[6] = {1.0f, -2.5f, 0.0f, 3.0f, 126.6f, -300.0f};
    float back[6];
    uint16_t b16[6];
    assert_int_equal(mt_from_float(src, 6, MT_DTYPE_BF16, b16), MT_OK);
    assert_int_equal(mt_to_float(b16, MT_DTYPE_BF16, 6, back), MT_OK);
    for (int i = 0; i < 6; i++)
        assert_true(back[i] == mt_round_elem(src[i], MT_DTYPE_BF16));
    assert_int_equal(mt_from_float(src, 6, MT_DTYPE_FP16, b16), MT_OK);
    assert_int_equal(mt_to_float(b16, MT_DTYPE_FP16, 6, back), MT_OK);
    for (int i = 0; i < 6; i++)
        assert_true(back[i] == mt_round_elem(src[i], MT_DTYPE_FP16));
    int8_t i8[6];
    assert_int_equal(mt_from_float(src, 6, MT_DTYPE_INT8, i8), MT_OK);
    assert_int_equal(i8[1], -2);
    assert_int_equal(i8[4], 127);
    assert_int_equal(i8[5], -128);
    uint8_t u8[6];
    assert_int_equal(mt_from_float(src, 6, MT_DTYPE_FP8_E4M3, u8), MT_OK);
    assert_int_equal(mt_to_float(u8, MT_DTYPE_FP8_E4M3, 6, back), MT_OK);
    assert_true(back[1] == -2.5f);
    assert_true(back[5] == -288.0f);
    int64_t i64[1];
    assert_int_equal(mt_to_float(i64, MT_DTYPE_INT64, 1, back), MT_ERR_DTYPE);
    assert_true(mt_round_elem(1.0f + 0x1p-9f, MT_DTYPE_FP32) == 1.0f + 0x1p-9f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_to_float_all),
        cmocka_unit_test(test_f16_to_float_all),
        cmocka_unit_test(test_e4m3_to_float_all),
        cmocka_unit_test(test_float_to_narrow_dense),
        cmocka_unit_test(test_float_to_narrow_round_half),
        cmocka_unit_test(test_float_to_narrow_specials),
        cmocka_unit_test(test_quantizers),
        cmocka_unit_test(test_wide_divide),
        cmocka_unit_test(test_silu_division_steps),
        cmocka_unit_test(test_activations),
        cmocka_unit_test(test_array_conversions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
