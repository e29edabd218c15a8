/*
 * The oracle's public entry points: the standard-format fused MoE and the
 * batched prepare / experts / finalize stages. They build the row sets the
 * engine (engine.c) computes and apply rounding points (1) and (7) of
 * moetune/oracle.h.
 *
 * May call: libc, oracle/engine.c, oracle/quant.c, moetune/numeric.h.
 */
#include "oracle/oracle_internal.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "moetune/numeric.h"

/* Local expert of every slot t*topk+j (-1: not on this rank). */
static mt_status slot_experts(const mt_problem *p, const mt_moe_tensors *t, int32_t *le, char *msg,
                              size_t msg_size)
{
    for (int64_t tok = 0; tok < p->M; tok++)
        for (int64_t j = 0; j < p->topk; j++) {
            int64_t s = tok * p->topk + j;
            int32_t id = t->topk_ids[s];
            if (id < 0 || id >= p->E)
                return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                               "topk_ids[%lld, %lld] = %d (token %lld, slot %lld) is outside [0, E=%lld)",
                               (long long)tok, (long long)j, (int)id, (long long)tok, (long long)j,
                               (long long)p->E);
            int32_t l = p->has_expert_map ? t->expert_map[id] : id;
            if (l < -1 || l >= p->local_E)
                return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                               "expert_map[%d] = %d (token %lld, slot %lld) is outside [-1, local_E=%lld)",
                               (int)id, (int)l, (long long)tok, (long long)j, (long long)p->local_E);
            le[s] = l;
        }
    return MT_OK;
}

/* Row `r` of an element-dtype tensor with rows of K as floats. */
static void elem_row(const mt_problem *p, const void *base, int64_t r, float *dst)
{
    size_t esz = mt_dtype_size(p->dtype);
    mt_to_float((const char *)base + (size_t)(r * p->K) * esz, p->dtype, (size_t)p->K, dst);
}

static mt_status check_common(const mt_problem *p, const mt_moe_tensors *t, int standard,
                              const void *out, char *msg, size_t msg_size)
{
    mt_status st = mt_problem_validate(p, msg, msg_size);
    if (st)
        return st;
    if (!standard && p->format != MT_FORMAT_BATCHED)
        return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE,
                       "the batched oracle stages need a problem in the batched format");
    if (!out)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "output buffer is NULL");
    return t ? mto_check_tensors(p, t, standard, msg, msg_size) : MT_OK;
}

