/*
 * Candidate selection by a cheap model (see select.h).
 */
#include "tuner/select.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/defaults.h"
#include "templates/gemv_args.h"

/* Calibration, from GEMM kernels timed alone on the H200 (tuner logs and
 * `moetune bench` step times, docs/PERFORMANCE.md, session 4): */
#define MODEL_BW 4.0e12        /* bytes/s a saturating weight stream reaches */
#define MODEL_CTA_US 5.0       /* a CTA's fixed cost: row gather, ramp, epilogue */
#define MODEL_SPLIT_US 4.0     /* split-K: the partials' store, fence, count, sum */
#define MODEL_STEP_US 1.7      /* one K step's load latency, hidden STAGES-1 deep */

/* Bytes of one weight / activation element as the GEMM reads them. */
static double weight_bytes_per_el(const mt_problem *p)
{
    if (mt_quant_is_w8a8(p->quant.mode) || p->quant.mode == MT_QUANT_W8A16)
        return 1.0;
    return p->quant.mode == MT_QUANT_W4A16 ? 0.5 : (double)mt_dtype_size(p->dtype);
}

static double act_bytes_per_el(const mt_problem *p)
{
    return mt_quant_is_w8a8(p->quant.mode) ? 1.0 : (double)mt_dtype_size(p->dtype);
}

/* What both models read off the problem for GEMM1 (second = 0) or GEMM2:
 * rows per expert, slots, experts hit, product columns, K, weight bytes
 * per element. */
typedef struct gemm_dims {
    double rows, slots, busy, n_out, k, wb;
} gemm_dims;

static gemm_dims dims_of(const mt_problem *p, int second)
{
    const int64_t slots = p->M * p->topk;
    gemm_dims d = {.rows = mt_rows_per_expert(p), .slots = (double)slots,
                   .busy = (double)(slots < p->local_E ? slots : p->local_E),
                   .n_out = second ? (double)p->K : 2.0 * (double)p->N,
                   .k = second ? (double)p->N : (double)p->K, .wb = weight_bytes_per_el(p)};
    return d;
}

/* grouped_gemv (decode, CUDA cores): the weights are read once per row
 * block and pass of up to 8 rows (4 for 8-bit operands), at the bandwidth
 * the lanes' loads in flight sustain (UNROLL chunks of 16 bytes for each of
 * a pair's two rows; about 48 KiB an SM saturate it, at some two CTAs of
 * 256 threads an SM by registers); the products run at about 25 TFLOP/s
 * of fp32 FMAs with the conversions; a CTA takes at least a load latency
 * per round of chunks. */
#define GEMV_FLOPS 25e12
#define GEMV_INFLIGHT (48.0 * 1024.0)
#define GEMV_CTA_US 2.0
#define GEMV_ROUND_US 1.0
/* The alignment step a GEMM1 with aligned row blocks brings along (alone
 * 6.5-8 us at one token on the H200, partly hidden under the next step:
 * docs/PERFORMANCE.md, session 6), which a slot-routed grouped_gemv
 * (BLOCK_M 1) does without. Counted in GEMM1's model only. */
#define MODEL_ALIGN_US 4.0
/* Likewise the reduce step a GEMM2 that stores per slot leaves (alone
 * 4.7-5.3 us at one token on the H200, session 6), which a GEMM2 summing
 * the topk itself (grouped_gemv's epilogue "sum" or "lastsum") does
 * without. Counted in GEMM2's model only. */
#define MODEL_REDUCE_US 3.0
/* What "lastsum" costs in its place: every CTA counts itself in after a
 * fence, and the last of a token's reads their rows from L2 and sums them,
 * at the end of the GEMM. On an H100 (session 44, one token, four problems)
 * its GEMM2 alone took 2.3-3.2 us longer than the store twin's, and the
 * pipeline 0.9-2.0 us longer than with the store and the reduce step. */
