/*
 * Grouped GEMM of the fused-MoE experts on Hopper's warpgroup MMA (sm_90a).
 *
 * A CTA of BM/64 warpgroups computes a BM x BN tile of one expert's product;
 * warpgroup g owns rows 64g..64g+63 and issues wgmma m64nBNk16 (16-bit) or
 * m64nBNk32 (8-bit) from shared memory. Tiles, rows, scales and the epilogue
 * are gemm_tile.cuh's (the wgmma D fragment is the m16n8 C layout with
 * WARPS_M = BM/16, WARPS_N = 1).
 *
 * Cfg::SWAP: the operands trade places. Warpgroup g owns weight rows (tile
 * columns) 64g..64g+63 as the MMA's A operand and all BM token rows are its
 * N: wgmma m64nBMk16 / k32, D = the tile transposed, WARPS_M = BN/16. The
 * copies, the pipelines and write_tile are the same; the fold of the block
 * scales and the staging of the fragments read D transposed (sm90_scales,
 * stage_tile below).
 *
 * Shared memory: per stage an A tile (BM rows) and a B tile (BN weight rows),
 * each row one 128-byte line of K, in the 128-byte swizzle: 16-byte chunk c
 * of row r sits at r*128 + ((c ^ (r % 8)) * 16), tiles 1024-byte aligned;
 * or (BLOCK_K 128 of 16-bit values) two such panels each, the second for
 * the next 128 bytes of K (sm90_shape::PANELS).
 * The MMA's matrix descriptor for such a K-major tile: start address >> 4,
 * stride between 8-row groups 1024 bytes, swizzle mode 128B; the K steps
 * inside the 128-byte line advance the start address by 32 bytes (the
 * swizzle is a function of the address bits, which is why the tiles are
 * aligned).
 *
 * Copies are cp.async (gathered token rows in the standard format, an
 * expert's weight rows, or those by TMA) into STAGES buffers; three pipelines, Cfg::PIPE, are
 * described at grouped_gemm_sm90 below.
 *
 * Cfg provides what grouped_gemm.cuh's does (T, QUANT, FORMAT, EPI, BM, BN,
 * BK, GROUP_M, STAGES, WARPS_M = BM/16 or with SWAP BN/16, WARPS_N = 1) plus
 * PIPE, BLOAD (0: weights by cp.async, 1: by TMA),
 * ALOAD (0: A rows by cp.async, 1: by TMA from rows laid out per expert),
 * SWAP and the generated static mma(acc, desc_a, desc_b, scale_d).
 */
#pragma once
#include "gemm_tile.cuh"

namespace mt {

/* OQUANT "last" (last_quants<Cfg>): once the writers of a unit of a tile's
 * rows have stored them, they count themselves in for their 128-column
 * group (out_group_count_in), and the group's last writer quantizes the
 * group's columns of those rows for GEMM2 (out_group_settle). The
 * persistent pipes hold a tile's count (out_group_held) until the next
 * tile's epilogue: its stores are visible by then, so the fence costs
 * little, and the count comes back while the next tile is written. ws,
 * whose CTA has one tile, counts at once. Both in
 * grouped_gemm_sm90_out_quant.cuh, which only those variants include. */
struct out_group_held {
    tile_rows t;
    int nb, row0, ticket;
    bool live;   /* a unit is held: counted in by out_group_count_in, or to be */
};
template <class Cfg, class Bar>
__device__ void out_group_count_in(const mt_gemm_args &a, out_group_held &h, int tid, Bar bar);
template <class Cfg, int THREADS, int ROWS, class Bar>
__device__ void out_group_settle(const mt_gemm_args &a, out_group_held &h, int tid, Bar bar, int qtid);
template <class Cfg, int THREADS, int ROWS, class Bar>
__device__ void out_group_flush(const mt_gemm_args &a, out_group_held &h, int tid, Bar bar, int qtid);

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* The tensor memory accelerator (BLOAD=tma): one thread adds the bytes a
 * stage's bulk copies will bring to the stage's `full` barrier (with its
 * arrival, mbar_arrive_expect_bytes below; alone only for the weight tiles
 * requested before the wait, load_weights_early), then issues them; the
 * phase completes once those bytes and the expected arrivals have come.
 * The descriptor is the kernel argument's b_map (the kernel
 * parameter is __grid_constant__, so its address is a generic address of
 * the parameter). Coordinates: element along K, row, part, expert. */
__device__ __forceinline__ void mbar_expect_bytes(uint64_t *bar, int bytes)
{
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
                 : "memory");
}
/* The lead copier's arrival on a stage's `full` barrier together with the
 * bytes its bulk copies will deliver (0: none), in one operation, before
 * it issues them. The other copiers arrive by cp.async.mbarrier.arrive,
 * which the hardware performs once their own copies landed, and with none
 * in flight at once: nothing in PTX orders such an arrival after the same
 * thread's earlier mbarrier.expect_tx, so with a separate expect_tx the
 * barrier could complete before it expected the stage's bulk bytes (wrong
 * rows now and then from tiles whose copiers issue no cp.async,
 * docs/RELIABILITY.md session 27). A `full` barrier of a stage with bulk
 * copies counts this arrival too (sm90_shape::FULL_LEAD). */
__device__ __forceinline__ void mbar_arrive_expect_bytes(uint64_t *bar, int bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void tma_load_4d(void *dst, const void *map, uint64_t *bar, int k, int row, int part,
                                            int expert)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(smem_addr(dst)),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(k), "r"(row), "r"(part), "r"(expert),
                 "r"(smem_addr(bar))
                 : "memory");
}
/* ALOAD=tma: a box of a tile's A rows, from the kernel argument's a_map;
 * coordinates: element along K, row. */
__device__ __forceinline__ void tma_load_2d(void *dst, const void *map, uint64_t *bar, int k, int row)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(smem_addr(dst)),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(k), "r"(row), "r"(smem_addr(bar))
                 : "memory");
}

/* A 4-byte cp.async (the block modes' scales, sm90_loader): through L1
 * (.ca), the only cache mode for copies under 16 bytes; src_bytes 0 writes
 * a zero. */
__device__ __forceinline__ void cp_async4(void *dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                 "r"(src_bytes));
}

/* cp.async writes are generic-proxy writes; the MMA reads through the async
 * proxy. */
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/* A grouped_gemm_sm90 kernel's start: wait for the steps ahead (pdl_enter).
 * Their writes, made visible by the wait, are generic-proxy writes; a
 * kernel that reads its A rows (what those steps wrote) by TMA, an
 * async-proxy read, orders them before its bulk copies with a proxy fence
 * over global memory. (A programmatic launch runs under the tail of the
 * step ahead, so no kernel boundary does it.) */
template <class Cfg> __device__ __forceinline__ void sm90_enter()
{
    pdl_enter();
    if constexpr (Cfg::ALOAD == 1)
        asm volatile("fence.proxy.async.global;\n" ::: "memory");
}

/* Matrix descriptor of a K-major tile in the 128-byte swizzle (file comment). */
__device__ __forceinline__ uint64_t sw128_desc(const void *tile)
{
    const uint64_t addr = smem_addr(tile);
    return ((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

/* mbarrier primitives (shared::cta). A phase completes when the expected
 * number of arrivals has come; waiting on parity P returns once the phase
 * of that parity has completed. */
__device__ __forceinline__ void mbar_init(uint64_t *bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
/* Arrive once this thread's earlier cp.async copies have landed (the
 * barrier's count includes this arrival: .noinc). */
__device__ __forceinline__ void mbar_arrive_cp_async(uint64_t *bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *bar, int parity)
{
    asm volatile("{\n.reg .pred done;\nwait_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra wait_%=;\n}\n" ::"r"(smem_addr(bar)), "r"(parity) : "memory");
}
/* After this thread's mbarrier.init calls (generic-proxy writes), before
 * the CTA barrier that hands the mbarriers to the other threads: the bulk
 * copies complete their transactions on them through the async proxy,
 * which must see them initialized (the proxy fence the CUDA programming
 * guide's TMA example puts there). */
__device__ __forceinline__ void mbar_init_fence() { fence_proxy_async(); }
template <int R> __device__ __forceinline__ void regs_shrink() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R)); }
template <int R> __device__ __forceinline__ void regs_grow() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R)); }

