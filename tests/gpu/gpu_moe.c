/*
 * GPU test of the whole fused-MoE pipeline (bf16/fp16, both activation
 * formats) against the CPU oracle: every default grouped-GEMM variant, with
 * and without the fused activation epilogue, over a matrix of M, (E, topk),
 * (K, N), activations, expert_map and router-weight placement, on fresh
 * random inputs, with the output poisoned (NaN bytes) before each run;
 * and a split-K plan run again and again on the same inputs gives the same
 * bits.
 *
 * MT_GPU_MOE_QUICK=1 mm_runs a reduced matrix. Skipped (77) without a GPU.
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
#include "tuner/kernel_set.h"

static int setup(void **state)
{
    (void)state;
    /* The unquantized kernels (families without a quant parameter come too). */
    mt_gen_filter f = {.nparams = 1, .params = {{"quant", "none"}}};
    return mm_setup(&f);
}

/* One case of the bf16/fp16 matrix. */
typedef struct moe_case {
    int64_t M, E, topk, K, N;
    mt_dtype dt;
    mt_act_format fmt;
    mt_activation act;
    int emap, on_input;
    mt_routing routing;
} moe_case;

static void run_case(const moe_case *m, uint64_t seed)
{
    qcase c = {m->M, m->E, m->topk, m->K, m->N, MT_QUANT_NONE, 0, 0, 0, m->dt, m->fmt,
               m->act, m->emap, m->on_input, m->routing};
    mm_run_case(&c, seed);
}

