/*
 * The A rows of grouped_gemv's AQ_CTA kernels (AQUANT "cta", "silu", "gelu";
 * grouped_gemv.lua): each CTA quantizes its slot's row itself, by the
 * act_quant step's block-wise code over the CTA's own warps, so the same
 * bytes and scales as that step would give: GEMM1 its token row as it is
 * (the quant step's work), GEMM2 the activation-and-mul of GEMM1's stored
 * gate and up halves (the act step's; Cfg::AQ_ACT, aq_activation).
 * Included after grouped_gemv.cuh by those kernels alone.
 */
#pragma once
#include "grouped_gemv.cuh"
#include "act_quant_wide.cuh"

namespace mt {

/* Row arow of A (lda elements apart) into q (a.K 8-bit values) and scale
 * (one per 128 of them), then a CTA barrier, so that every warp's products
 * can read all of it. With an activation (GEMM2) the row holds a.K gate
 * values and then a.K up values, as act_quant reads GEMM1's output. */
template <class Cfg>
__device__ void quantize_a_row(const mt_gemm_args &a, int64_t arow, unsigned char *q, float *scale)
{
    using T = typename Cfg::T;
    mt_quant_args qa = {};
    qa.in = static_cast<const T *>(a.A) + arow * a.lda;
    qa.q = q;
    qa.scale = scale;
    qa.ld_in = a.lda;
    qa.rows = 1;
    qa.n = a.K;
    qa.row_div = 1;
    act_quant_block_wide<T, typename gemv_shape<Cfg>::Q::Tag, aq_activation<Cfg>(), Cfg::WARPS * 32, 4, true>(
        qa, cta_warps{Cfg::WARPS});
    __syncthreads();
}

/* The n rows of A at arows[0..n) (a GEMM2 that sums a token's slots, whose
 * live slots these are), likewise into q (a.K values a row) and scale
 * ((a.K + 127) / 128 a row), all at once over the CTA's warps, then a
 * CTA barrier. */
template <class Cfg>
__device__ void quantize_a_rows(const mt_gemm_args &a, const int64_t *arows, int n, unsigned char *q,
                                float *scale)
{
    using T = typename Cfg::T;
    mt_quant_args qa = {};
    qa.q = q;
    qa.scale = scale;
    qa.ld_in = a.lda;
    qa.rows = n;
    qa.n = a.K;
    qa.row_div = 1;
    const T *A = static_cast<const T *>(a.A);
    act_quant_block_rows<T, typename gemv_shape<Cfg>::Q::Tag, aq_activation<Cfg>(), Cfg::WARPS * 32, 4, true>(
        qa, cta_warps{Cfg::WARPS}, [&](int r) { return quant_row<T>{A + arows[r] * a.lda, 1.0f}; });
    __syncthreads();
}

/* OQUANT "last" (grouped_gemv.cuh): this CTA's BN / 2 activated columns
 * of `slot` from column nb * BN / 2 lie in one 128-column group g (BN / 2
 * divides 128); the last of the group's CTAs to count in quantizes its
 * columns [128 g, min(128 g + 128, n_half)) of the slot's row, read
 * through L2 (other CTAs wrote them), by the act step's code (ACT none:
 * the row is activated already) into row `slot` of s.act_q and scale g of
 * the slot's in s.act_scale, and re-arms the counter. */
template <class Cfg> __device__ void quantize_group_if_last(const mt_gemv_slot_args &s, int slot, int nb)
{
    using T = typename Cfg::T;
    const mt_gemm_args &a = s.gemm;
    constexpr int COLS = Cfg::BN / 2;
    static_assert(128 % COLS == 0, "a CTA's columns lie in one 128-column group");
    const int n = a.n_half, groups = (n + 127) / 128, g = nb * COLS / 128;
    const int width = min(128, n - 128 * g), of = (width + COLS - 1) / COLS;
    int32_t *count = a.tile_count + (int64_t)slot * groups + g;
    if (!arrive_last<cta_barrier>(count, of, threadIdx.x))
        return;
    mt_quant_args qa = {};
    qa.q = s.act_q + (int64_t)slot * n + 128 * g;
    qa.scale = s.act_scale + (int64_t)slot * groups + g;
    qa.rows = 1;
    qa.n = width;
    qa.row_div = 1;
    const T *row = static_cast<const T *>(a.C) + (int64_t)slot * a.ldc + 128 * g;
    act_quant_block_rows<T, typename gemv_shape<Cfg>::Q::Tag, -1, Cfg::WARPS * 32, 4, true, ldcg_chunks>(
        qa, cta_warps{Cfg::WARPS}, [&](int) { return quant_row<T>{row, 1.0f}; });
    if (threadIdx.x == 0)
        *count = 0;
}

} // namespace mt
