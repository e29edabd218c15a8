/*
 * Grouped GEMM of the fused-MoE experts stage on tensor cores with a
 * STAGES-deep cp.async pipeline, for every quant mode of moetune/problem.h.
 *
 * One CTA computes a BM x BN tile of one expert's product. Rows are gathered
 * (standard format: sorted slot ids from moe_align; batched format: the
 * expert's first expert_num_tokens rows), the weight rows are the expert's
 * w1 or w2 rows. The epilogue stages the fp32 tile through shared memory,
 * applies the per-row router weight and optionally the activation-and-mul
 * (gate columns in the first half of the tile, up columns in the second),
 * and writes 16-byte vectors.
 *
 * Quant traits (quant_traits below) pick the operand widths and the MMA:
 *   none          bf16/fp16 A and B, mma m16n8k16, fp32 accumulators.
 *   w8a8 fp8/int8 8-bit A (activations quantized by act_quant) and B,
 *                 mma m16n8k32 e4m3 (fp32 acc) or s8 (int32 acc). Tensor and
 *                 token scales are applied when the accumulators leave the
 *                 registers; block scales per 128-wide K block: the partial
 *                 sums of a block are scaled by a_scale[row, kb] *
 *                 w_scale[e, n/128, kb] and added to a second, fp32 set.
 *   w8a16/w4a16   bf16/fp16 A, 8-bit or packed 4-bit B staged raw in shared
 *                 memory; each thread dequantizes its own B fragment,
 *                 (q - zero) * scale of the group, into registers before the
 *                 m16n8k16 MMA.
 * The shared-memory tiles are byte arrays: a tile row is BK elements of the
 * operand's width plus 16 bytes of padding (conflict-free ldmatrix), and one
 * MMA step consumes 32 bytes of K of A (k16 at 16 bits, k32 at 8 bits).
 *
 * Fragment addressing (derivation): ldmatrix .m8n8.b16 hands lane L the
 * 4 bytes at row L/4, bytes 4*(L%4)..+3 of each 8x16-byte matrix. For
 * 16-bit data that is k = 2t, 2t+1 of row g; for 8-bit data k = 4t..4t+3
 * of row g: in both cases exactly the a/b register layout of the MMA
 * (m16n8k16 resp. m16n8k32), provided matrix 0..3 of A are (rows 0-7,
 * bytes 0-15), (rows 8-15, bytes 0-15), (rows 0-7, bytes 16-31), (rows 8-15,
 * bytes 16-31) of the 32-byte step, i.e. lane L points at row L%16, byte
 * 16*(L/16); and matrices of B (stored [n][k]) are (n 0-7, bytes 0-15) ->
 * b0, (n 0-7, bytes 16-31) -> b1 of n-tile 2jp, the same for n 8-15 and
 * n-tile 2jp+1. So one byte-addressed load path serves both widths.
 *
 * Split-K (SPLIT_K > 1, decode tiles): SPLIT_K CTAs share a tile, CTA
 * blockIdx.x doing slice blockIdx.x % SPLIT_K of tile blockIdx.x / SPLIT_K.
 * Slices are contiguous runs of K tiles (whole 128-wide scale blocks in the
 * block modes, so each fold sees one block); a slice may be empty (a zero
 * partial). Every CTA stores its sums to a.partial; the last of a tile to
 * count itself in a.tile_count adds all slices in split order (so the
 * result does not depend on which CTA finished last: bit-for-bit
 * reproducible), re-arms the counter to 0 and runs the usual epilogue
 * (split_slice, split_k_reduce: gemm_tile.cuh, shared with the sm90 family).
 *
 * Cfg provides: T (bf16/f16), QUANT (the mt_quant_mode value), FORMAT (0
 * standard, 1 batched), EPI (0 store, 1 silu-and-mul, 2 gelu-and-mul), BM,
 * BN, BK, GROUP_M, WARPS_M, WARPS_N, STAGES, SPLIT_K, PREFETCH (the L2
 * prefetch size of the weight copies, 0 for none).
 */
#pragma once
#include "gemm_tile.cuh"