static void test_matrix(void **state)
{
    (void)state;
    const int quick = getenv("MT_GPU_MOE_QUICK") && atoi(getenv("MT_GPU_MOE_QUICK"));
    /* MT_GPU_MOE_SMALL=1: only the small shape at M <= 64 (every default
     * variant still mm_runs), for compute-sanitizer. */
    const int small = getenv("MT_GPU_MOE_SMALL") && atoi(getenv("MT_GPU_MOE_SMALL"));
    static const int64_t Ms[] = {1, 7, 33, 64, 222, 1024, 4096};
    static const int64_t ET[][2] = {{8, 2}, {64, 6}, {128, 8}, {256, 8}};
    int idx = 0;
    double t0 = mt_now();
    /* Every (E, topk) x M on the small shape, cycling dtype, activation,
     * expert_map and weight placement so that each kind appears often. */
    for (size_t e = 0; e < 4; e++)
        for (size_t m = 0; m < 7; m++)
            for (int fmt = 0; fmt < 2; fmt++, idx++) {
                if ((quick && idx % 4) || (small && Ms[m] > 64))
                    continue;
                moe_case c = {Ms[m], ET[e][0], ET[e][1], 128, 128,
                              idx % 2 ? MT_DTYPE_FP16 : MT_DTYPE_BF16, (mt_act_format)fmt,
                              (idx / 2) % 2 ? MT_ACT_GELU : MT_ACT_SILU, (idx / 3) % 2,
                              (idx / 5) % 2, MT_ROUTING_UNIFORM};
                run_case(&c, (uint64_t)idx);
            }
    if (small) {
        printf("matrix: %d checks, %d failed, %.1f s\n", mm_runs, mm_failures, mt_now() - t0);
        assert_int_equal(mm_failures, 0);
        return;
    }
    /* The middle shape: DeepSeek-V2-Lite / Qwen3-like experts. */
    static const int64_t Mmid[] = {1, 33, 222, 1024};
    for (size_t e = 1; e < 3; e++)
        for (size_t m = 0; m < 4; m++, idx++) {
            if (quick && m % 2)
                continue;
            int fmt = Mmid[m] <= 222 && (idx % 2);
            moe_case c = {Mmid[m], ET[e][0], ET[e][1], 2048, 768,
                          idx % 3 ? MT_DTYPE_BF16 : MT_DTYPE_FP16, (mt_act_format)fmt,
                          idx % 4 == 1 ? MT_ACT_GELU : MT_ACT_SILU, idx % 5 == 2, idx % 7 == 3,
                          MT_ROUTING_UNIFORM};
            run_case(&c, (uint64_t)idx);
        }
    /* Mixtral-8x7B's experts: large K and N, sampled tokens. */
    static const int64_t Mbig[] = {1, 64, 4096};
    for (size_t m = 0; m < 3; m++, idx++) {
        if (quick && m == 2)
            continue;
        moe_case c = {Mbig[m], 8, 2, 4096, 14336, MT_DTYPE_BF16,
                      m == 1 ? MT_FORMAT_BATCHED : MT_FORMAT_STANDARD, MT_ACT_SILU, m == 2, 0,
                      MT_ROUTING_UNIFORM};
        run_case(&c, (uint64_t)idx);
    }
    /* Uneven routing and the E extremes. */
    moe_case extra[] = {
        {222, 64, 6, 128, 128, MT_DTYPE_BF16, MT_FORMAT_STANDARD, MT_ACT_SILU, 0, 0, MT_ROUTING_SKEWED},
        {222, 64, 6, 128, 128, MT_DTYPE_FP16, MT_FORMAT_BATCHED, MT_ACT_GELU, 1, 0, MT_ROUTING_SKEWED},
        {100, 16, 16, 256, 64, MT_DTYPE_BF16, MT_FORMAT_STANDARD, MT_ACT_SILU, 0, 1, MT_ROUTING_BALANCED},
        {7, 1, 1, 64, 32, MT_DTYPE_BF16, MT_FORMAT_STANDARD, MT_ACT_GELU, 0, 0, MT_ROUTING_UNIFORM},
        {33, 512, 8, 256, 128, MT_DTYPE_BF16, MT_FORMAT_STANDARD, MT_ACT_SILU, 1, 0, MT_ROUTING_UNIFORM},
        {33, 512, 8, 256, 128, MT_DTYPE_FP16, MT_FORMAT_BATCHED, MT_ACT_SILU, 0, 1, MT_ROUTING_UNIFORM},
        {5, 8, 8, 136, 72, MT_DTYPE_BF16, MT_FORMAT_STANDARD, MT_ACT_SILU, 0, 0, MT_ROUTING_UNIFORM},
        /* topk 32: a token's slots fill the warp that tabulates them in
         * the summing GEMM2 (grouped_gemv, epilogue "sum"; its limit) */
        {5, 64, 32, 128, 128, MT_DTYPE_BF16, MT_FORMAT_STANDARD, MT_ACT_SILU, 1, 0, MT_ROUTING_UNIFORM},
    };
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++, idx++)
        run_case(&extra[i], 1000u + (uint64_t)idx);
    printf("matrix: %d checks, %d failed, %.1f s\n", mm_runs, mm_failures, mt_now() - t0);
    assert_int_equal(mm_failures, 0);
}

/* The first loaded bf16 standard-format grouped_gemm kernel with that
 * epilogue, unsplit (split 0) or split-K (split 1); NULL if none. */
static const char *bf16_gemm(const char *epilogue, int split)
{
    for (size_t i = 0; i < mm_kernels.n; i++) {
        const mt_variant *v = &mm_kernels.k[i].v;
        if (!strcmp(v->family, "grouped_gemm") && !strcmp(mt_variant_get(v, "dtype"), "bf16") &&
            !strcmp(mt_variant_get(v, "format"), "standard") &&
            !strcmp(mt_variant_get(v, "epilogue"), epilogue) &&
            (mt_variant_int(v, "SPLIT_K", 1) > 1) == split)
            return v->name;
    }
    return NULL;
}

/* A plan of the loaded kernels around gemm1 g1 (and gemm2 g2; NULL: g1's
 * store sibling), and a workspace for it. */
