/*
 * The modular kernel: a prepare/finalize and an experts object composed for
 * one problem shape. Creation does everything that may be slow (lookup per
 * M bucket, loading and compiling kernels, cuBLAS handle); the call only
 * checks its arguments and enqueues launches.
 *
 * M buckets: bucket b serves 2^(b-1) < M <= 2^b (bucket 0: M = 1), the last
 * one ends at the max M; each bucket's kernels are looked up at its upper
 * end, so a call picks its plan with one bit scan.
 *
 * May call: runtime/moe_launch, rt_lookup, rt_context, rt_cublas, the
 * driver table.
 */
#define MT_DISPATCH_ARGS_ONLY
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_internal.h"
#include "templates/moe_dispatch.cuh"

#define RT_MAX_BUCKETS 24

struct mt_modular_kernel {
    int ready;   /* created: 0 after a failed create, whose reason err keeps */
    char err[MT_RT_MSG];
    mt_context *ctx;
    mt_problem p;               /* M = max M; format and capacity set */
    mt_pf_kind pf;
    mt_experts_kind ex;
    int nbuckets;
    int bucket_plan[RT_MAX_BUCKETS];
    mt_lookup_info info[RT_MAX_BUCKETS];
    mt_moe_plan *plans;         /* distinct plans */
    int nplans;
    mt_moe_plan combine;        /* batched: the reduce kernel only */
    const mt_kernel *dispatch;  /* batched prepare */
    const mt_kernel *act;       /* cuBLAS experts */
    rt_cublas *cublas;
    size_t ws_size;
    size_t off_slot_row, off_x, off_y, off_experts;   /* batched layout at capacity */
};

/* Batched workspace head: 4 flag words, then the per-expert counts. */
#define RT_FLAGS 4

static size_t up256(size_t n) { return (n + 255) & ~(size_t)255; }

static int bucket_of(const mt_modular_kernel *mk, int64_t M)
{
    int b = M <= 1 ? 0 : 64 - __builtin_clzll((unsigned long long)(M - 1));
    return b < mk->nbuckets ? b : mk->nbuckets - 1;
}

static int64_t bucket_m(const mt_modular_kernel *mk, int b)
{
    int64_t m = (int64_t)1 << b;
    return m < mk->p.M ? m : mk->p.M;
}

/* Add to pl the roles p needs that it lacks, from the built-in defaults. */
static mt_status fill_missing(mt_db_pipeline *pl, const mt_problem *p, int64_t M, const char *arch,
                              char *msg, size_t msg_size)
{
    mt_db_pipeline d;
    mt_status st = mt_rt_default_pipeline(p, M, arch, &d, msg, msg_size);
    if (st)
        return st;
    static const char *const roles[] = {"align", "reduce"};
    for (size_t r = 0; r < MT_ARRAY_LEN(roles); r++) {
        const char *k = mt_db_pipeline_kernel(&d, roles[r]);
        if (!k || mt_db_pipeline_kernel(pl, roles[r]) || pl->nsteps >= MT_DB_MAX_STEPS)
            continue;
        /* keep the role order: align first, reduce last */
        if (r == 0) {
            memmove(&pl->steps[1], &pl->steps[0], (size_t)pl->nsteps * sizeof pl->steps[0]);
            pl->steps[0] = d.steps[0];
        } else {
            pl->steps[pl->nsteps] = d.steps[d.nsteps - 1];
        }
        pl->nsteps++;
    }
    return MT_OK;
}

