/*
 * PIPE 3 ("pingpong") of the warpgroup-MMA grouped GEMM: the persistent
 * loop of PIPE 2 ("persist", grouped_gemm_sm90.cuh) with two computing
 * warpgroups that take the CTA's output tiles in turn, each a whole tile of
 * 64 token rows (BM = 64, unswapped). While one writes its tile out, the
 * other's MMAs run, so the tensor cores do not wait for epilogues: this is
 * for short K (DeepSeek-V3's GEMM2, K = 256, two K tiles per output tile),
 * where "persist" spends as long writing a tile as computing it.
 *
 * The copying warpgroup is persist's: it walks the CTA's tiles in order,
 * fills a tile's row tables, then streams its K tiles into the one ring of
 * STAGES buffers. Tile n (counting the CTA's tiles that have rows) belongs
 * to group n % 2, so a stage is consumed by one group of 128 threads (its
 * `empty` barrier counts 128 arrivals) and the ring order is the tiles'
 * order. The groups' main loops take turns (an mbarrier per group: the
 * other group's main loop of the tile before is done), so the MMAs of one
 * tile run while the other group writes the tile before out, and a group
 * never waits on a stage the copiers are a lap behind on. The output-row
 * tables come in SETS = 4 sets, two per group, so the copiers can fill
 * tile n + 2's rows while tile n is still being written; the fp32 epilogue
 * tile is one per group.
 *
 * This file is apart from grouped_gemm_sm90.cuh so that adding it left the
 * kernels of the other pipelines, and the tuned databases holding them,
 * unchanged (`moetune db refresh`). Its loop with one group and two sets
 * is persist's; persist moves onto it when the family is next retuned.
 */
#pragma once
#include "grouped_gemm_sm90.cuh"

namespace mt {

template <class Cfg> struct pingpong_shape : sm90_shape<Cfg> {
    using B = sm90_shape<Cfg>;
    static constexpr int GROUPS = 2, GROUP_THREADS = B::CONSUMERS, SETS = 4;
    static constexpr int EPI_AT = B::PIPE_BYTES;
    static constexpr int BAR_AT = EPI_AT + GROUPS * B::EPI_BYTES;
    /* full and empty per stage, filled and free per row set, a turn per
     * group */
    static constexpr int NBARS = 2 * Cfg::STAGES + 2 * SETS + GROUPS;
    static_assert(Cfg::PIPE == 3 && !Cfg::SWAP && Cfg::BM == 64 && B::CONSUMERS == 128,
                  "pingpong: unswapped tiles of 64 token rows, a warpgroup each");
    static_assert(B::EPI_BYTES % 16 == 0, "epilogue tiles stay 16-byte aligned");
};

/* Where the kernel's pieces are in shared memory (the layout of
 * pingpong_shape). */
template <class Cfg> struct pingpong_smem {
    unsigned char *sA, *sB;
    uint64_t *full, *empty, *rows_filled;   /* then rows_free (SETS), turn (GROUPS) */
    int64_t *arow_table;
    unsigned char *epi;                     /* the groups' fp32 tiles */

    /* The output rows and weights of row set `set`, after the A offsets. */
    __device__ __forceinline__ out_rows rows_of(int set) const
    {
        constexpr int SETS = pingpong_shape<Cfg>::SETS;
        return out_rows{arow_table + Cfg::BM * (1 + set),
                        reinterpret_cast<float *>(arow_table + Cfg::BM * (1 + SETS)) + Cfg::BM * set};
    }
};

/* f(t, nb, n) for each output tile of this CTA that has rows, n counting
 * them from 0: the order in which the copiers fill the ring, K tiles
 * n * k_tiles onwards. */
template <class Cfg, class F> __device__ __forceinline__ void for_each_tile(const mt_gemm_args &a, F &&f)
{
    const int ntiles = num_tiles<Cfg>(a);
    int n = 0;
    for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        tile_rows t;
        int nb;
        if (tile_of<Cfg>(a, tile, &t, &nb))
            f(t, nb, n++);
    }
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
    uint64_t *rows_free = sm.rows_filled + SETS, *turn = rows_free + SETS;
    const int gtid = threadIdx.x - 128 - G * GT, warp = gtid >> 5, lane = threadIdx.x & 31;
    float *sC = reinterpret_cast<float *>(sm.epi + G * S::EPI_BYTES);
    Acc acc[1][S::ACC_NT][4];
    float facc[1][S::BLOCK ? S::ACC_NT : 1][4];
    for_each_tile<Cfg>(a, [&](const tile_rows &t, int nb, int n) {
        if (n % 2 != G)   /* the other group's */
            return;
        const int set = n % SETS;
#pragma unroll
        for (int j = 0; j < S::ACC_NT; j++)
#pragma unroll
            for (int q = 0; q < 4; q++) {
                acc[0][j][q] = 0;
                if constexpr (S::BLOCK)
                    facc[0][j][q] = 0.f;
            }
        sm90_scales<Cfg> bs;
        if constexpr (S::BLOCK)
            bs.init(a, t, nb, warp, 0, lane);
        /* The groups' main loops take turns: this one starts once the other
         * group's went through the tile before. So every stage of the
         * ring before this tile's was consumed, and this group never waits
         * on a stage a lap ahead of the copiers (a full barrier's parity
         * tells one lap from the next only). */
        if (n > 0)
            mbar_wait(&turn[G], ((n - 1) / 2) & 1);
        compute_tile<Cfg>(a, acc, facc, bs, sm.sA, sm.sB, sm.full, sm.empty, 0, k_tiles, n * k_tiles);
        mbar_arrive(&turn[1 - G]);
        mbar_wait(&sm.rows_filled[set], (n / SETS) & 1);
        /* This group has written its last tile out: its fp32 tile is free. */
        asm volatile("bar.sync %0, %1;\n" ::"r"(2 + G), "n"(GT) : "memory");
        stage_tile<Cfg>(a, t, nb, warp, lane, acc, facc, sC);
        asm volatile("bar.sync %0, %1;\n" ::"r"(2 + G), "n"(GT) : "memory");
        write_tile<Cfg>(a, t, nb, sC, gtid, GT, sm.rows_of(set));
        mbar_arrive(&rows_free[set]);
    });
}

