/*
 * GPU test of the quantized fused-MoE pipelines (fp8/int8 w8a8 per tensor,
 * per token, block-wise; w8a16/w4a16 weight-only) against the CPU oracle,
 * which applies the same quantization: every default grouped-GEMM variant
 * of the mode, with and without the fused activation epilogue, over a
 * sampled matrix of M, (E, topk), (K, N), both activation formats, dtypes,
 * activations, expert_map, router-weight placement, static scales, group
 * sizes and zero points, on fresh random inputs with the output and the
 * workspace poisoned (NaN bytes) before each run. Tolerances (issue 5):
 * relative L2 < 3e-2 for w8a8, < 1e-2 for weight-only; no NaN.
 *
 * MT_GPU_QUANT_QUICK=1 mm_runs a reduced matrix; MT_GPU_QUANT_SMALL=1 only
 * small shapes that still reach every default kernel (for compute-sanitizer);
 * MT_GPU_QUANT_MODES=fp8-block,int8-block (a comma list of mode names) only
 * those modes, whose kernels alone are compiled. Skipped (77) without a GPU.
 */
#define _POSIX_C_SOURCE 200809L
#include "tests/support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cuda_driver.h"
#include "common/util.h"
#include "moetune/oracle.h"
#include "tests/gpu/moe_matrix.h"
#include "tuner/harness.h"

/* The modes MT_GPU_QUANT_MODES names (bit q for mode q), all when it is
 * unset: parsed once, by setup. */
static unsigned selected_modes;

/* MT_GPU_QUANT_MODES into selected_modes; -1 (and why) for a name that is
 * not a quant mode of this test. */
static int parse_selected_modes(void)
{
    const char *list = getenv("MT_GPU_QUANT_MODES");
    selected_modes = 0;
    if (!list || !*list) {
        selected_modes = ~0u;
        return 0;
    }
    for (const char *s = list; *s; s += strcspn(s, ","), s += *s == ',') {
        char name[32];
        const size_t n = strcspn(s, ",");
        mt_quant_mode q;
        snprintf(name, sizeof name, "%.*s", (int)n, s);
        if (n >= sizeof name || mt_quant_mode_parse(name, &q) != MT_OK || q == MT_QUANT_NONE) {
            fprintf(stderr, "MT_GPU_QUANT_MODES: '%.*s' is not a quant mode (fp8-block, "
                            "int8-token, w4a16, ...)\n", (int)n, s);
            return -1;
        }
        selected_modes |= 1u << q;
    }
    return 0;
}

static int mode_selected(mt_quant_mode q) { return (selected_modes >> q) & 1u; }

static int setup(void **state)
{
    (void)state;
    if (parse_selected_modes())
        return -1;
    /* Every family's defaults, grouped_gemm restricted to the quant modes
     * selected. */
    mt_gen_filter f = {0};
    for (int q = 1; q < MT_QUANT_COUNT_; q++) {
        if (!mode_selected((mt_quant_mode)q))
            continue;
        f.params[f.nparams].name = "quant";
        f.params[f.nparams++].value = mt_quant_mode_name((mt_quant_mode)q);
    }
    return mm_setup(&f);
}

static int fp8_mode(mt_quant_mode q) { return mt_quant_act_dtype(q) == MT_DTYPE_FP8_E4M3; }

static int env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && atoi(v);
}

/* Whether quant mode qm runs here: selected (MT_GPU_QUANT_MODES), and on
 * this GPU (fp8 needs sm_89+); says why not. */
static int mode_runs_here(mt_quant_mode qm, int sm)
{
    if (!mode_selected(qm))
        return 0;
    if (fp8_mode(qm) && sm > 0 && sm < 89) {
        printf("SKIP %s: no fp8 tensor cores on %s\n", mt_quant_mode_name(qm), mt_gpu_arch(&mm_gpu));
        return 0;
    }
    return 1;
}

/* Weight-only group size for case idx: 32, 64 or 128 in turn, halved until
 * it divides K and N (w2 is grouped along N); 0 for other modes. */
