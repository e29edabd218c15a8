/*
 * Taking the atomics out of a tuned database without a GPU. A tiled GEMM2
 * with the epilogue "sum" (grouped_gemm, grouped_gemm_sm90) adds each
 * token's slots into the output by fp32 reductions whose order varies from
 * run to run, so a pipeline with it is not bitwise reproducible; the tuner
 * times such tiles only under --atomic-sums. For every entry whose GEMM2
 * is one, this picks from the entry's own candidate log (the same tuning
 * run, each candidate checked against the oracle there before it was
 * timed) the fastest candidate with the same GEMM1 whose GEMM2 is not one,
 * compiles that GEMM2 (NVRTC, the kernel cache) and stores it, and makes
 * that pipeline the entry with its measured time (the old entry stays in
 * the history). The other steps stay: with GEMM1 unchanged, they are the
 * same. An entry with no such candidate is reported and left.
 *
 * May call: gen (find, compile, template hash), db.
 */
#ifndef MT_TUNER_DETERMINISTIC_H
#define MT_TUNER_DETERMINISTIC_H

#include <stddef.h>
#include "moetune/db.h"
#include "moetune/gen.h"
#include "tuner/select.h"   /* mt_variant_sums_by_atomics */

typedef struct mt_deterministic_stats {
    int entries;     /* entries whose GEMM2 sums by atomics */
    int replaced;    /* ... given a deterministic candidate of their run */
    int left;        /* ... left as they were: no such candidate */
} mt_deterministic_stats;

/* Replace the entries of db whose GEMM2 sums by atomics (file comment);
 * with dry_run, report only. report (may be NULL) gets one line per such
 * entry. stats may be NULL. Each entry is one transaction: an error stops
 * the walk, the entries replaced before stay replaced. */
mt_status mt_make_deterministic(mt_db *db, mt_gen *g, int dry_run,
                                void (*report)(const char *line, void *ctx), void *ctx,
                                mt_deterministic_stats *stats, char *msg, size_t msg_size);

#endif
