/*
 * Which grouped-GEMM tiles are worth timing for a problem: a cheap model of
 * the time of one GEMM (weight bytes re-read per row block, padding waste,
 * how evenly the CTAs fill the GPU), used to rank the valid variants so the
 * tuner compiles and times only the promising ones.
 */
#ifndef MT_TUNER_SELECT_H
#define MT_TUNER_SELECT_H

#include <stddef.h>
#include "moetune/problem.h"
#include "moetune/variant.h"

/* Modelled microseconds of GEMM1 (second = 0) or GEMM2 of p with tile v
 * (split-K tiles: more CTAs in flight, plus the partial sums' traffic). */
double mt_gemm_model_us(const mt_variant *v, const mt_problem *p, int second, int sm_count);

/* Can v serve as GEMM1 (second = 0) or GEMM2 of p? A tile that reads its A
 * rows by TMA (ALOAD=tma) needs them laid out per expert, which the
 * standard format's GEMM1 input is not (runtime/moe_launch.c refuses such a
 * plan); the topk sum in the epilogue ("sum", "lastsum") is GEMM2's of the
 * standard format (grouped_gemv's "sum" for a topk of at most
 * MT_GEMV_SUM_MAX_TOPK); a tile that quantizes its own A rows as they are
 * (grouped_gemv AQUANT=cta) is GEMM1's, for K up to MT_GEMV_AQ_MAX_K and
 * without router weights on the input; one that activates them first
 * (AQUANT=silu, gelu) is GEMM2's, with the problem's activation, for up to
 * MT_GEMV_AQ_MAX_K values of rows (one, or for "sum" a token's topk slots;
 * the GEMM1 before it must store its output as it is: mt_moe_plan_check);
 * one that quantizes its activated output for GEMM2 (OQUANT=last) is
 * GEMM1's; so is one that runs GEMM2 in its launch (CHAIN). */
int mt_gemm_role_fits(const mt_variant *v, const mt_problem *p, int second);

/* Can g2 follow g1 (both fitting their roles)? A GEMM2 that applies the
 * activation to GEMM1's stored output (AQUANT=silu, gelu) needs a GEMM1
 * that stores it as it is (epilogue "store"); a GEMM1 that runs GEMM2 in
 * its launch (CHAIN) takes that tile only (mt_variant_is_chain_gemm2);
 * every other pair can. */
int mt_gemm_pair_fits(const mt_variant *g1, const mt_variant *g2);

/* Does kernel variant v add its rows into the output by atomics (a tiled
 * family's epilogue "sum": fp32 reductions in no fixed order, so not
 * bitwise reproducible run to run)? grouped_gemv's "sum" and "lastsum" add
 * a token's slots in order. */
int mt_variant_sums_by_atomics(const mt_variant *v);

/* Up to `max` variants of `all` for one stage, best modelled first:
 * stage 1 = GEMM1 candidates (epilogue "store" or p's activation, each with
 * a store sibling present, mt_gemm_role_fits), stage 2 = GEMM2 candidates ("store", or
 * a topk sum: grouped_gemv's "sum" and "lastsum", and a tiled family's "sum" when its
 * store twin is not in the pool, else stage 3 times it) whose
 * BLOCK_M equals block_m, of any SPLIT_K (GEMM2's K is N, often far
 * shorter than GEMM1's, so it may want another split). Writes indices into
 * out; returns the count (0 when out of memory). */
size_t mt_select_stage(const mt_variant *all, size_t n, const mt_problem *p, int stage,
                       int64_t block_m, int sm_count, int max, size_t *out);
/* Stage 2's candidates for GEMM1 tile gemm1: mt_select_stage's at its
 * BLOCK_M, less the GEMM2s that cannot follow it (mt_gemm_pair_fits), left
 * out before the ranking. */
size_t mt_select_gemm2_for(const mt_variant *all, size_t n, const mt_problem *p, const mt_variant *gemm1,
                           int sm_count, int max, size_t *out);
/* mt_select_stage with the store siblings (twins) looked for in pool
 * (npool variants) instead of all: for a GEMM1 search that filters leave
 * without store tiles (`--param gemm1:epilogue=silu`), pool is the whole
 * variant space. */
size_t mt_select_stage_in(const mt_variant *all, size_t n, const mt_variant *pool, size_t npool,
                          const mt_problem *p, int stage, int64_t block_m, int sm_count, int max,
                          size_t *out);

/* Stage 3's neighbours of base along param: the variants of all that
 * differ from it in param only, one per other value; for a value that no
 * such variant has, one that also differs in a parameter that must follow
 * param (PIPE: BLOAD, for a pipeline a tile lacks with its weight loads;
 * then EPI_COLS, since a wide tile runs "persist" only with its epilogue
 * in column chunks; EPI_COLS: CLUSTER; SPLIT_K: PIPE, since a swapped
 * warpgroup-MMA tile splits K only in "ws"; BLOCK_K: STAGES, and of the
 * neighbours with one BLOCK_K the one whose stages hold nearest base's
 * bytes of K). Along BLOCK_N only a swapped tile (SWAP yes) has neighbours.
 * Writes indices into out (room for n); returns the count. */
size_t mt_select_neighbours(const mt_variant *all, size_t n, const mt_variant *base, const char *param,
                            size_t *out);

/* Is u the GEMM2 that goes with GEMM1 tile v: v's store sibling (the same
 * tile with the epilogue "store"), or, for a tile that quantizes its own A
 * rows (AQUANT=cta), that sibling's twin that takes them from the act step
 * (AQUANT=step: the act step's GEMM2, which stage 3 may trade for its
 * AQUANT=silu or gelu twin)? For a tile that runs GEMM2 in its launch
 * (CHAIN), the GEMM2 tile it runs (mt_variant_is_chain_gemm2). */
int mt_is_gemm2_sibling(const mt_variant *u, const mt_variant *v);

/* Index of v's GEMM2 sibling (mt_is_gemm2_sibling) in all, or (size_t)-1. */
size_t mt_find_store_sibling(const mt_variant *all, size_t n, const mt_variant *v);

/* Index of the untuned default GEMM1 among the default-set variants
 * `defaults` (common/defaults.h: BLOCK_M by rows per expert, activation
 * fused), or (size_t)-1. Its GEMM2 is its store sibling. */
size_t mt_find_default(const mt_variant *defaults, size_t n, const mt_problem *p);

#endif
