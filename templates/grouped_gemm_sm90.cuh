/*
 * Grouped GEMM of the fused-MoE experts on Hopper's warpgroup MMA (sm_90a).
 *
 * A CTA of BM/64 warpgroups computes a BM x BN tile of one expert's product;
 * warpgroup g owns rows 64g..64g+63 and issues wgmma m64nBNk16 (16-bit) or
 * m64nBNk32 (8-bit) from shared memory. Tiles, rows, scales and the epilogue
 * are gemm_tile.cuh's (the wgmma D fragment is the m16n8 C layout with
 * WARPS_M = BM/16, WARPS_N = 1).
 *
 * Shared memory: per stage an A tile (BM rows) and a B tile (BN weight rows),
 * each row one 128-byte line of K, in the 128-byte swizzle: 16-byte chunk c
 * of row r sits at r*128 + ((c ^ (r % 8)) * 16), tiles 1024-byte aligned.
 * The MMA's matrix descriptor for such a K-major tile: start address >> 4,
 * stride between 8-row groups 1024 bytes, swizzle mode 128B; the K steps
 * inside the 128-byte line advance the start address by 32 bytes (the
 * swizzle is a function of the address bits, which is why the tiles are
 * aligned).
 *
 * Pipeline: every thread copies its chunks with cp.async (gathered token
 * rows in the standard format, an expert's weight rows), STAGES buffers, the
 * copy of tile kt + STAGES - 2 issued while the MMAs of tile kt run, one MMA
 * group left in flight across the barrier (so a buffer is rewritten only
 * after the MMAs of two tiles back have completed in every warpgroup). The
 * block-scale modes wait for each tile's MMAs before folding its sums.
 *
 * Cfg provides what grouped_gemm.cuh's does (T, QUANT, FORMAT, EPI, BM, BN,
 * BK, GROUP_M, STAGES, WARPS_M = BM/16, WARPS_N = 1) plus the generated
 * static mma(acc, desc_a, desc_b).
 */
#pragma once
#include "gemm_tile.cuh"

