/*
 * act_quant's variants with UNITS work units a thread (act_quant.lua): the
 * quantization of act_quant.cuh, value for value, with more loads in
 * flight, and with ARITH "steps" (STEPS) less work per value; ARITH "div"
 * (STEPS false) keeps act_quant.cuh's divisions per value. act_quant.cuh's
 * own kernel takes one unit a thread.
 *
 * - A thread issues the loads of up to UNITS work units before it uses any
 *   of them: 8-value chunks (GRAN 1), chunks of its warp's row per pass
 *   (GRAN 2), passes of 32 chunks over a stretch of its warp's row (GRAN 3,
 *   block_rows). One unit per thread left each thread a chain of load,
 *   reduce, store with nothing to hide the load's latency. GRAN 1 and 3
 *   take fewer than UNITS where the grid has threads to spare: the
 *   launcher gives a small tensor at least a full GPU of CTAs.
 * - x / s costs one IEEE division per scale, for r = 1/s, and three
 *   correctly rounded operations per value (quotient_steps: the correctly
 *   rounded quotient but where it is subnormal, there within an ulp, which
 *   quantizes to the same signed zero), the e4m3 conversion one instruction
 *   per two values; silu's division, the steps of the division's own fast
 *   path without its branch per value (silu_steps). Both give the bytes the
 *   divisions give; a chunk where they do not apply is done again with the
 *   divisions (one branch a chunk, rarely taken), by functions out of line,
 *   so that the loop's code holds the common path alone. GRAN 1 finds a
 *   chunk's row and column by one division per chunk, in 32 bits where it
 *   fits; GRAN 2 walks whole rows, GRAN 3 stretches of rows, each row's
 *   input and router weight worked out once (quant_row_of).
 */
#pragma once
#include "act_quant.cuh"
#include "silu_steps.cuh"

namespace mt {

/* x / s from r = RN(1/s): q0 = RN(x r) is within an ulp of x / s, e = x -
 * q0 s is exact (one fma), and RN(q0 + e r) is the correctly rounded
 * quotient (Markstein's correction; the sign of q0 keeps a zero's sign,
 * -0 + 0 being +0) unless it is subnormal, where it is within an ulp (and
 * quantizes to the same signed zero). It needs r normal and no overflow on the
 * way, which chunk_quotients sees to. Checked against the division over
 * every bf16 and fp16 value and the scales of every bf16 amax
 * (tests/test_numeric.cpp mirrors these steps; tests/gpu/gpu_numeric.c
 * runs chunk_quotients). */
struct divisor {
    float s, r;
    bool fast;   /* s in [2^-64, 2^64]: r normal */
};

__device__ __forceinline__ divisor divisor_of(float s)
{
    const float a = fabsf(s);
    return {s, 1.0f / s, a >= 0x1p-64f && a <= 0x1p64f};
}

__device__ __forceinline__ float quotient_steps(float x, const divisor &d)
{
    const float q0 = __fmul_rn(x, d.r);
    return copysignf(__fmaf_rn(__fmaf_rn(-q0, d.s, x), d.r, q0), q0);
}

/* The chunk's quotients by IEEE divisions: chunk_quotients' fallback, out
 * of line, so that the loop's code is the common path's. */
__device__ __noinline__ f8 quotients_by_division(f8 v, float s)
{
#pragma unroll
    for (int i = 0; i < 8; i++)
        v.v[i] = v.v[i] / s;
    return v;
}

/* q = v / d.s for a chunk, as quantized bytes: by quotient_steps, or by the
 * division for the whole chunk where they may not apply: a scale outside
 * [2^-64, 2^64], or, unless the values are bounded, a quotient that does
 * not come out finite and under 2^10 in magnitude (an inf or NaN value, a
 * static scale far below the values). Bounded: the scale is the amax of
 * values that include these over qmax, so every quotient is at most qmax
 * (a NaN value, which the amax passes over, quantizes as the division's
 * NaN does). */
__device__ __forceinline__ void chunk_quotients(const float (&v)[8], const divisor &d, bool bounded,
                                                float (&q)[8])
{
    bool slow = !d.fast;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        q[i] = quotient_steps(v[i], d);
        if (!bounded)
            slow |= !(fabsf(q[i]) <= 1024.0f);
    }
    if (slow) {
        f8 w;
#pragma unroll
        for (int i = 0; i < 8; i++)
            w.v[i] = v[i];
        w = quotients_by_division(w, d.s);
#pragma unroll
        for (int i = 0; i < 8; i++)
            q[i] = w.v[i];
    }
}

