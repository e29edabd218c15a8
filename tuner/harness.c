/*
 * Shared GPU harness (see harness.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "tuner/harness.h"
#include "tuner/kernel_set.h"
#include "tuner/roofline.h"
#include "tuner/select.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cuda_driver.h"
#include "common/util.h"
#include "moetune/numeric.h"
#include "moetune/oracle.h"

mt_status mt_kernel_set_load(mt_gen *g, const mt_gen_filter *f, mt_kernel_set *set, char *msg,
                             size_t msg_size)
{
    memset(set, 0, sizeof *set);
    mt_variant *vars = NULL;
    size_t nvars = 0;
    mt_status st = mt_gen_enumerate(g, f, &vars, &nvars, NULL);
    if (st)
        mt_errf(msg, msg_size, st, "enumerating variants: %s", mt_gen_errmsg(g));
    else
        st = mt_kernel_set_add(set, g, vars, nvars, msg, msg_size);
    if (st)
        mt_kernel_set_free(set);
    free(vars);
    return st;
}

void mt_kernel_set_free(mt_kernel_set *set)
{
    if (!set)
        return;
    for (size_t i = 0; i < set->n; i++)
        mt_kernel_unload(&set->k[i]);
    free(set->k);
    memset(set, 0, sizeof *set);
}

/* The first kernel of the family whose params match kv (name, value pairs,
 * NULL-terminated). */
static const mt_kernel *find_family(const mt_kernel_set *set, const char *family,
                                    const char *const *kv)
{
    for (size_t i = 0; i < set->n; i++) {
        const mt_variant *v = &set->k[i].v;
        int ok = !strcmp(v->family, family);
        for (int j = 0; ok && kv[j]; j += 2)
            ok = mt_variant_get(v, kv[j]) && !strcmp(mt_variant_get(v, kv[j]), kv[j + 1]);
        if (ok)
            return &set->k[i];
    }
    return NULL;
}

mt_status mt_plan_compose(const mt_kernel_set *set, const mt_problem *p, const char *gemm1_name,
                          mt_moe_plan *plan, char *msg, size_t msg_size)
{
    memset(plan, 0, sizeof *plan);
    const mt_kernel *g1 = NULL, *g2 = NULL;
    for (size_t i = 0; i < set->n && !g1; i++)
        if (!strcmp(set->k[i].v.name, gemm1_name))
            g1 = &set->k[i];
    if (!g1)
        return mt_errf(msg, msg_size, MT_ERR_NOT_FOUND, "no loaded kernel %s", gemm1_name);
    /* A tile that cannot be this problem's GEMM1 (mt_gemm_role_fits) goes by
     * its twin that can: one that runs GEMM2 in its launch (CHAIN) by the
     * one that does not (CHAIN=0, mt_kernel_set_find_unchained) first; one
     * that reads its A rows by TMA (ALOAD=tma), which needs them laid out
     * per expert, by its ALOAD=cp twin (in the standard format it serves as
     * GEMM2); one that quantizes its own A rows where the problem does not
     * allow that, by its AQUANT=step twin. The GEMM2 is the sibling of the
     * tile named, or of the unchained one. */
    if (!mt_gemm_role_fits(&g1->v, p, 0) && mt_variant_chain(&g1->v) > 0) {
        const mt_kernel *twin = mt_kernel_set_find_unchained(set, &g1->v);
        if (!twin)
            return mt_errf(msg, msg_size, MT_ERR_NOT_FOUND,
                           "%s cannot be GEMM1 of this problem (it runs GEMM2 in its launch), and "
                           "its CHAIN=0 twin is not loaded", gemm1_name);
        g1 = twin;
    }
    for (size_t i = 0; i < set->n && !g2; i++)
        if (mt_is_gemm2_sibling(&set->k[i].v, &g1->v))
            g2 = &set->k[i];
    if (!mt_gemm_role_fits(&g1->v, p, 0)) {
        const int cta = mt_variant_quantizes_a(&g1->v);
        const char *param = cta ? "AQUANT" : "ALOAD", *value = cta ? "step" : "cp";
        const mt_kernel *twin = mt_kernel_set_find_sibling(set, &g1->v, param, value);
        if (!twin)
            return mt_errf(msg, msg_size, MT_ERR_NOT_FOUND,
                           "%s cannot be GEMM1 of this problem (%s), and its %s=%s twin, which "
                           "could, is not loaded",
                           gemm1_name,
                           cta ? "it quantizes its own A rows" : "it reads its A rows by TMA",
                           param, value);
        g1 = twin;
    }
    const char *dt = mt_dtype_name(p->dtype), *act = mt_activation_name(p->activation);
    const char *const none_kv[] = {NULL};
    const char *const act_kv[] = {"dtype", dt, "activation", act, NULL};
    const char *const rd_kv[] = {"dtype", dt, NULL};
    const mt_kernel *al = find_family(set, "moe_align", none_kv);
    const mt_kernel *ac = find_family(set, "act_and_mul", act_kv);
    const mt_kernel *rd = find_family(set, "moe_reduce", rd_kv);
    const mt_kernel *qk = NULL;
    if (mt_quant_is_w8a8(p->quant.mode)) {
        /* quant: GEMM1 input as is; act: GEMM2 input, with the activation
         * unless gemm1 fuses it. */
        const mt_quant_gran gran = mt_quant_granularity(p->quant.mode);
        const char *qt = mt_quant_act_dtype(p->quant.mode) == MT_DTYPE_FP8_E4M3 ? "fp8" : "int8";
        const char *gr = gran == MT_GRAN_TENSOR ? "tensor" : gran == MT_GRAN_TOKEN ? "token" : "block";
        const int fused = strcmp(mt_variant_get(&g1->v, "epilogue"), "store") != 0;
        const char *const q_kv[] = {"dtype", dt, "qtype", qt, "gran", gr, "act", "none", NULL};
        const char *const qa_kv[] = {"dtype", dt, "qtype", qt, "gran", gr, "act",
                                     fused ? "none" : act, NULL};
        qk = find_family(set, "act_quant", q_kv);
        ac = find_family(set, "act_quant", qa_kv);
        if (!qk)
            return mt_errf(msg, msg_size, MT_ERR_NOT_FOUND, "no quant kernel to go with %s",
                           gemm1_name);
    }
    if (!g2 || !al || !ac || !rd)
        return mt_errf(msg, msg_size, MT_ERR_NOT_FOUND, "no %s kernel to go with %s",
                       !g2 ? "gemm2" : !al ? "align" : !ac ? "act" : "reduce", gemm1_name);
    plan->step[MT_STEP_ALIGN] = *al;
    plan->step[MT_STEP_GEMM1] = *g1;
    plan->step[MT_STEP_ACT] = *ac;
    plan->step[MT_STEP_GEMM2] = *g2;
    plan->step[MT_STEP_REDUCE] = *rd;
    if (qk)
        plan->step[MT_STEP_QUANT] = *qk;
    return mt_moe_plan_check(plan, p, msg, msg_size);
}


