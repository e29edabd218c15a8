/*
 * The per-token reduction (finalize): out[t] = sum over the token's topk
 * slots of w * Y[row], in fp32, rounded once. Standard format: row = slot and
 * the router weight is already applied by GEMM2's epilogue; batched format:
 * slot_row maps each slot to its row of the [E, max_tokens, K] output and the
 * weight is applied here. Slots on other ranks are skipped, and so are
 * slots the routing dropped as bad input (an expert_map entry outside
 * [-1, local_E): no GEMM wrote their rows this call). Y may also be
 * fp32 (y_f32): a summing GEMM2's per-token sums, which this step, run with
 * topk 1, only rounds to T.
 */
#pragma once
#include "mt_device.cuh"

namespace mt {

/* Eight consecutive elements of Y (16-bit T, or fp32 sums) as floats. */
template <class T, class Y> struct row8 {
    vec8 v;
    __device__ __forceinline__ void load(const void *p) { v = *reinterpret_cast<const vec8 *>(p); }
    __device__ __forceinline__ float at(int i) const
    {
        return i & 1 ? hi_of<T>(v.w[i >> 1]) : lo_of<T>(v.w[i >> 1]);
    }
};
template <class T> struct row8<T, float> {
    struct alignas(16) quad { float f[4]; } v[2];
    __device__ __forceinline__ void load(const void *p)
    {
        v[0] = reinterpret_cast<const quad *>(p)[0];
        v[1] = reinterpret_cast<const quad *>(p)[1];
    }
    __device__ __forceinline__ float at(int i) const { return v[i >> 2].f[i & 3]; }
};

/* Which items (token t, 8-column chunk c; item t * K / 8 + c) a thread
 * sums: the reduce step's grid walks all of them, a.M * K / 8. */
struct grid_items {
    __device__ __forceinline__ int64_t first() const { return (int64_t)blockIdx.x * blockDim.x + threadIdx.x; }
    __device__ __forceinline__ int64_t end(const mt_reduce_args &a) const { return (int64_t)a.M * (a.K / 8); }
    __device__ __forceinline__ int64_t step() const { return (int64_t)gridDim.x * blockDim.x; }
};

/* Each item: the token's slots' rows of Y over the chunk, summed in slot
 * order in fp32 and rounded once into a.out. Slots are taken UNROLL at a
 * time: their rows are resolved first and their loads issued together, so
 * a thread has UNROLL 16-byte loads in flight instead of one; the sum
 * still runs in slot order. Items other than grid_items: a GEMM2 whose last
 * CTA of a token sums its slots (grouped_gemv's epilogue "lastsum"), the
 * same code giving the same bits as this step. */
template <class T, class Y, int UNROLL, class Items = grid_items>
__device__ void reduce_rows(const mt_reduce_args &a, Items items = Items())
{
    const int chunks = a.K / 8;
    const int64_t total = items.end(a);
    for (int64_t i = items.first(); i < total; i += items.step()) {
        const int t = (int)(i / chunks), c = (int)(i % chunks);
        float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        for (int j0 = 0; j0 < a.topk; j0 += UNROLL) {
            int64_t row[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const int j = j0 + u, slot = t * a.topk + j;
                row[u] = -1;
                if (j < a.topk && (!a.topk_ids || slot_is_local(a.topk_ids, a.expert_map, a.num_experts,
                                                                 a.local_experts, slot)))
                    row[u] = a.slot_row ? a.slot_row[slot] : slot;
            }
            row8<T, Y> y[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
                if (row[u] >= 0)
                    y[u].load(static_cast<const Y *>(a.Y) + row[u] * a.ldy + c * 8);
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                if (row[u] < 0)
                    continue;
                const float w = a.topk_weights ? a.topk_weights[t * a.topk + j0 + u] : 1.0f;
#pragma unroll
                for (int q = 0; q < 8; q++)
                    acc[q] += w * y[u].at(q);
            }
        }
        vec8 o;
#pragma unroll
        for (int q = 0; q < 4; q++)
            o.w[q] = pack2<T>(acc[2 * q], acc[2 * q + 1]);
        *reinterpret_cast<vec8 *>(static_cast<T *>(a.out) + (int64_t)t * a.K + c * 8) = o;
    }
}

template <class T> __device__ void moe_reduce(const mt_reduce_args &a)
{
    pdl_enter();
    /* fp32 sums come a row per token (topk 1): one load at a time is all
     * there is, and unrolled like the slots they took the kernel from 74 to
     * 118 registers (ptxas, sm_90a), which slowed the slot sums 15-20 % on
     * the H200 (docs/PERFORMANCE.md, session 20). */
    if (a.y_f32)
        reduce_rows<T, float, 1>(a);
    else
        reduce_rows<T, T, 8>(a);
}

} // namespace mt
