/*
 * `moetune bench`: time the fused-MoE pipeline of one shape over an M sweep:
 * every default grouped-GEMM variant composed into the whole standard-format
 * pipeline (align -> gemm1 -> act -> gemm2 -> reduce, or with the activation
 * fused), the batched-experts stage alone, and cuBLAS grouped GEMMs around
 * the same activation kernel on the same batched data. With a tuned
 * database (db_path) also the pipeline libmoetune would take from it
 * (tuner/tuned_plan.h), checked once against the CPU oracle
 * (tuner/plan_check.h) and timed the same way.
 *
 * JSON line per M (--json): label, quant, dtype, activation, E, topk, K, N,
 * M, experts_hit, reps, candidates (timed per format), default_us,
 * default_kernel, best_us, best_min_us, best_max_us (spread of the best's
 * repetitions), roofline_us, best_kernel, tuned_us, tuned_min_us,
 * tuned_max_us, tuned_kernel (its gemm1), tuned_from_m (the M of the entry
 * used), tuned_source ("tuned": this SKU, "same-cc": another SKU of the
 * compute capability), tuned_error (why a found entry was not timed),
 * tuned_steps_us (the tuned pipeline's steps timed one by one: an object
 * of step name -> us, for the steps the pipeline runs), experts_only_us,
 * cublas_us, cublas_graph. Values not measured are null
 * (all tuned_* without a database or an entry). scripts/perf-table.py
 * reads it.
 */
#ifndef MT_TUNER_BENCH_H
#define MT_TUNER_BENCH_H

#include <stdio.h>
#include "moetune/problem.h"
#include "moetune/variant.h"
#include "runtime/moe_launch.h"

typedef struct mt_bench_opts {
    mt_problem shape;        /* M ignored */
    const char *label;
    const int64_t *Ms;
    int nM;
    int reps, warmup;
    int max_candidates;      /* > 0: time the untuned default and the best-modelled
                                others (tuner/select.h), this many in all, per
                                M and format; 0: every default variant */
    int pipeline_only;       /* 1: leave out the batched experts stage and cuBLAS
                                (their JSON fields are null) */
    const char *db_path;     /* optional: a tuned database; adds the tuned column */
    /* optional, per Ms[i]: route so that this many experts are hit (the
     * first such of 4096 seeds from the usual one; 0: the usual seed), to
     * time the work of another run's routing of the same shape (a peer's
     * table). Ignored with an expert map. */
    const int *experts_hit_want;
    FILE *json;              /* optional: one JSON object per M, one per line */
    FILE *svg;               /* optional: a chart of time and roofline fraction vs M */
} mt_bench_opts;

/* One timed pipeline: median and spread of the repetitions, and its gemm1. */
typedef struct mt_bench_time {
    double us, min_us, max_us;   /* INFINITY: not timed */
    char name[MT_VARIANT_NAME_MAX];
} mt_bench_time;

/* What bench measured at one M (the table row, the JSON line, the chart). */
typedef struct mt_bench_row {
    mt_problem p;            /* standard format, M set */
    int experts_hit, candidates;
    uint64_t seed;           /* of the data (mt_problem_data_make) */
    mt_bench_time dflt, best;
    double roofline_us, flops, weight_bytes;
    int tuned_state;         /* 0: no database, 1: no entry, 2: found */
    mt_bench_time tuned;     /* found: name = gemm1; us INFINITY when not timed */
    double tuned_step_us[MT_STEP_ALL];   /* each step alone; 0: step not run */
    int64_t tuned_from_m;
    const char *tuned_source;    /* "tuned" or "same-cc" (static) */
    char tuned_error[256];       /* found but not timed: why */
    int experts_measured;    /* 0 with pipeline_only */
    double experts_only_us;
    int cublas_measured, cublas_graph;
    double cublas_us;
} mt_bench_row;

/* Run the benchmark (needs a GPU; a database that cannot be opened fails
 * first, MT_ERR_IO / MT_ERR_DB with the db module's message naming the file). */
mt_status mt_bench_run(const mt_bench_opts *o, char *msg, size_t msg_size);

/* The markdown table's header (with the tuned columns when db_path is set)
 * and one row. */
void mt_bench_print_header(FILE *f, const mt_bench_opts *o);
void mt_bench_print_row(FILE *f, const mt_bench_opts *o, const mt_bench_row *r);

/* One JSON line for r (fields listed above), flushed. */
void mt_bench_write_json(FILE *f, const mt_bench_opts *o, const mt_bench_row *r);

/* The SVG chart of rows (o->nM of them, M increasing) into o->svg: time of
 * the untuned default, the best, cuBLAS and (when any row has it) the tuned
 * pipeline; the roofline fraction of the best and the tuned. */
mt_status mt_bench_write_chart(const mt_bench_opts *o, const mt_bench_row *rows, char *msg,
                               size_t msg_size);

#endif