namespace mt {

/* The mma.sync kernel's shared-memory staging on top of the fragment
 * geometry of gemm_tile.cuh. */
template <class Cfg> struct gemm_shape : tile_shape<Cfg> {
    using Q = quant_traits<Cfg::QUANT>;
    static constexpr int THREADS = tile_shape<Cfg>::THREADS;
    static constexpr int A_ROW = Cfg::BK * Q::A_BITS / 8, B_ROW = Cfg::BK * Q::B_BITS / 8;
    static constexpr int LDA = A_ROW + 16, LDB = B_ROW + 16;   /* bytes */
    static constexpr int A_STAGE = Cfg::BM * LDA, B_STAGE = Cfg::BN * LDB;
    static constexpr int A_CPR = A_ROW / 16, B_CPR = B_ROW / 16;   /* 16-byte chunks per row */
    static constexpr int A_EPC = 128 / Q::A_BITS, B_EPC = 128 / Q::B_BITS; /* elements per chunk */
    static constexpr int A_ITERS = (Cfg::BM * A_CPR + THREADS - 1) / THREADS;
    static constexpr int B_ITERS = (Cfg::BN * B_CPR + THREADS - 1) / THREADS;
    static constexpr int KSTEPS = A_ROW / 32;           /* MMA steps per tile */
};

/* Weight-only: dequantize two consecutive k (lo = even k) of 8-bit or
 * packed 4-bit q into one register of two T. */
template <class T, bool W4>
__device__ __forceinline__ uint32_t dequant2(const unsigned char *row, int k, bool has_zero, float zero,
                                             float scale)
{
    float v0, v1;
    if (W4) {
        const unsigned b = row[k >> 1];   /* low nibble: even k, high nibble: odd k */
        v0 = (float)(int)(b & 15u) - zero;
        v1 = (float)(int)(b >> 4) - zero;
    } else {
        const unsigned w = *reinterpret_cast<const uint16_t *>(row + k);
        if (has_zero) {
            v0 = (float)(int)(w & 255u) - zero;
            v1 = (float)(int)(w >> 8) - zero;
        } else {
            v0 = (float)(int)(signed char)(w & 255u);
            v1 = (float)(int)(signed char)(w >> 8);
        }
    }
    return pack2<T>(v0 * scale, v1 * scale);
}

/* fp8 on Hopper. sm_90 has no mma.sync of e4m3 operands: ptxas lowers each
 * m16n8k32 e4m3 MMA into conversions to f16 and two f16 MMAs, and converts
 * the A fragment again for every n tile, which made the fp8 kernels
 * ALU-bound (Nsight Compute, docs/PERFORMANCE.md, session 10). On sm_90 the
 * kernel converts each fragment once (exact: every e4m3 value is an f16)
 * and issues the f16 MMAs itself. An 8-bit fragment register holds k =
 * 4t..4t+3 (mt_device.cuh); its low half becomes the f16 pair the
 * m16n8k16 layout puts at k 2t, 2t+1 and its high half the pair at
 * 2t+8, 2t+9: the f16 MMA sees the 16 k of a half step in another order,
 * the same one for A and B, which leaves the dot product as it is. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
constexpr bool FP8_VIA_F16 = true;
#else
constexpr bool FP8_VIA_F16 = false;
#endif

/* Bytes 0-1 and 2-3 of four e4m3 values as two f16x2. */
__device__ __forceinline__ void e4m3x4_to_f16x2(uint32_t x, uint32_t &lo, uint32_t &hi)
{
    asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\n"
        "cvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
        : "=r"(lo), "=r"(hi)
        : "r"(x));
}

/* The A fragment of one m16n8k32 step as the A fragments of its two k16
 * halves (h[0]: k 0-15, h[1]: k 16-31). */
__device__ __forceinline__ void fp8_a_to_f16(const uint32_t (&a)[4], uint32_t (&h)[2][4])
{
    e4m3x4_to_f16x2(a[0], h[0][0], h[0][2]);
    e4m3x4_to_f16x2(a[1], h[0][1], h[0][3]);
    e4m3x4_to_f16x2(a[2], h[1][0], h[1][2]);
    e4m3x4_to_f16x2(a[3], h[1][1], h[1][3]);
}

/* The B fragment (b0: k 0-15, b1: k 16-31) of one n tile, likewise. */
__device__ __forceinline__ void fp8_b_to_f16(uint32_t b0, uint32_t b1, uint32_t (&h)[2][2])
{
    e4m3x4_to_f16x2(b0, h[0][0], h[0][1]);
    e4m3x4_to_f16x2(b1, h[1][0], h[1][1]);
}