mt_status mt_oracle_fused_moe(const mt_problem *p, const mt_moe_tensors *t, const int64_t *tokens,
                              int64_t ntokens, float *out, char *msg, size_t msg_size)
{
    mt_status st = check_common(p, t, 1, out, msg, msg_size);
    if (st)
        return st;
    if (!t)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "tensors are NULL");
    int64_t M = p->M, K = p->K, topk = p->topk, S = M * topk;
    if (tokens && ntokens < 0)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "ntokens=%lld < 0", (long long)ntokens);
    for (int64_t i = 0; tokens && i < ntokens; i++)
        if (tokens[i] < 0 || tokens[i] >= M)
            return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "tokens[%lld] = %lld is outside [0, M=%lld)",
                           (long long)i, (long long)tokens[i], (long long)M);
    if (M == 0)
        return MT_OK;

    int weighted = p->apply_router_weight_on_input;
    /* Per-tensor dynamic scales see every local slot, so GEMM1 must run for
     * all of them even when only a subset of the output is wanted. */
    int all_rows = mt_quant_granularity(p->quant.mode) == MT_GRAN_TENSOR && !p->quant.static_act_scale;
    st = MT_ERR_NO_MEMORY;
    int32_t *le = malloc((size_t)S * sizeof *le);
    uint8_t *tokneed = calloc((size_t)M, 1);
    int64_t *slot_y = malloc((size_t)S * sizeof *slot_y);
    int64_t *xrow = malloc((size_t)S * sizeof *xrow), *yidx = malloc((size_t)S * sizeof *yidx);
    int32_t *expert = malloc((size_t)S * sizeof *expert);
    float *yscale = malloc((size_t)S * sizeof *yscale);
    float *hid = malloc((size_t)(M * K) * sizeof *hid);
    float *x = NULL, *y = NULL;
    if (!le || !tokneed || !slot_y || !xrow || !yidx || !expert || !yscale || !hid)
        goto done;
    if ((st = slot_experts(p, t, le, msg, msg_size)))
        goto done;
    if (tokens)
        for (int64_t i = 0; i < ntokens; i++)
            tokneed[tokens[i]] = 1;
    else
        memset(tokneed, 1, (size_t)M);

    int64_t R = 0, ny = 0;
    for (int64_t s = 0; s < S; s++) {
        slot_y[s] = -1;
        int64_t tok = s / topk;
        if (le[s] < 0 || !(tokneed[tok] || all_rows))
            continue;
        xrow[R] = weighted ? R : tok;
        expert[R] = le[s];
        yscale[R] = t->topk_weights[s];
        yidx[R] = tokneed[tok] ? ny++ : -1;
        slot_y[s] = yidx[R];
        R++;
    }
    for (int64_t tok = 0; tok < M; tok++)
        elem_row(p, t->hidden, tok, hid + tok * K);
    mto_rows rows = {.R = R, .X = M, .x = hid, .xrow = xrow, .expert = expert,
                     .yscale = weighted ? NULL : yscale, .yidx = yidx};
    st = MT_ERR_NO_MEMORY;
    y = malloc((size_t)((ny ? ny : 1) * K) * sizeof *y);
    if (!y)
        goto done;
    if (weighted) {
        /* Rounding point (1): each slot's row is the weighted, rounded row. */
        x = malloc((size_t)((R ? R : 1) * K) * sizeof *x);
        if (!x)
            goto done;
        for (int64_t r = 0, s = 0; s < S; s++) {
            if (le[s] < 0 || !(tokneed[s / topk] || all_rows))
                continue;
            const float *h = hid + (s / topk) * K;
            for (int64_t k = 0; k < K; k++)
                x[r * K + k] = mt_round_elem(h[k] * t->topk_weights[s], p->dtype);
            r++;
        }
        rows.x = x;
        rows.X = R;
    }
    if ((st = mto_run(p, t, &rows, y, msg, msg_size)))
        goto done;
    /* Rounding point (7). */
    for (int64_t tok = 0; tok < M; tok++) {
        if (!tokneed[tok])
            continue;
        for (int64_t k = 0; k < K; k++) {
            float sum = 0.0f;
            for (int64_t j = 0; j < topk; j++) {
                int64_t yi = slot_y[tok * topk + j];
                if (yi >= 0)
                    sum += y[yi * K + k];
            }
            out[tok * K + k] = mt_round_elem(sum, p->dtype);
        }
    }
    st = MT_OK;
done:
    if (st == MT_ERR_NO_MEMORY)
        mt_errf(msg, msg_size, st, "oracle: out of memory (M=%lld, K=%lld)", (long long)M, (long long)K);
    free(le);
    free(tokneed);
    free(slot_y);
    free(xrow);
    free(yidx);
    free(expert);
    free(yscale);
    free(hid);
    free(x);
    free(y);
    return st;
}

mt_status mt_oracle_batched_experts(const mt_problem *p, const mt_moe_tensors *t, float *out,
                                    char *msg, size_t msg_size)
{
    mt_status st = check_common(p, t, 0, out, msg, msg_size);
    if (st)
        return st;
    if (!t)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "tensors are NULL");
    int64_t E = p->local_E, T = p->max_tokens, K = p->K, R = 0;
    for (int64_t e = 0; e < E; e++) {
        int32_t c = t->expert_num_tokens[e];
        if (c < 0 || c > T)
            return mt_errf(msg, msg_size, MT_ERR_SHAPE,
                           "expert_num_tokens[%lld] = %d is outside [0, max_tokens=%lld]",
                           (long long)e, (int)c, (long long)T);
        R += c;
    }
    memset(out, 0, (size_t)(E * T * K) * sizeof *out);
    if (R == 0)
        return MT_OK;
    st = MT_ERR_NO_MEMORY;
    int64_t *idx = malloc((size_t)R * sizeof *idx);
    int32_t *expert = malloc((size_t)R * sizeof *expert);
    float *x = malloc((size_t)(R * K) * sizeof *x), *y = malloc((size_t)(R * K) * sizeof *y);
    if (!idx || !expert || !x || !y) {
        mt_errf(msg, msg_size, st, "oracle: out of memory for %lld batched rows", (long long)R);
        goto done;
    }
    for (int64_t e = 0, r = 0; e < E; e++)
        for (int64_t i = 0; i < t->expert_num_tokens[e]; i++, r++) {
            idx[r] = r;
            expert[r] = (int32_t)e;
            elem_row(p, t->hidden, e * T + i, x + r * K);
        }
    mto_rows rows = {.R = R, .X = R, .x = x, .xrow = idx, .expert = expert, .yidx = idx};
    if ((st = mto_run(p, t, &rows, y, msg, msg_size)))
        goto done;
    for (int64_t e = 0, r = 0; e < E; e++)
        for (int64_t i = 0; i < t->expert_num_tokens[e]; i++, r++)
            memcpy(out + (e * T + i) * K, y + r * K, (size_t)K * sizeof *out);
