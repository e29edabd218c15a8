/*
 * The shared GPU test matrix (see moe_matrix.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "tests/gpu/moe_matrix.h"
#include "tests/support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "moetune/oracle.h"
#include "tuner/kernel_set.h"
#include "tuner/select.h"


mt_gpu mm_gpu;
static mt_gen *gen;
mt_kernel_set mm_kernels;
CUstream mm_stream;
int mm_failures, mm_runs;

/* Whether each loaded tile with its registers capped (grouped_gemv
 * SM_WARPS) gets the CTAs an SM it asks __launch_bounds__ for, as the
 * driver sees its registers and shared memory (the template's valid()
 * judges shared memory by a lower bound of its size): a cap that cannot
 * be reached only spills. One check each, counted with the matrix's and
 * printed either way (the log shows each cap's CTAs an SM). */
static void check_caps_reachable(void)
{
    for (size_t i = 0; i < mm_kernels.n; i++) {
        const mt_kernel *k = &mm_kernels.k[i];
        const int64_t cap = mt_variant_int(&k->v, "SM_WARPS", 0), warps = mt_variant_int(&k->v, "WARPS", 0);
        if (cap <= 0 || warps <= 0)
            continue;
        int per_sm = 0;
        const CUresult r =
            mt_cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k->fn, k->v.threads, (size_t)k->v.smem_bytes);
        mm_runs++;
        const int ok = r == CUDA_SUCCESS && per_sm >= cap / warps;
        mm_failures += !ok;
        printf("%s cap    %s: %d CTAs an SM (CUresult %d), the cap asks for %lld\n", ok ? "PASS" : "FAIL",
               k->v.name, per_sm, (int)r, (long long)(cap / warps));
    }
}

int mm_setup(const mt_gen_filter *filter)
{
    char msg[512];
    if (mt_gpu_open(0, &mm_gpu, msg, sizeof msg)) {
        fprintf(stderr, "%s\n", msg);
        return -1;
    }
    mt_gen_config cfg = {0};
    if (mt_gen_open(&cfg, &gen)) {
        fprintf(stderr, "gen: %s\n", mt_gen_errmsg(gen));
        return -1;
    }
    mt_gen_filter f = *filter;
    f.arch = mt_gpu_arch(&mm_gpu);
    f.defaults_only = 1;
    double t0 = mt_now();
    if (mt_kernel_set_load(gen, &f, &mm_kernels, msg, sizeof msg)) {
        fprintf(stderr, "loading the default mm_kernels: %s\n", msg);
        return -1;
    }
    printf("GPU %s (%s): %zu default mm_kernels compiled and loaded in %.1f s\n", mm_gpu.name,
           mt_gpu_arch(&mm_gpu), mm_kernels.n, mt_now() - t0);
    check_caps_reachable();
    if (mt_cu.cuStreamCreate(&mm_stream, CU_STREAM_NON_BLOCKING))
        return -1;
    return 0;
}

int mm_teardown(void **state)
{
    (void)state;
    if (mm_stream)
        mt_cu.cuStreamDestroy(mm_stream);
    mt_kernel_set_free(&mm_kernels);
    mt_gen_close(gen);
    mt_gpu_close(&mm_gpu);
    return 0;
}

/* Rows checked against the oracle: all of them when cheap, else a sample. */
static int64_t pick_tokens(const qcase *c, int64_t *tokens)
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

static void describe(const qcase *c, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s g=%d%s %s M=%lld E=%lld topk=%lld K=%lld N=%lld %s %s %s%s%s",
             mt_quant_mode_name(c->q), c->stat ? "(static)" : "", c->group, c->zp ? " zp" : "",
             mt_routing_name(c->routing), (long long)c->M, (long long)c->E, (long long)c->topk, (long long)c->K,
             (long long)c->N, mt_dtype_name(c->dt), mt_act_format_name(c->fmt),
             mt_activation_name(c->act), c->emap ? " expert_map" : "",
             c->on_input ? " weight-on-input" : "");
}

static void check(const char *what, const char *desc, const char *kernel, double err,
                  int64_t nans, double tol)
{
    int ok = err < tol && nans == 0;
    mm_runs++;
    if (!ok)
        mm_failures++;
    printf("%s %-6s %-92s %-64s rel_l2=%.2e nan=%lld\n", ok ? "PASS" : "FAIL", what, desc,
           kernel, err, (long long)nans);
}