namespace mt {

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* cp.async writes are generic-proxy writes; the MMA reads through the async
 * proxy. */
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/* Matrix descriptor of a K-major tile in the 128-byte swizzle (file comment). */
__device__ __forceinline__ uint64_t sw128_desc(const void *tile)
{
    const uint64_t addr = smem_addr(tile);
    return ((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

template <class Cfg> struct sm90_shape : tile_shape<Cfg> {
    using Q = quant_traits<Cfg::QUANT>;
    static constexpr int THREADS = tile_shape<Cfg>::THREADS;
    static constexpr int ROW = 128;                         /* bytes of K per tile row */
    static constexpr int EPC = ROW / 8 / (Q::A_BITS / 8);   /* elements per 16-byte chunk */
    static constexpr int A_STAGE = Cfg::BM * ROW, B_STAGE = Cfg::BN * ROW;
    static constexpr int A_ITERS = Cfg::BM * 8 / THREADS, B_ITERS = Cfg::BN * 8 / THREADS;
    static constexpr int KSTEPS = ROW / 32;                 /* MMAs per tile */
    static_assert(Cfg::BK * Q::A_BITS / 8 == ROW, "BLOCK_K must fill one 128-byte line");
    static_assert(Cfg::BM % 64 == 0 && (Cfg::BM * 8) % THREADS == 0 && (Cfg::BN * 8) % THREADS == 0,
                  "tile does not split into whole chunks per thread");
};

template <class Cfg> __device__ void grouped_gemm_sm90(const mt_gemm_args &a)
{
    using S = sm90_shape<Cfg>;
    using Q = typename S::Q;
    using Acc = typename Q::Acc;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    unsigned char *smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    unsigned char *sA = smem;
    unsigned char *sB = sA + Cfg::STAGES * S::A_STAGE;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp / 4;
    tile_rows t;
    int nb;
    if (!tile_of<Cfg>(a, blockIdx.x, &t, &nb))
        return;

    /* A thread always copies chunk tid % 8 of rows tid / 8 + i * THREADS / 8;
     * THREADS / 8 is a multiple of 8, so the swizzled chunk is fixed too. */
    const int cc = tid & 7, r0 = tid >> 3;
    const int dst_chunk = (cc ^ (r0 & 7)) * 16;
    const unsigned char *Abase = static_cast<const unsigned char *>(a.A);
    const unsigned char *a_src[S::A_ITERS];
#pragma unroll
    for (int i = 0; i < S::A_ITERS; i++) {
        int64_t arow, crow;
        int slot;
        a_src[i] = tile_row<Cfg>(a, t, r0 + i * (S::THREADS / 8), &arow, &crow, &slot)
                       ? Abase + arow * a.lda * (Q::A_BITS / 8) + cc * 16
                       : nullptr;
    }
    const unsigned char *B = static_cast<const unsigned char *>(a.B) +
                             (int64_t)t.expert * a.b_expert_stride * Q::B_BITS / 8;
    const unsigned char *b_src[S::B_ITERS];
#pragma unroll
    for (int i = 0; i < S::B_ITERS; i++) {
        int n;
        b_src[i] = weight_row<Cfg>(a, nb, r0 + i * (S::THREADS / 8), &n)
                       ? B + (int64_t)n * a.ldb * Q::B_BITS / 8 + cc * 16
                       : nullptr;
    }

    /* K is a multiple of the chunk width (a plan checks it): a chunk is
     * wholly inside or outside [0, K). Missing rows and K past the end are
     * zero-filled. */
    auto load_stage = [&](int stage, int kt) {
        const int k0 = kt * Cfg::BK;
        const bool k_ok = k0 + cc * S::EPC < a.K;
        const int64_t kbytes = (int64_t)k0 * Q::A_BITS / 8;
        unsigned char *dA = sA + stage * S::A_STAGE + r0 * S::ROW + dst_chunk;
#pragma unroll
        for (int i = 0; i < S::A_ITERS; i++) {
            const bool ok = k_ok && a_src[i];
            cp_async16(dA + i * (S::THREADS / 8) * S::ROW, ok ? a_src[i] + kbytes : Abase, ok ? 16 : 0);
        }
        unsigned char *dB = sB + stage * S::B_STAGE + r0 * S::ROW + dst_chunk;
#pragma unroll
        for (int i = 0; i < S::B_ITERS; i++) {
            const bool ok = k_ok && b_src[i];
            cp_async16(dB + i * (S::THREADS / 8) * S::ROW, ok ? b_src[i] + kbytes : B, ok ? 16 : 0);
        }
    };

    Acc acc[1][S::NT][4];
    float facc[S::BLOCK ? 1 : 1][S::BLOCK ? S::NT : 1][4];
#pragma unroll
    for (int j = 0; j < S::NT; j++)
#pragma unroll
        for (int q = 0; q < 4; q++) {
            acc[0][j][q] = 0;
            if constexpr (S::BLOCK)
                facc[0][j][q] = 0.f;
        }
    block_scales<Cfg> bs;
    if constexpr (S::BLOCK)
        bs.init(a, t, nb, warp, 0, lane);

    const int k_tiles = (a.K + Cfg::BK - 1) / Cfg::BK;
#pragma unroll
    for (int s = 0; s < Cfg::STAGES - 2; s++) {
        if (s < k_tiles)
            load_stage(s, s);
        cp_async_commit();
    }
    const uint64_t da0 = sw128_desc(sA + wg * 64 * S::ROW), db0 = sw128_desc(sB);
    for (int kt = 0; kt < k_tiles; kt++) {
        cp_async_wait<Cfg::STAGES - 3>();
        fence_proxy_async();
        __syncthreads();   /* tile kt landed everywhere; MMAs of tile kt-2 done everywhere */
        const int stage = kt % Cfg::STAGES;
        /* Descriptor addresses are in 16-byte units. */
        const uint64_t da = da0 + (uint64_t)(stage * S::A_STAGE >> 4);
        const uint64_t db = db0 + (uint64_t)(stage * S::B_STAGE >> 4);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < S::KSTEPS; kk++)
            Cfg::mma(acc, da + 2 * kk, db + 2 * kk);
        wgmma_commit();
        const int nk = kt + Cfg::STAGES - 2;
        if (nk < k_tiles)
            load_stage(nk % Cfg::STAGES, nk);
        cp_async_commit();
        if constexpr (S::BLOCK) {
            /* BK is the whole 128-wide scale block: fold every tile. */
            wgmma_wait<0>();
            bs.fold(a, kt, acc, facc);
        } else {
            wgmma_wait<1>();
        }
    }
    wgmma_wait<0>();
    cp_async_wait<0>();
    __syncthreads();   /* the pipeline buffers become the fp32 epilogue tile */
    store_tile<Cfg>(a, t, nb, warp, 0, acc, facc, smem);
}

} // namespace mt
