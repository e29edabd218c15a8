/*
 * The oracle's expert engine: GEMM1 -> activation -> GEMM2 for a set of
 * rows, grouped by expert, one weight chunk per task so that each weight
 * row is converted to fp32 once and reused by all rows of its expert.
 * Rounding points are those listed in moetune/oracle.h.
 *
 * May call: libc, libm, oracle/pool.c, oracle/quant.c, moetune/numeric.h.
 */
#include "oracle/oracle_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "moetune/numeric.h"

/* Weight rows per task. */
#define MTO_CHUNK 16

typedef struct engine {
    const mt_problem *p;
    const mt_moe_tensors *t;
    const mto_rows *rows;
    int w8a8;
    const float *in1, *s1;   /* GEMM1 inputs [X, K] (quantized or not), scales */
    float *a;                /* [R, N] rounding point (4) */
    const float *s2;         /* GEMM2 input scales [R, ng2] (w8a8) */
    const float *in2;        /* GEMM2 inputs [R, N] */
    float *y;
    const int64_t *order;    /* row ids sorted by expert */
    const int64_t *estart;   /* [local_E + 1] into order */
    const int64_t *tasks;    /* pairs (expert, first weight row) */
    float *scratch;          /* per worker: MTO_CHUNK * 2 * max(K, N) floats */
    int64_t scratch_len;
} engine;

static float act(const mt_problem *p, float x)
{
    return p->activation == MT_ACT_GELU ? mt_gelu(x) : mt_silu(x);
}

/* Tasks (expert, first row) covering `nrows` weight rows of every expert
 * that has rows to compute; `want` filters rows (GEMM2 only needs some). */
static int64_t make_tasks(const engine *en, int64_t nrows, int gemm2, int64_t *tasks)
{
    int64_t n = 0;
    for (int64_t e = 0; e < en->p->local_E; e++) {
        int used = 0;
        for (int64_t i = en->estart[e]; i < en->estart[e + 1] && !used; i++)
            used = !gemm2 || en->rows->yidx[en->order[i]] >= 0;
        if (!used)
            continue;
        for (int64_t r0 = 0; r0 < nrows; r0 += MTO_CHUNK) {
            tasks[2 * n] = e;
            tasks[2 * n + 1] = r0;
            n++;
        }
    }
    return n;
}

static void gemm1_task(void *ctx, int64_t task, int worker)
{
    const engine *en = ctx;
    const mt_problem *p = en->p;
    int64_t K = p->K, N = p->N, e = en->tasks[2 * task], n0 = en->tasks[2 * task + 1];
    int64_t n1 = n0 + MTO_CHUNK < N ? n0 + MTO_CHUNK : N, cn = n1 - n0;
    float *wg = en->scratch + (size_t)worker * (size_t)en->scratch_len, *wu = wg + cn * K;
    const float *sg[MTO_CHUNK] = {0}, *su[MTO_CHUNK] = {0};
    for (int64_t n = n0; n < n1; n++) {
        mto_weight_row(p, en->t, 0, e, n, wg + (n - n0) * K);
        mto_weight_row(p, en->t, 0, e, N + n, wu + (n - n0) * K);
        sg[n - n0] = mto_weight_row_scales(p, en->t, 0, e, n);
        su[n - n0] = mto_weight_row_scales(p, en->t, 0, e, N + n);
    }
    int64_t glen = mto_group_len(p, K), ng = mto_groups(p, K);
    for (int64_t i = en->estart[e]; i < en->estart[e + 1]; i++) {
        int64_t r = en->order[i], xr = en->rows->xrow[r];
        const float *x = en->in1 + xr * K, *sa = en->w8a8 ? en->s1 + xr * ng : NULL;
        for (int64_t n = n0; n < n1; n++) {
            float g = (float)mto_scaled_dot(x, wg + (n - n0) * K, K, glen, sa, sg[n - n0]);
            float u = (float)mto_scaled_dot(x, wu + (n - n0) * K, K, glen, sa, su[n - n0]);
            g = mt_round_elem(g, p->dtype);
            u = mt_round_elem(u, p->dtype);
            en->a[r * N + n] = mt_round_elem(act(p, g) * u, p->dtype);
        }
    }
}

