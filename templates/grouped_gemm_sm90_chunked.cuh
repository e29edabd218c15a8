/*
 * PIPE 2 ("persist") of the warpgroup-MMA grouped GEMM with its epilogue in
 * column chunks (Cfg::EPI_COLS > 0): the same persistent CTA as
 * grouped_gemm_sm90.cuh's "persist" (a copying warpgroup running on into
 * the next output tile while the computing warpgroups write the last one
 * out), but the fp32 staging tile holds EPI_COLS columns of a warpgroup's
 * 64 rows at a time instead of the whole BM x BN tile. The epilogue buffers
 * then take BM * (EPI_COLS + 4) * 4 bytes instead of BM * (BN + 4) * 4, so
 * that the 128 x 256 tile fits with four stages of operands (196 KB) and
 * runs persistent: the tile whose GEMM2 (short K) the non-persistent "ws"
 * pipeline left half idle (docs/PERFORMANCE.md, session 15).
 *
 * Each computing warpgroup writes its own 64 rows through a buffer of its
 * own, chunk after chunk, with barriers of that warpgroup only (named
 * barrier 2 + wg): one warpgroup's epilogue does not wait for the other's.
 * A chunk of the plain epilogue is EPI_COLS consecutive tile columns; of
 * the fused activation (gate columns first, up columns in the second half
 * of the tile), EPI_COLS / 2 gate columns and the up columns that pair with
 * them, staged gate first: the chunk is then a tile of its own, BN =
 * EPI_COLS, and write_tile (gemm_tile.cuh) writes it as it writes a whole
 * tile (the same rounding, so the same bytes), with column block
 * nb * CHUNKS + chunk. The chunks are unrolled at compile time: each names
 * its accumulator fragments by constant indices, which keeps them in
 * registers.
 *
 * CTA pairs (Cfg::CLUSTER 2, a cluster of two CTAs): the pair walks the
 * tiles two at a time, CTA r taking tile 2q + r of the raster (tile_of,
 * gemm_tile.cuh); with GROUP_M even, those are row blocks 2i and 2i + 1 of
 * one column block. When both are one expert's ("paired"), each CTA brings
 * in one half of the weight tile (the gate or up half of a fused tile,
 * else its first or second BN / 2 rows) and the tensor memory accelerator
 * multicasts it into both CTAs' stages: the weights cross from L2 to the
 * SMs once for two tiles, which cuts the traffic that bounds the wide tiles
 * (docs/PERFORMANCE.md, sessions 15-17). Otherwise each CTA loads its own
 * weights, and a CTA without a tile in the step goes through it anyway
 * (each stage waited for and handed back, its MMAs on rows it never writes,
 * or skipped in the 128-row tiles of PAD_SKIP yes), so that both stay in
 * step. Since a stage may be
 * written by the peer's copies, a stage goes back to the copiers of both
 * CTAs: each computing warp, once its MMAs on the stage are done, arrives
 * on its own CTA's `empty` (every thread) and on the peer's (its first
 * lane, for the warp), so `empty` counts the computing threads of both
 * and a copier waits on nothing else (compute_pair_tile). A first version
 * had the first copying thread, after its own `empty`, trade a word with
 * the peer's on a barrier of their own before each stage's copies: that
 * chain ran the pair 1.6 times slower than lone CTAs (docs/PERFORMANCE.md,
 * session 18). The pair meets at a cluster barrier after the barriers'
 * set-up and before it exits (no arrival may reach a CTA that has left).
 *
 * A file of its own, so that the kernels of every other variant, and the
 * tuned databases holding them, stay as they were. The persistent loop is
 * grouped_gemm_sm90's PIPE 2 loop with this epilogue in place of
 * stage_tile + write_tile; stage_chunk scales as stage_fragments
 * (gemm_tile.cuh) does. Those places move onto these when the family is next retuned as a
 * whole (an edit to their headers changes every stored kernel's source); the
 * MMA loop already has (compute_tile_by, session 20).
 */
#pragma once
#include "grouped_gemm_sm90.cuh"

