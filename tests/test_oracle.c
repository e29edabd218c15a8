/*
 * Tests of the CPU oracle (moetune/oracle.h) on tiny hand-computed cases:
 * each expected value is derived in the comments from the rounding points
 * of oracle.h (bf16 has 8 significant bits: in [2^e, 2^(e+1)) its step is
 * 2^(e-7); fp16 steps 2^(e-10); e4m3 steps 2^(e-3)).
 */
#include "tests/support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "moetune/numeric.h"
#include "moetune/oracle.h"

#define K8 8
#define N8 8

/* Element-dtype copy of a float array (values chosen exactly representable). */
static void *elem_array(const float *x, size_t n, mt_dtype dt)
{
    void *out = malloc(n * 2);
    assert_non_null(out);
    assert_int_equal(mt_from_float(x, n, dt, out), MT_OK);
    return out;
}

static void expect_row(const float *out, int64_t K, float v)
{
    for (int64_t k = 0; k < K; k++)
        if (out[k] != v) {
            print_error("out[%lld] = %.9g, expected %.9g\n", (long long)k, (double)out[k], (double)v);
            fail();
        }
}

/*
 * The two unquantized experts used by several tests (K = N = 8):
 *   expert 0: gate row n picks x[0], up row n picks x[1], w2 = identity;
 *   expert 1: gate row n picks x[1], up row n picks -x[0], w2 = identity.
 * With x = [1, 2, 0...]: expert 0 gives h = (1, 2) and expert 1 h = (2, -1)
 * in every column n.
 */
static void two_experts(float *w1, float *w2, int64_t E)
{
    memset(w1, 0, sizeof(float) * (size_t)(E * 2 * N8 * K8));
    memset(w2, 0, sizeof(float) * (size_t)(E * K8 * N8));
    for (int64_t e = 0; e < E; e++) {
        float *a = w1 + e * 2 * N8 * K8, *b = w2 + e * K8 * N8;
        int odd = (int)(e & 1);
        for (int n = 0; n < N8; n++) {
            a[n * K8 + (odd ? 1 : 0)] = 1.0f;
            a[(N8 + n) * K8 + (odd ? 0 : 1)] = odd ? -1.0f : 1.0f;
            b[n * N8 + n] = 1.0f;
        }
    }
}

/* M = 1, topk = 2: the token goes to expert 0 (weight 0.5) and expert 1
 * (weight 0.25) with x = [1, 2, 0...]. Returns the oracle status. */
static mt_status run_two_expert_token(mt_dtype dt, mt_activation act, int on_input, float *out,
                                      char *msg)
{
    mt_problem p;
    mt_problem_init(&p, 1, 2, 2, K8, N8);
    p.dtype = dt;
    p.activation = act;
    p.apply_router_weight_on_input = on_input;
    float w1[2 * 2 * N8 * K8], w2[2 * K8 * N8], x[K8] = {1, 2};
    two_experts(w1, w2, 2);
    int32_t ids[2] = {0, 1};
    float wts[2] = {0.5f, 0.25f};
    mt_moe_tensors t = {0};
    t.hidden = elem_array(x, K8, dt);
    t.w1 = elem_array(w1, MT_ARRAY_LEN(w1), dt);
    t.w2 = elem_array(w2, MT_ARRAY_LEN(w2), dt);
    t.topk_ids = ids;
    t.topk_weights = wts;
    mt_status st = mt_oracle_fused_moe(&p, &t, NULL, 0, out, msg, 256);
    free((void *)t.hidden);
    free((void *)t.w1);
    free((void *)t.w2);
    return st;
}

static void test_none_bf16_silu(void **state)
{
    (void)state;
    float out[K8];
    char msg[256];
    assert_int_equal(run_two_expert_token(MT_DTYPE_BF16, MT_ACT_SILU, 0, out, msg), MT_OK);
    /* Expert 0: a = bf16(silu(1) * 2 = 1.4621172) = 187/128 = 1.4609375;
     *   y = bf16(1.4609375 * 0.5) = 0.73046875.
     * Expert 1: a = bf16(silu(2) * -1 = -1.7615942) = -225/128 = -1.7578125;
     *   y = bf16(-1.7578125 * 0.25) = -0.439453125 (225/512, exact).
     * out = bf16(0.73046875 - 0.439453125) = 0.291015625 (149/512). */
    expect_row(out, K8, 0.291015625f);
}