/* xorshift64*, seeded per chunk so that parallel filling is deterministic. */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}
static float rnd_uniform(uint64_t *s) { return (float)(rnd(s) >> 40) * (1.0f / 16777216.0f); }
/* Approximately N(0,1): the sum of four uniforms, rescaled (cheap for GBs). */
static float rnd_normal(uint64_t *s)
{
    float u = rnd_uniform(s) + rnd_uniform(s) + rnd_uniform(s) + rnd_uniform(s);
    return (u - 2.0f) * 1.7320508f;
}

typedef struct fill_job {
    void *dst;
    mt_dtype dt;
    size_t begin, end;
    float scale;
    uint64_t seed;
} fill_job;

#define FILL_CHUNK (1u << 20)

static void *fill_worker(void *arg)
{
    fill_job *j = arg;
    float buf[4096];
    size_t es = mt_dtype_size(j->dt);
    for (size_t c = j->begin; c < j->end; c += FILL_CHUNK) {
        uint64_t s = j->seed ^ (0x9E3779B97F4A7C15ull * (c / FILL_CHUNK + 1));
        size_t stop = c + FILL_CHUNK < j->end ? c + FILL_CHUNK : j->end;
        for (size_t i = c; i < stop; i += 4096) {
            size_t n = stop - i < 4096 ? stop - i : 4096;
            for (size_t q = 0; q < n; q++)
                buf[q] = rnd_normal(&s) * j->scale;
            mt_from_float(buf, n, j->dt, (char *)j->dst + i * es);
        }
    }
    return NULL;
}

/* dst[n] ~ N(0,1) * scale in dtype dt, using all cores. */
static void fill_normal(void *dst, mt_dtype dt, size_t n, float scale, uint64_t seed)
{
    enum { MAXT = 32 };
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = cores < 1 ? 1 : cores > MAXT ? MAXT : (int)cores;
    size_t chunks = (n + FILL_CHUNK - 1) / FILL_CHUNK;
    if ((size_t)nt > chunks)
        nt = chunks ? (int)chunks : 1;
    pthread_t th[MAXT];
    fill_job jobs[MAXT];
    int started = 0;
    for (int t = 0; t < nt; t++) {
        size_t b = chunks * (size_t)t / (size_t)nt * FILL_CHUNK;
        size_t e = chunks * (size_t)(t + 1) / (size_t)nt * FILL_CHUNK;
        jobs[t] = (fill_job){dst, dt, b, e < n ? e : n, scale, seed};
        if (t > 0 && pthread_create(&th[t], NULL, fill_worker, &jobs[t]) == 0)
            started |= 1 << t;
        else if (t > 0)
            fill_worker(&jobs[t]);
    }
    fill_worker(&jobs[0]);
    for (int t = 1; t < nt; t++)
        if (started & (1 << t))
            pthread_join(th[t], NULL);
}

static int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }

