/*
 * Problem names, parsing, validation and weight sizes (moetune/problem.h).
 *
 * May call: libc, common/util.
 */
#include "moetune/problem.h"

#include <string.h>

#include "common/util.h"

static const char *const dtype_names[MT_DTYPE_COUNT_] = {
    "bf16", "fp16", "fp32", "fp8e4m3", "int8", "uint8", "int32", "int64",
};
static const char *const quant_names[MT_QUANT_COUNT_] = {
    "none", "fp8-tensor", "fp8-token", "fp8-block", "int8-tensor",
    "int8-token", "int8-block", "w8a16", "w4a16",
};
static const char *const format_names[MT_FORMAT_COUNT_] = {"standard", "batched"};
static const char *const act_names[MT_ACT_COUNT_] = {"silu", "gelu"};

/* One lookup serves all four enums: index -> name, "unknown" out of range. */
static const char *name_of(const char *const *names, int count, int v)
{
    return v >= 0 && v < count ? names[v] : "unknown";
}

static mt_status parse_name(const char *const *names, int count, const char *s, int *out)
{
    if (!s)
        return MT_ERR_INVALID_ARG;
    for (int i = 0; i < count; i++)
        if (strcmp(names[i], s) == 0) {
            *out = i;
            return MT_OK;
        }
    return MT_ERR_INVALID_ARG;
}

const char *mt_dtype_name(mt_dtype dt) { return name_of(dtype_names, MT_DTYPE_COUNT_, (int)dt); }
const char *mt_quant_mode_name(mt_quant_mode q) { return name_of(quant_names, MT_QUANT_COUNT_, (int)q); }
const char *mt_act_format_name(mt_act_format f) { return name_of(format_names, MT_FORMAT_COUNT_, (int)f); }
const char *mt_activation_name(mt_activation a) { return name_of(act_names, MT_ACT_COUNT_, (int)a); }

/* The parsers of the four enums: name -> value, MT_ERR_INVALID_ARG for an
 * unknown name or a NULL argument. */
#define DEFINE_PARSE(fn, type, names, count)                                     \
    mt_status fn(const char *s, type *out)                                       \
    {                                                                            \
        int v;                                                                   \
        mt_status st = out ? parse_name(names, count, s, &v) : MT_ERR_INVALID_ARG; \
        if (!st)                                                                 \
            *out = (type)v;                                                      \
        return st;                                                               \
    }
DEFINE_PARSE(mt_dtype_parse, mt_dtype, dtype_names, MT_DTYPE_COUNT_)
DEFINE_PARSE(mt_quant_mode_parse, mt_quant_mode, quant_names, MT_QUANT_COUNT_)
DEFINE_PARSE(mt_act_format_parse, mt_act_format, format_names, MT_FORMAT_COUNT_)
DEFINE_PARSE(mt_activation_parse, mt_activation, act_names, MT_ACT_COUNT_)

size_t mt_dtype_size(mt_dtype dt)
{
    switch (dt) {
    case MT_DTYPE_BF16: case MT_DTYPE_FP16: return 2;
    case MT_DTYPE_FP32: case MT_DTYPE_INT32: return 4;
    case MT_DTYPE_FP8_E4M3: case MT_DTYPE_INT8: case MT_DTYPE_UINT8: return 1;
    case MT_DTYPE_INT64: return 8;
    default: return 0;
    }
}

void mt_problem_init(mt_problem *p, int64_t M, int64_t E, int64_t topk, int64_t K, int64_t N)
{
    if (!p)
        return;
    memset(p, 0, sizeof *p);
    p->M = M;
    p->E = E;
    p->topk = topk;
    p->K = K;
    p->N = N;
    p->dtype = MT_DTYPE_BF16;
    p->topk_ids_dtype = MT_DTYPE_INT32;
    p->quant.mode = MT_QUANT_NONE;
    p->format = MT_FORMAT_STANDARD;
    p->activation = MT_ACT_SILU;
    p->local_E = E;
}

int mt_quant_is_w8a8(mt_quant_mode q)
{
    return q >= MT_QUANT_FP8_PER_TENSOR && q <= MT_QUANT_INT8_BLOCK;
}

int mt_quant_is_weight_only(mt_quant_mode q) { return q == MT_QUANT_W8A16 || q == MT_QUANT_W4A16; }

