/*
 * CPU test of the quantized paths that need no GPU: the quantized random
 * problem data of tuner/harness.c (weights and scales per quant mode, int4
 * packing, zero points, determinism, agreement with numeric.h's quantizers)
 * and NVRTC compiles of the quantized grouped_gemm and act_quant variants
 * for sm_90a and sm_80 (fp8 pruned on sm_80). MT_QUANT_COMPILE_ALL=1
 * compiles every default variant instead of a sample. Also the launcher's
 * checks and workspace sizing that need no GPU: quant plans and split-K
 * plans.
 */
#include "tests/support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "moetune/gen.h"
#include "moetune/numeric.h"
#include "moetune/oracle.h"
#include "runtime/moe_launch.h"
#include "tuner/harness.h"

static const char *const quants[] = {"none",        "fp8-tensor", "fp8-token",
                                     "fp8-block",   "int8-tensor", "int8-token",
                                     "int8-block",  "w8a16",      "w4a16"};

/* Compile a sample (or all) of the default variants matching the filter;
 * returns how many variants matched. */
static size_t compile_defaults(mt_gen *g, const char *family, const char *arch, const char *pname,
                               const char *pvalue, int all)
{
    mt_gen_filter f = {.family = family, .arch = arch, .defaults_only = 1, .nparams = 1};
    f.params[0].name = pname;
    f.params[0].value = pvalue;
    mt_variant *v = NULL;
    size_t n = 0;
    mt_status st = mt_gen_enumerate(g, &f, &v, &n, NULL);
    if (st)
        fail_msg("%s %s=%s for %s: %s", family, pname, pvalue, arch, mt_gen_errmsg(g));
    if (n == 0) {
        free(v);
        return 0;
    }
    /* The sample: first, last and middle (different tiles, dtypes, formats
     * and epilogues since the tile params vary fastest... and slowest). */
    mt_variant sample[3];
    size_t ns = 0;
    mt_variant *list = v;
    if (!all) {
        sample[ns++] = v[0];
        if (n > 2)
            sample[ns++] = v[n / 2 + 1];
        if (n > 1)
            sample[ns++] = v[n - 1];
        list = sample;
    } else {
        ns = n;
    }
    mt_kernel_binary *b = NULL;
    st = mt_gen_compile(g, list, ns, &b);
    for (size_t i = 0; i < ns; i++)
        if (b && b[i].status)
            fail_msg("compiling %s for %s: %.4000s", b[i].variant.name, arch,
                     b[i].log ? b[i].log : "");
    if (st)
        fail_msg("compiling %s %s for %s: %s", family, pvalue, arch, mt_gen_errmsg(g));
    printf("  %s %s=%s %s: %zu defaults, compiled %zu\n", family, pname, pvalue, arch, n, ns);
    mt_kernel_binaries_free(b, ns);
    free(v);
    return n;
}

static void test_quant_kernels_compile(void **state)
{
    (void)state;
    const char *all_env = getenv("MT_QUANT_COMPILE_ALL");
    const int all = all_env && atoi(all_env);
    mt_gen_config cfg = {.no_cache = !all};
    mt_gen *g = NULL;
    if (mt_gen_open(&cfg, &g))
        fail_msg("templates: %s", mt_gen_errmsg(g));
    static const char *const archs[] = {"sm_90a", "sm_80"};
    for (int a = 0; a < 2; a++) {
        for (size_t q = 0; q < sizeof quants / sizeof quants[0]; q++) {
            size_t n = compile_defaults(g, "grouped_gemm", archs[a], "quant", quants[q], all);
            const int fp8 = !strncmp(quants[q], "fp8", 3);
            if (fp8 && a == 1)
                assert_int_equal(n, 0);   /* no fp8 tensor cores on sm_80: pruned */
            else
                assert_true(n > 0 && n <= 4 * 2 * (4 + 3));   /* <= 4 tiles per dtype and format-epilogue pair */
        }
        static const char *const qt[] = {"fp8", "int8"};
        for (int i = 0; i < 2; i++) {
            size_t n = compile_defaults(g, "act_quant", archs[a], "qtype", qt[i], all);
            assert_int_equal(n, i == 0 && a == 1 ? 0 : 2 * 3 * 3);
        }
    }
    mt_gen_close(g);
}

/* Every default act_quant kernel of one dtype and qtype, compiled to PTX
 * (compute_90): those with an activation evaluate it (silu and gelu both
 * go through expf, ex2 in PTX), those without do not. A kernel that
 * dropped its activation compiles cleanly and runs: only the GPU oracle
 * would see its bytes, so this catches it here. (Session 29: the four-pass
 * division kernels first stored the gate unactivated.) */