void mt_quant_sizes(const mt_problem *p, int second, size_t *wbytes, size_t *nscale,
                    size_t *nzero)
{
    const int64_t rows = second ? p->K : 2 * p->N, cols = second ? p->N : p->K;
    const int64_t E = p->local_E, elems = E * rows * cols;
    const mt_quant_config *q = &p->quant;
    *nzero = 0;
    switch (mt_quant_granularity(q->mode)) {
    case MT_GRAN_NONE:
        *wbytes = (size_t)elems * mt_dtype_size(p->dtype);
        *nscale = 0;
        return;
    case MT_GRAN_TENSOR: *nscale = (size_t)E; break;
    case MT_GRAN_TOKEN: *nscale = (size_t)(E * rows); break;
    case MT_GRAN_BLOCK:
        *nscale = (size_t)(E * ceil_div64(rows, MT_QUANT_BLOCK) * ceil_div64(cols, MT_QUANT_BLOCK));
        break;
    case MT_GRAN_GROUP:
        *nscale = (size_t)(E * rows * (cols / q->group_size));
        *nzero = q->has_zero_point ? *nscale : 0;
        break;
    }
    *wbytes = (size_t)(q->mode == MT_QUANT_W4A16 ? elems / 2 : elems);
}

/* Unsigned asymmetric or signed symmetric parameters of one weight group. */
static void group_params(const float *w, int64_t n, int zp, int qmax_sym, int umax, float *s,
                         int *z)
{
    float lo = 0.0f, hi = 0.0f, amax = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        lo = fminf(lo, w[i]);
        hi = fmaxf(hi, w[i]);
        amax = fmaxf(amax, fabsf(w[i]));
    }
    if (zp) {
        *s = hi > lo ? (hi - lo) / (float)umax : 1.0f;
        float zf = rintf(-lo / *s);
        *z = zf < 0 ? 0 : zf > (float)umax ? umax : (int)zf;
    } else {
        *s = amax > 0.0f ? amax / (float)qmax_sym : 1.0f;
        *z = 0;
    }
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

mt_status mt_quantize_weights(const mt_problem *p, const float *w, int64_t rows, int64_t cols,
                              void *q, float *scale, uint8_t *zero)
{
    const mt_quant_mode mode = p->quant.mode;
    const mt_quant_gran gran = mt_quant_granularity(mode);
    if (gran == MT_GRAN_NONE)
        return MT_ERR_INVALID_ARG;
    uint8_t *qb = q;
    if (gran == MT_GRAN_GROUP) {
        const int64_t g = p->quant.group_size, ng = cols / g;
        const int zp = p->quant.has_zero_point, w4 = mode == MT_QUANT_W4A16;
        if (w4)
            memset(qb, 0, (size_t)(rows * cols / 2));
        for (int64_t r = 0; r < rows; r++)
            for (int64_t gi = 0; gi < ng; gi++) {
                const float *src = w + r * cols + gi * g;
                float sc;
                int z;
                group_params(src, g, zp, w4 ? 7 : 127, w4 ? 15 : 255, &sc, &z);
                scale[r * ng + gi] = sc;
                if (zp)
                    zero[r * ng + gi] = (uint8_t)z;
                for (int64_t i = 0; i < g; i++) {
                    const int64_t k = gi * g + i;
                    const int v = (int)rintf(src[i] / sc);
                    if (w4) {
                        const int nib = clampi(v + (zp ? z : 8), 0, 15);
                        qb[(r * cols + k) / 2] |= (uint8_t)(k & 1 ? nib << 4 : nib);
                    } else if (zp) {
                        qb[r * cols + k] = (uint8_t)clampi(v + z, 0, 255);
                    } else {
                        qb[r * cols + k] = (uint8_t)(int8_t)clampi(v, -127, 127);
                    }
                }
            }
        return MT_OK;
    }
    /* w8a8: a scale per matrix, per row, or per 128x128 block. */
    const mt_dtype qdt = mt_quant_act_dtype(mode);
    const int64_t bh = gran == MT_GRAN_TENSOR ? rows : gran == MT_GRAN_TOKEN ? 1 : MT_QUANT_BLOCK;
    const int64_t bw = gran == MT_GRAN_BLOCK ? MT_QUANT_BLOCK : cols;
    const int64_t nbc = ceil_div64(cols, bw);
    for (int64_t r0 = 0; r0 < rows; r0 += bh)
        for (int64_t c0 = 0; c0 < cols; c0 += bw) {
            const int64_t r1 = r0 + bh < rows ? r0 + bh : rows, c1 = c0 + bw < cols ? c0 + bw : cols;
            float amax = 0.0f;
            for (int64_t r = r0; r < r1; r++)
                for (int64_t c = c0; c < c1; c++)
                    amax = fmaxf(amax, fabsf(w[r * cols + c]));
            const float sc = mt_act_scale(amax, qdt);
            scale[(r0 / bh) * nbc + c0 / bw] = sc;
            for (int64_t r = r0; r < r1; r++)
                for (int64_t c = c0; c < c1; c++)
                    qb[r * cols + c] = qdt == MT_DTYPE_INT8 ? (uint8_t)mt_quant_int8(w[r * cols + c], sc)
                                                            : mt_quant_e4m3(w[r * cols + c], sc);
        }
    return MT_OK;
}

