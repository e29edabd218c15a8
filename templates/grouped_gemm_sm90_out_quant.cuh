/*
 * OQUANT "last" of grouped_gemm_sm90 (a GEMM1 with the activation fused,
 * block modes): the GEMM writes GEMM2's A, 8-bit values and a scale per
 * 128 columns of a row, as the act step would, and the pipeline has no act
 * step. A tile of BN columns holds BN / 2 activated columns, which divide
 * 128: a row's 128-column group g is written by 128 / (BN / 2) tiles (one,
 * two or four) of the same row block, in any order and on any SMs. Each
 * writer (the threads that store a unit of 64 or BM rows of the tile:
 * the CTA, its computing warpgroups, or one of them) stores its activated
 * rows in 16 bits as without OQUANT, then counts itself in at the unit's
 * counter for g (out_group_count_in); the last of the group's writers
 * reads the group's 16-bit rows back through L2 and quantizes them by the
 * act step's code (act_quant_wide.cuh, STEPS: the same bytes and scales as
 * that step; out_group_settle). What the GEMM saves: the act step's launch
 * and its read of the activated rows from DRAM; what it pays: the fence,
 * the count and the group's read from L2 in one writer of each group, in
 * its epilogue, before its next tile's MMAs. Counted at once, each tile's
 * writers waited for their stores and then for the count (session 53: on
 * an H100 the GEMM grew by 0.90x to 1.22x the act step's time,
 * DeepSeek-V3 fp8); the persistent pipes now count a tile in at the next
 * tile's epilogue, before its stores, and read the count after them
 * (session 54: on the H200, before quantize_out_group took its steps for
 * all chunks together, those GEMMs still grew by 1.7x to 4.0x the act
 * step's time, DeepSeek-V3 fp8 and Qwen3 fp8; docs/PERFORMANCE.md).
 *
 * The kernel's argument is then mt_gemv_slot_args (gemv_args.h), whose
 * act_q and act_scale say where to quantize to; its first member, `gemm`,
 * is what the pipelines take, and this file finds the rest from it.
 * Included by the OQUANT "last" variants alone (templates/
 * grouped_gemm_sm90.lua), so that every other variant's source, and the
 * stored kernels built from it, stay as they were.
 */
#pragma once
#include "grouped_gemm_sm90.cuh"
#include "gemv_args.h"
#include "act_quant_wide.cuh"