static int group_for(int wonly, int idx, int64_t K, int64_t N)
{
    static const int groups[] = {32, 64, 128};
    int group = wonly ? groups[idx % 3] : 0;
    while (group && (K % group || N % group))
        group /= 2;
    return group;
}

/* The matrix's summary line and verdict. */
static void matrix_done(double t0, const char *tag)
{
    printf("matrix: %d checks, %d failed, %.1f s%s\n", mm_runs, mm_failures, mt_now() - t0, tag);
    assert_true(mm_runs > 0);
    assert_int_equal(mm_failures, 0);
}

/* MT_GPU_QUANT_SMALL=1: per quant mode, the 8 combinations of dtype x format
 * x activation, because mm_run_case runs the store and the activation
 * epilogue of every default tile of the case's (dtype, quant, format): so
 * every default grouped_gemm variant runs, and with the unfused and fused
 * GEMM1 every act_quant variant (act none/silu/gelu, both dtypes) of every
 * w8a8 mode. Small shapes (M <= 64, K and N <= 320, partial 128-blocks
 * included) keep compute-sanitizer's runs short. Static per-tensor scales,
 * zero points, group sizes, expert_map and weight placement vary along. */
static void small_matrix(int sm)
{
    static const struct { int64_t M, E, topk, K, N; } shapes[] = {
        {33, 8, 2, 256, 128}, {64, 16, 4, 320, 192}, {7, 1, 1, 128, 64}, {1, 8, 2, 256, 128},
    };
    for (int q = 1; q < MT_QUANT_COUNT_; q++) {
        const mt_quant_mode qm = (mt_quant_mode)q;
        if (!mode_runs_here(qm, sm))
            continue;
        const int wonly = mt_quant_is_weight_only(qm);
        const int tensor = mt_quant_granularity(qm) == MT_GRAN_TENSOR;
        /* The case number (seed, variations) by the mode's place, so that a
         * run of some modes has the cases of the whole matrix. */
        int idx = (q - 1) * 8;
        for (int combo = 0; combo < 8; combo++, idx++) {
            const size_t s = (size_t)(idx % 4);
            /* on for half the cases of each dtype and each format */
            const int alt = (combo ^ (combo >> 1)) & 1;
            const int group = group_for(wonly, idx, shapes[s].K, shapes[s].N);
            qcase c = {shapes[s].M, shapes[s].E, shapes[s].topk, shapes[s].K, shapes[s].N, qm,
                       group, wonly && alt, tensor && alt,
                       combo & 1 ? MT_DTYPE_FP16 : MT_DTYPE_BF16,
                       combo & 2 ? MT_FORMAT_BATCHED : MT_FORMAT_STANDARD,
                       combo & 4 ? MT_ACT_GELU : MT_ACT_SILU, idx % 3 == 1, idx % 5 == 2,
                       MT_ROUTING_UNIFORM};
            mm_run_case(&c, 900u + (uint64_t)idx);
        }
    }
}

