/*
 * The kernel argument of grouped_gemv's slot-routed variants (BLOCK_M = 1):
 * mt_gemm_args and what routing rows without the alignment step needs.
 * Shared by the host (runtime/moe_launch.c) and the device code
 * (grouped_gemv.cuh), like moe_args.h; kept apart from it so that the other
 * families' sources, and the hashes of their templates, stay as they are.
 */
#ifndef MT_GEMV_ARGS_H
#define MT_GEMV_ARGS_H

#include "moe_args.h"

/* Row block b is slot b (token b / topk); its expert is topk_ids[b], mapped
 * through expert_map (NULL: the identity). An id outside [0, num_experts)
 * sets *error_flag to 1 + that slot, an expert_map entry outside
 * [-1, local_experts) to -(1 + that slot) (as moe_align does, moe_args.h),
 * and the slot is dropped; a slot whose expert is not on this rank has no
 * rows. The
 * gemm.sorted_ids, block_expert and num_padded fields are not read.
 * A GEMM2 with the topk sum in its epilogue ("sum") takes a row block per
 * token instead: the token's topk slots (at most MT_GEMV_SUM_MAX_TOPK),
 * summed into row `token` of gemm.C. */
#define MT_GEMV_SUM_MAX_TOPK 32
/* A CTA that quantizes its A row itself (grouped_gemv AQUANT "cta") holds
 * it in shared memory: K at most this. */
#define MT_GEMV_AQ_MAX_K 16384

typedef struct mt_gemv_slot_args {
    mt_gemm_args gemm;
    const int32_t *topk_ids;     /* [num_slots] */
    const int32_t *expert_map;   /* [num_experts] global -> local, or NULL */
    int32_t *error_flag;         /* [1] as mt_align_args.error_flag */
    int32_t num_experts;
    int32_t local_experts;
    int32_t topk;
    /* A GEMM2 whose last CTA of a token sums its slots ("lastsum"; the
     * others ignore it): the output [num_slots / topk, gemm.N], written
     * column block by column block once the token's topk CTAs of that
     * block have stored their rows to gemm.C; gemm.tile_count holds a
     * counter per token and column block, 0 at launch and again after.
     * Last: kernels built before read the same prefix. */
    void *out;
    /* A GEMM1 whose last CTA of each slot's 128-column group quantizes it
     * (OQUANT "last"; the others ignore them): GEMM2's A, [num_slots,
     * gemm.n_half] 8-bit values and [num_slots, ceil(gemm.n_half / 128)]
     * scales, as the act step writes them; gemm.tile_count holds a counter
     * per slot and group, 0 at launch and again after. Last, as out. The
     * tiled GEMM1 of grouped_gemm_sm90 with OQUANT "last" takes them too,
     * with a row per row of its output (slots, sorted positions or batched
     * rows) and a counter per 64 rows of its row blocks and group
     * (grouped_gemm_sm90_out_quant.cuh). */
    uint8_t *act_q;
    float *act_scale;
} mt_gemv_slot_args;

/* The kernel argument of a GEMM1 that runs GEMM2 in the same launch
 * (grouped_gemv CHAIN > 0, BLOCK_M 1; grouped_gemv_chain.cuh): `first` is
 * GEMM1's argument as its own launch would take it (the activation fused,
 * and in the block modes its A rows and its output quantized by its CTAs),
 * `second` GEMM2's as a slot-routed GEMM2 whose last CTA sums the topk
 * ("lastsum") would: its A is GEMM1's output. The grid is a CTA per tile
 * of both GEMMs; each CTA takes one work item from work[0] as it starts:
 * first every GEMM1 tile, then every GEMM2 tile (slot by slot both); a
 * GEMM1 tile counts itself in at done[slot] once its columns (and any
 * group it quantized) are written, and a GEMM2 tile of that slot waits
 * there for GEMM1's column blocks of it. A GEMM2 tile waits only on tiles
 * handed out before it, each held by a CTA already running, so the launch
 * makes progress however few of its CTAs the GPU holds at once. All zero
 * at launch, and again after: each CTA counts itself out at work[1], and
 * the last re-arms them. */
typedef struct mt_gemv_chain_args {
    mt_gemv_slot_args first;
    mt_gemv_slot_args second;
    int32_t *work;               /* [2] the next work item, the CTAs done */
    int32_t *done;               /* [slots] GEMM1 tiles done per slot */
} mt_gemv_chain_args;

#endif
