/*
 * GEMM1 and GEMM2 of a decode batch in one launch (grouped_gemv CHAIN > 0):
 * the slot-routed matrix-vector tiles of grouped_gemv.cuh, GEMM1's with the
 * activation fused (Cfg1) and GEMM2's with the last CTA's topk sum (Cfg2,
 * "lastsum": a row block per slot, so GEMM2 has as many tiles as a launch
 * of its own), as work items of one grid. A pipeline of separate launches
 * pays, per launch, the ramp of its first loads and the tail of its last
 * CTAs, and GEMM2's tiles wait for the whole of GEMM1 (the launch wait);
 * here GEMM2's tiles start as GEMM1's CTAs end, issue their first weight
 * loads and wait only for the GEMM1 tiles of their own slot. The
 * block modes' quantizations stay inside too: GEMM1's CTAs quantize their
 * token row (AQUANT "cta") and the last CTA of each 128-column group the
 * activated group (OQUANT "last"), so the pipeline is this one launch.
 *
 * A CTA per work item: each takes its item from a counter
 * (mt_gemv_chain_args.work[0]) as it starts, every GEMM1 tile before any
 * GEMM2 tile (both slot-major, as slot_tile_of numbers them), so that a
 * GEMM2 tile waits only on tiles handed out before it, each held by a CTA
 * already running that runs it to its end without waiting: the launch
 * makes progress however few of its CTAs are resident. (One item a CTA,
 * not a loop over items: ptxas gave the loop 132 registers against 94 for
 * one item, the separate GEMM1 tile's count, so an SM held 3 CTAs, not 5.)
 * The wait is the release/acquire pattern of a grid barrier: every
 * thread's stores, a CTA barrier, then one thread's fence and count; on
 * the other side one thread's acquiring loads until the count is full, a
 * fence and a CTA barrier, then GEMM2's A rows and scales by L2 loads
 * (Cfg2::CHAINED: ld_chain_chunk, __ldcg); the last CTA of a token's slots
 * in a column block reads their rows after arrive_last, as "lastsum" does.
 * Each CTA then counts itself out (work[1]), and the last re-arms the
 * counters (0), as a split-K or "lastsum" launch does, so that the launch
 * can run again without the runtime's memset.
 *
 * Cfg1: a grouped_gemv Cfg with BM = 1 and a fused activation (EPI > 0).
 * Cfg2: BM = 1, EPI = 0, LAST_SUM = true, CHAINED = true, the same WARPS.
 */
#pragma once
#include "grouped_gemv.cuh"

namespace mt {

/* The wait of a chained GEMM2 tile (gemv_tile's enter(), after its first
 * round of weight loads): until `want` GEMM1 tiles of the slot have counted
 * in at *done. */
struct chain_wait {
    const int32_t *done;
    int32_t want;
    __device__ __forceinline__ void operator()() const
    {
        if (threadIdx.x == 0) {
            int32_t have;
            for (;;) {
                asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(have) : "l"(done) : "memory");
                if (have >= want)
                    break;
                __nanosleep(64);
            }
            __threadfence();
        }
        __syncthreads();
    }
};

template <class Cfg1, class Cfg2> __device__ void grouped_gemv_chain(const mt_gemv_chain_args &c)
{
    static_assert(Cfg1::BM == 1 && gemv_shape<Cfg1>::FUSED, "chain: GEMM1 a row block per slot, activation fused");
    static_assert(Cfg2::BM == 1 && !gemv_shape<Cfg2>::FUSED && last_sums<Cfg2>() && chained<Cfg2>(),
                  "chain: GEMM2 a row block per slot, the last CTA's topk sum");
    static_assert(Cfg1::WARPS == Cfg2::WARPS, "chain: one CTA shape for both");
    __shared__ int s_item;
    /* The hidden states and the routing come from the steps ahead. */
    pdl_enter();
    const mt_gemv_slot_args &s1 = c.first, &s2 = c.second;
    const int slots = s1.gemm.num_slots;
    const int nb1 = num_n_blocks<Cfg1>(s1.gemm), items1 = slots * nb1;
    const int items = items1 + slots * num_n_blocks<Cfg2>(s2.gemm);
    if (threadIdx.x == 0)
        s_item = atomicAdd(c.work, 1);
    __syncthreads();
    const int item = s_item;
    tile_rows t;
    int nb;
    if (item < items1) {
        if (slot_tile_of<Cfg1>(s1, item, &t, &nb))
            gemv_tile<Cfg1>(s1.gemm, t, nb, gemv_enter{false});
        if constexpr (last_quants<Cfg1>())
            if (t.expert >= 0)
                quantize_group_if_last<Cfg1>(s1, t.mb, nb);
        /* Counted in whether it had work or not (a dropped slot), so that
         * a slot's count always reaches nb1: every thread's stores before
         * the barrier, then the fence and the count by one. */
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence();
            atomicAdd(c.done + t.mb, 1);
        }
    } else if (item < items) {
        /* GEMM2's tile of the slot (a dropped slot has none), after its
         * first weight loads waiting for the slot's GEMM1 tiles; then, as
         * "lastsum" does, the last of the token's slots in the column block
         * adds their rows into the output. */
        if (slot_tile_of<Cfg2>(s2, item - items1, &t, &nb))
            gemv_tile<Cfg2>(s2.gemm, t, nb, chain_wait{c.done + t.mb, nb1});
        sum_token_if_last<Cfg2>(s2, t.mb, nb);
    }
    /* Out: the last CTA, when every CTA has done its item (and no GEMM2
     * tile waits any more), re-arms the counters for the next launch. */
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();   /* its count (done) before its count-out */
        s_item = atomicAdd(c.work + 1, 1) == (int)gridDim.x - 1;
    }
    __syncthreads();
    if (s_item) {
        __threadfence();
        for (int i = threadIdx.x; i < slots; i += blockDim.x)
            c.done[i] = 0;
        if (threadIdx.x == 0)
            c.work[0] = c.work[1] = 0;
    }
}

} // namespace mt