template <class Cfg> struct sm90_shape : tile_shape<Cfg> {
    using Q = quant_traits<Cfg::QUANT>;
    static constexpr int CONSUMERS = tile_shape<Cfg>::THREADS;   /* threads holding fragments */
    static constexpr int ROW = 128;                         /* bytes of K per panel row */
    static constexpr int EPC = ROW / 8 / (Q::A_BITS / 8);   /* elements per 16-byte chunk */
    /* A stage holds K in PANELS panels of one 128-byte swizzle row per
     * tile row (the MMA's layout), one after the other: 64 16-bit values
     * (BLOCK_K 64) or 128 8-bit ones make one, BLOCK_K 128 of 16-bit
     * values two, so that a stage reads 256 bytes of every weight row.
     * (Enumerators, not static constexpr members, which NVRTC emits into
     * the image as globals: the images of one panel stay as they were.) */
    enum : int {
        PANELS = Cfg::BK * Q::A_BITS / 8 / ROW, PANEL_K = ROW * 8 / Q::A_BITS,
        A_PANEL = Cfg::BM * ROW, B_PANEL = Cfg::BN * ROW
    };
    static constexpr int A_STAGE = A_PANEL * PANELS, B_STAGE = B_PANEL * PANELS;
    /* Block modes: a stage also carries its K block's scales, the BM token
     * rows' and one weight scale per 8 tile columns (a fragment's 8 weight
     * rows are in one 128-row block: N is a multiple of 16), copied with
     * the stage so that the fold reads them from shared memory. Read from
     * global memory one fold ahead, their latency outlasted a K tile's
     * MMAs (Nsight Compute, docs/PERFORMANCE.md session 24). After the B
     * ring, so that the swizzled tiles stay aligned. */
    static constexpr int SCALES = tile_shape<Cfg>::BLOCK ? Cfg::BM + Cfg::BN / 8 : 0;
    static constexpr int SC_STAGE = (SCALES * 4 + 15) / 16 * 16;
    static constexpr int PIPE_BYTES = Cfg::STAGES * (A_STAGE + B_STAGE + SC_STAGE);
    static constexpr int KSTEPS = ROW / 32;                 /* MMAs per panel */
    /* Where things are in shared memory. "persist" keeps the fp32
     * epilogue tile out of the pipeline buffers (the copies of the next
     * output tile go on while this one is written) and two sets of
     * output-row tables, each with a pair of mbarriers (filled, free). */
    static constexpr bool PERSIST = Cfg::PIPE == 2;
    static constexpr int EPI_BYTES = tile_shape<Cfg>::EPI_BYTES;
    static constexpr int EPI_AT = PERSIST ? PIPE_BYTES : 0;
    static constexpr int BAR_AT = PERSIST ? PIPE_BYTES + EPI_BYTES
                                          : (PIPE_BYTES > EPI_BYTES ? PIPE_BYTES : EPI_BYTES);
    static constexpr int NBARS = 2 * Cfg::STAGES + (PERSIST ? 4 : 0);
    /* Arrivals on a stage's `full` barrier besides one per copying thread:
     * the lead's mbar_arrive_expect_bytes where a stage has bulk copies. */
    static constexpr int FULL_LEAD = Cfg::BLOAD == 1 || Cfg::ALOAD == 1 ? 1 : 0;
    /* "sync" with TMA weight loads: a stage's `full` barrier counts the
     * lead's arrival alone (its other copies are cp.async groups). */
    static constexpr bool SYNC_TMA = Cfg::PIPE == 0 && Cfg::BLOAD == 1;
    static constexpr int ROW_SETS = PERSIST ? 2 : 1;
    /* The MMA's N, and the accumulator fragments (of 8 columns) a thread
     * holds for it. */
    static constexpr int MMA_N = Cfg::SWAP ? Cfg::BM : Cfg::BN;
    static constexpr int ACC_NT = MMA_N / 8;
    static_assert(Cfg::BK * Q::A_BITS / 8 == PANELS * ROW && (PANELS == 1 || PANELS == 2),
                  "BLOCK_K must fill one or two 128-byte lines");
    static_assert(PANELS == 1 || !tile_shape<Cfg>::BLOCK, "a block-scaled K tile is one panel");
    static_assert(!tile_shape<Cfg>::BLOCK || Cfg::BK == 128, "a K tile is one scale block");
    /* The scales of ring stage `stage`, sB the ring of B tiles. */
    static __device__ __forceinline__ float *stage_scales(unsigned char *sB, int stage)
    {
        return reinterpret_cast<float *>(sB + Cfg::STAGES * B_STAGE + stage * SC_STAGE);
    }
    static __device__ __forceinline__ const float *stage_scales(const unsigned char *sB, int stage)
    {
        return reinterpret_cast<const float *>(sB + Cfg::STAGES * B_STAGE + stage * SC_STAGE);
    }
    static_assert(Cfg::SWAP ? Cfg::BN % 64 == 0 && Cfg::BM % 16 == 0 && Cfg::PIPE != 0
                            : Cfg::BM % 64 == 0 && Cfg::BN % 16 == 0,
                  "tile does not split into warpgroups");
    static_assert(Cfg::ALOAD == 0 || Cfg::PIPE != 0, "TMA row loads need a copying warpgroup");
};

/* The cp.async copies of one pipeline stage done by LOADERS threads (thread
 * `id` of them): chunk id % 8 of rows id / 8 + i * LOADERS / 8. LOADERS / 8
 * is a multiple of 8, so a thread's swizzled chunk position is fixed too.
 * The A row of each tile row (gathered token rows in the standard format,
 * the expert's rows in the batched one) is resolved once into a table in
 * shared memory (byte offset, -1: no row), the loaders taking turns over
 * the rows, and each thread then holds the sources of the rows it copies
 * (below); weight rows are computed as they go, or (BLOAD=tma) the first
 * loader brings the stage's weight tile in with the tensor memory
 * accelerator: one box of BN rows, or for the fused activation two of
 * BN/2 (gate rows, up rows), zero-filled past the ends like the copies
 * (per panel: two-panel stages take each box twice, the second 128 bytes
 * of K further on). With ALOAD=tma the A rows come the same way, one box
 * of BM rows (per panel) from
 * a_map: rows laid out per expert (the batched format, or the sorted order
 * with a_sorted), so a tile's rows are consecutive from a_row0; the row
 * table is then not needed. The block modes' scales of a stage (sm90_shape)
 * are 4-byte cp.async copies, entry id + i * LOADERS by thread id, from
 * sources resolved once per tile (nullptr: a missing row or column, whose
 * scale is zero-filled).
 * Held sources: each copying thread keeps the sources of its own A rows in
 * registers, read once out of the table (hold_rows, after the barrier that
 * follows init), so that a K tile's copy of a row is an add and a cp.async.
 * Resolving them for every K tile (a row table load, then the row's 64-bit
 * address, each waiting on the one before) took most of the instructions
 * of the "sync" main loop, which its own threads issue between the MMAs
 * (Nsight Compute, docs/PERFORMANCE.md session 27), and set the pace of
 * the copying warpgroups of the other pipelines: a 128 x 128 "ws" tile's
 * consumers waited for their stages on a fifth of their samples while the
 * copiers sat on those loads (session 28). HOLD_B ("sync" with cp.async
 * weights): the weight rows' sources too, from init; the copying
 * warpgroups (72 registers) resolve weight rows as they go, or take them
 * by TMA. */
