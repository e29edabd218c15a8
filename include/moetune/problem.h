/*
 * moetune problem description: what one fused-MoE call computes.
 *
 * Types only plus one validation function; no GPU, no allocation. Shared by
 * the oracle, the generator's pruning, the tuner, the database and the
 * runtime. Tensors are laid out as vLLM lays them out, row-major, densely
 * packed (the innermost dimension is contiguous and rows follow each other).
 *
 * Shapes (M tokens, E experts, topk, K hidden size, N intermediate size):
 *   hidden        [M, K]           element dtype (bf16/fp16)
 *   w1            [local_E, 2N, K] rows 0..N-1 are the gate projection,
 *                                  rows N..2N-1 the up projection
 *   w2            [local_E, K, N]  (local_E == E without expert_map: the
 *                                  weights hold this rank's experts only,
 *                                  indexed by the local id expert_map gives)
 *   topk_ids      [M, topk]        int32 (int64 is refused: MT_ERR_DTYPE)
 *   topk_weights  [M, topk]        fp32
 *   expert_map    [E_global]       int32, global -> local expert id, -1 if the
 *                                  expert is not on this rank (optional)
 *   out           [M, K]           element dtype
 * Batched-experts activation format:
 *   hidden        [E, max_tokens, K], expert_num_tokens int32 [E]
 *   out           [E, max_tokens, K]  (rows >= count[e] are not written)
 *
 * Computation per token t and slot j with e = topk_ids[t, j] (mapped through
 * expert_map; slots whose expert maps to -1 contribute nothing):
 *   x   = hidden[t] (times topk_weights[t, j] if apply_router_weight_on_input)
 *   h   = x * w1[e]^T                       [2N]
 *   a   = act(h[0:N]) * h[N:2N]             [N]   act = silu or gelu (erf)
 *   y   = a * w2[e]^T                       [K]
 *   out[t] = sum_j y * (apply_router_weight_on_input ? 1 : topk_weights[t, j])
 *
 * Quantization (mt_quant_mode) and the scale tensors, all fp32 unless noted:
 *   MT_QUANT_NONE            no scales.
 *   MT_QUANT_*_PER_TENSOR    w1_scale [E], w2_scale [E]; a1_scale [1] and
 *                            a2_scale [1] are static if given, else computed
 *                            dynamically (amax / qmax over the whole tensor).
 *   MT_QUANT_*_PER_TOKEN     w1_scale [E, 2N], w2_scale [E, K] (per output
 *                            channel); activation scales are dynamic, one per
 *                            row (token) of the GEMM input.
 *   MT_QUANT_*_BLOCK         w1_scale [E, ceil(2N/128), ceil(K/128)],
 *                            w2_scale [E, ceil(K/128), ceil(N/128)];
 *                            activation scales dynamic, per row per group of
 *                            128 along the reduction dim: [rows, ceil(K/128)].
 *   For the w8a8 modes the weights are stored quantized: fp8 e4m3 bytes or
 *   int8, dequantized value = q * scale. Activations are quantized
 *   q = sat(rne(x / s)) with s = amax / qmax (qmax 448 for e4m3, 127 int8),
 *   s = 1 when amax is 0; int8 saturates to [-127, 127].
 *   MT_QUANT_W8A16           w1 int8 [E, 2N, K] (uint8 if has_zero_point),
 *                            w1_scale [E, 2N, K/group], optional
 *                            w1_zero [E, 2N, K/group] uint8; w2 likewise.
 *   MT_QUANT_W4A16           w1 packed [E, 2N, K/2] uint8: element k of a row
 *                            is the low nibble of byte k/2 when k is even and
 *                            the high nibble when k is odd, read as unsigned
 *                            0..15; zero point is 8 unless w1_zero is given
 *                            ([E, 2N, K/group] uint8, one zero point a byte).
 *   Weight-only dequantized value = (q - zero) * scale (zero = 0 for signed
 *   int8 without zero points). Activations stay in the element dtype.
 */
#ifndef MOETUNE_PROBLEM_H
#define MOETUNE_PROBLEM_H