static void test_none_fp16_silu(void **state)
{
    (void)state;
    float out[K8];
    char msg[256];
    assert_int_equal(run_two_expert_token(MT_DTYPE_FP16, MT_ACT_SILU, 0, out, msg), MT_OK);
    /* fp16 in [1, 2) steps 1/1024: a0 = 1497/1024 = 1.4619140625,
     * a1 = -1804/1024 = -1.76171875; y0 = 0.73095703125, y1 = -0.4404296875;
     * out = 0.29052734375 = 1190 * 2^-12 (exact in fp16). */
    expect_row(out, K8, 0.29052734375f);
}

static void test_none_bf16_gelu(void **state)
{
    (void)state;
    float out[K8];
    char msg[256];
    assert_int_equal(run_two_expert_token(MT_DTYPE_BF16, MT_ACT_GELU, 0, out, msg), MT_OK);
    /* gelu(1) * 2 = 1.6826894 -> 215/128 = 1.6796875 -> y0 = 0.83984375;
     * gelu(2) * -1 = -1.9544997 -> -250/128 = -1.953125 -> y1 = -0.48828125;
     * out = 0.3515625 (45/128). Differs from silu's 0.291015625. */
    expect_row(out, K8, 0.3515625f);
}

static void test_router_weight_on_input(void **state)
{
    (void)state;
    float out[K8];
    char msg[256];
    assert_int_equal(run_two_expert_token(MT_DTYPE_BF16, MT_ACT_SILU, 1, out, msg), MT_OK);
    /* Expert 0 sees x * 0.5 = [0.5, 1]: a = bf16(silu(0.5) * 1 = 0.31122967)
     *   = 159/512 = 0.310546875, y0 = 0.310546875 (no weight after GEMM2).
     * Expert 1 sees x * 0.25 = [0.25, 0.5]: gate 0.5, up -0.25:
     *   a = bf16(-0.0778074) = -159/2048 = -0.07763671875 = y1.
     * sum = 318/1024 - 79.5/1024 = 238.5/1024: a tie, bf16 rounds to even
     * 238/1024 = 0.232421875. */
    expect_row(out, K8, 0.232421875f);
}

/* fp8 per-tensor. M = 2, E = 2, topk = 1; token t goes to expert t.
 * Weights e4m3 1.0: gate row n picks x[0], up row n picks x[1]; w1_scale =
 * 0.5 for both experts; w2 row k picks a[0]; w2_scale = {0.25, 0.5}. */
static void fp8_tensor_case(int static_scales, float *out)
{
    mt_problem p;
    mt_problem_init(&p, 2, 2, 1, K8, N8);
    p.quant.mode = MT_QUANT_FP8_PER_TENSOR;
    p.quant.static_act_scale = static_scales;
    uint8_t w1[2 * 2 * N8 * K8] = {0}, w2[2 * K8 * N8] = {0};
    for (int e = 0; e < 2; e++)
        for (int n = 0; n < N8; n++) {
            w1[(e * 2 * N8 + n) * K8 + 0] = mt_f32_to_e4m3(1.0f);
            w1[(e * 2 * N8 + N8 + n) * K8 + 1] = mt_f32_to_e4m3(1.0f);
            w2[(e * K8 + n) * N8 + 0] = mt_f32_to_e4m3(1.0f);
        }
    float x[2 * K8] = {4, -8, 0, 0, 0, 0, 0, 0, 2, 1};
    float w1s[2] = {0.5f, 0.5f}, w2s[2] = {0.25f, 0.5f}, a1 = 0.0625f, a2 = 0.25f, wts[2] = {1, 1};
    int32_t ids[2] = {0, 1};
    mt_moe_tensors t = {.w1 = w1, .w2 = w2, .topk_ids = ids, .topk_weights = wts,
                        .w1_scale = w1s, .w2_scale = w2s};
    if (static_scales) {
        t.a1_scale = &a1;
        t.a2_scale = &a2;
    }
    t.hidden = elem_array(x, 2 * K8, MT_DTYPE_BF16);
    char msg[256];
    mt_status st = mt_oracle_fused_moe(&p, &t, NULL, 0, out, msg, sizeof msg);
    free((void *)t.hidden);
    assert_int_equal(st, MT_OK);
}

static void test_fp8_per_tensor_dynamic(void **state)
{
    (void)state;
    float out[2 * K8];
    fp8_tensor_case(0, out);
    /* GEMM1: amax over both rows = 8, s1 = 8/448; q = x/s1: 4 -> 224,
     * -8 -> -448, 2 -> 112, 1 -> 56 (all exact e4m3).
     * token 0: gate = 224 * s1 * 0.5 = 2, up = -448 * s1 * 0.5 = -4,
     *   a = bf16(silu(2) * -4 = -7.0463768) = -225/32 = -7.03125.
     * token 1: gate = 1, up = 0.5, a = bf16(0.3655293) = 187/512 = 0.365234375.
     * GEMM2: amax over both a rows = 7.03125, s2 = 7.03125/448;
     * token 0: q = -448, y = -448 * s2 * 0.25 = -1.7578125.
     * token 1: 0.365234375 / s2 = 23.27 -> e4m3 24 (step 2 in [16, 32)),
     *   y = 24 * s2 * 0.5 = 0.18833706 -> bf16 193/1024 = 0.1884765625. */
    expect_row(out, K8, -1.7578125f);
    expect_row(out + K8, K8, 0.1884765625f);
}

