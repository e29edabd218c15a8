/*
 * Expert parallelism over NCCL (moetune/ep.h): the EP object, its
 * composition with the experts (an inner modular kernel over the received
 * tokens) and the call: pack -> NCCL exchange -> unpack -> experts -> NCCL
 * exchange back -> combine. Layouts come from runtime/ep_layout.c; the
 * device steps are the moe_ep template family (templates/moe_ep.cuh).
 *
 * May call: the runtime (rt_internal.h, the public modular kernel), the
 * driver table, the NCCL table (common/nccl_loader.h).
 */
#define MT_EP_ARGS_ONLY
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/nccl_loader.h"
#include "runtime/ep_layout.h"
#include "runtime/rt_internal.h"
#include "templates/moe_ep.cuh"

enum { EP_PACK = 0, EP_UNPACK, EP_COMBINE, EP_NOPS };
static const char *const op_names[EP_NOPS] = {"pack", "unpack", "combine"};

struct mt_ep {
    int ready;                  /* created: 0 after a failed create, whose reason err keeps */
    char err[MT_RT_MSG];
    char name[32];
    mt_context *ctx;
    mt_ep_config cfg;
    mt_problem p;               /* the rank's problem (M = max M) */
    mt_problem inner_p;         /* the experts' problem (world * cap tokens) */
    int64_t cap, first, count;
    mt_ep_wire wire;
    mt_ep_layout L;
    mt_modular_kernel *inner;
    const mt_kernel *k[EP_NOPS];
    CUdeviceptr d_rank;         /* [E] owner rank of each expert */
    CUdeviceptr d_map;          /* [E + 1] the experts' expert_map */
};

void mt_ep_config_init(mt_ep_config *cfg)
{
    if (!cfg)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->format = MT_FORMAT_STANDARD;
    cfg->world = 1;
}

static int64_t capacity_of(const mt_ep_config *cfg, const mt_problem *p)
{
    return cfg->capacity > 0 ? cfg->capacity : mt_ep_capacity_for(p->M, 1.0);
}

mt_status mt_ep_check(const mt_ep_config *cfg, const mt_experts *ex, const mt_problem *p,
                      char *msg, size_t msg_size)
{
    if (!cfg || !ex || !p)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "%s is NULL",
                       !cfg ? "the EP config" : !ex ? "the experts" : "the problem");
    if ((unsigned)cfg->format >= MT_FORMAT_COUNT_ || cfg->capacity < 0)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "bad EP config (format %d, capacity %lld)",
                       (int)cfg->format, (long long)cfg->capacity);
    if (p->M < 1)
        return mt_errf(msg, msg_size, MT_ERR_SHAPE, "the max M of an EP object must be at least 1");
    /* The rank's own problem (its tokens, the global experts) as a problem
     * of its own, before the experts' problem made from it. */
    mt_problem rank_p = *p;
    rank_p.has_expert_map = 0;
    rank_p.local_E = rank_p.E;
    rank_p.format = MT_FORMAT_STANDARD;
    rank_p.max_tokens = 0;
    char why[768];
    mt_status st = mt_problem_validate(&rank_p, why, sizeof why);
    if (st)
        return mt_errf(msg, msg_size, st, "the problem of rank %d: %s", cfg->rank, why);
    mt_problem inner;
    st = mt_ep_inner_problem(p, cfg, capacity_of(cfg, p), &inner, msg, msg_size);
    if (st)
        return st;
    mt_prepare_finalize *pf = NULL;
    if ((st = mt_prepare_finalize_create(cfg->format == MT_FORMAT_BATCHED ? MT_PF_BATCHED
                                                                          : MT_PF_STANDARD,
                                         &pf)))
        return mt_errf(msg, msg_size, st, "out of memory");
    st = mt_compose_check(pf, ex, &inner, why, sizeof why);
    mt_prepare_finalize_destroy(pf);
    if (st)
        return mt_errf(msg, msg_size, st, "EP (%s format, rank %d of %d): %s",
                       mt_act_format_name(cfg->format), cfg->rank, cfg->world, why);
    return MT_OK;
}

