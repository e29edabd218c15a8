/*
 * The untuned default choices, shared by the runtime's built-in fallback and
 * the tuner's "default" baseline, so both mean the same pipeline.
 */
#ifndef MT_COMMON_DEFAULTS_H
#define MT_COMMON_DEFAULTS_H

#include <stdint.h>
#include "moetune/problem.h"
#include "moetune/variant.h"

/* Average rows per local expert: M * topk / local_E. */
double mt_rows_per_expert(const mt_problem *p);

/* BLOCK_M of the default grouped-GEMM tile for p: 16 below 24 rows per
 * expert, 64 below 192, 128 beyond. The default pipeline is the templates'
 * default_set tile with that BLOCK_M, GEMM1 with the activation fused into
 * its epilogue, GEMM2 the same tile storing. */
int64_t mt_default_block_m(const mt_problem *p);

/* The default GEMM tile for p on arch ("sm_90a", "sm_80", ...): a family,
 * BLOCK_M and, where the family's default set has several tiles of that
 * BLOCK_M, the parameter values that single one out. On sm_90a, tiles of
 * 128 rows run on warpgroup MMA (grouped_gemm_sm90), warp-specialized
 * with TMA weight loads: 128x256 for 16-bit operands, 128x128 for 8-bit
 * ones (measured on the H200, docs/PERFORMANCE.md); everything else is
 * grouped_gemm. */
typedef struct mt_default_gemm {
    const char *family;
    char block_m[8];
    const char *kv[4];   /* name, value, name, value */
    int nkv;             /* pairs in kv */
} mt_default_gemm;
void mt_default_gemm_for(const mt_problem *p, const char *arch, mt_default_gemm *out);

/* 1 when GEMM variant v is the default tile for p on v's arch (any
 * epilogue: the caller picks GEMM1's fused or GEMM2's store). */
int mt_default_gemm_is(const mt_variant *v, const mt_problem *p);

#endif
