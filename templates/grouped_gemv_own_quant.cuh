/*
 * The A rows of grouped_gemv's AQ_CTA kernels (AQUANT "cta", grouped_gemv.lua):
 * each CTA quantizes its slot's token row itself, by the act_quant step's
 * block-wise code over the CTA's own warps, so the same bytes and scales as
 * the quant step would give. Included after grouped_gemv.cuh by those
 * kernels alone.
 */
#pragma once
#include "grouped_gemv.cuh"
#include "act_quant_wide.cuh"

namespace mt {

/* Row arow of A (lda elements apart) into q (a.K 8-bit values) and scale
 * (one per 128 of them), then a CTA barrier, so that every warp's products
 * can read all of it. */
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
    act_quant_block_wide<T, typename gemv_shape<Cfg>::Q::Tag, -1, Cfg::WARPS * 32, 4, true>(
        qa, cta_warps{Cfg::WARPS});
    __syncthreads();
}

} // namespace mt