static void test_act_kernels_apply_activation(void **state)
{
    (void)state;
    mt_gen *g = mt_test_open_templates();
    static const char *const kv[] = {"dtype", "bf16", "qtype", "fp8"};
    mt_variant *v = NULL;
    mt_kernel_binary *b = NULL;
    const size_t n = mt_test_compile_defaults(g, "act_quant", "compute_90", kv, 4, &v, &b);
    assert_true(n >= 3);
    for (size_t i = 0; i < n; i++) {
        assert_true(b[i].is_ptx);
        const int has_act = strcmp(mt_variant_get(&b[i].variant, "act"), "none") != 0;
        const int has_ex2 = strstr((const char *)b[i].image, "ex2.approx") != NULL;
        if (has_act != has_ex2)
            fail_msg("%s: activation %s, ex2 in its PTX %s", b[i].variant.name,
                     mt_variant_get(&b[i].variant, "act"), has_ex2 ? "yes" : "no");
    }
    mt_kernel_binaries_free(b, n);
    free(v);
    mt_gen_close(g);
}

/* A small problem in quant mode q (group/zero point for weight-only). */
static mt_problem small_problem(mt_quant_mode q, int group, int zp, int static_scale)
{
    mt_problem p;
    mt_problem_init(&p, 16, 2, 2, 256, 128);
    p.quant.mode = q;
    p.quant.group_size = group;
    p.quant.has_zero_point = zp;
    p.quant.static_act_scale = static_scale;
    return p;
}

/* Sizes follow problem.h: scales per expert / row / block / group. */
static void test_quant_sizes(void **state)
{
    (void)state;
    size_t wb, ns, nz;
    mt_problem p = small_problem(MT_QUANT_FP8_BLOCK, 0, 0, 0);
    p.N = 200;   /* 2N = 400 rows: 4 row blocks of w1; w2 K=256 x N=200: 2 x 2 */
    mt_quant_sizes(&p, 0, &wb, &ns, &nz);
    assert_int_equal(wb, 2 * 400 * 256);
    assert_int_equal(ns, 2 * 4 * 2);
    assert_int_equal(nz, 0);
    mt_quant_sizes(&p, 1, &wb, &ns, &nz);
    assert_int_equal(ns, 2 * 2 * 2);
    p = small_problem(MT_QUANT_INT8_PER_TOKEN, 0, 0, 0);
    mt_quant_sizes(&p, 0, &wb, &ns, &nz);
    assert_int_equal(ns, 2 * 256);
    p = small_problem(MT_QUANT_FP8_PER_TENSOR, 0, 0, 0);
    mt_quant_sizes(&p, 1, &wb, &ns, &nz);
    assert_int_equal(ns, 2);
    p = small_problem(MT_QUANT_W4A16, 64, 1, 0);
    mt_quant_sizes(&p, 0, &wb, &ns, &nz);
    assert_int_equal(wb, 2 * 256 * 256 / 2);
    assert_int_equal(ns, 2 * 256 * 4);
    assert_int_equal(nz, ns);
    mt_quant_sizes(&p, 1, &wb, &ns, &nz);
    assert_int_equal(ns, 2 * 256 * 2);   /* w2 groups run along N = 128 */
    p = small_problem(MT_QUANT_NONE, 0, 0, 0);
    mt_quant_sizes(&p, 0, &wb, &ns, &nz);
    assert_int_equal(wb, 2 * 256 * 256 * 2);
    assert_int_equal(ns, 0);
}

/* Decoding by problem.h's text: low nibble = even k; zero point 8 without
 * zero points. Every weight must come back within half a step. */
static void test_int4_packing_roundtrip(void **state)
{
    (void)state;
    enum { ROWS = 3, COLS = 128 };
    static float w[ROWS * COLS], sc[ROWS * 4];
    static uint8_t q[ROWS * COLS / 2], z[ROWS * 4];
    mt_rng r;
    mt_rng_seed(&r, 5);
    for (int i = 0; i < ROWS * COLS; i++)
        w[i] = mt_rng_normal(&r);
    for (int zp = 0; zp < 2; zp++) {
        mt_problem p = small_problem(MT_QUANT_W4A16, 32, zp, 0);
        assert_int_equal(mt_quantize_weights(&p, w, ROWS, COLS, q, sc, zp ? z : NULL), MT_OK);
        for (int row = 0; row < ROWS; row++)
            for (int k = 0; k < COLS; k++) {
                const int g = row * 4 + k / 32;
                const uint8_t byte = q[(row * COLS + k) / 2];
                const int nib = k % 2 ? byte >> 4 : byte & 15;
                const float deq = (float)(nib - (zp ? z[g] : 8)) * sc[g];
                /* Clamping at the range ends can cost up to a full step. */
                if (fabsf(deq - w[row * COLS + k]) > sc[g] * 1.0001f)
                    fail_msg("zp=%d row %d k %d: %g decodes to %g (scale %g)", zp, row, k,
                             (double)w[row * COLS + k], (double)deq, (double)sc[g]);
            }
    }
    /* An odd k lands in the high nibble: only k = 1 nonzero. */
    static float one[32];
    memset(one, 0, sizeof one);
    one[1] = 7.0f;
    mt_problem p = small_problem(MT_QUANT_W4A16, 32, 0, 0);
    assert_int_equal(mt_quantize_weights(&p, one, 1, 32, q, sc, NULL), MT_OK);
    assert_true(fabsf(sc[0] - 1.0f) < 1e-6f);
    assert_int_equal(q[0], (15 << 4) | 8);   /* k=0: 0 + 8 low; k=1: 7 + 8 high */
    assert_int_equal(q[1], (8 << 4) | 8);
}