template <class Cfg, int LOADERS> struct sm90_loader {
    using S = sm90_shape<Cfg>;
    using Q = typename S::Q;
    static constexpr int STEP = LOADERS / 8;
    static constexpr int A_ITERS = Cfg::BM / STEP, B_ITERS = Cfg::BN / STEP;
    static_assert(STEP % 8 == 0 && Cfg::BM % STEP == 0 && Cfg::BN % STEP == 0, "uneven copy split");
    static constexpr bool TMA = Cfg::BLOAD == 1;
    static constexpr bool A_TMA = Cfg::ALOAD == 1;
    static constexpr int BOX_ROWS = tile_shape<Cfg>::FUSED ? Cfg::BN / 2 : Cfg::BN;
    static constexpr int SC_ITERS = (S::SCALES + LOADERS - 1) / LOADERS;
    static constexpr bool HOLD_B = Cfg::PIPE == 0 && !TMA;
    static constexpr int HELD_A = A_TMA ? 1 : A_ITERS, HELD_B = HOLD_B ? B_ITERS : 1;
    const unsigned char *A, *B;
    /* A row's source; where the tile has no such row, A itself, read for
     * nothing (a zero-filling copy): bit i of a_rows / b_rows says which
     * rows are there. One register of bits and no null test per copy. */
    const unsigned char *a_src[HELD_A], *b_src[HELD_B];
    unsigned a_rows = 0, b_rows = 0;
    static_assert(A_ITERS <= 32 && (!HOLD_B || B_ITERS <= 32), "a bit per held row");
    const float *sc_src[SC_ITERS > 0 ? SC_ITERS : 1];   /* K block 0's scale of each entry */
    int sc_id;
    const int64_t *arow;   /* shared: BM byte offsets into A */
    int cc, r0, dst, nb, expert;
    int a_row0;            /* ALOAD=tma: the tile's first row in a_map */
    bool lead;             /* issues the TMA copies */

    /* Fills the row table: the caller makes the loaders wait for each other
     * before the first load. */
    __device__ __forceinline__ void init(const mt_gemm_args &a, const tile_rows &t, int nb_, int id,
                                         int64_t *table)
    {
        /* Opaque to the compiler (an empty asm that may change them), so
         * that they stay in registers: rederived from the thread index for
         * every K tile, they took a dozen instructions of each. */
        cc = id & 7;
        r0 = id >> 3;
        dst = r0 * S::ROW + ((cc ^ (r0 & 7)) * 16);
        asm volatile("" : "+r"(cc), "+r"(r0), "+r"(dst));
        nb = nb_;
        expert = t.expert;
        lead = id == 0;
        A = static_cast<const unsigned char *>(a.A);
        B = static_cast<const unsigned char *>(a.B) + (int64_t)t.expert * a.b_expert_stride * Q::B_BITS / 8;
        a_row0 = Cfg::FORMAT == 0 ? t.mb * Cfg::BM : t.expert * a.max_tokens + t.r0;
        arow = table;
        sc_id = id;
        /* Entries id + i * LOADERS: token rows first (their A offsets into
         * the table, their scales' sources: one lookup of the row serves
         * both), then the weight scales' column groups. */
        if constexpr (HOLD_B) {
            b_rows = 0;
#pragma unroll
            for (int i = 0; i < B_ITERS; i++) {
                const unsigned char *src = b_source(a, i);
                b_src[i] = src ? src : A;
                b_rows |= (src ? 1u : 0u) << i;
            }
        }
        constexpr int ROW_ITERS = A_TMA && S::SCALES == 0 ? 0 : (Cfg::BM + LOADERS - 1) / LOADERS;
        constexpr int ITERS = ROW_ITERS > SC_ITERS ? ROW_ITERS : SC_ITERS;
        const int kblocks = (a.K + 127) / 128, nblocks = (a.N + 127) / 128;
#pragma unroll
        for (int i = 0; i < ITERS; i++) {
            const int e = id + i * LOADERS;
            int64_t ar, crow;
            int slot, n;
            if (e < Cfg::BM) {
                const bool has = tile_row<Cfg>(a, t, e, &ar, &crow, &slot);
                if constexpr (!A_TMA)
                    table[e] = has ? ar * a.lda * (Q::A_BITS / 8) : -1;
                if (i < SC_ITERS)
                    sc_src[i] = has ? a.a_scale + ar * a.a_scale_ld : nullptr;
            } else if (i < SC_ITERS) {
                sc_src[i] = e < S::SCALES && weight_row<Cfg>(a, nb, (e - Cfg::BM) * 8, &n)
                                ? a.b_scale + (int64_t)(t.expert * nblocks + n / 128) * kblocks
                                : nullptr;
            }
        }
    }

    /* Where this thread's weight row copy i of a stage starts (before K),
     * nullptr where the tile has no such row. */
    __device__ __forceinline__ const unsigned char *b_source(const mt_gemm_args &a, int i) const
    {
        int n;
        return weight_row<Cfg>(a, nb, r0 + i * STEP, &n) ? B + (int64_t)n * a.ldb * Q::B_BITS / 8 : nullptr;
    }

    /* This thread's A rows out of the table init filled (every loader's
     * part of it: the caller makes the loaders wait for each other first). */
    __device__ __forceinline__ void hold_rows()
    {
        if constexpr (!A_TMA) {
            a_rows = 0;
#pragma unroll
            for (int i = 0; i < A_ITERS; i++) {
                const int64_t off = arow[r0 + i * STEP];
                a_src[i] = A + (off >= 0 ? off : 0);
                a_rows |= (off >= 0 ? 1u : 0u) << i;
            }
        }
    }

    /* BLOAD=tma: K tile kt's weight tile of column block nb of `expert`
     * into sB, completing on `full` (which expects its bytes). */
    static __device__ __forceinline__ void tma_weights(const mt_gemm_args &a, unsigned char *sB, int kt, int nb,
                                                       int expert, uint64_t *full)
    {
#pragma unroll
        for (int p = 0; p < S::PANELS; p++)
#pragma unroll
            for (int part = 0; part < Cfg::BN / BOX_ROWS; part++)
                tma_load_4d(sB + p * S::B_PANEL + part * BOX_ROWS * S::ROW, a.b_map, full,
                            kt * Cfg::BK + p * S::PANEL_K, nb * BOX_ROWS, part, expert);
    }

    /* K is a multiple of the chunk width (a plan checks it): a chunk is
     * wholly inside or outside [0, K). Missing rows and K past the end are
     * zero-filled. b_issued: the weight tile was requested already
     * (load_weights_early). */
    __device__ __forceinline__ void load(const mt_gemm_args &a, unsigned char *sA, unsigned char *sB,
                                         float *sS, int kt, uint64_t *full = nullptr, bool b_issued = false) const
    {
        const int k0 = kt * Cfg::BK;
#pragma unroll
        for (int i = 0; i < SC_ITERS; i++)
            if (sc_id + i * LOADERS < S::SCALES)
                cp_async4(sS + sc_id + i * LOADERS, sc_src[i] ? sc_src[i] + kt : a.b_scale, sc_src[i] ? 4 : 0);
        /* The stage's bulk bytes are expected once, before its first
         * copy (as CUTLASS's TMA pipelines expect a stage's bytes with one
         * arrive.expect_tx), so that no copy can complete against a phase
         * that does not yet expect the bytes of all of them. */
        if constexpr (A_TMA || TMA) {
            if (lead) {
                const int bytes = (A_TMA ? S::A_STAGE : 0) + (TMA && !b_issued ? S::B_STAGE : 0);
                mbar_arrive_expect_bytes(full, bytes);
                if constexpr (A_TMA) {
                    tma_load_2d(sA, a.a_map, full, k0, a_row0);
                    if constexpr (S::PANELS == 2)
                        tma_load_2d(sA + S::A_PANEL, a.a_map, full, k0 + S::PANEL_K, a_row0);
                }
                if constexpr (TMA)
                    if (!b_issued)
                        tma_weights(a, sB, kt, nb, expert, full);
            }
        }
        copy_panel(a, sA, sB, k0);
        if constexpr (S::PANELS == 2)
            copy_panel(a, sA + S::A_PANEL, sB + S::B_PANEL, k0 + S::PANEL_K);
    }

    /* The cp.async copies of one panel of a stage (sA, sB its A and B
     * panels), from element k0 of K on. Past the end of K every copy reads
     * nothing, from its row's start. */
    __device__ __forceinline__ void copy_panel(const mt_gemm_args &a, unsigned char *sA, unsigned char *sB,
                                               int k0) const
    {
        const bool k_ok = k0 + cc * S::EPC < a.K;
        const int64_t kbytes = k_ok ? (int64_t)k0 * Q::A_BITS / 8 + cc * 16 : 0;
        const unsigned a_live = k_ok ? a_rows : 0u;
#pragma unroll
        for (int i = 0; i < (A_TMA ? 0 : A_ITERS); i++)
            cp_async16(sA + dst + i * STEP * S::ROW, a_src[i] + kbytes, (a_live >> i) & 1 ? 16 : 0);
        if constexpr (HOLD_B) {
            const unsigned b_live = k_ok ? b_rows : 0u;
#pragma unroll
            for (int i = 0; i < B_ITERS; i++)
                cp_async16(sB + dst + i * STEP * S::ROW, b_src[i] + kbytes, (b_live >> i) & 1 ? 16 : 0);
        } else {
#pragma unroll
            for (int i = 0; i < (TMA ? 0 : B_ITERS); i++) {
                const unsigned char *src = b_source(a, i);
                const bool ok = k_ok && src;
                cp_async16(sB + dst + i * STEP * S::ROW, ok ? src + kbytes : A, ok ? 16 : 0);
            }
        }
    }
};