/* One run of plan on d's inputs, the output and the workspace (grown to
 * the plan's size) poisoned first: 0xFF bytes are NaN in bf16, fp16, fp32
 * scales and e4m3. The output, out_bytes of it, lands in got. A status and
 * msg where the run failed, or the kernels faulted or flagged bad input. */
static mt_status run_plan(const mt_moe_plan *plan, const mt_problem *p, const mt_problem_data *d,
                          CUdeviceptr *ws, size_t *ws_size, size_t out_bytes, void *got,
                          char *msg, size_t msg_size)
{
    size_t need = mt_moe_workspace_size(plan, p);
    if (need > *ws_size) {
        if (*ws)
            mt_cu.cuMemFree(*ws);
        assert_int_equal(mt_cu.cuMemAlloc(ws, need), CUDA_SUCCESS);
        *ws_size = need;
    }
    assert_int_equal(mt_cu.cuMemsetD8Async((CUdeviceptr)(uintptr_t)d->d.out, 0xFF, out_bytes, mm_stream), CUDA_SUCCESS);
    assert_int_equal(mt_cu.cuMemsetD8Async(*ws, 0xFF, *ws_size, mm_stream), CUDA_SUCCESS);
    /* MT_GPU_PRINT_PTRS=1: where each tensor of the run lives, to place
     * an address that compute-sanitizer reports. */
    if (getenv("MT_GPU_PRINT_PTRS"))
        printf("PTRS %s + %s: hidden %p w1 %p w2 %p out %p topk_ids %p topk_weights %p "
               "expert_map %p expert_num_tokens %p w1_scale %p w2_scale %p a1_scale %p "
               "workspace 0x%llx (%zu bytes)\n",
               plan->step[MT_STEP_GEMM1].v.name, plan->step[MT_STEP_GEMM2].v.name, d->d.hidden,
               d->d.w1, d->d.w2, d->d.out, (const void *)d->d.topk_ids, (const void *)d->d.topk_weights,
               (const void *)d->d.expert_map, (const void *)d->d.expert_num_tokens,
               (const void *)d->d.w1_scale, (const void *)d->d.w2_scale,
               (const void *)d->d.a1_scale, (unsigned long long)*ws, *ws_size);
    mt_status st = mt_moe_run(plan, p, &d->d, *ws, *ws_size, mm_stream, msg, msg_size);
    if (st == MT_OK && mt_cu.cuStreamSynchronize(mm_stream) != CUDA_SUCCESS) {
        st = MT_ERR_KERNEL_FAULT;
        snprintf(msg, msg_size, "the mm_kernels faulted");
    }
    if (st == MT_OK && p->format == MT_FORMAT_STANDARD)
        st = mt_moe_read_error(*ws, p, msg, msg_size);
    if (st == MT_OK)
        assert_int_equal(mt_cu.cuMemcpyDtoH(got, (CUdeviceptr)(uintptr_t)d->d.out, out_bytes), CUDA_SUCCESS);
    return st;
}

/* Outputs of two pipelines that must agree byte for byte (one is the
 * other with a step moved into a kernel that computes it the same way):
 * name's output got, twin's ref. */
static void compare_twins(const mt_problem *p, size_t out_bytes, const void *got, const void *ref,
                          const char *desc, const char *name, const char *twin)
{
    const size_t es = mt_dtype_size(p->dtype);
    int64_t differ = 0;
    for (size_t i = 0; i < out_bytes; i += es)
        differ += memcmp((const char *)got + i, (const char *)ref + i, es) != 0;
    if (differ)
        mm_failures++;
    printf("%s twin   %-92s %-64s %lld of %lld values differ from %s\n", differ ? "FAIL" : "PASS",
           desc, name, (long long)differ, (long long)(out_bytes / es), twin);
}

/* A plan whose kernels count CTAs in (a GEMM1 quantizing its output,
 * OQUANT=last, or running GEMM2 in its launch, CHAIN; a GEMM2 whose last
 * CTA sums, lastsum) must leave its
 * counters at 0: run it again on the workspace the last run left, without
 * the memset that clears them before a run (no ALIGN step bit, as the
 * tuner's step timings run), and its output must be the same bytes. One
 * "twin" check. */