/* w8a8 weights use numeric.h's quantizers with amax / qmax scales. */
static void test_w8a8_weights_match_numeric(void **state)
{
    (void)state;
    enum { ROWS = 130, COLS = 136 };
    static float w[ROWS * COLS], sc[4];
    static uint8_t q[ROWS * COLS];
    mt_rng r;
    mt_rng_seed(&r, 9);
    for (int i = 0; i < ROWS * COLS; i++)
        w[i] = mt_rng_normal(&r) * 0.1f;
    mt_problem p = small_problem(MT_QUANT_FP8_BLOCK, 0, 0, 0);
    assert_int_equal(mt_quantize_weights(&p, w, ROWS, COLS, q, sc, NULL), MT_OK);
    /* Block (1, 1) holds rows 128..129, cols 128..135. */
    float amax = 0.0f;
    for (int row = 128; row < ROWS; row++)
        for (int c = 128; c < COLS; c++)
            amax = fmaxf(amax, fabsf(w[row * COLS + c]));
    assert_true(sc[3] == mt_act_scale(amax, MT_DTYPE_FP8_E4M3));
    assert_int_equal(q[129 * COLS + 130], mt_quant_e4m3(w[129 * COLS + 130], sc[3]));
    assert_int_equal(q[5 * COLS + 7], mt_quant_e4m3(w[5 * COLS + 7], sc[0]));
    p = small_problem(MT_QUANT_INT8_PER_TOKEN, 0, 0, 0);
    static float sct[ROWS];
    assert_int_equal(mt_quantize_weights(&p, w, ROWS, COLS, q, sct, NULL), MT_OK);
    amax = 0.0f;
    for (int c = 0; c < COLS; c++)
        amax = fmaxf(amax, fabsf(w[77 * COLS + c]));
    assert_true(sct[77] == mt_act_scale(amax, MT_DTYPE_INT8));
    assert_int_equal((int8_t)q[77 * COLS + 3], mt_quant_int8(w[77 * COLS + 3], sct[77]));
}