mt_status mt_ep_nccl_load(char *version, size_t version_size, char *msg, size_t msg_size)
{
    mt_status st = mt_nccl_load(msg, msg_size);
    if (!st && version)
        snprintf(version, version_size, "%d.%d.%d", mt_nccl.version / 10000,
                 mt_nccl.version / 100 % 100, mt_nccl.version % 100);
    return st;
}

mt_status mt_ep_comms_create_local(int n, const int *devices, void **comms, char *msg,
                                   size_t msg_size)
{
    if (n < 1 || n > MT_EP_MAX_RANKS || !devices || !comms)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "bad arguments (n=%d)", n);
    /* No driver or no GPU: say so (NCCL only says "unhandled cuda error"). */
    mt_status st = mt_cuda_load(msg, msg_size);
    if (!st)
        st = mt_nccl_load(msg, msg_size);
    if (st)
        return st;
    ncclComm_t c[MT_EP_MAX_RANKS];
    MT_NCCL_TRY(mt_nccl.ncclCommInitAll(c, n, devices), NULL, msg, msg_size);
    for (int i = 0; i < n; i++)
        comms[i] = c[i];
    return MT_OK;
fail:
    return st;
}

void mt_ep_comm_destroy(void *comm)
{
    if (comm && mt_nccl.ncclCommDestroy)
        mt_nccl.ncclCommDestroy((ncclComm_t)comm);
}

/* Load the moe_ep kernels of this dtype and wire (op, dtype, wire). */
static mt_status load_kernels(mt_ep *ep)
{
    const char *dt = mt_dtype_name(ep->p.dtype);
    const char *names[EP_NOPS];
    mt_variant v[EP_NOPS];
    mt_status st = MT_OK;
    for (int o = 0; o < EP_NOPS && !st; o++) {
        const char *wire = o == EP_COMBINE ? "elem" : mt_ep_wire_kernel_name(ep->wire);
        const char *kv[] = {"op", op_names[o], "dtype", dt, "wire", wire};
        st = mt_rt_default_find("moe_ep", kv, 3, &v[o], ep->err, sizeof ep->err);
        names[o] = v[o].name;
    }
    if (st)
        return st;
    mt_context *ctx = ep->ctx;
    if (!(st = mt_rt_lock(ctx, ep->err, sizeof ep->err)))
        st = mt_rt_load_kernels(ctx, NULL, ctx->arch, names, EP_NOPS, ep->k, ep->err,
                                sizeof ep->err);
    mt_rt_unlock(ctx);
    return st;
}

/* The device tables: owner rank of each expert, the experts' map. */
static mt_status upload_tables(mt_ep *ep)
{
    mt_status st = MT_OK;
    const int64_t E = ep->p.E;
    int32_t *rank = malloc((size_t)E * sizeof *rank), *map = malloc((size_t)(E + 1) * sizeof *map);
    if (!rank || !map) {
        st = mt_errf(ep->err, sizeof ep->err, MT_ERR_NO_MEMORY, "out of memory");
        goto fail;
    }
    for (int64_t e = 0; e < E; e++)
        rank[e] = mt_ep_expert_owner(E, ep->cfg.world, e);
    mt_ep_inner_map(E, ep->cfg.world, ep->cfg.rank, map);
    MT_CU_TRY(mt_cu.cuCtxSetCurrent(ep->ctx->gpu.ctx), ep->err, sizeof ep->err);
    MT_CU_TRY(mt_cu.cuMemAlloc(&ep->d_rank, (size_t)E * sizeof *rank), ep->err, sizeof ep->err);
    MT_CU_TRY(mt_cu.cuMemAlloc(&ep->d_map, (size_t)(E + 1) * sizeof *map), ep->err, sizeof ep->err);
    MT_CU_TRY(mt_cu.cuMemcpyHtoD(ep->d_rank, rank, (size_t)E * sizeof *rank), ep->err,
              sizeof ep->err);
    MT_CU_TRY(mt_cu.cuMemcpyHtoD(ep->d_map, map, (size_t)(E + 1) * sizeof *map), ep->err,
              sizeof ep->err);
    /* Pageable copies may return before their DMA lands, and the caller's
     * (non-blocking) stream is not ordered after the legacy one. */
    MT_CU_TRY(mt_cu.cuCtxSynchronize(), ep->err, sizeof ep->err);
fail:
    free(rank);
    free(map);
    return st;
}

