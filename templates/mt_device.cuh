/*
 * Device primitives shared by every kernel family: element types without
 * the CUDA headers (NVRTC needs none), conversions, cp.async, ldmatrix and
 * mma.sync wrappers. Everything is sm_80+ PTX.
 */
#pragma once
#include "moe_args.h"

namespace mt {

struct bf16 { uint16_t x; };
struct f16 { uint16_t x; };

__device__ __forceinline__ float to_float(bf16 v) { return __uint_as_float((uint32_t)v.x << 16); }
__device__ __forceinline__ float to_float(f16 v)
{
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.x));
    return f;
}

template <class T> __device__ __forceinline__ T from_float(float f);
template <> __device__ __forceinline__ bf16 from_float<bf16>(float f)
{
    uint16_t r;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
    return bf16{r};
}
template <> __device__ __forceinline__ f16 from_float<f16>(float f)
{
    uint16_t r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
    return f16{r};
}

/* x rounded to T and back, as storing and reloading it would. */
template <class T> __device__ __forceinline__ float round_to(float x) { return to_float(from_float<T>(x)); }

/* Pack two floats into one 32-bit register of two elements (lo first). */
template <class T> __device__ __forceinline__ uint32_t pack2(float lo, float hi)
{
    return (uint32_t)from_float<T>(lo).x | ((uint32_t)from_float<T>(hi).x << 16);
}
template <class T> __device__ __forceinline__ float lo_of(uint32_t w) { return to_float(T{(uint16_t)(w & 0xffff)}); }
template <class T> __device__ __forceinline__ float hi_of(uint32_t w) { return to_float(T{(uint16_t)(w >> 16)}); }

struct alignas(16) vec8 { uint32_t w[4]; };   /* 8 sixteen-bit elements */

/* *p += v[0..3] (p 16-byte aligned) as a reduction in global memory: one
 * vector reduction on sm_90, four scalar ones below. Nothing is returned,
 * and the order of the additions of several threads to one place is not
 * fixed. */
__device__ __forceinline__ void red_add4(float *p, const float *v)
{
#if __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "f"(v[0]), "f"(v[1]),
                 "f"(v[2]), "f"(v[3])
                 : "memory");
#else
    for (int i = 0; i < 4; i++)
        atomicAdd(p + i, v[i]);
#endif
}

/* Programmatic dependent launch (sm_90+; no-ops below). The runtime may
 * launch a pipeline step before the step ahead of it on the stream has
 * finished (moe_launch.c). Such a kernel reads nothing another step writes,
 * and writes nothing, before pdl_wait() (which returns once the steps ahead
 * have finished and their writes are visible; at once without such a
 * launch); it calls pdl_launch_dependents() only after pdl_wait(), so that
 * when the next step starts, every step before this one has finished. A
 * family that keeps this protocol says so with MT_PDL_AWARE once in its
 * source: the runtime launches only kernels that carry the mark this way. */
__device__ __forceinline__ void pdl_wait()
{
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents()
{
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
/* The usual start of a step that has nothing to do before its inputs. */
__device__ __forceinline__ void pdl_enter()
{
    pdl_wait();
    pdl_launch_dependents();
}

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }

template <int ACT> __device__ __forceinline__ float activate(float x);
template <> __device__ __forceinline__ float activate<0>(float x) { return silu(x); }
template <> __device__ __forceinline__ float activate<1>(float x) { return gelu_erf(x); }

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16-byte async copy; src_bytes = 0 writes zeros (out-of-range rows). */
__device__ __forceinline__ void cp_async16(void *dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                 "r"(src_bytes));
}
/* The same with an L2 prefetch hint: the L2 fetches the PF-byte aligned
 * block around src from DRAM (PF = 0: no hint; 64, 128 or 256). For weight
 * streams, whose next K step follows in the same rows. */
template <int PF> __device__ __forceinline__ void cp_async16_pf(void *dst, const void *src, int src_bytes)
{
    if constexpr (PF == 256)
        asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
                     "l"(src), "r"(src_bytes));
    else if constexpr (PF == 128)
        asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
                     "l"(src), "r"(src_bytes));
    else if constexpr (PF == 64)
        asm volatile("cp.async.cg.shared.global.L2::64B [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
                     "l"(src), "r"(src_bytes));
    else
        cp_async16(dst, src, src_bytes);
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

/* D = A(16x16, row) * B(16x8, col) + D, fp32 accumulators. */
template <class T> __device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <> __device__ __forceinline__ void mma16816<bf16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <> __device__ __forceinline__ void mma16816<f16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* 8-bit tensor-core MMA, D = A(16x32, row) * B(32x8, col) + D (quant
 * kernels). Fragments, with g = lane / 4 and t = lane % 4: a[0] row g,
 * k 4t..4t+3 (one byte each, lowest k in the lowest byte); a[1] row g+8,
 * same k; a[2] row g, k 16+4t..; a[3] row g+8, k 16+4t..; b0 column g,
 * k 4t..4t+3; b1 column g, k 16+4t..; d as for m16n8k16. Templates, so that
 * a target without fp8 tensor cores (sm_80) never sees the e4m3 form. */