mt_quant_gran mt_quant_granularity(mt_quant_mode q)
{
    switch (q) {
    case MT_QUANT_FP8_PER_TENSOR: case MT_QUANT_INT8_PER_TENSOR: return MT_GRAN_TENSOR;
    case MT_QUANT_FP8_PER_TOKEN: case MT_QUANT_INT8_PER_TOKEN: return MT_GRAN_TOKEN;
    case MT_QUANT_FP8_BLOCK: case MT_QUANT_INT8_BLOCK: return MT_GRAN_BLOCK;
    case MT_QUANT_W8A16: case MT_QUANT_W4A16: return MT_GRAN_GROUP;
    default: return MT_GRAN_NONE;
    }
}

mt_dtype mt_quant_act_dtype(mt_quant_mode q)
{
    switch (q) {
    case MT_QUANT_FP8_PER_TENSOR: case MT_QUANT_FP8_PER_TOKEN: case MT_QUANT_FP8_BLOCK:
        return MT_DTYPE_FP8_E4M3;
    case MT_QUANT_INT8_PER_TENSOR: case MT_QUANT_INT8_PER_TOKEN: case MT_QUANT_INT8_BLOCK:
        return MT_DTYPE_INT8;
    default: return MT_DTYPE_COUNT_;
    }
}