/* Load the kernels of a pipeline into a plan and check it against p. */
static mt_status plan_from(mt_modular_kernel *mk, const mt_rt_choice *c, const mt_problem *p,
                           mt_moe_plan *plan)
{
    mt_context *ctx = mk->ctx;
    mt_db_pipeline pl = c->pipeline;
    mt_status st = fill_missing(&pl, p, c->info.bucket_m, ctx->arch, mk->err, sizeof mk->err);
    if (st)
        return st;
    const char *names[MT_DB_MAX_STEPS];
    const mt_kernel *k[MT_DB_MAX_STEPS];
    int step_of[MT_DB_MAX_STEPS];
    size_t n = 0;
    for (int i = 0; i < pl.nsteps; i++) {
        int s = 0;
        while (s < MT_STEP_ALL && strcmp(mt_step_name((mt_step)s), pl.steps[i].role))
            s++;
        if (s == MT_STEP_ALL || !strcmp(pl.steps[i].kernel, MT_DB_LIBRARY_KERNEL))
            return mt_errf(mk->err, sizeof mk->err, MT_ERR_UNSUPPORTED,
                           "pipeline %s from %s: step %s=%s cannot run as moetune experts",
                           c->info.pipeline, c->db ? mt_db_path(c->db) : "the defaults",
                           pl.steps[i].role, pl.steps[i].kernel);
        step_of[n] = s;
        names[n++] = pl.steps[i].kernel;
    }
    if ((st = mt_rt_load_kernels(ctx, c->db, pl.arch, names, n, k, mk->err, sizeof mk->err)))
        return st;
    memset(plan, 0, sizeof *plan);
    for (size_t i = 0; i < n; i++)
        plan->step[step_of[i]] = *k[i];
    plan->launch_late = pl.launch_late;
    char cmsg[512];
    if ((st = mt_moe_plan_check(plan, p, cmsg, sizeof cmsg)))
        return mt_errf(mk->err, sizeof mk->err, st, "pipeline %s from %s does not fit: %s",
                       c->info.pipeline, c->db ? mt_db_path(c->db) : "the defaults", cmsg);
    return MT_OK;
}

static mt_status load_default(mt_modular_kernel *mk, const char *family, const char *const *kv,
                              int npairs, const mt_kernel **out)
{
    mt_variant v;
    mt_status st = mt_rt_default_find(family, kv, npairs, &v, mk->err, sizeof mk->err);
    const char *name = v.name;
    if (!st)
        st = mt_rt_load_kernels(mk->ctx, NULL, mk->ctx->arch, &name, 1, out, mk->err,
                                sizeof mk->err);
    return st;
}

static void log_bucket(mt_modular_kernel *mk, int b)
{
    const mt_lookup_info *i = &mk->info[b];
    int64_t lo = b == 0 ? 1 : bucket_m(mk, b - 1) + 1;
    if (i->source == MT_LOOKUP_TUNED || i->source == MT_LOOKUP_SAME_CC)
        mt_rt_log(mk->ctx, MT_LOG_INFO,
                  "moetune: M %lld..%lld: %s entry of %s at M=%lld%s from %s: %s", (long long)lo,
                  (long long)i->bucket_m, mt_lookup_source_name(i->source), i->sku,
                  (long long)i->tuned_m, i->exact ? " (exact)" : "", i->db_path, i->pipeline);
    else
        mt_rt_log(mk->ctx, MT_LOG_INFO, "moetune: M %lld..%lld: %s: %s", (long long)lo,
                  (long long)i->bucket_m, mt_lookup_source_name(i->source), i->pipeline);
    if (i->provenance_diff[0])
        mt_rt_log(mk->ctx, MT_LOG_WARN,
                  "moetune: the entry used for M %lld..%lld (%s) was tuned with a different %s "
                  "than this machine has; it is used, but re-tune or update the database",
                  (long long)lo, (long long)i->bucket_m, i->db_path, i->provenance_diff);
}

