/*
 * The experts' GEMMs for decode batches, as matrix-vector products on the
 * CUDA cores: a few rows per expert, where the tensor-core tiles of
 * grouped_gemm / grouped_gemm_sm90 pad each expert's rows to 16 or 64 and
 * the run time is the time to read the weights of the experts hit.
 *
 * Same argument (mt_gemm_args), the same tiles of the same row blocks
 * (tile_of, tile_row and weight_row of gemm_tile.cuh) and the same epilogue
 * values as the tensor-core families, so the runtime launches it like them.
 * A CTA owns one row block of an expert (BM rows; the live ones are
 * compacted into a table first, so padding rows cost nothing) and BN
 * weight rows as BN/2 pairs: a gate row and its up row for the fused
 * activation, else two neighbouring rows. A warp takes RG pairs; the KL =
 * 32/RG lanes of a pair walk K in 16-byte chunks (8 sixteen-bit or 16
 * eight-bit elements), UNROLL chunks a lane in flight, streaming the weight
 * bytes past L1 while the few A rows stay in it. Each lane keeps, per row
 * of the pass and per row of its pair, a partial sum of its chunks; the
 * KL lanes add theirs with shuffles (a fixed order: reproducible), and the
 * first lane of the pair writes the outputs.
 *
 * An L2 bulk prefetch of the CTA's weight rows at its start was tried (3
 * December 2026) and left out: Mixtral at M = 1 ran 202.5 -> 234.6 us, Qwen3
 * unchanged (docs/PERFORMANCE.md, session 7).
 *
 * Rows of a block go in passes of up to 8 (4 for 8-bit operands, whose
 * chunks take twice the registers as floats), compiled for 1, 2, 4 (and 8)
 * rows, the pass picking the smallest that holds them, so that one weight
 * read serves every row of the pass.
 *
 * Quant modes: none (fp32 products of the 16-bit values) and w8a8. fp8:
 * products of the e4m3 values in fp32; int8: exact int32 dot products
 * (dp4a). Tensor and token scales multiply the sum at the end, as the
 * tensor-core kernels do; block scales multiply each chunk's partial sum
 * (a chunk lies inside one 128-wide block of K) by a_scale * w_scale of its
 * block before it joins the fp32 sum.
 *
 * BM = 1 routes rows without the alignment step (standard format only):
 * row block b is slot b and its expert comes from topk_ids in the kernel's
 * own argument (gemv_args.h), so the pipeline has no alignment launch;
 * slots sharing an expert read its weights once each. With the epilogue
 * "sum" (GEMM2 only) row block b is token b instead, and the kernel adds
 * the token's slots itself (grouped_gemv_token_sums), so the pipeline has
 * no reduce launch either. With "lastsum" (GEMM2 only) row block b stays
 * slot b, stored as "store" does, and the last CTA of a token's slots in
 * each column block adds their rows into the output (sum_token_if_last):
 * no reduce launch, at the store's number of CTAs.
 *
 * AQ_CTA (BM = 1, block modes): A holds 16-bit rows, and each CTA
 * quantizes its slot's row into shared memory after its launch wait
 * (quantize_a_row, grouped_gemv_own_quant.cuh: the act_quant step's own
 * code, so the same bytes and scales). GEMM1 (no AQ_ACT): the hidden rows,
 * so that the pipeline has no quant step. GEMM2 (AQ_ACT: the activation):
 * GEMM1's stored gate and up halves, activated and multiplied first, so
 * that it has no act step; with "sum" the CTA does so for each of its
 * token's slots.
 *
 * LAST_QUANT (BM = 1, block modes, GEMM1 with the activation fused): the
 * activated columns are stored as the fused epilogue stores them, and the
 * last of a slot's CTAs to finish each 128-column group quantizes the
 * group for GEMM2 (quantize_group_if_last, grouped_gemv_own_quant.cuh: the
 * act step's code over that stretch of the row, so the same bytes and
 * scales), so that the pipeline has no act step.
 *
 * Cfg provides: T, QUANT, FORMAT, EPI, BM, BN, WARPS, UNROLL, AHEAD,
 * optionally AQ_CTA, AQ_ACT and LAST_QUANT, and for gemm_tile.cuh
 * GROUP_M = 1, WARPS_M = WARPS_N = 1.
 */
#pragma once
#include "gemm_tile.cuh"
#include "gemv_args.h"
#include "moe_reduce.cuh"