static void plan_with_workspace(const mt_problem *p, const char *g1, const char *g2,
                                mt_moe_plan *plan, CUdeviceptr *ws, size_t *ws_size)
{
    char msg[256];
    assert_non_null(g1);
    if (mt_plan_compose(&mm_kernels, p, g1, plan, msg, sizeof msg))
        fail_msg("%s", msg);
    if (g2) {
        const mt_kernel *k = mt_kernel_set_find(&mm_kernels, g2);
        assert_non_null(k);
        plan->step[MT_STEP_GEMM2] = *k;
        if (mt_moe_plan_check(plan, p, msg, sizeof msg))
            fail_msg("%s", msg);
    }
    *ws_size = mt_moe_workspace_size(plan, p);
    assert_int_equal(mt_cu.cuMemAlloc(ws, *ws_size), CUDA_SUCCESS);
}

/* The first loaded bf16 standard-format slot-routed grouped_gemv kernel
 * (BLOCK_M 1: no alignment step) with that epilogue; NULL if none. */
static const char *bf16_slot_gemv(const char *epilogue)
{
    for (size_t i = 0; i < mm_kernels.n; i++) {
        const mt_variant *v = &mm_kernels.k[i].v;
        if (!strcmp(v->family, "grouped_gemv") && !strcmp(mt_variant_get(v, "dtype"), "bf16") &&
            !strcmp(mt_variant_get(v, "format"), "standard") &&
            !strcmp(mt_variant_get(v, "epilogue"), epilogue) &&
            mt_variant_int(v, "BLOCK_M", 0) == 1)
            return v->name;
    }
    return NULL;
}

/* An out-of-range topk id is reported through the device-side flag: set by
 * the alignment step, or, without one, by the slot-routed GEMMs (g2 NULL:
 * g1's store sibling). */
static void check_bad_topk_id(const char *g1, const char *g2)
{
    char msg[256];
    mt_problem p;
    mt_problem_init(&p, 16, 8, 2, 128, 128);
    mt_problem_data d;
    assert_int_equal(mt_problem_data_make(&d, &p, MT_ROUTING_UNIFORM, 7, 1, msg, sizeof msg), MT_OK);
    int32_t bad = 11;
    assert_int_equal(mt_cu.cuMemcpyHtoD((CUdeviceptr)(uintptr_t)d.d.topk_ids + 5 * sizeof(int32_t),
                                        &bad, sizeof bad), CUDA_SUCCESS);
    assert_int_equal(mt_cu.cuCtxSynchronize(), CUDA_SUCCESS);   /* the DMA has landed */
    mt_moe_plan plan;
    CUdeviceptr ws;
    size_t ws_size;
    plan_with_workspace(&d.p, g1, g2, &plan, &ws, &ws_size);
    assert_int_equal(mt_moe_run(&plan, &d.p, &d.d, ws, ws_size, mm_stream, msg, sizeof msg), MT_OK);
    assert_int_equal(mt_cu.cuStreamSynchronize(mm_stream), CUDA_SUCCESS);
    assert_int_equal(mt_moe_read_error(ws, &d.p, msg, sizeof msg), MT_ERR_DEVICE_CHECK);
    printf("bad topk id reported (%s, %s): %s\n", g1, plan.step[MT_STEP_GEMM2].v.name, msg);
    assert_non_null(strstr(msg, "topk_ids[2][1]"));
    if (g2) {
        /* GEMM1 flagged it first: clear the flag and run GEMM2 alone, so
         * that the id is seen by the kernel under test. */
        assert_int_equal(mt_cu.cuMemsetD8(ws, 0, sizeof(int32_t)), CUDA_SUCCESS);
        assert_int_equal(mt_moe_run_steps(&plan, &d.p, &d.d, ws, ws_size, MT_STEP_BIT(MT_STEP_GEMM2),
                                          mm_stream, msg, sizeof msg),
                         MT_OK);
        assert_int_equal(mt_cu.cuStreamSynchronize(mm_stream), CUDA_SUCCESS);
        assert_int_equal(mt_moe_read_error(ws, &d.p, msg, sizeof msg), MT_ERR_DEVICE_CHECK);
        printf("bad topk id reported by %s alone: %s\n", g2, msg);
        assert_non_null(strstr(msg, "topk_ids[2][1]"));
    }
    mt_cu.cuMemFree(ws);
    mt_problem_data_free(&d);
}

