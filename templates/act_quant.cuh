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
 * reduction. GRAN 3 (per row per 128 columns): a warp per stretch of a
 * row (block_rows), a pass of it 32 consecutive chunks, two 128-column
 * groups of 16 chunks held by 16 consecutive lanes each, so that a group's
 * amax is a 16-lane shuffle reduction. Both grid-stride over their units
 * (rows, resp. stretches), so any grid is correct; the launcher gives a
 * warp a unit.
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
        return slot_is_local(a.topk_ids, a.expert_map, a.num_experts, a.local_experts, r);
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

/* Units a taker (a thread, or a warp in block_rows) takes at once: UNITS,
 * or fewer where the grid has more takers than that needs (the launcher
 * gives a small tensor more CTAs, runtime/moe_launch.c), at least one. */
template <int UNITS> __device__ __forceinline__ int units_per_pass(int64_t units, int64_t takers)
{
    const int64_t per = (units + takers - 1) / takers;
    return per < 1 ? 1 : per > UNITS ? UNITS : (int)per;
}

/* A chunk's values, as one unit of block_rows. */
struct chunk_values8 {
    float v[8];
};

/* GRAN 3: a warp takes stretches of a row (grid-stride over them; a
 * stretch of a row that is not live skipped by the whole warp), so that the
 * row's index, liveness and input row are worked out once a stretch, not
 * once a chunk, while a short batch of long rows still spreads over many
 * warps. A pass is 32 consecutive chunks: lanes 0-15 hold one 128-column
 * group, lanes 16-31 the next, and a group's amax is a shuffle within its
 * 16 lanes. A stretch is up to UNITS passes, fewer where the grid has warps
 * to spare (units_per_pass; the launcher gives a small batch at least a
 * full GPU of CTAs), their loads issued first. row_of(r) works out what a
 * row's chunks share (once a stretch), load(row, c, unit) loads chunk c of
 * that row into a Unit, values(unit, v) gives its 8 values, store(r, c, v,
 * s) quantizes them with the group's scale s; lanes past the row's end
 * take part in the shuffles with zeros. The walk is shared by the warps
 * of `w`: every warp of the grid (grid_warps, the quant step), or the warps
 * of one CTA (cta_warps: a decode GEMM that quantizes its own A row,
 * grouped_gemv.cuh); first() is this warp's place among them, count() how
 * many they are. */
template <int THREADS> struct grid_warps {
    __device__ __forceinline__ int64_t first() const
    {
        return (int64_t)blockIdx.x * (THREADS / 32) + threadIdx.x / 32;
    }
    __device__ __forceinline__ int64_t count() const { return (int64_t)gridDim.x * (THREADS / 32); }
};
struct cta_warps {
    int warps;
    __device__ __forceinline__ int64_t first() const { return threadIdx.x / 32; }
    __device__ __forceinline__ int64_t count() const { return warps; }
};

template <class Q, int THREADS, int UNITS, class Unit, class Warps, class RowOf, class Load, class Values,
          class Store>
__device__ __forceinline__ void block_rows(const mt_quant_args &a, Warps w, RowOf &&row_of, Load &&load,
                                           Values &&values, Store &&store)
{
    const int lane = threadIdx.x & 31, chunks = a.n / 8, ng = (a.n + 127) / 128;
    const int passes = (chunks + 31) / 32;
    const int64_t warps = w.count();
    const int per = units_per_pass<UNITS>((int64_t)a.rows * passes, warps);
    const int stretches = (passes + per - 1) / per;
    const int64_t total = (int64_t)a.rows * stretches;
    for (int64_t i = w.first(); i < total; i += warps) {
        const int r = (int)(i / stretches), p0 = (int)(i - (int64_t)r * stretches) * 32 * per;
        if (!quant_row_live(a, r))   /* the same for the whole warp */
            continue;
        const auto row = row_of(r);
        Unit k[UNITS];
#pragma unroll
        for (int j = 0; j < UNITS; j++)
            if (j < per && p0 + 32 * j + lane < chunks)
                load(row, p0 + 32 * j + lane, k[j]);
#pragma unroll
        for (int j = 0; j < UNITS; j++) {
            if (j >= per || p0 + 32 * j >= chunks)   /* the same for the whole warp */
                break;
            const int c = p0 + 32 * j + lane;
            float v[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
            if (c < chunks)
                values(k[j], v);
            float m = amax8(v);
#pragma unroll
            for (int o = 8; o > 0; o >>= 1)   /* within the 16 lanes of one group */
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
            const float s = act_scale<Q>(m);
            if (c < chunks) {
                if ((lane & 15) == 0)
                    a.scale[(int64_t)r * ng + c / 16] = s;
                store(r, c, v, s);
            }
        }
    }
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
    if constexpr (GRAN == 3) {
        block_rows<Q, THREADS, 1, chunk_values8>(
            a, grid_warps<THREADS>{}, [](int r) { return r; },
            [&](int r, int c, chunk_values8 &k) { quant_values<T, ACT>(a, r, c, k.v); },
            [](const chunk_values8 &k, float(&v)[8]) {
#pragma unroll
                for (int q = 0; q < 8; q++)
                    v[q] = k.v[q];
            },
            [&](int r, int c, const float(&v)[8], float s) { quant_store<Q>(a, r, c, v, s); });
        return;
    }
    /* GRAN 2: a warp per row, many rows per CTA and a grid-stride loop, so
     * that short rows (the GEMM2 input, n = N) still keep enough loads in
     * flight. */
    const int lane = tid & 31;
    for (int64_t rr = (int64_t)blockIdx.x * (THREADS / 32) + (tid >> 5); rr < a.rows;
         rr += (int64_t)gridDim.x * (THREADS / 32)) {
        const int r = (int)rr;
        if (!quant_row_live(a, r))   /* the same for the whole warp */
            continue;
        float m = 0.0f;
        for (int c = lane; c < chunks; c += 32) {
            float v[8];
            quant_values<T, ACT>(a, r, c, v);
            m = fmaxf(m, amax8(v));
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        const float s = act_scale<Q>(m);
        if (lane == 0)
            a.scale[r] = s;
        for (int c = lane; c < chunks; c += 32) {
            float v[8];
            quant_values<T, ACT>(a, r, c, v);
            quant_store<Q>(a, r, c, v, s);
        }
    }
}

} // namespace mt