namespace mt {

template <class Cfg> struct gemv_shape {
    using Q = quant_traits<Cfg::QUANT>;
    static constexpr int EPC = 128 / Q::A_BITS;   /* elements per 16-byte chunk */
    static constexpr int PAIRS = Cfg::BN / 2;
    static constexpr int RG = PAIRS / Cfg::WARPS; /* pairs per warp */
    static constexpr int KL = 32 / RG;            /* lanes per pair, along K */
    static constexpr int PASS = EPC == 8 ? 8 : 4; /* rows per pass at most (8-bit: more registers per row) */
    static constexpr bool FUSED = Cfg::EPI != 0;
    static constexpr bool INT_DOT = Q::INT8;
    static constexpr bool BLOCK = Q::GRAN == 3;
    /* The running sum: int32 for int8 tensor/token (exact), else fp32. */
    using Sum = typename pick<INT_DOT && !BLOCK, int, float>::type;
    static_assert(!Q::WONLY, "weight-only modes are not in this family");
    static_assert(Q::A_BITS == Q::B_BITS, "A and B chunks must hold the same elements");
    static_assert(PAIRS % Cfg::WARPS == 0 && (RG == 1 || RG == 2 || RG == 4), "uneven pair split");
};

/* A 16-byte chunk by one ld.global with the qualifiers QUAL, as function
 * NAME. Volatile asm: plain asm counts as free of side effects, and the
 * compiler issued such loads ahead of the tests that guard them, past the
 * end of the operand (compute-sanitizer memcheck, 3 December 2026). */
#define MT_GEMV_LD_CHUNK(NAME, QUAL)                                                  \
    __device__ __forceinline__ vec8 NAME(const unsigned char *p)                      \
    {                                                                                 \
        vec8 v;                                                                       \
        asm volatile("ld.global" QUAL ".v4.u32 {%0,%1,%2,%3}, [%4];"                  \
            : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])                  \
            : "l"(p));                                                                \
        return v;                                                                     \
    }
/* A weight chunk: read once, so past L1 (which keeps the A rows), with a
 * 256-byte L2 fetch (the lane's next chunks follow in the same row). */
MT_GEMV_LD_CHUNK(ld_weight_chunk, ".nc.L1::no_allocate.L2::256B")
/* An A chunk: every pair of the CTA reads it, so through L1. The previous
 * step wrote it before this kernel waited on it (pdl_enter), and nothing
 * writes it while this kernel runs. */
MT_GEMV_LD_CHUNK(ld_act_chunk, ".nc")
/* An A chunk that another CTA of this launch wrote (a chained GEMM2's):
 * from L2, which holds it coherently, not through the non-coherent path. */
MT_GEMV_LD_CHUNK(ld_chain_chunk, ".cg")
#undef MT_GEMV_LD_CHUNK

/* Does Cfg quantize its A row itself (AQUANT "cta": Cfg::AQ_CTA declared)?
 * quantizes_a<Cfg>(). Functions, not a trait's static member: a member
 * that a kernel reads is a symbol of its image, and the other kernels'
 * images stay byte for byte what they were (moetune db refresh). */
template <class C> __device__ constexpr auto quantizes_a_of(int) -> decltype(bool(C::AQ_CTA))
{
    return C::AQ_CTA;
}
template <class C> __device__ constexpr bool quantizes_a_of(long) { return false; }
template <class C> __device__ constexpr bool quantizes_a() { return quantizes_a_of<C>(0); }

/* The activation such a CTA applies first (AQUANT "silu" 0, "gelu" 1:
 * Cfg::AQ_ACT, a GEMM2 reading GEMM1's stored gate and up halves), -1 for
 * none (AQUANT "cta": GEMM1's token rows as they are). As quantizes_a. */
template <class C> __device__ constexpr auto aq_activation_of(int) -> decltype(int(C::AQ_ACT))
{
    return C::AQ_ACT;
}
template <class C> __device__ constexpr int aq_activation_of(long) { return -1; }
template <class C> __device__ constexpr int aq_activation() { return aq_activation_of<C>(0); }

/* Does Cfg's last CTA of a token sum its slots (epilogue "lastsum":
 * Cfg::LAST_SUM declared)? As quantizes_a. */
template <class C> __device__ constexpr auto last_sums_of(int) -> decltype(bool(C::LAST_SUM))
{
    return C::LAST_SUM;
}
template <class C> __device__ constexpr bool last_sums_of(long) { return false; }
template <class C> __device__ constexpr bool last_sums() { return last_sums_of<C>(0); }

/* Is Cfg the GEMM2 half of a chained launch (grouped_gemv_chain.cuh:
 * Cfg::CHAINED declared), whose A rows and scales other CTAs of the same
 * launch write? As quantizes_a. */
template <class C> __device__ constexpr auto chained_of(int) -> decltype(bool(C::CHAINED))
{
    return C::CHAINED;
}
template <class C> __device__ constexpr bool chained_of(long) { return false; }
template <class C> __device__ constexpr bool chained() { return chained_of<C>(0); }

/* Where a CTA that quantizes its A row keeps it (shared memory): the 8-bit
 * values and a scale per 128 of them. Both NULL for the other kernels. */
struct cta_a_row {
    const unsigned char *q;
    const float *scale;
};

/* An A chunk of the CTA's own quantized row. */
__device__ __forceinline__ vec8 ld_cta_chunk(const unsigned char *p)
{
    vec8 v;
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];"
        : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
        : "r"(smem_addr(p)));
    return v;
}

/* Quantize row arow of A (the 16-bit hidden states, lda apart) into q and
 * scale, then a CTA barrier: grouped_gemv_own_quant.cuh, which only the
 * AQ_CTA kernels include (the act_quant code it brings puts a global of
 * CUDA's atomics header into every image that includes it). */
template <class Cfg>
__device__ void quantize_a_row(const mt_gemm_args &a, int64_t arow, unsigned char *q, float *scale);
/* Rows arows[0..n) of A so, a.K values and (a.K + 127) / 128 scales a
 * row, at once. */