static mt_status check_comm(mt_ep *ep)
{
    mt_status st = MT_OK;
    int count = 0, rank = -1;
    if (!ep->cfg.comm)
        return mt_errf(ep->err, sizeof ep->err, MT_ERR_INVALID_ARG,
                       "the EP config has no NCCL communicator");
    MT_NCCL_TRY(mt_nccl.ncclCommCount((ncclComm_t)ep->cfg.comm, &count), ep->cfg.comm, ep->err,
                sizeof ep->err);
    MT_NCCL_TRY(mt_nccl.ncclCommUserRank((ncclComm_t)ep->cfg.comm, &rank), ep->cfg.comm, ep->err,
                sizeof ep->err);
    if (count != ep->cfg.world || rank != ep->cfg.rank)
        return mt_errf(ep->err, sizeof ep->err, MT_ERR_INVALID_ARG,
                       "the communicator is rank %d of %d, the EP config says rank %d of %d", rank,
                       count, ep->cfg.rank, ep->cfg.world);
    return MT_OK;
fail:
    return st;
}

mt_status mt_ep_create(mt_context *ctx, const mt_ep_config *cfg, const mt_experts *ex,
                       const mt_problem *p, mt_ep **out)
{
    if (!out)
        return MT_ERR_INVALID_ARG;
    mt_ep *ep = calloc(1, sizeof *ep);
    *out = ep;
    if (!ep)
        return MT_ERR_NO_MEMORY;
    mt_status st = mt_rt_context_usable(ctx, ep->err, sizeof ep->err);
    if (st)
        return st;
    st = mt_ep_check(cfg, ex, p, ep->err, sizeof ep->err);
    if (st)
        return st;
    ep->ctx = ctx;
    ep->cfg = *cfg;
    ep->p = *p;
    ep->p.has_expert_map = 0;
    ep->p.local_E = p->E;
    ep->p.format = MT_FORMAT_STANDARD;
    ep->cap = capacity_of(cfg, p);
    ep->wire = mt_ep_wire_for(p);
    snprintf(ep->name, sizeof ep->name, "ep-%s", mt_act_format_name(cfg->format));
    mt_ep_expert_range(p->E, cfg->world, cfg->rank, &ep->first, &ep->count);
    mt_ep_inner_problem(p, cfg, ep->cap, &ep->inner_p, NULL, 0);
    if ((st = mt_nccl_load(ep->err, sizeof ep->err)) || (st = check_comm(ep)))
        return st;
    mt_prepare_finalize *pf = NULL;
    if ((st = mt_prepare_finalize_create(
             cfg->format == MT_FORMAT_BATCHED ? MT_PF_BATCHED : MT_PF_STANDARD, &pf)))
        return mt_errf(ep->err, sizeof ep->err, st, "out of memory");
    st = mt_modular_kernel_create(ctx, pf, ex, &ep->inner_p, &ep->inner);
    mt_prepare_finalize_destroy(pf);
    if (st)
        return mt_errf(ep->err, sizeof ep->err, st, "composing the experts of rank %d: %s",
                       cfg->rank, mt_modular_kernel_errmsg(ep->inner));
    if ((st = load_kernels(ep)) || (st = upload_tables(ep)))
        return st;
    st = mt_ep_layout_make(&ep->p, cfg->world, ep->cap, ep->wire,
                           mt_modular_kernel_workspace_size(ep->inner), &ep->L, ep->err,
                           sizeof ep->err);
    ep->ready = st == MT_OK;
    return st;
}