static mt_status create_locked(mt_modular_kernel *mk)
{
    mt_context *ctx = mk->ctx;
    mt_problem *p = &mk->p;
    mt_status st = MT_OK;
    mt_rt_machine m;
    memset(&m, 0, sizeof m);
    mt_strlcpy(m.sku, ctx->gpu.name, sizeof m.sku);
    mt_strlcpy(m.cc, ctx->cc, sizeof m.cc);
    mt_strlcpy(m.arch, ctx->arch, sizeof m.arch);
    m.prov = ctx->prov;
    const int batched = p->format == MT_FORMAT_BATCHED;
    const char *dt = mt_dtype_name(p->dtype);
    mk->nbuckets = 1;
    while (((int64_t)1 << (mk->nbuckets - 1)) < p->M && mk->nbuckets < RT_MAX_BUCKETS)
        mk->nbuckets++;
    if (mk->ex == MT_EXPERTS_CUBLAS) {
        const char *kv[] = {"dtype", dt, "activation", mt_activation_name(p->activation)};
        if ((st = load_default(mk, "act_and_mul", kv, 2, &mk->act)) ||
            (st = mt_rt_cublas_create(&mk->cublas, mk->err, sizeof mk->err)))
            return st;
        for (int b = 0; b < mk->nbuckets; b++) {
            mk->info[b].source = MT_LOOKUP_LIBRARY;
            mk->info[b].bucket_m = bucket_m(mk, b);
            snprintf(mk->info[b].pipeline, sizeof mk->info[b].pipeline,
                     "backend=cublas;gemm1=cublas;act=%s;gemm2=cublas", mk->act->v.name);
        }
        log_bucket(mk, mk->nbuckets - 1);
    } else {
        mk->plans = calloc((size_t)mk->nbuckets, sizeof *mk->plans);
        mt_rt_choice *ch = calloc((size_t)mk->nbuckets, sizeof *ch);
        if (!mk->plans || !ch) {
            free(ch);
            return mt_errf(mk->err, sizeof mk->err, MT_ERR_NO_MEMORY, "out of memory");
        }
        /* Every lookup and the kernels its entry names from one snapshot of
         * each database: a prune or a retune committed in between made an
         * entry name a kernel no longer there ("inconsistent" database). */
        int snap = 0;
        while (snap < ctx->ndbs && !st)
            if ((st = mt_db_read_begin(ctx->dbs[snap])))
                mt_errf(mk->err, sizeof mk->err, st, "%s", mt_db_errmsg(ctx->dbs[snap]));
            else
                snap++;
        for (int b = 0; b < mk->nbuckets && !st; b++) {
            mt_problem pb = *p;
            pb.M = bucket_m(mk, b);
            st = mt_rt_lookup(ctx->dbs, ctx->ndbs, &m, &pb, pb.M, ctx->no_defaults, &ch[b],
                              mk->err, sizeof mk->err);
            if (st)
                break;
            mk->info[b] = ch[b].info;
            log_bucket(mk, b);
            int same = -1;   /* buckets that resolve alike share one plan */
            for (int q = 0; q < b && same < 0; q++)
                if (ch[q].db == ch[b].db && !strcmp(ch[q].info.pipeline, ch[b].info.pipeline))
                    same = mk->bucket_plan[q];
            if (same >= 0) {
                mk->bucket_plan[b] = same;
                continue;
            }
            if ((st = plan_from(mk, &ch[b], &pb, &mk->plans[mk->nplans])))
                break;
            mk->bucket_plan[b] = mk->nplans++;
        }
        while (snap > 0)
            mt_db_read_end(ctx->dbs[--snap]);
        free(ch);
        if (st)
            return st;
    }
    /* Workspace, for the largest M and the capacity. */
    if (!batched) {
        for (int i = 0; i < mk->nplans; i++) {
            size_t w = mt_moe_workspace_size(&mk->plans[i], p);
            if (w > mk->ws_size)
                mk->ws_size = w;
        }
        return MT_OK;
    }
    const char *kv[] = {"dtype", dt};
    const mt_kernel *rd;
    if ((st = load_default(mk, "moe_dispatch", kv, 1, &mk->dispatch)) ||
        (st = load_default(mk, "moe_reduce", kv, 1, &rd)))
        return st;
    mk->combine.step[MT_STEP_REDUCE] = *rd;
    const size_t es = mt_dtype_size(p->dtype);
    const size_t rows_bytes = (size_t)(p->local_E * p->max_tokens * p->K) * es;
    mk->off_slot_row = up256((size_t)(RT_FLAGS + p->local_E) * sizeof(int32_t));
    mk->off_x = mk->off_slot_row + up256((size_t)(p->M * p->topk) * sizeof(int32_t));
    mk->off_y = mk->off_x + up256(rows_bytes);
    mk->off_experts = mk->off_y + up256(rows_bytes);
    size_t ew = 0;
    if (mk->cublas)
        ew = mt_rt_cublas_workspace(p, p->max_tokens);
    for (int i = 0; i < mk->nplans; i++) {
        size_t w = mt_moe_workspace_size(&mk->plans[i], p);
        if (w > ew)
            ew = w;
    }
    mk->ws_size = mk->off_experts + up256(ew);
    return MT_OK;
}