/* The MMAs of one stage for warpgroup wg: KSTEPS wgmma a panel, committed
 * as one group. Descriptor addresses are in 16-byte units: a K step is +2,
 * a panel the panel's bytes / 16. The
 * warpgroup's 64 rows are token rows, or (SWAP) weight rows. The block
 * modes' first MMA of a stage writes its product over the accumulators
 * (scale-d 0): they hold the last K tile's sums, which the fold took. */
template <class Cfg, class Acc>
__device__ __forceinline__ void mma_stage(Acc &acc, const unsigned char *sA, const unsigned char *sB, int wg)
{
    using S = sm90_shape<Cfg>;
    const uint64_t da = Cfg::SWAP ? sw128_desc(sB + wg * 64 * S::ROW) : sw128_desc(sA + wg * 64 * S::ROW);
    const uint64_t db = Cfg::SWAP ? sw128_desc(sA) : sw128_desc(sB);
    constexpr int PA = (Cfg::SWAP ? S::B_PANEL : S::A_PANEL) / 16, PB = (Cfg::SWAP ? S::A_PANEL : S::B_PANEL) / 16;
    wgmma_fence();
#pragma unroll
    for (int p = 0; p < S::PANELS; p++)
#pragma unroll
        for (int kk = 0; kk < S::KSTEPS; kk++)
            Cfg::mma(acc, da + p * PA + 2 * kk, db + p * PB + 2 * kk, S::BLOCK && p == 0 && kk == 0 ? 0 : 1);
    wgmma_commit();
}

/* Block modes: the fold of one K block's sums into the scaled sums,
 * facc += acc * a_scale * w_scale (the next K block's first MMA then
 * overwrites acc, mma_stage: no moves to zero it), with the scales of the
 * stage the K block came in (sm90_shape: sc[r] of token row r, sc[BM + g]
 * of tile columns 8g .. 8g + 7): take() reads this thread's scales out of
 * the stage, after which the stage may go back to the copiers, and fold()
 * applies them. This thread holds token rows 16 * warp + lane / 4 + 8h and
 * tile columns 8j + 2 (lane % 4) + c of fragment j, or with SWAP the tile
 * transposed: weight rows (tile columns) 16 * warp + lane / 4 + 8h and
 * token rows 8j + 2 (lane % 4) + c. The same sums in the same order as
 * grouped_gemm.cuh's block_scales.
 * Unswapped, the tile's columns fall into SEGS segments of SEG columns
 * whose weight rows lie in one 128-row scale block, and so share a weight
 * scale: SEG divides 128 and the first weight row of every segment is a
 * multiple of SEG (nb * OUT_COLS + s * SEG; for the fused activation's up
 * half n_half + that, so only where n_half is a multiple of SEG:
 * with_scales). With SEGMENTED a K block's fold takes one weight scale per
 * segment and one product per token row and segment (2 * SEGS
 * multiplications, not one per fragment and row: a tile up to 128 columns
 * wide has one segment, or two with the fused activation), the same
 * products, so the same sums.
 * Else every fragment's own scale. A missing column's scale is its
 * segment's, not 0: its sums are 0 (zero-filled weight rows) and it is
 * never stored. */
template <class Cfg, bool SEGMENTED = true> struct sm90_scales {
    using S = sm90_shape<Cfg>;
    static constexpr int NT = S::ACC_NT;
    static constexpr int gcd(int x, int y) { return y ? gcd(y, x % y) : x; }
    static constexpr int SEG = gcd(tile_shape<Cfg>::OUT_COLS, 128), SEGS = Cfg::BN / SEG, SEG_NT = SEG / 8;
    static constexpr bool SEG_FOLD = SEGMENTED && !Cfg::SWAP;
    int warp, lane;
    /* Unswapped: the token rows' (h) and the fragments' weight scales (or
     * with SEG_FOLD the segments'); swapped: the token rows' (j, c) and the
     * weight rows' (h). */
    float sa[Cfg::SWAP ? NT : 1][2], sw[Cfg::SWAP ? 2 : SEG_FOLD ? SEGS : NT];

    __device__ __forceinline__ void init(int warp_, int lane_) { warp = warp_, lane = lane_; }

    __device__ __forceinline__ void take(const float *sc)
    {
        if constexpr (!Cfg::SWAP) {
#pragma unroll
            for (int h = 0; h < 2; h++)
                sa[0][h] = sc[warp * 16 + (lane >> 2) + 8 * h];
            if constexpr (SEG_FOLD) {
#pragma unroll
                for (int s = 0; s < SEGS; s++)
                    sw[s] = sc[Cfg::BM + s * SEG_NT];
            } else {
                /* The column groups' scales start 16-byte aligned (BM rows
                 * of 4 bytes after the stage's start, BM a multiple of 64). */
                static_assert(NT % 4 == 0 && Cfg::BM % 4 == 0, "column group scales in 16-byte loads");
                const float4 *v = reinterpret_cast<const float4 *>(sc + Cfg::BM);
#pragma unroll
                for (int j = 0; j < NT / 4; j++) {
                    const float4 f = v[j];
                    sw[4 * j] = f.x, sw[4 * j + 1] = f.y, sw[4 * j + 2] = f.z, sw[4 * j + 3] = f.w;
                }
            }
        } else {
            /* A thread's two token rows of fragment j are adjacent, at an
             * even index: one 8-byte load. */
#pragma unroll
            for (int j = 0; j < NT; j++) {
                const float2 f = *reinterpret_cast<const float2 *>(sc + j * 8 + (lane & 3) * 2);
                sa[j][0] = f.x, sa[j][1] = f.y;
            }
#pragma unroll
            for (int h = 0; h < 2; h++)
                sw[h] = sc[Cfg::BM + warp * 2 + h];
        }
    }

    template <class Acc> __device__ __forceinline__ void fold(Acc (&acc)[1][NT][4], float (&facc)[1][NT][4]) const
    {
        if constexpr (SEG_FOLD) {
            float p[2][SEGS];
#pragma unroll
            for (int h = 0; h < 2; h++)
#pragma unroll
                for (int s = 0; s < SEGS; s++)
                    p[h][s] = sa[0][h] * sw[s];
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int q = 0; q < 4; q++)
                    facc[0][j][q] += (float)acc[0][j][q] * p[q >> 1][j / SEG_NT];
        } else {
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    float s;
                    if constexpr (Cfg::SWAP)
                        s = sa[j][q & 1] * sw[q >> 1];
                    else
                        s = sa[0][q >> 1] * sw[j];
                    facc[0][j][q] += (float)acc[0][j][q] * s;
                }
        }
    }
};

/* A new output tile's sums start at 0: acc, or in the block modes facc
 * (the first MMA of every K tile overwrites acc, mma_stage, so that acc
 * only needs a defined value once, at its declaration). */
template <class Cfg, class AccT, class FAccT> __device__ __forceinline__ void clear_sums(AccT &acc, FAccT &facc)
{
#pragma unroll
    for (int j = 0; j < sm90_shape<Cfg>::ACC_NT; j++)
#pragma unroll
        for (int q = 0; q < 4; q++) {
            if constexpr (sm90_shape<Cfg>::BLOCK)
                facc[0][j][q] = 0.f;
            else
                acc[0][j][q] = 0;
        }
}