namespace mt {

/* The cluster size of Cfg: its CLUSTER, 1 where it declares none. */
template <class C, class = void> struct cluster_of {
    static constexpr int value = 1;
};
template <class C> struct cluster_of<C, decltype(void(C::CLUSTER))> {
    static constexpr int value = C::CLUSTER;
};

/* Every thread of both CTAs of the pair (the barrier orders memory and
 * mbarrier operations across the cluster). */
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
/* The mbarrier inits of this thread, visible to the peer CTA. */
__device__ __forceinline__ void fence_barrier_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
/* `count` arrivals on the peer CTA's barrier at bar's offset. The arrival
 * orders nothing but this CTA's own finished reads of the stage, which the
 * peer's multicast then overwrites: the default (CTA-scope) semantics do.
 * A release at cluster scope compiles to a GPU-wide memory fence before the
 * arrival, once per K step, and made the pairs slower than lone CTAs
 * (docs/PERFORMANCE.md, session 17). */
__device__ __forceinline__ void mbar_arrive_peer(uint64_t *bar, int peer, int count)
{
    asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [ra], %2;\n}\n" ::"r"(smem_addr(bar)),
                 "r"(peer), "r"(count)
                 : "memory");
}
/* tma_load_4d into both CTAs of the pair: the same shared offsets, each
 * copy completing on the barrier at bar's offset in its CTA. */
__device__ __forceinline__ void tma_load_4d_pair(void *dst, const void *map, uint64_t *bar, int k, int row,
                                                 int part, int expert)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%0], [%1, {%2, %3, %4, %5}], [%6], %7;\n" ::"r"(smem_addr(dst)),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(k), "r"(row), "r"(part), "r"(expert),
                 "r"(smem_addr(bar)), "h"((unsigned short)3)
                 : "memory");
}
template <class Cfg> struct chunked_shape : sm90_shape<Cfg> {
    using B = sm90_shape<Cfg>;
    static constexpr int COLS = Cfg::EPI_COLS, CHUNKS = Cfg::BN / COLS;
    static constexpr int GROUPS = Cfg::BM / 64;   /* computing warpgroups */
    static constexpr int LDC = epi_pitch(COLS);
    static constexpr int GROUP_EPI_BYTES = 64 * LDC * 4;
    static constexpr int EPI_AT = B::PIPE_BYTES;
    static constexpr int BAR_AT = EPI_AT + GROUPS * GROUP_EPI_BYTES;
    /* full and empty per stage; filled and free per output-row set */
    static constexpr int NBARS = 2 * Cfg::STAGES + 4;
    /* Fragments of 8 columns a chunk takes from each half (the fused
     * epilogue's gate and up halves) or from the tile. */
    static constexpr int CHUNK_NT = (B::FUSED ? COLS / 2 : COLS) / 8;
    static_assert(!Cfg::SWAP && Cfg::PIPE == 2 && Cfg::BM % 64 == 0, "chunked epilogue: persist, unswapped");
    static_assert(Cfg::BN % COLS == 0 && CHUNK_NT >= 1, "EPI_COLS splits the tile into whole fragments");
};

/* One chunk of a warpgroup's rows as a tile of its own, for write_tile:
 * 64 rows, EPI_COLS columns (gate then up when fused). */
template <class Cfg> struct chunk_cfg : Cfg {
    static constexpr int BM = 64, BN = Cfg::EPI_COLS, WARPS_M = 4, WARPS_N = 1;
};

/* This computing thread's fragments of chunk C into its warpgroup's fp32
 * buffer sC (64 rows, LDC apart), scaled as stage_fragments scales them. */
template <class Cfg, int C, class Acc, class FAcc>
__device__ __forceinline__ void stage_chunk(const mt_gemm_args &a, const tile_rows &t, int nb, int warp,
                                            int lane, const Acc &acc, const FAcc &facc, float *sC)
{
    using S = chunked_shape<Cfg>;
    using Q = typename S::Q;
    constexpr int HALVES = S::FUSED ? 2 : 1;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int r = warp * 16 + (lane >> 2) + h * 8;   /* tile row */
        float sa = 1.f;
        if constexpr (Q::GRAN == 1) {
            sa = a.a_scale[0] * a.b_scale[t.expert];
        } else if constexpr (Q::GRAN == 2) {
            int64_t arow, crow;
            int slot;
            sa = tile_row<Cfg>(a, t, r, &arow, &crow, &slot) ? a.a_scale[arow] : 0.f;
        }
#pragma unroll
        for (int half = 0; half < HALVES; half++)
#pragma unroll
            for (int jj = 0; jj < S::CHUNK_NT; jj++) {
                const int j = half * (S::ACC_NT / 2) + C * S::CHUNK_NT + jj;   /* fragment */
                const int col = j * 8 + (lane & 3) * 2;   /* tile column */
                const int lcol = half * (S::COLS / 2) + jj * 8 + (lane & 3) * 2;
                float v[2];
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    if constexpr (S::BLOCK) {
                        v[c] = facc[0][j][h * 2 + c];
                    } else if constexpr (Q::GRAN == 2) {
                        int n;
                        const float sw = weight_row<Cfg>(a, nb, col + c, &n)
                                             ? a.b_scale[(int64_t)t.expert * a.N + n]
                                             : 0.f;
                        v[c] = (float)acc[0][j][h * 2 + c] * (sa * sw);
                    } else {
                        v[c] = (float)acc[0][j][h * 2 + c] * sa;
                    }
                }
                epi_store2<S::LDC>(sC, r & 63, lcol, v[0], v[1]);
            }
    }
}

