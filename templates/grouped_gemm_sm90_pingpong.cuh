/*
 * PIPE 3 ("pingpong") of the warpgroup-MMA grouped GEMM: a persistent CTA
 * (like PIPE 2, "persist", grouped_gemm_sm90.cuh) whose two computing
 * warpgroups take its output tiles in turn, each a whole tile: 64 token
 * rows (BM = 64), or swapped 64 weight rows (BN = 64) and 16 to 64 token
 * rows. While one writes its tile out, the other's MMAs run, so the tensor
 * cores do not wait for epilogues: this is for short K (DeepSeek-V3's
 * GEMM2, K = 256, two K tiles per output tile), where "persist" spends as
 * long writing a tile as computing it; swapped, for a few tokens per
 * expert.
 *
 * The copying warpgroup is split in two halves of 64 threads, one per
 * computing group. Tile n (counting the CTA's tiles that have rows) belongs
 * to half n % 2 and group n % 2. A half resolves its tile (the A row table
 * of its own, the output rows and router weights, the tile's coordinates)
 * into a row set, then streams the tile's K tiles into the one ring of
 * STAGES buffers, K tiles n * k_tiles onwards. Resolving a tile is a chain
 * of dependent global loads (row ids, then router weights); with two halves
 * one resolves while the other issues copies, so that chain is not paid
 * once per tile by the whole copying warpgroup (two K tiles per output tile
 * leave little to hide it behind). The halves' copies take turns (an
 * mbarrier per half: the other half issued the tile before), and so do the
 * groups' main loops (an mbarrier per group: the other group's main loop
 * of the tile before is done): the ring is filled and drained in order, and
 * nobody waits on a stage a lap ahead (a full barrier's parity tells one
 * lap from the next only). A stage is filled by one half (its `full`
 * barrier counts 64 arrivals, and one more, the lead's with the bulk
 * bytes, where a stage has bulk copies) and consumed by one group
 * (`empty`: 128).
 *
 * Row sets: SETS = 4, two per half and group, so a half can resolve tile
 * n + 2 while tile n is still being written. A set also carries the tile's
 * coordinates, so the computing groups never walk the tile list: they wait
 * for their next set and read which tile it is, or that there is none left.
 * The fp32 epilogue tile is one per group.
 *
 * This file is apart from grouped_gemm_sm90.cuh so that adding it left the
 * kernels of the other pipelines, and the tuned databases holding them,
 * unchanged (`moetune db refresh`). pingpong_copier's loop is that file's
 * copy_tile for a half; copy_tile moves onto it when the family is next
 * retuned.
 */
#pragma once
#include "grouped_gemm_sm90.cuh"

namespace mt {

template <class Cfg> struct pingpong_shape : sm90_shape<Cfg> {
    using B = sm90_shape<Cfg>;
    static constexpr int GROUPS = 2, GROUP_THREADS = B::CONSUMERS, SETS = 4;
    static constexpr int HALF = 64;   /* copying threads per half */
    static constexpr int INFO = 8;    /* ints of a set's tile coordinates */
    static constexpr int EPI_AT = B::PIPE_BYTES;
    static constexpr int BAR_AT = EPI_AT + GROUPS * B::EPI_BYTES;
    /* full and empty per stage, filled and free per row set, a turn per
     * group and per half */
    static constexpr int NBARS = 2 * Cfg::STAGES + 2 * SETS + 2 * GROUPS;
    /* After the barriers: an A row table per half, the output row offsets
     * (int64, out_row) and router weights (float) of each set, each set's
     * tile. */
    static constexpr int TABLES_BYTES = GROUPS * Cfg::BM * 8 + SETS * Cfg::BM * 12 + SETS * INFO * 4;
    static_assert(Cfg::PIPE == 3 && (Cfg::SWAP ? Cfg::BN == 64 : Cfg::BM == 64) && B::CONSUMERS == 128,
                  "pingpong: a warpgroup a tile, of 64 token rows or (swapped) 64 weight rows");
    static_assert(B::EPI_BYTES % 16 == 0, "epilogue tiles stay 16-byte aligned");
};

/* Where the kernel's pieces are in shared memory (the layout of
 * pingpong_shape). */
template <class Cfg> struct pingpong_smem {
    using S = pingpong_shape<Cfg>;
    unsigned char *sA, *sB;
    uint64_t *full, *empty, *rows_filled, *rows_free, *turn, *copy_turn;
    int64_t *tables;   /* the halves' A row tables, then the sets' output rows */
    unsigned char *epi;   /* the groups' fp32 tiles */

    __device__ __forceinline__ int64_t *arow_table(int half) const { return tables + Cfg::BM * half; }
    /* The output row offsets and weights of row set `set`. */
    __device__ __forceinline__ out_rows rows_of(int set) const
    {
        int64_t *dst = tables + Cfg::BM * S::GROUPS;
        float *w = reinterpret_cast<float *>(dst + Cfg::BM * S::SETS);
        return out_rows{dst + Cfg::BM * set, w + Cfg::BM * set};
    }
    /* The tile of row set `set`: expert, mb, r0, count, nb, and 1 in the
     * last int when there is none (the half has no tiles left). */
    __device__ __forceinline__ int *info(int set) const
    {
        float *w_end = reinterpret_cast<float *>(tables + Cfg::BM * (S::GROUPS + S::SETS)) + Cfg::BM * S::SETS;
        return reinterpret_cast<int *>(w_end) + S::INFO * set;
    }
};

/* f(t, nb, n) for each output tile of this CTA that has rows, n counting
 * them from 0 (the order in which the ring is filled, K tiles n * k_tiles
 * onwards); returns how many there are. */
template <class Cfg, class F> __device__ __forceinline__ int for_each_tile(const mt_gemm_args &a, F &&f)
{
    const int ntiles = num_tiles<Cfg>(a);
    int n = 0;
    for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        tile_rows t;
        int nb;
        if (tile_of<Cfg>(a, tile, &t, &nb))
            f(t, nb, n++);
    }
    return n;
}