#define MODEL_LAST_SUM_US 4.0
/* Likewise the act step (the activation and the quantization of GEMM2's A
 * rows, alone 5.0-5.4 us at one token on the H200, session 45) that a
 * GEMM2 quantizing its own A rows (grouped_gemv AQUANT=silu, gelu; its
 * CTAs each quantize their slots' rows again, from L2, which the model
 * does not weigh) or a GEMM1 quantizing its output (OQUANT=last: a counter
 * per CTA, and the last CTA of each group quantizes it) does without.
 * Counted in the model of the GEMM that does its work. */
#define MODEL_ACT_US 3.0

static double gemv_model_us(const mt_variant *v, const mt_problem *p, int second, int sm_count)
{
    const double bm = (double)mt_variant_int(v, "BLOCK_M", 8);
    const double bn = (double)mt_variant_int(v, "BLOCK_N", 16);
    const double threads = fmax(32.0, (double)v->threads);
    const double unroll = (double)mt_variant_int(v, "UNROLL", 2);
    /* "sum": a CTA per token and column block, walking the token's slots. */
    const char *epi = mt_variant_get(v, "epilogue");
    const int sums = second && epi && !strcmp(epi, "sum");
    /* "lastsum": the store's CTAs, the last of a token's adding its rows. */
    const int last = second && epi && !strcmp(epi, "lastsum");
    const double per_cta = sums ? (double)p->topk : 1.0;
    const gemm_dims d = dims_of(p, second);
    const double rows = d.rows, slots = d.slots, busy = d.busy, n_out = d.n_out, k = d.k, wb = d.wb;
    const double mblocks = ceil(rows / bm);
    const double passes = ceil(fmin(rows, bm) / (wb >= 2.0 ? 8.0 : 4.0));
    const double bytes = busy * n_out * k * wb * mblocks * passes;
    const double t_fma = 2.0 * slots * n_out * k / GEMV_FLOPS;
    const double per_sm = fmax(1.0, floor(fmin(2048.0 / threads, 65536.0 / (threads * 128.0))));
    const double inflight = per_sm * threads * unroll * 32.0;
    const double bw = MODEL_BW * fmin(1.0, inflight / GEMV_INFLIGHT);
    /* Lanes along K per pair of rows: 32 / (pairs per warp). */
    const double lanes_k = 32.0 / fmax(1.0, bn / 2.0 / (threads / 32.0));
    const double rounds = ceil(per_cta * k / (16.0 / wb * lanes_k * unroll));
    const double ctas = (sums ? (double)p->M : busy * mblocks) * ceil(n_out / bn);
    const double waves = ceil(ctas / ((double)sm_count * per_sm));
    const double t_mem = fmax(bytes / bw, waves * (GEMV_CTA_US + rounds * GEMV_ROUND_US) * 1e-6);
    const int no_act = second ? mt_variant_a_activation(v) != NULL : mt_variant_quantizes_out(v);
    const double steps_us = (second || bm == 1.0 ? 0.0 : MODEL_ALIGN_US) - (sums || last ? MODEL_REDUCE_US : 0.0) +
                            (last ? MODEL_LAST_SUM_US : 0.0) - (no_act ? MODEL_ACT_US : 0.0);
    return fmax(0.1, fmax(t_mem, t_fma) * 1e6 + steps_us);
}