/* Relative L2 distance of two float arrays. */
static double rel_l2(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

/* The oracle reads the generated layouts as they were meant: the result of
 * each quant mode on the generated data is within that mode's quantization
 * error of the unquantized result on the same fp32 weights (a layout or
 * packing mismatch gives errors near 1). */
static void test_oracle_agrees_with_layouts(void **state)
{
    (void)state;
    struct { mt_quant_mode q; int group, zp, stat; double tol; } modes[] = {
        {MT_QUANT_FP8_PER_TENSOR, 0, 0, 0, 0.1},  {MT_QUANT_FP8_PER_TENSOR, 0, 0, 1, 0.1},
        {MT_QUANT_FP8_PER_TOKEN, 0, 0, 0, 0.1},   {MT_QUANT_FP8_BLOCK, 0, 0, 0, 0.1},
        {MT_QUANT_INT8_PER_TENSOR, 0, 0, 0, 0.05}, {MT_QUANT_INT8_PER_TOKEN, 0, 0, 0, 0.05},
        {MT_QUANT_INT8_BLOCK, 0, 0, 0, 0.05},     {MT_QUANT_W8A16, 32, 0, 0, 0.02},
        {MT_QUANT_W8A16, 128, 1, 0, 0.02},        {MT_QUANT_W4A16, 64, 0, 0, 0.3},
        {MT_QUANT_W4A16, 32, 1, 0, 0.3},
    };
    char msg[256];
    mt_problem base = small_problem(MT_QUANT_NONE, 0, 0, 0);
    const int64_t M = base.M, K = base.K, N = base.N, E = base.E;
    float *w1 = malloc(sizeof(float) * (size_t)(E * 2 * N * K));
    float *w2 = malloc(sizeof(float) * (size_t)(E * K * N));
    uint16_t *w1b = malloc(2 * (size_t)(E * 2 * N * K)), *w2b = malloc(2 * (size_t)(E * K * N));
    uint16_t *hid = malloc(2 * (size_t)(M * K));
    int32_t ids[16 * 2];
    float tw[16 * 2];
    mt_rng r;
    mt_rng_seed(&r, 21);
    for (int64_t i = 0; i < E * 2 * N * K; i++)
        w1[i] = mt_rng_normal(&r) / 16.0f;
    for (int64_t i = 0; i < E * K * N; i++)
        w2[i] = mt_rng_normal(&r) / sqrtf((float)N);
    for (int64_t i = 0; i < M * K; i++)
        hid[i] = mt_f32_to_bf16(mt_rng_normal(&r));
    for (int i = 0; i < 32; i++) {
        ids[i] = i % 2;
        tw[i] = 0.5f;
    }
    assert_int_equal(mt_from_float(w1, (size_t)(E * 2 * N * K), MT_DTYPE_BF16, w1b), MT_OK);
    assert_int_equal(mt_from_float(w2, (size_t)(E * K * N), MT_DTYPE_BF16, w2b), MT_OK);
    mt_moe_tensors t = {.hidden = hid, .w1 = w1b, .w2 = w2b, .topk_ids = ids, .topk_weights = tw};
    float *ref = malloc(sizeof(float) * (size_t)(M * K)), *got = malloc(sizeof(float) * (size_t)(M * K));
    assert_int_equal(mt_oracle_fused_moe(&base, &t, NULL, 0, ref, msg, sizeof msg), MT_OK);
    uint8_t *q1 = malloc((size_t)(E * 2 * N * K)), *q2 = malloc((size_t)(E * K * N));
    float *s1 = malloc(sizeof(float) * (size_t)(E * 2 * N * K)), *s2 = malloc(sizeof(float) * (size_t)(E * K * N));
    uint8_t *z1 = malloc((size_t)(E * 2 * N * K)), *z2 = malloc((size_t)(E * K * N));
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        mt_problem p = small_problem(modes[m].q, modes[m].group, modes[m].zp, modes[m].stat);
        size_t wb, ns, nz;
        mt_quant_sizes(&p, 0, &wb, &ns, &nz);
        const size_t q1e = wb / (size_t)E, s1e = ns / (size_t)E;
        mt_quant_sizes(&p, 1, &wb, &ns, &nz);
        const size_t q2e = wb / (size_t)E, s2e = ns / (size_t)E;
        for (int64_t e = 0; e < E; e++) {
            assert_int_equal(mt_quantize_weights(&p, w1 + e * 2 * N * K, 2 * N, K, q1 + e * q1e,
                                                 s1 + e * s1e, z1 + e * s1e), MT_OK);
            assert_int_equal(mt_quantize_weights(&p, w2 + e * K * N, K, N, q2 + e * q2e,
                                                 s2 + e * s2e, z2 + e * s2e), MT_OK);
        }
        float a_scale[2] = {mt_act_scale(4.5f, mt_quant_act_dtype(p.quant.mode)),
                            mt_act_scale(12.0f, mt_quant_act_dtype(p.quant.mode))};
        mt_moe_tensors tq = t;
        tq.w1 = q1;
        tq.w2 = q2;
        tq.w1_scale = s1;
        tq.w2_scale = s2;
        tq.w1_zero = p.quant.has_zero_point ? z1 : NULL;
        tq.w2_zero = p.quant.has_zero_point ? z2 : NULL;
        tq.a1_scale = p.quant.static_act_scale ? &a_scale[0] : NULL;
        tq.a2_scale = p.quant.static_act_scale ? &a_scale[1] : NULL;
        mt_status st = mt_oracle_fused_moe(&p, &tq, NULL, 0, got, msg, sizeof msg);
        if (st)
            fail_msg("%s: %s", mt_quant_mode_name(p.quant.mode), msg);
        double err = rel_l2(got, ref, (size_t)(M * K));
        printf("  %-12s group=%3d zp=%d static=%d: rel_l2 vs unquantized %.4f (tol %.2f)\n",
               mt_quant_mode_name(p.quant.mode), p.quant.group_size, p.quant.has_zero_point,
               p.quant.static_act_scale, err, modes[m].tol);
        assert_true(err < modes[m].tol);
        assert_true(err > 1e-4);   /* the quantization did happen */
    }
    free(w1), free(w2), free(w1b), free(w2b), free(hid), free(ref), free(got);
    free(q1), free(q2), free(s1), free(s2), free(z1), free(z2);
}

