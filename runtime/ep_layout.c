/*
 * Expert parallelism: routing arithmetic (moetune/ep.h) and buffer layouts
 * (runtime/ep_layout.h). CPU only.
 *
 * May call: common.
 */
#include "runtime/ep_layout.h"

#include <stdint.h>
#include <string.h>

#include "common/util.h"

static int args_ok(int64_t E, int world, int rank)
{
    return world >= 1 && world <= MT_EP_MAX_RANKS && rank >= 0 && rank < world && E >= world &&
           E <= MT_MAX_EXPERTS;
}

mt_status mt_ep_expert_range(int64_t E, int world, int rank, int64_t *first, int64_t *count)
{
    if (!first || !count || !args_ok(E, world, rank))
        return MT_ERR_INVALID_ARG;
    const int64_t base = E / world, extra = E % world;
    *count = base + (rank < extra);
    *first = rank * base + (rank < extra ? rank : extra);
    return MT_OK;
}

int mt_ep_expert_owner(int64_t E, int world, int64_t e)
{
    if (!args_ok(E, world, 0) || e < 0 || e >= E)
        return -1;
    const int64_t base = E / world, extra = E % world;
    /* The first `extra` ranks hold base + 1 experts each. */
    if (e < extra * (base + 1))
        return (int)(e / (base + 1));
    return (int)(extra + (e - extra * (base + 1)) / base);
}

mt_status mt_ep_expert_map(int64_t E, int world, int rank, int32_t *map)
{
    int64_t first, count;
    if (!map || mt_ep_expert_range(E, world, rank, &first, &count))
        return MT_ERR_INVALID_ARG;
    for (int64_t e = 0; e < E; e++)
        map[e] = e >= first && e < first + count ? (int32_t)(e - first) : -1;
    return MT_OK;
}

mt_status mt_ep_inner_map(int64_t E, int world, int rank, int32_t *map)
{
    mt_status st = mt_ep_expert_map(E, world, rank, map);
    if (!st)
        map[E] = -1;
    return st;
}

mt_status mt_ep_route_counts(const int32_t *topk_ids, int64_t M, int64_t topk, int64_t E,
                             int world, int64_t *counts)
{
    /* The problem's own bounds (mt_problem_validate): M * topk ids fit. */
    if (!counts || (M > 0 && !topk_ids) || M < 0 || M > MT_MAX_TOKENS || topk < 1 || topk > E ||
        !args_ok(E, world, 0))
        return MT_ERR_INVALID_ARG;
    memset(counts, 0, (size_t)world * sizeof *counts);
    for (int64_t t = 0; t < M; t++) {
        uint64_t seen = 0;   /* world <= 64 */
        for (int64_t j = 0; j < topk; j++) {
            int r = mt_ep_expert_owner(E, world, topk_ids[t * topk + j]);
            if (r >= 0 && !(seen >> r & 1)) {
                seen |= (uint64_t)1 << r;
                counts[r]++;
            }
        }
    }
    return MT_OK;
}

mt_ep_wire mt_ep_wire_for(const mt_problem *p)
{
    if (!p || p->apply_router_weight_on_input)
        return MT_EP_WIRE_ELEM;
    const int fp8 = mt_quant_act_dtype(p->quant.mode) == MT_DTYPE_FP8_E4M3;
    if (!mt_quant_is_w8a8(p->quant.mode))
        return MT_EP_WIRE_ELEM;
    switch (mt_quant_granularity(p->quant.mode)) {
    case MT_GRAN_TOKEN: return fp8 ? MT_EP_WIRE_FP8_TOKEN : MT_EP_WIRE_INT8_TOKEN;
    case MT_GRAN_BLOCK: return fp8 ? MT_EP_WIRE_FP8_BLOCK : MT_EP_WIRE_INT8_BLOCK;
    default: return MT_EP_WIRE_ELEM;
    }
}

static const char *const wire_names[MT_EP_WIRE_COUNT_] = {"elem", "fp8-token", "fp8-block",
                                                          "int8-token", "int8-block"};
