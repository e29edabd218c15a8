/*
 * GPU test of the whole fused-MoE pipeline (bf16/fp16, both activation
 * formats) against the CPU oracle: every default grouped-GEMM variant, with
 * and without the fused activation epilogue, over a matrix of M, (E, topk),
 * (K, N), activations, expert_map and router-weight placement, on fresh
 * random inputs, with the output poisoned (NaN bytes) before each run.
 *
 * MT_GPU_MOE_QUICK=1 runs a reduced matrix. Skipped (77) without a GPU.
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
#include "tuner/harness.h"

typedef struct moe_case {
    int64_t M, E, topk, K, N;
    mt_dtype dt;
    mt_act_format fmt;
    mt_activation act;
    int emap, on_input;
    mt_routing routing;
} moe_case;

static mt_gpu gpu;
static mt_gen *gen;
static mt_kernel_set kernels;
static CUstream stream;
static int failures, runs;

static int setup(void **state)
{
    (void)state;
    char msg[512];
    if (mt_gpu_open(0, &gpu, msg, sizeof msg)) {
        fprintf(stderr, "%s\n", msg);
        return -1;
    }
    mt_gen_config cfg = {0};
    if (mt_gen_open(&cfg, &gen)) {
        fprintf(stderr, "gen: %s\n", mt_gen_errmsg(gen));
        return -1;
    }
    /* The unquantized kernels (families without a quant parameter come too). */
    mt_gen_filter f = {.arch = mt_gpu_arch(&gpu), .defaults_only = 1, .nparams = 1,
                       .params = {{"quant", "none"}}};
    double t0 = mt_now();
    if (mt_kernel_set_load(gen, &f, &kernels, msg, sizeof msg)) {
        fprintf(stderr, "loading the default kernels: %s\n", msg);
        return -1;
    }
    printf("GPU %s (%s): %zu default kernels compiled and loaded in %.1f s\n", gpu.name,
           mt_gpu_arch(&gpu), kernels.n, mt_now() - t0);
    if (mt_cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING))
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (stream)
        mt_cu.cuStreamDestroy(stream);
    mt_kernel_set_free(&kernels);
    mt_gen_close(gen);
    mt_gpu_close(&gpu);
    return 0;
}

/* Rows checked against the oracle: all of them when cheap, else a sample. */
static int64_t pick_tokens(const moe_case *c, int64_t *tokens)
{
    double cost = (double)c->M * (double)c->topk * 3.0 * (double)c->K * (double)c->N;
    if (cost < 4e9) {
        for (int64_t t = 0; t < c->M; t++)
            tokens[t] = t;
        return c->M;
    }
    int64_t n = 0, want = 24;
    for (int64_t i = 0; i < want && i < c->M; i++) {
        int64_t t = i * (c->M - 1) / (want - 1 > 0 ? want - 1 : 1);
        if (n == 0 || tokens[n - 1] != t)
            tokens[n++] = t;
    }
    return n;
}

static void describe(const moe_case *c, char *buf, size_t n)
{
    snprintf(buf, n, "M=%lld E=%lld topk=%lld K=%lld N=%lld %s %s %s%s%s %s",
             (long long)c->M, (long long)c->E, (long long)c->topk, (long long)c->K,
             (long long)c->N, mt_dtype_name(c->dt), mt_act_format_name(c->fmt),
             mt_activation_name(c->act), c->emap ? " expert_map" : "",
             c->on_input ? " weight-on-input" : "", mt_routing_name(c->routing));
}

static void check(const char *what, const char *desc, const char *kernel, double err,
                  int64_t nans, double tol)
{
    int ok = err < tol && nans == 0;
    runs++;
    if (!ok)
        failures++;
    printf("%s %-6s %-70s %-58s rel_l2=%.2e nan=%lld\n", ok ? "PASS" : "FAIL", what, desc,
           kernel, err, (long long)nans);
}