/* silu() of a chunk's eight gate values (two per 32-bit word, as loaded):
 * silu_steps' fallback, out of line. */
template <class T> __device__ __noinline__ f8 silu_by_division(vec8 x)
{
    f8 g;
#pragma unroll
    for (int q = 0; q < 4; q++) {
        g.v[2 * q] = silu(lo_of<T>(x.w[q]));
        g.v[2 * q + 1] = silu(hi_of<T>(x.w[q]));
    }
    return g;
}

/* quantize<Q>(x, s) of mt_device.cuh for two quotients a and b: a in the
 * low byte, b above it (e4m3x2 converts both at once). */
template <class Q> __device__ __forceinline__ uint32_t quantize_pair(float a, float b);
template <> __device__ __forceinline__ uint32_t quantize_pair<s8_tag>(float a, float b)
{
    const uint32_t qa = (uint8_t)(int8_t)min(127, max(-127, __float2int_rn(a)));
    const uint32_t qb = (uint8_t)(int8_t)min(127, max(-127, __float2int_rn(b)));
    return qa | qb << 8;
}
template <> __device__ __forceinline__ uint32_t quantize_pair<e4m3_tag>(float a, float b)
{
    uint16_t r;   /* the first operand goes to the high byte */
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(b), "f"(a));
    return r;
}

/* One chunk (8 values) as loaded: the values, and with an activation the
 * up half; the router weight when the rows carry one. */
struct chunk_raw {
    vec8 x, u;
    float w;
};

/* Row r's input row and (without an activation) router weight: worked out
 * once a row where the chunks of a row go together (a 32-bit division by
 * row_div and a load each, per chunk before). */
template <class T> struct quant_row {
    const T *in;
    float w;
};

template <class T, int ACT>
__device__ __forceinline__ quant_row<T> quant_row_of(const mt_quant_args &a, int r)
{
    quant_row<T> q;
    q.in = static_cast<const T *>(a.in) + (int64_t)(r / a.row_div) * a.ld_in;
    q.w = ACT < 0 && a.row_weight ? a.row_weight[r] : 1.0f;
    return q;
}

/* How chunks are loaded: plain loads (the steps' input, written by the
 * step before), or through L2 (ldcg_chunks: rows that other CTAs of the
 * same kernel wrote). */
struct plain_chunks {
    __device__ __forceinline__ vec8 operator()(const void *p) const { return *reinterpret_cast<const vec8 *>(p); }
};
struct ldcg_chunks {
    __device__ __forceinline__ vec8 operator()(const void *p) const
    {
        vec8 v;
        asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
                     : "l"(p));
        return v;
    }
};

template <class T, int ACT, class Ld = plain_chunks>
__device__ __forceinline__ void load_chunk(const mt_quant_args &a, const quant_row<T> &row, int c, chunk_raw &k,
                                           Ld ld = {})
{
    const T *in = row.in + c * 8;
    k.x = ld(in);
    if constexpr (ACT >= 0)
        k.u = ld(in + a.n);
    else
        k.w = row.w;
}

/* The values the oracle quantizes, rounded as quant_values rounds them;
 * with STEPS silu by silu_steps, the chunk again by silu() where they do
 * not apply. */
template <class T, int ACT, bool STEPS>
__device__ __forceinline__ void chunk_values(const mt_quant_args &a, const chunk_raw &k, float (&v)[8])
{
    if constexpr (ACT == 0 && STEPS) {
        bool slow = false;
        float g[8];
#pragma unroll
        for (int q = 0; q < 4; q++) {
            g[2 * q] = silu_steps(lo_of<T>(k.x.w[q]), slow);
            g[2 * q + 1] = silu_steps(hi_of<T>(k.x.w[q]), slow);
        }
        if (slow) {
            const f8 s = silu_by_division<T>(k.x);
#pragma unroll
            for (int q = 0; q < 8; q++)
                g[q] = s.v[q];
        }
#pragma unroll
        for (int q = 0; q < 4; q++) {
            v[2 * q] = round_to<T>(g[2 * q] * lo_of<T>(k.u.w[q]));
            v[2 * q + 1] = round_to<T>(g[2 * q + 1] * hi_of<T>(k.u.w[q]));
        }
        return;
    }
#pragma unroll
    for (int q = 0; q < 4; q++) {
        if constexpr (ACT >= 0) {   /* silu by the divisions (STEPS false), gelu */
            v[2 * q] = round_to<T>(activate<ACT>(lo_of<T>(k.x.w[q])) * lo_of<T>(k.u.w[q]));
            v[2 * q + 1] = round_to<T>(activate<ACT>(hi_of<T>(k.x.w[q])) * hi_of<T>(k.u.w[q]));
        } else {
            v[2 * q] = lo_of<T>(k.x.w[q]);
            v[2 * q + 1] = hi_of<T>(k.x.w[q]);
            if (a.row_weight) {
                v[2 * q] = round_to<T>(v[2 * q] * k.w);
                v[2 * q + 1] = round_to<T>(v[2 * q + 1] * k.w);
            }
        }
    }
}

