/*
 * The untuned default choices, shared by the runtime's built-in fallback and
 * the tuner's "default" baseline, so both mean the same pipeline.
 */
#ifndef MT_COMMON_DEFAULTS_H
#define MT_COMMON_DEFAULTS_H

#include <stdint.h>
#include "moetune/problem.h"

/* Average rows per local expert: M * topk / local_E. */
double mt_rows_per_expert(const mt_problem *p);

/* BLOCK_M of the default grouped-GEMM tile for p: 16 below 24 rows per
 * expert, 64 below 192, 128 beyond. The default pipeline is the templates'
 * default_set tile with that BLOCK_M, GEMM1 with the activation fused into
 * its epilogue, GEMM2 the same tile storing. */
int64_t mt_default_block_m(const mt_problem *p);

#endif
