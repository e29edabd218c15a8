/*
 * The GPU tuning backend (see backend.h): compiles candidates through the
 * generator's cache, checks each composed pipeline against the CPU oracle
 * on a sample of tokens (output poisoned first), and times it with
 * tuner/timing (graph replay, L2 flush, median).
 *
 * Two test hooks, read once at creation, prove on real hardware that the
 * supervisor (tuner/tune.c) isolates bad kernels: MT_TUNE_INJECT_FAULT and
 * MT_TUNE_INJECT_HANG (see mt_tune_backend_gpu; docs/RELIABILITY.md).
 */
#define _POSIX_C_SOURCE 200809L
#include "tuner/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cuda_driver.h"
#include "common/util.h"
#include "moetune/gen.h"
#include "runtime/rt_internal.h"
#include "tuner/cublas_baseline.h"
#include "tuner/harness.h"
#include "tuner/kernel_set.h"
#include "tuner/plan_check.h"
#include "tuner/select.h"
#include "tuner/timing.h"

typedef struct gpu_backend {
    mt_gpu gpu;
    mt_gen *gen;
    mt_kernel_set set;
    mt_timer timer;
    char inject_fault[128];  /* env MT_TUNE_INJECT_FAULT: see mt_tune_backend_gpu */
    char inject_hang[128];   /* env MT_TUNE_INJECT_HANG: see mt_tune_backend_gpu */
    CUmodule spin_mod;       /* the endless kernel of the hang hook */
    CUfunction spin;
    CUdeviceptr spin_flag;   /* the flag it waits for: 0, never set */
    mt_variant *all;         /* every valid GEMM variant of the problem */
    size_t nall;
    /* the open item */
    int open;
    mt_problem_data d, dcub;
    mt_routing routing;      /* d's routing and seed, dcub's too */
    uint64_t seed;
    int have_dcub;
    mt_plan_ref ref;         /* the oracle's sampled rows (tuner/plan_check.h) */
    CUdeviceptr ws;
    size_t ws_size;
} gpu_backend;

/* The same provenance the runtime compares stored entries with, so that an
 * entry tuned here reads as current there. */
static mt_status gpu_provenance(void *self, mt_db_provenance *out, char *arch, char *msg,
                                size_t msg_size)
{
    gpu_backend *b = self;
    (void)msg, (void)msg_size;
    mt_rt_current_provenance(&b->gpu, out);
    mt_strlcpy(arch, mt_gpu_arch(&b->gpu), 16);
    return MT_OK;
}

static mt_status enumerate(gpu_backend *b, const char *family, const char *const *kv, int n,
                           int defaults_only, mt_variant **out, size_t *count, char *msg,
                           size_t msg_size)
{
    mt_gen_filter f = {.family = family, .arch = mt_gpu_arch(&b->gpu),
                       .defaults_only = defaults_only, .lenient_values = 1, .nparams = n};
    for (int i = 0; i < n; i++) {
        f.params[i].name = kv[2 * i];
        f.params[i].value = kv[2 * i + 1];
    }
    mt_status st = mt_gen_enumerate(b->gen, &f, out, count, NULL);
    if (st)
        return mt_errf(msg, msg_size, st, "%s", mt_gen_errmsg(b->gen));
    if (*count == 0)
        return mt_errf(msg, msg_size, MT_ERR_UNSUPPORTED, "no %s variant for %s on %s", family,
                       n ? kv[1] : "this problem", mt_gpu_arch(&b->gpu));
    return MT_OK;
}

static mt_status gpu_gemm_variants(void *self, const mt_problem *p, int defaults_only,
                                   mt_variant **out, size_t *n, char *msg, size_t msg_size)
{
    gpu_backend *b = self;
    const char *kv[] = {"dtype", mt_dtype_name(p->dtype), "quant",
                        mt_quant_mode_name(p->quant.mode), "format",
                        mt_act_format_name(p->format)};
    /* Every GEMM family's variants for the problem, one list; a family
     * with none here (wgmma below sm_90a, weight-only on wgmma) is skipped. */
    *out = NULL;
    *n = 0;
    for (int f = 0; mt_gemm_families[f]; f++) {
        mt_variant *v = NULL;
        size_t nv = 0;
        mt_status st = enumerate(b, mt_gemm_families[f], kv, 3, defaults_only, &v, &nv, msg, msg_size);
        if (st == MT_ERR_UNSUPPORTED)
            continue;
        mt_variant *all = st ? NULL : realloc(*out, (*n + nv) * sizeof *all);
        if (all) {
            memcpy(all + *n, v, nv * sizeof *all);
            *out = all;
            *n += nv;
        } else if (!st) {
            st = mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
        }
        free(v);
        if (st) {
            free(*out);
            *out = NULL;
            *n = 0;
            return st;
        }
    }
    if (*n == 0)
        return mt_errf(msg, msg_size, MT_ERR_UNSUPPORTED, "no GEMM variant for %s %s on %s",
                       mt_quant_mode_name(p->quant.mode), mt_dtype_name(p->dtype),
                       mt_gpu_arch(&b->gpu));
    if (defaults_only)
        return MT_OK;
    /* Keep the full list: plans look up GEMM2 siblings in it. */
    free(b->all);
    b->nall = 0;
    if (!(b->all = malloc((*n ? *n : 1) * sizeof *b->all)))
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    memcpy(b->all, *out, *n * sizeof *b->all);
    b->nall = *n;
    return MT_OK;
}