/* The chunk's quantized values (bounded: chunk_quotients). */
template <class Q>
__device__ __forceinline__ void store_chunk(const mt_quant_args &a, int r, int c, const float (&v)[8],
                                            const divisor &d, bool bounded)
{
    float q[8];
    chunk_quotients(v, d, bounded, q);
    const uint32_t lo = quantize_pair<Q>(q[0], q[1]) | quantize_pair<Q>(q[2], q[3]) << 16;
    const uint32_t hi = quantize_pair<Q>(q[4], q[5]) | quantize_pair<Q>(q[6], q[7]) << 16;
    uint2 *dst = reinterpret_cast<uint2 *>(a.q + (int64_t)r * a.n + c * 8);
    *dst = make_uint2(lo, hi);
}

/* A scale as the chunks' stores use it: with STEPS its divisor (r = 1/s),
 * else s alone for act_quant.cuh's divisions (quant_store; d is then a
 * placeholder that no store reads). */
template <class Q, bool STEPS> struct chunk_scale {
    float s;
    divisor d;
    __device__ __forceinline__ explicit chunk_scale(float s_) : s(s_), d(STEPS ? divisor_of(s_) : divisor{s_, 0.f, false}) {}
    __device__ __forceinline__ void store(const mt_quant_args &a, int r, int c, const float (&v)[8],
                                          bool bounded) const
    {
        if constexpr (STEPS)
            store_chunk<Q>(a, r, c, v, d, bounded);
        else
            quant_store<Q>(a, r, c, v, s);
    }
};

/* i / n and i % n, in 32 bits when i fits. */
__device__ __forceinline__ void split_index(int64_t i, int n, int &quot, int &rem)
{
    if (i <= 0x7fffffff) {
        quot = (int)((uint32_t)i / (uint32_t)n);
        rem = (int)((uint32_t)i - (uint32_t)quot * (uint32_t)n);
    } else {
        quot = (int)(i / n);
        rem = (int)(i % n);
    }
}

/* GRAN 1, one phase: grid-stride over blocks of THREADS x per chunks,
 * chunk j of a thread THREADS after its chunk j - 1 (coalesced per j). */
template <class T, class Q, int ACT, int THREADS, int UNITS, bool STEPS>
__device__ void act_quant_tensor_wide(const mt_quant_args &a)
{
    const int chunks = a.n / 8;
    const int64_t total = (int64_t)a.rows * chunks;
    const int per = units_per_pass<UNITS>(total, (int64_t)gridDim.x * THREADS);
    const float s = a.phase == 0 ? 0.0f
                    : a.static_scale ? a.static_scale[0]
                                     : act_scale<Q>(__int_as_float(*a.amax));
    const chunk_scale<Q, STEPS> d(s);
    if (a.phase == 1 && blockIdx.x == 0 && threadIdx.x == 0)
        a.scale[0] = s;
    float m = 0.0f;
    for (int64_t base = (int64_t)blockIdx.x * THREADS * per + threadIdx.x; base < total;
         base += (int64_t)gridDim.x * THREADS * per) {
        chunk_raw k[UNITS];
        int row[UNITS], col[UNITS];
        bool ok[UNITS];
#pragma unroll
        for (int j = 0; j < UNITS; j++) {
            const int64_t i = base + (int64_t)j * THREADS;
            split_index(i, chunks, row[j], col[j]);
            ok[j] = j < per && i < total && quant_row_live(a, row[j]);
            if (ok[j])
                load_chunk<T, ACT>(a, quant_row_of<T, ACT>(a, row[j]), col[j], k[j]);
        }
#pragma unroll
        for (int j = 0; j < UNITS; j++) {
            if (!ok[j])
                continue;
            float v[8];
            chunk_values<T, ACT, STEPS>(a, k[j], v);
            if (a.phase == 0)
                m = fmaxf(m, amax8(v));
            else
                d.store(a, row[j], col[j], v, !a.static_scale);
        }
    }
    if (a.phase == 0) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        if ((threadIdx.x & 31) == 0)
            atomicMax(a.amax, __float_as_int(m));
    }
}