template <class Cfg>
__device__ void quantize_a_rows(const mt_gemm_args &a, const int64_t *arows, int n, unsigned char *q,
                                float *scale);
/* OQUANT "last": once this CTA has stored its columns of `slot` (column
 * block nb), the last of the slot's CTAs of their 128-column group
 * quantizes the group into s.act_q and s.act_scale. */
template <class Cfg> __device__ void quantize_group_if_last(const mt_gemv_slot_args &s, int slot, int nb);

/* A chunk as floats: 8 sixteen-bit values or 16 e4m3 values (in the same
 * order for A and B chunks, which is all a dot product needs). */
template <class Cfg, int EPC> struct chunk_floats {
    float f[EPC];
    __device__ __forceinline__ void set(const vec8 &c)
    {
        using T = typename Cfg::T;
        if constexpr (EPC == 8) {
#pragma unroll
            for (int q = 0; q < 4; q++) {
                f[2 * q] = lo_of<T>(c.w[q]);
                f[2 * q + 1] = hi_of<T>(c.w[q]);
            }
        } else {
#pragma unroll
            for (int q = 0; q < 8; q++) {
                uint32_t h2;
                const uint16_t pair = (uint16_t)(c.w[q / 2] >> (16 * (q % 2)));
                asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(pair));
                f[2 * q] = to_float(f16{(uint16_t)(h2 & 0xffff)});
                f[2 * q + 1] = to_float(f16{(uint16_t)(h2 >> 16)});
            }
        }
    }
};

__device__ __forceinline__ int dp4a(uint32_t a, uint32_t b, int c)
{
    int d;
    asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

/* The dot product of a weight chunk and an A chunk: exact in int32 for
 * int8 (16 products by dp4a), else fp32 over the converted values. */
__device__ __forceinline__ int chunk_dot(const vec8 &w, const vec8 &a)
{
    int d = 0;
#pragma unroll
    for (int q = 0; q < 4; q++)
        d = dp4a(w.w[q], a.w[q], d);
    return d;
}
template <int EPC> __device__ __forceinline__ float chunk_dot(const float (&w)[EPC], const float (&a)[EPC])
{
    float d = 0.f;
#pragma unroll
    for (int e = 0; e < EPC; e++)
        d = fmaf(w[e], a[e], d);
    return d;
}

/* The sum of x over the KL lanes of a pair (aligned groups of KL lanes,
 * a fixed order: reproducible); every lane of the group gets it. */
template <int KL, class X> __device__ __forceinline__ X pair_lanes_sum(X x)
{
#pragma unroll
    for (int off = KL / 2; off >= 1; off >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, off);
    return x;
}

/* A pair's two output values v0, v1 at C[at], C[at + 1] (ok: inside the
 * product): one 32-bit store where both are and it is aligned. */
template <class T>
__device__ __forceinline__ void store_pair(T *C, int64_t at, const bool (&ok)[2], float v0, float v1)
{
    T *out = C + at;
    if (ok[1] && (at & 1) == 0) {
        *reinterpret_cast<uint32_t *>(out) = pack2<T>(v0, v1);
    } else {
        if (ok[0])
            out[0] = from_float<T>(v0);
        if (ok[1])
            out[1] = from_float<T>(v1);
    }
}

/* A lane's walk over its work items first, first + step, ... < end in
 * rounds: load(w, i0) fills the round's U weight chunks (two rows each)
 * into registers, body(w, i0) multiplies them. The first round is loaded
 * before enter() runs: a kernel that may read weights before its
 * programmatic-launch wait (gemv_may_load_early) waits there, so that the
 * first round streams in under the tail of the step ahead. AHEAD: the next
 * round's chunks are loaded before this round's products, so that a lane
 * has two rounds in flight and a long K is not a chain of load latencies;
 * it doubles the registers for chunks, which costs occupancy where K has
 * few rounds to hide (the template's AHEAD parameter: the tuner chooses). */
template <bool AHEAD, int U, class Load, class Body, class Enter>
__device__ __forceinline__ void stream_rounds(int first, int end, int step, Load load, Body body,
                                              Enter enter)
{
    vec8 wc[U][2], wn[U][2];
    if (first < end)
        load(wc, first);
    enter();
    for (int i0 = first; i0 < end; i0 += step) {
        if constexpr (AHEAD) {
            if (i0 + step < end)
                load(wn, i0 + step);
        } else if (i0 != first) {
            load(wc, i0);
        }
        body(wc, i0);
        if constexpr (AHEAD) {
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int j = 0; j < 2; j++)
                    wc[u][j] = wn[u][j];
        }
    }
}

/* May this launch read weights before its wait? Under a.pdl_early the
 * routing of a slot-routed kernel (BM = 1: the caller's topk_ids and
 * expert map, gemv_args.h) was final before the step ahead started, and no
 * step writes the weights, their scales or the router weights
 * (mt_device.cuh's protocol, runtime/moe_launch.c). Kernels of row blocks
 * from the alignment step wait first. */