static void run_case(const moe_case *c, uint64_t seed)
{
    char msg[512], desc[256];
    describe(c, desc, sizeof desc);
    mt_problem p;
    mt_problem_init(&p, c->M, c->E, c->topk, c->K, c->N);
    p.dtype = c->dt;
    p.format = c->fmt;
    p.activation = c->act;
    p.has_expert_map = c->emap;
    p.local_E = c->emap ? (c->E + 1) / 2 : c->E;
    p.apply_router_weight_on_input = c->on_input;
    mt_problem_data d;
    mt_status st = mt_problem_data_make(&d, &p, c->routing, seed, 1, msg, sizeof msg);
    if (st) {
        printf("FAIL setup %s: %s\n", desc, msg);
        failures++;
        return;
    }
    p = d.p;
    const size_t es = mt_dtype_size(p.dtype);
    const int batched = p.format == MT_FORMAT_BATCHED;
    const double tol = p.dtype == MT_DTYPE_BF16 ? 1e-2 : 5e-3;

    int64_t *tokens = malloc((size_t)p.M * sizeof *tokens);
    int64_t ntok = pick_tokens(c, tokens);
    float *ref = calloc((size_t)(p.M * p.K), sizeof(float));
    st = mt_oracle_fused_moe(&p, &d.h_std, tokens, ntok, ref, msg, sizeof msg);
    assert_int_equal(st, MT_OK);

    int64_t brows = batched ? p.local_E * p.max_tokens : 0;
    float *bref = batched ? calloc((size_t)(brows * p.K), sizeof(float)) : NULL;
    int64_t *live = batched ? malloc((size_t)brows * sizeof *live) : NULL;
    int64_t nlive = 0;
    if (batched) {
        assert_int_equal(mt_oracle_batched_experts(&p, &d.h, bref, msg, sizeof msg), MT_OK);
        for (int64_t r = 0; r < brows; r++)
            if (r % p.max_tokens < d.h_counts[r / p.max_tokens])
                live[nlive++] = r;
    }
    size_t out_bytes = (size_t)((batched ? brows : p.M) * p.K) * es;
    void *got = malloc(out_bytes + 16);
    void *got_comb = malloc((size_t)(p.M * p.K) * es + 16);
    CUdeviceptr ws = 0, comb = 0;
    size_t ws_size = 0;
    if (batched)
        assert_int_equal(mt_cu.cuMemAlloc(&comb, (size_t)(p.M * p.K) * es + 16), CUDA_SUCCESS);

    for (size_t i = 0; i < kernels.n; i++) {
        const mt_variant *v = &kernels.k[i].v;
        if (strcmp(v->family, "grouped_gemm") || strcmp(mt_variant_get(v, "quant"), "none") ||
            strcmp(mt_variant_get(v, "dtype"), mt_dtype_name(p.dtype)) ||
            strcmp(mt_variant_get(v, "format"), mt_act_format_name(p.format)))
            continue;
        const char *epi = mt_variant_get(v, "epilogue");
        if (strcmp(epi, "store") && strcmp(epi, mt_activation_name(p.activation)))
            continue;
        mt_moe_plan plan;
        st = mt_plan_compose(&kernels, &p, v->name, &plan, msg, sizeof msg);
        if (st) {
            printf("FAIL plan %s %s: %s\n", desc, v->name, msg);
            failures++;
            continue;
        }
        size_t need = mt_moe_workspace_size(&plan, &p);
        if (need > ws_size) {
            if (ws)
                mt_cu.cuMemFree(ws);
            assert_int_equal(mt_cu.cuMemAlloc(&ws, need), CUDA_SUCCESS);
            ws_size = need;
        }
        /* Poison: 0xFF bytes are NaN in bf16 and fp16, so an unwritten element fails. */
        assert_int_equal(mt_cu.cuMemsetD8((CUdeviceptr)(uintptr_t)d.d.out, 0xFF, out_bytes), CUDA_SUCCESS);
        assert_int_equal(mt_cu.cuMemsetD8(ws, 0xFF, ws_size), CUDA_SUCCESS);
        st = mt_moe_run(&plan, &p, &d.d, ws, ws_size, stream, msg, sizeof msg);
        if (st == MT_OK && mt_cu.cuStreamSynchronize(stream) != CUDA_SUCCESS) {
            st = MT_ERR_KERNEL_FAULT;
            snprintf(msg, sizeof msg, "the kernels faulted");
        }
        if (st == MT_OK && !batched)
            st = mt_moe_read_error(ws, &p, msg, sizeof msg);
        if (st) {
            printf("FAIL run %s %s: %s: %s\n", desc, v->name, mt_status_str(st), msg);
            failures++;
            assert_true(st != MT_ERR_KERNEL_FAULT);  /* the context is gone: stop here */
            continue;
        }
        assert_int_equal(mt_cu.cuMemcpyDtoH(got, (CUdeviceptr)(uintptr_t)d.d.out, out_bytes), CUDA_SUCCESS);
        int64_t nans = 0;
        double err;
        if (batched) {
            err = mt_rel_l2(got, p.dtype, bref, live, nlive, p.K, &nans);
            check("experts", desc, v->name, err, nans, tol);
            assert_int_equal(mt_cu.cuMemsetD8(comb, 0xFF, (size_t)(p.M * p.K) * es), CUDA_SUCCESS);
            st = mt_moe_combine(&plan, &p, (CUdeviceptr)(uintptr_t)d.d.out, d.d_slot_row,
                                p.apply_router_weight_on_input ? 0 : (CUdeviceptr)(uintptr_t)d.d.topk_weights,
                                comb, stream, msg, sizeof msg);
            assert_int_equal(st, MT_OK);
            assert_int_equal(mt_cu.cuStreamSynchronize(stream), CUDA_SUCCESS);
            assert_int_equal(mt_cu.cuMemcpyDtoH(got_comb, comb, (size_t)(p.M * p.K) * es), CUDA_SUCCESS);
            err = mt_rel_l2(got_comb, p.dtype, ref, tokens, ntok, p.K, &nans);
            check("final", desc, v->name, err, nans, tol);
        } else {
            err = mt_rel_l2(got, p.dtype, ref, tokens, ntok, p.K, &nans);
            check("fused", desc, v->name, err, nans, tol);
        }
    }
    if (ws)
        mt_cu.cuMemFree(ws);
    if (comb)
        mt_cu.cuMemFree(comb);
    free(got);
    free(got_comb);
    free(tokens);
    free(ref);
    free(bref);
    free(live);
    mt_problem_data_free(&d);
}