static void test_bad_topk_id_flagged(void **state)
{
    (void)state;
    check_bad_topk_id(bf16_gemm("store", 0), NULL);
    check_bad_topk_id(bf16_slot_gemv("store"), NULL);
    check_bad_topk_id(bf16_slot_gemv("store"), bf16_slot_gemv("sum"));
}

/* A split-K plan is deterministic: the last CTA of a tile adds the K
 * slices in split order whatever order they finished in, so runs on the
 * same inputs (workspace and output poisoned in between) agree bit for bit,
 * and with the oracle. The last run skips the align step, which clears the
 * tile counters: the previous run's last CTAs must have re-armed them.
 * GEMM1 K = 2048: 8 K tiles per slice; 5 tokens x top 8 of 128 experts. */
static void test_split_k_deterministic(void **state)
{
    (void)state;
    char msg[256];
    mt_problem p;
    mt_problem_init(&p, 5, 128, 8, 2048, 768);
    mt_problem_data d;
    assert_int_equal(mt_problem_data_make(&d, &p, MT_ROUTING_UNIFORM, 21, 1, msg, sizeof msg),
                     MT_OK);
    p = d.p;
    const char *g1 = bf16_gemm(mt_activation_name(p.activation), 1);
    mt_moe_plan plan;
    CUdeviceptr ws;
    size_t ws_size;
    plan_with_workspace(&p, g1, NULL, &plan, &ws, &ws_size);
    const size_t bytes = (size_t)(p.M * p.K) * mt_dtype_size(p.dtype);
    enum { RUNS = 5 };
    unsigned char *got[RUNS];
    for (int r = 0; r < RUNS; r++) {
        got[r] = malloc(bytes);
        assert_non_null(got[r]);
        const CUdeviceptr out = (CUdeviceptr)(uintptr_t)d.d.out;
        assert_int_equal(mt_cu.cuMemsetD8Async(out, 0xFF, bytes, mm_stream), CUDA_SUCCESS);
        const int again = r == RUNS - 1;   /* on the workspace the last run left */
        if (!again)
            assert_int_equal(mt_cu.cuMemsetD8Async(ws, 0xFF, ws_size, mm_stream), CUDA_SUCCESS);
        const unsigned steps = again ? MT_STEPS_EVERY & ~MT_STEP_BIT(MT_STEP_ALIGN) : MT_STEPS_EVERY;
        assert_int_equal(mt_moe_run_steps(&plan, &p, &d.d, ws, ws_size, steps, mm_stream, msg,
                                          sizeof msg),
                         MT_OK);
        assert_int_equal(mt_cu.cuStreamSynchronize(mm_stream), CUDA_SUCCESS);
        assert_int_equal(mt_cu.cuMemcpyDtoH(got[r], out, bytes), CUDA_SUCCESS);
    }
    /* Right, not merely repeatable. */
    int64_t tokens[5] = {0, 1, 2, 3, 4}, nans = 0;
    float *ref = calloc((size_t)(p.M * p.K), sizeof(float));
    assert_int_equal(mt_oracle_fused_moe(&p, &d.h_std, tokens, p.M, ref, msg, sizeof msg), MT_OK);
    const double err = mt_rel_l2(got[0], p.dtype, ref, tokens, p.M, p.K, &nans);
    printf("split-K %s: %d runs, rel_l2 %.2e, nan %lld\n", g1, RUNS, err, (long long)nans);
    assert_true(err < 1e-2 && nans == 0);
    for (int r = 1; r < RUNS; r++)
        assert_memory_equal(got[0], got[r], bytes);
    for (int r = 0; r < RUNS; r++)
        free(got[r]);
    free(ref);
    mt_cu.cuMemFree(ws);
    mt_problem_data_free(&d);
}

int main(void)
{
    mt_test_require_gpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_topk_id_flagged),
        cmocka_unit_test(test_split_k_deterministic),
        cmocka_unit_test(test_matrix),
    };
    return cmocka_run_group_tests(tests, setup, mm_teardown);
}