/* The template's `wire` values (no '-': they become part of kernel names). */
static const char *const wire_kernel[MT_EP_WIRE_COUNT_] = {"elem", "fp8token", "fp8block",
                                                           "int8token", "int8block"};

const char *mt_ep_wire_name(mt_ep_wire w)
{
    return (unsigned)w < MT_EP_WIRE_COUNT_ ? wire_names[w] : "?";
}

const char *mt_ep_wire_kernel_name(mt_ep_wire w)
{
    return (unsigned)w < MT_EP_WIRE_COUNT_ ? wire_kernel[w] : NULL;
}

int64_t mt_ep_wire_scales(mt_ep_wire w, int64_t K)
{
    switch (w) {
    case MT_EP_WIRE_FP8_TOKEN:
    case MT_EP_WIRE_INT8_TOKEN: return 1;
    case MT_EP_WIRE_FP8_BLOCK:
    case MT_EP_WIRE_INT8_BLOCK: return (K + MT_QUANT_BLOCK - 1) / MT_QUANT_BLOCK;
    default: return 0;
    }
}

size_t mt_ep_wire_row_bytes(mt_ep_wire w, int64_t K, size_t elem_bytes)
{
    return (size_t)K * (w == MT_EP_WIRE_ELEM ? elem_bytes : 1);
}

int64_t mt_ep_capacity_for(int64_t max_m, double factor)
{
    if (max_m < 1)
        max_m = 1;
    if (max_m > MT_MAX_TOKENS)
        max_m = MT_MAX_TOKENS;   /* no larger capacity is accepted anyway */
    if (!(factor > 0.0) || factor > 1.0)
        factor = 1.0;
    const int64_t top = (max_m + 7) / 8 * 8;
    int64_t c = (int64_t)((double)max_m * factor + 0.999999);
    c = (c + 7) / 8 * 8;
    return c < 8 ? 8 : c > top ? top : c;
}

static size_t take(size_t *off, size_t bytes)
{
    size_t at = *off;
    *off += (bytes + 255) & ~(size_t)255;
    return at;
}

mt_status mt_ep_layout_make(const mt_problem *p, int world, int64_t cap, mt_ep_wire wire,
                            size_t inner_bytes, mt_ep_layout *L, char *msg, size_t msg_size)
{
    /* Bounded first, so that none of the products below can overflow. */
    if (!p || !L)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "EP layout: NULL problem or output");
    if (world < 1 || world > MT_EP_MAX_RANKS || cap < 1 || cap > MT_MAX_TOKENS ||
        (unsigned)wire >= MT_EP_WIRE_COUNT_ || p->M < 0 || p->M > MT_MAX_TOKENS ||
        p->topk < 1 || p->topk > MT_MAX_EXPERTS || p->K < 8 || p->K > MT_MAX_DIM ||
        inner_bytes > SIZE_MAX / 4)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                       "EP layout arguments out of range: world %d (1..%d), capacity %lld "
                       "(1..%d), wire %d, M %lld (0..%d), topk %lld (1..%d), K %lld (8..%d), "
                       "inner workspace %zu bytes",
                       world, MT_EP_MAX_RANKS, (long long)cap, MT_MAX_TOKENS, (int)wire,
                       (long long)p->M, MT_MAX_TOKENS, (long long)p->topk, MT_MAX_EXPERTS,
                       (long long)p->K, MT_MAX_DIM, inner_bytes);
    if ((int64_t)world * cap > MT_MAX_TOKENS)
        return mt_errf(msg, msg_size, MT_ERR_SHAPE,
                       "%d ranks x capacity %lld = %lld rows is over the %d rows the experts "
                       "take",
                       world, (long long)cap, (long long)(world * cap), MT_MAX_TOKENS);
    memset(L, 0, sizeof *L);
    L->world = world;
    L->cap = cap;
    L->M = p->M;
    L->topk = p->topk;
    L->K = p->K;
    L->es = mt_dtype_size(p->dtype);
    L->wire = wire;
    L->nscale = mt_ep_wire_scales(wire, p->K);
    L->row_bytes = mt_ep_wire_row_bytes(wire, p->K, L->es);
    const size_t c = (size_t)cap, tk = (size_t)p->topk, W = (size_t)world;
    size_t s = 0;
    L->slot_ids = take(&s, c * tk * sizeof(int32_t));
    L->slot_weights = take(&s, c * tk * sizeof(float));
    L->slot_scales = take(&s, c * (size_t)L->nscale * sizeof(float));
    L->slot_rows = take(&s, c * L->row_bytes);
    L->slot_bytes = s;
    const size_t rows = W * c, rowb = (size_t)p->K * L->es;
    size_t o = 0;
    L->flags = take(&o, (MT_EP_FLAGS + W) * sizeof(int32_t));
    L->recv_count = take(&o, W * sizeof(int32_t));
    L->send_row = take(&o, (size_t)p->M * W * sizeof(int32_t));
    L->send = take(&o, W * L->slot_bytes);
    L->recv = take(&o, W * L->slot_bytes);
    L->x = take(&o, rows * rowb);
    L->x_ids = take(&o, rows * tk * sizeof(int32_t));
    L->x_weights = take(&o, rows * tk * sizeof(float));
    L->y = take(&o, rows * rowb);
    L->ret = take(&o, rows * rowb);
    L->inner = take(&o, inner_bytes);
    L->inner_bytes = inner_bytes;
    L->total = o;
    return MT_OK;
}

