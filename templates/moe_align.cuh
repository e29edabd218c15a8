/*
 * Token alignment for the standard activation format: count the slots of
 * each local expert, pad each expert's rows to a multiple of block_m, and
 * write the slots sorted by expert (sorted_ids), the expert of every row
 * block (block_expert) and the padded row count. One CTA does it all: the
 * slot count of a fused-MoE call is small (M * topk), and a single CTA needs
 * no grid-wide synchronization. A topk id outside [0, E) sets error_flag to
 * 1 + the first such slot seen and the slot is dropped.
 */
#pragma once
#include "mt_device.cuh"

namespace mt {

constexpr int ALIGN_MAX_EXPERTS = 1024;

template <int THREADS> __device__ void moe_align(const mt_align_args &a)
{
    __shared__ int32_t cnt[ALIGN_MAX_EXPERTS];
    __shared__ int32_t off[ALIGN_MAX_EXPERTS + 1];
    __shared__ int32_t cursor[ALIGN_MAX_EXPERTS];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int LE = a.local_experts, bm = a.block_m;

    for (int i = tid; i < LE; i += THREADS) {
        cnt[i] = 0;
        cursor[i] = 0;
    }
    __syncthreads();
    for (int s = tid; s < a.num_slots; s += THREADS) {
        const int e = a.topk_ids[s];
        if (e < 0 || e >= a.num_experts) {
            atomicCAS(a.error_flag, 0, s + 1);
            continue;
        }
        const int le = a.expert_map ? a.expert_map[e] : e;
        if (le >= 0 && le < LE)
            atomicAdd(&cnt[le], 1);
    }
    __syncthreads();

    /* Exclusive scan of the padded counts by warp 0: each lane sums a
     * contiguous run of experts, then the lanes scan their sums. */
    if (warp == 0) {
        const int per = (LE + 31) / 32, begin = lane * per, end = min(begin + per, LE);
        int mine = 0;
        for (int i = begin; i < end; i++)
            mine += (cnt[i] + bm - 1) / bm * bm;
        int inc = mine;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const int y = __shfl_up_sync(0xffffffffu, inc, d);
            if (lane >= d)
                inc += y;
        }
        int run = inc - mine;
        for (int i = begin; i < end; i++) {
            off[i] = run;
            run += (cnt[i] + bm - 1) / bm * bm;
        }
        if (lane == 31) {
            off[LE] = inc;
            *a.num_padded = inc;
        }
    }
    __syncthreads();
    const int total = off[LE];

    const int nblocks = a.max_padded / bm;
    for (int b = tid; b < nblocks; b += THREADS) {
        const int row = b * bm;
        int e = -1;
        if (row < total) {   /* last expert whose range starts at or before row */
            int lo = 0, hi = LE - 1;
            while (lo < hi) {
                const int mid = (lo + hi + 1) / 2;
                if (off[mid] <= row)
                    lo = mid;
                else
                    hi = mid - 1;
            }
            e = lo;
        }
        a.block_expert[b] = e;
    }
    for (int r = tid; r < total; r += THREADS)
        a.sorted_ids[r] = a.num_slots;   /* padding, overwritten below where a slot lands */
    __syncthreads();
    for (int s = tid; s < a.num_slots; s += THREADS) {
        const int e = a.topk_ids[s];
        if (e < 0 || e >= a.num_experts)
            continue;
        const int le = a.expert_map ? a.expert_map[e] : e;
        if (le < 0 || le >= LE)
            continue;
        a.sorted_ids[off[le] + atomicAdd(&cursor[le], 1)] = s;
    }
}

} // namespace mt