/* Quantized weights of one matrix, an expert per task over a few threads. */
typedef struct qweight_job {
    const mt_problem *p;
    int second;
    uint64_t seed;
    void *q;
    float *scale;
    uint8_t *zero;
    int64_t first, step;   /* experts first, first + step, ... */
} qweight_job;

static void *qweight_worker(void *arg)
{
    qweight_job *j = arg;
    const mt_problem *p = j->p;
    const int64_t rows = j->second ? p->K : 2 * p->N, cols = j->second ? p->N : p->K;
    const float sd = 1.0f / sqrtf((float)cols);
    size_t wbytes, nscale, nzero;
    mt_quant_sizes(p, j->second, &wbytes, &nscale, &nzero);
    const size_t qper = wbytes / (size_t)p->local_E, sper = nscale / (size_t)p->local_E;
    float *w = malloc((size_t)(rows * cols) * sizeof *w);
    if (!w)
        return (void *)1;
    for (int64_t e = j->first; e < p->local_E; e += j->step) {
        uint64_t s = j->seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(e + 1));
        for (int64_t i = 0; i < rows * cols; i++)
            w[i] = rnd_normal(&s) * sd;
        mt_quantize_weights(p, w, rows, cols, (char *)j->q + (size_t)e * qper,
                            j->scale + (size_t)e * sper,
                            j->zero ? j->zero + (size_t)e * sper : NULL);
    }
    free(w);
    return NULL;
}

static mt_status make_qweights(const mt_problem *p, int second, uint64_t seed, void *q,
                               float *scale, uint8_t *zero, char *msg, size_t msg_size)
{
    enum { MAXT = 16 };
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = cores < 1 ? 1 : cores > MAXT ? MAXT : (int)cores;
    if (nt > p->local_E)
        nt = (int)p->local_E;
    pthread_t th[MAXT];
    qweight_job jobs[MAXT];
    int started[MAXT] = {0}, failed = 0;
    for (int t = 0; t < nt; t++) {
        jobs[t] = (qweight_job){p, second, seed, q, scale, zero, t, nt};
        if (t > 0 && pthread_create(&th[t], NULL, qweight_worker, &jobs[t]) == 0)
            started[t] = 1;
    }
    for (int t = 0; t < nt; t++)
        if (!started[t])
            failed |= qweight_worker(&jobs[t]) != NULL;
    for (int t = 1; t < nt; t++) {
        void *ret = NULL;
        if (started[t] && pthread_join(th[t], &ret) == 0)
            failed |= ret != NULL;
    }
    return failed ? mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory quantizing weights")
                  : MT_OK;
}

/* The generator state mt_problem_data_make starts from for seed (the
 * routing draws from it first, the other data from offsets of it). */
static uint64_t data_state(uint64_t seed) { return seed * 0x9E3779B97F4A7C15ull + 12345; }

static void route(mt_problem_data *d, mt_routing routing, uint64_t *s)
{
    const mt_problem *p = &d->p;
    int32_t *perm = malloc((size_t)p->E * sizeof *perm);
    for (int64_t t = 0; t < p->M; t++) {
        for (int64_t e = 0; e < p->E; e++)
            perm[e] = (int32_t)e;
        for (int64_t j = 0; j < p->topk; j++) {
            int32_t e;
            if (routing == MT_ROUTING_BALANCED) {
                e = (int32_t)((t * p->topk + j) % p->E);
            } else {   /* partial Fisher-Yates over perm[j..E): distinct experts */
                int64_t pick = j + (int64_t)(rnd(s) % (uint64_t)(p->E - j));
                if (routing == MT_ROUTING_SKEWED && j == 0)
                    pick = 0;   /* every token's first slot goes to expert 0 */
                e = perm[pick];
                perm[pick] = perm[j];
                perm[j] = e;
            }
            d->h_topk_ids[t * p->topk + j] = e;
        }
        float sum = 0, logits[1024];
        for (int64_t j = 0; j < p->topk; j++) {
            logits[j] = expf(rnd_normal(s));
            sum += logits[j];
        }
        for (int64_t j = 0; j < p->topk; j++)
            d->h_topk_weights[t * p->topk + j] = logits[j] / sum;
    }
    free(perm);
}

int mt_experts_hit(const int32_t *topk_ids, int64_t slots, int64_t E, const int32_t *expert_map)
{
    unsigned char *seen = calloc((size_t)(E > 0 ? E : 1), 1);
    int hit = 0;
    if (!seen)
        return -1;
    for (int64_t i = 0; i < slots; i++) {
        const int32_t e = topk_ids[i];
        if (e < 0 || e >= E || (expert_map && expert_map[e] < 0) || seen[e])
            continue;
        seen[e] = 1;
        hit++;
    }
    free(seen);
    return hit;
}

