/*
 * Expert parallelism: the device side of the EP prepare/finalize
 * (runtime/ep.c, docs/EP.md). Three ops over one argument struct:
 *
 *  pack     one CTA per token: for every rank owning one of the token's
 *           topk experts, take the next row of that peer's send slot
 *           (atomicAdd on send_count[peer]), write the token's topk ids and
 *           weights there and its row, as is (WIRE 0) or quantized (fp8/int8,
 *           per row or per 128 columns, the act_quant rules, so that the
 *           experts' own quantization of the received row gives the same
 *           bytes). send_row[t * world + peer] = row or -1 for the combine.
 *           A row over the capacity is not written and flagged.
 *  unpack   one CTA per gathered row R = peer * cap + i: rows i < the
 *           peer's count are copied (dequantized to the element dtype) to
 *           x[R] with their ids and weights; padding rows get zeros and the
 *           padding id (an expert the map sends to -1), so the experts skip
 *           them.
 *  combine  out[t] = sum over peers of ret[peer * cap + send_row[t, peer]]
 *           in fp32, rounded once (the rows are the experts' weighted sums).
 *
 * The host includes this file with MT_EP_ARGS_ONLY defined to get the
 * argument struct alone.
 */
#pragma once
#include "moe_args.h"

typedef struct mt_ep_args {
    /* pack */
    const void *hidden;          /* [M, K] element dtype */
    const int32_t *topk_ids;     /* [M, topk] global ids */
    const float *topk_weights;   /* [M, topk] */
    const int32_t *expert_rank;  /* [num_experts] owner of each expert */
    uint8_t *send;               /* [world] slots of slot_bytes */
    int32_t *send_count;         /* [world], zero on entry */
    int32_t *send_row;           /* [M, world] */
    int32_t *error_flags;        /* [2], zero on entry */
    /* unpack */
    const uint8_t *recv;         /* [world] slots */
    const int32_t *recv_count;   /* [world] rows each peer sent (may exceed cap) */
    void *x;                     /* [world * cap, K] element dtype */
    int32_t *x_ids;              /* [world * cap, topk] */
    float *x_weights;            /* [world * cap, topk] */
    /* combine */
    const void *ret;             /* [world * cap, K] element dtype */
    void *out;                   /* [M, K] */
    /* slot layout (bytes from a slot's start) */
    int64_t slot_bytes, slot_ids, slot_weights, slot_scales, slot_rows;
    int64_t K;
    int32_t M;
    int32_t topk;
    int32_t num_experts;
    int32_t world;
    int32_t cap;
    int32_t pad_id;              /* id carried by padding rows */
} mt_ep_args;

#ifndef MT_EP_ARGS_ONLY
#include "act_quant.cuh"

namespace mt {

/* e4m3 / int8 byte -> float, for every arch (no fp8 conversion op). */
__device__ __forceinline__ float e4m3_to_float(uint8_t b)
{
    const int e = (b >> 3) & 15, m = b & 7;
    float v = e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), e - 10);
    if (e == 15 && m == 7)
        v = __int_as_float(0x7fc00000);   /* NaN */
    return b & 0x80 ? -v : v;
}
template <class Q> __device__ __forceinline__ float dequant_byte(uint8_t b);
template <> __device__ __forceinline__ float dequant_byte<e4m3_tag>(uint8_t b) { return e4m3_to_float(b); }
template <> __device__ __forceinline__ float dequant_byte<s8_tag>(uint8_t b) { return (float)(int8_t)b; }