int64_t mt_ep_gathered_row(const mt_ep_layout *L, int peer, int64_t i)
{
    return (int64_t)peer * L->cap + i;
}

mt_status mt_ep_inner_problem(const mt_problem *p, const mt_ep_config *cfg, int64_t cap,
                              mt_problem *out, char *msg, size_t msg_size)
{
    int64_t first, count;
    if (mt_ep_expert_range(p->E, cfg->world, cfg->rank, &first, &count))
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                       "expert parallelism needs 1 <= world <= min(E, %d) and 0 <= rank < "
                       "world (E=%lld, world=%d, rank=%d)",
                       MT_EP_MAX_RANKS, (long long)p->E, cfg->world, cfg->rank);
    if (p->E + 1 > MT_MAX_EXPERTS)
        return mt_errf(msg, msg_size, MT_ERR_SHAPE,
                       "expert parallelism takes at most %d experts (one id is kept for "
                       "padding rows)",
                       MT_MAX_EXPERTS - 1);
    if (cap < 1 || cap > MT_MAX_TOKENS / cfg->world)
        return mt_errf(msg, msg_size, MT_ERR_SHAPE,
                       "EP capacity %lld rows per peer: %d ranks x capacity must be 1..%d rows",
                       (long long)cap, cfg->world, MT_MAX_TOKENS);
    if (cfg->format == MT_FORMAT_BATCHED && p->max_tokens < 0)
        return mt_errf(msg, msg_size, MT_ERR_SHAPE,
                       "max_tokens=%lld: the batched rows per local expert must be 0 (world x "
                       "capacity) or more",
                       (long long)p->max_tokens);
    *out = *p;
    out->M = (int64_t)cfg->world * cap;
    out->E = p->E + 1;
    out->has_expert_map = 1;
    out->local_E = count;
    out->format = cfg->format;
    /* A local expert receives at most every peer's whole buffer: more rows
     * would only be workspace never written. */
    if (cfg->format == MT_FORMAT_BATCHED && (out->max_tokens < 1 || out->max_tokens > out->M))
        out->max_tokens = out->M;
    if (cfg->format != MT_FORMAT_BATCHED)
        out->max_tokens = 0;
    mt_status st = mt_problem_validate(out, msg, msg_size);
    if (st) {
        char tmp[512];
        mt_strlcpy(tmp, msg ? msg : "", sizeof tmp);
        return mt_errf(msg, msg_size, st, "the experts' problem of rank %d: %s", cfg->rank, tmp);
    }
    return MT_OK;
}