mt_status mt_routing_seed_for_hits(const mt_problem *p, mt_routing routing, uint64_t first,
                                   uint64_t stride, int tries, int want, uint64_t *seed, int *hit)
{
    mt_problem_data d;
    memset(&d, 0, sizeof d);
    d.p = *p;
    const size_t slots = (size_t)(p->M * p->topk);
    d.h_topk_ids = malloc(slots * sizeof(int32_t) + 16);
    d.h_topk_weights = malloc(slots * sizeof(float) + 16);
    mt_status st = d.h_topk_ids && d.h_topk_weights ? MT_OK : MT_ERR_NO_MEMORY;
    *seed = first;
    *hit = -1;
    for (int k = 0; k < tries && !st; k++) {
        const uint64_t sd = first + stride * (uint64_t)k;
        uint64_t s = data_state(sd);
        route(&d, routing, &s);
        const int h = mt_experts_hit(d.h_topk_ids, (int64_t)slots, p->E, NULL);
        if (h < 0)
            st = MT_ERR_NO_MEMORY;
        else if (k == 0)
            *hit = h;
        if (h == want) {
            *seed = sd;
            *hit = h;
            break;
        }
    }
    free(d.h_topk_ids);
    free(d.h_topk_weights);
    return st;
}

mt_status mt_tuning_seed(const mt_problem *p, mt_routing routing, uint64_t *seed, int *hit)
{
    const int typical = routing == MT_ROUTING_UNIFORM && !p->has_expert_map;
    const int want = typical ? (int)lround(mt_expected_experts_hit(p)) : 0;
    return mt_routing_seed_for_hits(p, routing, (uint64_t)p->M, 1000, typical ? 256 : 1, want, seed, hit);
}

/* Copy bytes to a new device buffer, remembered in mem[*n] for freeing;
 * src NULL (or no bytes) leaves *dst NULL. */
static mt_status upload(CUdeviceptr *mem, int *n, const void *src, size_t bytes, const void **dst,
                        char *msg, size_t msg_size)
{
    mt_status st = MT_OK;
    CUdeviceptr ptr = 0;
    if (!src || !bytes) {
        *dst = NULL;
        return MT_OK;
    }
    MT_CU_TRY(mt_cu.cuMemAlloc(&ptr, bytes), msg, msg_size);
    mem[(*n)++] = ptr;
    MT_CU_TRY(mt_cu.cuMemcpyHtoD(ptr, src, bytes), msg, msg_size);
    *dst = (const void *)(uintptr_t)ptr;
    return MT_OK;
fail:
    return st;
}

mt_status mt_rank_slice_upload(const mt_problem_data *d, int64_t tok0, int64_t M, int64_t e0,
                               int64_t ne, mt_rank_slice *s, char *msg, size_t msg_size)
{
    const mt_problem *p = &d->p;
    memset(s, 0, sizeof *s);
    if (tok0 < 0 || M < 0 || tok0 + M > p->M || e0 < 0 || ne < 1 || e0 + ne > p->E)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                       "slice tokens [%lld, +%lld) experts [%lld, +%lld) outside M=%lld E=%lld",
                       (long long)tok0, (long long)M, (long long)e0, (long long)ne,
                       (long long)p->M, (long long)p->E);
    size_t wb[2], ns[2], nz[2];
    mt_quant_sizes(p, 0, &wb[0], &ns[0], &nz[0]);
    mt_quant_sizes(p, 1, &wb[1], &ns[1], &nz[1]);
    const size_t es = mt_dtype_size(p->dtype), E = (size_t)p->E, a = (size_t)e0, n = (size_t)ne;
    const int64_t rows = M > 0 ? M : 1;   /* a rank without tokens still has buffers */
    const int64_t t0 = tok0 < p->M ? tok0 : 0;
    mt_moe_tensors *t = &s->t;
    mt_status st = MT_OK;
    if ((st = upload(s->mem, &s->nmem, (const char *)d->h_hidden + (size_t)(t0 * p->K) * es,
                     (size_t)(rows * p->K) * es, &t->hidden, msg, msg_size)) ||
        (st = upload(s->mem, &s->nmem, d->h_topk_ids + t0 * p->topk,
                     (size_t)(rows * p->topk) * 4, (const void **)&t->topk_ids, msg, msg_size)) ||
        (st = upload(s->mem, &s->nmem, d->h_topk_weights + t0 * p->topk,
                     (size_t)(rows * p->topk) * 4, (const void **)&t->topk_weights, msg,
                     msg_size)) ||
        (st = upload(s->mem, &s->nmem, (const char *)d->h_w1 + wb[0] / E * a, wb[0] / E * n,
                     &t->w1, msg, msg_size)) ||
        (st = upload(s->mem, &s->nmem, (const char *)d->h_w2 + wb[1] / E * a, wb[1] / E * n,
                     &t->w2, msg, msg_size)) ||
        (ns[0] && (st = upload(s->mem, &s->nmem, d->h_w1_scale + ns[0] / E * a,
                               ns[0] / E * n * sizeof(float), (const void **)&t->w1_scale, msg,
                               msg_size))) ||
        (ns[1] && (st = upload(s->mem, &s->nmem, d->h_w2_scale + ns[1] / E * a,
                               ns[1] / E * n * sizeof(float), (const void **)&t->w2_scale, msg,
                               msg_size))) ||
        (nz[0] && (st = upload(s->mem, &s->nmem, d->h_w1_zero + nz[0] / E * a, nz[0] / E * n,
                               (const void **)&t->w1_zero, msg, msg_size))) ||
        (nz[1] && (st = upload(s->mem, &s->nmem, d->h_w2_zero + nz[1] / E * a, nz[1] / E * n,
                               (const void **)&t->w2_zero, msg, msg_size))) ||
        (p->quant.static_act_scale &&
         ((st = upload(s->mem, &s->nmem, &d->h_a_scale[0], sizeof(float),
                       (const void **)&t->a1_scale, msg, msg_size)) ||
          (st = upload(s->mem, &s->nmem, &d->h_a_scale[1], sizeof(float),
                       (const void **)&t->a2_scale, msg, msg_size)))))
        goto fail;
    const size_t out_bytes = (size_t)(rows * p->K) * es;
    CUdeviceptr out = 0;
    MT_CU_TRY(mt_cu.cuMemAlloc(&out, out_bytes), msg, msg_size);
    s->mem[s->nmem++] = out;
    MT_CU_TRY(mt_cu.cuMemsetD8(out, 0xFF, out_bytes), msg, msg_size);
    t->out = (void *)(uintptr_t)out;
    /* The uploads and the poison land before any (non-blocking) stream
     * reads them: see mt_problem_data_make. */
    MT_CU_TRY(mt_cu.cuCtxSynchronize(), msg, msg_size);
    return MT_OK;