template <class Cfg> __device__ __forceinline__ bool gemv_may_load_early(const mt_gemm_args &a)
{
    return Cfg::BM == 1 && a.pdl_early != 0;
}

/* The wait of a CTA that loaded early (nothing when it waited at its start). */
struct gemv_enter {
    bool pending;
    __device__ __forceinline__ void operator()() const
    {
        if (pending)
            pdl_enter();
    }
};

/* The live rows of a tile's row block, compacted (shared memory). */
struct gemv_rows {
    const int64_t *arow, *crow;   /* A row and output row */
    const float *w;               /* router weight */
};

/* One pass over K for rows r0 .. r0 + nv - 1 (nv <= V) of the block's live
 * rows: the pair's two weight rows n[0], n[1] (ok[j]: inside the product),
 * then the epilogue by the pair's first lane; enter() after the first
 * round's weight loads (stream_rounds). */
template <class Cfg, int V, class Enter>
__device__ __forceinline__ void gemv_pass(const mt_gemm_args &a, const tile_rows &t, gemv_rows rows, int r0,
                                          int nv, const int (&n)[2], const bool (&ok)[2], int kl,
                                          Enter enter, cta_a_row aq = {nullptr, nullptr})
{
    static_assert(!quantizes_a<Cfg>() || V == 1, "a CTA quantizes the one row of its slot");
    using S = gemv_shape<Cfg>;
    using Q = typename S::Q;
    using T = typename Cfg::T;
    using Sum = typename S::Sum;
    constexpr int EPC = S::EPC;
    const unsigned char *A = static_cast<const unsigned char *>(a.A);
    const unsigned char *B = static_cast<const unsigned char *>(a.B) +
                             (int64_t)t.expert * a.b_expert_stride * (Q::B_BITS / 8);
    const unsigned char *wrow[2];
#pragma unroll
    for (int j = 0; j < 2; j++)
        wrow[j] = B + (int64_t)(ok[j] ? n[j] : 0) * a.ldb * (Q::B_BITS / 8);
    /* Rows past nv repeat the last live row; their sums are dropped. */
    const unsigned char *arow[V];
    int64_t sa_off[V];
#pragma unroll
    for (int r = 0; r < V; r++) {
        const int64_t ar = rows.arow[r0 + min(r, nv - 1)];
        if constexpr (quantizes_a<Cfg>())
            arow[r] = aq.q;
        else
            arow[r] = A + ar * a.lda * (Q::A_BITS / 8);
        sa_off[r] = ar * a.a_scale_ld;
    }
    int64_t sw_off[2] = {0, 0};
    if constexpr (S::BLOCK) {
        const int kblocks = (a.K + 127) / 128, nblocks = (a.N + 127) / 128;
#pragma unroll
        for (int j = 0; j < 2; j++)
            sw_off[j] = ((int64_t)t.expert * nblocks + (ok[j] ? n[j] : 0) / 128) * kblocks;
    }
    Sum acc[2][V];
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
        for (int r = 0; r < V; r++)
            acc[j][r] = 0;

    const int chunks = a.K / EPC;
    auto load_round = [&](vec8 (&w)[Cfg::UNROLL][2], int c0) {
#pragma unroll
        for (int u = 0; u < Cfg::UNROLL; u++) {
            const int c = c0 + u * S::KL;
            if (c < chunks)
#pragma unroll
                for (int j = 0; j < 2; j++)
                    w[u][j] = ld_weight_chunk(wrow[j] + c * 16);
        }
    };
    /* A chunk c of row r of the pass, and its block scale. */
    auto a_chunk = [&](const unsigned char *p) {
        if constexpr (quantizes_a<Cfg>())
            return ld_cta_chunk(p);
        else if constexpr (chained<Cfg>())
            return ld_chain_chunk(p);
        else
            return ld_act_chunk(p);
    };
    auto a_scale_of = [&](int r, int c) {
        if constexpr (!S::BLOCK)
            return 1.f;
        else if constexpr (quantizes_a<Cfg>())
            return aq.scale[c * EPC / 128];
        else if constexpr (chained<Cfg>())
            return __ldcg(a.a_scale + sa_off[r] + c * EPC / 128);
        else
            return a.a_scale[sa_off[r] + c * EPC / 128];
    };
    auto multiply_round = [&](const vec8 (&wc)[Cfg::UNROLL][2], int c0) {
#pragma unroll
        for (int u = 0; u < Cfg::UNROLL; u++) {
            const int c = c0 + u * S::KL;
            if (c >= chunks)
                break;
            float sw[2] = {1.f, 1.f};
            if constexpr (S::BLOCK) {
                const int kb = c * EPC / 128;
#pragma unroll
                for (int j = 0; j < 2; j++)
                    sw[j] = a.b_scale[sw_off[j] + kb];
            }
            if constexpr (S::INT_DOT) {
#pragma unroll
                for (int r = 0; r < V; r++) {
                    const vec8 ac = a_chunk(arow[r] + c * 16);
                    const float sa = a_scale_of(r, c);
#pragma unroll
                    for (int j = 0; j < 2; j++) {
                        const int d = chunk_dot(wc[u][j], ac);
                        if constexpr (S::BLOCK)
                            acc[j][r] += (float)d * (sa * sw[j]);
                        else
                            acc[j][r] += d;
                    }
                }
            } else {
                chunk_floats<Cfg, EPC> wf[2];
#pragma unroll
                for (int j = 0; j < 2; j++)
                    wf[j].set(wc[u][j]);
#pragma unroll
                for (int r = 0; r < V; r++) {
                    chunk_floats<Cfg, EPC> af;
                    af.set(a_chunk(arow[r] + c * 16));
                    const float sa = a_scale_of(r, c);
#pragma unroll
                    for (int j = 0; j < 2; j++) {
                        const float d = chunk_dot<EPC>(wf[j].f, af.f);
                        if constexpr (S::BLOCK)
                            acc[j][r] += d * (sa * sw[j]);
                        else
                            acc[j][r] += d;
                    }
                }
            }
        }
    };
    /* Lookahead in one-row passes only: more rows multiply more per chunk
     * loaded and hold more registers already. */
    stream_rounds<V == 1 && Cfg::AHEAD, Cfg::UNROLL>(kl, chunks, S::KL * Cfg::UNROLL, load_round,
                                                     multiply_round, enter);
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
        for (int r = 0; r < V; r++)
            acc[j][r] = pair_lanes_sum<S::KL>(acc[j][r]);
    if (kl != 0)
        return;
    T *C = static_cast<T *>(a.C);
#pragma unroll
    for (int r = 0; r < V; r++) {
        if (r >= nv)
            break;
        const int i = r0 + r;
        const int64_t crow = rows.crow[i];
        const float w = rows.w[i];
        float v[2];
#pragma unroll
        for (int j = 0; j < 2; j++) {
            /* The values stage_fragments (gemm_tile.cuh) would stage. */
            if constexpr (Q::GRAN == 1)
                v[j] = (float)acc[j][r] * (a.a_scale[0] * a.b_scale[t.expert]);
            else if constexpr (Q::GRAN == 2)
                v[j] = (float)acc[j][r] *
                       (a.a_scale[rows.arow[i]] * (ok[j] ? a.b_scale[(int64_t)t.expert * a.N + n[j]] : 0.f));
            else
                v[j] = (float)acc[j][r];
        }
        /* ... and what write_tile makes of them: column n[0] of C (the
         * fused activation), or columns n[0] and n[0] + 1. */
        if constexpr (S::FUSED) {
            if (ok[0])
                C[crow * a.ldc + n[0]] = from_float<T>(activate<Cfg::EPI - 1>(round_to<T>(v[0] * w)) * round_to<T>(v[1] * w));
        } else {
            store_pair<T>(C, crow * a.ldc + n[0], ok, v[0] * w, v[1] * w);
        }
    }
}