#include <stddef.h>
#include <stdint.h>
#include "moetune/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mt_dtype {
    MT_DTYPE_BF16 = 0,
    MT_DTYPE_FP16,
    MT_DTYPE_FP32,
    MT_DTYPE_FP8_E4M3,
    MT_DTYPE_INT8,
    MT_DTYPE_UINT8,
    MT_DTYPE_INT32,
    MT_DTYPE_INT64,
    MT_DTYPE_COUNT_
} mt_dtype;

typedef enum mt_quant_mode {
    MT_QUANT_NONE = 0,
    MT_QUANT_FP8_PER_TENSOR,
    MT_QUANT_FP8_PER_TOKEN,     /* per-token activation x per-channel weight */
    MT_QUANT_FP8_BLOCK,         /* [128,128] weight blocks, 1x128 act groups */
    MT_QUANT_INT8_PER_TENSOR,
    MT_QUANT_INT8_PER_TOKEN,
    MT_QUANT_INT8_BLOCK,
    MT_QUANT_W8A16,
    MT_QUANT_W4A16,
    MT_QUANT_COUNT_
} mt_quant_mode;

typedef enum mt_act_format {
    MT_FORMAT_STANDARD = 0,     /* [M, K] + topk_ids/topk_weights */
    MT_FORMAT_BATCHED,          /* [E, max_tokens, K] + count[E] */
    MT_FORMAT_COUNT_
} mt_act_format;

typedef enum mt_activation {
    MT_ACT_SILU = 0,            /* silu(gate) * up */
    MT_ACT_GELU,                /* gelu_erf(gate) * up */
    MT_ACT_COUNT_
} mt_activation;

/* How tokens are routed to experts when a tool makes its own routing (the
 * tuner, benchmarks, tests); part of a tuned entry's key when asked. */
typedef enum mt_routing {
    MT_ROUTING_UNIFORM = 0,   /* tokens spread uniformly at random */
    MT_ROUTING_BALANCED,      /* every expert gets the same number of rows */
    MT_ROUTING_SKEWED,        /* every token's first slot goes to one hot expert */
    MT_ROUTING_COUNT_
} mt_routing;

/* Block size of the block-wise quant modes, along both weight dims. */
#define MT_QUANT_BLOCK 128

typedef struct mt_quant_config {
    mt_quant_mode mode;
    int group_size;        /* w8a16/w4a16: 32, 64 or 128; else 0 */
    int has_zero_point;    /* w8a16/w4a16 only */
    int static_act_scale;  /* per-tensor modes: a1/a2 scales are given */
} mt_quant_config;

typedef struct mt_problem {
    int64_t M;             /* tokens (standard format) */
    int64_t E;             /* experts (global count: length of expert_map) */
    int64_t topk;
    int64_t K;             /* hidden size */
    int64_t N;             /* intermediate size per shard */
    mt_dtype dtype;        /* element dtype of hidden/out: bf16 or fp16 */
    mt_dtype topk_ids_dtype; /* must be MT_DTYPE_INT32 */
    mt_quant_config quant;
    mt_act_format format;
    mt_activation activation;
    int has_expert_map;
    int64_t local_E;       /* experts on this rank (== E without expert_map) */
    int apply_router_weight_on_input;
    int64_t max_tokens;    /* batched format: rows per expert */
} mt_problem;


/*
 * The tensors of one call. The same struct carries host pointers (oracle)
 * or device pointers (runtime, tuner); each function says which. Pointers
 * that a problem does not use must be NULL. Ownership stays with the caller.
 */
typedef struct mt_moe_tensors {
    const void *hidden;            /* [M, K] or batched [E, max_tokens, K] */
    const void *w1;                /* see quant layout above */
    const void *w2;
    const int32_t *topk_ids;       /* [M, topk] (standard format) */
    const float *topk_weights;     /* [M, topk] (standard format; batched
                                      format uses it in the finalize) */
    const int32_t *expert_map;     /* [E] or NULL */
    const int32_t *expert_num_tokens; /* batched: [local_E] */
    const float *w1_scale, *w2_scale;
    const uint8_t *w1_zero, *w2_zero;
    const float *a1_scale, *a2_scale; /* static per-tensor scales or NULL */
    void *out;                     /* [M, K] or batched [E, max_tokens, K] */
} mt_moe_tensors;

