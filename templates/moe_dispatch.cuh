/*
 * Standard -> batched-experts dispatch (the "prepare" of the batched
 * format): scatter each local slot's token row to its expert's next free
 * row of [local_experts, max_tokens, K], count the rows per expert and
 * record slot -> row for the combine. The capacity max_tokens is fixed by
 * the caller, so the launch shape never depends on the routing and the
 * step can be captured into a CUDA graph.
 *
 * Checks, each recorded as 1 + the first offending slot (never silent):
 *   error_flags[0]  a topk id outside [0, num_experts): the slot is dropped
 *   error_flags[1]  an expert got more than max_tokens rows: the slot is dropped
 *   error_flags[2]  an expert_map entry outside [-1, local_experts)
 * With topk_weights set the copied row is x * w rounded to the element type
 * (apply_router_weight_on_input), as the oracle's rounding point (1).
 *
 * The host includes this file with MT_DISPATCH_ARGS_ONLY defined to get the
 * argument struct alone.
 */
#pragma once
#include "moe_args.h"

typedef struct mt_dispatch_args {
    const void *hidden;          /* [M, K] element dtype */
    const int32_t *topk_ids;     /* [num_slots] */
    const int32_t *expert_map;   /* [num_experts] global -> local, or NULL */
    const float *topk_weights;   /* [num_slots]: scale rows by it, or NULL */
    void *out;                   /* [local_experts, max_tokens, K] */
    int32_t *counts;             /* [local_experts], zero on entry */
    int32_t *slot_row;           /* [num_slots]: row of out, or -1 */
    int32_t *error_flags;        /* [3], zero on entry */
    int64_t K;
    int32_t num_slots;
    int32_t topk;
    int32_t num_experts;
    int32_t local_experts;
    int32_t max_tokens;
} mt_dispatch_args;

#ifndef MT_DISPATCH_ARGS_ONLY
#include "mt_device.cuh"

namespace mt {

template <class T, int THREADS> __device__ void moe_dispatch(const mt_dispatch_args &a)
{
    __shared__ int row_s;
    const int chunks = (int)(a.K / 8);
    for (int s = blockIdx.x; s < a.num_slots; s += gridDim.x) {
        if (threadIdx.x == 0) {
            int row = -1;
            const int e = a.topk_ids[s];
            if (e < 0 || e >= a.num_experts) {
                atomicCAS(&a.error_flags[0], 0, s + 1);
            } else {
                const int le = a.expert_map ? a.expert_map[e] : e;
                if (le < -1 || le >= a.local_experts) {
                    atomicCAS(&a.error_flags[2], 0, s + 1);
                } else if (le >= 0) {
                    /* Over capacity: take the increment back. The counter
                     * never drops below max_tokens once it got there, so
                     * exactly min(rows, max_tokens) slots get a row. */
                    const int r = atomicAdd(&a.counts[le], 1);
                    if (r < a.max_tokens) {
                        row = le * a.max_tokens + r;
                    } else {
                        atomicSub(&a.counts[le], 1);
                        atomicCAS(&a.error_flags[1], 0, s + 1);
                    }
                }
            }
            a.slot_row[s] = row;
            row_s = row;
        }
        __syncthreads();
        const int row = row_s;
        if (row >= 0) {
            const vec8 *src = reinterpret_cast<const vec8 *>(static_cast<const T *>(a.hidden) +
                                                             (int64_t)(s / a.topk) * a.K);
            vec8 *dst = reinterpret_cast<vec8 *>(static_cast<T *>(a.out) + (int64_t)row * a.K);
            if (a.topk_weights) {
                const float w = a.topk_weights[s];
                for (int c = threadIdx.x; c < chunks; c += THREADS) {
                    const vec8 x = src[c];
                    vec8 o;
#pragma unroll
                    for (int q = 0; q < 4; q++)
                        o.w[q] = pack2<T>(lo_of<T>(x.w[q]) * w, hi_of<T>(x.w[q]) * w);
                    dst[c] = o;
                }
            } else {
                for (int c = threadIdx.x; c < chunks; c += THREADS)
                    dst[c] = src[c];
            }
        }
        __syncthreads();   /* row_s is rewritten by the next slot */
    }
}

} // namespace mt
#endif
