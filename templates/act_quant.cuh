/*
 * Activation quantization for the w8a8 GEMMs (mt_quant_args in moe_args.h):
 * q = sat(rne(x / s)) with s = amax / qmax (1 when amax is 0), exactly as
 * moetune/numeric.h and the oracle do it, so that the GPU makes the same
 * quantization decisions. x is the value the oracle quantizes, rounded to
 * the element dtype at the same points (router weight on input; act(gate)
 * * up of the GEMM1 output).
 *
 * GRAN 1 (per tensor): grid-stride over 8-element chunks; phase 0 reduces
 * the amax into *amax with an integer atomicMax on the float bits (valid for
 * non-negative floats, and graph-capturable: no host round trip), phase 1
 * quantizes. GRAN 2 (per row): a warp per row, its amax a warp shuffle
 * reduction. GRAN 3 (per row per 128 columns): a 128-column group is 16
 * chunks, held by 16 consecutive lanes, so the group amax is a 16-lane
 * shuffle reduction. Both grid-stride over their units (rows, resp. row
 * groups), so any grid is correct; the launcher sizes it to the units.
 */
#pragma once
#include "mt_device.cuh"

namespace mt {

__device__ __forceinline__ bool quant_row_live(const mt_quant_args &a, int r)
{
    if (a.expert_num_tokens)
        return r % a.max_tokens < a.expert_num_tokens[r / a.max_tokens];
    if (a.sorted.ids)
        return sorted_row_live(a.sorted, r);
    if (a.topk_ids)
        return slot_is_local(a.topk_ids, a.expert_map, a.num_experts, r);
    return true;
}


/* Values of columns 8c..8c+7 of row r, as the oracle rounds them. */
template <class T, int ACT>
__device__ __forceinline__ void quant_values(const mt_quant_args &a, int r, int c, float (&v)[8])
{
    const T *in = static_cast<const T *>(a.in) + (int64_t)(r / a.row_div) * a.ld_in + c * 8;
    const vec8 x = *reinterpret_cast<const vec8 *>(in);
    if constexpr (ACT >= 0) {
        const vec8 u = *reinterpret_cast<const vec8 *>(in + a.n);
#pragma unroll
        for (int q = 0; q < 4; q++) {
            v[2 * q] = round_to<T>(activate<ACT>(lo_of<T>(x.w[q])) * lo_of<T>(u.w[q]));
            v[2 * q + 1] = round_to<T>(activate<ACT>(hi_of<T>(x.w[q])) * hi_of<T>(u.w[q]));
        }
    } else {
        const float w = a.row_weight ? a.row_weight[r] : 1.0f;
#pragma unroll
        for (int q = 0; q < 4; q++) {
            v[2 * q] = lo_of<T>(x.w[q]);
            v[2 * q + 1] = hi_of<T>(x.w[q]);
            if (a.row_weight) {
                v[2 * q] = round_to<T>(v[2 * q] * w);
                v[2 * q + 1] = round_to<T>(v[2 * q + 1] * w);
            }
        }
    }
}

template <class Q> __device__ __forceinline__ float act_scale(float amax)
{
    return amax == 0.0f ? 1.0f : amax / qmax_of<Q>::value;
}

template <class Q>
__device__ __forceinline__ void quant_store(const mt_quant_args &a, int r, int c, const float (&v)[8], float s)
{
    uint32_t lo = 0, hi = 0;
#pragma unroll
    for (int q = 0; q < 4; q++) {
        lo |= (uint32_t)quantize<Q>(v[q], s) << (8 * q);
        hi |= (uint32_t)quantize<Q>(v[q + 4], s) << (8 * q);
    }
    uint32_t *dst = reinterpret_cast<uint32_t *>(a.q + (int64_t)r * a.n + c * 8);
    dst[0] = lo;
    dst[1] = hi;
}

__device__ __forceinline__ float amax8(const float (&v)[8])
{
    float m = 0.0f;
#pragma unroll
    for (int q = 0; q < 8; q++)
        m = fmaxf(m, fabsf(v[q]));
    return m;
}

template <class T, class Q, int GRAN, int ACT, int THREADS> __device__ void act_quant(const mt_quant_args &a)
{
    pdl_enter();
    const int chunks = a.n / 8;
    const int tid = threadIdx.x;
    if constexpr (GRAN == 1) {
        const int64_t total = (int64_t)a.rows * chunks;
        const int64_t stride = (int64_t)gridDim.x * THREADS;
        if (a.phase == 0) {
            float m = 0.0f;
            for (int64_t i = (int64_t)blockIdx.x * THREADS + tid; i < total; i += stride) {
                const int r = (int)(i / chunks), c = (int)(i % chunks);
                if (!quant_row_live(a, r))
                    continue;
                float v[8];
                quant_values<T, ACT>(a, r, c, v);
                m = fmaxf(m, amax8(v));
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
            if ((tid & 31) == 0)
                atomicMax(a.amax, __float_as_int(m));
            return;
        }
        const float s = a.static_scale ? a.static_scale[0] : act_scale<Q>(__int_as_float(*a.amax));
        if (blockIdx.x == 0 && tid == 0)
            a.scale[0] = s;
        for (int64_t i = (int64_t)blockIdx.x * THREADS + tid; i < total; i += stride) {
            const int r = (int)(i / chunks), c = (int)(i % chunks);
            if (!quant_row_live(a, r))
                continue;
            float v[8];
            quant_values<T, ACT>(a, r, c, v);
            quant_store<Q>(a, r, c, v, s);
        }
        return;
    }
    /* Per-row scales: a warp per row (GRAN 2) or 16 lanes per 128-column
     * group of a row (GRAN 3), many rows per CTA and a grid-stride loop, so
     * that short rows (the GEMM2 input, n = N) still keep enough loads in
     * flight. A warp's lanes stay together through the shuffles: lanes
     * past the end or on a row that is not live take part with zeros. */
    constexpr int LANES = GRAN == 2 ? 32 : 16, UNITS_PER_WARP = 32 / LANES;
    const int ng = (a.n + 127) / 128;
    const int64_t per_row = GRAN == 2 ? 1 : ng, units = (int64_t)a.rows * per_row;
    const int64_t stride = (int64_t)gridDim.x * (THREADS / LANES);
    const int sub = tid % LANES;
    for (int64_t first = (int64_t)blockIdx.x * (THREADS / LANES) + (tid >> 5) * UNITS_PER_WARP;
         first < units; first += stride) {
        const int64_t u = first + (tid & 31) / LANES;
        const int r = (int)(u / per_row);
        const bool live = u < units && quant_row_live(a, r);
        if constexpr (GRAN == 2) {
            float m = 0.0f;
            for (int c = sub; live && c < chunks; c += LANES) {
                float v[8];
                quant_values<T, ACT>(a, r, c, v);
                m = fmaxf(m, amax8(v));
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
            const float s = act_scale<Q>(m);
            if (live && sub == 0)
                a.scale[r] = s;
            for (int c = sub; live && c < chunks; c += LANES) {
                float v[8];
                quant_values<T, ACT>(a, r, c, v);
                quant_store<Q>(a, r, c, v, s);
            }
        } else {
            const int g = (int)(u % ng), c = g * 16 + sub;
            const bool ok = live && c < chunks;
            float v[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
            if (ok)
                quant_values<T, ACT>(a, r, c, v);
            float m = amax8(v);
#pragma unroll
            for (int o = 8; o > 0; o >>= 1)   /* within the 16 lanes of one group */
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
            const float s = act_scale<Q>(m);
            if (ok && sub == 0)
                a.scale[(int64_t)r * ng + g] = s;
            if (ok)
                quant_store<Q>(a, r, c, v, s);
        }
    }
}

} // namespace mt