static void test_fp8_per_tensor_static(void **state)
{
    (void)state;
    float out[2 * K8];
    fp8_tensor_case(1, out);
    /* a1 = 1/16: q = 64, -128, 32, 16 -> same h as the dynamic case.
     * a2 = 0.25: token 0 -7.03125 / 0.25 = -28.125 -> e4m3 -28,
     *   y = -28 * 0.25 * 0.25 = -1.75;
     * token 1: 0.365234375 / 0.25 = 1.4609 -> e4m3 1.5, y = 1.5 * 0.25 * 0.5 = 0.1875. */
    expect_row(out, K8, -1.75f);
    expect_row(out + K8, K8, 0.1875f);
}

static void test_int8_per_token(void **state)
{
    (void)state;
    mt_problem p;
    mt_problem_init(&p, 2, 1, 1, K8, N8);
    p.quant.mode = MT_QUANT_INT8_PER_TOKEN;
    int8_t w1[2 * N8 * K8] = {0}, w2[K8 * N8] = {0};
    float w1s[2 * N8], w2s[K8];
    for (int n = 0; n < N8; n++) {
        w1[n * K8 + 0] = 2;
        w1[(N8 + n) * K8 + 1] = -1;
        w1s[n] = 0.5f;
        w1s[N8 + n] = 0.25f;
    }
    for (int k = 0; k < K8; k++) {
        w2[k * N8 + 0] = 1;
        w2s[k] = (k & 1) ? 1.0f : 0.5f;
    }
    float x[2 * K8] = {127, -254, 0, 0, 0, 0, 0, 0, 3, 1};
    float wts[2] = {1, 1};
    int32_t ids[2] = {0, 0};
    mt_moe_tensors t = {.w1 = w1, .w2 = w2, .topk_ids = ids, .topk_weights = wts,
                        .w1_scale = w1s, .w2_scale = w2s};
    t.hidden = elem_array(x, 2 * K8, MT_DTYPE_BF16);
    float out[2 * K8];
    char msg[256];
    assert_int_equal(mt_oracle_fused_moe(&p, &t, NULL, 0, out, msg, sizeof msg), MT_OK);
    free((void *)t.hidden);
    /* token 0: s = 254/127 = 2, q = [63.5 -> 64 (ties to even), -127];
     *   gate = 64*2 * 2 * 0.5 = 128, up = 127 * 2 * 0.25 = 63.5;
     *   a = silu(128) * 63.5 = 128 * 63.5 = 8128 (bf16-exact, 254 * 32).
     *   GEMM2: s = 8128/127 = 64, q = 127, y = 127 * 64 * w2s = 4064 / 8128.
     * token 1: s = 3/127, q = [127, 42]; gate = 127*2*s*0.5 = 3,
     *   up = -42 * s * 0.25 = -0.2480315 -> bf16 -254/1024 = -0.248046875;
     *   a = bf16(silu(3) * up = -0.7088485) = -181/256 = -0.70703125;
     *   GEMM2: q = -127, y = -0.70703125 * w2s = -0.353515625 / -0.70703125. */
    for (int k = 0; k < K8; k++) {
        assert_true(out[k] == ((k & 1) ? 8128.0f : 4064.0f));
        assert_true(out[K8 + k] == ((k & 1) ? -0.70703125f : -0.353515625f));
    }
}

