/*
 * cuBLAS experts for the batched format: GEMM1 and GEMM2 as one
 * cublasGemmStridedBatchedEx each over every local expert with m = the
 * capacity (max_tokens), so that no per-expert count is read on the host
 * and the call can be captured into a graph; the activation-and-mul between
 * them is moetune's act_and_mul kernel (it skips rows past each count).
 * Rows past an expert's count are computed on whatever the buffers hold and
 * ignored by the combine.
 *
 * May call: cuBLAS, the driver table, common.
 */
#include <cublas_v2.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_internal.h"
#include "templates/moe_args.h"

/* cuBLAS's own workspace, carved out of the caller's: without one set per
 * call cuBLAS would use its default pool, allocated behind our back. */
#define RT_CUBLAS_WS (32u << 20)

struct rt_cublas {
    cublasHandle_t h;
};

#define CUBLAS_TRY(call)                                                                      \
    do {                                                                                      \
        cublasStatus_t s_ = (call);                                                           \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                    \
            st = mt_errf(msg, msg_size, MT_ERR_CUBLAS, "%s failed: %s", #call,                \
                         cublasGetStatusString(s_));                                          \
            goto fail;                                                                        \
        }                                                                                     \
    } while (0)

static size_t up256(size_t n) { return (n + 255) & ~(size_t)255; }

size_t mt_rt_cublas_workspace(const mt_problem *p, int64_t cap)
{
    size_t rows = (size_t)(p->local_E * cap), es = mt_dtype_size(p->dtype);
    return up256(rows * (size_t)(2 * p->N) * es) + up256(rows * (size_t)p->N * es) + RT_CUBLAS_WS;
}

mt_status mt_rt_cublas_create(rt_cublas **out, char *msg, size_t msg_size)
{
    mt_status st = MT_OK;
    rt_cublas *c = calloc(1, sizeof *c);
    *out = NULL;
    if (!c)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    CUBLAS_TRY(cublasCreate(&c->h));
    /* Deterministic: no atomics-based reductions that change with timing. */
    CUBLAS_TRY(cublasSetAtomicsMode(c->h, CUBLAS_ATOMICS_NOT_ALLOWED));
    *out = c;
    return MT_OK;
fail:
    mt_rt_cublas_destroy(c);
    return st;
}

void mt_rt_cublas_destroy(rt_cublas *c)
{
    if (!c)
        return;
    if (c->h)
        cublasDestroy(c->h);
    free(c);
}

mt_status mt_rt_cublas_run(rt_cublas *c, const mt_problem *p, const mt_kernel *act, const void *x,
                           const int32_t *counts, const void *w1, const void *w2, void *y,
                           void *ws, CUstream stream, char *msg, size_t msg_size)
{
    mt_status st = MT_OK;
    const int64_t cap = p->max_tokens, LE = p->local_E, K = p->K, N = p->N;
    const size_t rows = (size_t)(LE * cap), es = mt_dtype_size(p->dtype);
    char *c1 = ws, *c2 = c1 + up256(rows * (size_t)(2 * N) * es);
    char *cws = c2 + up256(rows * (size_t)N * es);
    const cudaDataType_t dt = p->dtype == MT_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_TRY(cublasSetStream(c->h, (cudaStream_t)stream));
    CUBLAS_TRY(cublasSetWorkspace(c->h, cws, RT_CUBLAS_WS));
    /* Row-major C[cap, 2N] = X[cap, K] * W1[2N, K]^T is, column-major,
     * C^T[2N, cap] = W1^T... i.e. op(A) = T on the [K, 2N] view of W1. */
    CUBLAS_TRY(cublasGemmStridedBatchedEx(
        c->h, CUBLAS_OP_T, CUBLAS_OP_N, (int)(2 * N), (int)cap, (int)K, &one, w1, dt, (int)K,
        2 * N * K, x, dt, (int)K, cap * K, &zero, c1, dt, (int)(2 * N), cap * 2 * N, (int)LE,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    mt_act_args a = {.in = c1, .out = c2, .expert_num_tokens = counts, .rows = (int32_t)rows,
                     .N = (int32_t)N, .num_experts = (int32_t)p->E,
                     .max_tokens = (int32_t)cap};
    int64_t blocks = ((int64_t)rows * (N / 8) + act->v.threads - 1) / act->v.threads;
    void *params[] = {&a};
    if (blocks > 65535 * 8)
        blocks = 65535 * 8;
    if (blocks > 0)
        MT_CU_TRY(mt_cu.cuLaunchKernel(act->fn, (unsigned)blocks, 1, 1, (unsigned)act->v.threads,
                                       1, 1, (unsigned)act->v.smem_bytes, stream, params, NULL),
                  msg, msg_size);
    CUBLAS_TRY(cublasGemmStridedBatchedEx(
        c->h, CUBLAS_OP_T, CUBLAS_OP_N, (int)K, (int)cap, (int)N, &one, w2, dt, (int)N, K * N, c2,
        dt, (int)N, cap * N, &zero, y, dt, (int)K, cap * K, (int)LE, CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT));
    return MT_OK;
fail:
    return st;
}