mt_status mt_modular_kernel_create(mt_context *ctx, const mt_prepare_finalize *pf,
                                   const mt_experts *ex, const mt_problem *p,
                                   mt_modular_kernel **out)
{
    if (!out)
        return MT_ERR_INVALID_ARG;
    mt_modular_kernel *mk = calloc(1, sizeof *mk);
    *out = mk;
    if (!mk)
        return MT_ERR_NO_MEMORY;
    mt_status st = mt_rt_context_usable(ctx, mk->err, sizeof mk->err);
    if (st)
        return st;
    st = mt_compose_check(pf, ex, p, mk->err, sizeof mk->err);
    if (st)
        return st;
    if (!mt_rt_launcher_accepts(p->quant.mode, pf->format, ctx->arch))
        return mt_errf(mk->err, sizeof mk->err, MT_ERR_INCOMPATIBLE,
                       "cannot compose prepare/finalize '%s' with experts '%s': quant mismatch: "
                       "quant mode %s has no kernels for this GPU (%s)",
                       mt_prepare_finalize_name(pf), mt_experts_name(ex),
                       mt_quant_mode_name(p->quant.mode), ctx->arch);
    if (p->M < 1)
        return mt_errf(mk->err, sizeof mk->err, MT_ERR_SHAPE,
                       "the max M of a modular kernel must be at least 1");
    mt_rt_compose_problem(pf, p, &mk->p, NULL, 0);
    mk->pf = pf->kind;
    mk->ex = ex->kind;
    mk->ctx = ctx;
    if (!(st = mt_rt_lock(ctx, mk->err, sizeof mk->err)))
        st = create_locked(mk);
    mt_rt_unlock(ctx);
    mk->ready = st == MT_OK;
    if (st)
        mt_rt_log(ctx, MT_LOG_WARN, "moetune: composing %s with %s failed: %s",
                  mt_prepare_finalize_name(pf), mt_experts_name(ex), mk->err);
    return st;
}

void mt_modular_kernel_destroy(mt_modular_kernel *mk)
{
    if (!mk)
        return;
    mt_rt_cublas_destroy(mk->cublas);
    free(mk->plans);
    free(mk);
}

const char *mt_modular_kernel_errmsg(const mt_modular_kernel *mk)
{
    return mk ? mk->err : "no modular kernel";
}

size_t mt_modular_kernel_workspace_size(const mt_modular_kernel *mk)
{
    return mk && mk->ready ? mk->ws_size : 0;
}

int64_t mt_modular_kernel_max_m(const mt_modular_kernel *mk) { return mk && mk->ready ? mk->p.M : 0; }

/* Calls on a kernel whose creation failed return MT_ERR_INVALID_ARG and
 * leave its message, the reason, as it is. */
#define REQUIRE_READY(mk)                                                                  \
    do {                                                                                   \
        if (!(mk) || !(mk)->ready)                                                         \
            return MT_ERR_INVALID_ARG;                                                     \
    } while (0)

mt_status mt_modular_kernel_lookup(const mt_modular_kernel *cmk, int64_t M, mt_lookup_info *info)
{
    /* The message buffer is the handle's scratch, const or not (the
     * handle is the library's own allocation). */
    mt_modular_kernel *mk = (mt_modular_kernel *)cmk;
    REQUIRE_READY(mk);
    if (!info)
        return mt_errf(mk->err, sizeof mk->err, MT_ERR_INVALID_ARG, "lookup: info is NULL");
    if (M < 1 || M > mk->p.M)
        return mt_errf(mk->err, sizeof mk->err, MT_ERR_SHAPE, "lookup: M=%lld is outside [1, %lld]",
                       (long long)M, (long long)mk->p.M);
    *info = mk->info[bucket_of(mk, M)];
    return MT_OK;
}

static mt_status check_ptr(mt_modular_kernel *mk, const void *ptr, const char *what, int want,
                           size_t align)
{
    if (want && !ptr)
        return mt_errf(mk->err, sizeof mk->err, MT_ERR_INVALID_ARG, "%s is NULL", what);
    if (!want && ptr)
        return mt_errf(mk->err, sizeof mk->err, MT_ERR_INVALID_ARG,
                       "%s must be NULL for this problem", what);
    if ((uintptr_t)ptr % align)
        return mt_errf(mk->err, sizeof mk->err, MT_ERR_ALIGNMENT,
                       "%s (%p) is not %zu-byte aligned", what, ptr, align);
    return MT_OK;
}

