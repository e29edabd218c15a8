/*
 * cuBLAS grouped-GEMM baseline (see cublas_baseline.h).
 */
#include "tuner/cublas_baseline.h"

#include <cublas_v2.h>
#include <stdlib.h>
#include <string.h>

#include "common/cuda_driver.h"
#include "common/util.h"
#include "templates/moe_args.h"

struct mt_cublas_baseline {
    mt_problem p;
    cublasHandle_t handle;
    const mt_kernel *act;
    int groups;
    int *m1, *n1, *k1, *m2, *n2, *k2, *lda1, *ldb1, *ldc1, *lda2, *ldb2, *ldc2, *gsize;
    cublasOperation_t *ta, *tb;
    float *alpha, *beta;
    CUdeviceptr ptrs;        /* 6 arrays of `groups` device pointers */
    CUdeviceptr c1, c2;      /* [rows, 2N] and [rows, N] */
    const int32_t *d_counts;
    void *out;
};

#define MT_CUBLAS_TRY(call)                                                             \
    do {                                                                                \
        cublasStatus_t s_ = (call);                                                     \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                              \
            st = mt_errf(msg, msg_size, MT_ERR_CUBLAS, "%s failed: %s (%s:%d)", #call,   \
                         cublasGetStatusString(s_), __FILE__, __LINE__);                \
            goto fail;                                                                  \
        }                                                                               \
    } while (0)

mt_status mt_cublas_baseline_create(const mt_problem *p, const int32_t *counts,
                                    const mt_moe_tensors *t, const mt_kernel *act,
                                    mt_cublas_baseline **out, char *msg, size_t msg_size)
{
    mt_status st = MT_OK;
    *out = NULL;
    /* The baseline multiplies bf16/fp16 operands: quantized weights are
     * narrower than that, and cuBLAS would read past them. */
    if (p->quant.mode != MT_QUANT_NONE)
        return mt_errf(msg, msg_size, MT_ERR_UNSUPPORTED,
                       "the cuBLAS baseline takes unquantized problems only, not %s",
                       mt_quant_mode_name(p->quant.mode));
    mt_cublas_baseline *b = calloc(1, sizeof *b);
    const int64_t LE = p->local_E;
    void **hp = NULL;
    if (!b)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    b->p = *p;
    b->act = act;
    b->d_counts = t->expert_num_tokens;
    b->out = t->out;
    int **arrays[] = {&b->m1, &b->n1, &b->k1, &b->m2, &b->n2, &b->k2, &b->lda1, &b->ldb1,
                      &b->ldc1, &b->lda2, &b->ldb2, &b->ldc2, &b->gsize};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        if (!(*arrays[i] = calloc((size_t)LE, sizeof(int))))
            goto oom;
    b->ta = calloc((size_t)LE, sizeof *b->ta);
    b->tb = calloc((size_t)LE, sizeof *b->tb);
    b->alpha = calloc((size_t)LE, sizeof(float));
    b->beta = calloc((size_t)LE, sizeof(float));
    hp = calloc((size_t)(6 * LE), sizeof(void *));
    if (!b->ta || !b->tb || !b->alpha || !b->beta || !hp)
        goto oom;
    const size_t es = mt_dtype_size(p->dtype);
    const int64_t rows = LE * p->max_tokens;
    MT_CU_TRY(mt_cu.cuMemAlloc(&b->c1, (size_t)(rows * 2 * p->N) * es), msg, msg_size);
    MT_CU_TRY(mt_cu.cuMemAlloc(&b->c2, (size_t)(rows * p->N) * es), msg, msg_size);
    MT_CU_TRY(mt_cu.cuMemAlloc(&b->ptrs, (size_t)(6 * LE) * sizeof(void *)), msg, msg_size);
    /* Row-major C[m, n] = A[m, k] W[n, k]^T is column-major C^T = W^T' A^T:
     * cuBLAS m = n, n = m, op(W) = T, op(A) = N. */
    for (int64_t e = 0; e < LE; e++) {
        if (counts[e] == 0)
            continue;
        int g = b->groups++;
        const int64_t r0 = e * p->max_tokens;
        b->ta[g] = CUBLAS_OP_T;
        b->tb[g] = CUBLAS_OP_N;
        b->alpha[g] = 1.0f;
        b->beta[g] = 0.0f;
        b->gsize[g] = 1;
        b->m1[g] = (int)(2 * p->N), b->n1[g] = counts[e], b->k1[g] = (int)p->K;
        b->lda1[g] = (int)p->K, b->ldb1[g] = (int)p->K, b->ldc1[g] = (int)(2 * p->N);
        b->m2[g] = (int)p->K, b->n2[g] = counts[e], b->k2[g] = (int)p->N;
        b->lda2[g] = (int)p->N, b->ldb2[g] = (int)p->N, b->ldc2[g] = (int)p->K;
        hp[0 * LE + g] = (char *)t->w1 + (size_t)(e * 2 * p->N * p->K) * es;
        hp[1 * LE + g] = (char *)t->hidden + (size_t)(r0 * p->K) * es;
        hp[2 * LE + g] = (char *)(uintptr_t)b->c1 + (size_t)(r0 * 2 * p->N) * es;
        hp[3 * LE + g] = (char *)t->w2 + (size_t)(e * p->K * p->N) * es;
        hp[4 * LE + g] = (char *)(uintptr_t)b->c2 + (size_t)(r0 * p->N) * es;
        hp[5 * LE + g] = (char *)t->out + (size_t)(r0 * p->K) * es;
    }
    MT_CU_TRY(mt_cu.cuMemcpyHtoD(b->ptrs, hp, (size_t)(6 * LE) * sizeof(void *)), msg, msg_size);
    /* Pageable copies may return before their DMA lands. */
    MT_CU_TRY(mt_cu.cuCtxSynchronize(), msg, msg_size);
    MT_CUBLAS_TRY(cublasCreate(&b->handle));
    free(hp);
    *out = b;
    return MT_OK;
oom:
    st = mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
fail:
    free(hp);
    mt_cublas_baseline_destroy(b);
    return st;
}