/* Load the default variants of the non-GEMM families a pipeline for p can
 * use (align, act_and_mul, act_quant, reduce), so that plans compose from
 * the set as everywhere else (mt_plan_compose). */
static mt_status load_step_kernels(gpu_backend *b, const mt_problem *p, char *msg,
                                   size_t msg_size)
{
    static const char *const fams[] = {"moe_align", "act_and_mul", "act_quant", "moe_reduce"};
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
        const char *kv[] = {"dtype", mt_dtype_name(p->dtype)};
        const int has_dtype = strcmp(fams[i], "moe_align") != 0;
        mt_variant *v = NULL;
        size_t n = 0;
        mt_status st = enumerate(b, fams[i], kv, has_dtype, 1, &v, &n, msg, msg_size);
        if (st == MT_ERR_UNSUPPORTED && !strcmp(fams[i], "act_quant")) {
            free(v);
            continue;   /* no 8-bit activations on this arch: only w8a8 needs them */
        }
        if (!st)
            st = mt_kernel_set_add(&b->set, b->gen, v, n, msg, msg_size);
        free(v);
        if (st)
            return st;
    }
    return MT_OK;
}

static void gpu_close_item(void *self)
{
    gpu_backend *b = self;
    if (!b->open)
        return;
    mt_problem_data_free(&b->d);
    if (b->have_dcub)
        mt_problem_data_free(&b->dcub);
    if (b->ws)
        mt_cu.cuMemFree(b->ws);
    mt_plan_ref_free(&b->ref);
    b->ws = 0;
    b->ws_size = 0;
    b->have_dcub = 0;
    b->open = 0;
}

static mt_status gpu_open_item(void *self, const mt_problem *p, mt_routing routing, uint64_t seed,
                               char *msg, size_t msg_size)
{
    gpu_backend *b = self;
    gpu_close_item(b);
    mt_status st = load_step_kernels(b, p, msg, msg_size);
    if (st)
        return st;
    b->routing = routing;
    b->seed = seed;
    if ((st = mt_problem_data_make(&b->d, p, routing, seed, 1, msg, msg_size)))
        return st;
    b->open = 1;
    return mt_plan_ref_make(&b->ref, &b->d, msg, msg_size);
}

/* gemm1's plan from the set (its GEMM2 sibling, align, act, quant, reduce),
 * with gemm2 replaced by the one asked for. */
static mt_status make_plan(gpu_backend *b, const mt_variant *g1, const mt_variant *g2,
                           mt_moe_plan *plan, char *msg, size_t msg_size)
{
    /* mt_plan_compose also needs gemm1's store sibling loaded. */
    size_t sib = mt_find_store_sibling(b->all, b->nall, g1);
    if (sib == (size_t)-1)
        return mt_errf(msg, msg_size, MT_ERR_NOT_FOUND, "%s has no store sibling", g1->name);
    mt_variant need[3] = {*g1, *g2, b->all[sib]};
    mt_status st = mt_kernel_set_add(&b->set, b->gen, need, 3, msg, msg_size);
    if (st)
        return st;
    if ((st = mt_plan_compose(&b->set, &b->d.p, g1->name, plan, msg, msg_size)))
        return st;
    plan->step[MT_STEP_GEMM2] = *mt_kernel_set_find(&b->set, g2->name);
    return mt_moe_plan_check(plan, &b->d.p, msg, msg_size);
}

static mt_status gpu_preload(void *self, const mt_variant *v, size_t n, char *msg,
                             size_t msg_size)
{
    gpu_backend *b = self;
    return mt_kernel_set_add(&b->set, b->gen, v, n, msg, msg_size);
}

static mt_status gpu_pipeline(void *self, const mt_variant *g1, const mt_variant *g2,
                              mt_variant steps[6], const char *roles[6], int *n, char *msg,
                              size_t msg_size)
{
    gpu_backend *b = self;
    mt_moe_plan plan;
    mt_status st = make_plan(b, g1, g2, &plan, msg, msg_size);
    if (st)
        return st;
    /* The database's step order is the order of execution. */
    static const mt_step order[] = {MT_STEP_ALIGN, MT_STEP_QUANT, MT_STEP_GEMM1,
                                    MT_STEP_ACT,   MT_STEP_GEMM2, MT_STEP_REDUCE};
    *n = 0;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (plan.step[order[i]].fn && mt_moe_plan_needs(&plan, &b->d.p, order[i])) {
            steps[*n] = plan.step[order[i]].v;
            roles[(*n)++] = mt_step_name(order[i]);
        }
    return MT_OK;
}

