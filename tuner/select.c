/*
 * Candidate selection by a cheap model (see select.h).
 */
#include "tuner/select.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/defaults.h"

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

double mt_gemm_model_us(const mt_variant *v, const mt_problem *p, int second, int sm_count)
{
    const double bm = (double)mt_variant_int(v, "BLOCK_M", 64);
    /* A fused tile covers bn/2 gate and bn/2 up columns: the same work as a
     * plain tile of bn columns, so no correction is needed. */
    const double bn = (double)mt_variant_int(v, "BLOCK_N", 64);
    const double bk = (double)mt_variant_int(v, "BLOCK_K", 64);
    const double stages = (double)mt_variant_int(v, "STAGES", 3);
    const double rows = mt_rows_per_expert(p);
    const int64_t slots = p->M * p->topk;
    const double busy = (double)(slots < p->local_E ? slots : p->local_E);
    const double n_out = second ? (double)p->K : 2.0 * (double)p->N;
    const double k = second ? (double)p->N : (double)p->K;
    const double wb = weight_bytes_per_el(p);
    const double mblocks = ceil(rows / bm);
    const int sm90 = !strcmp(v->family, "grouped_gemm_sm90");
    /* Weights are re-read once per row block of an expert; GROUP_M ordering
     * lets neighbouring row blocks share them through L2. Activation rows
     * are re-read once per column tile, mostly from L2 (a quarter). */
    const double reread = mt_variant_int(v, "GROUP_M", 1) > 1 ? 1.0 + (mblocks - 1.0) * 0.25 : mblocks;
    const double weight_bytes = busy * n_out * k * wb * reread +
                                0.25 * (double)slots * k * act_bytes_per_el(p) * ceil(n_out / bn);
    const double flops = 2.0 * busy * mblocks * bm * n_out * k;
    /* mma.sync: bigger warp tiles use the tensor cores better (fewer shared
     * loads per MMA), at most half the peak. Warpgroup MMA reads both
     * operands from shared memory itself; wider N amortizes the A reads. */
    double mma_eff;
    if (sm90) {
        mma_eff = 0.8 * fmin(1.0, sqrt(bn / 128.0));
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
    const double bw = MODEL_BW * f_row * f_occ;
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
    return t * 1e6;
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

size_t mt_find_store_sibling(const mt_variant *all, size_t n, const mt_variant *v)
{
    for (size_t i = 0; i < n; i++)
        if (mt_variant_same_but(&all[i], v, "epilogue", "store"))
            return i;
    return (size_t)-1;
}

size_t mt_select_stage(const mt_variant *all, size_t n, const mt_problem *p, int stage,
                       int64_t block_m, int sm_count, int max, size_t *out)
{
    ranked *r = malloc((n ? n : 1) * sizeof *r);
    size_t m = 0;
    if (!r)
        return 0;
    const char *act = mt_activation_name(p->activation);
    for (size_t i = 0; i < n; i++) {
        const char *epi = mt_variant_get(&all[i], "epilogue");
        if (!epi)
            continue;
        if (stage == 1) {
            if (strcmp(epi, "store") && strcmp(epi, act))
                continue;
            if (mt_find_store_sibling(all, n, &all[i]) == (size_t)-1)
                continue;
        } else if (strcmp(epi, "store") || mt_variant_int(&all[i], "BLOCK_M", 0) != block_m) {
            continue;
        }
        r[m].idx = i;
        r[m].us = mt_gemm_model_us(&all[i], p, stage == 2, sm_count);
        m++;
    }
    qsort(r, m, sizeof *r, by_time);
    /* The model is coarse: take the best of each tile shape first (so the
     * candidates differ in shape, not only in stages or warps; a split
     * factor makes another shape, so that split and unsplit tiles are both
     * timed), then fill up in model order. */
    size_t k = 0;
    for (int pass = 0; pass < 2 && k < (size_t)max; pass++)
        for (size_t i = 0; i < m && k < (size_t)max; i++) {
            if (r[i].idx == (size_t)-1)
                continue;
            const mt_variant *v = &all[r[i].idx];
            int shape_taken = 0;
            for (size_t j = 0; j < k && pass == 0 && !shape_taken; j++) {
                const mt_variant *u = &all[out[j]];
                shape_taken = !strcmp(u->family, v->family) &&
                              mt_variant_int(u, "BLOCK_M", 0) == mt_variant_int(v, "BLOCK_M", 0) &&
                              mt_variant_int(u, "BLOCK_N", 0) == mt_variant_int(v, "BLOCK_N", 0) &&
                              mt_variant_int(u, "BLOCK_K", 0) == mt_variant_int(v, "BLOCK_K", 0) &&
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