void mt_ep_destroy(mt_ep *ep)
{
    if (!ep)
        return;
    if (ep->ctx && (ep->d_rank || ep->d_map)) {
        mt_cu.cuCtxSetCurrent(ep->ctx->gpu.ctx);
        if (ep->d_rank)
            mt_cu.cuMemFree(ep->d_rank);
        if (ep->d_map)
            mt_cu.cuMemFree(ep->d_map);
    }
    mt_modular_kernel_destroy(ep->inner);
    free(ep);
}

const char *mt_ep_errmsg(const mt_ep *ep) { return ep ? ep->err : "no EP object"; }
const char *mt_ep_name(const mt_ep *ep) { return ep ? ep->name : "(null)"; }
mt_act_format mt_ep_format(const mt_ep *ep) { return ep ? ep->cfg.format : MT_FORMAT_COUNT_; }
mt_ep_wire mt_ep_wire_of(const mt_ep *ep) { return ep ? ep->wire : MT_EP_WIRE_COUNT_; }
int64_t mt_ep_capacity(const mt_ep *ep) { return ep ? ep->cap : 0; }
size_t mt_ep_workspace_size(const mt_ep *ep) { return ep && ep->ready ? ep->L.total : 0; }

void mt_ep_local_experts(const mt_ep *ep, int64_t *first, int64_t *count)
{
    if (first)
        *first = ep ? ep->first : 0;
    if (count)
        *count = ep ? ep->count : 0;
}

/* What a call may pass for a pointer: required, optional (a rank with no
 * tokens may keep its buffers or pass NULL), or forbidden (the EP object
 * decides it). */
enum { PTR_FORBIDDEN = 0, PTR_REQUIRED = 1, PTR_OPTIONAL = 2 };

static mt_status need(mt_ep *ep, const void *ptr, const char *what, int want, size_t align)
{
    if (want == PTR_REQUIRED && !ptr)
        return mt_errf(ep->err, sizeof ep->err, MT_ERR_INVALID_ARG, "%s is NULL", what);
    if (want == PTR_FORBIDDEN && ptr)
        return mt_errf(ep->err, sizeof ep->err, MT_ERR_INVALID_ARG,
                       "%s must be NULL (the EP object owns the expert placement)", what);
    if ((uintptr_t)ptr % align)
        return mt_errf(ep->err, sizeof ep->err, MT_ERR_ALIGNMENT, "%s (%p) is not %zu-byte aligned",
                       what, ptr, align);
    return MT_OK;
}

static mt_status check_call(mt_ep *ep, int64_t M, const mt_moe_tensors *t, const void *ws,
                            size_t ws_size)
{
    if (!ep->ready)   /* creation failed: its reason stays the message */
        return MT_ERR_INVALID_ARG;
    if (!t)
        return mt_errf(ep->err, sizeof ep->err, MT_ERR_INVALID_ARG, "the tensors are NULL");
    if (M < 0 || M > ep->p.M)
        return mt_errf(ep->err, sizeof ep->err, MT_ERR_SHAPE,
                       "M=%lld is outside [0, %lld] (the max M of this EP object)", (long long)M,
                       (long long)ep->p.M);
    const int tok = M > 0 ? PTR_REQUIRED : PTR_OPTIONAL;
    mt_status st;
    if ((st = need(ep, t->hidden, "hidden", tok, 16)) || (st = need(ep, t->out, "out", tok, 16)) ||
        (st = need(ep, t->topk_ids, "topk_ids", tok, 16)) ||
        (st = need(ep, t->topk_weights, "topk_weights", tok, 16)) ||
        (st = need(ep, t->w1, "w1", PTR_REQUIRED, 16)) ||
        (st = need(ep, t->w2, "w2", PTR_REQUIRED, 16)) ||
        (st = need(ep, t->expert_map, "expert_map", PTR_FORBIDDEN, 1)) ||
        (st = need(ep, t->expert_num_tokens, "expert_num_tokens", PTR_FORBIDDEN, 1)) ||
        (st = mt_moe_check_quant_tensors(&ep->p.quant, t, 1, ep->err, sizeof ep->err)) ||
        (st = need(ep, ws, "workspace", PTR_REQUIRED, 256)))
        return st;
    if (ws_size < ep->L.total)
        return mt_errf(ep->err, sizeof ep->err, MT_ERR_INVALID_ARG,
                       "workspace of %zu bytes is too small: this EP object needs %zu", ws_size,
                       ep->L.total);
    return MT_OK;
}