fail:
    mt_rank_slice_free(s);
    return st;
}

void mt_rank_slice_free(mt_rank_slice *s)
{
    for (int i = 0; i < s->nmem; i++)
        mt_cu.cuMemFree(s->mem[i]);
    memset(s, 0, sizeof *s);
}

mt_status mt_problem_data_make(mt_problem_data *d, const mt_problem *p, mt_routing routing,
                               uint64_t seed, int upload_to_gpu, char *msg, size_t msg_size)
{
    memset(d, 0, sizeof *d);
    d->p = *p;
    mt_problem *q = &d->p;
    if (q->format == MT_FORMAT_BATCHED && q->max_tokens < 1)
        q->max_tokens = 1;   /* so validation passes; set properly below */
    mt_status st = mt_problem_validate(q, msg, msg_size);
    if (st)
        return st;
    uint64_t s = data_state(seed);
    const size_t es = mt_dtype_size(q->dtype);
    const size_t slots = (size_t)(q->M * q->topk);
    const int quant = q->quant.mode != MT_QUANT_NONE;
    size_t w1b, w2b, ns1, ns2, nz1, nz2;
    mt_quant_sizes(q, 0, &w1b, &ns1, &nz1);
    mt_quant_sizes(q, 1, &w2b, &ns2, &nz2);
    d->h_hidden = malloc((size_t)(q->M * q->K) * es + 16);
    d->h_w1 = malloc(w1b);
    d->h_w2 = malloc(w2b);
    if (quant) {
        d->h_w1_scale = malloc(ns1 * sizeof(float));
        d->h_w2_scale = malloc(ns2 * sizeof(float));
        d->h_w1_zero = nz1 ? malloc(nz1) : NULL;
        d->h_w2_zero = nz2 ? malloc(nz2) : NULL;
        if (!d->h_w1_scale || !d->h_w2_scale || (nz1 && !d->h_w1_zero) || (nz2 && !d->h_w2_zero)) {
            st = mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of host memory for the scales");
            goto fail;
        }
    }
    d->h_topk_ids = malloc(slots * sizeof(int32_t) + 16);
    d->h_topk_weights = malloc(slots * sizeof(float) + 16);
    d->h_expert_map = malloc((size_t)q->E * sizeof(int32_t));
    if (!d->h_hidden || !d->h_w1 || !d->h_w2 || !d->h_topk_ids || !d->h_topk_weights ||
        !d->h_expert_map) {
        st = mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of host memory for the problem data");
        goto fail;
    }
    fill_normal(d->h_hidden, q->dtype, (size_t)(q->M * q->K), 1.0f, s + 1);
    if (!quant) {
        fill_normal(d->h_w1, q->dtype, (size_t)(q->local_E * 2 * q->N * q->K),
                    1.0f / sqrtf((float)q->K), s + 2);
        fill_normal(d->h_w2, q->dtype, (size_t)(q->local_E * q->K * q->N),
                    1.0f / sqrtf((float)q->N), s + 3);
    } else if ((st = make_qweights(q, 0, s + 2, d->h_w1, d->h_w1_scale, d->h_w1_zero, msg,
                                   msg_size)) ||
               (st = make_qweights(q, 1, s + 3, d->h_w2, d->h_w2_scale, d->h_w2_zero, msg,
                                   msg_size))) {
        goto fail;
    }
    if (q->quant.static_act_scale) {
        const mt_dtype qdt = mt_quant_act_dtype(q->quant.mode);
        float amax = 0.0f, row[1024];
        for (int64_t i = 0; i < q->M * q->K; i += 1024) {
            int64_t n = q->M * q->K - i < 1024 ? q->M * q->K - i : 1024;
            mt_to_float((const char *)d->h_hidden + (size_t)i * es, q->dtype, (size_t)n, row);
            for (int64_t k = 0; k < n; k++)
                amax = fmaxf(amax, fabsf(row[k]));
        }
        d->h_a_scale[0] = mt_act_scale(amax, qdt);
        d->h_a_scale[1] = mt_act_scale(12.0f, qdt);
    }
    route(d, routing, &s);
    for (int64_t e = 0; e < q->E; e++)
        d->h_expert_map[e] = (int32_t)e;
    if (q->has_expert_map) {   /* a random local_E of the experts live here */
        for (int64_t e = q->E - 1; e > 0; e--) {
            int64_t k = (int64_t)(rnd(&s) % (uint64_t)(e + 1));
            int32_t tmp = d->h_expert_map[e];
            d->h_expert_map[e] = d->h_expert_map[k];
            d->h_expert_map[k] = tmp;
        }
        int32_t *local_of = malloc((size_t)q->E * sizeof *local_of);
        if (!local_of) {
            st = mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
            goto fail;
        }
        for (int64_t e = 0; e < q->E; e++)
            local_of[e] = -1;
        for (int64_t i = 0; i < q->local_E; i++)
            local_of[d->h_expert_map[i]] = (int32_t)i;
        memcpy(d->h_expert_map, local_of, (size_t)q->E * sizeof *local_of);
        free(local_of);
    }
    d->h_std = (mt_moe_tensors){.hidden = d->h_hidden, .w1 = d->h_w1, .w2 = d->h_w2,
                                .topk_ids = d->h_topk_ids, .topk_weights = d->h_topk_weights,
                                .expert_map = q->has_expert_map ? d->h_expert_map : NULL,
                                .w1_scale = d->h_w1_scale, .w2_scale = d->h_w2_scale,
                                .w1_zero = d->h_w1_zero, .w2_zero = d->h_w2_zero,
                                .a1_scale = q->quant.static_act_scale ? &d->h_a_scale[0] : NULL,
                                .a2_scale = q->quant.static_act_scale ? &d->h_a_scale[1] : NULL};
    d->h = d->h_std;
    if (q->format == MT_FORMAT_BATCHED) {
        int64_t maxc = 1;
        d->h_counts = calloc((size_t)q->local_E, sizeof(int32_t));
        if (!d->h_counts) {
            st = mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
            goto fail;
        }
        for (size_t i = 0; i < slots; i++) {
            int32_t le = d->h_expert_map[d->h_topk_ids[i]];
            if (le >= 0 && ++d->h_counts[le] > maxc)
                maxc = d->h_counts[le];
        }
        q->max_tokens = maxc;
        size_t rows = (size_t)(q->local_E * maxc);
        d->h_bhidden = malloc(rows * (size_t)q->K * es);
        d->h_row_slot = malloc(rows * sizeof(int32_t));
        d->h_slot_row = malloc(slots * sizeof(int32_t) + 16);
        if (!d->h_bhidden || !d->h_row_slot || !d->h_slot_row) {
            st = mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
            goto fail;
        }
        if ((st = mt_oracle_batched_dispatch(q, &d->h_std, d->h_bhidden, d->h_counts,
                                             d->h_row_slot, msg, msg_size)))
            goto fail;
        for (size_t i = 0; i < slots; i++)
            d->h_slot_row[i] = -1;
        for (size_t r = 0; r < rows; r++)
            if (d->h_row_slot[r] >= 0)
                d->h_slot_row[d->h_row_slot[r]] = (int32_t)r;
        d->h.hidden = d->h_bhidden;
        d->h.expert_num_tokens = d->h_counts;
    }
    if (!upload_to_gpu)
        return MT_OK;
    {
        const int batched = q->format == MT_FORMAT_BATCHED;
        const size_t hbytes = batched ? (size_t)(q->local_E * q->max_tokens * q->K) * es
                                      : (size_t)(q->M * q->K) * es;
        const void *tmp = NULL;
        if ((st = upload(d->d_mem, &d->nd_mem, d->h.hidden, hbytes, &d->d.hidden, msg, msg_size)) ||
            (st = upload(d->d_mem, &d->nd_mem, d->h_w1, w1b, &d->d.w1, msg, msg_size)) ||
            (st = upload(d->d_mem, &d->nd_mem, d->h_w2, w2b, &d->d.w2, msg, msg_size)) ||
            (st = upload(d->d_mem, &d->nd_mem, d->h_topk_ids, slots * sizeof(int32_t), &tmp, msg, msg_size)))
            goto fail;
        d->d.topk_ids = tmp;
        if ((st = upload(d->d_mem, &d->nd_mem, d->h_topk_weights, slots * sizeof(float), &tmp, msg, msg_size)))
            goto fail;
        d->d.topk_weights = tmp;
        if ((st = upload(d->d_mem, &d->nd_mem, q->has_expert_map ? d->h_expert_map : NULL,
                         (size_t)q->E * sizeof(int32_t), &tmp, msg, msg_size)))
            goto fail;
        d->d.expert_map = tmp;
        if ((st = upload(d->d_mem, &d->nd_mem, d->h_counts, (size_t)q->local_E * sizeof(int32_t), &tmp, msg,
                         msg_size)))
            goto fail;
        d->d.expert_num_tokens = tmp;
        if ((st = upload(d->d_mem, &d->nd_mem, d->h_slot_row, slots * sizeof(int32_t), &tmp, msg, msg_size)))
            goto fail;
        d->d_slot_row = (CUdeviceptr)(uintptr_t)tmp;
        if ((st = upload(d->d_mem, &d->nd_mem, d->h_w1_scale, ns1 * sizeof(float), &tmp, msg, msg_size)))
            goto fail;
        d->d.w1_scale = tmp;
        if ((st = upload(d->d_mem, &d->nd_mem, d->h_w2_scale, ns2 * sizeof(float), &tmp, msg, msg_size)))
            goto fail;
        d->d.w2_scale = tmp;
        if ((st = upload(d->d_mem, &d->nd_mem, d->h_w1_zero, nz1, &tmp, msg, msg_size)))
            goto fail;
        d->d.w1_zero = tmp;
        if ((st = upload(d->d_mem, &d->nd_mem, d->h_w2_zero, nz2, &tmp, msg, msg_size)))
            goto fail;
        d->d.w2_zero = tmp;
        if ((st = upload(d->d_mem, &d->nd_mem, q->quant.static_act_scale ? d->h_a_scale : NULL, 2 * sizeof(float),
                         &tmp, msg, msg_size)))
            goto fail;
        d->d.a1_scale = tmp;
        d->d.a2_scale = tmp ? (const float *)tmp + 1 : NULL;
        CUdeviceptr out = 0;
        size_t obytes = batched ? hbytes : (size_t)(q->M * q->K) * es;
        MT_CU_TRY(mt_cu.cuMemAlloc(&out, obytes ? obytes : 16), msg, msg_size);
        d->d_mem[d->nd_mem++] = out;
        d->d.out = (void *)(uintptr_t)out;
        /* A copy from pageable memory may return before its DMA lands, and
         * the legacy stream it rides does not order the non-blocking streams
         * the work runs on: wait for every upload here. */
        MT_CU_TRY(mt_cu.cuCtxSynchronize(), msg, msg_size);
    }
    return MT_OK;
fail:
    mt_problem_data_free(d);
    return st;
}