double mt_gemm_model_us(const mt_variant *v, const mt_problem *p, int second, int sm_count)
{
    if (!strcmp(v->family, "grouped_gemv"))
        return gemv_model_us(v, p, second, sm_count);
    const double bm = (double)mt_variant_int(v, "BLOCK_M", 64);
    /* A fused tile covers bn/2 gate and bn/2 up columns: the same work as a
     * plain tile of bn columns, so no correction is needed. */
    const double bn = (double)mt_variant_int(v, "BLOCK_N", 64);
    const double bk = (double)mt_variant_int(v, "BLOCK_K", 64);
    const double stages = (double)mt_variant_int(v, "STAGES", 3);
    const gemm_dims d = dims_of(p, second);
    const double rows = d.rows, slots = d.slots, busy = d.busy, n_out = d.n_out, k = d.k, wb = d.wb;
    const double mblocks = ceil(rows / bm);
    const int sm90 = !strcmp(v->family, "grouped_gemm_sm90");
    /* Weights are re-read once per row block of an expert; GROUP_M ordering
     * lets neighbouring row blocks share them through L2. Activation rows
     * are re-read once per column tile, mostly from L2 (a quarter). */
    const double reread = mt_variant_int(v, "GROUP_M", 1) > 1 ? 1.0 + (mblocks - 1.0) * 0.25 : mblocks;
    const double weight_bytes = busy * n_out * k * wb * reread +
                                0.25 * slots * k * act_bytes_per_el(p) * ceil(n_out / bn);
    const double flops = 2.0 * busy * mblocks * bm * n_out * k;
    /* mma.sync: bigger warp tiles use the tensor cores better (fewer shared
     * loads per MMA), at most half the peak. Warpgroup MMA reads both
     * operands from shared memory itself; a wider N amortizes the reads of
     * its 64-row operand. */
    double mma_eff;
    if (sm90) {
        /* The MMA's N: the weight rows, or with swapped operands the token
         * rows (SWAP, templates/grouped_gemm_sm90.lua). */
        const char *swap = mt_variant_get(v, "SWAP");
        const double mma_n = swap && !strcmp(swap, "yes") ? bm : bn;
        mma_eff = 0.8 * fmin(1.0, sqrt(mma_n / 128.0));
    } else {
        const double wm = bm / (double)mt_variant_int(v, "WARPS_M", 1);
        const double wn = bn / (double)mt_variant_int(v, "WARPS_N", 1);
        mma_eff = fmin(1.0, sqrt(wm * wn / (64.0 * 64.0))) * 0.5;
    }
    /* Split-K: SPLIT_K CTAs per tile, each streaming a 1/SPLIT_K slice of
     * K: shorter CTAs (the latency term below), for the price of each CTA
     * writing its fp32 tile and the tile's last CTA reading them all back. */
    const double sk = (double)mt_variant_int(v, "SPLIT_K", 1);
    const double tiles = busy * mblocks * ceil(n_out / bn);
    const double bytes = weight_bytes + (sk > 1.0 ? tiles * 2.0 * sk * bm * bn * 4.0 : 0.0);
    const double ctas = tiles * sk;
    const double warps = fmax(1.0, (double)v->threads / 32.0);
    const double per_sm = fmax(1.0, floor(fmin(fmin(2048.0 / fmax(32.0, (double)v->threads), 32.0),
                                               228.0 * 1024.0 / ((double)v->smem_bytes + 1024.0))));
    /* The weight stream's efficiency (mma.sync tiles, timed on the H200):
     * rows read in runs under 128 bytes per K step waste DRAM bursts (64
     * bytes: 0.76), and fewer than 16 resident warps per SM keep too few
     * copies and MMAs in flight (2 warps: about 0.45, 8: 0.9). */
    const double b_row = bk * wb;
    const double f_row = b_row >= 128.0 ? 1.0 : pow(b_row / 128.0, 0.4);
    const double warps_sm = per_sm * warps;
    const double f_occ = sm90 || warps_sm >= 16.0 ? 1.0 : 1.0 - 0.55 * pow(1.0 - warps_sm / 16.0, 1.5);
    /* Warpgroup-MMA tiles whose copying warpgroup brings the weights in
     * by cp.async row copies (BLOAD=cp) against one TMA bulk copy a stage:
     * 8-16 % slower at the same tile where that was timed (large M,
     * docs/PERFORMANCE.md, session 6); a small factor here, so that the
     * TMA twin of a tile ranks first. */
    const char *bload = mt_variant_get(v, "BLOAD");
    const double f_load = sm90 && bload && !strcmp(bload, "cp") ? 0.97 : 1.0;
    const double bw = MODEL_BW * f_row * f_occ * f_load;
    /* Waves of CTAs: a wave takes as long as its bytes at bw, but no less
     * than one CTA's own latency chain (fixed cost plus its K steps, each
     * a load latency divided over the STAGES-1 loads in flight). */
    const double k_steps = ceil(ceil(k / bk) / sk);
    const double cta_s = (MODEL_CTA_US + (sk > 1.0 ? MODEL_SPLIT_US : 0.0) +
                          k_steps * MODEL_STEP_US / fmax(1.0, stages - 1.0)) * 1e-6;
    const double wave_ctas = (double)sm_count * per_sm;
    const double full = floor(ctas / wave_ctas), rest = ctas - full * wave_ctas;
    const double per_cta = bytes / fmax(1.0, ctas);
    const double t_mem = full * fmax(wave_ctas * per_cta / bw, cta_s) +
                         (rest > 0.0 ? fmax(rest * per_cta / bw, cta_s) : 0.0);
    const double t = fmax(t_mem, flops / (790e12 * mma_eff));
    /* A tiled GEMM1 quantizing its output for GEMM2 (OQUANT=last) saves
     * the act launch, but the last tile of each group reads the group back
     * from L2 and quantizes it in its epilogue, on the computing
     * warpgroups, and that GEMM1 grew by 0.9x to 4x the act step's time:
     * every pipeline with it timed so far was slower than with its
     * step-fed twin (1.003x to 1.31x; H100 sessions 53 and 55, H200
     * session 54, docs/PERFORMANCE.md). So it is modelled as the twin and
     * the act launch more: it ranks just behind the twin, which stage 1
     * takes, and stage 3's OQUANT round still times it against the
     * winner. */
    const double oq_us = !second && mt_variant_quantizes_out(v) ? MODEL_ACT_US : 0.0;
    return t * 1e6 + (second ? 0.0 : MODEL_ALIGN_US) + oq_us;
}