static void gemm2_task(void *ctx, int64_t task, int worker)
{
    const engine *en = ctx;
    const mt_problem *p = en->p;
    int64_t K = p->K, N = p->N, e = en->tasks[2 * task], k0 = en->tasks[2 * task + 1];
    int64_t k1 = k0 + MTO_CHUNK < K ? k0 + MTO_CHUNK : K;
    float *w = en->scratch + (size_t)worker * (size_t)en->scratch_len;
    const float *sw[MTO_CHUNK] = {0};
    for (int64_t k = k0; k < k1; k++) {
        mto_weight_row(p, en->t, 1, e, k, w + (k - k0) * N);
        sw[k - k0] = mto_weight_row_scales(p, en->t, 1, e, k);
    }
    int64_t glen = mto_group_len(p, N), ng = mto_groups(p, N);
    for (int64_t i = en->estart[e]; i < en->estart[e + 1]; i++) {
        int64_t r = en->order[i], yi = en->rows->yidx[r];
        if (yi < 0)
            continue;
        const float *x = en->in2 + r * N, *sa = en->w8a8 ? en->s2 + r * ng : NULL;
        float ws = en->rows->yscale ? en->rows->yscale[r] : 1.0f;
        for (int64_t k = k0; k < k1; k++) {
            float v = (float)mto_scaled_dot(x, w + (k - k0) * N, N, glen, sa, sw[k - k0]);
            if (en->rows->yscale)
                v *= ws;
            en->y[yi * K + k] = mt_round_elem(v, p->dtype);
        }
    }
}

mt_status mto_run(const mt_problem *p, const mt_moe_tensors *t, const mto_rows *rows, float *y,
                  char *msg, size_t msg_size)
{
    int64_t R = rows->R, X = rows->X, K = p->K, N = p->N, E = p->local_E;
    if (R == 0)
        return MT_OK;
    engine en = {.p = p, .t = t, .rows = rows, .y = y, .w8a8 = mt_quant_is_w8a8(p->quant.mode)};
    mt_status st = MT_ERR_NO_MEMORY;
    int64_t maxdim = K > N ? K : N;
    int64_t ntask_max = E * ((maxdim + MTO_CHUNK - 1) / MTO_CHUNK);
    int workers = mto_workers(ntask_max);
    en.scratch_len = MTO_CHUNK * 2 * maxdim;
    int64_t *order = malloc((size_t)R * sizeof *order);
    int64_t *estart = calloc((size_t)E + 1, sizeof *estart);
    int64_t *tasks = malloc((size_t)ntask_max * 2 * sizeof *tasks);
    float *a = malloc((size_t)(R * N) * sizeof *a);
    float *scratch = malloc((size_t)workers * (size_t)en.scratch_len * sizeof *scratch);
    float *q1 = NULL, *s1 = NULL, *q2 = NULL, *s2 = NULL;
    if (en.w8a8) {
        q1 = malloc((size_t)(X * K) * sizeof *q1);
        s1 = malloc((size_t)(X * mto_groups(p, K)) * sizeof *s1);
        q2 = malloc((size_t)(R * N) * sizeof *q2);
        s2 = malloc((size_t)(R * mto_groups(p, N)) * sizeof *s2);
        if (!q1 || !s1 || !q2 || !s2)
            goto fail;
    }
    if (!order || !estart || !tasks || !a || !scratch)
        goto fail;
    en.order = order;
    en.estart = estart;
    en.tasks = tasks;
    en.a = a;
    en.scratch = scratch;

    /* Counting sort of the rows by expert keeps each expert's rows in
     * ascending row order. */
    for (int64_t r = 0; r < R; r++)
        estart[rows->expert[r] + 1]++;
    for (int64_t e = 0; e < E; e++)
        estart[e + 1] += estart[e];
    {
        int64_t *fill = tasks; /* borrowed as a cursor array before the tasks exist */
        memcpy(fill, estart, (size_t)E * sizeof *fill);
        for (int64_t r = 0; r < R; r++)
            order[fill[rows->expert[r]]++] = r;
    }

    const float *static1 = p->quant.static_act_scale ? t->a1_scale : NULL;
    const float *static2 = p->quant.static_act_scale ? t->a2_scale : NULL;
    en.in1 = rows->x;
    if (en.w8a8) {
        mto_quant_rows(p, static1, rows->x, X, K, q1, s1);
        en.in1 = q1;
        en.s1 = s1;
    }
    int64_t nt = make_tasks(&en, N, 0, tasks);
    mto_parallel(nt, workers, gemm1_task, &en);

    en.in2 = a;
    if (en.w8a8) {
        mto_quant_rows(p, static2, a, R, N, q2, s2);
        en.in2 = q2;
        en.s2 = s2;
    }
    nt = make_tasks(&en, K, 1, tasks);
    mto_parallel(nt, workers, gemm2_task, &en);
    st = MT_OK;
fail:
    if (st)
        mt_errf(msg, msg_size, st, "oracle: out of memory for %lld rows (K=%lld, N=%lld)",
                (long long)R, (long long)K, (long long)N);
    free(order);
    free(estart);
    free(tasks);
    free(a);
    free(scratch);
    free(q1);
    free(s1);
    free(q2);
    free(s2);
    return st;
}