/* D += A * B over one m16n8k32 step, from the converted fragments. */
__device__ __forceinline__ void mma_fp8_as_f16(float (&d)[4], const uint32_t (&a)[2][4], const uint32_t (&b)[2][2])
{
    mma16816<f16>(d, a[0], b[0][0], b[0][1]);
    mma16816<f16>(d, a[1], b[1][0], b[1][1]);
}

template <class Cfg> __device__ void grouped_gemm(const mt_gemm_args &a)
{
    using T = typename Cfg::T;
    using S = gemm_shape<Cfg>;
    using Q = typename S::Q;
    using Acc = typename Q::Acc;   /* int32 for int8, else fp32 */
    extern __shared__ __align__(16) unsigned char smem_raw[];
    unsigned char *sA = smem_raw;
    unsigned char *sB = sA + Cfg::STAGES * S::A_STAGE;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int warp_m = warp / Cfg::WARPS_N, warp_n = warp % Cfg::WARPS_N;

    /* a.pdl_early: the routing was final before the step ahead of this one
     * started (mt_device.cuh), so the tile, its rows and the first stages
     * of its weights (which no step writes) are fetched before pdl_wait(),
     * under the tail of the step ahead. */
    const bool early = a.pdl_early != 0;
    if (!early)
        pdl_enter();
    /* Every slice of a padding tile leaves here, before the counter. */
    const int tile = blockIdx.x / Cfg::SPLIT_K, split = blockIdx.x % Cfg::SPLIT_K;
    tile_rows t;
    int nb;
    if (!tile_of<Cfg>(a, tile, &t, &nb))
        return;

    /* Each thread's copy sources are fixed across K: resolve them once. */
    const unsigned char *Abase = static_cast<const unsigned char *>(a.A);
    const unsigned char *a_src[S::A_ITERS];
    bool a_ok[S::A_ITERS];
#pragma unroll
    for (int i = 0; i < S::A_ITERS; i++) {
        const int c = tid + i * S::THREADS, r = c / S::A_CPR, cc = c % S::A_CPR;
        int64_t arow = 0, crow;
        int slot;
        a_ok[i] = c < Cfg::BM * S::A_CPR && tile_row<Cfg>(a, t, r, &arow, &crow, &slot);
        a_src[i] = Abase + (a_ok[i] ? arow * a.lda * (Q::A_BITS / 8) + cc * 16 : 0);
    }
    const unsigned char *b_src[S::B_ITERS];
    bool b_ok[S::B_ITERS];
    const unsigned char *B = static_cast<const unsigned char *>(a.B) +
                             (int64_t)t.expert * a.b_expert_stride * Q::B_BITS / 8;
#pragma unroll
    for (int i = 0; i < S::B_ITERS; i++) {
        const int c = tid + i * S::THREADS, r = c / S::B_CPR, cc = c % S::B_CPR;
        int n;
        const bool ok = weight_row<Cfg>(a, nb, r, &n);
        b_ok[i] = ok && c < Cfg::BN * S::B_CPR;
        b_src[i] = b_ok[i] ? B + (int64_t)n * a.ldb * Q::B_BITS / 8 + cc * 16 : B;
    }

    /* K in elements; a chunk is wholly inside or outside [0, K) because K is
     * a multiple of every chunk width a plan admits (8, 16; 32 for w4a16). */
    auto load_a = [&](int stage, int kt) {
        const int k0 = kt * Cfg::BK;
#pragma unroll
        for (int i = 0; i < S::A_ITERS; i++) {
            const int c = tid + i * S::THREADS;
            if (c < Cfg::BM * S::A_CPR) {
                const int r = c / S::A_CPR, cc = c % S::A_CPR;
                const bool ok = a_ok[i] && k0 + cc * S::A_EPC < a.K;
                cp_async16(sA + stage * S::A_STAGE + r * S::LDA + cc * 16,
                           ok ? a_src[i] + k0 * Q::A_BITS / 8 : Abase, ok ? 16 : 0);
            }
        }
    };
    auto load_b = [&](int stage, int kt) {
        const int k0 = kt * Cfg::BK;
#pragma unroll
        for (int i = 0; i < S::B_ITERS; i++) {
            const int c = tid + i * S::THREADS;
            if (c < Cfg::BN * S::B_CPR) {
                const int r = c / S::B_CPR, cc = c % S::B_CPR;
                const bool ok = b_ok[i] && k0 + cc * S::B_EPC < a.K;
                cp_async16_pf<Cfg::PREFETCH>(sB + stage * S::B_STAGE + r * S::LDB + cc * 16,
                           ok ? b_src[i] + k0 * Q::B_BITS / 8 : B, ok ? 16 : 0);
            }
        }
    };
    const int k_tiles = (a.K + Cfg::BK - 1) / Cfg::BK;
    int kt0 = 0, kt1 = k_tiles;   /* this CTA's K tiles */
    if constexpr (Cfg::SPLIT_K > 1)
        split_slice<Cfg>(k_tiles, split, &kt0, &kt1);
    /* Early: the prologue's weight stages go first; they join the first
     * commit group below, so stage 0 waits for all of them (once). */
    if (early) {
#pragma unroll
        for (int s = 0; s < Cfg::STAGES - 1; s++)
            if (kt0 + s < kt1)
                load_b(s, kt0 + s);
        pdl_enter();
    }

    Acc acc[S::MT][S::NT][4];
    /* Block modes: the scaled sum of the finished K blocks. */
    float facc[S::BLOCK ? S::MT : 1][S::BLOCK ? S::NT : 1][4];
#pragma unroll
    for (int i = 0; i < S::MT; i++)
#pragma unroll
        for (int j = 0; j < S::NT; j++)
#pragma unroll
            for (int q = 0; q < 4; q++) {
                acc[i][j][q] = 0;
                if constexpr (S::BLOCK)
                    facc[i][j][q] = 0.f;
            }

    block_scales<Cfg> bs;
    if constexpr (S::BLOCK)
        bs.init(a, t, nb, warp_m, warp_n, lane);

    /* Weight-only: this thread's B columns and their group scale rows. */
    const int ngroups = Q::WONLY ? a.K / a.group : 1;
    const bool has_zero = a.b_zero != nullptr;
    int64_t wq_off[Q::WONLY ? S::NT : 1];
    if constexpr (Q::WONLY) {
#pragma unroll
        for (int j = 0; j < S::NT; j++) {
            int n;
            const int c = warp_n * S::WN + j * 8 + (lane >> 2);
            wq_off[j] = weight_row<Cfg>(a, nb, c, &n) ? ((int64_t)t.expert * a.N + n) * ngroups : -1;
        }
    }

#pragma unroll
    for (int s = 0; s < Cfg::STAGES - 1; s++) {
        if (kt0 + s < kt1) {
            if (!early)
                load_b(s, kt0 + s);
            load_a(s, kt0 + s);
        }
        cp_async_commit();
    }

    float wscale[Q::WONLY ? S::NT : 1], wzero[Q::WONLY ? S::NT : 1];
    for (int kt = kt0; kt < kt1; kt++) {
        cp_async_wait<Cfg::STAGES - 2>();
        __syncthreads();  /* stage kt landed; stage kt-1 is free for the prefetch */
        const int nk = kt + Cfg::STAGES - 1;
        if (nk < kt1) {
            load_a((nk - kt0) % Cfg::STAGES, nk);
            load_b((nk - kt0) % Cfg::STAGES, nk);
        }
        cp_async_commit();

        const int stage = (kt - kt0) % Cfg::STAGES;
        const unsigned char *tA = sA + stage * S::A_STAGE;
        const unsigned char *tB = sB + stage * S::B_STAGE;
#pragma unroll
        for (int kk = 0; kk < S::KSTEPS; kk++) {
            uint32_t af[S::MT][4];
#pragma unroll
            for (int i = 0; i < S::MT; i++) {
                const int row = warp_m * S::WM + i * 16 + (lane & 15);
                ldmatrix_x4(af[i], tA + row * S::LDA + kk * 32 + (lane >> 4) * 16);
            }
            if constexpr (Q::WONLY) {
                /* k16 step: b0 holds k 2t, 2t+1 and b1 k 8+2t, 8+2t+1 of
                 * column g; a group (>= 32, a multiple of 16) never splits
                 * a step, so one scale serves the step. */
                const int kg = kt * Cfg::BK + kk * 16;
                if (kk == 0 || kg % a.group == 0) {
#pragma unroll
                    for (int j = 0; j < S::NT; j++) {
                        wscale[j] = 0.f;
                        wzero[j] = Q::W4 ? 8.f : 0.f;
                        if (wq_off[j] >= 0) {
                            const int64_t gi = wq_off[j] + kg / a.group;
                            wscale[j] = a.b_scale[gi];
                            if (has_zero)
                                wzero[j] = (float)a.b_zero[gi];
                        }
                    }
                }
#pragma unroll
                for (int j = 0; j < S::NT; j++) {
                    const unsigned char *brow = tB + (warp_n * S::WN + j * 8 + (lane >> 2)) * S::LDB;
                    const int k = kk * 16 + (lane & 3) * 2;
                    const uint32_t b0 = dequant2<T, Q::W4>(brow, k, has_zero, wzero[j], wscale[j]);
                    const uint32_t b1 = dequant2<T, Q::W4>(brow, k + 8, has_zero, wzero[j], wscale[j]);
#pragma unroll
                    for (int i = 0; i < S::MT; i++)
                        mma16816<T>(acc[i][j], af[i], b0, b1);
                }
            } else {
                constexpr bool VIA_F16 = Q::W8A8 && !Q::INT8 && FP8_VIA_F16;
                uint32_t ah[VIA_F16 ? S::MT : 1][2][4];
                if constexpr (VIA_F16) {
#pragma unroll
                    for (int i = 0; i < S::MT; i++)
                        fp8_a_to_f16(af[i], ah[i]);
                }
#pragma unroll
                for (int jp = 0; jp < S::NT / 2; jp++) {
                    uint32_t bf[4];
                    const int n = warp_n * S::WN + jp * 16 + (lane >> 4) * 8 + (lane & 7);
                    ldmatrix_x4(bf, tB + n * S::LDB + kk * 32 + ((lane >> 3) & 1) * 16);
                    uint32_t bh[VIA_F16 ? 2 : 1][2][2];
                    if constexpr (VIA_F16) {
                        fp8_b_to_f16(bf[0], bf[1], bh[0]);
                        fp8_b_to_f16(bf[2], bf[3], bh[1]);
                    }
#pragma unroll
                    for (int i = 0; i < S::MT; i++) {
                        if constexpr (VIA_F16) {
                            mma_fp8_as_f16(acc[i][2 * jp], ah[i], bh[0]);
                            mma_fp8_as_f16(acc[i][2 * jp + 1], ah[i], bh[1]);
                        } else if constexpr (Q::W8A8) {
                            mma16832<typename Q::Tag>(acc[i][2 * jp], af[i], bf[0], bf[1]);
                            mma16832<typename Q::Tag>(acc[i][2 * jp + 1], af[i], bf[2], bf[3]);
                        } else {
                            mma16816<T>(acc[i][2 * jp], af[i], bf[0], bf[1]);
                            mma16816<T>(acc[i][2 * jp + 1], af[i], bf[2], bf[3]);
                        }
                    }
                }
            }
        }
        if constexpr (S::BLOCK) {
            /* End of a 128-wide K block (BK divides 128) or of K: fold. */
            if (((kt + 1) * Cfg::BK) % 128 == 0 || kt == k_tiles - 1)
                bs.fold(a, kt * Cfg::BK / 128, acc, facc);
        }
    }
    cp_async_wait<0>();
    __syncthreads();  /* the pipeline buffers become the fp32 epilogue tile */

    if constexpr (Cfg::SPLIT_K > 1) {
        /* The block modes' sums are in facc (acc is 0 after the last fold). */
        bool last;
        if constexpr (S::BLOCK)
            last = split_k_reduce<Cfg, S::THREADS, cta_barrier>(a, tile, split, tid, facc);
        else
            last = split_k_reduce<Cfg, S::THREADS, cta_barrier>(a, tile, split, tid, acc);
        if (!last)
            return;
    }
    store_tile<Cfg>(a, t, nb, warp_m, warp_n, acc, facc, smem_raw);
}

} // namespace mt