/* The epilogue of one output tile by computing warpgroup wg (thread wtid of
 * its 128): chunk after chunk, stage then write, between barriers of the
 * warpgroup (the first one: its last tile's last chunk has been read). */
template <class Cfg, int C = 0, class Acc, class FAcc>
__device__ __forceinline__ void write_chunks(const mt_gemm_args &a, const tile_rows &t, int nb, int warp,
                                             int lane, int wg, int wtid, const Acc &acc, const FAcc &facc,
                                             float *sC, out_rows rows)
{
    using S = chunked_shape<Cfg>;
    if constexpr (C < S::CHUNKS) {
        asm volatile("bar.sync %0, 128;\n" ::"r"(2 + wg) : "memory");
        stage_chunk<Cfg, C>(a, t, nb, warp, lane, acc, facc, sC);
        asm volatile("bar.sync %0, 128;\n" ::"r"(2 + wg) : "memory");
        write_tile<chunk_cfg<Cfg>, 128>(a, t, nb * S::CHUNKS + C, sC, wtid, rows);
        write_chunks<Cfg, C + 1>(a, t, nb, warp, lane, wg, wtid, acc, facc, sC, rows);
    }
}

/* copy_tile (grouped_gemm_sm90.cuh) for a CTA of a pair: the weight halves
 * by the first copying thread, multicast when `paired`, once both CTAs
 * gave the stage back (`empty`, file comment); a CTA without a tile
 * (has_rows false, t then row block 0's, which stays unwritten) brings no
 * weights and no output rows, only its A copies. */
template <class Cfg>
__device__ __forceinline__ void copy_pair_tile(const mt_gemm_args &a, const tile_rows &t, int nb, bool has_rows,
                                               bool paired, int rank, int tid, int64_t *arow_table, out_rows rows,
                                               uint64_t *rows_filled, unsigned char *sA, unsigned char *sB,
                                               uint64_t *full, uint64_t *empty, int k_tiles, int it)
{
    using S = chunked_shape<Cfg>;
    constexpr int HALF = Cfg::BN / 2;
    static_assert(Cfg::ALOAD == 0, "CTA pairs copy their A rows by cp.async");
    sm90_loader<Cfg, 128> ld;
    ld.init(a, t, nb, tid, arow_table);
    ld.lead = false;   /* the weights: below */
    if (has_rows)
        fill_out_rows<Cfg>(a, t, rows, tid, 128);
    mbar_arrive(rows_filled);
    asm volatile("bar.sync 1, 128;\n" ::: "memory");
    ld.hold_rows();
    for (int kt = 0; kt < k_tiles; kt++, it++) {
        const int stage = it % Cfg::STAGES;
        if (it >= Cfg::STAGES)
            mbar_wait(&empty[stage], (it / Cfg::STAGES - 1) & 1);
        unsigned char *b = sB + stage * S::B_STAGE;
        if (tid == 0)
            mbar_arrive_expect_bytes(&full[stage], has_rows ? S::B_STAGE : 0);
        if (tid == 0 && has_rows) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                /* A fused tile's halves are parts (gate, up) of one box row
                 * range, a plain tile's two row ranges of part 0. */
                const int row = S::FUSED ? nb * HALF : nb * Cfg::BN + h * HALF, part = S::FUSED ? h : 0;
#pragma unroll
                for (int p = 0; p < S::PANELS; p++) {
                    unsigned char *dst = b + p * S::B_PANEL + h * HALF * S::ROW;
                    const int k = kt * Cfg::BK + p * S::PANEL_K;
                    if (!paired)
                        tma_load_4d(dst, a.b_map, &full[stage], k, row, part, t.expert);
                    else if (h == rank)
                        tma_load_4d_pair(dst, a.b_map, &full[stage], k, row, part, t.expert);
                }
            }
        }
        ld.load(a, sA + stage * S::A_STAGE, b, S::stage_scales(sB, stage), kt, &full[stage]);
        mbar_arrive_cp_async(&full[stage]);
    }
}

