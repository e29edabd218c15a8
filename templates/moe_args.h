/*
 * Kernel arguments of the fused-MoE kernel families, shared by the host
 * (runtime/tuner launch code) and the device code (the templates). Plain C,
 * passed by value as the single kernel parameter: keep it free of pointers to
 * host memory and of types the two sides would lay out differently.
 */
#ifndef MT_MOE_ARGS_H
#define MT_MOE_ARGS_H

#ifdef __CUDACC_RTC__
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef unsigned short uint16_t;
typedef unsigned char uint8_t;
typedef signed char int8_t;
#else
#include <stdint.h>
#endif

#ifdef __cplusplus
#define MT_ALIGNAS(n) alignas(n)
#else
#define MT_ALIGNAS(n) _Alignas(n)
#endif

/* moe_align: route the M*topk slots (slot = token*topk + j) to experts.
 * Writes, per local expert, its slots padded to a multiple of block_m:
 * sorted_ids[i] is a slot or `num_slots` (padding); block_expert[b] is the
 * local expert of rows [b*block_m, (b+1)*block_m), -1 past the end.
 *
 * The error flag of the standard format (this error_flag, that of the
 * slot-routed GEMMs, mt_gemv_slot_args; the workspace's first word, which
 * mt_moe_read_error decodes), zeroed by the launcher before the call:
 *    0            every slot routed
 *    1 + slot     the slot's topk id is outside [0, num_experts)
 *    -(1 + slot)  the slot's expert has an expert_map entry outside
 *                 [-1, local_experts)
 * A slot found bad either way is dropped (no rows, nothing in the output,
 * like a slot of another rank); the first one recorded stays, so the flag
 * names one bad slot, not every one. */
typedef struct mt_align_args {
    const int32_t *topk_ids;     /* [num_slots] */
    const int32_t *expert_map;   /* [num_experts] global -> local, or NULL */
    int32_t *sorted_ids;         /* [max_padded] */
    int32_t *block_expert;       /* [max_padded / block_m] */
    int32_t *num_padded;         /* [1] rows used in sorted_ids */
    int32_t *error_flag;         /* [1] 0, or a bad slot (above) */
    int32_t num_slots;
    int32_t num_experts;         /* global E: valid ids are [0, E) */
    int32_t local_experts;
    int32_t block_m;
    int32_t max_padded;
    /* Many slots: two launches of a grid of CTAs, each owning `chunk`
     * consecutive slots. Phase 0 counts a CTA's slots per local expert into
     * cta_counts[cta * local_experts + e]; phase 1 places them. A grid of
     * one CTA does it all in one launch (phase and cta_counts unused). */
    int32_t *cta_counts;
    int32_t chunk;
    int32_t phase;
} mt_align_args;

/* grouped_gemm: C[row, n] = sum_k A[arow, k] * B[e, n, k] for the rows of
 * each expert. Standard format: rows come from sorted_ids (row = slot),
 * arow = slot / a_row_div. Batched format: block b covers expert
 * b / blocks_per_expert, rows < expert_num_tokens[e]; arow = row =
 * e * max_tokens + r. Fused activation epilogue: the tile's first half of
 * columns are gate rows n, the second half up rows n_half + n, and C gets
 * act(gate) * up with n_half columns. */
typedef struct mt_gemm_args {
    const void *A;
    const void *B;
    void *C;
    int64_t lda, ldb, ldc;       /* row strides, in elements */
    int64_t b_expert_stride;     /* elements between experts in B */
    const int32_t *sorted_ids;
    const int32_t *block_expert;
    const int32_t *num_padded;
    const int32_t *expert_num_tokens;
    const float *row_weight;     /* if set: rows scaled by row_weight[slot] */
    int32_t num_slots;
    int32_t a_row_div;
    int32_t max_tokens;
    int32_t num_m_blocks;        /* grid extent along M, in blocks */
    int32_t N;                   /* columns of the product (before fusion) */
    int32_t K;
    int32_t n_half;              /* fused activation: columns of C */
    /* Quantized variants (moetune/problem.h layouts; n = weight row = column
     * of the product, e = local expert, arow = the A row):
     *   w8a8 tensor: a_scale[0] * b_scale[e]
     *   w8a8 token:  a_scale[arow] * b_scale[e * N + n]
     *   w8a8 block:  per 128-wide K block kb: a_scale[arow * a_scale_ld + kb]
     *                * b_scale[(e * ceil(N/128) + n/128) * ceil(K/128) + kb]
     *   weight-only: w = (q - zero) * b_scale[(e * N + n) * (K/group) + k/group],
     *                zero = b_zero[same index] when b_zero is set, else 0
     *                (w8a16, signed q) or 8 (w4a16). */
    const float *a_scale;
    const float *b_scale;
    const uint8_t *b_zero;
    int32_t a_scale_ld;
    int32_t group;
    /* Split-K kernels (SPLIT_K > 1; the others ignore both): the tile's
     * partial sums, [tile][split][BM * BN words] (fp32, or int32 bits for
     * int8 accumulators), and one arrival counter per tile, tile = the
     * CTA's output tile in [0, num_m_blocks * column tiles). The counters
     * must be 0 at launch; the last CTA of each tile resets its own, so
     * they are 0 again after every complete launch. */
    float *partial;
    int32_t *tile_count;
    /* Launched ahead of the step before it (programmatic dependent launch)
     * with the routing already final: the mma.sync kernel fetches its tile
     * and first weight stages before waiting (mt_device.cuh). 0: wait first. */
    int32_t pdl_early;
    /* Standard format, rows in the sorted order: the row of tile row r of
     * row block mb is then its position mb * block_m + r in sorted_ids
     * rather than its slot (padding positions hold no row). a_sorted: A is
     * laid out so (the intermediate that GEMM2 reads by TMA, ALOAD=tma);
     * c_sorted: C is written so (GEMM1 feeding such a GEMM2). */
    int32_t a_sorted;
    int32_t c_sorted;
    /* GEMM2 with the topk sum in its epilogue (epilogue "sum" of the tiled
     * families, gemm_tile.cuh write_tile): the topk, and C is fp32 [M, ldc],
     * zeroed beforehand, into whose row slot / sum_topk each row is added.
     * 0 for every other kernel (which ignore it). In what was padding
     * before b_map: the fields after it keep their offsets. */
    int32_t sum_topk;
    /* grouped_gemm_sm90 with BLOAD=tma: the tensor-memory-accelerator
     * descriptor of B (a CUtensorMap, encoded by the launcher per launch:
     * runtime/moe_launch.c), a 4-D view (K, rows, parts, expert) with parts
     * 2 for a fused-activation GEMM1 (gate rows, then up rows) and 1
     * otherwise. Last, so that kernels built before it read the same
     * prefix. Other kernels ignore it. */
    MT_ALIGNAS(64) uint64_t b_map[16];
    /* grouped_gemm_sm90 with ALOAD=tma: the descriptor of A, a 2-D view
     * (K, rows) of rows laid out per expert (the batched format, or the
     * sorted order with a_sorted), one box of a tile's rows by one
     * 128-byte line of K. */
    MT_ALIGNAS(64) uint64_t a_map[16];
} mt_gemm_args;

