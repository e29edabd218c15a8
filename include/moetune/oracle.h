/*
 * moetune CPU oracle: a plain C reference of the whole fused-MoE computation
 * (every quant mode, both activation formats), used by the tests, the
 * tuner's verification and the runtime's tests. All pointers are host
 * pointers; tensor and quant layouts are those of moetune/problem.h.
 *
 * Rounding points. They mirror what the GPU pipeline stores, so a kernel
 * that rounds at the same places agrees up to accumulation order:
 *  (1) x = hidden row as float; with apply_router_weight_on_input,
 *      x = round_elem(x * topk_weights[t, j]) (fp32 product).
 *  (2) w8a8 modes quantize the GEMM1 input (moetune/numeric.h quantizers):
 *      per-tensor dynamic: s = amax / qmax with one amax over every row that
 *        feeds GEMM1 (all M hidden rows; all local slots' weighted rows when
 *        the weight is applied on input; all valid rows in the batched
 *        format); static: s = a1_scale[0];
 *      per-token: one dynamic scale per row; block: one dynamic scale per
 *        row per 128 columns of K (the last group may be shorter).
 *      The weights stay quantized; the dot product of quantized values is
 *      accumulated in double and the scales are applied to it in double:
 *      per-tensor acc * sa * sw[e], per-token acc * sa[row] * sw[e, n],
 *      block sum over 128-wide K groups g of acc_g * sa[row, g] * sw[e, n/128, g].
 *      Weight-only modes dequantize w = (q - zero) * scale in fp32 and
 *      accumulate x . w in double; mode none accumulates in double too.
 *  (3) h = round_elem((float)GEMM1 result), 2N values.
 *  (4) a = round_elem(act(h[n]) * h[N + n]) in fp32, act = silu or gelu_erf
 *      (mt_silu, mt_gelu).
 *  (5) w8a8: a is quantized like (2) for GEMM2 (a2_scale when static; the
 *      per-tensor dynamic amax is over all local slots' a rows, or all valid
 *      rows in the batched format); groups run along N.
 *  (6) y = (float)GEMM2 result; without apply_router_weight_on_input,
 *      y = y * topk_weights[t, j] in fp32; y = round_elem(y).
 *  (7) out[t] = round_elem(sum over j ascending, in fp32, of y of the slots
 *      whose expert is local); a token with no local slot gives 0.
 * Batched format: the experts stage stops at round_elem(y) of (6) without
 * any router weight; the combine then computes out[t] = round_elem(sum_j
 * w(t, j) * y) in fp32 (w = 1 when the weight was applied on input). So the
 * two formats agree exactly when the router weights are powers of two or
 * applied on input, and within one rounding of y otherwise; except with
 * dynamic per-tensor activation scales and an expert map, where the
 * standard format's amax covers all M hidden rows (2) and the batched
 * format's only the rows dispatched to this rank (a different scale: 8 %
 * apart in a review's fp8 example).
 *
 * Expert ids: topk_ids hold global ids in [0, E); with an expert map the
 * local id is expert_map[id] (-1: not on this rank, the slot contributes
 * nothing; else must be in [0, local_E)). Weights and weight scales are
 * indexed by the local id ([local_E, ...]).
 *
 * Cost: the oracle runs sysconf(_SC_NPROCESSORS_ONLN) threads, converts one
 * expert's weights at a time to fp32 (only experts that are used), and
 * keeps M*K + S*(N + K) floats for S computed slots.
 *
 * May call: libc, libm, pthreads, moetune/numeric.h, moetune/problem.h.
 */
#ifndef MOETUNE_ORACLE_H
#define MOETUNE_ORACLE_H

#include <stddef.h>
#include <stdint.h>
#include "moetune/problem.h"
#include "moetune/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Standard format. t->hidden [M, K] (element dtype), w1/w2 and scales per
 * the quant mode, topk_ids/topk_weights [M, topk], expert_map when
 * p->has_expert_map (p->format and p->max_tokens are ignored: the result
 * is the standard format's, which the batched one matches as the file
 * comment says). out: [M*K] floats, the final result already rounded to
 * the element dtype (t->out is not used). tokens/ntokens: an optional subset
 * of token indices to compute (NULL = all M); only out rows of those tokens
 * are written, and dynamic per-tensor scales are still computed over all
 * rows. Errors: MT_ERR_INVALID_ARG naming the token, slot and value for a
 * topk id outside [0, E) or an expert_map entry outside [-1, local_E);
 * the problem's own validation status; MT_ERR_INVALID_ARG for a missing
 * tensor; MT_ERR_NO_MEMORY.
 */
mt_status mt_oracle_fused_moe(const mt_problem *p, const mt_moe_tensors *t,
                              const int64_t *tokens, int64_t ntokens,
                              float *out, char *msg, size_t msg_size);

/*
 * Batched experts stage. t->hidden [local_E, max_tokens, K] (element dtype),
 * t->expert_num_tokens [local_E] (each in [0, max_tokens], else
 * MT_ERR_SHAPE naming the expert), weights/scales as above (a1/a2 static
 * scales for static per-tensor modes). out: [local_E * max_tokens * K]
 * floats, rows >= count[e] set to 0. No router weights are applied.
 */
mt_status mt_oracle_batched_experts(const mt_problem *p, const mt_moe_tensors *t,
                                    float *out, char *msg, size_t msg_size);

/*
 * Batched prepare: scatter the standard-format tokens (t->hidden [M, K],
 * topk_ids, topk_weights, expert_map) into bhidden [local_E, max_tokens, K]
 * (element dtype; empty rows zeroed), counts [local_E], and
 * row_slot [local_E * max_tokens] = t * topk + j of the slot a row holds
 * (-1 for empty rows). Rows of an expert follow ascending slot index. With
 * apply_router_weight_on_input a row is round_elem(hidden * weight).
 * Errors: MT_ERR_SHAPE naming the expert when more than max_tokens slots go
 * to it; bad topk ids as mt_oracle_fused_moe.
 */
mt_status mt_oracle_batched_dispatch(const mt_problem *p, const mt_moe_tensors *t,
                                     void *bhidden, int32_t *counts, int32_t *row_slot,
                                     char *msg, size_t msg_size);

/*
 * Batched finalize: out[t] = round_elem(sum over slots (t, j) held by some
 * row, j ascending, of w(t, j) * bout[row]) with w = topk_weights[t, j], or
 * 1 when p->apply_router_weight_on_input. bout [local_E * max_tokens * K]
 * floats (from mt_oracle_batched_experts), row_slot from the dispatch,
 * out [M * K] floats. MT_ERR_SHAPE for a row_slot entry outside [-1, M*topk)
 * or a slot held by two rows.
 */
mt_status mt_oracle_batched_combine(const mt_problem *p, const float *bout,
                                    const int32_t *row_slot, const float *topk_weights,
                                    float *out, char *msg, size_t msg_size);

#ifdef __cplusplus
}
#endif
#endif