static void test_fp8_block(void **state)
{
    (void)state;
    enum { K = 256, N = 8 };
    mt_problem p;
    mt_problem_init(&p, 1, 1, 1, K, N);
    p.quant.mode = MT_QUANT_FP8_BLOCK;
    static uint8_t w1[2 * N * K], w2[K * N];
    memset(w1, 0, sizeof w1);
    memset(w2, 0, sizeof w2);
    uint8_t one = mt_f32_to_e4m3(1.0f), two = mt_f32_to_e4m3(2.0f);
    for (int n = 0; n < N; n++) {
        w1[n * K + 0] = one;
        w1[n * K + 128] = one;
        w1[(N + n) * K + 128] = two;
    }
    for (int k = 0; k < K; k++)
        w2[k * N + 0] = one;
    /* w1_scale [1, ceil(16/128)=1, ceil(256/128)=2]; w2_scale [1, 2, 1]. */
    float w1s[2] = {0.5f, 0.25f}, w2s[2] = {0.5f, 2.0f}, wt = 1.0f;
    float x[K] = {0};
    x[0] = 1;
    x[128] = 8;
    int32_t id = 0;
    mt_moe_tensors t = {.w1 = w1, .w2 = w2, .topk_ids = &id, .topk_weights = &wt,
                        .w1_scale = w1s, .w2_scale = w2s};
    t.hidden = elem_array(x, K, MT_DTYPE_BF16);
    static float out[K];
    char msg[256];
    assert_int_equal(mt_oracle_fused_moe(&p, &t, NULL, 0, out, msg, sizeof msg), MT_OK);
    free((void *)t.hidden);
    /* Activation groups: amax 1 and 8 -> q = 448 in both groups.
     * gate = 448*(1/448)*1*0.5 + 448*(8/448)*1*0.25 = 0.5 + 2 = 2.5;
     * up = 448*(8/448)*2*0.25 = 4; a = bf16(silu(2.5)*4 = 9.2414) = 148/16 = 9.25.
     * GEMM2 (one group along N=8): q = 448, y[k] = 9.25 * w2s[k/128]:
     * 4.625 for k < 128, 18.5 after. One scale for all of K would give
     * gate = 4.5 instead. */
    for (int k = 0; k < K; k++)
        assert_true(out[k] == (k < 128 ? 4.625f : 18.5f));
}

/* w8a16, K = N = 64, group 32: two groups per row. */
static void w8a16_case(int zero_point)
{
    enum { K = 64, N = 64, G = 32 };
    mt_problem p;
    mt_problem_init(&p, 1, 1, 1, K, N);
    p.quant.mode = MT_QUANT_W8A16;
    p.quant.group_size = G;
    p.quant.has_zero_point = zero_point;
    /* Zero points 100 (group 0) and 200 (group 1) when used; the stored
     * byte of a value v in group g is v + zero[g]. */
    const int z[2] = {zero_point ? 100 : 0, zero_point ? 200 : 0};
    static uint8_t w1[2 * N * K], w2[K * N], z1[2 * N * 2], z2[K * 2];
    static float s1[2 * N * 2], s2[K * 2];
    for (int r = 0; r < 2 * N; r++)
        for (int k = 0; k < K; k++)
            w1[r * K + k] = (uint8_t)z[k / G];
    for (int r = 0; r < K; r++)
        for (int k = 0; k < N; k++)
            w2[r * N + k] = (uint8_t)z[k / G];
    for (int n = 0; n < N; n++) {
        w1[n * K + 0] = (uint8_t)(z[0] + 3);
        w1[n * K + 32] = (uint8_t)(z[1] - 1);
        w1[(N + n) * K + 32] = (uint8_t)(z[1] + 4);
    }
    for (int r = 0; r < 2 * N; r++) {
        s1[r * 2] = 0.5f;
        s1[r * 2 + 1] = 0.25f;
        z1[r * 2] = (uint8_t)z[0];
        z1[r * 2 + 1] = (uint8_t)z[1];
    }
    for (int k = 0; k < K; k++) {
        w2[k * N + 0] = (uint8_t)(z[0] + 2);
        w2[k * N + 32] = (uint8_t)(z[1] + 2);
        s2[k * 2] = 0.5f;
        s2[k * 2 + 1] = 0.25f;
        z2[k * 2] = (uint8_t)z[0];
        z2[k * 2 + 1] = (uint8_t)z[1];
    }
    float x[K] = {0}, wt = 1.0f;
    x[0] = 1;
    x[32] = 2;
    int32_t id = 0;
    mt_moe_tensors t = {.w1 = w1, .w2 = w2, .topk_ids = &id, .topk_weights = &wt,
                        .w1_scale = s1, .w2_scale = s2};
    if (zero_point) {
        t.w1_zero = z1;
        t.w2_zero = z2;
    }
    t.hidden = elem_array(x, K, MT_DTYPE_BF16);
    static float out[K];
    char msg[256];
    assert_int_equal(mt_oracle_fused_moe(&p, &t, NULL, 0, out, msg, sizeof msg), MT_OK);
    free((void *)t.hidden);
    /* gate = 3*0.5*1 + (-1)*0.25*2 = 1; up = 4*0.25*2 = 2;
     * a = bf16(silu(1)*2) = 1.4609375 in every column;
     * y = 1.4609375 * (2*0.5 + 2*0.25) = 2.19140625 -> bf16 140/64 = 2.1875. */
    for (int k = 0; k < K; k++)
        assert_true(out[k] == 2.1875f);
}

