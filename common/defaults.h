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

/* BLOCK_M of the default grouped-GEMM tile for p off sm_90a: 16 below 24
 * rows per expert, 64 below 192, 128 beyond. The default pipeline is the
 * templates' default_set tile that mt_default_gemm_for names, GEMM1 with
 * the activation fused into its epilogue, GEMM2 the same tile storing. */
int64_t mt_default_block_m(const mt_problem *p);

/* The default GEMM tile for p on arch ("sm_90a", "sm_80", ...): a family,
 * BLOCK_M and the parameter values that single one tile of the family's
 * default set out. Off sm_90a (and for the weight-only modes) grouped_gemm
 * with mt_default_block_m's rows. On sm_90a grouped_gemm_sm90 (warpgroup
 * MMA, weights by TMA) in every regime, after the H200's tuned winners
 * (common/defaults.c says which tile where): swapped 16- or 32-row tiles
 * under 24 rows per expert (16-bit and block-scaled operands; the
 * per-tensor and per-token modes keep grouped_gemm's 16-row tile there),
 * 64-row tiles below 64 rows per expert (16-bit operands, warp-specialized)
 * or 192 (8-bit ones, pingpong), 128-row warp-specialized tiles beyond:
 * 128x256 for 16-bit operands, 128x128 for 8-bit ones; always one 128-byte
 * panel of K a stage (the set's two-panel tiles are for the GPU tests). */
typedef struct mt_default_gemm {
    const char *family;
    char block_m[8];
    const char *kv[16];  /* name, value, ...: up to eight pairs */
    int nkv;             /* pairs in kv */
} mt_default_gemm;
void mt_default_gemm_for(const mt_problem *p, const char *arch, mt_default_gemm *out);

/* 1 when GEMM variant v is the default tile for p on v's arch (any
 * epilogue: the caller picks GEMM1's fused or GEMM2's store). */
int mt_default_gemm_is(const mt_variant *v, const mt_problem *p);

#endif