/* This lane's pair of weight rows: tile columns c[0], c[1] (weight_row's
 * numbering) of column block nb, their product columns n[] and whether
 * they are inside it (ok[]), and the lane's place along K in the pair. */
struct lane_pair {
    int n[2];
    bool ok[2];
    int kl;
};
template <class Cfg> __device__ __forceinline__ lane_pair lane_pair_of(const mt_gemm_args &a, int nb)
{
    using S = gemv_shape<Cfg>;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int pair = warp * S::RG + lane / S::KL;
    const int c[2] = {S::FUSED ? pair : 2 * pair, S::FUSED ? Cfg::BN / 2 + pair : 2 * pair + 1};
    lane_pair lp;
    lp.kl = lane % S::KL;
#pragma unroll
    for (int j = 0; j < 2; j++)
        lp.ok[j] = weight_row<Cfg>(a, nb, c[j], &lp.n[j]);
    return lp;
}

/* The tile of CTA pid when a row block is one slot (BM = 1, gemv_args.h),
 * in tile_of's order (GROUP_M = 1). A bad id or expert_map entry is
 * flagged by the slot's first CTA and the slot dropped. */
template <class Cfg>
__device__ __forceinline__ bool slot_tile_of(const mt_gemv_slot_args &s, int pid, tile_rows *t, int *nb)
{
    const int n_blocks = num_n_blocks<Cfg>(s.gemm), slot = pid / n_blocks;
    *nb = pid % n_blocks;
    t->mb = slot;
    t->r0 = 0;
    t->count = 0;
    t->expert = -1;
    if (slot >= s.gemm.num_slots)
        return false;
    route_fault fault;
    t->expert = slot_expert(s.topk_ids, s.expert_map, s.num_experts, s.local_experts, slot, &fault);
    if (*nb == 0)
        flag_bad_slot(s.error_flag, fault, slot);
    return t->expert >= 0;
}

/* One CTA's work once its tile is known: the live rows of the block into a
 * compact table (BM = 1: the slot itself), then the passes over them;
 * enter() in the first pass, after its first weight loads (pending only for
 * BM = 1, whose block always has its one live row: gemv_may_load_early; a
 * chained GEMM2's wait for its slot's GEMM1 tiles, grouped_gemv_chain.cuh). */