/* Hang injection: an endless kernel ahead of the candidate on the same
 * stream, so the check never returns and only the supervisor's
 * per-candidate timeout ends it (by killing this process). */
static mt_status launch_spin(void *ctx, CUstream stream, char *msg, size_t msg_size)
{
    gpu_backend *b = ctx;
    mt_status st = MT_OK;
    void *args[] = {&b->spin_flag};
    MT_CU_TRY(mt_cu.cuLaunchKernel(b->spin, 1, 1, 1, 1, 1, 1, 0, stream, args, NULL), msg,
              msg_size);
fail:
    return st;
}

static mt_status gpu_measure(void *self, const mt_variant *g1, const mt_variant *g2,
                             int launch_late, mt_measure *out, char *msg, size_t msg_size)
{
    gpu_backend *b = self;
    const mt_problem *p = &b->d.p;
    mt_moe_plan plan;
    memset(out, 0, sizeof *out);
    mt_status st = make_plan(b, g1, g2, &plan, msg, msg_size);
    if (st == MT_ERR_INCOMPATIBLE || st == MT_ERR_UNSUPPORTED) {
        snprintf(out->reason, sizeof out->reason, "not composable: %s", msg);
        return MT_OK;
    }
    if (st)
        return st;
    plan.launch_late = launch_late;
    size_t need = mt_moe_workspace_size(&plan, p);
    if (need > b->ws_size) {
        if (b->ws)
            mt_cu.cuMemFree(b->ws);
        b->ws = 0;
        MT_CU_TRY(mt_cu.cuMemAlloc(&b->ws, need), msg, msg_size);
        b->ws_size = need;
    }
    /* Fault injection (tests of the tuner's isolation on a real GPU): a
     * matching candidate reads its activations from an unmapped address,
     * which faults the kernel and takes the CUDA context with it. */
    mt_moe_tensors dt = b->d.d;
    if (b->inject_fault[0] && strstr(g1->name, b->inject_fault))
        dt.hidden = (const void *)(uintptr_t)0x10000;
    /* Check (poisoned output, one run, the oracle's rows), the hang hook
     * enqueued ahead of the candidate. */
    if ((st = mt_plan_check(&b->ref, &plan, &b->d, &dt, b->ws, b->ws_size, b->timer.stream,
                            b->spin && strstr(g1->name, b->inject_hang) ? launch_spin : NULL, b,
                            out, msg, msg_size)))
        return st;
    if (!out->ok)
        return MT_OK;
    out->ok = 0;   /* set again once timed */
    mt_plan_call c = {&plan, &b->d.p, &b->d.d, b->ws, b->ws_size, 0};
    mt_timing t;
    if ((st = mt_time(&b->timer, mt_plan_call_enqueue, &c, &t, msg, msg_size)))
        return st;
    out->ok = 1;
    out->time_us = t.median_us;
    return MT_OK;
fail:
    return st;
}

static mt_status gpu_measure_cublas(void *self, mt_measure *out, char *msg, size_t msg_size)
{
    gpu_backend *b = self;
    memset(out, 0, sizeof *out);
    mt_problem q = b->d.p;
    mt_problem_data *d = &b->d;
    mt_status st;
    if (q.quant.mode != MT_QUANT_NONE) {   /* not a fault: there is no baseline to time */
        snprintf(out->reason, sizeof out->reason, "no cuBLAS baseline for %s",
                 mt_quant_mode_name(q.quant.mode));
        return MT_OK;
    }
    if (q.format == MT_FORMAT_STANDARD) {   /* the same routing, laid out per expert */
        q.format = MT_FORMAT_BATCHED;
        if ((st = mt_problem_data_make(&b->dcub, &q, b->routing, b->seed, 1, msg, msg_size)))
            return st;
        b->have_dcub = 1;
        d = &b->dcub;
    }
    const mt_kernel *act = NULL;   /* the activation kernel of the unquantized path */
    for (size_t i = 0; i < b->set.n && !act; i++)
        if (!strcmp(b->set.k[i].v.family, "act_and_mul") &&
            !strcmp(mt_variant_get(&b->set.k[i].v, "activation"), mt_activation_name(q.activation)))
            act = &b->set.k[i];
    if (!act)
        return mt_errf(msg, msg_size, MT_ERR_NOT_FOUND, "no act_and_mul kernel for cuBLAS");
    mt_cublas_baseline *cb = NULL;
    if ((st = mt_cublas_baseline_create(&d->p, d->h_counts, &d->d, act, &cb, msg, msg_size)))
        return st;
    mt_timing t;
    st = mt_time(&b->timer, mt_cublas_baseline_run, cb, &t, msg, msg_size);
    mt_cublas_baseline_destroy(cb);
    if (b->have_dcub) {
        mt_problem_data_free(&b->dcub);
        b->have_dcub = 0;
    }
    if (st)
        return st;
    out->ok = 1;
    out->time_us = t.median_us;
    snprintf(out->reason, sizeof out->reason, "GEMM1 + act + GEMM2 only");
    return MT_OK;
}