/* mt_problem_data_make builds every mode deterministically (host only). */
static void test_problem_data_every_mode(void **state)
{
    (void)state;
    char msg[256];
    for (int q = 1; q < MT_QUANT_COUNT_; q++)
        for (int fmt = 0; fmt < 2; fmt++) {
            const int wonly = mt_quant_is_weight_only((mt_quant_mode)q);
            const int tensor = mt_quant_granularity((mt_quant_mode)q) == MT_GRAN_TENSOR;
            mt_problem p = small_problem((mt_quant_mode)q, wonly ? 64 : 0, wonly && fmt,
                                         tensor && fmt);
            p.format = (mt_act_format)fmt;
            mt_problem_data a, b, c;
            if (mt_problem_data_make(&a, &p, MT_ROUTING_UNIFORM, 3, 0, msg, sizeof msg))
                fail_msg("%s: %s", mt_quant_mode_name((mt_quant_mode)q), msg);
            assert_int_equal(mt_problem_data_make(&b, &p, MT_ROUTING_UNIFORM, 3, 0, msg, sizeof msg), MT_OK);
            assert_int_equal(mt_problem_data_make(&c, &p, MT_ROUTING_UNIFORM, 4, 0, msg, sizeof msg), MT_OK);
            size_t wb, ns, nz;
            mt_quant_sizes(&a.p, 0, &wb, &ns, &nz);
            assert_memory_equal(a.h_w1, b.h_w1, wb);
            assert_memory_equal(a.h_w1_scale, b.h_w1_scale, ns * sizeof(float));
            assert_true(memcmp(a.h_w1, c.h_w1, wb) != 0);
            for (size_t i = 0; i < ns; i++)
                assert_true(a.h_w1_scale[i] > 0.0f && isfinite(a.h_w1_scale[i]));
            if (nz)
                assert_memory_equal(a.h_w1_zero, b.h_w1_zero, nz);
            if (a.p.quant.static_act_scale)
                assert_true(a.h.a1_scale && a.h.a2_scale && a.h_a_scale[0] > 0.0f);
            /* The oracle accepts the data in the problem's format. */
            float *out = malloc(sizeof(float) * (size_t)(a.p.M * a.p.K + a.p.local_E * a.p.max_tokens * a.p.K));
            assert_non_null(out);
            mt_status st = fmt ? mt_oracle_batched_experts(&a.p, &a.h, out, msg, sizeof msg)
                               : mt_oracle_fused_moe(&a.p, &a.h, NULL, 0, out, msg, sizeof msg);
            if (st)
                fail_msg("oracle on %s: %s", mt_quant_mode_name((mt_quant_mode)q), msg);
            free(out);
            mt_problem_data_free(&a);
            mt_problem_data_free(&b);
            mt_problem_data_free(&c);
        }
}

static mt_gen *open_templates(void)
{
    mt_gen_config cfg = {.no_cache = 1};
    mt_gen *g = NULL;
    if (mt_gen_open(&cfg, &g))
        fail_msg("templates: %s", mt_gen_errmsg(g));
    return g;
}

/* A kernel of the plan without a GPU: plan checks read only v and fn. */
static void fake_kernel(mt_gen *g, mt_kernel *k, const char *family, const char *arch,
                        const char *const *kv)
{
    mt_gen_filter f = {.family = family, .arch = arch, .defaults_only = 1};
    for (int i = 0; kv[i]; i += 2, f.nparams++) {
        f.params[f.nparams].name = kv[i];
        f.params[f.nparams].value = kv[i + 1];
    }
    mt_variant *v = NULL;
    size_t n = 0;
    assert_int_equal(mt_gen_enumerate(g, &f, &v, &n, NULL), MT_OK);
    if (n == 0)
        fail_msg("no %s variant for %s", family, arch);
    memset(k, 0, sizeof *k);
    k->v = v[0];
    k->fn = (CUfunction)(uintptr_t)16;
    free(v);
}

/* mt_moe_plan_check on quant plans: accepted when the kernels match, and
 * refused with a clear status otherwise (fp8 below sm_89, K not a multiple
 * of 16, a kernel of another quant mode or granularity, a missing step). */