/* Copying half H (thread hid of its 64): its tiles' rows into its A row
 * table and their row sets, then their K tiles into the ring, in turns with
 * the other half; after its last tile, a row set saying there is none. */
template <class Cfg>
__device__ __forceinline__ void pingpong_copier(const mt_gemm_args &a, const pingpong_smem<Cfg> &sm,
                                                int k_tiles, const int H, int hid)
{
    using S = pingpong_shape<Cfg>;
    using Sh = sm90_shape<Cfg>;
    constexpr int SETS = S::SETS;
    const int bar = H == 0 ? 1 : 4;   /* the half's named barrier */
    const int ntiles = for_each_tile<Cfg>(a, [&](const tile_rows &t, int nb, int n) {
        if (n % 2 != H)
            return;
        const int set = n % SETS;
        if (n >= SETS)   /* the tile SETS back, written out from this set */
            mbar_wait(&sm.rows_free[set], (n / SETS - 1) & 1);
        /* Every thread of the half has read its rows of the last tile out
         * of its A row table (hold_rows): the table may change. */
        asm volatile("bar.sync %0, %1;\n" ::"r"(bar), "n"(S::HALF) : "memory");
        sm90_loader<Cfg, S::HALF> ld;
        ld.init(a, t, nb, hid, sm.arow_table(H));
        fill_out_rows<Cfg>(a, t, sm.rows_of(set), hid, S::HALF);
        if (hid == 0) {
            int *info = sm.info(set);
            info[0] = t.expert, info[1] = t.mb, info[2] = t.r0, info[3] = t.count, info[4] = nb, info[5] = 0;
        }
        mbar_arrive(&sm.rows_filled[set]);
        asm volatile("bar.sync %0, %1;\n" ::"r"(bar), "n"(S::HALF) : "memory");
        ld.hold_rows();
        if (n > 0)   /* the other half issued the tile before */
            mbar_wait(&sm.copy_turn[H], ((n - 1) / 2) & 1);
        for (int kt = 0, it = n * k_tiles; kt < k_tiles; kt++, it++) {
            const int stage = it % Cfg::STAGES;
            if (it >= Cfg::STAGES)
                mbar_wait(&sm.empty[stage], (it / Cfg::STAGES - 1) & 1);
            ld.load(a, sm.sA + stage * Sh::A_STAGE, sm.sB + stage * Sh::B_STAGE, Sh::stage_scales(sm.sB, stage),
                    kt, &sm.full[stage]);
            mbar_arrive_cp_async(&sm.full[stage]);
        }
        mbar_arrive(&sm.copy_turn[1 - H]);
    });
    /* The first n of this half past the last tile: its group stops there. */
    const int n = ntiles + ((ntiles % 2) != H);
    const int set = n % SETS;
    if (n >= SETS)
        mbar_wait(&sm.rows_free[set], (n / SETS - 1) & 1);
    if (hid == 0)
        sm.info(set)[5] = 1;
    mbar_arrive(&sm.rows_filled[set]);
    cp_async_wait<0>();
}

/* Computing group G (0 or 1, the same in every lane of a warp): the MMAs
 * of every other tile of the CTA, then its epilogue while the other
 * group's MMAs run. */