/* WIRE: 0 elem, 1 per-row scale, 2 per-128-column scales. */
template <class T, class Q, int WIRE, int THREADS> __device__ void ep_pack(const mt_ep_args &a)
{
    __shared__ int rows_s[64];
    __shared__ float red[THREADS / 32];
    const int chunks = (int)(a.K / 8), tid = threadIdx.x;
    for (int t = blockIdx.x; t < a.M; t += gridDim.x) {
        if (tid == 0)
            for (int j = 0; j < a.topk; j++) {
                const int e = a.topk_ids[(int64_t)t * a.topk + j];
                if (e < 0 || e >= a.num_experts)
                    atomicCAS(&a.error_flags[0], 0, t * a.topk + j + 1);
            }
        if (tid < a.world) {
            const int p = tid;
            bool need = false;
            for (int j = 0; j < a.topk && !need; j++) {
                const int e = a.topk_ids[(int64_t)t * a.topk + j];
                need = e >= 0 && e < a.num_experts && a.expert_rank[e] == p;
            }
            int row = -1;
            if (need) {
                row = atomicAdd(&a.send_count[p], 1);
                if (row >= a.cap) {
                    atomicCAS(&a.error_flags[1], 0, t * a.world + p + 1);
                    row = -1;
                }
            }
            if (row >= 0) {
                uint8_t *slot = a.send + p * a.slot_bytes;
                int32_t *ids = reinterpret_cast<int32_t *>(slot + a.slot_ids) + (int64_t)row * a.topk;
                float *w = reinterpret_cast<float *>(slot + a.slot_weights) + (int64_t)row * a.topk;
                for (int j = 0; j < a.topk; j++) {
                    ids[j] = a.topk_ids[(int64_t)t * a.topk + j];
                    w[j] = a.topk_weights[(int64_t)t * a.topk + j];
                }
            }
            a.send_row[(int64_t)t * a.world + p] = row;
            rows_s[p] = row;
        }
        __syncthreads();
        const vec8 *src = reinterpret_cast<const vec8 *>(static_cast<const T *>(a.hidden) + (int64_t)t * a.K);
        if constexpr (WIRE == 0) {
            for (int p = 0; p < a.world; p++) {
                const int row = rows_s[p];
                if (row < 0)
                    continue;
                vec8 *dst = reinterpret_cast<vec8 *>(a.send + p * a.slot_bytes + a.slot_rows +
                                                     (int64_t)row * a.K * (int64_t)sizeof(T));
                for (int c = tid; c < chunks; c += THREADS)
                    dst[c] = src[c];
            }
        } else {
            /* The row's scale(s), then its bytes, written to every peer
             * that takes the token (same values for all). */
            const int ng = (int)((a.K + 127) / 128);
            float s_row = 1.0f;
            if constexpr (WIRE == 1) {
                float m = 0.0f;
                for (int c = tid; c < chunks; c += THREADS) {
                    const vec8 x = src[c];
                    float v[8];
#pragma unroll
                    for (int q = 0; q < 4; q++) {
                        v[2 * q] = lo_of<T>(x.w[q]);
                        v[2 * q + 1] = hi_of<T>(x.w[q]);
                    }
                    m = fmaxf(m, amax8(v));
                }
#pragma unroll
                for (int o = 16; o > 0; o >>= 1)
                    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
                if ((tid & 31) == 0)
                    red[tid >> 5] = m;
                __syncthreads();
                m = 0.0f;
#pragma unroll
                for (int w = 0; w < THREADS / 32; w++)
                    m = fmaxf(m, red[w]);
                s_row = act_scale<Q>(m);
            }
            for (int c0 = 0; c0 < chunks; c0 += THREADS) {
                const int c = c0 + tid;
                const bool ok = c < chunks;
                float v[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
                if (ok) {
                    const vec8 x = src[c];
#pragma unroll
                    for (int q = 0; q < 4; q++) {
                        v[2 * q] = lo_of<T>(x.w[q]);
                        v[2 * q + 1] = hi_of<T>(x.w[q]);
                    }
                }
                float s = s_row;
                if constexpr (WIRE == 2) {
                    float m = amax8(v);
#pragma unroll
                    for (int o = 8; o > 0; o >>= 1)   /* the 16 lanes of one 128-column group */
                        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
                    s = act_scale<Q>(m);
                }
                uint32_t lo = 0, hi = 0;
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    lo |= (uint32_t)quantize<Q>(v[q], s) << (8 * q);
                    hi |= (uint32_t)quantize<Q>(v[q + 4], s) << (8 * q);
                }
                for (int p = 0; p < a.world && ok; p++) {
                    const int row = rows_s[p];
                    if (row < 0)
                        continue;
                    uint8_t *slot = a.send + p * a.slot_bytes;
                    uint32_t *dst = reinterpret_cast<uint32_t *>(slot + a.slot_rows + (int64_t)row * a.K + c * 8);
                    dst[0] = lo;
                    dst[1] = hi;
                    float *sc = reinterpret_cast<float *>(slot + a.slot_scales);
                    if (WIRE == 2 && c % 16 == 0)
                        sc[(int64_t)row * ng + c / 16] = s;
                    if (WIRE == 1 && c == 0)
                        sc[row] = s;
                }
            }
        }
        __syncthreads();   /* rows_s and red are rewritten by the next token */
    }
}