done:
    free(idx);
    free(expert);
    free(x);
    free(y);
    return st;
}

mt_status mt_oracle_batched_dispatch(const mt_problem *p, const mt_moe_tensors *t, void *bhidden,
                                     int32_t *counts, int32_t *row_slot, char *msg, size_t msg_size)
{
    mt_status st = check_common(p, NULL, 0, bhidden, msg, msg_size);
    if (st)
        return st;
    if (!t || !t->hidden || !t->topk_ids || !t->topk_weights || !counts || !row_slot ||
        (p->has_expert_map && !t->expert_map))
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                       "dispatch needs hidden, topk_ids, topk_weights, counts, row_slot%s",
                       p->has_expert_map ? " and expert_map" : "");
    int64_t E = p->local_E, T = p->max_tokens, K = p->K, S = p->M * p->topk;
    size_t esz = mt_dtype_size(p->dtype), rowb = (size_t)K * esz;
    memset(bhidden, 0, (size_t)(E * T) * rowb);
    memset(counts, 0, (size_t)E * sizeof *counts);
    for (int64_t i = 0; i < E * T; i++)
        row_slot[i] = -1;
    if (S == 0)
        return MT_OK;
    int32_t *le = malloc((size_t)S * sizeof *le);
    float *row = malloc((size_t)K * sizeof *row);
    if (!le || !row) {
        st = mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "oracle: out of memory in dispatch");
        goto done;
    }
    if ((st = slot_experts(p, t, le, msg, msg_size)))
        goto done;
    for (int64_t s = 0; s < S; s++) {
        int64_t e = le[s], tok = s / p->topk;
        if (e < 0)
            continue;
        if (counts[e] >= T) {
            st = mt_errf(msg, msg_size, MT_ERR_SHAPE,
                         "expert %lld (local id) receives more than max_tokens=%lld tokens",
                         (long long)e, (long long)T);
            goto done;
        }
        int64_t dst = e * T + counts[e]++;
        row_slot[dst] = (int32_t)s;
        char *d = (char *)bhidden + (size_t)dst * rowb;
        const char *src = (const char *)t->hidden + (size_t)tok * rowb;
        if (!p->apply_router_weight_on_input) {
            memcpy(d, src, rowb);
            continue;
        }
        mt_to_float(src, p->dtype, (size_t)K, row);
        for (int64_t k = 0; k < K; k++)
            row[k] *= t->topk_weights[s];
        mt_from_float(row, (size_t)K, p->dtype, d); /* rounds as round_elem */
    }
done:
    free(le);
    free(row);
    return st;
}

mt_status mt_oracle_batched_combine(const mt_problem *p, const float *bout, const int32_t *row_slot,
                                    const float *topk_weights, float *out, char *msg, size_t msg_size)
{
    mt_status st = check_common(p, NULL, 0, out, msg, msg_size);
    if (st)
        return st;
    if (!bout || !row_slot || (!topk_weights && !p->apply_router_weight_on_input))
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                       "combine needs bout, row_slot and (unless applied on input) topk_weights");
    int64_t E = p->local_E, T = p->max_tokens, K = p->K, S = p->M * p->topk;
    if (S == 0)
        return MT_OK;
    int64_t *slot_row = malloc((size_t)S * sizeof *slot_row);
    if (!slot_row)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "oracle: out of memory in combine");
    for (int64_t s = 0; s < S; s++)
        slot_row[s] = -1;
    for (int64_t i = 0; i < E * T; i++) {
        int32_t s = row_slot[i];
        if (s == -1)
            continue;
        if (s < -1 || s >= S || slot_row[s] >= 0) {
            st = mt_errf(msg, msg_size, MT_ERR_SHAPE,
                         "row_slot[%lld] = %d is outside [-1, M*topk=%lld) or repeats a slot",
                         (long long)i, (int)s, (long long)S);
            goto done;
        }
        slot_row[s] = i;
    }
    for (int64_t tok = 0; tok < p->M; tok++)
        for (int64_t k = 0; k < K; k++) {
            float sum = 0.0f;
            for (int64_t j = 0; j < p->topk; j++) {
                int64_t s = tok * p->topk + j, r = slot_row[s];
                if (r < 0)
                    continue;
                float w = p->apply_router_weight_on_input ? 1.0f : topk_weights[s];
                sum += w * bout[r * K + k];
            }
            out[tok * K + k] = mt_round_elem(sum, p->dtype);
        }
done:
    free(slot_row);
    return st;
}