void mt_problem_data_free(mt_problem_data *d)
{
    if (!d)
        return;
    for (int i = 0; i < d->nd_mem; i++)
        mt_cu.cuMemFree(d->d_mem[i]);
    free(d->h_hidden);
    free(d->h_bhidden);
    free(d->h_w1);
    free(d->h_w2);
    free(d->h_w1_scale);
    free(d->h_w2_scale);
    free(d->h_w1_zero);
    free(d->h_w2_zero);
    free(d->h_topk_ids);
    free(d->h_topk_weights);
    free(d->h_expert_map);
    free(d->h_counts);
    free(d->h_row_slot);
    free(d->h_slot_row);
    memset(d, 0, sizeof *d);
}

double mt_rel_l2(const void *got, mt_dtype dt, const float *ref, const int64_t *rows,
                 int64_t nrows, int64_t K, int64_t *nan_count)
{
    double num = 0, den = 0;
    int64_t nans = 0;
    float buf[1024];
    size_t es = mt_dtype_size(dt);
    for (int64_t i = 0; i < nrows; i++) {
        int64_t r = rows ? rows[i] : i;
        for (int64_t c = 0; c < K; c += 1024) {
            int64_t n = K - c < 1024 ? K - c : 1024;
            mt_to_float((const char *)got + (size_t)(r * K + c) * es, dt, (size_t)n, buf);
            for (int64_t q = 0; q < n; q++) {
                double g = buf[q], f = ref[r * K + c + q];
                if (!isfinite(g)) {
                    nans++;
                    continue;
                }
                num += (g - f) * (g - f);
                den += f * f;
            }
        }
    }
    if (nan_count)
        *nan_count = nans;
    return den > 0 ? sqrt(num / den) : sqrt(num);
}