template <class Cfg, class Enter = gemv_enter>
__device__ void gemv_tile(const mt_gemm_args &a, const tile_rows &t, int nb, Enter enter)
{
    using S = gemv_shape<Cfg>;
    __shared__ int64_t s_arow[Cfg::BM], s_crow[Cfg::BM];
    __shared__ float s_w[Cfg::BM];
    __shared__ int s_live;
    static_assert(Cfg::BM <= 32, "one warp compacts the rows");
    static_assert(Cfg::BM > 1 || Cfg::FORMAT == 0, "a row block per slot needs the standard format");

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if (warp == 0) {
        int64_t arow = 0, crow = 0;
        int slot = -1;
        bool live;
        if constexpr (Cfg::BM == 1) {
            live = lane == 0;
            slot = t.mb;
            arow = slot / a.a_row_div;
            crow = slot;
        } else {
            live = lane < Cfg::BM && tile_row<Cfg>(a, t, lane, &arow, &crow, &slot);
        }
        const unsigned mask = __ballot_sync(0xffffffffu, live);
        if (live) {
            const int i = __popc(mask & ((1u << lane) - 1u));
            s_arow[i] = arow;
            s_crow[i] = crow;
            s_w[i] = (a.row_weight && slot >= 0) ? a.row_weight[slot] : 1.0f;
        }
        if (lane == 0)
            s_live = __popc(mask);
    }
    __syncthreads();

    const lane_pair lp = lane_pair_of<Cfg>(a, nb);
    const int(&n)[2] = lp.n;
    const bool(&ok)[2] = lp.ok;
    const int kl = lp.kl;
    const gemv_rows rows = {s_arow, s_crow, s_w};
    if constexpr (quantizes_a<Cfg>()) {
        /* The slot's row quantized once the launch wait is over (after the
         * first weight loads where the launch lets them go out early:
         * gemv_may_load_early), before the first products. a.K is at most
         * MT_GEMV_AQ_MAX_K: mt_moe_plan_check, which every run passes
         * first, refuses a larger one. */
        static_assert(Cfg::BM == 1 && gemv_shape<Cfg>::BLOCK, "AQ_CTA: a row per slot, block scales");
        __shared__ __align__(16) unsigned char s_aq[MT_GEMV_AQ_MAX_K];
        __shared__ float s_as[MT_GEMV_AQ_MAX_K / 128];
        const int64_t arow = s_arow[0];
        auto enter_and_quantize = [&]() {
            enter();
            quantize_a_row<Cfg>(a, arow, s_aq, s_as);
        };
        gemv_pass<Cfg, 1>(a, t, rows, 0, 1, n, ok, kl, enter_and_quantize, cta_a_row{s_aq, s_as});
    } else if constexpr (Cfg::BM == 1) {   /* the slot's one row: one pass, the only one compiled */
        gemv_pass<Cfg, 1>(a, t, rows, 0, 1, n, ok, kl, enter);
    } else {
        const int live = s_live;
        for (int r0 = 0; r0 < live; r0 += S::PASS) {
            const int nv = min(S::PASS, live - r0);
            const gemv_enter e = {enter.pending && r0 == 0};
            if (nv == 1)
                gemv_pass<Cfg, 1>(a, t, rows, r0, nv, n, ok, kl, e);
            else if (nv == 2)
                gemv_pass<Cfg, 2>(a, t, rows, r0, nv, n, ok, kl, e);
            else if (nv <= 4 || S::PASS == 4)
                gemv_pass<Cfg, 4>(a, t, rows, r0, nv, n, ok, kl, e);
            else
                gemv_pass<Cfg, S::PASS>(a, t, rows, r0, nv, n, ok, kl, e);
        }
    }
}

/* GEMM2 with the topk sum in its epilogue (epilogue "sum", BM = 1): CTA pid
 * takes token pid / n_blocks and column block pid % n_blocks, and sums over
 * the token's slots (those on this rank, in slot order; a bad id or
 * expert_map entry is flagged and dropped, as in slot_tile_of)
 * w * (A[slot] . B[expert]) into row
 * `token` of C in fp32, rounded once: the reduce step's result without the
 * [slots, K] round trip and its launch (and without rounding each slot's
 * product to T first). The work of the pair's lanes is the flat list of
 * (slot, chunk) items, so that a short K (DeepSeek-V3's GEMM2: 16 chunks)
 * still keeps UNROLL chunks of every lane in flight across the slots. */
