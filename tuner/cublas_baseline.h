/*
 * The cuBLAS baseline of the experts stage: GEMM1 and GEMM2 of every expert
 * as one cublasGemmGroupedBatchedEx call each (one group per expert with
 * tokens), around moetune's own activation kernel, on the batched-experts
 * layout. The per-expert token counts must be known on the host (cuBLAS
 * takes the GEMM sizes as host arrays), so this serves benchmarks and the
 * tuner's comparison; it is not graph-safe for unknown routing.
 *
 * May call: cuBLAS, runtime/moe_launch, the driver table.
 */
#ifndef MT_TUNER_CUBLAS_BASELINE_H
#define MT_TUNER_CUBLAS_BASELINE_H

#include <cuda.h>
#include "moetune/problem.h"
#include "runtime/moe_launch.h"

typedef struct mt_cublas_baseline mt_cublas_baseline;

/* p: batched problem; counts: host [local_E]; t: device tensors (batched
 * hidden, w1, w2, out); act: the act_and_mul kernel to run between.
 * MT_ERR_UNSUPPORTED, before touching the GPU, for a quantized problem. */
mt_status mt_cublas_baseline_create(const mt_problem *p, const int32_t *counts,
                                    const mt_moe_tensors *t, const mt_kernel *act,
                                    mt_cublas_baseline **out, char *msg, size_t msg_size);
/* Enqueue GEMM1 -> act -> GEMM2 on stream (signature of mt_enqueue_fn). */
mt_status mt_cublas_baseline_run(void *ctx, CUstream stream, char *msg, size_t msg_size);
void mt_cublas_baseline_destroy(mt_cublas_baseline *b);

#endif