static void test_matrix(void **state)
{
    (void)state;
    const int quick = getenv("MT_GPU_MOE_QUICK") && atoi(getenv("MT_GPU_MOE_QUICK"));
    /* MT_GPU_MOE_SMALL=1: only the small shape at M <= 64 (every default
     * variant still runs), for compute-sanitizer. */
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
        printf("matrix: %d checks, %d failed, %.1f s\n", runs, failures, mt_now() - t0);
        assert_int_equal(failures, 0);
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
    };
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++, idx++)
        run_case(&extra[i], 1000u + (uint64_t)idx);
    printf("matrix: %d checks, %d failed, %.1f s\n", runs, failures, mt_now() - t0);
    assert_int_equal(failures, 0);
}

/* An out-of-range topk id is reported through the device-side flag. */
static void test_bad_topk_id_flagged(void **state)
{
    (void)state;
    char msg[256];
    mt_problem p;
    mt_problem_init(&p, 16, 8, 2, 128, 128);
    mt_problem_data d;
    assert_int_equal(mt_problem_data_make(&d, &p, MT_ROUTING_UNIFORM, 7, 1, msg, sizeof msg), MT_OK);
    int32_t bad = 11;
    assert_int_equal(mt_cu.cuMemcpyHtoD((CUdeviceptr)(uintptr_t)d.d.topk_ids + 5 * sizeof(int32_t),
                                        &bad, sizeof bad), CUDA_SUCCESS);
    const char *g1 = NULL;
    for (size_t i = 0; i < kernels.n && !g1; i++)
        if (!strcmp(kernels.k[i].v.family, "grouped_gemm") &&
            !strcmp(mt_variant_get(&kernels.k[i].v, "dtype"), "bf16") &&
            !strcmp(mt_variant_get(&kernels.k[i].v, "format"), "standard") &&
            !strcmp(mt_variant_get(&kernels.k[i].v, "epilogue"), "store"))
            g1 = kernels.k[i].v.name;
    assert_non_null(g1);
    mt_moe_plan plan;
    assert_int_equal(mt_plan_compose(&kernels, &d.p, g1, &plan, msg, sizeof msg), MT_OK);
    size_t ws_size = mt_moe_workspace_size(&plan, &d.p);
    CUdeviceptr ws;
    assert_int_equal(mt_cu.cuMemAlloc(&ws, ws_size), CUDA_SUCCESS);
    assert_int_equal(mt_moe_run(&plan, &d.p, &d.d, ws, ws_size, stream, msg, sizeof msg), MT_OK);
    assert_int_equal(mt_cu.cuStreamSynchronize(stream), CUDA_SUCCESS);
    assert_int_equal(mt_moe_read_error(ws, &d.p, msg, sizeof msg), MT_ERR_DEVICE_CHECK);
    printf("bad topk id reported: %s\n", msg);
    assert_non_null(strstr(msg, "topk_ids[2][1]"));
    mt_cu.cuMemFree(ws);
    mt_problem_data_free(&d);
}

int main(void)
{
    mt_test_require_gpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_topk_id_flagged),
        cmocka_unit_test(test_matrix),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