static void test_w8a16_signed(void **state)
{
    (void)state;
    w8a16_case(0);
}

static void test_w8a16_zero_point(void **state)
{
    (void)state;
    w8a16_case(1);
}

/* w4a16, K = N = 32, group 32. Element k of a row is the low nibble of
 * byte k/2 for even k, the high nibble for odd k. */
static void w4a16_case(int zero_point)
{
    enum { K = 32, N = 32, G = 32 };
    mt_problem p;
    mt_problem_init(&p, 1, 1, 1, K, N);
    p.quant.mode = MT_QUANT_W4A16;
    p.quant.group_size = G;
    p.quant.has_zero_point = zero_point;
    int z = zero_point ? 3 : 8;
    uint8_t zz = (uint8_t)(z | z << 4);
    static uint8_t w1[2 * N * K / 2], w2[K * N / 2], z1[2 * N], z2[K];
    static float s1[2 * N], s2[K];
    memset(w1, zz, sizeof w1);
    memset(w2, zz, sizeof w2);
    memset(z1, z, sizeof z1);
    memset(z2, z, sizeof z2);
    for (int n = 0; n < N; n++) {
        /* gate row: element 0 = 1, element 1 = 3. */
        w1[n * K / 2] = (uint8_t)((z + 1) | (z + 3) << 4);
        /* up row: element 1 = 2. */
        w1[(N + n) * K / 2] = (uint8_t)(z | (z + 2) << 4);
        s1[n] = s1[N + n] = 0.5f;
    }
    for (int k = 0; k < K; k++) {
        w2[k * N / 2] = (uint8_t)((z + 2) | (z + 4) << 4);
        s2[k] = 0.25f;
    }
    float x[K] = {1, 2}, wt = 1.0f;
    int32_t id = 0;
    mt_moe_tensors t = {.w1 = w1, .w2 = w2, .topk_ids = &id, .topk_weights = &wt,
                        .w1_scale = s1, .w2_scale = s2};
    if (zero_point) {
        t.w1_zero = z1;
        t.w2_zero = z2;
    }
    t.hidden = elem_array(x, K, MT_DTYPE_BF16);
    static float out[K];
    char msg[256];
    assert_int_equal(mt_oracle_fused_moe(&p, &t, NULL, 0, out, msg, sizeof msg), MT_OK);
    free((void *)t.hidden);
    /* gate = (1*1 + 2*3) * 0.5 = 3.5 (swapped nibbles would give 2.5);
     * up = 2*2*0.5 = 2; a = bf16(silu(3.5)*2 = 6.7948) = 217/32 = 6.78125;
     * y = 6.78125 * (2 + 4) * 0.25 = 10.171875 -> bf16 163/16 = 10.1875. */
    for (int k = 0; k < K; k++)
        assert_true(out[k] == 10.1875f);
}

static void test_w4a16_default_zero(void **state)
{
    (void)state;
    w4a16_case(0);
}

static void test_w4a16_zero_point(void **state)
{
    (void)state;
    w4a16_case(1);
}

