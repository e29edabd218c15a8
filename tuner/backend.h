/*
 * What the tuning loop needs from a measuring backend, as a struct of
 * function pointers plus a context: the GPU backend measures real kernels,
 * the fake backend (tests) returns deterministic numbers and can fault or
 * hang on request, so that isolation, resume and the database path are
 * tested on machines without a GPU.
 *
 * A backend lives in the tuning worker process (never in the parent, which
 * must stay free of CUDA so that it survives a faulting kernel).
 */
#ifndef MT_TUNER_BACKEND_H
#define MT_TUNER_BACKEND_H

#include <stddef.h>
#include "moetune/db.h"
#include "moetune/problem.h"
#include "moetune/variant.h"

typedef struct mt_tune_backend mt_tune_backend;

/* One measurement: the pipeline ran, matched the reference within tolerance
 * (ok = 1) or not (ok = 0, reason says why), and took time_us end to end. */
typedef struct mt_measure {
    int ok;
    double rel_err;
    double time_us;
    char reason[256];
} mt_measure;

struct mt_tune_backend {
    const char *name;
    void *self;
    /* The machine, for provenance and the database key's SKU. */
    mt_status (*provenance)(void *self, mt_db_provenance *out, char *arch /* [16] out */,
                            char *msg, size_t msg_size);
    /* Grouped-GEMM variants valid for p on this machine (dtype, quant and
     * format of p; every epilogue), malloc'd; defaults_only: only the
     * templates' default set. */
    mt_status (*gemm_variants)(void *self, const mt_problem *p, int defaults_only,
                               mt_variant **out, size_t *n, char *msg, size_t msg_size);
    /* Optional (NULL: nothing to do): compile and load these variants now,
     * in parallel, ahead of the measurements that need them. A failure
     * leaves the failing variant to its measurement, which records it. */
    mt_status (*preload)(void *self, const mt_variant *v, size_t n, char *msg, size_t msg_size);
    /* Prepare one (problem, M): data and the reference result, the data
     * made from seed (the worker's mt_tuning_seed) under routing. */
    mt_status (*open_item)(void *self, const mt_problem *p, mt_routing routing, uint64_t seed,
                           char *msg, size_t msg_size);
    void (*close_item)(void *self);
    /* Check and time gemm1 + gemm2 (with align/act/reduce) on the open item,
     * launched as a plan of launch_late (mt_moe_plan.launch_late). A status
     * other than MT_OK means the backend itself failed. */
    mt_status (*measure)(void *self, const mt_variant *gemm1, const mt_variant *gemm2,
                         int launch_late, mt_measure *out, char *msg, size_t msg_size);
    /* Time the cuBLAS pipeline on the open item (ok = 0 if unavailable). */
    mt_status (*measure_cublas)(void *self, mt_measure *out, char *msg, size_t msg_size);
    /* The compiled kernel of a variant, for the database (caller frees). */
    mt_status (*kernel)(void *self, const mt_variant *v, mt_db_kernel *out, char *msg,
                        size_t msg_size);
    /* The whole pipeline around gemm1 + gemm2 on the open item: each step's
     * variant and role ("align", "quant", "gemm1", "act", "gemm2",
     * "reduce"), in execution order, as the database stores it. */
    mt_status (*pipeline)(void *self, const mt_variant *gemm1, const mt_variant *gemm2,
                          mt_variant steps[6], const char *roles[6], int *n, char *msg,
                          size_t msg_size);
    void (*destroy)(void *self);
};

/* The GPU backend on device `ordinal` (opens the driver and the generator).
 * Env MT_TUNE_INJECT_FAULT=<substring> makes a candidate whose gemm1 name
 * contains it fault on the GPU (an unmapped input address), to prove on
 * real hardware that a faulting kernel is isolated, recorded, survived.
 * Env MT_TUNE_INJECT_HANG=<substring> launches an endless kernel on the
 * timing stream ahead of a candidate whose gemm1 name contains it, so that
 * its check hangs until the supervisor's per-candidate timeout kills the
 * worker (docs/RELIABILITY.md). */
mt_status mt_tune_backend_gpu(int ordinal, int reps, mt_tune_backend *out, char *msg,
                              size_t msg_size);
/* The fake backend for `device`. Env MT_FAKE_FAULT=<substring> makes
 * measuring a candidate whose gemm1 name contains it kill the process;
 * MT_FAKE_HANG the same but sleep forever; MT_FAKE_LOG=<file> appends each
 * measured candidate; MT_FAKE_DELAY_MS slows each measurement;
 * MT_FAKE_LATE=<factor> is the time of a pipeline launched late over its
 * time launched early (default 1.03: a little slower, as at most points on
 * the H200); MT_FAKE_LUCKY="<gemm1> <gemm2>" makes that pair's first time
 * in each launch order read 0.85 of its time (the final round's test);
 * MT_FAKE_BROKEN_DEVICE=<n>[,<n>...] makes those devices fail to open. */
mt_status mt_tune_backend_fake(int device, mt_tune_backend *out, char *msg, size_t msg_size);

#endif
