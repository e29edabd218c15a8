/*
 * Untuned defaults (see defaults.h).
 */
#include "common/defaults.h"

#include <stdio.h>
#include <string.h>

double mt_rows_per_expert(const mt_problem *p)
{
    const int64_t experts = p->local_E > 0 ? p->local_E : p->E;
    return experts > 0 ? (double)p->M * (double)p->topk / (double)experts : 0.0;
}

int64_t mt_default_block_m(const mt_problem *p)
{
    /* Rows per expert decide how full a row tile gets: decode-sized batches
     * leave most of a 64-row tile empty, large prefill batches fill 128. */
    const double a = mt_rows_per_expert(p);
    return a < 24 ? 16 : a < 192 ? 64 : 128;
}

void mt_default_gemm_for(const mt_problem *p, const char *arch, mt_default_gemm *out)
{
    const int64_t bm = mt_default_block_m(p);
    memset(out, 0, sizeof *out);
    snprintf(out->block_m, sizeof out->block_m, "%lld", (long long)bm);
    out->family = "grouped_gemm";
    /* The default set also has a split-K decode tile of 16 rows: the
     * untuned default is the unsplit one (the tuner may pick the other). */
    out->kv[0] = "SPLIT_K";
    out->kv[1] = "1";
    out->nkv = 1;
    const int wonly = p->quant.mode == MT_QUANT_W8A16 || p->quant.mode == MT_QUANT_W4A16;
    if (bm == 128 && !wonly && arch && !strcmp(arch, "sm_90a")) {
        const int eight = mt_quant_is_w8a8(p->quant.mode);
        out->family = "grouped_gemm_sm90";
        out->kv[0] = "BLOCK_N";
        out->kv[1] = eight ? "128" : "256";
        out->kv[2] = "PIPE";
        out->kv[3] = "ws";   /* its default tiles load weights by TMA */
        out->nkv = 2;
    }
}

/* What a variant without the parameter (made by a family, or a family
 * version, that lacks it) stands for; NULL: it is needed. */
static const char *absent_param_value(const char *name)
{
    return !strcmp(name, "SPLIT_K") ? "1" : NULL;
}

int mt_default_gemm_is(const mt_variant *v, const mt_problem *p)
{
    mt_default_gemm d;
    mt_default_gemm_for(p, v->arch, &d);
    const char *bm = mt_variant_get(v, "BLOCK_M");
    if (strcmp(v->family, d.family) || !bm || strcmp(bm, d.block_m))
        return 0;
    for (int i = 0; i < d.nkv; i++) {
        const char *have = mt_variant_get(v, d.kv[2 * i]);
        if (!have)
            have = absent_param_value(d.kv[2 * i]);
        if (!have || strcmp(have, d.kv[2 * i + 1]))
            return 0;
    }
    return 1;
}
