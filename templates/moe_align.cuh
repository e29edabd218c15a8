/*
 * Token alignment for the standard activation format: count the slots of
 * each local expert, pad each expert's rows to a multiple of block_m, and
 * write the slots sorted by expert (sorted_ids), the expert of every row
 * block (block_expert) and the padded row count. A topk id outside [0, E)
 * sets error_flag to 1 + a slot with a bad id, an expert_map entry outside
 * [-1, local_E) to -(1 + a slot of that expert) (the first bad slot found
 * stays, moe_args.h); either slot is dropped, as one of another rank.
 *
 * Few slots (decode): one CTA does it all in one launch, no grid-wide
 * synchronization. Many slots: one CTA alone spends tens of microseconds
 * on the scattered sorted_ids stores, so the launcher runs two launches of
 * a grid of CTAs that each own `chunk` consecutive slots: phase 0 counts
 * them per expert into cta_counts; phase 1 has every CTA derive the expert
 * offsets (and its own start within each expert) from all the counts, then
 * place its slots, while the CTAs share out block_expert and the padding.
 */
#pragma once
#include "mt_device.cuh"

namespace mt {

constexpr int ALIGN_MAX_EXPERTS = 1024;

/* The local expert of slot s, or -1 (dropped); a bad slot is flagged
 * (mt_device.cuh flag_bad_slot). The placing pass re-derives it without
 * flagging: the counting pass (phase 0 of a grid) has flagged it. */
__device__ __forceinline__ int align_expert_of(const mt_align_args &a, int s, bool flag)
{
    route_fault fault;
    const int le = slot_expert(a.topk_ids, a.expert_map, a.num_experts, a.local_experts, s, &fault);
    if (flag)
        flag_bad_slot(a.error_flag, fault, s);
    return le;
}

/* Exclusive scan of the padded counts by warp 0 into off[0..LE] (off[LE]
 * = the padded total): each lane sums a contiguous run of experts, then the
 * lanes scan their sums. Callers sync before and after. */
__device__ __forceinline__ void align_scan(const int32_t *cnt, int32_t *off, int LE, int bm)
{
    const int lane = threadIdx.x & 31;
    if (threadIdx.x >= 32)
        return;
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
    if (lane == 31)
        off[LE] = inc;
}

/* The expert of every row block (-1 past the padded total) and the
 * padding rows of every expert (num_slots), dealt over `parts` workers of
 * which this CTA is `part`. */
template <int THREADS>
__device__ __forceinline__ void align_layout(const mt_align_args &a, const int32_t *cnt,
                                             const int32_t *off, int part, int parts)
{
    const int tid = threadIdx.x, LE = a.local_experts, bm = a.block_m, total = off[LE];
    const int nblocks = a.max_padded / bm;
    for (int b = part * THREADS + tid; b < nblocks; b += parts * THREADS) {
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
    /* Padding: the rows of each expert past its slots (fewer than bm). */
    for (int i = part * THREADS + tid; i < LE * bm; i += parts * THREADS) {
        const int e = i / bm, r = off[e] + cnt[e] + i % bm;
        if (r < off[e + 1])
            a.sorted_ids[r] = a.num_slots;
    }
}

template <int THREADS> __device__ void moe_align(const mt_align_args &a)
{
    __shared__ int32_t cnt[ALIGN_MAX_EXPERTS];
    __shared__ int32_t off[ALIGN_MAX_EXPERTS + 1];
    __shared__ int32_t cursor[ALIGN_MAX_EXPERTS];
    pdl_enter();
    const int tid = threadIdx.x, LE = a.local_experts;
    const bool grid = gridDim.x > 1;
    const int s_begin = grid ? blockIdx.x * a.chunk : 0;
    const int s_end = grid ? min(s_begin + a.chunk, a.num_slots) : a.num_slots;

    if (!grid || a.phase == 0) {
        for (int i = tid; i < LE; i += THREADS)
            cnt[i] = 0;
        __syncthreads();
        for (int s = s_begin + tid; s < s_end; s += THREADS) {
            const int le = align_expert_of(a, s, true);
            if (le >= 0)
                atomicAdd(&cnt[le], 1);
        }
        __syncthreads();
        if (grid) {
            for (int i = tid; i < LE; i += THREADS)
                a.cta_counts[(int64_t)blockIdx.x * LE + i] = cnt[i];
            return;
        }
        for (int i = tid; i < LE; i += THREADS)
            cursor[i] = 0;
    } else {
        /* Totals per expert, and where this CTA's slots start in each. */
        for (int i = tid; i < LE; i += THREADS) {
            int before = 0, all = 0;
            for (int b = 0; b < (int)gridDim.x; b++) {
                const int c = a.cta_counts[(int64_t)b * LE + i];
                before += b < (int)blockIdx.x ? c : 0;
                all += c;
            }
            cnt[i] = all;
            cursor[i] = before;
        }
    }
    __syncthreads();
    align_scan(cnt, off, LE, a.block_m);
    __syncthreads();
    if (blockIdx.x == 0 && tid == 0)
        *a.num_padded = off[LE];
    align_layout<THREADS>(a, cnt, off, blockIdx.x, gridDim.x);
    for (int i = tid; i < LE; i += THREADS)
        cursor[i] += off[i];
    __syncthreads();
    for (int s = s_begin + tid; s < s_end; s += THREADS) {
        const int le = align_expert_of(a, s, false);
        if (le >= 0)
            a.sorted_ids[atomicAdd(&cursor[le], 1)] = s;
    }
}

} // namespace mt