/* compute_tile (grouped_gemm_sm90.cuh) for a CTA of a pair: a stage goes
 * back to both CTAs' copiers (file comment), every thread of the warp on
 * this CTA's `empty`, the first lane for all 32 on the peer's. */
template <class Cfg, class AccT, class FAccT, class Scales>
__device__ __forceinline__ void compute_pair_tile(AccT &acc, FAccT &facc, Scales &bs,
                                                  const unsigned char *sA, const unsigned char *sB,
                                                  uint64_t *full, uint64_t *empty, int wg, bool wg_rows,
                                                  int rank, int lane, int k_tiles, int it)
{
    auto give_back = [&](int stage) {
        mbar_arrive(&empty[stage]);
        __syncwarp();
        if (lane == 0)
            mbar_arrive_peer(&empty[stage], rank ^ 1, 32);
    };
    compute_tile_by<Cfg>(acc, facc, bs, sA, sB, full, give_back, wg, wg_rows, k_tiles, it);
}

template <class Cfg> __device__ void grouped_gemm_sm90_chunked(const mt_gemm_args &a)
{
    using S = chunked_shape<Cfg>;
    using Acc = typename S::Q::Acc;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    unsigned char *smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    unsigned char *sA = smem;
    unsigned char *sB = sA + Cfg::STAGES * S::A_STAGE;
    uint64_t *full = reinterpret_cast<uint64_t *>(smem + S::BAR_AT);
    uint64_t *empty = full + Cfg::STAGES;
    uint64_t *rows_filled = empty + Cfg::STAGES, *rows_free = rows_filled + 2;
    /* The A row table, then per set the output rows and router weights. */
    int64_t *arow_table = reinterpret_cast<int64_t *>(full + S::NBARS);
    auto rows_of = [&](int set) {
        return out_rows{arow_table + Cfg::BM * (1 + set),
                        reinterpret_cast<float *>(arow_table + Cfg::BM * 3) + Cfg::BM * set};
    };

    constexpr int CL = cluster_of<Cfg>::value;
    static_assert(CL == 1 || (CL == 2 && Cfg::BLOAD == 1 && Cfg::BN % 16 == 0), "a pair loads its weights by TMA");
    const int rank = CL > 1 ? (int)(blockIdx.x & 1) : 0;   /* in the pair: clusters are consecutive CTAs */
    const int tid = threadIdx.x;
    sm90_enter<Cfg>();
    const int k_tiles = (a.K + Cfg::BK - 1) / Cfg::BK;
    if (tid == 0) {
        for (int s = 0; s < Cfg::STAGES; s++) {
            mbar_init(&full[s], 128 + S::FULL_LEAD);
            mbar_init(&empty[s], CL * S::CONSUMERS);   /* a pair: both CTAs' */
        }
        for (int set = 0; set < 2; set++) {
            mbar_init(&rows_filled[set], 128);
            mbar_init(&rows_free[set], S::CONSUMERS);
        }
        mbar_init_fence();
        if constexpr (CL > 1)
            fence_barrier_init();
    }
    if constexpr (CL > 1)
        cluster_sync();
    else
        __syncthreads();
    /* f(t, nb, n, has_rows, paired) for each output tile of this CTA: tile
     * n (counting those) uses row set n % 2 and K tiles n * k_tiles onwards
     * of the ring. Alone, the tiles with rows; in a pair, the steps where
     * either CTA has a tile with rows (has_rows false: this one has none, t
     * is row block 0's; paired: both have rows of one expert and column
     * block). */
    auto walk_tiles = [&](auto &&f) {
        const int ntiles = num_tiles<Cfg>(a);
        if constexpr (CL == 1) {
            for (int tile = blockIdx.x, n = 0; tile < ntiles; tile += gridDim.x) {
                tile_rows t;
                int nb;
                if (tile_of<Cfg>(a, tile, &t, &nb))
                    f(t, nb, n++, true, false);
            }
        } else {
            for (int tile = blockIdx.x & ~1, n = 0; tile < ntiles; tile += gridDim.x) {
                tile_rows t0, t1;
                int nb0 = 0, nb1 = 0;
                const bool has0 = tile_of<Cfg>(a, tile, &t0, &nb0);
                const bool has1 = tile + 1 < ntiles && tile_of<Cfg>(a, tile + 1, &t1, &nb1);
                if (!has0 && !has1)
                    continue;
                const bool mine = rank ? has1 : has0;
                tile_rows t{0, 0, 0, 0};
                if (mine)
                    t = rank ? t1 : t0;
                f(t, rank ? nb1 : nb0, n++, mine, has0 && has1 && t0.expert == t1.expert && nb0 == nb1);
            }
        }
    };
    if (tid < 128) {
        if constexpr (S::CONSUMERS > 128)
            regs_shrink<72>();
        walk_tiles([&](const tile_rows &t, int nb, int n, bool has_rows, bool paired) {
            const int set = n & 1;
            if (n >= 2)   /* the tile two back, written out from this set */
                mbar_wait(&rows_free[set], ((n >> 1) - 1) & 1);
            asm volatile("bar.sync 1, 128;\n" ::: "memory");   /* rows held (hold_rows): the A row table may change */
            if constexpr (CL == 1)
                copy_tile<Cfg>(a, t, nb, tid, arow_table, rows_of(set), &rows_filled[set], sA, sB, full, empty,
                               k_tiles, n * k_tiles);
            else
                copy_pair_tile<Cfg>(a, t, nb, has_rows, paired, rank, tid, arow_table, rows_of(set),
                                    &rows_filled[set], sA, sB, full, empty, k_tiles, n * k_tiles);
        });
        cp_async_wait<0>();
        if constexpr (CL > 1)
            cluster_sync();
        return;
    }
    if constexpr (S::CONSUMERS > 128)
        regs_grow<216>();
    const int ctid = tid - 128, warp = ctid >> 5, lane = tid & 31;
    /* The warpgroup from a warp shuffle: the same in every lane for ptxas
     * (grouped_gemm_sm90_pingpong.cuh). */
    const int wg = __shfl_sync(0xffffffffu, warp / 4, 0);
    float *sC = reinterpret_cast<float *>(smem + S::EPI_AT + wg * S::GROUP_EPI_BYTES);
    Acc acc[1][S::ACC_NT][4] = {};
    float facc[1][S::BLOCK ? S::ACC_NT : 1][4];
    const numbered_barrier<128> bar{2 + wg};
    out_group_held held{};   /* OQUANT last: this warpgroup's rows of the tile before, counted in late */
    walk_tiles([&](const tile_rows &t, int nb, int n, bool has_rows, bool) {
        const int set = n & 1;
        clear_sums<Cfg>(acc, facc);
        /* PAD_SKIP yes (persist_may_skip): the tile's rows, in its set's
         * table before its first stage comes (copy_tile, copy_pair_tile;
         * the table is filled only where this CTA has a tile), and a
         * warpgroup of padding rows, or of a CTA of a pair with no tile,
         * skips its MMAs (wg_rows_in_table). Otherwise every warpgroup
         * computes and waits for the table at the epilogue. */
        constexpr bool SKIP = persist_may_skip<Cfg>();
        bool wg_rows = true;
        out_rows rows;
        if constexpr (SKIP) {
            mbar_wait(&rows_filled[set], (n >> 1) & 1);
            rows = rows_of(set);
            wg_rows = has_rows && wg_rows_in_table<Cfg>(rows, wg);
        }
        with_scales<Cfg>(a, warp, lane, [&](auto &bs) {
            if constexpr (CL == 1)
                compute_tile<Cfg>(acc, facc, bs, sA, sB, full, empty, wg, wg_rows, k_tiles, n * k_tiles);
            else
                compute_pair_tile<Cfg>(acc, facc, bs, sA, sB, full, empty, wg, wg_rows, rank, lane, k_tiles,
                                       n * k_tiles);
        });
        if constexpr (!SKIP) {
            mbar_wait(&rows_filled[set], (n >> 1) & 1);
            rows = rows_of(set);
        }
        /* OQUANT last: each warpgroup its own 64 rows; those of the tile
         * before count in now (their stores are out) and settle once this
         * tile's are written. */
        if constexpr (last_quants<Cfg>())
            out_group_count_in<Cfg>(a, held, ctid & 127, bar);
        if (has_rows)
            write_chunks<Cfg>(a, t, nb, warp, lane, wg, ctid & 127, acc, facc, sC,
                              out_rows{rows.dst + 64 * wg, rows.w + 64 * wg});
        mbar_arrive(&rows_free[set]);
        if constexpr (last_quants<Cfg>()) {
            out_group_settle<Cfg, 128, 64>(a, held, ctid & 127, bar, ctid & 127);
            held = {t, nb, 64 * wg, 0, has_rows};
        }
    });
    if constexpr (last_quants<Cfg>())
        out_group_flush<Cfg, 128, 64>(a, held, ctid & 127, bar, ctid & 127);
    if constexpr (CL > 1)
        cluster_sync();
}

} // namespace mt