static mt_ep_args args_of(const mt_ep *ep, int64_t M, const mt_moe_tensors *t, char *ws)
{
    const mt_ep_layout *L = &ep->L;
    int32_t *flags = (int32_t *)(ws + L->flags);
    mt_ep_args a = {
        .hidden = t->hidden, .topk_ids = t->topk_ids, .topk_weights = t->topk_weights,
        .expert_rank = (const int32_t *)(uintptr_t)ep->d_rank, .send = (uint8_t *)(ws + L->send),
        .send_count = flags + MT_EP_FLAGS, .send_row = (int32_t *)(ws + L->send_row),
        .error_flags = flags, .recv = (const uint8_t *)(ws + L->recv),
        .recv_count = (const int32_t *)(ws + L->recv_count), .x = ws + L->x,
        .x_ids = (int32_t *)(ws + L->x_ids), .x_weights = (float *)(ws + L->x_weights),
        .ret = ws + L->ret, .out = t->out, .slot_bytes = (int64_t)L->slot_bytes,
        .slot_ids = (int64_t)L->slot_ids, .slot_weights = (int64_t)L->slot_weights,
        .slot_scales = (int64_t)L->slot_scales, .slot_rows = (int64_t)L->slot_rows, .K = L->K,
        .M = (int32_t)M, .topk = (int32_t)L->topk, .num_experts = (int32_t)ep->p.E,
        .world = L->world, .cap = (int32_t)L->cap, .pad_id = (int32_t)ep->p.E};
    return a;
}

static mt_status launch(mt_ep *ep, int op, int64_t items, const mt_ep_args *a, CUstream stream)
{
    mt_status st = MT_OK;
    const mt_kernel *k = ep->k[op];
    if (items <= 0)
        return MT_OK;
    const int64_t grid = items < 65535 * 8 ? items : 65535 * 8;
    void *params[] = {(void *)a};
    MT_CU_TRY(mt_cu.cuLaunchKernel(k->fn, (unsigned)grid, 1, 1, (unsigned)k->v.threads, 1, 1,
                                   (unsigned)k->v.smem_bytes, stream, params, NULL),
              ep->err, sizeof ep->err);
    return MT_OK;
fail:
    return st;
}

static mt_status make_current(mt_ep *ep)
{
    CUcontext cur = NULL;
    if (mt_cu.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == ep->ctx->gpu.ctx)
        return MT_OK;
    if (mt_cu.cuCtxSetCurrent(ep->ctx->gpu.ctx) != CUDA_SUCCESS)
        return mt_errf(ep->err, sizeof ep->err, MT_ERR_CUDA,
                       "cannot make the GPU context current on this thread");
    return MT_OK;
}

/* Phase 1: clear the flags and counts, pack the rows per peer. */
static mt_status phase_pack(mt_ep *ep, int64_t M, const mt_moe_tensors *t, char *ws, CUstream s)
{
    mt_status st = make_current(ep);
    if (st)
        return st;
    MT_CU_TRY(mt_cu.cuMemsetD32Async((CUdeviceptr)(uintptr_t)(ws + ep->L.flags), 0,
                                     (size_t)(MT_EP_FLAGS + ep->L.world), s),
              ep->err, sizeof ep->err);
    mt_ep_args a = args_of(ep, M, t, ws);
    return launch(ep, EP_PACK, M, &a, s);
fail:
    return st;
}