static void test_matrix(void **state)
{
    (void)state;
    const int quick = env_flag("MT_GPU_QUANT_QUICK");
    int sm = 0;
    sscanf(mt_gpu_arch(&mm_gpu), "sm_%d", &sm);
    double t0 = mt_now();
    if (env_flag("MT_GPU_QUANT_SMALL")) {
        small_matrix(sm);
        matrix_done(t0, " (small)");
        return;
    }
    /* Shapes: small, partial 128-blocks along K and N (K=320, N=192), a
     * Qwen3-30B-A3B-like expert (K=2048, N=768) at decode and prefill, the
     * bf16 matrix's E=256 pair and its largest M. */
    static const struct { int64_t M, E, topk, K, N; } shapes[] = {
        {33, 8, 2, 256, 128},  {222, 64, 6, 512, 256}, {64, 16, 4, 320, 192},
        {1, 8, 2, 2048, 768},  {256, 128, 8, 2048, 768}, {7, 1, 1, 128, 64},
        {1024, 256, 8, 1024, 512}, {4096, 128, 8, 512, 256},
    };
    const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    for (int q = 1; q < MT_QUANT_COUNT_; q++) {
        const mt_quant_mode qm = (mt_quant_mode)q;
        if (!mode_runs_here(qm, sm))
            continue;
        const int wonly = mt_quant_is_weight_only(qm);
        const int tensor = mt_quant_granularity(qm) == MT_GRAN_TENSOR;
        int idx = (q - 1) * nshapes;   /* as in small_matrix */
        for (int s = 0; s < nshapes; s++, idx++) {
            if (quick && s % 2)
                continue;
            const int group = group_for(wonly, idx, shapes[s].K, shapes[s].N);
            qcase c = {shapes[s].M, shapes[s].E, shapes[s].topk, shapes[s].K, shapes[s].N, qm,
                       group, wonly && (idx / 2) % 2, tensor && s == 2,
                       idx % 3 == 1 ? MT_DTYPE_FP16 : MT_DTYPE_BF16,
                       (s == 1 || s == 5 || s == 6) ? MT_FORMAT_BATCHED : MT_FORMAT_STANDARD,
                       idx % 4 == 3 ? MT_ACT_GELU : MT_ACT_SILU, s == 1 || idx % 5 == 2,
                       s == 2 || s == 5, MT_ROUTING_UNIFORM};
            mm_run_case(&c, 500u + (uint64_t)idx);
        }
    }
    /* Mixtral-8x7B's experts (K=4096, N=14336), sampled tokens: one mode of
     * each family, both formats. MT_GPU_QUANT_BIG=0 leaves them out. */
    const char *big = getenv("MT_GPU_QUANT_BIG");
    if (!big || atoi(big)) {
        static const mt_quant_mode bigq[] = {MT_QUANT_FP8_BLOCK, MT_QUANT_INT8_PER_TOKEN,
                                             MT_QUANT_W4A16};
        int idx = (MT_QUANT_COUNT_ - 1) * nshapes;
        for (size_t i = 0; i < sizeof bigq / sizeof bigq[0]; i++, idx++) {
            if (!mode_runs_here(bigq[i], sm))
                continue;
            const int wonly = mt_quant_is_weight_only(bigq[i]);
            qcase c = {64, 8, 2, 4096, 14336, bigq[i], wonly ? 128 : 0, 0, 0, MT_DTYPE_BF16,
                       i == 1 ? MT_FORMAT_BATCHED : MT_FORMAT_STANDARD, MT_ACT_SILU, 0, 0,
                       MT_ROUTING_UNIFORM};
            mm_run_case(&c, 700u + (uint64_t)idx);
        }
    }
    matrix_done(t0, "");
}

/* fp8 is refused with MT_ERR_UNSUPPORTED, not run, on a GPU without fp8
 * tensor cores; on sm_89+ the same check accepts it. */
static void test_fp8_refusal(void **state)
{
    (void)state;
    char msg[256];
    mt_problem p;
    mt_problem_init(&p, 16, 8, 2, 128, 128);
    p.quant.mode = MT_QUANT_FP8_PER_TOKEN;
    int sm = 0;
    sscanf(mt_gpu_arch(&mm_gpu), "sm_%d", &sm);
    mt_status st = mt_moe_quant_supported(&p, mt_gpu_arch(&mm_gpu), msg, sizeof msg);
    printf("fp8 on %s: %s %s\n", mt_gpu_arch(&mm_gpu), mt_status_str(st), st ? msg : "");
    assert_int_equal(st, sm >= 89 ? MT_OK : MT_ERR_UNSUPPORTED);
    assert_int_equal(mt_moe_quant_supported(&p, "sm_80", msg, sizeof msg), MT_ERR_UNSUPPORTED);
}

int main(void)
{
    mt_test_require_gpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp8_refusal),
        cmocka_unit_test(test_matrix),
    };
    return cmocka_run_group_tests(tests, setup, mm_teardown);
}