mt_dtype mt_quant_weight_dtype(const mt_quant_config *q, mt_dtype elem)
{
    if (!q)
        return elem;
    if (mt_quant_is_w8a8(q->mode))
        return mt_quant_act_dtype(q->mode);
    if (q->mode == MT_QUANT_W8A16)
        return q->has_zero_point ? MT_DTYPE_UINT8 : MT_DTYPE_INT8;
    if (q->mode == MT_QUANT_W4A16)
        return MT_DTYPE_UINT8;
    return elem;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t mt_problem_weight_bytes(const mt_problem *p, int second)
{
    if (!p)
        return 0;
    /* One expert's matrix is rows x cols, reduced over cols. */
    int64_t rows = second ? p->K : 2 * p->N, cols = second ? p->N : p->K;
    const mt_quant_config *q = &p->quant;
    switch (mt_quant_granularity(q->mode)) {
    case MT_GRAN_NONE:
        return rows * cols * (int64_t)mt_dtype_size(p->dtype);
    case MT_GRAN_TENSOR:
        return rows * cols + 4;
    case MT_GRAN_TOKEN:
        return rows * cols + 4 * rows;
    case MT_GRAN_BLOCK:
        return rows * cols + 4 * ceil_div(rows, MT_QUANT_BLOCK) * ceil_div(cols, MT_QUANT_BLOCK);
    case MT_GRAN_GROUP: {
        int64_t groups = q->group_size > 0 ? rows * (cols / q->group_size) : 0;
        int64_t data = q->mode == MT_QUANT_W4A16 ? rows * cols / 2 : rows * cols;
        return data + 4 * groups + (q->has_zero_point ? groups : 0);
    }
    }
    return 0;
}

static int in_range(int v, int count) { return v >= 0 && v < count; }

mt_status mt_problem_validate(const mt_problem *p, char *msg, size_t msg_size)
{
    if (msg && msg_size)
        msg[0] = '\0';
    if (!p)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "problem is NULL");
    const mt_quant_config *q = &p->quant;
    /* Flags are 0 or 1: other values would not survive a database key
     * (found by fuzzing, RELIABILITY.md R4). */
    const struct { const char *name; int v; } flags[] = {
        {"has_expert_map", p->has_expert_map},
        {"apply_router_weight_on_input", p->apply_router_weight_on_input},
        {"quant.has_zero_point", q->has_zero_point},
        {"quant.static_act_scale", q->static_act_scale}};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (flags[i].v != 0 && flags[i].v != 1)
            return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "%s=%d must be 0 or 1",
                           flags[i].name, flags[i].v);
    if (p->M < 0 || p->M > MT_MAX_TOKENS)
        return mt_errf(msg, msg_size, MT_ERR_SHAPE, "M=%lld must be in [0, %d]", (long long)p->M,
                       MT_MAX_TOKENS);
    if (p->E < 1 || p->E > MT_MAX_EXPERTS)
        return mt_errf(msg, msg_size, MT_ERR_SHAPE, "E=%lld must be in [1, %d]", (long long)p->E,
                       MT_MAX_EXPERTS);
    if (p->topk < 1)
        return mt_errf(msg, msg_size, MT_ERR_SHAPE, "topk=%lld must be >= 1", (long long)p->topk);
    if (p->topk > p->E)
        return mt_errf(msg, msg_size, MT_ERR_SHAPE, "topk=%lld exceeds E=%lld",
                       (long long)p->topk, (long long)p->E);
    if (p->K < 8 || p->K % 8)
        return mt_errf(msg, msg_size, MT_ERR_ALIGNMENT, "K=%lld must be a multiple of 8 (>= 8)",
                       (long long)p->K);
    if (p->N < 8 || p->N % 8)
        return mt_errf(msg, msg_size, MT_ERR_ALIGNMENT, "N=%lld must be a multiple of 8 (>= 8)",
                       (long long)p->N);
    if (p->K > MT_MAX_DIM || p->N > MT_MAX_DIM)
        return mt_errf(msg, msg_size, MT_ERR_SHAPE, "K=%lld and N=%lld must be <= %d",
                       (long long)p->K, (long long)p->N, MT_MAX_DIM);
    if (p->dtype != MT_DTYPE_BF16 && p->dtype != MT_DTYPE_FP16)
        return mt_errf(msg, msg_size, MT_ERR_DTYPE, "element dtype must be bf16 or fp16 (got %s)",
                       mt_dtype_name(p->dtype));
    if (p->topk_ids_dtype != MT_DTYPE_INT32)
        return mt_errf(msg, msg_size, MT_ERR_DTYPE,
                       "topk_ids must be int32 (%s is not accepted; convert the tensor)",
                       mt_dtype_name(p->topk_ids_dtype));
    if (!in_range((int)p->activation, MT_ACT_COUNT_))
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "activation=%d is not a known activation",
                       (int)p->activation);
    if (!in_range((int)p->format, MT_FORMAT_COUNT_))
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "format=%d is not a known activation format",
                       (int)p->format);
    if (!in_range((int)q->mode, MT_QUANT_COUNT_))
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "quant mode=%d is not a known quant mode",
                       (int)q->mode);
    const char *qn = mt_quant_mode_name(q->mode);
    if (mt_quant_is_weight_only(q->mode)) {
        if (q->group_size != 32 && q->group_size != 64 && q->group_size != 128)
            return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                           "quant %s needs group_size 32, 64 or 128 (got %d)", qn, q->group_size);
        if (p->K % q->group_size)
            return mt_errf(msg, msg_size, MT_ERR_ALIGNMENT, "K=%lld is not a multiple of group_size=%d",
                           (long long)p->K, q->group_size);
        if (p->N % q->group_size)
            return mt_errf(msg, msg_size, MT_ERR_ALIGNMENT,
                           "N=%lld is not a multiple of group_size=%d (w2 is grouped along N)",
                           (long long)p->N, q->group_size);
    } else if (q->group_size != 0) {
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                       "group_size=%d is only for w8a16/w4a16 (quant %s needs 0)", q->group_size, qn);
    }
    if (q->has_zero_point && !mt_quant_is_weight_only(q->mode))
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                       "has_zero_point is only for w8a16/w4a16 (quant %s)", qn);
    if (q->static_act_scale && mt_quant_granularity(q->mode) != MT_GRAN_TENSOR)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                       "static_act_scale is only for per-tensor quant modes (quant %s)", qn);
    if (p->has_expert_map) {
        if (p->local_E < 1 || p->local_E > p->E)
            return mt_errf(msg, msg_size, MT_ERR_SHAPE,
                           "local_E=%lld must be in [1, E=%lld] with an expert_map",
                           (long long)p->local_E, (long long)p->E);
    } else if (p->local_E != p->E) {
        return mt_errf(msg, msg_size, MT_ERR_SHAPE,
                       "local_E=%lld must equal E=%lld without an expert_map",
                       (long long)p->local_E, (long long)p->E);
    }
    if (p->format == MT_FORMAT_BATCHED && (p->max_tokens < 1 || p->max_tokens > MT_MAX_TOKENS))
        return mt_errf(msg, msg_size, MT_ERR_SHAPE, "max_tokens=%lld must be in [1, %d] in the batched format",
                       (long long)p->max_tokens, MT_MAX_TOKENS);
    return MT_OK;
}

const char *mt_routing_name(mt_routing r)
{
    static const char *const names[MT_ROUTING_COUNT_] = {"uniform", "balanced", "skewed"};
    return (unsigned)r < MT_ROUTING_COUNT_ ? names[r] : "unknown";
}

mt_status mt_routing_parse(const char *s, mt_routing *out)
{
    for (int i = 0; s && out && i < MT_ROUTING_COUNT_; i++)
        if (strcmp(s, mt_routing_name((mt_routing)i)) == 0) {
            *out = (mt_routing)i;
            return MT_OK;
        }
    return MT_ERR_INVALID_ARG;
}