static void check_rearmed(const mt_moe_plan *plan, const mt_problem *p, const mt_problem_data *d,
                          CUdeviceptr ws, size_t ws_size, size_t out_bytes, const void *got,
                          const char *desc, const char *name)
{
    char msg[512];
    void *again = malloc(out_bytes);
    assert_int_equal(mt_cu.cuMemsetD8Async((CUdeviceptr)(uintptr_t)d->d.out, 0xFF, out_bytes, mm_stream), CUDA_SUCCESS);
    mt_status st = mt_moe_run_steps(plan, p, &d->d, ws, ws_size, MT_STEPS_EVERY & ~MT_STEP_BIT(MT_STEP_ALIGN),
                                    mm_stream, msg, sizeof msg);
    if (st == MT_OK && mt_cu.cuStreamSynchronize(mm_stream) != CUDA_SUCCESS) {
        st = MT_ERR_KERNEL_FAULT;
        snprintf(msg, sizeof msg, "the mm_kernels faulted");
    }
    mm_runs++;
    if (st) {
        mm_failures++;
        printf("FAIL twin   %s %s: run again: %s: %s\n", desc, name, mt_status_str(st), msg);
        free(again);
        assert_true(st != MT_ERR_KERNEL_FAULT);  /* the context is gone: stop here */
        return;
    }
    assert_int_equal(mt_cu.cuMemcpyDtoH(again, (CUdeviceptr)(uintptr_t)d->d.out, out_bytes), CUDA_SUCCESS);
    compare_twins(p, out_bytes, again, got, desc, name, "itself, run again on its counters");
    free(again);
}

/* The GEMM1 whose pipeline is check_step_twin's reference for GEMM1 tile
 * cta (NULL: not loaded): the same tile in a launch of its own (CHAIN=0)
 * where cta runs GEMM2 in its launch (for a tile with its registers capped,
 * SM_WARPS, the uncapped tile's where the capped one is not loaded: the
 * cap changes no result), else its twin uncapped (SM_WARPS=0) and
 * quantizing neither its A rows nor its output (AQUANT=step, OQUANT=step). */
static const mt_kernel *step_twin_of(const mt_variant *cta)
{
    if (mt_variant_chain(cta) > 0)
        return mt_kernel_set_find_unchained(&mm_kernels, cta);
    /* Each step from the twin before it. */
    const struct {
        int applies;
        const char *param, *value;
    } steps[] = {{mt_variant_int(cta, "SM_WARPS", 0) > 0, "SM_WARPS", "0"},
                 {mt_variant_quantizes_a(cta), "AQUANT", "step"},
                 {mt_variant_quantizes_out(cta), "OQUANT", "step"}};
    const mt_kernel *twin = NULL;
    const mt_variant *from = cta;   /* the twin so far: NULL once one is missing */
    for (size_t i = 0; i < sizeof steps / sizeof steps[0] && from; i++)
        if (steps[i].applies) {
            twin = mt_kernel_set_find_sibling(&mm_kernels, from, steps[i].param, steps[i].value);
            from = twin ? &twin->v : NULL;
        }
    return twin;
}

/* Whether plan's GEMM1 has a twin to check against (check_step_twin). */
static int has_step_twin(const mt_moe_plan *plan)
{
    const mt_variant *g1 = &plan->step[MT_STEP_GEMM1].v;
    return (mt_variant_quantizes_a(g1) || mt_variant_quantizes_out(g1) || mt_variant_chain(g1) > 0 ||
            mt_variant_int(g1, "SM_WARPS", 0) > 0) &&
           !mt_variant_sums_by_atomics(&plan->step[MT_STEP_GEMM2].v);
}

/* A GEMM1 that quantizes its own A rows (AQUANT=cta) runs the quant step's
 * code on the same rows, and one that quantizes its activated output for
 * GEMM2 (OQUANT=last) the act step's on the same columns, and their
 * products are the step-fed tile's: so plan's output (got) must equal, byte
 * for byte, that of the same pipeline with its twin that does neither
 * (AQUANT=step, OQUANT=step) as GEMM1 between those steps. Likewise a
 * GEMM1 that runs GEMM2 in its launch (CHAIN) runs both GEMMs' own code:
 * its output must equal that of the same two tiles launched one after the
 * other; and a tile with its registers capped (SM_WARPS), of the tile
 * uncapped, with GEMM2 uncapped too where it is capped (the uncapped one
 * loaded). One "twin" check. */