/* f(bs) with this launch's fold of the block scales, bs initialized for
 * computing warp `warp`: segmented (above) unless the fused activation's
 * n_half is not a multiple of the segment, which only the fused block
 * modes check, at run time; their main loop is then compiled twice, one
 * copy per fold. A branch inside the fold let the compiler share its
 * multiply-adds between the two, with a move per fragment into the
 * registers they read (as many instructions as the products it saved). */
template <class Cfg, class F>
__device__ __forceinline__ void with_scales(const mt_gemm_args &a, int warp, int lane, F &&f)
{
    if constexpr (sm90_shape<Cfg>::BLOCK && tile_shape<Cfg>::FUSED && !Cfg::SWAP) {
        if (a.n_half % sm90_scales<Cfg>::SEG != 0) {
            sm90_scales<Cfg, false> bs;
            bs.init(warp, lane);
            f(bs);
            return;
        }
    }
    sm90_scales<Cfg> bs;
    bs.init(warp, lane);
    f(bs);
}

/* This computing warp's fragments into the fp32 tile sC (token rows, LDC
 * apart), scaled as stage_fragments (gemm_tile.cuh) scales them; with SWAP
 * the fragments are the tile transposed (sm90_scales' mapping). */
template <class Cfg, class Acc, class FAcc>
__device__ __forceinline__ void stage_tile(const mt_gemm_args &a, const tile_rows &t, int nb, int warp,
                                           int lane, const Acc &acc, const FAcc &facc, float *sC)
{
    using S = sm90_shape<Cfg>;
    using Q = typename S::Q;
    if constexpr (!Cfg::SWAP) {
        stage_fragments<Cfg>(a, t, nb, warp, 0, lane, acc, facc, sC);
    } else {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int col = warp * 16 + (lane >> 2) + h * 8;
            int n;
            const bool has_n = weight_row<Cfg>(a, nb, col, &n);
            float sw = 1.f;
            if constexpr (Q::GRAN == 1)
                sw = a.a_scale[0] * a.b_scale[t.expert];
            else if constexpr (Q::GRAN == 2)
                sw = has_n ? a.b_scale[(int64_t)t.expert * a.N + n] : 0.f;
#pragma unroll
            for (int j = 0; j < S::ACC_NT; j++)
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    const int r = j * 8 + (lane & 3) * 2 + c;
                    float v;
                    if constexpr (S::BLOCK) {
                        v = facc[0][j][h * 2 + c];
                    } else if constexpr (Q::GRAN == 2) {
                        int64_t arow, crow;
                        int slot;
                        const float sa = tile_row<Cfg>(a, t, r, &arow, &crow, &slot) ? a.a_scale[arow] : 0.f;
                        v = (float)acc[0][j][h * 2 + c] * (sa * sw);
                    } else {
                        v = (float)acc[0][j][h * 2 + c] * sw;
                    }
                    sC[epi_at<S::LDC>(r, col)] = v;
                }
        }
    }
}

/* The copying warpgroup's part of one output tile ("ws", "persist"): the
 * tile's rows into the tables (then an arrival on rows_filled, if given),
 * then its K tiles kt0 .. kt_end - 1 (a split-K slice, or all of K) into
 * the ring of STAGES buffers, each once the computing threads gave it back.
 * `it` counts the K tiles of the CTA's earlier output tiles: ring position
 * and barrier phases run on across tiles. The weight tiles of the CTA's
 * first b_early K tiles (it < b_early) were requested before the wait
 * (load_weights_early). */
template <class Cfg>
__device__ __forceinline__ void copy_tile(const mt_gemm_args &a, const tile_rows &t, int nb, int tid,
                                          int64_t *arow_table, out_rows rows, uint64_t *rows_filled,
                                          unsigned char *sA, unsigned char *sB, uint64_t *full,
                                          uint64_t *empty, int kt_end, int it, int kt0 = 0, int b_early = 0)
{
    using S = sm90_shape<Cfg>;
    sm90_loader<Cfg, 128> ld;
    ld.init(a, t, nb, tid, arow_table);
    fill_out_rows<Cfg>(a, t, rows, tid, 128);
    if (rows_filled)
        mbar_arrive(rows_filled);
    asm volatile("bar.sync 1, 128;\n" ::: "memory");   /* the copying warpgroup only */
    ld.hold_rows();
    for (int kt = kt0; kt < kt_end; kt++, it++) {
        const int stage = it % Cfg::STAGES;
        if (it >= Cfg::STAGES)
            mbar_wait(&empty[stage], (it / Cfg::STAGES - 1) & 1);
        ld.load(a, sA + stage * S::A_STAGE, sB + stage * S::B_STAGE, S::stage_scales(sB, stage), kt,
                &full[stage], it < b_early);
        mbar_arrive_cp_async(&full[stage]);
    }
}

/* Does computing warpgroup wg have a token row in tile t? An unswapped
 * tile of two computing warpgroups gives each 64 of its rows, and the last
 * row block of an expert whose tokens are not a multiple of 128 may leave
 * the second one padding rows only. In the "sync" and "ws" loops such a
 * warpgroup skips its MMAs and the fold of its sums for the tile
 * (compute_tile_by, the "sync" loop), so that the other one has the tensor
 * cores alone; a CTA there has one tile, and this read of the tile's rows
 * hides under the pipeline's fill. In the persistent loops the skip is a
 * tuning choice (PAD_SKIP, persist_may_skip), asked of the tile's
 * output-row table (wg_rows_in_table): this read there sat between tile_of
 * and each tile's first MMA. The sums a skipping warpgroup stages stay at their cleared zeros
 * (acc, or in the block modes facc, since the fold is skipped too), and no
 * row of it is written (write_tile: a missing row has no output row). Padding rows come last in
 * a block, so the warpgroup's first row tells. Swapped tiles (whose
 * warpgroups split the weight rows) and tiles of one computing warpgroup
 * always have rows. Lane 0's answer, shuffled to the warp, so that ptxas
 * sees a value the same in every lane of the warp (as the warpgroup
 * index): the MMAs it guards are then not on a divergent path (which
 * serializes them, C7520). */
/* (A function, not a static constexpr member: NVRTC emits such a member
 * as a global of every image that names it, which moves the code of
 * kernels that never read it; db refresh --compile would see them as
 * changed.) */
template <class Cfg> __device__ constexpr bool wg_may_skip() { return !Cfg::SWAP && Cfg::BM > 64; }

/* Cfg::PAD_SKIP, an enumerator the persistent variants of PAD_SKIP yes
 * declare (and only they, so that the others' source and code stay as they
 * were; functions, for the reason wg_may_skip is one). */
template <class C> __device__ constexpr auto pad_skip_of(int) -> decltype(C::PAD_SKIP, bool())
{
    return C::PAD_SKIP != 0;
}
template <class C> __device__ constexpr bool pad_skip_of(long) { return false; }
/* Does a persistent loop's warpgroup of padding rows skip its MMAs? Only
 * where the tuner chose it (PAD_SKIP yes): the skip made some persistent
 * GEMMs faster and others slower on an H100 (Qwen3 fp8 M = 4096 GEMM1
 * 0.979x the time, Mixtral M = 1024 GEMM2 1.046x; docs/PERFORMANCE.md,
 * sessions 35 and 37). */
template <class Cfg> __device__ constexpr bool persist_may_skip()
{
    return wg_may_skip<Cfg>() && pad_skip_of<Cfg>(0);
}
template <class Cfg> __device__ __forceinline__ bool wg_has_rows(const mt_gemm_args &a, const tile_rows &t, int wg)
{
    if constexpr (!wg_may_skip<Cfg>()) {
        return true;
    } else {
        int64_t arow, crow;
        int slot;
        const bool has = tile_row<Cfg>(a, t, wg * 64, &arow, &crow, &slot);
        return __shfl_sync(0xffffffffu, has ? 1 : 0, 0) != 0;
    }
}