template <class Cfg> __device__ void grouped_gemm_sm90_pingpong(const mt_gemm_args &a)
{
    using S = pingpong_shape<Cfg>;
    constexpr int SETS = S::SETS, GT = S::GROUP_THREADS;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    unsigned char *smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    uint64_t *full = reinterpret_cast<uint64_t *>(smem + S::BAR_AT);
    const pingpong_smem<Cfg> sm{smem, smem + Cfg::STAGES * S::A_STAGE, full, full + Cfg::STAGES,
                                full + 2 * Cfg::STAGES, reinterpret_cast<int64_t *>(full + S::NBARS),
                                smem + S::EPI_AT};
    uint64_t *rows_free = sm.rows_filled + SETS, *turn = rows_free + SETS;

    const int tid = threadIdx.x;
    pdl_enter();
    const int k_tiles = (a.K + Cfg::BK - 1) / Cfg::BK;
    if (tid == 0) {
        for (int s = 0; s < Cfg::STAGES; s++) {
            mbar_init(&sm.full[s], 128);
            mbar_init(&sm.empty[s], GT);
        }
        for (int set = 0; set < SETS; set++) {
            mbar_init(&sm.rows_filled[set], 128);
            mbar_init(&rows_free[set], GT);
        }
        for (int g = 0; g < S::GROUPS; g++)
            mbar_init(&turn[g], GT);
    }
    __syncthreads();
    if (tid < 128) {
        regs_shrink<72>();
        for_each_tile<Cfg>(a, [&](const tile_rows &t, int nb, int n) {
            const int set = n % SETS;
            if (n >= SETS)   /* the tile SETS back, written out from this set */
                mbar_wait(&rows_free[set], (n / SETS - 1) & 1);
            /* Every copier has issued the last tile's copies: the A row
             * table may change. */
            asm volatile("bar.sync 1, 128;\n" ::: "memory");
            copy_tile<Cfg>(a, t, nb, tid, sm.arow_table, sm.rows_of(set), &sm.rows_filled[set], sm.sA, sm.sB,
                           sm.full, sm.empty, k_tiles, n * k_tiles);
        });
        cp_async_wait<0>();
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