template <class T, class Q, int WIRE, int THREADS> __device__ void ep_unpack(const mt_ep_args &a)
{
    const int chunks = (int)(a.K / 8), tid = threadIdx.x;
    const int ng = (int)((a.K + 127) / 128);
    const int64_t rows = (int64_t)a.world * a.cap;
    for (int64_t R = blockIdx.x; R < rows; R += gridDim.x) {
        const int p = (int)(R / a.cap), i = (int)(R % a.cap);
        const bool live = i < min(a.recv_count[p], a.cap);
        const uint8_t *slot = a.recv + p * a.slot_bytes;
        for (int j = tid; j < a.topk; j += THREADS) {
            a.x_ids[R * a.topk + j] = live ? reinterpret_cast<const int32_t *>(slot + a.slot_ids)[(int64_t)i * a.topk + j] : a.pad_id;
            a.x_weights[R * a.topk + j] = live ? reinterpret_cast<const float *>(slot + a.slot_weights)[(int64_t)i * a.topk + j] : 0.0f;
        }
        vec8 *dst = reinterpret_cast<vec8 *>(static_cast<T *>(a.x) + R * a.K);
        for (int c = tid; c < chunks; c += THREADS) {
            vec8 o = {{0u, 0u, 0u, 0u}};
            if (live) {
                if constexpr (WIRE == 0) {
                    o = reinterpret_cast<const vec8 *>(slot + a.slot_rows + (int64_t)i * a.K * (int64_t)sizeof(T))[c];
                } else {
                    const float *sc = reinterpret_cast<const float *>(slot + a.slot_scales);
                    const float s = WIRE == 1 ? sc[i] : sc[(int64_t)i * ng + c / 16];
                    const uint32_t *src = reinterpret_cast<const uint32_t *>(slot + a.slot_rows + (int64_t)i * a.K + c * 8);
                    const uint32_t b[2] = {src[0], src[1]};
#pragma unroll
                    for (int q = 0; q < 4; q++) {
                        const int k = 2 * q;
                        const uint8_t b0 = (uint8_t)(b[k / 4] >> (8 * (k % 4)));
                        const uint8_t b1 = (uint8_t)(b[(k + 1) / 4] >> (8 * ((k + 1) % 4)));
                        o.w[q] = pack2<T>(dequant_byte<Q>(b0) * s, dequant_byte<Q>(b1) * s);
                    }
                }
            }
            dst[c] = o;
        }
    }
}

template <class T> __device__ void ep_combine(const mt_ep_args &a)
{
    const int chunks = (int)(a.K / 8);
    const int64_t total = (int64_t)a.M * chunks;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (int64_t)gridDim.x * blockDim.x) {
        const int t = (int)(idx / chunks), c = (int)(idx % chunks);
        float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        for (int p = 0; p < a.world; p++) {
            const int row = a.send_row[(int64_t)t * a.world + p];
            if (row < 0)
                continue;
            const vec8 y = *reinterpret_cast<const vec8 *>(static_cast<const T *>(a.ret) +
                                                           ((int64_t)p * a.cap + row) * a.K + c * 8);
#pragma unroll
            for (int q = 0; q < 4; q++) {
                acc[2 * q] += lo_of<T>(y.w[q]);
                acc[2 * q + 1] += hi_of<T>(y.w[q]);
            }
        }
        vec8 o;
#pragma unroll
        for (int q = 0; q < 4; q++)
            o.w[q] = pack2<T>(acc[2 * q], acc[2 * q + 1]);
        *reinterpret_cast<vec8 *>(static_cast<T *>(a.out) + (int64_t)t * a.K + c * 8) = o;
    }
}

} // namespace mt
#endif