/* wg_has_rows for the persistent loops, from the output-row table of the
 * tile's set (fill_out_rows: offset -1 for a padding row), which the
 * copiers fill before they copy the tile's first stage (copy_tile), so that
 * waiting for it (rows_filled) before the first MMA costs nothing the MMAs
 * did not wait for, and the answer is a shared-memory read. With the
 * global read of wg_has_rows there, between tile_of and each tile's first
 * MMA, the persistent tiles ran up to 16 % slower (docs/PERFORMANCE.md,
 * session 35). */
template <class Cfg> __device__ __forceinline__ bool wg_rows_in_table(const out_rows &rows, int wg)
{
    if constexpr (!persist_may_skip<Cfg>())
        return true;
    else
        return __shfl_sync(0xffffffffu, rows.dst[wg * 64] >= 0 ? 1 : 0, 0) != 0;
}

/* Cfg::TURNS, an enumerator the variants of TURNS yes declare (only they,
 * as PAD_SKIP). */
template <class C> __device__ constexpr auto turns_of(int) -> decltype(C::TURNS, bool())
{
    return C::TURNS != 0;
}
template <class C> __device__ constexpr bool turns_of(long) { return false; }
/* MMA turns (TURNS yes: block modes, two computing warpgroups on one tile).
 * A block-mode K tile is MMAs, a wait for them, then the fold of their sums
 * on the warpgroup's own threads (compute_tile_by). Both warpgroups wait
 * for the same stage, so left alone they issue their MMAs together, the
 * tensor cores finish both sets at about the same time, and then both
 * warpgroups fold while the tensor cores idle: in Nsight Compute's
 * per-instruction view of the H100 file's Qwen3 fp8 M = 4096 GEMM1 the
 * computing warps spent about a third of their samples in the MMA wait and
 * a quarter in the fold (docs/PERFORMANCE.md, session 56). With turns,
 * warpgroup 0 issues a K tile's MMAs first and warpgroup 1 after it (named
 * barriers 4 and 5, 256 threads: the one whose turn it is waits, the other
 * arrives once its MMAs are issued), so the tensor cores run warpgroup 0's
 * MMAs, then warpgroup 1's while warpgroup 0 folds, and so on. Per tile:
 * warpgroup 0 waits for its turn from its second K tile on, warpgroup 1 on
 * every K tile, and each passes it on every K tile; after its last K tile
 * warpgroup 0 waits once more, for warpgroup 1's last pass (close). So no
 * barrier takes a second arrival before the wait that pairs with the first
 * (warpgroup 0 cannot pass twice, across the end of a tile, while warpgroup
 * 1 lags), and none is left with an arrival when the tile ends. The sums
 * are those of the loop without turns, bit for bit. */
template <class Cfg> struct mma_turns {   /* no static constexpr member: see wg_may_skip */
    int wg;
    __device__ __forceinline__ void wait(int kt, int kt0) const
    {
        if constexpr (turns_of<Cfg>(0))
            if (wg == 1 || kt > kt0)
                asm volatile("bar.sync %0, 256;\n" ::"r"(4 + wg) : "memory");
    }
    __device__ __forceinline__ void pass() const
    {
        if constexpr (turns_of<Cfg>(0))
            asm volatile("bar.arrive %0, 256;\n" ::"r"(5 - wg) : "memory");
    }
    __device__ __forceinline__ void close(int kt0, int kt_end) const
    {
        if constexpr (turns_of<Cfg>(0))
            if (wg == 0 && kt_end > kt0)
                asm volatile("bar.sync 4, 256;\n" ::: "memory");
    }
};

/* A computing warpgroup's MMAs over one output tile's K tiles kt0 ..
 * kt_end - 1 ("ws", "persist"; `it` and the range as in copy_tile). A stage goes back to the copiers once
 * its MMAs are done: in the block modes, which wait for them to fold the
 * sums, once the fold took the stage's scales, else one K tile later (one
 * MMA group stays in flight),
 * the last one after the final wait. give_back(stage) hands it back: an
 * arrival on the stage's `empty` (compute_tile), and for a CTA pair on the
 * peer's too (grouped_gemm_sm90_chunked.cuh). has_rows false (wg_has_rows):
 * a warpgroup of padding rows waits for each stage and gives it straight
 * back, with no MMAs and no fold, so that the stages come and go as they
 * do for the other warpgroup and its sums stay as they were cleared. */
template <class Cfg, class AccT, class FAccT, class Scales, class GiveBack>
__device__ __forceinline__ void compute_tile_by(AccT &acc, FAccT &facc, Scales &bs,
                                                const unsigned char *sA, const unsigned char *sB,
                                                uint64_t *full, const GiveBack &give_back, int wg,
                                                bool has_rows, int kt_end, int it, int kt0 = 0)
{
    using S = sm90_shape<Cfg>;
    const mma_turns<Cfg> turns{wg};
    static_assert(!turns_of<Cfg>(0) || (S::BLOCK && wg_may_skip<Cfg>()),
                  "MMA turns: block modes, two computing warpgroups on one tile");
    if (!has_rows) {
        /* Kept rolled: unrolled, ptxas rebuilt the cleared sums at the exit
         * of each copy (700 instructions more in a block-scaled tile). */
#pragma unroll 1
        for (int kt = kt0; kt < kt_end; kt++, it++) {
            const int stage = it % Cfg::STAGES;
            mbar_wait(&full[stage], (it / Cfg::STAGES) & 1);
            turns.wait(kt, kt0);   /* no MMAs, but the turns go round as they do with them */
            turns.pass();
            give_back(stage);
        }
        turns.close(kt0, kt_end);
        return;
    }
    for (int kt = kt0; kt < kt_end; kt++, it++) {
        const int stage = it % Cfg::STAGES;
        mbar_wait(&full[stage], (it / Cfg::STAGES) & 1);
        fence_proxy_async();
        turns.wait(kt, kt0);
        mma_stage<Cfg>(acc, sA + stage * S::A_STAGE, sB + stage * S::B_STAGE, wg);
        turns.pass();
        if constexpr (S::BLOCK) {
            wgmma_wait<0>();
            bs.take(S::stage_scales(sB, stage));
            give_back(stage);
            bs.fold(acc, facc);
        } else {
            wgmma_wait<1>();
            if (kt > kt0)
                give_back((it - 1) % Cfg::STAGES);
        }
    }
    wgmma_wait<0>();
    if constexpr (!S::BLOCK)
        if (kt_end > kt0)
            give_back((it - 1) % Cfg::STAGES);
    turns.close(kt0, kt_end);
}
template <class Cfg, class AccT, class FAccT, class Scales>
__device__ __forceinline__ void compute_tile(AccT &acc, FAccT &facc, Scales &bs, const unsigned char *sA,
                                             const unsigned char *sB, uint64_t *full, uint64_t *empty,
                                             int wg, bool has_rows, int kt_end, int it, int kt0 = 0)
{
    compute_tile_by<Cfg>(acc, facc, bs, sA, sB, full, [&](int stage) { mbar_arrive(&empty[stage]); }, wg,
                         has_rows, kt_end, it, kt0);
}

/* Under a.pdl_early the routing was final before the step ahead of this
 * one started (mt_device.cuh), and the weights are written by no step: the
 * lead copier ("ws", "persist" with TMA weight loads) requests the weight
 * tiles of the first STAGES K tiles kt0 .. of its first tile t before the
 * wait, so that they stream in under the tail of the step ahead; each
 * stage's A rows (and the block modes' scales) come after the wait, with
 * the rest of the stage (copy_tile's b_early). Returns how many it
 * requested. */
template <class Cfg>
__device__ __forceinline__ int load_weights_early(const mt_gemm_args &a, const tile_rows &t, int nb,
                                                  unsigned char *sB, uint64_t *full, int kt0, int kt1)
{
    using S = sm90_shape<Cfg>;
    const int n = min(Cfg::STAGES, kt1 - kt0);
    for (int s = 0; s < n; s++) {
        mbar_expect_bytes(&full[s], S::B_STAGE);
        sm90_loader<Cfg, 128>::tma_weights(a, sB + s * S::B_STAGE, kt0 + s, nb, t.expert, &full[s]);
    }
    return n;
}

