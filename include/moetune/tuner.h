/*
 * moetune tuner: find the fastest correct pipeline for each (problem, M) on
 * this GPU and store it, with provenance and the winning kernels, in a
 * SQLite database (see db.h).
 *
 * Crash safety: the GPU work runs in a worker process; the calling process
 * never touches CUDA. A candidate that faults or hangs (past the
 * per-candidate time limit) kills only the worker: it is recorded as
 * rejected with the reason, and a new worker resumes where the last one
 * stopped. Every measurement is committed as soon as it is made, so killing
 * the whole tuner loses at most the candidate in flight, and running the
 * same command again resumes.
 */
#ifndef MOETUNE_TUNER_H
#define MOETUNE_TUNER_H

#include <stdio.h>
#include "moetune/problem.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MT_TUNE_MAX_M 64
#define MT_TUNE_MAX_ONLY 16

typedef struct mt_tune_opts {
    mt_problem shape;          /* the problem key; M is ignored */
    const char *label;         /* a name for logs ("qwen3-30b-a3b") */
    int64_t Ms[MT_TUNE_MAX_M];
    int nM;
    const char *routing;       /* "uniform" (default), "balanced", "skewed" */
    const char *db_path;
    const char *backend;       /* "gpu" (default) or "fake" (tests) */
    int device;                /* GPU ordinal */
    int max_candidates;        /* per stage; 0: 12 */
    double candidate_timeout_s; /* 0: 30 s */
    int reps;                  /* timed repetitions; 0: 20 */
    /* The final round: the fastest `finalists` correct tuned pipelines of
     * an M within 3 % of the best, and the untuned default, are timed again
     * in turn, three times each; each keeps the median of those times, and
     * the entry is the fastest of them, so that a pipeline that read fast
     * once does not win on it (more passes, up to four, where one left out
     * is faster on its one time). 0: 4; < 0: no final round. */
    int finalists;
    int isolate;               /* run the backend in a worker process (default on) */
    FILE *log;                 /* progress lines; NULL: quiet */
    /* Several GPUs: one supervised worker per listed device, the M values
     * dealt round-robin between them, all writing the one database. */
    int devices[64];
    int ndevices;              /* 0: just `device` */
    /* Several machines: take only work items i with i % shard_count ==
     * shard_index (items are the M values in the given order). */
    int shard_index, shard_count;   /* 0, 0: everything */
    /* Search only the GEMM variants with these parameter values (name
     * "BLOCK_M", value "16"); several on one name admit any of them; a
     * family that lacks the parameter is not affected. role: 0 filters
     * both GEMMs' candidates, 1 only GEMM1's, 2 only GEMM2's (the filters
     * on one name that apply to a GEMM admit any of their values; a stage-1
     * GEMM1 whose own GEMM2 tile the GEMM2 filters refuse is timed with
     * the best-modelled GEMM2 they admit). The untuned default pipeline is
     * timed regardless (it is the baseline). */
    struct {
        const char *name, *value;
        int role;
    } only[MT_TUNE_MAX_ONLY];
    int nonly;
    /* M values an earlier run left, finished or cut short, are tuned again:
     * their candidate log is forgotten, the stored entry is timed again with
     * the new candidates and the run's winner replaces it. Within the run
     * (a worker restarted after a fault) an M is retuned once, and one cut
     * short by the fault resumes; a new run with retune starts over. */
    int retune;
    /* retune without a search: at an M whose stored pipeline is of these
     * templates and passes its oracle check again, time only the stored
     * pipelines of that M and of its neighbours, compiled from the templates
     * at hand, the default pipeline and the other launch order of the
     * fastest tuned one; the fastest replaces the entry (the log names it).
     * For a template change that keeps what each kernel does (a header every
     * kernel includes), it makes the entries current in a fraction of a
     * retune's time. The full search, as under retune, where there is no
     * such stored pipeline (never tuned, kernels of other templates) or it
     * faults or computes wrong here. */
    int retime;
    /* GEMM2 may add its rows into the output by atomics (the tiled
     * families' epilogue "sum": the topk sum in fp32 reductions whose order
     * varies, so results are not bitwise reproducible run to run): stage 3
     * times such a twin of its GEMM2 only with this set. Off by default; a
     * GEMM2 filter that admits only "sum" asks for it too. */
    int atomic_sums;
    /* Set by mt_tune_run: names the marks of the M values this run started
     * and finished. Leave "". */
    char run_id[48];
} mt_tune_opts;

/* Which of the n work items shard I of N takes: writes their indices to out
 * and returns the count. Every item belongs to exactly one shard. */
int mt_tune_shard(int n, int index, int count, int *out);

/* The default M sweep (18 values, 1 .. 4096). */
void mt_tune_default_ms(mt_tune_opts *o);

typedef struct mt_tune_row {
    int64_t M;
    char winner[16];           /* backend: "moetune", "default" or "cublas" */
    int launch_late;           /* the winner's GEMMs wait before reading (launch=late) */
    char gemm1[256], gemm2[256];
    double time_us, default_us, cublas_us, rel_err;
    int candidates, rejected;
} mt_tune_row;

typedef struct mt_tune_summary {
    int nrows;
    mt_tune_row rows[MT_TUNE_MAX_M];
    int worker_restarts;       /* workers lost to faults/timeouts */
    double wall_s;
    int unfinished;            /* M values of this shard with no entry */
    int64_t unfinished_M[MT_TUNE_MAX_M];
    char sku[64];
    int sm_count;
    int idle_shard;            /* this shard had no M value (more shards than M): nothing ran */
} mt_tune_summary;

/* Run a tuning job. The message names what failed. A database whose SQLite
 * file is damaged (mt_db_verify_storage) is refused (MT_ERR_DB) before any
 * work, and left as it was; one the run created is removed again when the
 * run fails before writing anything into it. A shard with no work touches
 * no file (summary->idle_shard). */
mt_status mt_tune_run(const mt_tune_opts *o, mt_tune_summary *summary, char *msg, size_t msg_size);

/* Print the summary table (per M: winner, time, TFLOP/s, weight GB/s,
 * roofline fraction, speed-up over the default and over cuBLAS). */
void mt_tune_print_summary(const mt_tune_opts *o, const mt_tune_summary *s, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
