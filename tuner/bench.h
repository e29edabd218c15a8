/*
 * `moetune bench`: time the fused-MoE pipeline of one shape over an M sweep:
 * every default grouped-GEMM variant composed into the whole standard-format
 * pipeline (align -> gemm1 -> act -> gemm2 -> reduce, or with the activation
 * fused), the batched-experts stage alone, and cuBLAS grouped GEMMs around
 * the same activation kernel on the same batched data.
 */
#ifndef MT_TUNER_BENCH_H
#define MT_TUNER_BENCH_H

#include <stdio.h>
#include "moetune/problem.h"

typedef struct mt_bench_opts {
    mt_problem shape;        /* M ignored */
    const char *label;
    const int64_t *Ms;
    int nM;
    int reps, warmup;
    FILE *json;              /* optional: one JSON object per M, one per line */
    FILE *svg;               /* optional: a chart of time and roofline fraction vs M */
} mt_bench_opts;

mt_status mt_bench_run(const mt_bench_opts *o, char *msg, size_t msg_size);

#endif
