/*
 * The oracle check of a composed pipeline (see plan_check.h).
 */
#include "tuner/plan_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cuda_driver.h"
#include "common/util.h"
#include "moetune/oracle.h"

mt_status mt_plan_ref_make(mt_plan_ref *r, const mt_problem_data *d, char *msg, size_t msg_size)
{
    const mt_problem *q = &d->p;
    memset(r, 0, sizeof *r);
    r->ntokens = q->M < MT_CHECK_SAMPLE_TOKENS ? q->M : MT_CHECK_SAMPLE_TOKENS;
    for (int64_t i = 0; i < r->ntokens; i++)
        r->tokens[i] = r->ntokens > 1 ? i * (q->M - 1) / (r->ntokens - 1) : 0;
    const size_t es = mt_dtype_size(q->dtype);
    r->ref = calloc((size_t)(q->M * q->K), sizeof(float));
    r->got = malloc((size_t)(q->M * q->K) * es + 16);
    if (!r->ref || !r->got)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    mt_status st = mt_oracle_fused_moe(q, &d->h_std, r->tokens, r->ntokens, r->ref, msg, msg_size);
    if (st)
        return st;
    if (q->format == MT_FORMAT_BATCHED) {
        CUresult cr = mt_cu.cuMemAlloc(&r->comb, (size_t)(q->M * q->K) * es + 16);
        if (cr != CUDA_SUCCESS) {
            r->comb = 0;
            return mt_cu_fail(cr, "cuMemAlloc", __FILE__, __LINE__, msg, msg_size);
        }
    }
    return MT_OK;
}

void mt_plan_ref_free(mt_plan_ref *r)
{
    if (r->comb)
        mt_cu.cuMemFree(r->comb);
    free(r->ref);
    free(r->got);
    memset(r, 0, sizeof *r);
}

mt_status mt_plan_call_enqueue(void *call, CUstream stream, char *msg, size_t msg_size)
{
    const mt_plan_call *c = call;
    return mt_moe_run_steps(c->plan, c->p, c->t, c->ws, c->ws_size,
                            c->steps ? c->steps : MT_STEPS_EVERY, stream, msg, msg_size);
}

mt_status mt_plan_check(const mt_plan_ref *r, const mt_moe_plan *plan, const mt_problem_data *d,
                        const mt_moe_tensors *t, CUdeviceptr ws, size_t ws_size, CUstream stream,
                        mt_enqueue_fn before, void *before_ctx, mt_measure *out, char *msg,
                        size_t msg_size)
{
    const mt_problem *p = &d->p;
    const size_t es = mt_dtype_size(p->dtype);
    const int batched = p->format == MT_FORMAT_BATCHED;
    mt_status st = MT_OK;
    memset(out, 0, sizeof *out);
    /* Poisoned output: a step that writes nothing leaves NaN behind. On the
     * run's stream: a plain cuMemsetD8 rides the legacy stream, which does
     * not order a non-blocking one, and could land after the results. */
    size_t out_bytes = (size_t)((batched ? p->local_E * p->max_tokens : p->M) * p->K) * es;
    MT_CU_TRY(mt_cu.cuMemsetD8Async((CUdeviceptr)(uintptr_t)t->out, 0xFF, out_bytes, stream), msg,
              msg_size);
    if (before && (st = before(before_ctx, stream, msg, msg_size)))
        return st;
    if ((st = mt_moe_run(plan, p, t, ws, ws_size, stream, msg, msg_size)))
        return st;
    CUdeviceptr result = (CUdeviceptr)(uintptr_t)t->out;
    if (batched) {
        MT_CU_TRY(mt_cu.cuMemsetD8Async(r->comb, 0xFF, (size_t)(p->M * p->K) * es, stream), msg,
                  msg_size);
        if ((st = mt_moe_combine(plan, p, result, d->d_slot_row,
                                 p->apply_router_weight_on_input
                                     ? 0 : (CUdeviceptr)(uintptr_t)d->d.topk_weights,
                                 r->comb, stream, msg, msg_size)))
            return st;
        result = r->comb;
    }
    MT_CU_TRY(mt_cu.cuStreamSynchronize(stream), msg, msg_size);
    if (!batched && (st = mt_moe_read_error(ws, p, msg, msg_size)))
        return st;
    MT_CU_TRY(mt_cu.cuMemcpyDtoH(r->got, result, (size_t)(p->M * p->K) * es), msg, msg_size);
    int64_t nans = 0;
    out->rel_err = mt_rel_l2(r->got, p->dtype, r->ref, r->tokens, r->ntokens, p->K, &nans);
    const double tol = p->dtype == MT_DTYPE_BF16 ? 1e-2 : 5e-3;
    if (nans || !(out->rel_err < tol)) {
        snprintf(out->reason, sizeof out->reason,
                 "wrong result: rel_l2 %.3g (tolerance %.0e), %lld non-finite", out->rel_err, tol,
                 (long long)nans);
        return MT_OK;
    }
    out->ok = 1;
    return MT_OK;
fail:
    return st;
}