static mt_status check_args(mt_modular_kernel *mk, int64_t M, const mt_moe_tensors *t,
                            const void *ws, size_t ws_size)
{
    const mt_problem *p = &mk->p;
    if (!t)
        return mt_errf(mk->err, sizeof mk->err, MT_ERR_INVALID_ARG, "the tensors are NULL");
    if (M < 0 || M > p->M)
        return mt_errf(mk->err, sizeof mk->err, MT_ERR_SHAPE,
                       "M=%lld is outside [0, %lld]: this kernel's workspace was sized for at "
                       "most %lld tokens (no chunking); create it with a larger max M",
                       (long long)M, (long long)p->M, (long long)p->M);
    mt_status st;
    if ((st = check_ptr(mk, t->hidden, "hidden", 1, 16)) ||
        (st = check_ptr(mk, t->w1, "w1", 1, 16)) || (st = check_ptr(mk, t->w2, "w2", 1, 16)) ||
        (st = check_ptr(mk, t->out, "out", 1, 16)) ||
        (st = check_ptr(mk, t->topk_ids, "topk_ids", 1, 16)) ||
        (st = check_ptr(mk, t->topk_weights, "topk_weights", 1, 16)) ||
        (st = check_ptr(mk, t->expert_map, "expert_map", p->has_expert_map, 16)) ||
        (st = check_ptr(mk, t->expert_num_tokens, "expert_num_tokens", 0, 1)) ||
        (st = mt_moe_check_quant_tensors(&p->quant, t, 1, mk->err, sizeof mk->err)) ||
        (st = check_ptr(mk, ws, "workspace", 1, 256)))
        return st;
    if (ws_size < mk->ws_size)
        return mt_errf(mk->err, sizeof mk->err, MT_ERR_INVALID_ARG,
                       "workspace of %zu bytes is too small: this kernel needs %zu", ws_size,
                       mk->ws_size);
    return MT_OK;
}

static mt_status run_batched(mt_modular_kernel *mk, const mt_problem *pc, const mt_moe_tensors *t,
                             char *ws, CUstream stream)
{
    mt_status st = MT_OK;
    char *msg = mk->err;
    const size_t msg_size = sizeof mk->err;
    int32_t *flags = (int32_t *)ws, *counts = flags + RT_FLAGS;
    int32_t *slot_row = (int32_t *)(ws + mk->off_slot_row);
    char *x = ws + mk->off_x, *y = ws + mk->off_y, *ews = ws + mk->off_experts;
    MT_CU_TRY(mt_cu.cuMemsetD32Async((CUdeviceptr)(uintptr_t)ws, 0,
                                     (size_t)(RT_FLAGS + pc->local_E), stream),
              msg, msg_size);
    mt_dispatch_args da = {
        .hidden = t->hidden, .topk_ids = t->topk_ids,
        .expert_map = pc->has_expert_map ? t->expert_map : NULL,
        .topk_weights = pc->apply_router_weight_on_input ? t->topk_weights : NULL, .out = x,
        .counts = counts, .slot_row = slot_row, .error_flags = flags, .K = pc->K,
        .num_slots = (int32_t)(pc->M * pc->topk), .topk = (int32_t)pc->topk,
        .num_experts = (int32_t)pc->E, .local_experts = (int32_t)pc->local_E,
        .max_tokens = (int32_t)pc->max_tokens};
    void *params[] = {&da};
    int64_t grid = pc->M * pc->topk < (1 << 20) ? pc->M * pc->topk : (1 << 20);
    MT_CU_TRY(mt_cu.cuLaunchKernel(mk->dispatch->fn, (unsigned)grid, 1, 1,
                                   (unsigned)mk->dispatch->v.threads, 1, 1, 0, stream, params,
                                   NULL),
              msg, msg_size);
    if (mk->cublas) {
        st = mt_rt_cublas_run(mk->cublas, pc, mk->act, x, counts, t->w1, t->w2, y, ews, stream,
                              msg, msg_size);
    } else {
        mt_moe_tensors bt = *t;
        bt.hidden = x;
        bt.out = y;
        bt.topk_ids = NULL;
        bt.topk_weights = NULL;
        bt.expert_map = NULL;
        bt.expert_num_tokens = counts;
        const mt_moe_plan *plan = &mk->plans[mk->bucket_plan[bucket_of(mk, pc->M)]];
        st = mt_moe_run(plan, pc, &bt, (CUdeviceptr)(uintptr_t)ews,
                        mk->ws_size - mk->off_experts, stream, msg, msg_size);
    }
    if (st)
        return st;
    return mt_moe_combine(&mk->combine, pc, (CUdeviceptr)(uintptr_t)y,
                          (CUdeviceptr)(uintptr_t)slot_row,
                          pc->apply_router_weight_on_input ? 0
                                                           : (CUdeviceptr)(uintptr_t)t->topk_weights,
                          (CUdeviceptr)(uintptr_t)t->out, stream, msg, msg_size);
fail:
    return st;
}

