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
    return up256(rows * (size_t)(2 * p->N) * es) + up256(rows * (size_t)p->N * es) + MT_RT_CUBLAS_WS;
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

mt_status mt_rt_cublas_gemm(rt_cublas *c, mt_dtype dtype, int64_t experts, int64_t rows,
                            int64_t n, int64_t k, const void *w, const void *x, void *y,
                            char *msg, size_t msg_size)
{
    mt_status st = MT_OK;
    const cudaDataType_t dt = dtype == MT_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    const float one = 1.0f, zero = 0.0f;
    /* Row-major Y[rows, n] = X[rows, k] * W[n, k]^T is, column-major,
     * Y^T[n, rows] = op(W^T)... i.e. op(A) = T on the [k, n] view of W. */
    CUBLAS_TRY(cublasGemmStridedBatchedEx(
        c->h, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)rows, (int)k, &one, w, dt, (int)k, n * k, x,
        dt, (int)k, rows * k, &zero, y, dt, (int)n, rows * n, (int)experts, CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT));
    return MT_OK;
fail:
    return st;
}

mt_status mt_rt_cublas_bind(rt_cublas *c, void *ws, CUstream stream, char *msg, size_t msg_size)
{
    mt_status st = MT_OK;
    CUBLAS_TRY(cublasSetStream(c->h, (cudaStream_t)stream));
    CUBLAS_TRY(cublasSetWorkspace(c->h, ws, MT_RT_CUBLAS_WS));
    return MT_OK;
fail:
    return st;
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
    if ((st = mt_rt_cublas_bind(c, cws, stream, msg, msg_size)) ||
        (st = mt_rt_cublas_gemm(c, p->dtype, LE, cap, 2 * N, K, w1, x, c1, msg, msg_size)))
        return st;
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
    return mt_rt_cublas_gemm(c, p->dtype, LE, cap, K, N, w2, c2, y, msg, msg_size);
fail:
    return st;
}