static void check_step_twin(const mt_moe_plan *plan, const mt_problem *p, const mt_problem_data *d,
                            CUdeviceptr *ws, size_t *ws_size, size_t out_bytes, const void *got,
                            const char *desc)
{
    char msg[512];
    const mt_variant *cta = &plan->step[MT_STEP_GEMM1].v;
    const mt_kernel *twin = step_twin_of(cta);
    mt_moe_plan step;
    mt_status st = MT_ERR_NOT_FOUND;
    if (!twin)
        snprintf(msg, sizeof msg, "no %s twin loaded",
                 mt_variant_chain(cta) > 0 ? "CHAIN=0" : "SM_WARPS=0 AQUANT=step OQUANT=step");
    else if (!(st = mt_plan_compose(&mm_kernels, p, twin->v.name, &step, msg, sizeof msg))) {
        step.step[MT_STEP_GEMM2] = plan->step[MT_STEP_GEMM2];
        const mt_variant *g2 = &plan->step[MT_STEP_GEMM2].v;
        const mt_kernel *uncapped2 = mt_variant_chain(cta) > 0 || mt_variant_int(g2, "SM_WARPS", 0) == 0
                                         ? NULL
                                         : mt_kernel_set_find_sibling(&mm_kernels, g2, "SM_WARPS", "0");
        if (uncapped2)
            step.step[MT_STEP_GEMM2] = *uncapped2;
        st = mt_moe_plan_check(&step, p, msg, sizeof msg);
    }
    void *ref = malloc(out_bytes);
    if (!st)
        st = run_plan(&step, p, d, ws, ws_size, out_bytes, ref, msg, sizeof msg);
    mm_runs++;
    if (st) {
        mm_failures++;
        printf("FAIL twin   %s %s: %s: %s\n", desc, cta->name, mt_status_str(st), msg);
        free(ref);
        assert_true(st != MT_ERR_KERNEL_FAULT);  /* the context is gone: stop here */
        return;
    }
    compare_twins(p, out_bytes, got, ref, desc, cta->name, twin->v.name);
    free(ref);
}

