/*
 * moetune numerics: bit-exact host versions of the CUDA conversions the
 * kernels use, and the activation quantizers, so that the CPU oracle, the
 * tuner's checks and the GPU kernels round the same way.
 *
 * Conversions (all round-to-nearest-even, no dependence on the FP mode):
 *   float -> bf16    as __float2bfloat16: any NaN -> 0x7FFF.
 *   float -> fp16    as __float2half: subnormals kept, |x| >= 65520 -> inf,
 *                    any NaN -> 0x7FFF.
 *   float -> e4m3    as __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3):
 *                    |x| >= 448 (inf included) -> +-448 (0x7E / 0xFE),
 *                    any NaN -> 0x7F, |x| <= 2^-10 -> signed zero.
 *   bf16 -> float    exact (the NaN payload is kept: bits << 16).
 *   fp16 -> float    exact; any NaN -> 0x7FFFFFFF (as CUDA's host code).
 *   e4m3 -> float    exact; 0x7F and 0xFF (NaN) -> 0x7FFFFFFF.
 *
 * Activation quantization (what the GPU quantize kernels must do):
 *   s     = amax / qmax as an fp32 division (qmax 448 for e4m3, 127 for
 *           int8); s = 1 when amax == 0 (so an all-zero row stays zero).
 *   int8  q = clamp(rint(x / s), -127, 127), x / s an fp32 division and
 *           rint in round-to-nearest-even (NaN never reaches it: a NaN
 *           input gives 0).
 *   e4m3  q = e4m3_satfinite(x / s), x / s an fp32 division.
 *   Never x * (1 / s): the reciprocal rounds differently.
 *   Device equivalents (checked bit for bit by tests/gpu/gpu_numeric.c,
 *   compiled by NVRTC without --use_fast_math so division is IEEE):
 *     s  = amax == 0.0f ? 1.0f : amax / 448.0f   (or / 127.0f)
 *     q8 = (signed char)min(127, max(-127, __float2int_rn(x / s)))
 *     qf = __nv_cvt_float_to_fp8(x / s, __NV_SATFINITE, __NV_E4M3)
 *
 * May call: libc/libm. Called by: the oracle, the tuner, the tests.
 */
#ifndef MOETUNE_NUMERIC_H
#define MOETUNE_NUMERIC_H

#include <stddef.h>
#include <stdint.h>
#include "moetune/problem.h"
#include "moetune/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MT_E4M3_MAX 448.0f
#define MT_INT8_QMAX 127.0f

uint16_t mt_f32_to_bf16(float x);
float mt_bf16_to_f32(uint16_t b);
uint16_t mt_f32_to_f16(float x);
float mt_f16_to_f32(uint16_t h);
uint8_t mt_f32_to_e4m3(float x);
float mt_e4m3_to_f32(uint8_t v);

/* x rounded to element dtype dt (bf16 or fp16) and back; other dtypes: x. */
float mt_round_elem(float x, mt_dtype dt);

/* Dynamic activation scale for amax (>= 0): amax / qmax, or 1 when amax is
 * 0. qdt is MT_DTYPE_FP8_E4M3 or MT_DTYPE_INT8. */
float mt_act_scale(float amax, mt_dtype qdt);
/* Quantize x with scale s (see the header comment). */
int8_t mt_quant_int8(float x, float s);
uint8_t mt_quant_e4m3(float x, float s);
/* The quantized value q(x / s) as a float (exact in fp32), for qdt e4m3 or
 * int8. */
float mt_quant_value(float x, float s, mt_dtype qdt);

/* Activation functions as the oracle computes them in fp32:
 * silu(x) = x / (1 + expf(-x)), gelu(x) = 0.5 x (1 + erff(x / sqrt(2))). */
float mt_silu(float x);
float mt_gelu(float x);

/* Convert n elements of dtype dt at src to float (bf16, fp16, fp32, e4m3,
 * int8, uint8, int32; int64 is MT_ERR_DTYPE). */
mt_status mt_to_float(const void *src, mt_dtype dt, size_t n, float *dst);
/* Convert n floats to dtype dt (bf16, fp16, fp32, e4m3 satfinite; int8,
 * uint8, int32 by rint with saturation). MT_ERR_DTYPE for int64. */
mt_status mt_from_float(const float *src, size_t n, mt_dtype dt, void *dst);

#ifdef __cplusplus
}
#endif
#endif