/* PIPE 0 ("sync"): every thread copies and computes; a CTA barrier per
 * tile; the copy of tile kt + STAGES - 2 is issued while the MMAs of tile
 * kt run, and one MMA group stays in flight across the barrier (a buffer is
 * rewritten only after the MMAs of two tiles back completed everywhere).
 * With BLOAD=tma thread 0 brings each stage's weight tile in by TMA, its
 * arrival with the bytes on the stage's `full` barrier, on which every
 * thread waits before the stage's MMAs: the other threads then copy only
 * the A rows (and scales), a third of a 64 x 128 tile's row copies.
 * PIPE 1 ("ws"): warp-specialized. Warpgroup 0 only copies, the others only
 * compute; with two computing warpgroups (384 threads, 168 registers each at
 * entry) setmaxnreg moves registers from the copiers (72) to the
 * accumulators (216): 128 * 72 + 256 * 216 <= 64K (not with SWAP, whose
 * accumulators are small); per stage a `full` mbarrier (the
 * copying threads' cp.async completions, and with bulk copies the lead's
 * arrival with their bytes) and an `empty` one (every
 * computing thread, once its MMAs on the stage completed), so the copies
 * run up to STAGES tiles ahead without CTA barriers. With Cfg::SPLIT_K
 * (swapped decode tiles) SPLIT_K CTAs share an output tile, each
 * a slice of its K tiles, and the last to finish sums the slices in split
 * order (split_k_reduce, gemm_tile.cuh) and writes the tile: more CTAs,
 * each a shorter stream of weights. The block-scale modes
 * wait for each tile's MMAs before folding its sums (the other computing
 * warpgroup's MMAs keep the tensor cores busy meanwhile). Folding one K
 * tile's sums while the next tile's MMAs run into a second accumulator set
 * was tried (FOLD=pingpong, 2 December 2026) and removed: ptxas serializes
 * every wgmma of such a loop (C7514, non-wgmma instructions reading
 * accumulator registers within a pipeline stage), and it ran 40 % slower.
 * PIPE 2 ("persist"): "ws" in a grid of at most as many CTAs as the GPU
 * holds at once (the runtime caps it) whose CTAs take output tiles blockIdx.x, + gridDim.x,
 * ... in turn. The copiers run on into the next tile while the computing
 * warpgroups write the last one out (its fp32 tile has buffers of its own):
 * a tile's pipeline fill and epilogue no longer leave the tensor cores
 * idle. The output-row tables alternate between two sets: `rows_filled`
 * (the copiers filled a set) and `rows_free` (the computing threads wrote
 * its tile out) hand them over. */