static void test_plan_check_quant(void **state)
{
    (void)state;
    char msg[256];
    mt_gen *g = open_templates();
    const char *const none_kv[] = {NULL};
    const char *const rd_kv[] = {"dtype", "bf16", NULL};
    const char *const g1_kv[] = {"dtype", "bf16", "quant", "fp8-block", "format", "standard",
                                 "epilogue", "store", NULL};
    const char *const g2_kv[] = {"dtype", "bf16", "quant", "fp8-block", "format", "standard",
                                 "epilogue", "store", NULL};
    const char *const q_kv[] = {"dtype", "bf16", "qtype", "fp8", "gran", "block", "act", "none", NULL};
    const char *const a_kv[] = {"dtype", "bf16", "qtype", "fp8", "gran", "block", "act", "silu", NULL};
    mt_moe_plan plan;
    memset(&plan, 0, sizeof plan);
    fake_kernel(g, &plan.step[MT_STEP_ALIGN], "moe_align", "sm_90a", none_kv);
    fake_kernel(g, &plan.step[MT_STEP_GEMM1], "grouped_gemm", "sm_90a", g1_kv);
    fake_kernel(g, &plan.step[MT_STEP_GEMM2], "grouped_gemm", "sm_90a", g2_kv);
    fake_kernel(g, &plan.step[MT_STEP_QUANT], "act_quant", "sm_90a", q_kv);
    fake_kernel(g, &plan.step[MT_STEP_ACT], "act_quant", "sm_90a", a_kv);
    fake_kernel(g, &plan.step[MT_STEP_REDUCE], "moe_reduce", "sm_90a", rd_kv);
    mt_problem p = small_problem(MT_QUANT_FP8_BLOCK, 0, 0, 0);
    mt_status st = mt_moe_plan_check(&plan, &p, msg, sizeof msg);
    if (st)
        fail_msg("fp8-block plan refused: %s", msg);
    /* The workspace holds the quantized inputs and their scales. */
    mt_problem pn = p;
    pn.quant.mode = MT_QUANT_NONE;
    assert_true(mt_moe_workspace_size(&plan, &p) > 0);

    /* fp8 kernels claimed for sm_80: refused, never run. */
    mt_moe_plan bad = plan;
    mt_strlcpy(bad.step[MT_STEP_GEMM1].v.arch, "sm_80", sizeof bad.step[0].v.arch);
    assert_int_equal(mt_moe_plan_check(&bad, &p, msg, sizeof msg), MT_ERR_UNSUPPORTED);
    assert_non_null(strstr(msg, "sm_89"));
    assert_int_equal(mt_moe_quant_supported(&p, "sm_80", msg, sizeof msg), MT_ERR_UNSUPPORTED);
    assert_int_equal(mt_moe_quant_supported(&p, "sm_89", msg, sizeof msg), MT_OK);
    assert_int_equal(mt_moe_quant_supported(&p, "compute_90", msg, sizeof msg), MT_OK);
    /* int8 runs on sm_80. */
    mt_problem pi = small_problem(MT_QUANT_INT8_PER_TOKEN, 0, 0, 0);
    assert_int_equal(mt_moe_quant_supported(&pi, "sm_80", msg, sizeof msg), MT_OK);
    /* K not a multiple of 16 for 8-bit rows. */
    mt_problem pk = p;
    pk.K = 136;
    assert_int_equal(mt_moe_plan_check(&plan, &pk, msg, sizeof msg), MT_ERR_ALIGNMENT);
    /* The gemm is fp8-block but the problem is fp8-token. */
    mt_problem pt = small_problem(MT_QUANT_FP8_PER_TOKEN, 0, 0, 0);
    assert_int_equal(mt_moe_plan_check(&plan, &pt, msg, sizeof msg), MT_ERR_INCOMPATIBLE);
    assert_non_null(strstr(msg, "quant"));
    /* A quant step of the wrong granularity. */
    const char *const qt_kv[] = {"dtype", "bf16", "qtype", "fp8", "gran", "token", "act", "none", NULL};
    bad = plan;
    fake_kernel(g, &bad.step[MT_STEP_QUANT], "act_quant", "sm_90a", qt_kv);
    assert_int_equal(mt_moe_plan_check(&bad, &p, msg, sizeof msg), MT_ERR_INCOMPATIBLE);
    assert_non_null(strstr(msg, "gran"));
    /* The act step must quantize (act_quant), not only activate. */
    const char *const am_kv[] = {"dtype", "bf16", "activation", "silu", NULL};
    bad = plan;
    fake_kernel(g, &bad.step[MT_STEP_ACT], "act_and_mul", "sm_90a", am_kv);
    assert_int_equal(mt_moe_plan_check(&bad, &p, msg, sizeof msg), MT_ERR_INCOMPATIBLE);
    /* Missing quant step. */
    bad = plan;
    memset(&bad.step[MT_STEP_QUANT], 0, sizeof bad.step[0]);
    assert_int_equal(mt_moe_plan_check(&bad, &p, msg, sizeof msg), MT_ERR_INVALID_ARG);
    /* Weight-only plans use act_and_mul as the bf16 path does. */
    const char *const w_kv[] = {"dtype", "bf16", "quant", "w4a16", "format", "standard",
                                "epilogue", "store", NULL};
    mt_moe_plan wp = plan;
    fake_kernel(g, &wp.step[MT_STEP_GEMM1], "grouped_gemm", "sm_80", w_kv);
    fake_kernel(g, &wp.step[MT_STEP_GEMM2], "grouped_gemm", "sm_80", w_kv);
    fake_kernel(g, &wp.step[MT_STEP_ACT], "act_and_mul", "sm_80", am_kv);
    memset(&wp.step[MT_STEP_QUANT], 0, sizeof wp.step[0]);
    mt_problem pw = small_problem(MT_QUANT_W4A16, 64, 1, 0);
    st = mt_moe_plan_check(&wp, &pw, msg, sizeof msg);
    if (st)
        fail_msg("w4a16 plan refused: %s", msg);
    /* ... and the unquantized problem is refused by a quant kernel. */
    pn = pw;
    pn.quant.mode = MT_QUANT_NONE;
    pn.quant.group_size = 0;
    pn.quant.has_zero_point = 0;
    assert_int_equal(mt_moe_plan_check(&wp, &pn, msg, sizeof msg), MT_ERR_INCOMPATIBLE);
    mt_gen_close(g);
}

