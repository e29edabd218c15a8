/*
 * silu() of mt_device.cuh bit for bit in fewer steps, for the kernels that
 * apply it to many values: the act step's (act_quant_wide.cuh) and the
 * fused GEMM epilogues' (write_tile, gemm_tile.cuh). A header of its own,
 * so that the kernels that include only mt_device.cuh keep their source.
 */
#pragma once
#include "mt_device.cuh"

namespace mt {

/* Eight values, returned by value from the fallbacks out of line below (an
 * array by reference would put the caller's values in local memory). */
struct f8 {
    float v[8];
};

/* silu(x) of mt_device.cuh, bit for bit: its IEEE division x / d, d = 1 +
 * expf(-x), as the division's own fast path computes it (an approximate
 * reciprocal, a Newton step, the quotient and its correction), without the
 * division's range check and branch per value. *slow is set, and the caller
 * then calls silu() itself, where x is outside [-40, 2^64] (below -40 d
 * nears 2^58, above 2^64 and inf or NaN the quotient's steps overflow),
 * where |x| is under 2^-100 (a residual could lose bits), and at zero, so
 * that the quotient is never zero and needs no sign fixed (its magnitude
 * is at least 2^-101); and where d's significand is all ones: there a
 * reciprocal an ulp low makes the Newton step land on a tie. The tests are
 * one flag (& of predicates, no branch per test). tests/test_numeric.cpp
 * checks the steps for every reciprocal within 2 ulps of 1/d (rcp.approx
 * is within one) over every bf16 and fp16 x of the domain;
 * tests/gpu/gpu_numeric.c runs this function against silu() on the GPU for
 * all of them, and the act kernels' chunks (fallback included) for every
 * eight consecutive bf16 and fp16 values. The act step's silu
 * (act_quant_wide.cuh) and the fused GEMM epilogues' (silu8, gemm_tile.cuh)
 * take it. */
__device__ __forceinline__ float silu_steps(float x, bool &slow)
{
    const float d = 1.0f + expf(-x);
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
    r = __fmaf_rn(__fmaf_rn(-d, r, 1.0f), r, r);
    const float q0 = __fmul_rn(x, r);
    const bool fast = (x >= -40.0f) & (x <= 0x1p64f) & (fabsf(x) >= 0x1p-100f) &
                      ((__float_as_uint(d) & 0x7fffffu) != 0x7fffffu);
    slow |= !fast;
    return __fmaf_rn(__fmaf_rn(-d, q0, x), r, q0);
}

/* silu() of eight values: silu8's fallback, out of line. */
__device__ __noinline__ f8 silu8_by_division(f8 g)
{
#pragma unroll
    for (int i = 0; i < 8; i++)
        g.v[i] = silu(g.v[i]);
    return g;
}

/* g = silu(g) for eight values, bit for bit: by silu_steps, with no branch
 * per value (the division's own branch per value kept each value's steps
 * apart in the SASS, and a GEMM1 applying silu so took 98,000 more cycles an
 * SM than the same tile storing its rows: Nsight Compute on an H100,
 * docs/PERFORMANCE.md session 55), and the eight again by silu() out of
 * line where the steps do not apply. */
__device__ __forceinline__ void silu8(float (&g)[8])
{
    bool slow = false;
    float s[8];
#pragma unroll
    for (int i = 0; i < 8; i++)
        s[i] = silu_steps(g[i], slow);
    if (slow) {
        f8 x;
#pragma unroll
        for (int i = 0; i < 8; i++)
            x.v[i] = g[i];
        x = silu8_by_division(x);
#pragma unroll
        for (int i = 0; i < 8; i++)
            s[i] = x.v[i];
    }
#pragma unroll
    for (int i = 0; i < 8; i++)
        g[i] = s[i];
}

} // namespace mt