template <class Cfg> __device__ void grouped_gemm_sm90(const mt_gemm_args &a)
{
    using S = sm90_shape<Cfg>;
    using Q = typename S::Q;
    using Acc = typename Q::Acc;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    unsigned char *smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    unsigned char *sA = smem;
    unsigned char *sB = sA + Cfg::STAGES * S::A_STAGE;
    float *sC = reinterpret_cast<float *>(smem + S::EPI_AT);
    uint64_t *full = reinterpret_cast<uint64_t *>(smem + S::BAR_AT);
    uint64_t *empty = full + Cfg::STAGES;
    uint64_t *rows_filled = empty + Cfg::STAGES, *rows_free = rows_filled + 2;   /* "persist" */
    /* Per tile row: its A offset (the copiers), and in each set its output
     * row's offset in C and router weight (the epilogue, out_row), resolved
     * by the copying threads. */
    int64_t *arow_table = reinterpret_cast<int64_t *>(full + S::NBARS);
    auto rows_of = [&](int set) {
        return out_rows{arow_table + Cfg::BM * (1 + set),
                        reinterpret_cast<float *>(arow_table + Cfg::BM * (1 + S::ROW_SETS)) + Cfg::BM * set};
    };

    const int tid = threadIdx.x, lane = tid & 31;
    /* The copying pipelines with TMA weight loads may request their first
     * weight tiles before the wait (load_weights_early); the rest have
     * nothing worth doing before their inputs. */
    const bool early = Cfg::PIPE != 0 && Cfg::BLOAD == 1 && a.pdl_early != 0;
    if (!early)
        sm90_enter<Cfg>();

    /* Computing threads: every thread in "sync", else every warpgroup but
     * the first. */
    const int ctid = Cfg::PIPE == 0 ? tid : tid - 128;
    /* The warpgroup index as the compiler sees a warp-uniform value (read
     * from lane 0), so that the MMAs' descriptors of its rows are built in
     * uniform registers, as grouped_gemm_sm90_chunked.cuh's are. */
    const int warp = ctid >> 5, wg = __shfl_sync(0xffffffffu, warp / 4, 0);
    Acc acc[1][S::ACC_NT][4] = {};
    float facc[1][S::BLOCK ? S::ACC_NT : 1][4];
    auto clear = [&]() { clear_sums<Cfg>(acc, facc); };
    const int k_tiles = (a.K + Cfg::BK - 1) / Cfg::BK;

    if constexpr (Cfg::PIPE == 0) {
        tile_rows t;
        int nb;
        if (!tile_of<Cfg>(a, blockIdx.x, &t, &nb))
            return;
        clear();
        /* A warpgroup of padding rows (wg_has_rows) still copies and meets
         * every barrier; it skips only its MMAs and the fold. */
        const bool has_rows = wg_has_rows<Cfg>(a, t, wg);
        sm90_loader<Cfg, S::CONSUMERS> ld;
        ld.init(a, t, nb, tid, arow_table);
        fill_out_rows<Cfg>(a, t, rows_of(0), tid, S::CONSUMERS);
        if constexpr (S::SYNC_TMA) {
            if (tid == 0) {
                for (int s = 0; s < Cfg::STAGES; s++)
                    mbar_init(&full[s], S::FULL_LEAD);
                mbar_init_fence();
            }
        }
        __syncthreads();
        ld.hold_rows();
        /* A stage's barrier, where the weight tiles come by TMA. */
        auto stage_full = [&](int s) { return S::SYNC_TMA ? &full[s] : nullptr; };
        with_scales<Cfg>(a, warp, lane, [&](auto &bs) {
#pragma unroll
            for (int s = 0; s < Cfg::STAGES - 2; s++) {
                if (s < k_tiles)
                    ld.load(a, sA + s * S::A_STAGE, sB + s * S::B_STAGE, S::stage_scales(sB, s), s,
                            stage_full(s));
                cp_async_commit();
            }
            /* STAGES K tiles a round, unrolled: a K tile's ring stage, and
             * so every shared-memory address of its MMAs, copies and
             * scales, is a constant of its copy of the body. */
            for (int kt0 = 0; kt0 < k_tiles; kt0 += Cfg::STAGES) {
#pragma unroll
                for (int stage = 0; stage < Cfg::STAGES; stage++) {
                    const int kt = kt0 + stage;
                    if (kt >= k_tiles)
                        break;
                    cp_async_wait<Cfg::STAGES - 3>();
                    fence_proxy_async();
                    /* Tile kt's cp.async copies (with TMA weights: its A rows
                     * and scales) landed everywhere; MMAs of tile kt-2 done
                     * everywhere. */
                    __syncthreads();
                    if constexpr (S::SYNC_TMA)   /* tile kt's weight tile */
                        mbar_wait(&full[stage], (kt0 / Cfg::STAGES) & 1);
                    if (has_rows)
                        mma_stage<Cfg>(acc, sA + stage * S::A_STAGE, sB + stage * S::B_STAGE, wg);
                    const int nk = kt + Cfg::STAGES - 2;
                    const int ns = (stage + Cfg::STAGES - 2) % Cfg::STAGES;
                    if (nk < k_tiles)
                        ld.load(a, sA + ns * S::A_STAGE, sB + ns * S::B_STAGE, S::stage_scales(sB, ns), nk,
                                stage_full(ns));
                    cp_async_commit();
                    if constexpr (S::BLOCK) {
                        /* BK is the whole 128-wide scale block: fold every tile. */
                        wgmma_wait<0>();
                        if (has_rows) {
                            bs.take(S::stage_scales(sB, stage));
                            bs.fold(acc, facc);
                        }
                    } else {
                        wgmma_wait<1>();
                    }
                }
            }
        });
        wgmma_wait<0>();
        cp_async_wait<0>();
        __syncthreads();   /* the pipeline buffers become the fp32 epilogue tile */
        store_tile<Cfg>(a, t, nb, warp, 0, acc, facc, smem, rows_of(0));
    } else if constexpr (!S::PERSIST) {
        /* Split-K: CTA blockIdx.x sums slice blockIdx.x % SK of the K
         * tiles of tile blockIdx.x / SK (split_slice, gemm_tile.cuh). */
        constexpr int SK = split_of<Cfg>::value;
        const int tile = blockIdx.x / SK, split = blockIdx.x % SK;
        tile_rows t;
        int nb;
        if (!tile_of<Cfg>(a, tile, &t, &nb))
            return;
        int kt0 = 0, kt1 = k_tiles;
        if constexpr (SK > 1)
            split_slice<Cfg>(k_tiles, split, &kt0, &kt1);
        bool last = true;   /* split-K: this CTA writes the tile out */
        if (tid == 0) {
            for (int s = 0; s < Cfg::STAGES; s++) {
                mbar_init(&full[s], 128 + S::FULL_LEAD);
                mbar_init(&empty[s], S::CONSUMERS);
            }
            mbar_init_fence();
        }
        __syncthreads();
        int b_early = 0;
        if (early) {
            if (tid == 0)
                b_early = load_weights_early<Cfg>(a, t, nb, sB, full, kt0, kt1);
            sm90_enter<Cfg>();
        }
        if (tid < 128) {
            if constexpr (S::CONSUMERS > 128 && !Cfg::SWAP)
                regs_shrink<72>();
            copy_tile<Cfg>(a, t, nb, tid, arow_table, rows_of(0), nullptr, sA, sB, full, empty, kt1, 0, kt0,
                           b_early);
            cp_async_wait<0>();
        } else {
            if constexpr (S::CONSUMERS > 128 && !Cfg::SWAP)
                regs_grow<216>();
            clear();
            with_scales<Cfg>(a, warp, lane, [&](auto &bs) {
                compute_tile<Cfg>(acc, facc, bs, sA, sB, full, empty, wg, wg_has_rows<Cfg>(a, t, wg), kt1, 0,
                                  kt0);
            });
            /* The fp32 tile overlays the pipeline buffers: no warpgroup may
             * stage its fragments while another one's MMAs still read them.
             * (Every copy has landed: each stage's full barrier was waited
             * on before its MMAs.) */
            using Bar = group_barrier<2, S::CONSUMERS>;
            Bar::sync();
            if constexpr (SK > 1) {
                /* The block modes' sums are in facc (acc holds the last K
                 * tile's, already folded). Only the tile's last CTA writes
                 * it out. */
                if constexpr (S::BLOCK)
                    last = split_k_reduce<Cfg, S::CONSUMERS, Bar>(a, tile, split, ctid, facc);
                else
                    last = split_k_reduce<Cfg, S::CONSUMERS, Bar>(a, tile, split, ctid, acc);
            }
            if (last)
                stage_tile<Cfg>(a, t, nb, warp, lane, acc, facc, sC);
        }
        /* Staged: every thread helps write (split-K: in the tile's last
         * CTA only; the copiers learn which from the computing threads). */
        if constexpr (SK > 1) {
            if (!__syncthreads_or(last && tid >= 128))
                return;
        } else {
            __syncthreads();
        }
        write_tile<Cfg, S::CONSUMERS + 128>(a, t, nb, sC, tid, rows_of(0));
        /* Every thread wrote; the computing ones quantize (the copiers
         * hold too few registers for it). */
        if constexpr (last_quants<Cfg>()) {
            out_group_held h{t, nb, 0, 0, true};
            out_group_flush<Cfg, S::CONSUMERS, Cfg::BM>(a, h, tid, cta_barrier{}, tid - 128);
        }
    } else {
        const int ntiles = num_tiles<Cfg>(a);
        if (tid == 0) {
            for (int s = 0; s < Cfg::STAGES; s++) {
                mbar_init(&full[s], 128 + S::FULL_LEAD);
                mbar_init(&empty[s], S::CONSUMERS);
            }
            for (int set = 0; set < 2; set++) {
                mbar_init(&rows_filled[set], 128);
                mbar_init(&rows_free[set], S::CONSUMERS);
            }
            mbar_init_fence();
        }
        __syncthreads();
        int b_early = 0;
        if (early) {
            if (tid == 0) {
                tile_rows t;
                int nb, tile = blockIdx.x;
                while (tile < ntiles && !tile_of<Cfg>(a, tile, &t, &nb))
                    tile += gridDim.x;
                if (tile < ntiles)
                    b_early = load_weights_early<Cfg>(a, t, nb, sB, full, 0, k_tiles);
            }
            sm90_enter<Cfg>();
        }
        int it = 0, n = 0;   /* K tiles and output tiles this CTA has done */
        if (tid < 128) {
            if constexpr (S::CONSUMERS > 128 && !Cfg::SWAP)
                regs_shrink<72>();
            for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
                tile_rows t;
                int nb;
                if (!tile_of<Cfg>(a, tile, &t, &nb))
                    continue;
                const int set = n & 1;
                if (n >= 2)   /* the tile two back, written out from this set */
                    mbar_wait(&rows_free[set], ((n >> 1) - 1) & 1);
                /* Every copier has read its rows of the last tile out of the
                 * A row table (hold_rows): it may change. */
                asm volatile("bar.sync 1, 128;\n" ::: "memory");
                copy_tile<Cfg>(a, t, nb, tid, arow_table, rows_of(set), &rows_filled[set], sA, sB, full,
                               empty, k_tiles, it, 0, b_early);
                it += k_tiles;
                n++;
            }
            cp_async_wait<0>();
        } else {
            if constexpr (S::CONSUMERS > 128 && !Cfg::SWAP)
                regs_grow<216>();
            using Bar = group_barrier<2, S::CONSUMERS>;
            out_group_held held{};   /* OQUANT last: the tile before, counted in late */
            for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
                tile_rows t;
                int nb;
                if (!tile_of<Cfg>(a, tile, &t, &nb))
                    continue;
                const int set = n & 1;
                clear();
                /* PAD_SKIP yes: the tile's rows, in its set's table before
                 * its first stage comes, and a warpgroup of padding rows
                 * skips its MMAs. Otherwise every warpgroup computes and
                 * waits for the table at the epilogue. */
                constexpr bool SKIP = persist_may_skip<Cfg>();
                if constexpr (SKIP)
                    mbar_wait(&rows_filled[set], (n >> 1) & 1);
                const bool has_rows = wg_rows_in_table<Cfg>(rows_of(set), wg);
                with_scales<Cfg>(a, warp, lane, [&](auto &bs) {
                    compute_tile<Cfg>(acc, facc, bs, sA, sB, full, empty, wg, has_rows, k_tiles, it);
                });
                it += k_tiles;
                if constexpr (!SKIP)
                    mbar_wait(&rows_filled[set], (n >> 1) & 1);
                /* OQUANT last: the tile before counts in now (its stores are
                 * out) and settles once this one is written. */
                if constexpr (last_quants<Cfg>())
                    out_group_count_in<Cfg>(a, held, ctid, Bar{});
                /* Every computing thread has written the last tile out: the
                 * fp32 tile is free. */
                asm volatile("bar.sync 2, %0;\n" ::"n"(S::CONSUMERS) : "memory");
                stage_tile<Cfg>(a, t, nb, warp, lane, acc, facc, sC);
                asm volatile("bar.sync 2, %0;\n" ::"n"(S::CONSUMERS) : "memory");
                write_tile<Cfg, S::CONSUMERS>(a, t, nb, sC, ctid, rows_of(set));
                mbar_arrive(&rows_free[set]);
                if constexpr (last_quants<Cfg>()) {
                    out_group_settle<Cfg, S::CONSUMERS, Cfg::BM>(a, held, ctid, Bar{}, ctid);
                    held = {t, nb, 0, 0, true};
                }
                n++;
            }
            if constexpr (last_quants<Cfg>())
                out_group_flush<Cfg, S::CONSUMERS, Cfg::BM>(a, held, ctid, Bar{}, ctid);
        }
    }
}

} // namespace mt