mt_status mt_cublas_baseline_run(void *ctx, CUstream stream, char *msg, size_t msg_size)
{
    mt_cublas_baseline *b = ctx;
    mt_status st = MT_OK;
    const mt_problem *p = &b->p;
    const int64_t LE = p->local_E;
    cudaDataType_t dt = p->dtype == MT_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    void **P = (void **)(uintptr_t)b->ptrs;
    if (b->groups == 0)
        return MT_OK;
    MT_CUBLAS_TRY(cublasSetStream(b->handle, (cudaStream_t)stream));
    MT_CUBLAS_TRY(cublasGemmGroupedBatchedEx(
        b->handle, b->ta, b->tb, b->m1, b->n1, b->k1, b->alpha, (const void *const *)(P + 0 * LE),
        dt, b->lda1, (const void *const *)(P + 1 * LE), dt, b->ldb1, b->beta, P + 2 * LE, dt,
        b->ldc1, b->groups, b->gsize, CUBLAS_COMPUTE_32F));
    mt_act_args ac = {.in = (void *)(uintptr_t)b->c1, .out = (void *)(uintptr_t)b->c2,
                      .expert_num_tokens = b->d_counts, .rows = (int32_t)(LE * p->max_tokens),
                      .N = (int32_t)p->N, .num_experts = (int32_t)p->E,
                      .max_tokens = (int32_t)p->max_tokens};
    void *params[] = {&ac};
    int64_t blocks = (LE * p->max_tokens * (p->N / 8) + b->act->v.threads - 1) / b->act->v.threads;
    MT_CU_TRY(mt_cu.cuLaunchKernel(b->act->fn, (unsigned)(blocks > 524280 ? 524280 : blocks), 1, 1,
                                   (unsigned)b->act->v.threads, 1, 1, 0, stream, params, NULL),
              msg, msg_size);
    MT_CUBLAS_TRY(cublasGemmGroupedBatchedEx(
        b->handle, b->ta, b->tb, b->m2, b->n2, b->k2, b->alpha, (const void *const *)(P + 3 * LE),
        dt, b->lda2, (const void *const *)(P + 4 * LE), dt, b->ldb2, b->beta, P + 5 * LE, dt,
        b->ldc2, b->groups, b->gsize, CUBLAS_COMPUTE_32F));
    return MT_OK;
fail:
    return st;
}

void mt_cublas_baseline_destroy(mt_cublas_baseline *b)
{
    if (!b)
        return;
    if (b->handle)
        cublasDestroy(b->handle);
    if (b->ptrs)
        mt_cu.cuMemFree(b->ptrs);
    if (b->c1)
        mt_cu.cuMemFree(b->c1);
    if (b->c2)
        mt_cu.cuMemFree(b->c2);
    int *arrays[] = {b->m1, b->n1, b->k1, b->m2, b->n2, b->k2, b->lda1, b->ldb1,
                     b->ldc1, b->lda2, b->ldb2, b->ldc2, b->gsize};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        free(arrays[i]);
    free(b->ta);
    free(b->tb);
    free(b->alpha);
    free(b->beta);
    free(b);
}