template <class Cfg> __device__ void grouped_gemv_token_sums(const mt_gemv_slot_args &s)
{
    using S = gemv_shape<Cfg>;
    using Q = typename S::Q;
    using T = typename Cfg::T;
    constexpr int EPC = S::EPC;
    static_assert(Cfg::BM == 1 && !S::FUSED && Cfg::FORMAT == 0, "the topk sum takes a token per row block");
    __shared__ int64_t s_arow[MT_GEMV_SUM_MAX_TOPK];
    __shared__ int s_expert[MT_GEMV_SUM_MAX_TOPK];
    __shared__ float s_w[MT_GEMV_SUM_MAX_TOPK];
    __shared__ int s_live;
    const mt_gemm_args &a = s.gemm;
    /* AQ_CTA: the token's live slot rows quantized, K bytes and kblocks
     * scales apart (mt_moe_plan_check: topk * K at most MT_GEMV_AQ_MAX_K). */
    unsigned char *aq_q = nullptr;
    float *aq_s = nullptr;
    if constexpr (quantizes_a<Cfg>()) {
        __shared__ __align__(16) unsigned char s_aq[MT_GEMV_AQ_MAX_K];
        __shared__ float s_as[MT_GEMV_AQ_MAX_K / 128 + MT_GEMV_SUM_MAX_TOPK];
        aq_q = s_aq;
        aq_s = s_as;
    }
    const gemv_enter enter = {gemv_may_load_early<Cfg>(a)};
    if (!enter.pending)
        pdl_enter();
    const int n_blocks = num_n_blocks<Cfg>(a), token = blockIdx.x / n_blocks, nb = blockIdx.x % n_blocks;
    if ((int64_t)token * s.topk >= a.num_slots) {
        enter();
        return;
    }
    const int lane = threadIdx.x & 31;
    if (threadIdx.x < 32) {
        const int slot = token * s.topk + lane;
        int e = -1;
        if (lane < s.topk && lane < MT_GEMV_SUM_MAX_TOPK) {
            route_fault fault;
            e = slot_expert(s.topk_ids, s.expert_map, s.num_experts, s.local_experts, slot, &fault);
            if (nb == 0)
                flag_bad_slot(s.error_flag, fault, slot);
        }
        const bool live = e >= 0;
        const unsigned mask = __ballot_sync(0xffffffffu, live);
        if (live) {
            const int i = __popc(mask & ((1u << lane) - 1u));
            s_arow[i] = slot / a.a_row_div;
            s_expert[i] = e;
            s_w[i] = a.row_weight ? a.row_weight[slot] : 1.0f;
        }
        if (lane == 0)
            s_live = __popc(mask);
    }
    __syncthreads();

    const lane_pair lp = lane_pair_of<Cfg>(a, nb);
    const unsigned char *A = static_cast<const unsigned char *>(a.A);
    const unsigned char *B = static_cast<const unsigned char *>(a.B);
    const int chunks = a.K / EPC, items = s_live * chunks;
    const int kblocks = (a.K + 127) / 128, nblocks = (a.N + 127) / 128;
    auto load_round = [&](vec8 (&w)[Cfg::UNROLL][2], int i0) {
#pragma unroll
        for (int u = 0; u < Cfg::UNROLL; u++) {
            const int it = i0 + u * S::KL, r = it / chunks, c = it - r * chunks;
            if (it < items)
#pragma unroll
                for (int j = 0; j < 2; j++)
                    w[u][j] = ld_weight_chunk(B + ((int64_t)s_expert[r] * a.b_expert_stride +
                                                   (int64_t)(lp.ok[j] ? lp.n[j] : 0) * a.ldb) *
                                                      (Q::B_BITS / 8) + c * 16);
        }
    };
    float acc[2] = {0.f, 0.f};
    auto multiply_round = [&](const vec8 (&wc)[Cfg::UNROLL][2], int i0) {
#pragma unroll
        for (int u = 0; u < Cfg::UNROLL; u++) {
            const int it = i0 + u * S::KL, r = it / chunks, c = it - r * chunks;
            if (it >= items)
                break;
            const int64_t arow = s_arow[r];
            const int e = s_expert[r], kb = c * EPC / 128;
            vec8 ac;
            if constexpr (quantizes_a<Cfg>())
                ac = ld_cta_chunk(aq_q + (int64_t)r * a.K + c * 16);
            else
                ac = ld_act_chunk(A + arow * a.lda * (Q::A_BITS / 8) + c * 16);
            /* The slot's scale of column n[j]: router weight times what
             * stage_fragments (gemm_tile.cuh) multiplies the sum by. */
            float sc[2];
#pragma unroll
            for (int j = 0; j < 2; j++) {
                const int n = lp.ok[j] ? lp.n[j] : 0;
                if constexpr (Q::GRAN == 1)
                    sc[j] = a.a_scale[0] * a.b_scale[e];
                else if constexpr (Q::GRAN == 2)
                    sc[j] = a.a_scale[arow] * a.b_scale[(int64_t)e * a.N + n];
                else if constexpr (Q::GRAN == 3 && quantizes_a<Cfg>())
                    sc[j] = aq_s[r * kblocks + kb] * a.b_scale[((int64_t)e * nblocks + n / 128) * kblocks + kb];
                else if constexpr (Q::GRAN == 3)
                    sc[j] = a.a_scale[arow * a.a_scale_ld + kb] *
                            a.b_scale[((int64_t)e * nblocks + n / 128) * kblocks + kb];
                else
                    sc[j] = 1.f;
                sc[j] *= s_w[r];
            }
            if constexpr (S::INT_DOT) {
#pragma unroll
                for (int j = 0; j < 2; j++)
                    acc[j] = fmaf((float)chunk_dot(wc[u][j], ac), sc[j], acc[j]);
            } else {
                chunk_floats<Cfg, EPC> af, wf;
                af.set(ac);
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    wf.set(wc[u][j]);
                    acc[j] = fmaf(chunk_dot<EPC>(wf.f, af.f), sc[j], acc[j]);
                }
            }
        }
    };
    if constexpr (quantizes_a<Cfg>()) {
        /* The rows quantized once the launch wait is over (after the first
         * weight loads where the launch lets them go out early). */
        auto enter_and_quantize = [&]() {
            enter();
            quantize_a_rows<Cfg>(a, s_arow, s_live, aq_q, aq_s);
        };
        stream_rounds<Cfg::AHEAD, Cfg::UNROLL>(lp.kl, items, S::KL * Cfg::UNROLL, load_round, multiply_round,
                                               enter_and_quantize);
    } else {
        stream_rounds<Cfg::AHEAD, Cfg::UNROLL>(lp.kl, items, S::KL * Cfg::UNROLL, load_round, multiply_round,
                                               enter);
    }