template <class Cfg>
__device__ __forceinline__ void pingpong_consumer(const mt_gemm_args &a, const pingpong_smem<Cfg> &sm,
                                                  int k_tiles, const int G)
{
    using S = pingpong_shape<Cfg>;
    using Acc = typename S::Q::Acc;
    constexpr int SETS = S::SETS, GT = S::GROUP_THREADS;
    const int gtid = threadIdx.x - 128 - G * GT, warp = gtid >> 5, lane = threadIdx.x & 31;
    float *sC = reinterpret_cast<float *>(sm.epi + G * S::EPI_BYTES);
    Acc acc[1][S::ACC_NT][4] = {};
    float facc[1][S::BLOCK ? S::ACC_NT : 1][4];
    const numbered_barrier<GT> bar{2 + G};
    out_group_held held{};   /* OQUANT last: this group's tile before, counted in late */
    for (int n = G;; n += 2) {
        const int set = n % SETS;
        mbar_wait(&sm.rows_filled[set], (n / SETS) & 1);
        const int *info = sm.info(set);
        if (info[5])
            break;
        const tile_rows t{info[0], info[1], info[2], info[3]};
        const int nb = info[4];
        clear_sums<Cfg>(acc, facc);
        /* The groups' main loops take turns: this one starts once the other
         * group's went through the tile before. */
        if (n > 0)
            mbar_wait(&sm.turn[G], ((n - 1) / 2) & 1);
        with_scales<Cfg>(a, warp, lane, [&](auto &bs) {
            /* A group's tile is 64 rows of its own, not half of a
             * shared one: it has no padding half to skip (wg_has_rows). */
            compute_tile<Cfg>(acc, facc, bs, sm.sA, sm.sB, sm.full, sm.empty, 0, true, k_tiles, n * k_tiles);
        });
        mbar_arrive(&sm.turn[1 - G]);
        /* OQUANT last: the tile before counts in now (its stores are out)
         * and settles once this one is written. */
        if constexpr (last_quants<Cfg>())
            out_group_count_in<Cfg>(a, held, gtid, bar);
        /* This group has written its last tile out: its fp32 tile is free. */
        asm volatile("bar.sync %0, %1;\n" ::"r"(2 + G), "n"(GT) : "memory");
        stage_tile<Cfg>(a, t, nb, warp, lane, acc, facc, sC);
        asm volatile("bar.sync %0, %1;\n" ::"r"(2 + G), "n"(GT) : "memory");
        write_tile<Cfg, GT>(a, t, nb, sC, gtid, sm.rows_of(set));
        mbar_arrive(&sm.rows_free[set]);
        if constexpr (last_quants<Cfg>()) {
            out_group_settle<Cfg, GT, Cfg::BM>(a, held, gtid, bar, gtid);
            held = {t, nb, 0, 0, true};
        }
    }
    if constexpr (last_quants<Cfg>())
        out_group_flush<Cfg, GT, Cfg::BM>(a, held, gtid, bar, gtid);
}

template <class Cfg> __device__ void grouped_gemm_sm90_pingpong(const mt_gemm_args &a)
{
    using S = pingpong_shape<Cfg>;
    constexpr int SETS = S::SETS, GT = S::GROUP_THREADS;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    unsigned char *smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    uint64_t *full = reinterpret_cast<uint64_t *>(smem + S::BAR_AT);
    uint64_t *rows_filled = full + 2 * Cfg::STAGES, *turn = rows_filled + 2 * SETS;
    const pingpong_smem<Cfg> sm{smem, smem + Cfg::STAGES * S::A_STAGE, full, full + Cfg::STAGES,
                                rows_filled, rows_filled + SETS, turn, turn + S::GROUPS,
                                reinterpret_cast<int64_t *>(full + S::NBARS), smem + S::EPI_AT};

    const int tid = threadIdx.x;
    sm90_enter<Cfg>();
    const int k_tiles = (a.K + Cfg::BK - 1) / Cfg::BK;
    if (tid == 0) {
        for (int s = 0; s < Cfg::STAGES; s++) {
            mbar_init(&sm.full[s], S::HALF + S::FULL_LEAD);
            mbar_init(&sm.empty[s], GT);
        }
        for (int set = 0; set < SETS; set++) {
            mbar_init(&sm.rows_filled[set], S::HALF);
            mbar_init(&sm.rows_free[set], GT);
        }
        for (int g = 0; g < S::GROUPS; g++) {
            mbar_init(&sm.turn[g], GT);
            mbar_init(&sm.copy_turn[g], S::HALF);
        }
        mbar_init_fence();
    }
    __syncthreads();
    if (tid < 128) {
        regs_shrink<72>();
        /* The half from a warp shuffle, like the group below. */
        pingpong_copier<Cfg>(a, sm, k_tiles, __shfl_sync(0xffffffffu, tid / S::HALF, 0), tid % S::HALF);
        return;
    }
    regs_grow<216>();
    /* The group from a warp shuffle: ptxas then knows it is the same in
     * every lane of a warp. Taken from threadIdx.x as such, the branch past
     * the other group's tiles was a divergent path to it, and it serialized
     * the block modes' MMAs (C7520). */
    pingpong_consumer<Cfg>(a, sm, k_tiles, __shfl_sync(0xffffffffu, (tid - 128) / GT, 0));
}

} // namespace mt