/* Fill *p with a bf16, unquantized, standard-format, silu problem. */
void mt_problem_init(mt_problem *p, int64_t M, int64_t E, int64_t topk,
                     int64_t K, int64_t N);

/*
 * Check a problem for consistency. Returns MT_OK, or the status of the first
 * problem found with a message naming it written to msg (msg may be NULL;
 * the message is always NUL-terminated when msg_size > 0).
 */
mt_status mt_problem_validate(const mt_problem *p, char *msg, size_t msg_size);

/* Size in bytes of one element of dt (0 for unknown). */
size_t mt_dtype_size(mt_dtype dt);

/* Strings at the edges: names used by the CLI, the database and templates. */
const char *mt_dtype_name(mt_dtype dt);              /* "bf16" */
const char *mt_quant_mode_name(mt_quant_mode q);     /* "fp8-block" */
const char *mt_act_format_name(mt_act_format f);     /* "standard" */
const char *mt_activation_name(mt_activation a);     /* "silu" */
/* Parse a name; return MT_ERR_INVALID_ARG for an unknown one. */
mt_status mt_dtype_parse(const char *s, mt_dtype *out);
mt_status mt_quant_mode_parse(const char *s, mt_quant_mode *out);
mt_status mt_act_format_parse(const char *s, mt_act_format *out);
mt_status mt_activation_parse(const char *s, mt_activation *out);
const char *mt_routing_name(mt_routing r);                 /* "uniform" */
mt_status mt_routing_parse(const char *s, mt_routing *out);

/* The dtype weights are stored in for a quant config and element dtype. */
mt_dtype mt_quant_weight_dtype(const mt_quant_config *q, mt_dtype elem);
/* Is this quant mode a w8a8 mode (activations quantized too)? */
int mt_quant_is_w8a8(mt_quant_mode q);

/* Number of bytes of one expert's w1 (or w2 when second != 0) incl. its
 * scales and zero points (activation scales not counted). Meaningful for a
 * problem that validates. */
int64_t mt_problem_weight_bytes(const mt_problem *p, int second);

/*
 * Validation rules beyond the ones implied above (mt_problem_validate checks
 * them in this order and reports the first that fails):
 *   M in [0, MT_MAX_TOKENS] (0 is a valid no-op); E in [1, MT_MAX_EXPERTS];
 *   1 <= topk <= E; K and N >= 8, multiples of 8 (MT_ERR_ALIGNMENT) and at
 *   most MT_MAX_DIM; dtype bf16/fp16; topk_ids_dtype int32 (MT_ERR_DTYPE);
 *   activation, format, quant mode in range; group_size 32/64/128 dividing
 *   K and N for w8a16/w4a16 (w2 is grouped along N) and 0 otherwise;
 *   has_zero_point only for w8a16/w4a16; static_act_scale only for the
 *   per-tensor modes; with has_expert_map 1 <= local_E <= E, otherwise
 *   local_E == E; batched format: max_tokens in [1, MT_MAX_TOKENS].
 * The caps keep every index below 2^31 in the kernels' int32 arithmetic
 * for the per-expert matrices and the token dimension.
 */
#define MT_MAX_EXPERTS 1024
#define MT_MAX_DIM 65536
#define MT_MAX_TOKENS (1 << 20)

/* Scale granularity of a quant mode. */
typedef enum mt_quant_gran {
    MT_GRAN_NONE = 0,   /* no quantization */
    MT_GRAN_TENSOR,     /* one weight scale per expert, one act scale */
    MT_GRAN_TOKEN,      /* per-channel weight scales, per-row act scales */
    MT_GRAN_BLOCK,      /* 128x128 weight blocks, 1x128 act groups */
    MT_GRAN_GROUP       /* weight-only, groups of group_size along the reduction */
} mt_quant_gran;
mt_quant_gran mt_quant_granularity(mt_quant_mode q);
/* Is this a weight-only mode (w8a16, w4a16)? */
int mt_quant_is_weight_only(mt_quant_mode q);
/* The dtype activations are quantized to in a w8a8 mode (fp8e4m3 or int8);
 * MT_DTYPE_COUNT_ for other modes. */
mt_dtype mt_quant_act_dtype(mt_quant_mode q);

#ifdef __cplusplus
}
#endif
#endif