/* Rows of an intermediate laid out in the sorted order (mt_gemm_args
 * a_sorted / c_sorted): row r holds slot ids[r] when r < *num_padded and
 * ids[r] < num_slots; the other rows are padding, neither read nor
 * written by the steps between the GEMMs. ids NULL: rows are slots. */
typedef struct mt_sorted_rows {
    const int32_t *ids;
    const int32_t *num_padded;
    int32_t num_slots;
} mt_sorted_rows;

/* act_quant: quantize rows of activations to fp8 e4m3 / int8 with dynamic
 * (or static per-tensor) scales, as moetune/numeric.h specifies. The value
 * of element (row, k), rounded to the element dtype like the oracle:
 *   act: round(act(in[row, k]) * in[row, n + k])  (rows of 2n elements)
 *   row_weight set: round(in[row / row_div, k] * row_weight[row])
 *   else: in[row / row_div, k].
 * Rows whose slot is not local (topk_ids set) or past the expert's count
 * (expert_num_tokens set) are skipped: neither read nor written, and left
 * out of the per-tensor amax. Outputs: q [rows, n] bytes; scale: tensor [1],
 * token [rows], block [rows, ceil(n/128)]. Per-tensor dynamic runs twice:
 * phase 0 takes the amax into *amax (float bits, zeroed beforehand by the
 * launcher), phase 1 quantizes with amax / qmax (static_scale: phase 1 only). */
typedef struct mt_quant_args {
    const void *in;
    uint8_t *q;
    float *scale;
    const float *static_scale;
    int32_t *amax;
    const float *row_weight;
    const int32_t *topk_ids;
    const int32_t *expert_map;
    const int32_t *expert_num_tokens;
    int64_t ld_in;               /* elements between input rows */
    int32_t rows;
    int32_t n;
    int32_t row_div;
    int32_t num_experts;
    int32_t max_tokens;
    int32_t phase;
    mt_sorted_rows sorted;       /* rows in the sorted order, or all NULL (last: see mt_act_args) */
    /* Set whenever topk_ids is (local_E; == num_experts without a map): a
     * slot is local when its local id (expert_map entry, or its id) is in
     * [0, local_experts); an entry outside [-1, local_experts) is bad input
     * that the routing step flags and drops, so it is not local here
     * either. Last, as sorted. */
    int32_t local_experts;
} mt_quant_args;

/* act_and_mul: out[r, :N] = act(in[r, :N]) * in[r, N:2N] for live rows. */
typedef struct mt_act_args {
    const void *in;
    void *out;
    const int32_t *topk_ids;     /* standard: rows are slots; skip ... */
    const int32_t *expert_map;   /* ... slots whose expert is not local */
    const int32_t *expert_num_tokens; /* batched: skip rows >= count */
    int32_t rows;
    int32_t N;
    int32_t num_experts;
    int32_t max_tokens;
    /* Rows in the sorted order, or all NULL. Last, as the other fields
     * added later: kernels built before them read the same prefix. */
    mt_sorted_rows sorted;
    /* Local experts, as mt_quant_args.local_experts. */
    int32_t local_experts;
} mt_act_args;

/* moe_reduce: out[t, :] = sum_j w(t, j) * Y[row(t, j), :] over local slots
 * (with topk_ids: map entry in [0, local_experts), as mt_quant_args);
 * row = slot_row ? slot_row[slot] (-1: skip) : slot; w = topk_weights ?
 * topk_weights[slot] : 1. With topk 1 and no ids or weights it rounds the
 * fp32 sums of a summing GEMM2 (y_f32) to T. */
typedef struct mt_reduce_args {
    const void *Y;
    void *out;
    const int32_t *slot_row;
    const int32_t *topk_ids;
    const int32_t *expert_map;
    const float *topk_weights;
    int64_t ldy;
    int32_t M;
    int32_t topk;
    int32_t K;
    int32_t num_experts;
    /* 1: Y is fp32 (the sums of a summing GEMM2, moe_reduce version 4 and
     * later), else T. Last: kernels built before read the same prefix. */
    int32_t y_f32;
    /* Local experts, as mt_quant_args.local_experts. Last, as y_f32. */
    int32_t local_experts;
} mt_reduce_args;

#endif