mt_status mt_modular_kernel_run(mt_modular_kernel *mk, int64_t M, const mt_moe_tensors *t,
                                void *workspace, size_t workspace_size, CUstream stream)
{
    REQUIRE_READY(mk);
    mt_status st = check_args(mk, M, t, workspace, workspace_size);
    if (st || M == 0)
        return st;
    CUcontext cur = NULL;
    if (mt_cu.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != mk->ctx->gpu.ctx)
        if (mt_cu.cuCtxSetCurrent(mk->ctx->gpu.ctx) != CUDA_SUCCESS)
            return mt_errf(mk->err, sizeof mk->err, MT_ERR_CUDA,
                           "cannot make the GPU context current on this thread");
    mt_problem pc = mk->p;
    pc.M = M;
    if (pc.format == MT_FORMAT_BATCHED) {
        /* A token's topk experts are distinct, so no expert gets more than M
         * rows: a smaller M needs a smaller (cheaper) batched layout. */
        if (pc.max_tokens > M)
            pc.max_tokens = M;
        return run_batched(mk, &pc, t, workspace, stream);
    }
    const mt_moe_plan *plan = &mk->plans[mk->bucket_plan[bucket_of(mk, M)]];
    return mt_moe_run(plan, &pc, t, (CUdeviceptr)(uintptr_t)workspace, workspace_size, stream,
                      mk->err, sizeof mk->err);
}

mt_status mt_modular_kernel_read_error(mt_modular_kernel *mk, int64_t M, const void *workspace)
{
    REQUIRE_READY(mk);
    if (!workspace)
        return mt_errf(mk->err, sizeof mk->err, MT_ERR_INVALID_ARG, "workspace is NULL");
    if (M < 0 || M > mk->p.M)
        return mt_errf(mk->err, sizeof mk->err, MT_ERR_SHAPE, "M=%lld is outside [0, %lld]",
                       (long long)M, (long long)mk->p.M);
    if (M == 0)
        return MT_OK;
    mt_status st = MT_OK;
    mt_problem pc = mk->p;
    pc.M = M;
    MT_CU_TRY(mt_cu.cuCtxSetCurrent(mk->ctx->gpu.ctx), mk->err, sizeof mk->err);
    if (pc.format == MT_FORMAT_STANDARD)
        return mt_moe_read_error((CUdeviceptr)(uintptr_t)workspace, &pc, mk->err, sizeof mk->err);
    int32_t f[3];
    MT_CU_TRY(mt_cu.cuMemcpyDtoH(f, (CUdeviceptr)(uintptr_t)workspace, sizeof f), mk->err,
              sizeof mk->err);
    static const char *const what[3] = {
        "is out of range [0, E)", "went to an expert that already had max_tokens rows",
        "maps (expert_map) to a local expert outside [-1, local_E)"};
    for (int i = 0; i < 3; i++)
        if (f[i] > 0) {
            int64_t slot = f[i] - 1;
            return mt_errf(mk->err, sizeof mk->err, MT_ERR_DEVICE_CHECK,
                           "topk_ids[%lld][%lld] %s (E=%lld, max_tokens=%lld): the slot was "
                           "dropped",
                           (long long)(slot / pc.topk), (long long)(slot % pc.topk), what[i],
                           (long long)pc.E,
                           (long long)(pc.max_tokens < M ? pc.max_tokens : M));
        }
    return MT_OK;
fail:
    return st;
}