static mt_status gpu_kernel(void *self, const mt_variant *v, mt_db_kernel *out, char *msg,
                            size_t msg_size)
{
    gpu_backend *b = self;
    return mt_kernel_record(b->gen, v, out, msg, msg_size);
}

/* The endless kernel of MT_TUNE_INJECT_HANG: one thread polling a flag
 * that nothing sets (volatile: every iteration reads memory, so the
 * compiler cannot prove the loop endless and drop it). */
static const char spin_source[] =
    "extern \"C\" __global__ void mt_spin_forever(const volatile int *flag)\n"
    "{\n"
    "    while (*flag == 0) {\n"
    "    }\n"
    "}\n";

static mt_status load_spin_kernel(gpu_backend *b, char *msg, size_t msg_size)
{
    void *image = NULL;
    size_t len = 0;
    mt_status st = mt_rt_nvrtc_compile(spin_source, "mt_spin_forever", mt_gpu_arch(&b->gpu),
                                       &image, &len, msg, msg_size);
    if (st)
        return st;
    MT_CU_TRY(mt_cu.cuModuleLoadData(&b->spin_mod, image), msg, msg_size);
    MT_CU_TRY(mt_cu.cuModuleGetFunction(&b->spin, b->spin_mod, "mt_spin_forever"), msg, msg_size);
    MT_CU_TRY(mt_cu.cuMemAlloc(&b->spin_flag, sizeof(int)), msg, msg_size);
    MT_CU_TRY(mt_cu.cuMemsetD8(b->spin_flag, 0, sizeof(int)), msg, msg_size);
    MT_CU_TRY(mt_cu.cuCtxSynchronize(), msg, msg_size);   /* before any non-blocking stream */
    free(image);
    return MT_OK;
fail:
    free(image);
    b->spin = NULL;   /* not armed */
    return st;
}

static void gpu_destroy(void *self)
{
    gpu_backend *b = self;
    gpu_close_item(b);
    if (b->spin_flag)
        mt_cu.cuMemFree(b->spin_flag);
    if (b->spin_mod)
        mt_cu.cuModuleUnload(b->spin_mod);
    free(b->all);
    mt_timer_free(&b->timer);
    mt_kernel_set_free(&b->set);
    mt_gen_close(b->gen);
    mt_gpu_close(&b->gpu);
    free(b);
}

mt_status mt_tune_backend_gpu(int ordinal, int reps, mt_tune_backend *out, char *msg,
                              size_t msg_size)
{
    gpu_backend *b = calloc(1, sizeof *b);
    if (!b)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    mt_status st = mt_gpu_open(ordinal, &b->gpu, msg, msg_size);
    if (st) {
        free(b);
        return st;
    }
    const char *inject = getenv("MT_TUNE_INJECT_FAULT");   /* read once, here */
    if (inject)
        mt_strlcpy(b->inject_fault, inject, sizeof b->inject_fault);
    inject = getenv("MT_TUNE_INJECT_HANG");
    if (inject && *inject) {
        mt_strlcpy(b->inject_hang, inject, sizeof b->inject_hang);
        if ((st = load_spin_kernel(b, msg, msg_size))) {
            gpu_destroy(b);
            return st;
        }
    }
    mt_gen_config cfg = {0};
    if ((st = mt_gen_open(&cfg, &b->gen))) {
        mt_errf(msg, msg_size, st, "%s", mt_gen_errmsg(b->gen));
        gpu_destroy(b);
        return st;
    }
    if ((st = mt_timer_init(&b->timer, 256u << 20, 3, reps, msg, msg_size))) {
        gpu_destroy(b);
        return st;
    }
    *out = (mt_tune_backend){
        .name = "gpu", .self = b, .provenance = gpu_provenance,
        .gemm_variants = gpu_gemm_variants, .preload = gpu_preload, .open_item = gpu_open_item,
        .close_item = gpu_close_item, .measure = gpu_measure,
        .measure_cublas = gpu_measure_cublas, .kernel = gpu_kernel,
        .pipeline = gpu_pipeline, .destroy = gpu_destroy};
    return MT_OK;
}