static mt_status need(const void *ptr, const char *name, const mt_problem *p, char *msg,
                      size_t msg_size)
{
    if (ptr)
        return MT_OK;
    return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "tensor %s is NULL but quant %s needs it",
                   name, mt_quant_mode_name(p->quant.mode));
}

static mt_status check_static(const float *s, const char *name, char *msg, size_t msg_size)
{
    if (!s)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                       "static_act_scale is set but %s is NULL", name);
    if (!(s[0] > 0.0f) || isinf(s[0]))
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                       "%s=%g must be positive and finite", name, (double)s[0]);
    return MT_OK;
}

mt_status mto_check_tensors(const mt_problem *p, const mt_moe_tensors *t, int standard, char *msg,
                            size_t msg_size)
{
    mt_status st;
    if (!t)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "tensors are NULL");
    if ((st = need(t->hidden, "hidden", p, msg, msg_size)) || (st = need(t->w1, "w1", p, msg, msg_size)) ||
        (st = need(t->w2, "w2", p, msg, msg_size)))
        return st;
    if (standard) {
        if ((st = need(t->topk_ids, "topk_ids", p, msg, msg_size)) ||
            (st = need(t->topk_weights, "topk_weights", p, msg, msg_size)))
            return st;
        if (p->has_expert_map && (st = need(t->expert_map, "expert_map", p, msg, msg_size)))
            return st;
    } else if ((st = need(t->expert_num_tokens, "expert_num_tokens", p, msg, msg_size))) {
        return st;
    }
    if (p->quant.mode != MT_QUANT_NONE &&
        ((st = need(t->w1_scale, "w1_scale", p, msg, msg_size)) ||
         (st = need(t->w2_scale, "w2_scale", p, msg, msg_size))))
        return st;
    if (p->quant.has_zero_point && ((st = need(t->w1_zero, "w1_zero", p, msg, msg_size)) ||
                                    (st = need(t->w2_zero, "w2_zero", p, msg, msg_size))))
        return st;
    if (p->quant.static_act_scale && ((st = check_static(t->a1_scale, "a1_scale", msg, msg_size)) ||
                                      (st = check_static(t->a2_scale, "a2_scale", msg, msg_size))))
        return st;
    return MT_OK;
}
