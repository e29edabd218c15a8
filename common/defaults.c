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

/* Append name=value to the pairs that single out the default tile (at most
 * six: kv's size; tests/test_runtime.c checks that every default is one
 * tile of the default set, which a pair left out would break). */
static void want(mt_default_gemm *out, const char *name, const char *value)
{
    if (2 * out->nkv + 2 > (int)(sizeof out->kv / sizeof out->kv[0]))
        return;
    out->kv[2 * out->nkv] = name;
    out->kv[2 * out->nkv + 1] = value;
    out->nkv++;
}

/* sm_90a: a warpgroup-MMA tile of the default set in every regime, the
 * nearest to the tiles that won the H200's tuning of the peer table's five
 * problems (db/tuned/nvidia-h200.db: bf16 and fp8 block-wise). Where
 * grouped_gemm's mma.sync tiles were the default, they took 1.1x to 3.0x
 * the tuned pipelines' time (session 36's table,
 * docs/measurements/2026-12-05-s36/gpu/call5/perf-table.md, its "default
 * us" column):
 * - under 24 rows per expert, the operands swapped (the weight rows are the
 *   MMA's 64-row side, the few tokens its N): 16 token rows a tile, 32 from
 *   12 rows per expert on, weights by TMA in a warp-specialized pipeline.
 *   Only for 16-bit operands and the block-scaled modes: with per-tensor
 *   or per-token scales a one-token batch's error sits near the GPU
 *   tests' tolerance under a changed summation order (session 22), so
 *   those keep grouped_gemm's 16-row tile;
 * - then 64-row tiles, below 64 rows per expert for 16-bit operands
 *   (warp-specialized, as their winners 64x192 and 64x256, which the
 *   default set lacks) and 192 for 8-bit ones (pingpong: two computing
 *   warpgroups taking tiles in turn, the fp8 winners up to 128 rows per
 *   expert; the per-tensor and per-token modes follow them untimed);
 * - beyond, 128-row warp-specialized tiles: 128x256 for 16-bit operands,
 *   128x128 for 8-bit ones. */
static void sm90_default(const mt_problem *p, mt_default_gemm *out)
{
    const double a = mt_rows_per_expert(p);
    const int eight = mt_quant_is_w8a8(p->quant.mode);
    const mt_quant_gran g = mt_quant_granularity(p->quant.mode);
    const int swap_ok = !eight || g == MT_GRAN_BLOCK;
    if (a < 24 && !swap_ok)
        return;   /* grouped_gemm's 16-row tile, as set by the caller */
    out->family = "grouped_gemm_sm90";
    out->nkv = 0;
    /* One 128-byte panel of K a stage: the default set's two-panel tiles
     * (16-bit BLOCK_K 128) are there for the GPU tests. */
    want(out, "BLOCK_K", eight ? "128" : "64");
    want(out, "OQUANT", "step");   /* the act step quantizes GEMM2's A */
    want(out, "TURNS", "no");      /* MMAs at once: the turns are the tuner's to weigh */
    if (a < 24) {
        snprintf(out->block_m, sizeof out->block_m, "%d", a < 12 ? 16 : 32);
        want(out, "SWAP", "yes");
        want(out, "BLOCK_N", "128");
        want(out, "PIPE", "ws");
        want(out, "SPLIT_K", "1");
    } else if (a < (eight ? 192 : 64)) {
        snprintf(out->block_m, sizeof out->block_m, "64");
        want(out, "SWAP", "no");
        want(out, "PIPE", eight ? "pingpong" : "ws");
        want(out, "ALOAD", "cp");
    } else {
        snprintf(out->block_m, sizeof out->block_m, "128");
        want(out, "BLOCK_N", eight ? "128" : "256");
        want(out, "PIPE", "ws");   /* its default tiles load weights by TMA */
    }
}

void mt_default_gemm_for(const mt_problem *p, const char *arch, mt_default_gemm *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->block_m, sizeof out->block_m, "%lld", (long long)mt_default_block_m(p));
    out->family = "grouped_gemm";
    /* The default set also has a split-K decode tile of 16 rows: the
     * untuned default is the unsplit one (the tuner may pick the other). */
    want(out, "SPLIT_K", "1");
    const int wonly = p->quant.mode == MT_QUANT_W8A16 || p->quant.mode == MT_QUANT_W4A16;
    if (!wonly && arch && !strcmp(arch, "sm_90a"))
        sm90_default(p, out);
}

/* What a variant without the parameter (made by a family, or a family
 * version, that lacks it) stands for; NULL: it is needed. */
static const char *absent_param_value(const char *name)
{
    return !strcmp(name, "SPLIT_K")  ? "1"
           : !strcmp(name, "OQUANT") ? "step"
           : !strcmp(name, "TURNS")  ? "no"
                                     : NULL;
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