void mm_run_case(const qcase *c, uint64_t seed)
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
    p.quant.mode = c->q;
    p.quant.group_size = c->group;
    p.quant.has_zero_point = c->zp;
    p.quant.static_act_scale = c->stat;
    mt_problem_data d;
    mt_status st = mt_problem_data_make(&d, &p, c->routing, seed, 1, msg, sizeof msg);
    if (st) {
        printf("FAIL setup %s: %s\n", desc, msg);
        mm_failures++;
        return;
    }
    p = d.p;
    const size_t es = mt_dtype_size(p.dtype);
    const int batched = p.format == MT_FORMAT_BATCHED;
    /* Issue tolerances: bf16 1e-2, fp16 5e-3; w8a8 3e-2; weight-only 1e-2. */
    const double tol = p.quant.mode == MT_QUANT_NONE
                           ? (p.dtype == MT_DTYPE_BF16 ? 1e-2 : 5e-3)
                           : mt_quant_is_weight_only(p.quant.mode) ? 1e-2 : 3e-2;

    int64_t *tokens = malloc((size_t)p.M * sizeof *tokens);
    int64_t ntok = pick_tokens(c, tokens);
    float *ref = calloc((size_t)(p.M * p.K), sizeof(float));
    st = mt_oracle_fused_moe(&p, &d.h_std, tokens, ntok, ref, msg, sizeof msg);
    if (st)
        fail_msg("oracle %s: %s", desc, msg);

    int64_t brows = batched ? p.local_E * p.max_tokens : 0;
    float *bref = batched ? calloc((size_t)(brows * p.K), sizeof(float)) : NULL;
    int64_t *live = batched ? malloc((size_t)brows * sizeof *live) : NULL;
    int64_t nlive = 0;
    if (batched) {
        if (mt_oracle_batched_experts(&p, &d.h, bref, msg, sizeof msg))
            fail_msg("oracle %s: %s", desc, msg);
        for (int64_t r = 0; r < brows; r++)
            if (r % p.max_tokens < d.h_counts[r / p.max_tokens])
                live[nlive++] = r;
    }
    size_t out_bytes = (size_t)((batched ? brows : p.M) * p.K) * es;
    void *got = malloc(out_bytes + 16);
    /* The outputs of the step-fed GEMM2 runs (passes 0 to 2), for their
     * twins: pass 0's for the lastsum run, each for its self-activating
     * twin's. */
    void *stored[3] = {malloc(out_bytes + 16), malloc(out_bytes + 16), malloc(out_bytes + 16)};
    void *got_comb = malloc((size_t)(p.M * p.K) * es + 16);
    CUdeviceptr ws = 0, comb = 0;
    size_t ws_size = 0;
    if (batched)
        assert_int_equal(mt_cu.cuMemAlloc(&comb, (size_t)(p.M * p.K) * es + 16), CUDA_SUCCESS);

    /* MT_GPU_GEMM_ONLY=TEXT: only the grouped-GEMM variants whose name
     * contains TEXT (a sanitizer run over one new pipeline, say). */
    const char *only = getenv("MT_GPU_GEMM_ONLY");
    int tried = 0;
    for (size_t i = 0; i < mm_kernels.n; i++) {
        const mt_variant *v = &mm_kernels.k[i].v;
        if (!mt_variant_is_gemm(v) || (only && !strstr(v->name, only)) ||
            strcmp(mt_variant_get(v, "dtype"), mt_dtype_name(p.dtype)) ||
            strcmp(mt_variant_get(v, "quant"), mt_quant_mode_name(p.quant.mode)) ||
            strcmp(mt_variant_get(v, "format"), mt_act_format_name(p.format)))
            continue;
        const char *epi = mt_variant_get(v, "epilogue");
        if (strcmp(epi, "store") && strcmp(epi, mt_activation_name(p.activation)))
            continue;
        tried++;
        mt_moe_plan plan;
        st = mt_plan_compose(&mm_kernels, &p, v->name, &plan, msg, sizeof msg);
        if (st) {
            printf("FAIL plan %s %s: %s\n", desc, v->name, msg);
            mm_failures++;
            continue;
        }
        /* A slot-routed pipeline runs three times: GEMM2 storing per slot
         * (then the reduce step), GEMM2 summing each token's slots itself
         * (grouped_gemv, epilogue "sum"), and GEMM2 storing per slot with
         * its last CTA of each token summing them ("lastsum"), whose output
         * must equal the first run's byte for byte (the reduce step's own
         * code adds the same rows). After a GEMM1 that stores its output,
         * each of the three runs again with its twin that applies the
         * activation and quantizes its A rows itself (AQUANT=silu, gelu; no
         * act step), whose output must equal that run's byte for byte (the
         * act step's own code makes the same bytes and scales). */
        /* (A GEMM1 running GEMM2 in its launch, CHAIN, runs once: its GEMM2
         * is the tile it runs.) */
        const int chains = mt_variant_chain(&plan.step[MT_STEP_GEMM1].v) > 0;
        const mt_kernel *gemm2[6] = {
            &plan.step[MT_STEP_GEMM2],
            chains ? NULL : mt_kernel_set_find_sibling(&mm_kernels, &plan.step[MT_STEP_GEMM2].v, "epilogue", "sum"),
            chains ? NULL : mt_kernel_set_find_sibling(&mm_kernels, &plan.step[MT_STEP_GEMM2].v, "epilogue", "lastsum")};
        const char *act = mt_activation_name(p.activation);
        /* Only a family with AQUANT has such twins: for another one the
         * sibling search finds the kernel itself, and the run compared a
         * GEMM2 with itself, which for one summing by atomics ("sum" of a
         * tiled family, in no fixed order) may differ in a value (session
         * 55, on an H100: 1 of 131072). */
        for (int k = 0; k < 3 && !chains; k++) {
            const mt_kernel *own = gemm2[k] && mt_variant_get(&gemm2[k]->v, "AQUANT")
                                       ? mt_kernel_set_find_sibling(&mm_kernels, &gemm2[k]->v, "AQUANT", act)
                                       : NULL;
            if (own && mt_gemm_pair_fits(&plan.step[MT_STEP_GEMM1].v, &own->v) && mt_gemm_role_fits(&own->v, &p, 1))
                gemm2[3 + k] = own;
        }
        char stored_by[3][sizeof plan.step[MT_STEP_GEMM2].v.name] = {"", "", ""};   /* runs 0-2's GEMM2s, once they ran */
        for (int pass = 0; pass < 6; pass++) {
            if (!gemm2[pass])
                continue;
            /* The GEMM1 that runs: v, or the twin mt_plan_compose took where v
             * cannot be this problem's GEMM1. */
            const char *name = plan.step[MT_STEP_GEMM1].v.name;
            if (pass > 0) {
                plan.step[MT_STEP_GEMM2] = *gemm2[pass];
                name = gemm2[pass]->v.name;
                if ((st = mt_moe_plan_check(&plan, &p, msg, sizeof msg))) {
                    printf("FAIL plan %s %s: %s\n", desc, name, msg);
                    mm_failures++;
                    continue;
                }
            }
            st = run_plan(&plan, &p, &d, &ws, &ws_size, out_bytes, got, msg, sizeof msg);
            if (st) {
                printf("FAIL run %s %s: %s: %s\n", desc, name, mt_status_str(st), msg);
                mm_failures++;
                assert_true(st != MT_ERR_KERNEL_FAULT);  /* the context is gone: stop here */
                continue;
            }
            int64_t nans = 0;
            double err;
            if (batched) {
                err = mt_rel_l2(got, p.dtype, bref, live, nlive, p.K, &nans);
                check("experts", desc, name, err, nans, tol);
                assert_int_equal(mt_cu.cuMemsetD8Async(comb, 0xFF, (size_t)(p.M * p.K) * es, mm_stream), CUDA_SUCCESS);
                st = mt_moe_combine(&plan, &p, (CUdeviceptr)(uintptr_t)d.d.out, d.d_slot_row,
                                    p.apply_router_weight_on_input ? 0 : (CUdeviceptr)(uintptr_t)d.d.topk_weights,
                                    comb, mm_stream, msg, sizeof msg);
                assert_int_equal(st, MT_OK);
                assert_int_equal(mt_cu.cuStreamSynchronize(mm_stream), CUDA_SUCCESS);
                assert_int_equal(mt_cu.cuMemcpyDtoH(got_comb, comb, (size_t)(p.M * p.K) * es), CUDA_SUCCESS);
                err = mt_rel_l2(got_comb, p.dtype, ref, tokens, ntok, p.K, &nans);
                check("final", desc, name, err, nans, tol);
            } else {
                err = mt_rel_l2(got, p.dtype, ref, tokens, ntok, p.K, &nans);
                check("fused", desc, name, err, nans, tol);
                /* Not with a GEMM2 that sums by atomics (a tiled family's
                 * "sum", which follows grouped_gemm_sm90's OQUANT=last
                 * tiles): its fp32 sums are zeroed by the memset this run
                 * leaves out, so they would add up twice (and in no fixed
                 * order). */
                if ((mt_variant_quantizes_out(&plan.step[MT_STEP_GEMM1].v) || chains ||
                     !strcmp(mt_variant_get(&plan.step[MT_STEP_GEMM2].v, "epilogue"), "lastsum")) &&
                    !mt_variant_sums_by_atomics(&plan.step[MT_STEP_GEMM2].v))
                    check_rearmed(&plan, &p, &d, ws, ws_size, out_bytes, got, desc, name);
                if (has_step_twin(&plan))
                    check_step_twin(&plan, &p, &d, &ws, &ws_size, out_bytes, got, desc);
                if (pass < 3) {
                    memcpy(stored[pass], got, out_bytes);
                    snprintf(stored_by[pass], sizeof stored_by[pass], "%s", plan.step[MT_STEP_GEMM2].v.name);
                }
                const int twin_of = pass == 2 ? 0 : pass >= 3 ? pass - 3 : -1;
                if (twin_of >= 0 && stored_by[twin_of][0]) {
                    mm_runs++;
                    compare_twins(&p, out_bytes, got, stored[twin_of], desc, name, stored_by[twin_of]);
                }
            }
        }
    }
    if (tried == 0 && only) {
        printf("SKIP %s: no default grouped_gemm kernel named *%s*\n", desc, only);
    } else if (tried == 0) {
        printf("FAIL nokernel %s: no default grouped_gemm kernel for it\n", desc);
        mm_failures++;
    }
    if (ws)
        mt_cu.cuMemFree(ws);
    if (comb)
        mt_cu.cuMemFree(comb);
    free(got);
    for (int k = 0; k < 3; k++)
        free(stored[k]);
    free(got_comb);
    free(tokens);
    free(ref);
    free(bref);
    free(live);
    mt_problem_data_free(&d);
}

