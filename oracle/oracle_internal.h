/*
 * Shared pieces of the CPU oracle (not public): the thread pool, weight
 * rows, activation quantization and the expert engine that every public
 * entry point (standard and batched) drives.
 *
 * May call: libc, libm, pthreads, moetune/numeric.h.
 */
#ifndef MT_ORACLE_INTERNAL_H
#define MT_ORACLE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "moetune/oracle.h"

/* ---- threads (pool.c) ---- */

/* Workers to use for ntasks tasks: min(online CPUs, ntasks), at least 1. */
int mto_workers(int64_t ntasks);
/* Run fn(ctx, task, worker) for task in [0, ntasks) on `workers` threads
 * (worker in [0, workers)); the calling thread is worker 0. If a thread
 * cannot be started the others take its share. */
void mto_parallel(int64_t ntasks, int workers, void (*fn)(void *ctx, int64_t task, int worker),
                  void *ctx);

/* ---- quantization (quant.c) ---- */

/* Row `row` of one local expert's w1 (which = 0, [2N, K]) or w2 (which = 1,
 * [K, N]) as floats into dst: the dequantized weight for modes none and
 * weight-only, the raw quantized values (scales not applied) for w8a8. */
void mto_weight_row(const mt_problem *p, const mt_moe_tensors *t, int which, int64_t e,
                    int64_t row, float *dst);
/* w8a8: the per-group weight scales of that row, one per GEMM group (see
 * mto_groups); NULL for the other modes. */
const float *mto_weight_row_scales(const mt_problem *p, const mt_moe_tensors *t, int which,
                                   int64_t e, int64_t row);
/* Width of a scaling group along a reduction of length n: 128 for block
 * modes, n otherwise (one group). */
int64_t mto_group_len(const mt_problem *p, int64_t n);
/* Number of activation scales per row for a reduction of length n. */
int64_t mto_groups(const mt_problem *p, int64_t n);
/* w8a8 modes: quantize X rows of n floats in x into q (values as floats)
 * and scales s [X * mto_groups(p, n)]. static_scale: the given per-tensor
 * scale (static modes) or NULL for a dynamic one. */
void mto_quant_rows(const mt_problem *p, const float *static_scale, const float *x, int64_t X,
                    int64_t n, float *q, float *s);
/* Dot product of a and w (n floats) accumulated in double; with scales,
 * sum over groups of len g of dot_g * sa[g] * sw[g]. sa == NULL: plain. */
double mto_scaled_dot(const float *a, const float *w, int64_t n, int64_t g, const float *sa,
                      const float *sw);

/* ---- the engine (engine.c) ---- */

/* The rows the engine computes: each row is one (token, slot) or one
 * batched row, with its GEMM1 input and its local expert. */
typedef struct mto_rows {
    int64_t R;              /* rows */
    int64_t X;              /* source rows */
    const float *x;         /* [X, K] GEMM1 inputs after rounding point (1) */
    const int64_t *xrow;    /* [R] source row of each row */
    const int32_t *expert;  /* [R] local expert id in [0, local_E) */
    const float *yscale;    /* [R] router weight multiplied into y, or NULL */
    const int64_t *yidx;    /* [R] row of y to write, -1 = GEMM2 not needed */
} mto_rows;

/* Compute y[yidx[r]] (K floats, rounding point 6) for every row r with
 * yidx[r] >= 0. GEMM1 runs for all R rows, so dynamic per-tensor scales
 * cover all of them. MT_ERR_NO_MEMORY on allocation failure. */
mt_status mto_run(const mt_problem *p, const mt_moe_tensors *t, const mto_rows *rows,
                  float *y, char *msg, size_t msg_size);

/* Check the tensors a problem needs are present (and static scales valid). */
mt_status mto_check_tensors(const mt_problem *p, const mt_moe_tensors *t, int standard,
                            char *msg, size_t msg_size);

#endif