struct e4m3_tag {};
struct s8_tag {};
template <class Q> struct mma8_acc;
template <> struct mma8_acc<e4m3_tag> { using type = float; };
template <> struct mma8_acc<s8_tag> { using type = int; };
template <class Q> __device__ __forceinline__ void mma16832(typename mma8_acc<Q>::type (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <> __device__ __forceinline__ void mma16832<e4m3_tag>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <> __device__ __forceinline__ void mma16832<s8_tag>(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Activation quantizers of moetune/numeric.h: q = sat(rne(x / s)) with an
 * IEEE fp32 division (NVRTC runs without --use_fast_math), never x * (1/s). */
template <class Q> __device__ __forceinline__ uint8_t quantize(float x, float s);
template <> __device__ __forceinline__ uint8_t quantize<s8_tag>(float x, float s)
{
    return (uint8_t)(int8_t)min(127, max(-127, __float2int_rn(x / s)));
}
template <> __device__ __forceinline__ uint8_t quantize<e4m3_tag>(float x, float s)
{
    /* e4m3x2 packs a (first operand) in the high byte, b in the low byte;
     * satfinite: |v| >= 448 -> +-448, NaN -> 0x7F, as __NV_SATFINITE. */
    uint16_t r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(x / s));
    return (uint8_t)(r & 0xff);
}
template <class Q> struct qmax_of;
template <> struct qmax_of<s8_tag> { static constexpr float value = 127.0f; };
template <> struct qmax_of<e4m3_tag> { static constexpr float value = 448.0f; };

/* Why the standard format's routing drops a slot as bad input: the two
 * kinds the error flag tells apart (moe_args.h, mt_align_args.error_flag). */
enum route_fault { ROUTE_OK = 0, ROUTE_BAD_ID = 1, ROUTE_BAD_MAP = 2 };

/* The local expert of a slot, or -1 when it has no rows on this rank: its
 * expert maps to -1 (another rank's), or the input is bad (*fault says
 * which): a topk id outside [0, num_experts), or an expert_map entry
 * outside [-1, local_experts). A bad entry must not count as local: no
 * GEMM computes such a slot, so a step that took it would read rows
 * nothing wrote this call. Without expert_map the local id is the global
 * one; the problem then has local_experts == num_experts (problem.c), so
 * the bound holds, and it keeps every returned id a valid index of the
 * per-expert arrays whatever the arguments. */
__device__ __forceinline__ int32_t slot_expert(const int32_t *topk_ids, const int32_t *expert_map,
                                               int32_t num_experts, int32_t local_experts,
                                               int32_t slot, route_fault *fault)
{
    const int32_t e = topk_ids[slot];
    *fault = ROUTE_OK;
    if (e < 0 || e >= num_experts) {
        *fault = ROUTE_BAD_ID;
        return -1;
    }
    const int32_t le = expert_map ? expert_map[e] : e;
    if (le < -1 || le >= local_experts) {
        *fault = ROUTE_BAD_MAP;
        return -1;
    }
    return le;
}

/* Record a bad slot in the error flag (0 on entry; the first one recorded
 * stays): 1 + slot for a bad topk id, -(1 + slot) for a bad expert_map
 * entry, the encoding mt_moe_read_error decodes (moe_args.h). */
template <int = 0>   /* a template, so that only a kernel that calls it instantiates atomicCAS's
                      * helper global (CUDA 13.0): the other kernels keep their code */
__device__ __forceinline__ void flag_bad_slot(int32_t *flag, route_fault fault, int32_t slot)
{
    if (fault != ROUTE_OK)
        atomicCAS(flag, 0, fault == ROUTE_BAD_ID ? slot + 1 : -(slot + 1));
}

/* Is the slot's expert on this rank? (standard format, rows are slots:
 * the steps after the routing, which leave flagging to it) */
__device__ __forceinline__ bool slot_is_local(const int32_t *topk_ids, const int32_t *expert_map,
                                              int32_t num_experts, int32_t local_experts, int32_t slot)
{
    route_fault fault;
    return slot_expert(topk_ids, expert_map, num_experts, local_experts, slot, &fault) >= 0;
}

/* Rows of a sorted-order intermediate (mt_sorted_rows): how many there can
 * be at most (the padded count), and whether row r holds a slot. */
__device__ __forceinline__ int64_t sorted_rows_used(const mt_sorted_rows &s, int64_t rows)
{
    return s.ids && *s.num_padded < rows ? *s.num_padded : rows;
}
__device__ __forceinline__ bool sorted_row_live(const mt_sorted_rows &s, int64_t r)
{
    return r < *s.num_padded && s.ids[r] < s.num_slots;
}

} // namespace mt

#if __CUDA_ARCH__ >= 900
#define MT_PDL_AWARE extern "C" __device__ int mt_pdl_aware = 1;
#else
#define MT_PDL_AWARE
#endif