/* The chunks of row r that lane `lane` of a warp takes, UNITS chunks apart
 * by 32 per pass, their loads first: f(c, values) for each. */
template <class T, int ACT, int UNITS, bool STEPS, class F>
__device__ __forceinline__ void for_row_chunks(const mt_quant_args &a, int r, int lane, F &&f)
{
    const int chunks = a.n / 8;
    const quant_row<T> row = quant_row_of<T, ACT>(a, r);
    for (int c0 = lane; c0 < chunks; c0 += 32 * UNITS) {
        chunk_raw k[UNITS];
#pragma unroll
        for (int j = 0; j < UNITS; j++)
            if (c0 + 32 * j < chunks)
                load_chunk<T, ACT>(a, row, c0 + 32 * j, k[j]);
#pragma unroll
        for (int j = 0; j < UNITS; j++)
            if (c0 + 32 * j < chunks) {
                float v[8];
                chunk_values<T, ACT, STEPS>(a, k[j], v);
                f(c0 + 32 * j, v);
            }
    }
}

/* GRAN 2: a warp per row; the amax pass, then the quantizing pass (its
 * loads mostly hit the L1). */
template <class T, class Q, int ACT, int THREADS, int UNITS, bool STEPS>
__device__ void act_quant_token_wide(const mt_quant_args &a)
{
    const int lane = threadIdx.x & 31;
    for (int64_t rr = (int64_t)blockIdx.x * (THREADS / 32) + threadIdx.x / 32; rr < a.rows;
         rr += (int64_t)gridDim.x * (THREADS / 32)) {
        const int r = (int)rr;
        const bool live = quant_row_live(a, r);   /* the same for the whole warp */
        float m = 0.0f;
        if (live)
            for_row_chunks<T, ACT, UNITS, STEPS>(a, r, lane,
                                                 [&](int, const float(&v)[8]) { m = fmaxf(m, amax8(v)); });
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        const float s = act_scale<Q>(m);
        const chunk_scale<Q, STEPS> d(s);
        if (live && lane == 0)
            a.scale[r] = s;
        if (live)
            for_row_chunks<T, ACT, UNITS, STEPS>(a, r, lane,
                                                 [&](int c, const float(&v)[8]) { d.store(a, r, c, v, true); });
    }
}

/* GRAN 3: a warp per stretch of UNITS passes of a row, as in act_quant.cuh
 * (block_rows), over the warps w: the grid's, or one CTA's; row_of(r)
 * gives row r's input (quant_row_of: row r / row_div of a.in), loaded by
 * Ld (plain_chunks, ldcg_chunks). */
template <class T, class Q, int ACT, int THREADS, int UNITS, bool STEPS, class Ld = plain_chunks, class Warps,
          class RowOf>
__device__ __forceinline__ void act_quant_block_rows(const mt_quant_args &a, Warps w, RowOf &&row_of)
{
    block_rows<Q, THREADS, UNITS, chunk_raw>(
        a, w, row_of,
        [&](const quant_row<T> &row, int c, chunk_raw &k) { load_chunk<T, ACT>(a, row, c, k, Ld{}); },
        [&](const chunk_raw &k, float(&v)[8]) { chunk_values<T, ACT, STEPS>(a, k, v); },
        [&](int r, int c, const float(&v)[8], float s) { chunk_scale<Q, STEPS>(s).store(a, r, c, v, true); });
}
template <class T, class Q, int ACT, int THREADS, int UNITS, bool STEPS, class Warps>
__device__ void act_quant_block_wide(const mt_quant_args &a, Warps w)
{
    act_quant_block_rows<T, Q, ACT, THREADS, UNITS, STEPS>(a, w, [&](int r) { return quant_row_of<T, ACT>(a, r); });
}

template <class T, class Q, int GRAN, int ACT, int THREADS, int UNITS, bool STEPS = true>
__device__ void act_quant_wide(const mt_quant_args &a)
{
    pdl_enter();
    if constexpr (GRAN == 1)
        act_quant_tensor_wide<T, Q, ACT, THREADS, UNITS, STEPS>(a);
    else if constexpr (GRAN == 2)
        act_quant_token_wide<T, Q, ACT, THREADS, UNITS, STEPS>(a);
    else
        act_quant_block_wide<T, Q, ACT, THREADS, UNITS, STEPS>(a, grid_warps<THREADS>{});
}

} // namespace mt