namespace mt {

/* The counter and the writers of the 128-column group that tile (t, nb)'s
 * columns lie in, for its rows from row0: a.tile_count holds one per 64
 * rows of the row blocks and group (0 at launch; the last writer re-arms
 * its own). */
struct out_group {
    int32_t *count;
    int g, groups, width, of;
};
template <class Cfg> __device__ __forceinline__ out_group out_group_of(const mt_gemm_args &a, const tile_rows &t, int nb,
                                                                   int row0)
{
    constexpr int COLS = tile_shape<Cfg>::OUT_COLS;
    static_assert(128 % COLS == 0 && Cfg::BM % 64 == 0,
                  "OQUANT last: a tile's activated columns lie in one 128-column group; rows in units of 64");
    out_group o;
    o.groups = (a.n_half + 127) / 128;
    o.g = nb * COLS / 128;
    o.width = min(128, a.n_half - 128 * o.g);
    o.of = (o.width + COLS - 1) / COLS;
    o.count = a.tile_count + (int64_t)((t.mb * Cfg::BM + row0) / 64) * o.groups + o.g;
    return o;
}

/* The group's last writer: quantize its columns of rows row0 .. row0 +
 * ROWS - 1 into act_q and act_scale, by THREADS threads (tid of them), and
 * re-arm the counter. A thread takes one 8-value chunk (16 a group) of
 * rows RSTEP apart, all its loads first, so that the L2 latency is paid
 * once, then each step for all its chunks. */
template <class Cfg, int THREADS, int ROWS>
__device__ void quantize_out_group(const mt_gemm_args &a, const tile_rows &t, int nb, int row0, int tid)
{
    using T = typename Cfg::T;
    using Q = typename tile_shape<Cfg>::Q::Tag;
    constexpr int RSTEP = THREADS / 16, ITERS = (ROWS + RSTEP - 1) / RSTEP;
    static_assert(THREADS % 32 == 0, "whole warps (a half-warp a row, the shuffles over full warps)");
    /* a is the kernel argument's first member (runtime/moe_launch.c asserts
     * the offset, 0): the whole argument starts where it does. */
    const mt_gemv_slot_args &s = reinterpret_cast<const mt_gemv_slot_args &>(a);
    const out_group o = out_group_of<Cfg>(a, t, nb, row0);
    mt_quant_args qa = {};
    qa.q = s.act_q;
    qa.n = a.n_half;
    const int c = tid % 16, r0 = tid / 16;
    const bool in_cols = c < o.width / 8;
    const T *C = static_cast<const T *>(a.C) + 128 * o.g;
    int64_t crow[ITERS];
    bool live[ITERS];
    chunk_raw k[ITERS];
#pragma unroll
    for (int i = 0; i < ITERS; i++) {
        const int r = r0 + i * RSTEP;
        int64_t arow;
        int slot;
        live[i] = (ROWS % RSTEP == 0 || r < ROWS) && tile_row<Cfg>(a, t, row0 + r, &arow, &crow[i], &slot);
        if (live[i] && in_cols)
            load_chunk<T, -1>(qa, quant_row<T>{C + crow[i] * a.ldc, 1.0f}, c, k[i], ldcg_chunks{});
    }
    /* Each step for every chunk before the next step, so that the chunks'
     * independent work interleaves: a warpgroup quantizing is one warp a
     * scheduler, with nothing else to hide one chunk's latencies. */
    float v[ITERS][8], m[ITERS], sc[ITERS];
#pragma unroll
    for (int i = 0; i < ITERS; i++) {
#pragma unroll
        for (int q = 0; q < 8; q++)
            v[i][q] = 0.f;
        if (live[i] && in_cols)
            chunk_values<T, -1, true>(qa, k[i], v[i]);
        m[i] = amax8(v[i]);
    }
#pragma unroll
    for (int off = 8; off > 0; off >>= 1)   /* the 16 lanes of one row */
#pragma unroll
        for (int i = 0; i < ITERS; i++)
            m[i] = fmaxf(m[i], __shfl_xor_sync(0xffffffffu, m[i], off));
#pragma unroll
    for (int i = 0; i < ITERS; i++)
        sc[i] = act_scale<Q>(m[i]);
#pragma unroll
    for (int i = 0; i < ITERS; i++)
        if (live[i] && in_cols) {
            if (c == 0)
                s.act_scale[crow[i] * o.groups + o.g] = sc[i];
            chunk_scale<Q, true>(sc[i]).store(qa, (int)crow[i], 16 * o.g + c, v[i], true);
        }
    if (tid == 0)
        *o.count = 0;
}

/* Count the writers of the held unit in (tid of those that meet by bar),
 * once their stores are visible; thread 0 keeps the count before its own
 * (h.ticket), which out_group_settle reads, so that the writers may do
 * other work while the count comes back. Nothing where no unit is held. */
template <class Cfg, class Bar>
__device__ void out_group_count_in(const mt_gemm_args &a, out_group_held &h, int tid, Bar bar)
{
    if (!h.live)
        return;
    /* This thread's stores are visible GPU-wide before its later writes
     * (a release: unlike __threadfence, L1 is left as it is) ... */
    asm volatile("fence.release.gpu;\n" ::: "memory");
    bar.sync();   /* ... and so are every thread's, before the count says so */
    if (tid == 0)
        h.ticket = atomicAdd(out_group_of<Cfg>(a, h.t, h.nb, h.row0).count, 1);
}

/* After out_group_count_in, on the same threads: if theirs was the group's
 * last count, those with qtid in [0, THREADS) quantize the held unit's
 * group (quantize_out_group, qtid their index). Then nothing is held. */
template <class Cfg, int THREADS, int ROWS, class Bar>
__device__ void out_group_settle(const mt_gemm_args &a, out_group_held &h, int tid, Bar bar, int qtid)
{
    if (!h.live)
        return;
    h.live = false;
    const bool last = tid == 0 && h.ticket == out_group_of<Cfg>(a, h.t, h.nb, h.row0).of - 1;
    if (!bar.any(last))
        return;
    __threadfence();   /* read the others' stores only after seeing them all counted */
    if (qtid >= 0)
        quantize_out_group<Cfg, THREADS, ROWS>(a, h.t, h.nb, h.row0, qtid);
}

/* The held unit counted in and settled at once: ws's one tile, and the
 * persistent pipes' last one after their loop. */
template <class Cfg, int THREADS, int ROWS, class Bar>
__device__ void out_group_flush(const mt_gemm_args &a, out_group_held &h, int tid, Bar bar, int qtid)
{
    out_group_count_in<Cfg>(a, h, tid, bar);
    out_group_settle<Cfg, THREADS, ROWS>(a, h, tid, bar, qtid);
}

} // namespace mt