/* Phase 3: the received rows into the experts' layout, then the experts. */
static mt_status phase_experts(mt_ep *ep, int64_t M, const mt_moe_tensors *t, char *ws, CUstream s)
{
    mt_status st = make_current(ep);
    if (st)
        return st;
    mt_ep_args a = args_of(ep, M, t, ws);
    const int64_t rows = (int64_t)ep->L.world * ep->cap;
    if ((st = launch(ep, EP_UNPACK, rows, &a, s)))
        return st;
    mt_moe_tensors it = *t;
    it.hidden = ws + ep->L.x;
    it.topk_ids = (const int32_t *)(ws + ep->L.x_ids);
    it.topk_weights = (const float *)(ws + ep->L.x_weights);
    it.expert_map = (const int32_t *)(uintptr_t)ep->d_map;
    it.expert_num_tokens = NULL;
    it.out = ws + ep->L.y;
    st = mt_modular_kernel_run(ep->inner, rows, &it, ws + ep->L.inner, ep->L.inner_bytes, s);
    if (st)
        return mt_errf(ep->err, sizeof ep->err, st, "experts of rank %d: %s", ep->cfg.rank,
                       mt_modular_kernel_errmsg(ep->inner));
    return MT_OK;
}

/* Phase 2 (dispatch) and 4 (return) for one rank, inside a group. */
static mt_status exchange(mt_ep *ep, char *ws, int back, CUstream s)
{
    mt_status st = MT_OK;
    const mt_ep_layout *L = &ep->L;
    ncclComm_t comm = (ncclComm_t)ep->cfg.comm;
    const size_t rows_bytes = (size_t)L->cap * (size_t)L->K * L->es;
    for (int p = 0; p < L->world; p++) {
        if (back) {
            MT_NCCL_TRY(mt_nccl.ncclSend(ws + L->y + (size_t)p * rows_bytes, rows_bytes, ncclUint8, p,
                                         comm, s),
                        comm, ep->err, sizeof ep->err);
            MT_NCCL_TRY(mt_nccl.ncclRecv(ws + L->ret + (size_t)p * rows_bytes, rows_bytes, ncclUint8,
                                         p, comm, s),
                        comm, ep->err, sizeof ep->err);
            continue;
        }
        int32_t *count = (int32_t *)(ws + L->flags) + MT_EP_FLAGS;
        MT_NCCL_TRY(mt_nccl.ncclSend(count + p, 1, ncclInt32, p, comm, s), comm, ep->err,
                    sizeof ep->err);
        MT_NCCL_TRY(mt_nccl.ncclRecv((int32_t *)(ws + L->recv_count) + p, 1, ncclInt32, p, comm, s),
                    comm, ep->err, sizeof ep->err);
        MT_NCCL_TRY(mt_nccl.ncclSend(ws + L->send + (size_t)p * L->slot_bytes, L->slot_bytes,
                                     ncclUint8, p, comm, s),
                    comm, ep->err, sizeof ep->err);
        MT_NCCL_TRY(mt_nccl.ncclRecv(ws + L->recv + (size_t)p * L->slot_bytes, L->slot_bytes,
                                     ncclUint8, p, comm, s),
                    comm, ep->err, sizeof ep->err);
    }
    return MT_OK;
fail:
    return st;
}

/* Every rank's exchange in one NCCL group (a single thread driving several
 * GPUs deadlocks otherwise). The group is always closed. */
static mt_status exchange_all(mt_ep *const *eps, int n, void *const *ws, int back,
                              const CUstream *streams)
{
    mt_status st = MT_OK;
    mt_ep *bad = eps[0];
    ncclResult_t r = mt_nccl.ncclGroupStart();
    if (r != ncclSuccess)
        return mt_nccl_fail(r, NULL, "ncclGroupStart()", __FILE__, __LINE__, bad->err,
                            sizeof bad->err);
    for (int i = 0; i < n && !st; i++)
        if ((st = exchange(eps[i], ws[i], back, streams[i])))
            bad = eps[i];
    r = mt_nccl.ncclGroupEnd();
    if (r != ncclSuccess && !st)
        st = mt_nccl_fail(r, bad->cfg.comm, "ncclGroupEnd()", __FILE__, __LINE__, bad->err,
                          sizeof bad->err);
    return st;
}

