/*
 * The per-token reduction (finalize): out[t] = sum over the token's topk
 * slots of w * Y[row], in fp32, rounded once. Standard format: row = slot and
 * the router weight is already applied by GEMM2's epilogue; batched format:
 * slot_row maps each slot to its row of the [E, max_tokens, K] output and the
 * weight is applied here. Slots on other ranks are skipped.
 */
#pragma once
#include "mt_device.cuh"

namespace mt {

template <class T> __device__ void moe_reduce(const mt_reduce_args &a)
{
    const int chunks = a.K / 8;
    const int64_t total = (int64_t)a.M * chunks;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int t = (int)(i / chunks), c = (int)(i % chunks);
        float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        for (int j = 0; j < a.topk; j++) {
            const int slot = t * a.topk + j;
            if (a.topk_ids && !slot_is_local(a.topk_ids, a.expert_map, a.num_experts, slot))
                continue;
            const int row = a.slot_row ? a.slot_row[slot] : slot;
            if (row < 0)
                continue;
            const float w = a.topk_weights ? a.topk_weights[slot] : 1.0f;
            const vec8 y = *reinterpret_cast<const vec8 *>(static_cast<const T *>(a.Y) +
                                                           (int64_t)row * a.ldy + c * 8);
#pragma unroll
            for (int q = 0; q < 4; q++) {
                acc[2 * q] += w * lo_of<T>(y.w[q]);
                acc[2 * q + 1] += w * hi_of<T>(y.w[q]);
            }
        }
        vec8 o;
#pragma unroll
        for (int q = 0; q < 4; q++)
            o.w[q] = pack2<T>(acc[2 * q], acc[2 * q + 1]);
        *reinterpret_cast<vec8 *>(static_cast<T *>(a.out) + (int64_t)t * a.K + c * 8) = o;
    }
}

} // namespace mt
