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
    pdl_enter();
    /* Slots are taken UNROLL at a time: their rows are resolved first and
     * their loads issued together, so a thread has UNROLL 16-byte loads in
     * flight instead of one; the sum still runs in slot order. */
    constexpr int UNROLL = 8;
    const int chunks = a.K / 8;
    const int64_t total = (int64_t)a.M * chunks;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int t = (int)(i / chunks), c = (int)(i % chunks);
        float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        for (int j0 = 0; j0 < a.topk; j0 += UNROLL) {
            int64_t row[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const int j = j0 + u, slot = t * a.topk + j;
                row[u] = -1;
                if (j < a.topk &&
                    (!a.topk_ids || slot_is_local(a.topk_ids, a.expert_map, a.num_experts, slot)))
                    row[u] = a.slot_row ? a.slot_row[slot] : slot;
            }
            vec8 y[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
                if (row[u] >= 0)
                    y[u] = *reinterpret_cast<const vec8 *>(static_cast<const T *>(a.Y) +
                                                           row[u] * a.ldy + c * 8);
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                if (row[u] < 0)
                    continue;
                const float w = a.topk_weights ? a.topk_weights[t * a.topk + j0 + u] : 1.0f;
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    acc[2 * q] += w * lo_of<T>(y[u].w[q]);
                    acc[2 * q + 1] += w * hi_of<T>(y[u].w[q]);
                }
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