mt_status mt_ep_run_group(mt_ep *const *eps, int n, const int64_t *M, const mt_moe_tensors *t,
                          void *const *ws, const size_t *ws_size, const CUstream *streams)
{
    if (!eps || n < 1 || n > MT_EP_MAX_RANKS || !M || !t || !ws || !ws_size || !streams)
        return MT_ERR_INVALID_ARG;
    mt_status st = MT_OK;
    for (int i = 0; i < n && !st; i++)
        st = !eps[i] ? MT_ERR_INVALID_ARG : check_call(eps[i], M[i], &t[i], ws[i], ws_size[i]);
    for (int i = 0; i < n && !st; i++)
        st = phase_pack(eps[i], M[i], &t[i], ws[i], streams[i]);
    if (!st)
        st = exchange_all(eps, n, ws, 0, streams);
    for (int i = 0; i < n && !st; i++)
        st = phase_experts(eps[i], M[i], &t[i], ws[i], streams[i]);
    if (!st)
        st = exchange_all(eps, n, ws, 1, streams);
    for (int i = 0; i < n && !st; i++) {
        mt_ep_args a = args_of(eps[i], M[i], &t[i], ws[i]);
        /* combine is grid-stride over 8-element chunks, a thread each */
        const int64_t threads = eps[i]->k[EP_COMBINE]->v.threads;
        if (!(st = make_current(eps[i])))
            st = launch(eps[i], EP_COMBINE, (M[i] * (eps[i]->L.K / 8) + threads - 1) / threads, &a,
                        streams[i]);
    }
    return st;
}

mt_status mt_ep_run(mt_ep *ep, int64_t M, const mt_moe_tensors *t, void *workspace,
                    size_t workspace_size, CUstream stream)
{
    if (!ep)
        return MT_ERR_INVALID_ARG;
    return mt_ep_run_group(&ep, 1, &M, t, &workspace, &workspace_size, &stream);
}

mt_status mt_ep_read_error(mt_ep *ep, int64_t M, const void *workspace)
{
    if (!ep || !ep->ready)
        return MT_ERR_INVALID_ARG;
    if (!workspace)
        return mt_errf(ep->err, sizeof ep->err, MT_ERR_INVALID_ARG, "workspace is NULL");
    if (M < 0 || M > ep->p.M)
        return mt_errf(ep->err, sizeof ep->err, MT_ERR_SHAPE, "M=%lld is outside [0, %lld]",
                       (long long)M, (long long)ep->p.M);
    mt_status st = make_current(ep);
    if (st)
        return st;
    const char *ws = workspace;
    int32_t f[2];
    MT_CU_TRY(mt_cu.cuMemcpyDtoH(f, (CUdeviceptr)(uintptr_t)(ws + ep->L.flags), sizeof f), ep->err,
              sizeof ep->err);
    const int64_t topk = ep->p.topk, W = ep->cfg.world;
    if (f[0] > 0)
        return mt_errf(ep->err, sizeof ep->err, MT_ERR_DEVICE_CHECK,
                       "topk_ids[%lld][%lld] is out of range [0, %lld): the slot was ignored",
                       (long long)((f[0] - 1) / topk), (long long)((f[0] - 1) % topk),
                       (long long)ep->p.E);
    if (f[1] > 0)
        return mt_errf(ep->err, sizeof ep->err, MT_ERR_DEVICE_CHECK,
                       "token %lld of rank %d did not fit the buffer for rank %lld (capacity %lld "
                       "rows per peer): its experts there were skipped; raise the capacity",
                       (long long)((f[1] - 1) / W), ep->cfg.rank, (long long)((f[1] - 1) % W),
                       (long long)ep->cap);
    st = mt_modular_kernel_read_error(ep->inner, (int64_t)W * ep->cap, ws + ep->L.inner);
    if (st)
        return mt_errf(ep->err, sizeof ep->err, st, "the experts of rank %d (on the received "
                       "rows): %s", ep->cfg.rank, mt_modular_kernel_errmsg(ep->inner));
    return MT_OK;
fail:
    return st;
}