typedef struct ranked {
    size_t idx;
    double us;
} ranked;

static int by_time(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->us != y->us)
        return x->us < y->us ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* The parameters that must change with param for some of its values
 * (NULL-terminated): a PIPE may need other weight loads or, for a wide
 * tile to run "persist", its epilogue in
 * column chunks, and a "persist" tile of PAD_SKIP yes leaves it for the
 * other pipelines with PAD_SKIP no (a tile of TURNS yes for "sync" with
 * TURNS no); CTA pairs exist only with column
 * chunks; a swapped warpgroup-MMA tile splits K only in PIPE ws; a longer
 * K tile holds more bytes a stage, so it may need fewer stages; a register
 * cap of SM_WARPS warps an SM is whole CTAs of some WARPS only (20: of 4). */
static const char *const *followers_of(const char *param)
{
    static const char *const pipe[] = {"BLOAD", "EPI_COLS", "PAD_SKIP", "TURNS", NULL}, *const chunks[] = {"CLUSTER", NULL},
                             *const split[] = {"PIPE", NULL}, *const stages[] = {"STAGES", NULL},
                             *const cap[] = {"SM_WARPS", NULL}, *const none[] = {NULL};
    return !strcmp(param, "PIPE")       ? pipe
           : !strcmp(param, "EPI_COLS") ? chunks
           : !strcmp(param, "SPLIT_K")  ? split
           : !strcmp(param, "BLOCK_K")  ? stages
           : !strcmp(param, "WARPS")    ? cap
                                        : none;
}

/* Along BLOCK_K, of two neighbours with the same BLOCK_K, whether cand is
 * the better one: the one whose stages hold nearer the bytes of K that
 * base's hold (STAGES x BLOCK_K), so that the round weighs the K tile's
 * length and not the pipeline's depth (the STAGES round comes after it). */
static int64_t k_in_flight(const mt_variant *v)
{
    return mt_variant_int(v, "STAGES", 0) * mt_variant_int(v, "BLOCK_K", 0);
}

static int nearer_depth(const mt_variant *base, const mt_variant *have, const mt_variant *cand)
{
    const int64_t want = k_in_flight(base);
    return llabs(k_in_flight(cand) - want) < llabs(k_in_flight(have) - want);
}