/* Set an existing parameter of a variant (a variant no template makes). */
static void set_param(mt_variant *v, const char *name, const char *value)
{
    for (int i = 0; i < v->nparams; i++)
        if (!strcmp(v->params[i].name, name)) {
            mt_strlcpy(v->params[i].value, value, sizeof v->params[i].value);
            return;
        }
    fail_msg("%s has no parameter %s", v->name, name);
}

/* A bf16 plan with the default 16-row GEMM tiles of split factor sk:
 * GEMM1 fusing silu (standard) or storing (batched), GEMM2 storing. */
static void split_plan(mt_gen *g, mt_moe_plan *plan, const char *sk, const char *format)
{
    const int batched = !strcmp(format, "batched");
    const char *const none_kv[] = {NULL};
    const char *const rd_kv[] = {"dtype", "bf16", NULL};
    const char *const am_kv[] = {"dtype", "bf16", "activation", "silu", NULL};
    const char *const g1_kv[] = {"dtype", "bf16", "quant", "none", "format", format, "epilogue",
                                 batched ? "store" : "silu", "BLOCK_M", "16", "SPLIT_K", sk, NULL};
    const char *const g2_kv[] = {"dtype", "bf16", "quant", "none", "format", format, "epilogue",
                                 "store", "BLOCK_M", "16", "SPLIT_K", sk, NULL};
    memset(plan, 0, sizeof *plan);
    fake_kernel(g, &plan->step[MT_STEP_ALIGN], "moe_align", "sm_90a", none_kv);
    fake_kernel(g, &plan->step[MT_STEP_GEMM1], "grouped_gemm", "sm_90a", g1_kv);
    fake_kernel(g, &plan->step[MT_STEP_ACT], "act_and_mul", "sm_90a", am_kv);
    fake_kernel(g, &plan->step[MT_STEP_GEMM2], "grouped_gemm", "sm_90a", g2_kv);
    fake_kernel(g, &plan->step[MT_STEP_REDUCE], "moe_reduce", "sm_90a", rd_kv);
}

/* A grid past 2^31-1 CTAs (SPLIT_K up to 64 passes the plan check, as a
 * database may carry it) is refused with MT_ERR_SHAPE before anything is
 * enqueued: no driver is loaded here, so a launch would crash the test. */
static void test_grid_too_large(void **state)
{
    (void)state;
    char msg[256];
    mt_gen *g = open_templates();
    mt_problem p;
    mt_problem_init(&p, MT_MAX_TOKENS, 8, 2, 4096, 14336);
    mt_moe_plan plan;
    split_plan(g, &plan, "4", "standard");
    set_param(&plan.step[MT_STEP_GEMM1].v, "SPLIT_K", "64");
    set_param(&plan.step[MT_STEP_GEMM2].v, "SPLIT_K", "64");
    mt_moe_tensors t;
    memset(&t, 0, sizeof t);
    void *fake = (void *)(uintptr_t)0x100000;
    t.hidden = t.w1 = t.w2 = fake;
    t.out = fake;
    t.topk_ids = fake;
    t.topk_weights = fake;
    assert_int_equal(mt_moe_run_steps(&plan, &p, &t, (CUdeviceptr)0x100000, SIZE_MAX,
                                      MT_STEPS_EVERY, NULL, msg, sizeof msg),
                     MT_ERR_SHAPE);
    assert_non_null(strstr(msg, "2^31-1"));
    mt_gen_close(g);
}

/* Split-K plans: the workspace grows by the tile counters and the larger
 * GEMM's partial sums (tiles * SPLIT_K * BLOCK_M * BLOCK_N floats) and
 * nothing else, unsplit plans do not depend on the tile counts at all, the
 * GEMMs may split differently, and the plan check wants a sane SPLIT_K. */
