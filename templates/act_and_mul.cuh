/*
 * The activation step between the two GEMMs when it is not fused into
 * GEMM1: out[r, :N] = act(in[r, :N]) * in[r, N:2N], 8 elements per thread
 * with 16-byte loads and stores. Rows that hold no live token (a slot whose
 * expert is on another rank or has an expert_map entry outside
 * [-1, local_E), a batched row past the expert's count, a padding row of
 * the sorted order) are skipped: nothing wrote their input.
 */
#pragma once
#include "mt_device.cuh"

namespace mt {

template <class T, int ACT> __device__ void act_and_mul(const mt_act_args &a)
{
    pdl_enter();
    const int chunks = a.N / 8;
    const int64_t total = sorted_rows_used(a.sorted, a.rows) * chunks;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / chunks), c = (int)(i % chunks);
        if (a.expert_num_tokens) {
            if (r % a.max_tokens >= a.expert_num_tokens[r / a.max_tokens])
                continue;
        } else if (a.sorted.ids) {
            if (!sorted_row_live(a.sorted, r))
                continue;
        } else if (a.topk_ids && !slot_is_local(a.topk_ids, a.expert_map, a.num_experts, a.local_experts, r)) {
            continue;
        }
        const T *in = static_cast<const T *>(a.in) + (int64_t)r * 2 * a.N + c * 8;
        const vec8 g = *reinterpret_cast<const vec8 *>(in);
        const vec8 u = *reinterpret_cast<const vec8 *>(in + a.N);
        vec8 o;
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const float lo = activate<ACT>(lo_of<T>(g.w[q])) * lo_of<T>(u.w[q]);
            const float hi = activate<ACT>(hi_of<T>(g.w[q])) * hi_of<T>(u.w[q]);
            o.w[q] = pack2<T>(lo, hi);
        }
        *reinterpret_cast<vec8 *>(static_cast<T *>(a.out) + (int64_t)r * a.N + c * 8) = o;
    }
}

} // namespace mt