size_t mt_select_neighbours(const mt_variant *all, size_t n, const mt_variant *base, const char *param,
                            size_t *out)
{
    const char *have = mt_variant_get(base, param);
    const char *const *followers = followers_of(param);
    size_t count = 0;
    /* A tile's width is the model's to rank, but for a swapped tile (a few
     * tokens per expert): its weight rows set how evenly the tiles spread
     * over the SMs, which the model's waves weigh coarsely. */
    const char *swap = mt_variant_get(base, "SWAP");
    if (!strcmp(param, "BLOCK_N") && !(swap && !strcmp(swap, "yes")))
        return 0;
    /* Pass 0 frees param alone, pass i > 0 param and followers[i - 1]. */
    for (int pass = 0; have && (pass == 0 || followers[pass - 1]); pass++)
        for (size_t k = 0; k < n; k++) {
            const char *val = mt_variant_get(&all[k], param);
            if (!val || !strcmp(val, have) || strcmp(all[k].arch, base->arch) ||
                !mt_variant_differs_only_in(&all[k], base, param, pass ? followers[pass - 1] : NULL))
                continue;
            size_t seen = count;
            for (size_t j = 0; j < count && seen == count; j++)
                if (!strcmp(mt_variant_get(&all[out[j]], param), val))
                    seen = j;
            if (seen == count)
                out[count++] = k;
            else if (!strcmp(param, "BLOCK_K") && nearer_depth(base, &all[out[seen]], &all[k]))
                out[seen] = k;
        }
    return count;
}

/* Parameters in which a GEMM1 tile and its GEMM2 sibling may differ. */
static const char *const sibling_free[] = {"epilogue", "AQUANT", "OQUANT", NULL};

int mt_is_gemm2_sibling(const mt_variant *u, const mt_variant *v)
{
    if (mt_variant_chain(v) > 0)
        return mt_variant_is_chain_gemm2(u, v);
    const char *epi = mt_variant_get(u, "epilogue"), *aq = mt_variant_get(u, "AQUANT"),
               *oq = mt_variant_get(u, "OQUANT");
    return epi && !strcmp(epi, "store") && (!aq || !strcmp(aq, "step")) && (!oq || !strcmp(oq, "step")) &&
           !strcmp(u->arch, v->arch) && mt_variant_differs_only_among(u, v, sibling_free);
}

size_t mt_find_store_sibling(const mt_variant *all, size_t n, const mt_variant *v)
{
    for (size_t i = 0; i < n; i++)
        if (mt_is_gemm2_sibling(&all[i], v))
            return i;
    return (size_t)-1;
}

/* Variants ordered by everything but their epilogue and OQUANT (family,
 * arch, then the parameters in declaration order), so that a GEMM1 tile
 * finds its store sibling by binary search among the store tiles (a tile
 * that quantizes its output, OQUANT=last, has a fused activation and no
 * store form: its sibling is the step-fed one's). (A linear scan
 * per tile made stage 1 quadratic: 15 s for the 32,850 bf16 grouped_gemm
 * tiles of sm_90a.) */
static int cmp_but_epilogue(const void *x, const void *y)
{
    const mt_variant *a = *(const mt_variant *const *)x, *b = *(const mt_variant *const *)y;
    int c = strcmp(a->family, b->family);
    if (c || (c = strcmp(a->arch, b->arch)))
        return c;
    if (a->nparams != b->nparams)
        return a->nparams < b->nparams ? -1 : 1;
    for (int i = 0; i < a->nparams; i++) {
        if ((c = strcmp(a->params[i].name, b->params[i].name)))
            return c;
        if (strcmp(a->params[i].name, "epilogue") && strcmp(a->params[i].name, "OQUANT") &&
            (c = strcmp(a->params[i].value, b->params[i].value)))
            return c;
    }
    return 0;
}

/* The store tiles of all, sorted by cmp_but_epilogue; NULL when out of
 * memory. */
static const mt_variant **sorted_store_tiles(const mt_variant *all, size_t n, size_t *ns)
{
    const mt_variant **s = malloc((n ? n : 1) * sizeof *s);
    *ns = 0;
    if (!s)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        const char *epi = mt_variant_get(&all[i], "epilogue");
        if (epi && !strcmp(epi, "store"))
            s[(*ns)++] = &all[i];
    }
    qsort(s, *ns, sizeof *s, cmp_but_epilogue);
    return s;
}