static void test_plan_split_k(void **state)
{
    (void)state;
    char msg[256];
    mt_gen *g = open_templates();
    for (int fmt = 0; fmt < 2; fmt++) {
        const char *format = fmt ? "batched" : "standard";
        mt_problem p;
        mt_problem_init(&p, 64, 8, 2, 256, 128);   /* 128 slots, 8 experts busy */
        p.format = fmt ? MT_FORMAT_BATCHED : MT_FORMAT_STANDARD;
        p.max_tokens = 40;
        mt_moe_plan one, four;
        split_plan(g, &one, "1", format);
        split_plan(g, &four, "4", format);
        mt_status st = mt_moe_plan_check(&four, &p, msg, sizeof msg);
        if (st)
            fail_msg("%s split-K plan refused: %s", format, msg);
        assert_int_equal(mt_moe_plan_check(&one, &p, msg, sizeof msg), MT_OK);
        /* Row blocks of 16: standard pads each of the 8 experts' rows
         * (128 slots) to 16, batched has ceil(40 / 16) per expert. */
        const int64_t mblocks = fmt ? 8 * 3 : (128 + 8 * 15 + 15) / 16;
        const int64_t bn1 = fmt ? 64 : 32;   /* fused: 32 output columns per tile */
        const int64_t tiles1 = mblocks * (((fmt ? 2 * p.N : p.N) + bn1 - 1) / bn1);
        const int64_t tiles2 = mblocks * ((p.K + 63) / 64);
        const size_t counters = (size_t)(tiles1 + tiles2) * sizeof(int32_t);
        const size_t partial =
            (size_t)(tiles1 > tiles2 ? tiles1 : tiles2) * 4 * 16 * 64 * sizeof(float);
        const size_t s1 = mt_moe_workspace_size(&one, &p), s4 = mt_moe_workspace_size(&four, &p);
        printf("  %s: workspace %zu bytes unsplit, %zu split-K (partials %zu, counters %zu)\n",
               format, s1, s4, partial, counters);
        /* Regions are aligned to at most 256 bytes. */
        assert_true(s4 >= s1 + partial + counters - 256);
        assert_true(s4 <= s1 + partial + counters + 2 * 256);
        /* Unsplit: no counters, so the size ignores how many tiles there are. */
        mt_moe_plan narrow = one;
        set_param(&narrow.step[MT_STEP_GEMM1].v, "BLOCK_N", "32");
        set_param(&narrow.step[MT_STEP_GEMM2].v, "BLOCK_N", "32");
        assert_int_equal(mt_moe_workspace_size(&narrow, &p), s1);

        /* One GEMM split, the other not (GEMM2's K is often far shorter):
         * accepted, with the counters of both and the split one's partials. */
        for (int which = 0; which < 2; which++) {
            mt_moe_plan mixed = which ? one : four;
            mixed.step[MT_STEP_GEMM2] = which ? four.step[MT_STEP_GEMM2] : one.step[MT_STEP_GEMM2];
            if (mt_moe_plan_check(&mixed, &p, msg, sizeof msg))
                fail_msg("%s mixed split plan refused: %s", format, msg);
            const size_t part = (size_t)(which ? tiles2 : tiles1) * 4 * 16 * 64 * sizeof(float);
            const size_t sm = mt_moe_workspace_size(&mixed, &p);
            assert_true(sm >= s1 + part + counters - 256);
            assert_true(sm <= s1 + part + counters + 2 * 256);
        }
        /* A SPLIT_K no template makes (a damaged database row): refused. */
        static const char *const bad_sk[] = {"0", "100000"};
        for (int i = 0; i < 2; i++) {
            mt_moe_plan bad = four;
            set_param(&bad.step[MT_STEP_GEMM1].v, "SPLIT_K", bad_sk[i]);
            set_param(&bad.step[MT_STEP_GEMM2].v, "SPLIT_K", bad_sk[i]);
            assert_int_equal(mt_moe_plan_check(&bad, &p, msg, sizeof msg), MT_ERR_INVALID_ARG);
            assert_non_null(strstr(msg, "SPLIT_K"));
        }
    }
    mt_gen_close(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quant_sizes),
        cmocka_unit_test(test_int4_packing_roundtrip),
        cmocka_unit_test(test_w8a8_weights_match_numeric),
        cmocka_unit_test(test_oracle_agrees_with_layouts),
        cmocka_unit_test(test_problem_data_every_mode),
        cmocka_unit_test(test_plan_check_quant),
        cmocka_unit_test(test_plan_split_k),
        cmocka_unit_test(test_grid_too_large),
        cmocka_unit_test(test_quant_kernels_compile),
        cmocka_unit_test(test_act_kernels_apply_activation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