static void test_expert_map(void **state)
{
    (void)state;
    /* E = 4 global experts, 2 local: global 1 -> local 0, global 3 -> local 1. */
    mt_problem p;
    mt_problem_init(&p, 3, 4, 2, K8, N8);
    p.has_expert_map = 1;
    p.local_E = 2;
    float w1[2 * 2 * N8 * K8], w2[2 * K8 * N8], x[3 * K8] = {0};
    two_experts(w1, w2, 2);
    for (int tok = 0; tok < 3; tok++) {
        x[tok * K8] = 1;
        x[tok * K8 + 1] = 2;
    }
    int32_t map[4] = {-1, 0, -1, 1}, ids[6] = {1, 0, 2, 3, 0, 2};
    float wts[6] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
    mt_moe_tensors t = {.topk_ids = ids, .topk_weights = wts, .expert_map = map};
    t.hidden = elem_array(x, 3 * K8, MT_DTYPE_BF16);
    t.w1 = elem_array(w1, MT_ARRAY_LEN(w1), MT_DTYPE_BF16);
    t.w2 = elem_array(w2, MT_ARRAY_LEN(w2), MT_DTYPE_BF16);
    float out[3 * K8];
    char msg[256];
    assert_int_equal(mt_oracle_fused_moe(&p, &t, NULL, 0, out, msg, sizeof msg), MT_OK);
    /* token 0: only global 1 (local 0) counts: 1.4609375 * 0.5.
     * token 1: only global 3 (local 1): -1.7578125 * 0.5.
     * token 2: no local expert: 0. */
    expect_row(out, K8, 0.73046875f);
    expect_row(out + K8, K8, -0.87890625f);
    expect_row(out + 2 * K8, K8, 0.0f);
    /* A map entry outside [-1, local_E) is refused. */
    map[3] = 2;
    assert_int_equal(mt_oracle_fused_moe(&p, &t, NULL, 0, out, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(msg, "expert_map[3] = 2"));
    free((void *)t.hidden);
    free((void *)t.w1);
    free((void *)t.w2);
}

static void test_bad_topk_id(void **state)
{
    (void)state;
    mt_problem p;
    mt_problem_init(&p, 2, 2, 1, K8, N8);
    float w1[2 * 2 * N8 * K8], w2[2 * K8 * N8], x[2 * K8] = {0}, wts[2] = {1, 1};
    two_experts(w1, w2, 2);
    int32_t ids[2] = {0, 5};
    mt_moe_tensors t = {.topk_ids = ids, .topk_weights = wts};
    t.hidden = elem_array(x, 2 * K8, MT_DTYPE_BF16);
    t.w1 = elem_array(w1, MT_ARRAY_LEN(w1), MT_DTYPE_BF16);
    t.w2 = elem_array(w2, MT_ARRAY_LEN(w2), MT_DTYPE_BF16);
    float out[2 * K8];
    char msg[256] = "";
    assert_int_equal(mt_oracle_fused_moe(&p, &t, NULL, 0, out, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(msg, "token 1"));
    assert_non_null(strstr(msg, "= 5"));
    ids[1] = -1;
    assert_int_equal(mt_oracle_fused_moe(&p, &t, NULL, 0, out, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(msg, "= -1"));
    /* A missing scale tensor for a quantized mode is named. */
    ids[1] = 1;
    p.quant.mode = MT_QUANT_FP8_PER_TOKEN;
    assert_int_equal(mt_oracle_fused_moe(&p, &t, NULL, 0, out, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(msg, "w1_scale"));
    free((void *)t.hidden);
    free((void *)t.w1);
    free((void *)t.w2);
}

/* Random data for the format comparison: fp8 per-token weights with scales. */
typedef struct rand_case {
    mt_problem p;
    mt_moe_tensors t;
    void *hidden;
    uint8_t *w1, *w2;
    float *w1s, *w2s, *wts;
    int32_t *ids, map[6];
} rand_case;

static void rand_case_make(rand_case *c, mt_quant_mode mode, int on_input)
{
    enum { M = 7, E = 6, TOPK = 2, K = 32, N = 16, LE = 4 };
    memset(c, 0, sizeof *c);
    mt_problem_init(&c->p, M, E, TOPK, K, N);
    c->p.quant.mode = mode;
    c->p.has_expert_map = 1;
    c->p.local_E = LE;
    c->p.apply_router_weight_on_input = on_input;
    c->p.format = MT_FORMAT_BATCHED;
    c->p.max_tokens = M;
    mt_rng r;
    mt_rng_seed(&r, 11);
    float *h = malloc(sizeof(float) * M * K);
    for (int i = 0; i < M * K; i++)
        h[i] = mt_rng_normal(&r);
    c->hidden = elem_array(h, M * K, MT_DTYPE_BF16);
    free(h);
    size_t n1 = (size_t)LE * 2 * N * K, n2 = (size_t)LE * K * N;
    int w8a8 = mt_quant_is_w8a8(mode);
    size_t wsz = w8a8 ? 1 : 2;
    c->w1 = malloc(n1 * wsz);
    c->w2 = malloc(n2 * wsz);
    float *tmp = malloc(sizeof(float) * n1);
    for (size_t i = 0; i < n1; i++)
        tmp[i] = mt_rng_normal(&r) * (w8a8 ? 100.0f : 0.2f);
    mt_from_float(tmp, n1, w8a8 ? MT_DTYPE_FP8_E4M3 : MT_DTYPE_BF16, c->w1);
    mt_from_float(tmp, n2, w8a8 ? MT_DTYPE_FP8_E4M3 : MT_DTYPE_BF16, c->w2);
    free(tmp);
    c->w1s = malloc(sizeof(float) * LE * 2 * N);
    c->w2s = malloc(sizeof(float) * LE * K);
    for (int i = 0; i < LE * 2 * N; i++)
        c->w1s[i] = 0.001f + 0.002f * mt_rng_uniform(&r);
    for (int i = 0; i < LE * K; i++)
        c->w2s[i] = 0.001f + 0.002f * mt_rng_uniform(&r);
    c->ids = malloc(sizeof(int32_t) * M * TOPK);
    c->wts = malloc(sizeof(float) * M * TOPK);
    for (int i = 0; i < M; i++) {
        int a = (int)(mt_rng_next(&r) % E), b = (a + 1 + (int)(mt_rng_next(&r) % (E - 1))) % E;
        c->ids[i * TOPK] = a;
        c->ids[i * TOPK + 1] = b;
        /* Powers of two: the formats round y before/after the weight. */
        c->wts[i * TOPK] = 0.5f;
        c->wts[i * TOPK + 1] = 0.25f;
    }
    const int32_t map[E] = {2, -1, 0, 3, -1, 1};
    memcpy(c->map, map, sizeof map);
    c->t = (mt_moe_tensors){.hidden = c->hidden, .w1 = c->w1, .w2 = c->w2, .topk_ids = c->ids,
                            .topk_weights = c->wts, .expert_map = c->map};
    if (w8a8) {
        c->t.w1_scale = c->w1s;
        c->t.w2_scale = c->w2s;
    }
}

static void rand_case_free(rand_case *c)
{
    free(c->hidden);
    free(c->w1);
    free(c->w2);
    free(c->w1s);
    free(c->w2s);
    free(c->wts);
    free(c->ids);
}

static void batched_equals_standard(mt_quant_mode mode, int on_input)
{
    rand_case c;
    rand_case_make(&c, mode, on_input);
    const mt_problem *p = &c.p;
    int64_t M = p->M, K = p->K, LE = p->local_E, T = p->max_tokens;
    float *ref = calloc((size_t)(M * K), sizeof *ref), *got = calloc((size_t)(M * K), sizeof *got);
    float *bout = malloc(sizeof(float) * (size_t)(LE * T * K));
    void *bh = malloc(2 * (size_t)(LE * T * K));
    int32_t *counts = malloc(sizeof(int32_t) * (size_t)LE), *row_slot = malloc(sizeof(int32_t) * (size_t)(LE * T));
    char msg[256] = "";
    assert_int_equal(mt_oracle_fused_moe(p, &c.t, NULL, 0, ref, msg, sizeof msg), MT_OK);
    assert_int_equal(mt_oracle_batched_dispatch(p, &c.t, bh, counts, row_slot, msg, sizeof msg), MT_OK);
    /* Rows of an expert hold ascending slots. */
    int64_t total = 0;
    for (int64_t e = 0; e < LE; e++) {
        for (int64_t i = 1; i < counts[e]; i++)
            assert_true(row_slot[e * T + i] > row_slot[e * T + i - 1]);
        if (counts[e] < T)
            assert_int_equal(row_slot[e * T + counts[e]], -1);
        total += counts[e];
    }
    assert_true(total > 0);
    mt_moe_tensors bt = c.t;
    bt.hidden = bh;
    bt.expert_num_tokens = counts;
    assert_int_equal(mt_oracle_batched_experts(p, &bt, bout, msg, sizeof msg), MT_OK);
    for (int64_t e = 0; e < LE; e++)
        for (int64_t i = counts[e]; i < T; i++)
            for (int64_t k = 0; k < K; k++)
                assert_true(bout[(e * T + i) * K + k] == 0.0f);
    assert_int_equal(mt_oracle_batched_combine(p, bout, row_slot, c.wts, got, msg, sizeof msg), MT_OK);
    int nonzero = 0;
    for (int64_t i = 0; i < M * K; i++) {
        if (ref[i] != got[i]) {
            print_error("element %lld: standard %.9g, batched %.9g\n", (long long)i,
                        (double)ref[i], (double)got[i]);
            fail();
        }
        nonzero += ref[i] != 0.0f;
    }
    assert_true(nonzero > M * K / 2);
    /* A token subset gives the same rows. */
    int64_t sub[2] = {5, 2};
    float *part = calloc((size_t)(M * K), sizeof *part);
    assert_int_equal(mt_oracle_fused_moe(p, &c.t, sub, 2, part, msg, sizeof msg), MT_OK);
    for (int i = 0; i < 2; i++)
        assert_memory_equal(part + sub[i] * K, ref + sub[i] * K, sizeof(float) * (size_t)K);
    /* max_tokens too small for the busiest expert. */
    int32_t busiest = 0;
    for (int64_t e = 0; e < LE; e++)
        busiest = counts[e] > busiest ? counts[e] : busiest;
    mt_problem small = *p;
    small.max_tokens = busiest - 1;
    if (small.max_tokens >= 1) {
        assert_int_equal(mt_oracle_batched_dispatch(&small, &c.t, bh, counts, row_slot, msg, sizeof msg),
                         MT_ERR_SHAPE);
        assert_non_null(strstr(msg, "expert"));
        assert_non_null(strstr(msg, "max_tokens"));
    }
    free(part);
    free(ref);
    free(got);
    free(bout);
    free(bh);
    free(counts);
    free(row_slot);
    rand_case_free(&c);
}

static void test_batched_equals_standard_none(void **state)
{
    (void)state;
    batched_equals_standard(MT_QUANT_NONE, 0);
    batched_equals_standard(MT_QUANT_NONE, 1);
}

static void test_batched_equals_standard_fp8_token(void **state)
{
    (void)state;
    batched_equals_standard(MT_QUANT_FP8_PER_TOKEN, 0);
    batched_equals_standard(MT_QUANT_FP8_PER_TOKEN, 1);
}

static void test_max_tokens_overflow(void **state)
{
    (void)state;
    /* Three tokens all to expert 0 with max_tokens = 2. */
    mt_problem p;
    mt_problem_init(&p, 3, 2, 1, K8, N8);
    p.format = MT_FORMAT_BATCHED;
    p.max_tokens = 2;
    uint16_t hidden[3 * K8] = {0}, bh[2 * 2 * K8];
    int32_t ids[3] = {0, 0, 0}, counts[2], row_slot[4];
    float wts[3] = {1, 1, 1};
    mt_moe_tensors t = {.hidden = hidden, .topk_ids = ids, .topk_weights = wts};
    char msg[256] = "";
    assert_int_equal(mt_oracle_batched_dispatch(&p, &t, bh, counts, row_slot, msg, sizeof msg),
                     MT_ERR_SHAPE);
    assert_non_null(strstr(msg, "expert 0"));
    ids[2] = 1;
    assert_int_equal(mt_oracle_batched_dispatch(&p, &t, bh, counts, row_slot, msg, sizeof msg), MT_OK);
    assert_int_equal(counts[0], 2);
    assert_int_equal(counts[1], 1);
    assert_int_equal(row_slot[0], 0);
    assert_int_equal(row_slot[1], 1);
    assert_int_equal(row_slot[2], 2);
    assert_int_equal(row_slot[3], -1);
    /* expert_num_tokens beyond max_tokens is refused by the experts stage. */
    float w[2 * 2 * N8 * K8] = {0}, bout[2 * 2 * K8];
    int32_t bad_counts[2] = {3, 0};
    mt_moe_tensors bt = {.hidden = bh, .w1 = w, .w2 = w, .expert_num_tokens = bad_counts};
    assert_int_equal(mt_oracle_batched_experts(&p, &bt, bout, msg, sizeof msg), MT_ERR_SHAPE);
    assert_non_null(strstr(msg, "expert_num_tokens[0] = 3"));
}

static void test_zero_tokens(void **state)
{
    (void)state;
    mt_problem p;
    mt_problem_init(&p, 0, 2, 1, K8, N8);
    uint16_t dummy[1] = {0};
    int32_t ids[1] = {0};
    float wts[1] = {1}, out[1] = {42};
    mt_moe_tensors t = {.hidden = dummy, .w1 = dummy, .w2 = dummy, .topk_ids = ids, .topk_weights = wts};
    char msg[256];
    assert_int_equal(mt_oracle_fused_moe(&p, &t, NULL, 0, out, msg, sizeof msg), MT_OK);
    assert_true(out[0] == 42.0f);
    p.K = 12;
    assert_int_equal(mt_oracle_fused_moe(&p, &t, NULL, 0, out, msg, sizeof msg), MT_ERR_ALIGNMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_none_bf16_silu),
        cmocka_unit_test(test_none_fp16_silu),
        cmocka_unit_test(test_none_bf16_gelu),
        cmocka_unit_test(test_router_weight_on_input),
        cmocka_unit_test(test_fp8_per_tensor_dynamic),
        cmocka_unit_test(test_fp8_per_tensor_static),
        cmocka_unit_test(test_int8_per_token),
        cmocka_unit_test(test_fp8_block),
        cmocka_unit_test(test_w8a16_signed),
        cmocka_unit_test(test_w8a16_zero_point),
        cmocka_unit_test(test_w4a16_default_zero),
        cmocka_unit_test(test_w4a16_zero_point),
        cmocka_unit_test(test_expert_map),
        cmocka_unit_test(test_bad_topk_id),
        cmocka_unit_test(test_batched_equals_standard_none),
        cmocka_unit_test(test_batched_equals_standard_fp8_token),
        cmocka_unit_test(test_max_tokens_overflow),
        cmocka_unit_test(test_zero_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