int mt_gemm_role_fits(const mt_variant *v, const mt_problem *p, int second)
{
    const char *aload = mt_variant_get(v, "ALOAD"), *epi = mt_variant_get(v, "epilogue");
    const char *act = mt_variant_a_activation(v);
    if (mt_variant_chain(v) > 0 && second)
        return 0;   /* a GEMM1 running GEMM2 in its launch */
    if (act) {   /* GEMM2 activating GEMM1's stored output (its pair: mt_moe_plan_check) */
        const int64_t rows = epi && !strcmp(epi, "sum") ? p->topk : 1;
        if (!second || strcmp(act, mt_activation_name(p->activation)) || rows * p->N > MT_GEMV_AQ_MAX_K)
            return 0;
    } else if (mt_variant_quantizes_a(v)) {
        return !second && p->K <= MT_GEMV_AQ_MAX_K && !p->apply_router_weight_on_input;
    }
    if (second && mt_variant_quantizes_out(v))   /* it writes GEMM2's A (OQUANT=last) */
        return 0;
    if (mt_variant_sums_topk(v))   /* the topk sum: GEMM2 of the standard format */
        return second && p->format == MT_FORMAT_STANDARD &&
               (strcmp(v->family, "grouped_gemv") || strcmp(epi, "sum") ||
                p->topk <= MT_GEMV_SUM_MAX_TOPK);
    return second || p->format != MT_FORMAT_STANDARD || !aload || strcmp(aload, "tma") != 0;
}

int mt_gemm_pair_fits(const mt_variant *g1, const mt_variant *g2)
{
    const char *epi = mt_variant_get(g1, "epilogue");
    if (mt_variant_chain(g1) > 0)
        return mt_variant_is_chain_gemm2(g2, g1);
    return !mt_variant_a_activation(g2) || (epi && !strcmp(epi, "store"));
}


int mt_variant_sums_by_atomics(const mt_variant *v)
{
    const char *epi = mt_variant_get(v, "epilogue");
    return epi && !strcmp(epi, "sum") && strcmp(v->family, "grouped_gemv") != 0;
}

static size_t select_stage(const mt_variant *all, size_t n, const mt_variant *pool, size_t npool,
                           const mt_problem *p, int stage, int64_t block_m, const mt_variant *gemm1,
                           int sm_count, int max, size_t *out);

size_t mt_select_stage(const mt_variant *all, size_t n, const mt_problem *p, int stage,
                       int64_t block_m, int sm_count, int max, size_t *out)
{
    return select_stage(all, n, all, n, p, stage, block_m, NULL, sm_count, max, out);
}

size_t mt_select_stage_in(const mt_variant *all, size_t n, const mt_variant *pool, size_t npool,
                          const mt_problem *p, int stage, int64_t block_m, int sm_count, int max,
                          size_t *out)
{
    return select_stage(all, n, pool, npool, p, stage, block_m, NULL, sm_count, max, out);
}

size_t mt_select_gemm2_for(const mt_variant *all, size_t n, const mt_problem *p, const mt_variant *gemm1,
                           int sm_count, int max, size_t *out)
{
    return select_stage(all, n, all, n, p, 2, mt_variant_int(gemm1, "BLOCK_M", 0), gemm1, sm_count, max, out);
}

/* Stage `stage`'s candidates; with gemm1 (stage 2), only GEMM2s that can
 * follow it (mt_gemm_pair_fits), left out before the ranking so that they
 * take no candidate's place. */