#pragma unroll
    for (int j = 0; j < 2; j++)
        acc[j] = pair_lanes_sum<S::KL>(acc[j]);
    if (lp.kl == 0)
        store_pair<T>(static_cast<T *>(a.C), (int64_t)token * a.ldc + lp.n[0], lp.ok, acc[0], acc[1]);
}

/* The reduce step's items (moe_reduce.cuh reduce_rows) of one token's
 * column block, [lo, hi), a thread each. */
struct block_items {
    int64_t lo, hi;
    __device__ __forceinline__ int64_t first() const { return lo + threadIdx.x; }
    __device__ __forceinline__ int64_t end(const mt_reduce_args &) const { return hi; }
    __device__ __forceinline__ int64_t step() const { return blockDim.x; }
};

/* Slots whose rows the last CTA loads at once: 8 (the reduce step's) took
 * a store tile from 54 registers to 88 (ptxas, sm_90a), 5 CTAs an SM
 * instead of 9. */
#define LAST_SUM_UNROLL 4

/* Epilogue "lastsum": once this CTA has stored its rows of `slot` (or had
 * none: a slot on another rank, or dropped as bad input), it counts in for
 * its token and column block nb; the last of the token's topk CTAs there
 * adds the slots' rows of the block into the output by the reduce step's
 * own reduce_rows (moe_reduce.cuh: the same order, the same bits) and
 * re-arms the counter. */
template <class Cfg> __device__ void sum_token_if_last(const mt_gemv_slot_args &s, int slot, int nb)
{
    const mt_gemm_args &a = s.gemm;
    const int token = slot / s.topk;
    int32_t *count = a.tile_count + (int64_t)token * num_n_blocks<Cfg>(a) + nb;
    if (!arrive_last<cta_barrier>(count, s.topk, threadIdx.x))
        return;
    mt_reduce_args rd = {};
    rd.Y = a.C;
    rd.out = s.out;
    rd.topk_ids = s.topk_ids;
    rd.expert_map = s.expert_map;
    rd.ldy = a.ldc;
    rd.topk = s.topk;
    rd.K = a.N;
    rd.num_experts = s.num_experts;
    rd.local_experts = s.local_experts;
    const int c0 = nb * Cfg::BN / 8, chunks = min(Cfg::BN / 8, a.N / 8 - c0);
    const int64_t first = (int64_t)token * (a.N / 8) + c0;
    reduce_rows<typename Cfg::T, typename Cfg::T, LAST_SUM_UNROLL>(rd, block_items{first, first + chunks});
    if (threadIdx.x == 0)
        *count = 0;
}

/* Row blocks from the alignment step. */
template <class Cfg> __device__ void grouped_gemv(const mt_gemm_args &a)
{
    pdl_enter();
    tile_rows t;
    int nb;
    if (tile_of<Cfg>(a, blockIdx.x, &t, &nb))
        gemv_tile<Cfg>(a, t, nb, gemv_enter{false});
}

/* A row block per slot (BM = 1): the routing and the first weight loads
 * before the wait where the launch allows (gemv_may_load_early). A CTA
 * without a tile waits too before it exits: were every CTA to leave
 * without waiting, the grid could finish (and the step after it start)
 * before the steps ahead of it. */
template <class Cfg> __device__ void grouped_gemv_slots(const mt_gemv_slot_args &s)
{
    const gemv_enter enter = {gemv_may_load_early<Cfg>(s.gemm)};
    if (!enter.pending)
        pdl_enter();
    tile_rows t;
    int nb;
    if (slot_tile_of<Cfg>(s, blockIdx.x, &t, &nb))
        gemv_tile<Cfg>(s.gemm, t, nb, enter);
    else
        enter();
    if constexpr (last_sums<Cfg>()) {
        static_assert(Cfg::BM == 1 && !gemv_shape<Cfg>::FUSED, "lastsum: GEMM2, a row block per slot");
        if (t.mb < s.gemm.num_slots)
            sum_token_if_last<Cfg>(s, t.mb, nb);
    }
    if constexpr (last_quants<Cfg>()) {
        /* A dropped slot (bad input, another rank's expert) has no columns
         * and no group: none of its CTAs counts in, and GEMM2 skips it. */
        static_assert(Cfg::BM == 1 && gemv_shape<Cfg>::FUSED && gemv_shape<Cfg>::BLOCK,
                      "OQUANT last: GEMM1 of the block modes, a row block per slot, activation fused");
        if (t.expert >= 0)
            quantize_group_if_last<Cfg>(s, t.mb, nb);
    }
}

} // namespace mt