static size_t select_stage(const mt_variant *all, size_t n, const mt_variant *pool, size_t npool,
                           const mt_problem *p, int stage, int64_t block_m, const mt_variant *gemm1,
                           int sm_count, int max, size_t *out)
{
    ranked *r = malloc((n ? n : 1) * sizeof *r);
    size_t m = 0, nstores = 0;
    const mt_variant **stores = sorted_store_tiles(pool, npool, &nstores);
    if (!r || !stores) {
        free(r);
        free(stores);
        return 0;
    }
    const char *act = mt_activation_name(p->activation);
    for (size_t i = 0; i < n; i++) {
        const char *epi = mt_variant_get(&all[i], "epilogue");
        /* A register cap (grouped_gemv SM_WARPS) is stage 3's to time: the
         * model cannot weigh it, and its copies of a tile would tie with it
         * and fill the candidates. MMA turns (grouped_gemm_sm90 TURNS=yes)
         * tie with their twins too, and lost to them (session 57): the
         * tuner leaves them out (worker.c refine_params). */
        const char *turns = mt_variant_get(&all[i], "TURNS");
        if (!epi || mt_variant_int(&all[i], "SM_WARPS", 0) > 0 || (turns && !strcmp(turns, "yes")))
            continue;
        if (stage == 1) {
            const mt_variant *key = &all[i];
            if ((strcmp(epi, "store") && strcmp(epi, act)) || !mt_gemm_role_fits(key, p, 0))
                continue;
            if (!bsearch(&key, stores, nstores, sizeof *stores, cmp_but_epilogue))
                continue;
        } else {
            const mt_variant *key = &all[i];
            if (!mt_variant_is_gemm2_epilogue(key) || mt_variant_int(key, "BLOCK_M", 0) != block_m ||
                !mt_gemm_role_fits(key, p, 1) || (gemm1 && !mt_gemm_pair_fits(gemm1, key)))
                continue;
            /* A tiled family's "sum" whose store twin is a candidate: stage 3
             * times it against the twin it chose (tuner/worker.c refinable);
             * grouped_gemv's sums are tiles of their own (a row block per
             * token). */
            if (mt_variant_sums_by_atomics(key) && bsearch(&key, stores, nstores, sizeof *stores, cmp_but_epilogue))
                continue;
        }
        r[m].idx = i;
        r[m].us = mt_gemm_model_us(&all[i], p, stage == 2, sm_count);
        m++;
    }
    free(stores);
    qsort(r, m, sizeof *r, by_time);
    /* The model is coarse: take the best of each tile shape first (so the
     * candidates differ in shape, not only in stages or warps; a split
     * factor makes another shape, so that split and unsplit tiles are both
     * timed; a warpgroup-MMA tile's K tile, one panel or two, does not:
     * stage 3's BLOCK_K round times the other one), no family taking more
     * than half of them (so that a family the
     * model favours, grouped_gemv at decode sizes, is still timed against
     * the others) and none modelled over 3x the best, then fill up in
     * model order. */
    size_t k = 0;
    const size_t family_cap = max > 1 ? (size_t)max / 2 : 1;
    for (int pass = 0; pass < 2 && k < (size_t)max; pass++)
        for (size_t i = 0; i < m && k < (size_t)max; i++) {
            if (r[i].idx == (size_t)-1)
                continue;
            const mt_variant *v = &all[r[i].idx];
            int shape_taken = 0;
            size_t same_family = 0;
            for (size_t j = 0; j < k && pass == 0; j++)
                same_family += !strcmp(all[out[j]].family, v->family);
            if (pass == 0 && (same_family >= family_cap || r[i].us > 3.0 * r[0].us))
                continue;
            for (size_t j = 0; j < k && pass == 0 && !shape_taken; j++) {
                const mt_variant *u = &all[out[j]];
                shape_taken = !strcmp(u->family, v->family) &&
                              mt_variant_int(u, "BLOCK_M", 0) == mt_variant_int(v, "BLOCK_M", 0) &&
                              mt_variant_int(u, "BLOCK_N", 0) == mt_variant_int(v, "BLOCK_N", 0) &&
                              (mt_variant_int(u, "BLOCK_K", 0) == mt_variant_int(v, "BLOCK_K", 0) ||
                               !strcmp(v->family, "grouped_gemm_sm90")) &&
                              mt_variant_int(u, "SPLIT_K", 1) == mt_variant_int(v, "SPLIT_K", 1) &&
                              !strcmp(mt_variant_get(u, "epilogue"), mt_variant_get(v, "epilogue"));
            }
            if (shape_taken)
                continue;
            out[k++] = r[i].idx;
            r[i].idx = (size_t)-1;
        }
    free(r);
    return k;
}

size_t mt_find_default(const mt_variant *defaults, size_t n, const mt_problem *p)
{
    const char *act = mt_activation_name(p->activation);
    for (size_t i = 0; i < n; i++)
        if (mt_default_gemm_is(&defaults[i], p) &&
            !strcmp(mt_variant_get(&defaults[i], "epilogue"), act))
            return i;
    return (size_t)-1;
}
