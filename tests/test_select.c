/*
 * The tuner's candidate model and selection (tuner/select.h) on the real
 * grouped_gemm variants, as far as split-K changes them: split tiles win
 * the model at decode sizes with a long K, where the unsplit tiles are few
 * and long, and lose at prefill sizes; GEMM2 candidates share GEMM1's BLOCK_M and
 * SPLIT_K; the untuned default stays the unsplit tile.
 */
#include "tests/support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "moetune/gen.h"
#include "templates/gemv_args.h"
#include "tuner/kernel_set.h"
#include "tuner/select.h"

#define SM_COUNT 132

/* The valid bf16 unquantized standard-format grouped_gemm points for
 * sm_90a, and the default set among them, enumerated once. */
static mt_variant *all, *defs;
static size_t nall, ndefs;

static int setup(void **state)
{
    (void)state;
    mt_gen_config cfg = {.no_cache = 1};
    mt_gen *g = NULL;
    mt_gen_filter f = {.family = "grouped_gemm", .arch = "sm_90a", .nparams = 3,
                       .params = {{"dtype", "bf16"}, {"quant", "none"}, {"format", "standard"}}};
    int rc = mt_gen_open(&cfg, &g) || mt_gen_enumerate(g, &f, &all, &nall, NULL);
    f.defaults_only = 1;
    rc = rc || mt_gen_enumerate(g, &f, &defs, &ndefs, NULL);
    if (rc)
        fprintf(stderr, "grouped_gemm: %s\n", mt_gen_errmsg(g));
    mt_gen_close(g);
    return rc ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    free(all);
    free(defs);
    return 0;
}

/* Qwen3-30B-A3B's experts: 128 of them, top 8, hidden 2048, 768 wide. */
static mt_problem qwen3(int64_t M)
{
    mt_problem p;
    mt_problem_init(&p, M, 128, 8, 2048, 768);
    return p;
}

/* DeepSeek-V3's experts at TP 8: 256 of them, top 8, hidden 7168, 256
 * wide: GEMM1's K is long, its tiles few. */
static mt_problem dsv3_tp8(int64_t M)
{
    mt_problem p;
    mt_problem_init(&p, M, 256, 8, 7168, 256);
    return p;
}

/* The valid bf16 standard-format grouped_gemv points of quant mode `quant`
 * for sm_90a (*n of them, at least one). */
static mt_variant *gemv_points(const char *quant, size_t *n)
{
    mt_gen_config cfg = {.no_cache = 1};
    mt_gen *g = NULL;
    mt_gen_filter f = {.family = "grouped_gemv", .arch = "sm_90a", .nparams = 3,
                       .params = {{"dtype", "bf16"}, {"quant", quant}, {"format", "standard"}}};
    mt_variant *gv = NULL;
    *n = 0;
    if (mt_gen_open(&cfg, &g) || mt_gen_enumerate(g, &f, &gv, n, NULL))
        fail_msg("grouped_gemv: %s", mt_gen_errmsg(g));
    mt_gen_close(g);
    assert_true(*n > 0);
    return gv;
}

/* The default 16-row tiles differ only in SPLIT_K. As timed on the H200
 * (docs/PERFORMANCE.md, sessions 3 and 4): for one token, DeepSeek-V3's
 * GEMM1 (K = 7168: 56 K steps of 128 per CTA, 64 tiles) gains from the
 * split (48.9 -> 20.6 us), Qwen3's (K = 2048, 192 tiles) loses (the
 * pipeline 45.0 -> 53.0 us): the model must say the same; at 4096 tokens
 * the tiles fill the GPU many times over and the split is pure cost. */
static void test_model_split_where_k_is_long(void **state)
{
    (void)state;
    const mt_variant *one = NULL, *four = NULL;
    for (size_t i = 0; i < ndefs; i++) {
        const mt_variant *v = &defs[i];
        if (mt_variant_int(v, "BLOCK_M", 0) != 16 || strcmp(mt_variant_get(v, "epilogue"), "store"))
            continue;
        if (mt_variant_int(v, "SPLIT_K", 0) == 1)
            one = v;
        else if (mt_variant_int(v, "SPLIT_K", 0) == 4)
            four = v;
    }
    assert_non_null(one);
    assert_non_null(four);
    static const int64_t Ms[] = {1, 4096};
    for (int shape = 0; shape < 2; shape++)
        for (int m = 0; m < 2; m++) {
            const mt_problem p = shape ? dsv3_tp8(Ms[m]) : qwen3(Ms[m]);
            const double t1 = mt_gemm_model_us(one, &p, 0, SM_COUNT);
            const double t4 = mt_gemm_model_us(four, &p, 0, SM_COUNT);
            printf("  %s M=%lld gemm1: unsplit %.1f us, split-K 4 %.1f us\n",
                   shape ? "dsv3-tp8" : "qwen3", (long long)Ms[m], t1, t4);
            assert_true(t1 > 0.0 && t4 > 0.0);
            if (shape == 1 && m == 0)
                assert_true(t4 < t1);
            else
                assert_true(t4 > t1);
        }
}

/* Over the whole valid space: the model's GEMM1 picks include split
 * tiles for one token of DeepSeek-V3 (whether they beat the best unsplit
 * ones is for the timing to say) and none for 4096 tokens. */
static void test_select_stage_split(void **state)
{
    (void)state;
    size_t pick[12];
    static const int64_t Ms[] = {1, 4096};
    for (int m = 0; m < 2; m++) {
        const mt_problem p = dsv3_tp8(Ms[m]);
        size_t k = mt_select_stage(all, nall, &p, 1, 0, SM_COUNT, 12, pick);
        assert_int_equal(k, 12);
        int split = 0;
        for (size_t i = 0; i < k; i++)
            split += mt_variant_int(&all[pick[i]], "SPLIT_K", 0) > 1;
        printf("  M=%lld: %d of %zu picks split, first %s\n", (long long)Ms[m], split, k,
               all[pick[0]].name);
        if (m == 0)
            assert_true(split > 0);
        else
            assert_int_equal(split, 0);
    }
}

/* The variants of v (n of them) with epilogue epi, copied into a new
 * array (*count of them, at least one). */
static mt_variant *with_epilogue(const mt_variant *v, size_t n, const char *epi, size_t *count)
{
    mt_variant *out = malloc((n ? n : 1) * sizeof *out);
    assert_non_null(out);
    *count = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(mt_variant_get(&v[i], "epilogue"), epi))
            out[(*count)++] = v[i];
    assert_true(*count > 0);
    return out;
}

/* Stage 1 over GEMM1 tiles that a filter left with the fused activation
 * only (`--param gemm1:epilogue=silu`): looked up in that part alone, no
 * tile has its store sibling and nothing is picked; with the store
 * siblings looked for in the whole space, the fused tiles are ranked. */
static void test_select_stage_fused_only(void **state)
{
    (void)state;
    size_t nf = 0;
    mt_variant *fused = with_epilogue(all, nall, "silu", &nf);
    const mt_problem p = qwen3(64);
    size_t pick[12];
    assert_int_equal(mt_select_stage(fused, nf, &p, 1, 0, SM_COUNT, 12, pick), 0);
    const size_t k = mt_select_stage_in(fused, nf, all, nall, &p, 1, 0, SM_COUNT, 12, pick);
    assert_int_equal(k, 12);
    for (size_t i = 0; i < k; i++) {
        assert_true(pick[i] < nf);
        assert_string_equal(mt_variant_get(&fused[pick[i]], "epilogue"), "silu");
        assert_true(mt_find_store_sibling(all, nall, &fused[pick[i]]) != (size_t)-1);
    }
    free(fused);
}

/* GEMM2 candidates: store tiles of the asked BLOCK_M, of any split factor
 * (a plan may pair a split GEMM1 with an unsplit GEMM2 and the other way
 * round), and at M=1 of a long-K GEMM2 split ones are offered. */
static void test_select_gemm2_any_split(void **state)
{
    (void)state;
    mt_problem p;   /* Mixtral: 8 experts, top 2, GEMM2's K = 14336 */
    mt_problem_init(&p, 1, 8, 2, 4096, 14336);
    size_t pick[12];
    size_t k = mt_select_stage(all, nall, &p, 2, 32, SM_COUNT, 12, pick);
    assert_true(k > 0);
    int split = 0, unsplit = 0;
    for (size_t i = 0; i < k; i++) {
        const mt_variant *v = &all[pick[i]];
        assert_string_equal(mt_variant_get(v, "epilogue"), "store");
        assert_int_equal(mt_variant_int(v, "BLOCK_M", 0), 32);
        split += mt_variant_int(v, "SPLIT_K", 1) > 1;
        unsplit += mt_variant_int(v, "SPLIT_K", 1) == 1;
    }
    printf("  mixtral M=1 gemm2: %d split and %d unsplit picks\n", split, unsplit);
    assert_int_equal(split + unsplit, (int)k);
    assert_true(split > 0);
}

/* The untuned default among the default set (which has split tiles of the
 * same BLOCK_M) is unsplit, at decode and at prefill sizes: grouped_gemm's
 * off sm_90a, grouped_gemm_sm90's on it (swapped 16-row tiles at M = 1 and
 * 64 of Qwen3, a 128-row one at 1024, 64 rows per expert:
 * common/defaults.c). */
static void test_default_is_unsplit(void **state)
{
    (void)state;
    static const struct {
        const char *family, *arch;
        int block_m[3];
    } sets[] = {{"grouped_gemm", "sm_80", {16, 16, 64}}, {"grouped_gemm_sm90", "sm_90a", {16, 16, 128}}};
    static const int64_t Ms[] = {1, 64, 1024};
    for (size_t s = 0; s < MT_ARRAY_LEN(sets); s++) {
        mt_gen_config cfg = {.no_cache = 1};
        mt_gen *g = NULL;
        mt_variant *d = NULL;
        size_t nd = 0;
        mt_gen_filter f = {.family = sets[s].family, .arch = sets[s].arch, .defaults_only = 1, .nparams = 3,
                           .params = {{"dtype", "bf16"}, {"quant", "none"}, {"format", "standard"}}};
        if (mt_gen_open(&cfg, &g) || mt_gen_enumerate(g, &f, &d, &nd, NULL))
            fail_msg("%s: %s", sets[s].family, mt_gen_errmsg(g));
        mt_gen_close(g);
        for (int m = 0; m < 3; m++) {
            const mt_problem p = qwen3(Ms[m]);
            size_t i = mt_find_default(d, nd, &p);
            if (i >= nd)
                fail_msg("%s on %s: no default at M=%lld", sets[s].family, sets[s].arch, (long long)Ms[m]);
            assert_int_equal(mt_variant_int(&d[i], "SPLIT_K", 0), 1);
            assert_int_equal(mt_variant_int(&d[i], "BLOCK_M", 0), sets[s].block_m[m]);
            assert_string_equal(mt_variant_get(&d[i], "epilogue"), "silu");
        }
        free(d);
    }
}

/* The decode family joins the tensor-core tiles in one list: at one token
 * of Qwen3 (8 experts hit, a few bytes of activations against 50 MB of
 * weights) the model offers grouped_gemv tiles for half of the GEMM1
 * picks (its cap: the tensor-core tiles are timed against them), at
 * 4096 tokens (256 rows an expert: the weights re-read per 8-row block)
 * none; GEMM2 picks for its 8-row blocks are grouped_gemv tiles only. */
static void test_select_gemv_for_decode(void **state)
{
    (void)state;
    size_t ngv = 0;
    mt_variant *gv = gemv_points("none", &ngv);
    mt_variant *both = malloc((nall + ngv) * sizeof *both);
    assert_non_null(both);
    memcpy(both, all, nall * sizeof *both);
    memcpy(both + nall, gv, ngv * sizeof *both);
    size_t pick[12];
    static const int64_t Ms[] = {1, 4096};
    for (int m = 0; m < 2; m++) {
        const mt_problem p = qwen3(Ms[m]);
        size_t k = mt_select_stage(both, nall + ngv, &p, 1, 0, SM_COUNT, 12, pick);
        assert_int_equal(k, 12);
        int gemv = 0;
        for (size_t i = 0; i < k; i++) {
            gemv += !strcmp(both[pick[i]].family, "grouped_gemv");
            /* register caps are stage 3's to time, not copies of a pick */
            assert_int_equal(mt_variant_int(&both[pick[i]], "SM_WARPS", 0), 0);
        }
        printf("  qwen3 M=%lld: %d of %zu GEMM1 picks grouped_gemv, first %s\n", (long long)Ms[m],
               gemv, k, both[pick[0]].name);
        if (m == 0)   /* and the tensor-core tiles keep half of the places */
            assert_int_equal(gemv, 6);
        else
            assert_int_equal(gemv, 0);
    }
    const mt_problem p = qwen3(1);
    size_t k = mt_select_stage(both, nall + ngv, &p, 2, 8, SM_COUNT, 12, pick);
    assert_true(k > 0);
    for (size_t i = 0; i < k; i++)
        assert_string_equal(both[pick[i]].family, "grouped_gemv");
    /* GEMM2 under a slot-routed GEMM1: row blocks of one slot, storing (and
     * with "lastsum" the last CTA of a token summing them), or one token,
     * summing its slots; the "sum" tiles only where the plan check takes
     * them (topk <= 32). A "lastsum" tile models slower than its store twin
     * with the reduce step (as timed), so a store tile leads; stage 3's
     * epilogue round times the twins against each other. */
    static const int64_t topks[] = {8, 40};
    for (int t = 0; t < 2; t++) {
        mt_problem q = qwen3(1);
        q.topk = topks[t];
        k = mt_select_stage(both, nall + ngv, &q, 2, 1, SM_COUNT, 12, pick);
        int sums = 0, lasts = 0;
        for (size_t i = 0; i < k; i++) {
            assert_int_equal(mt_variant_int(&both[pick[i]], "BLOCK_M", 0), 1);
            assert_int_equal(mt_variant_int(&both[pick[i]], "SM_WARPS", 0), 0);
            sums += !strcmp(mt_variant_get(&both[pick[i]], "epilogue"), "sum");
            lasts += !strcmp(mt_variant_get(&both[pick[i]], "epilogue"), "lastsum");
        }
        printf("  qwen3 M=1 topk %lld: %d of %zu GEMM2 picks sum, %d lastsum\n", (long long)q.topk, sums,
               k, lasts);
        assert_int_equal(k, 12);
        assert_true(sums + lasts < 12);
        if (t == 0)
            assert_true(sums > 0);
        else
            assert_int_equal(sums, 0);
    }
    free(both);
    free(gv);
}

/* The valid bf16 standard-format grouped_gemm_sm90 points for sm_90a of
 * one quant mode (and one epilogue, unless NULL). */
static mt_variant *sm90_points(const char *quant, const char *epilogue, size_t *n)
{
    mt_gen_config cfg = {.no_cache = 1};
    mt_gen *g = NULL;
    mt_variant *v = NULL;
    mt_gen_filter f = {.family = "grouped_gemm_sm90", .arch = "sm_90a", .nparams = epilogue ? 4 : 3,
                       .params = {{"dtype", "bf16"}, {"quant", quant}, {"format", "standard"},
                                  {"epilogue", epilogue}}};
    if (mt_gen_open(&cfg, &g) || mt_gen_enumerate(g, &f, &v, n, NULL))
        fail_msg("grouped_gemm_sm90: %s", mt_gen_errmsg(g));
    mt_gen_close(g);
    return v;
}

/* The variant of v called name (the test fails without one). */
static const mt_variant *named(const mt_variant *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i].name, name))
            return &v[i];
    fail_msg("no variant %s", name);
    return NULL;
}

/* Stage 3's neighbours along SPLIT_K of the swapped persistent 16 x 256
 * tile (Qwen3 M = 8's GEMM1 in session 21): split tiles exist only in
 * PIPE ws, so they come with that pipeline, one per split (2 and 4), the
 * tile, stages and loads unchanged; a "ws" tile finds the same two with
 * nothing else changed. */
static void test_neighbours_split_in_ws(void **state)
{
    (void)state;
    size_t nsv = 0;
    mt_variant *sv = sm90_points("none", "store", &nsv);
    const char *want[] = {"mtk_grouped_gemm_sm90_bf16_none_standard_store_m16_n256_k64_g1_s5_ppersist_fwait_btma_swyes",
                          "mtk_grouped_gemm_sm90_bf16_none_standard_store_m16_n256_k64_g1_s5_pws_fwait_btma_swyes"};
    size_t *pick = malloc(nsv * sizeof *pick);
    assert_non_null(pick);
    for (int w = 0; w < 2; w++) {
        const mt_variant *base = named(sv, nsv, want[w]);
        size_t n = mt_select_neighbours(sv, nsv, base, "SPLIT_K", pick);
        assert_int_equal(n, 2);
        int splits = 0;
        for (size_t i = 0; i < n; i++) {
            const mt_variant *v = &sv[pick[i]];
            splits |= (int)mt_variant_int(v, "SPLIT_K", 0);
            assert_string_equal(mt_variant_get(v, "PIPE"), "ws");
            assert_string_equal(mt_variant_get(v, "SWAP"), "yes");
            assert_int_equal(mt_variant_int(v, "BLOCK_N", 0), 256);
            assert_int_equal(mt_variant_int(v, "STAGES", 0), 5);
            assert_string_equal(mt_variant_get(v, "BLOAD"), "tma");
        }
        assert_int_equal(splits, 2 | 4);
    }
    free(pick);
    free(sv);
}

/* Stage 3 varies the width of a swapped tile (its neighbours along BLOCK_N:
 * the other widths with every other parameter the same), not of an
 * unswapped one, whose width stays the model's. */
static void test_neighbours_width_swapped_only(void **state)
{
    (void)state;
    size_t nsv = 0;
    mt_variant *sv = sm90_points("none", "store", &nsv);
    size_t *pick = malloc(nsv * sizeof *pick);
    assert_non_null(pick);
    const mt_variant *swapped =
        named(sv, nsv, "mtk_grouped_gemm_sm90_bf16_none_standard_store_m16_n256_k64_g1_s5_ppersist_fwait_btma_swyes");
    size_t n = mt_select_neighbours(sv, nsv, swapped, "BLOCK_N", pick);
    assert_int_equal(n, 3);
    int widths = 0;
    for (size_t i = 0; i < n; i++) {
        const mt_variant *v = &sv[pick[i]];
        widths |= (int)mt_variant_int(v, "BLOCK_N", 0);
        assert_true(mt_variant_differs_only_in(v, swapped, "BLOCK_N", NULL));
    }
    assert_int_equal(widths, 64 | 128 | 192);
    const mt_variant *unswapped =
        named(sv, nsv, "mtk_grouped_gemm_sm90_bf16_none_standard_store_m128_n256_k64_g8_s4_pws_fwait_btma");
    assert_int_equal(mt_select_neighbours(sv, nsv, unswapped, "BLOCK_N", pick), 0);
    free(pick);
    free(sv);
}

/* Tiles that read their A rows by TMA (ALOAD=tma) need them laid out per
 * expert: never a GEMM1 candidate in the standard format (stage 1, and
 * mt_gemm_role_fits for stage 3), offered as GEMM2 (stage 2) and as GEMM1
 * in the batched format. */
static void test_select_row_tma_roles(void **state)
{
    (void)state;
    size_t nsv = 0;
    mt_variant *sv = sm90_points("none", NULL, &nsv);
    size_t atma = 0;
    for (size_t i = 0; i < nsv; i++)
        atma += !strcmp(mt_variant_get(&sv[i], "ALOAD"), "tma");
    assert_true(atma > 0);
    size_t *pick = malloc(nsv * sizeof *pick);
    assert_non_null(pick);
    for (int64_t M = 64; M <= 4096; M *= 8) {
        const mt_problem p = qwen3(M);
        /* Every candidate the model can rank, so that ties cannot hide one. */
        size_t k = mt_select_stage(sv, nsv, &p, 1, 0, SM_COUNT, (int)nsv, pick);
        assert_true(k > 0);
        for (size_t i = 0; i < k; i++)
            assert_string_equal(mt_variant_get(&sv[pick[i]], "ALOAD"), "cp");
        k = mt_select_stage(sv, nsv, &p, 2, 128, SM_COUNT, (int)nsv, pick);
        size_t tma2 = 0;
        for (size_t i = 0; i < k; i++) {
            tma2 += !strcmp(mt_variant_get(&sv[pick[i]], "ALOAD"), "tma");
            /* The tiled sum twins are stage 3's to time, not stage 2's... */
            assert_string_equal(mt_variant_get(&sv[pick[i]], "epilogue"), "store");
        }
        /* ... unless a filter left no store twins (`--param gemm2:epilogue=sum`). */
        size_t nsums = 0;
        mt_variant *sums = with_epilogue(sv, nsv, "sum", &nsums);
        k = mt_select_stage(sums, nsums, &p, 2, 128, SM_COUNT, (int)nsums, pick);
        assert_true(k > 0);
        for (size_t i = 0; i < k; i++)
            assert_int_equal(mt_variant_int(&sums[pick[i]], "BLOCK_M", 0), 128);
        free(sums);
        assert_true(tma2 > 0);
        mt_problem b = p;
        b.format = MT_FORMAT_BATCHED;
        for (size_t i = 0; i < nsv; i++) {
            const int tma = !strcmp(mt_variant_get(&sv[i], "ALOAD"), "tma");
            const int sum = !strcmp(mt_variant_get(&sv[i], "epilogue"), "sum");
            assert_int_equal(mt_gemm_role_fits(&sv[i], &p, 0), !tma && !sum);
            assert_true(mt_gemm_role_fits(&sv[i], &p, 1));
            assert_int_equal(mt_gemm_role_fits(&sv[i], &b, 0), !sum);
            assert_int_equal(mt_gemm_role_fits(&sv[i], &b, 1), !sum);
        }
    }
    free(pick);
    free(sv);
}

/* grouped_gemv tiles that quantize their own A rows (fp8 block-wise):
 * those that take them as they are (AQUANT=cta) are GEMM1's alone, not
 * over MT_GEMV_AQ_MAX_K or under router weights on the input; those that
 * activate GEMM1's output first (AQUANT=silu, gelu) GEMM2's alone, with
 * the problem's activation, for rows (a token's topk slots under "sum")
 * that fit MT_GEMV_AQ_MAX_K, and after a GEMM1 that stores its output
 * (mt_gemm_pair_fits). Every GEMM1's GEMM2 sibling is its store twin that
 * takes its rows from the act step (and for a GEMM1 that quantizes its
 * output, OQUANT=last, its rows as the act step leaves them), which the
 * other tiles' are not; but a GEMM1 that runs GEMM2 in its launch (CHAIN)
 * pairs with the tile it runs alone. */
static void test_gemv_own_quant_roles(void **state)
{
    (void)state;
    size_t ngv = 0;
    mt_variant *gv = gemv_points("fp8-block", &ngv);
    mt_problem p = dsv3_tp8(1), wide = p, weighed = p, gelu = p, long_n = p;
    p.quant.mode = wide.quant.mode = weighed.quant.mode = gelu.quant.mode = long_n.quant.mode =
        MT_QUANT_FP8_BLOCK;
    wide.K = MT_GEMV_AQ_MAX_K + 128;
    weighed.apply_router_weight_on_input = 1;
    gelu.activation = MT_ACT_GELU;
    long_n.N = MT_GEMV_AQ_MAX_K / p.topk + 128;   /* one row fits, the topk do not */
    assert_int_equal(p.activation, MT_ACT_SILU);
    const mt_variant *store1 = NULL, *silu1 = NULL;
    size_t cta = 0, acts = 0, outs = 0, chains = 0;
    for (size_t i = 0; i < ngv; i++) {
        const int own = !strcmp(mt_variant_get(&gv[i], "AQUANT"), "cta");
        const char *act = mt_variant_a_activation(&gv[i]);
        const int silu = act && !strcmp(act, "silu");
        const int sum = mt_variant_sums_topk(&gv[i]);
        const int token_rows = !strcmp(mt_variant_get(&gv[i], "epilogue"), "sum");
        const char *epi = mt_variant_get(&gv[i], "epilogue");
        cta += own;
        acts += act != NULL;
        assert_int_equal(mt_variant_quantizes_a(&gv[i]), own || act);
        assert_int_equal(mt_gemm_role_fits(&gv[i], &p, 0), !sum && !act);
        const int oq = mt_variant_quantizes_out(&gv[i]);   /* GEMM1's: it writes GEMM2's A */
        assert_int_equal(mt_gemm_role_fits(&gv[i], &p, 1), !own && !oq && (!act || silu));
        assert_int_equal(mt_gemm_role_fits(&gv[i], &gelu, 1), !own && !oq && (!act || !silu));
        assert_int_equal(mt_gemm_role_fits(&gv[i], &long_n, 1), !own && !oq && (!act || (silu && !token_rows)));
        assert_int_equal(mt_gemm_role_fits(&gv[i], &wide, 0), !sum && !own && !act);
        assert_int_equal(mt_gemm_role_fits(&gv[i], &weighed, 0), !sum && !own && !act);
        const int slot_routed = mt_variant_int(&gv[i], "BLOCK_M", 0) == 1;
        if (!act && !own && !strcmp(epi, "store") && slot_routed)
            store1 = &gv[i];
        if (!own && !strcmp(epi, "silu") && slot_routed)
            silu1 = &gv[i];
        if (sum || act)
            continue;
        if (mt_variant_chain(&gv[i]) > 0) {   /* GEMM2 is the tile it runs in its launch */
            const size_t h = mt_find_store_sibling(gv, ngv, &gv[i]);
            assert_true(h != (size_t)-1);
            assert_string_equal(mt_variant_get(&gv[h], "epilogue"), "lastsum");
            assert_int_equal(mt_variant_int(&gv[h], "BLOCK_N", 0), mt_variant_chain(&gv[i]));
            assert_true(mt_gemm_role_fits(&gv[h], &p, 1) && mt_gemm_pair_fits(&gv[i], &gv[h]));
            for (size_t j = 0; j < ngv; j++)   /* that tile alone */
                assert_int_equal(mt_gemm_pair_fits(&gv[i], &gv[j]), j == h);
            chains++;
            continue;
        }
        const size_t sib = mt_find_store_sibling(gv, ngv, &gv[i]);
        assert_true(sib != (size_t)-1);
        assert_string_equal(mt_variant_get(&gv[sib], "epilogue"), "store");
        assert_string_equal(mt_variant_get(&gv[sib], "AQUANT"), "step");
        assert_string_equal(mt_variant_get(&gv[sib], "OQUANT"), "step");
        assert_true(mt_gemm_role_fits(&gv[sib], &p, 1));
        outs += oq;
        if (!own && !oq)
            assert_true(mt_variant_same_but(&gv[sib], &gv[i], "epilogue", "store"));
    }
    assert_true(cta > 0 && acts > 0 && outs > 0 && chains > 0 && store1 && silu1);
    for (size_t i = 0; i < ngv; i++)
        if (mt_variant_a_activation(&gv[i])) {
            assert_true(mt_gemm_pair_fits(store1, &gv[i]));
            assert_false(mt_gemm_pair_fits(silu1, &gv[i]));
        } else {
            assert_true(mt_gemm_pair_fits(store1, &gv[i]) && mt_gemm_pair_fits(silu1, &gv[i]));
        }
    /* Stage 2 after a GEMM1 that stores its output offers self-activating
     * GEMM2s (the model counts the act launch they save), after a fused one
     * none, and fills its places with others instead. */
    size_t *pick = malloc(ngv * sizeof *pick);
    size_t after_store = 0, k = mt_select_gemm2_for(gv, ngv, &p, store1, SM_COUNT, 12, pick);
    for (size_t j = 0; j < k; j++)
        after_store += mt_variant_a_activation(&gv[pick[j]]) != NULL;
    assert_true(k == 12 && after_store > 0);
    k = mt_select_gemm2_for(gv, ngv, &p, silu1, SM_COUNT, 12, pick);
    assert_int_equal(k, 12);
    for (size_t j = 0; j < k; j++) {
        assert_null(mt_variant_a_activation(&gv[pick[j]]));
        assert_int_equal(mt_variant_int(&gv[pick[j]], "BLOCK_M", 0), 1);
    }
    free(pick);
    free(gv);
}

/* Swapped warpgroup-MMA tiles (grouped_gemm_sm90, SWAP yes: the weight
 * rows are the MMA's 64-row side, the tokens its N): with a few tokens per
 * expert both a swapped 16-row tile and an unswapped 64-row one are bound
 * by the weight bytes in the model (within 1 %); the mixed ranking offers
 * swapped tiles where
 * experts get a few tokens, and the GEMM2 candidates of a swapped GEMM1's
 * BLOCK_M come from both families. */
static void test_select_swapped_sm90(void **state)
{
    (void)state;
    size_t nsv = 0;
    mt_variant *sv = sm90_points("none", NULL, &nsv);
    const mt_variant *swapped = NULL, *plain = NULL;
    for (size_t i = 0; i < nsv; i++) {
        const mt_variant *v = &sv[i];
        if (strcmp(mt_variant_get(v, "epilogue"), "store") || mt_variant_int(v, "BLOCK_N", 0) != 128 ||
            strcmp(mt_variant_get(v, "PIPE"), "ws") || mt_variant_int(v, "STAGES", 0) != 4 ||
            mt_variant_int(v, "SPLIT_K", 1) != 1)
            continue;
        const int swap = !strcmp(mt_variant_get(v, "SWAP"), "yes");
        if (swap && mt_variant_int(v, "BLOCK_M", 0) == 16)
            swapped = v;
        else if (!swap && mt_variant_int(v, "BLOCK_M", 0) == 64)
            plain = v;
    }
    assert_non_null(swapped);
    assert_non_null(plain);
    mt_problem p = qwen3(64);   /* 512 slots over 128 experts: 4 tokens each */
    const double ts = mt_gemm_model_us(swapped, &p, 0, SM_COUNT);
    const double tp = mt_gemm_model_us(plain, &p, 0, SM_COUNT);
    printf("  qwen3 M=64 gemm1: swapped 16x128 %.1f us, unswapped 64x128 %.1f us\n", ts, tp);
    assert_true(ts > 0.0 && fabs(ts - tp) < 0.01 * tp);

    mt_variant *both = malloc((nall + nsv) * sizeof *both);
    assert_non_null(both);
    memcpy(both, all, nall * sizeof *both);
    memcpy(both + nall, sv, nsv * sizeof *both);
    size_t pick[12];
    p = qwen3(128);
    size_t k = mt_select_stage(both, nall + nsv, &p, 1, 0, SM_COUNT, 12, pick);
    assert_int_equal(k, 12);
    int nswap = 0;
    int64_t bm = 0;
    for (size_t i = 0; i < k; i++) {
        const char *sw = mt_variant_get(&both[pick[i]], "SWAP");
        if (sw && !strcmp(sw, "yes")) {
            if (!nswap++)
                bm = mt_variant_int(&both[pick[i]], "BLOCK_M", 0);
        }
    }
    printf("  qwen3 M=128: %d of %zu GEMM1 picks swapped, first %s\n", nswap, k, both[pick[0]].name);
    assert_true(nswap > 0);
    k = mt_select_stage(both, nall + nsv, &p, 2, bm, SM_COUNT, 12, pick);
    assert_true(k > 0);
    for (size_t i = 0; i < k; i++)
        assert_int_equal(mt_variant_int(&both[pick[i]], "BLOCK_M", 0), bm);
    free(both);
    free(sv);
}

/* A tiled GEMM1 that quantizes its output for GEMM2 (grouped_gemm_sm90
 * OQUANT=last) is modelled as its step-fed twin and the act launch more
 * (its epilogue reads the group back and quantizes it, which cost GEMM1
 * 0.9x to 4x the act step's time, and every such pipeline timed was
 * slower than its twin's). So at Qwen3 fp8 M = 4096 it ranks behind the
 * twin (stage 1 takes the best of each tile shape first: the twin, while
 * stage 3's OQUANT round times it against the winner); it fits GEMM1
 * only. */
static void test_model_tiled_out_quant(void **state)
{
    (void)state;
    size_t n = 0;
    mt_variant *v = sm90_points("fp8-block", NULL, &n);   /* GEMM1 candidates need a store sibling */
    static const char *const twin = "mtk_grouped_gemm_sm90_bf16_fp8xblock_standard_silu_m128_n128_k128_g8_s5_pws"
                                    "_fwait_btma";
    char last[sizeof v[0].name];
    snprintf(last, sizeof last, "%s_oqlast", twin);
    static const char *const store = "mtk_grouped_gemm_sm90_bf16_fp8xblock_standard_store_m128_n128_k128_g8_s5_"
                                     "pws_fwait_btma";
    const mt_variant *s = named(v, n, twin), *l = named(v, n, last), *st = named(v, n, store);
    mt_problem p = qwen3(4096);
    p.quant.mode = MT_QUANT_FP8_BLOCK;
    const double ts = mt_gemm_model_us(s, &p, 0, SM_COUNT), tl = mt_gemm_model_us(l, &p, 0, SM_COUNT);
    const double act = 3.0;   /* MODEL_ACT_US */
    printf("  qwen3 fp8 M=4096 gemm1: step-fed %.1f us, OQUANT=last %.1f us\n", ts, tl);
    assert_true(fabs((tl - ts) - act) < 1e-6 * ts);
    assert_true(mt_gemm_role_fits(l, &p, 0));
    assert_false(mt_gemm_role_fits(l, &p, 1));
    size_t pick[64];
    const size_t k = mt_select_stage(v, n, &p, 1, 0, SM_COUNT, 64, pick);
    /* The shape's pick: one of its step-fed tiles (stage 1 takes one tile
     * of a shape, whatever its epilogue), not the OQUANT=last one; no tile
     * of TURNS yes (the tuner leaves MMA turns out). */
    size_t at_s = k, at_l = k;
    for (size_t i = 0; i < k; i++) {
        const mt_variant *u = v + pick[i];
        const char *turns = mt_variant_get(u, "TURNS");
        assert_string_equal(turns ? turns : "no", "no");
        at_s = u == s || u == st ? i : at_s;
        at_l = v + pick[i] == l ? i : at_l;
    }
    printf("  qwen3 fp8 M=4096: of %zu GEMM1 picks, OQUANT=last at %zu, a step-fed twin at %zu\n", k, at_l,
           at_s);
    assert_true(at_s < k && at_s < at_l);
    free(v);
}

/* Stage 3's neighbours along PIPE of the 64-row TMA pingpong tile that won
 * DeepSeek-V3 fp8 at M = 1024 (session 13): one per other pipeline, the
 * TMA twins of sync, ws and persist ("sync" takes TMA weight loads since
 * session 29); along STAGES, the other depths with nothing else changed. */
static void test_neighbours_follow_the_loads(void **state)
{
    (void)state;
    size_t nsv = 0;
    mt_variant *sv = sm90_points("fp8-block", "silu", &nsv);
    const char *want = "mtk_grouped_gemm_sm90_bf16_fp8xblock_standard_silu_m64_n128_k128_g1_s5_ppingpong_"
                       "fwait_btma";
    const mt_variant *base = NULL;
    for (size_t i = 0; i < nsv && !base; i++)
        if (!strcmp(sv[i].name, want))
            base = &sv[i];
    assert_non_null(base);
    size_t *pick = malloc(nsv * sizeof *pick);
    assert_non_null(pick);
    size_t n = mt_select_neighbours(sv, nsv, base, "PIPE", pick);
    assert_int_equal(n, 3);
    int sync_tma = 0, ws_tma = 0, persist_tma = 0;
    for (size_t i = 0; i < n; i++) {
        const mt_variant *v = &sv[pick[i]];
        const char *pipe = mt_variant_get(v, "PIPE"), *load = mt_variant_get(v, "BLOAD");
        assert_int_equal(mt_variant_int(v, "STAGES", 0), 5);
        assert_int_equal(mt_variant_int(v, "BLOCK_M", 0), 64);
        sync_tma += !strcmp(pipe, "sync") && !strcmp(load, "tma");
        ws_tma += !strcmp(pipe, "ws") && !strcmp(load, "tma");
        persist_tma += !strcmp(pipe, "persist") && !strcmp(load, "tma");
    }
    assert_int_equal(sync_tma + ws_tma + persist_tma, 3);
    n = mt_select_neighbours(sv, nsv, base, "STAGES", pick);
    assert_true(n >= 2);
    for (size_t i = 0; i < n; i++) {
        const char *stages = mt_variant_get(&sv[pick[i]], "STAGES");
        assert_true(mt_variant_same_but(&sv[pick[i]], base, "STAGES", stages));
        assert_int_not_equal(mt_variant_int(&sv[pick[i]], "STAGES", 0), 5);
    }
    free(pick);
    free(sv);
}

/* The 128 x 256 bf16 tile of "ws" (Qwen3's untuned default at large M)
 * has no whole-tile "persist" twin: its fp32 epilogue tile does not fit
 * beside four stages. Its PIPE neighbour "persist" is the twin with the
 * epilogue in column chunks (EPI_COLS), which fits; along EPI_COLS, the
 * chunked twin of a "persist" 128 x 128 tile. */
static void test_neighbours_persist_in_chunks(void **state)
{
    (void)state;
    size_t nsv = 0;
    mt_variant *sv = sm90_points("none", "store", &nsv);
    const mt_variant *ws = NULL, *persist = NULL;
    for (size_t i = 0; i < nsv; i++) {
        if (!strcmp(sv[i].name, "mtk_grouped_gemm_sm90_bf16_none_standard_store_m128_n256_k64_g8_s4_pws_fwait_btma"))
            ws = &sv[i];
        if (!strcmp(sv[i].name, "mtk_grouped_gemm_sm90_bf16_none_standard_store_m128_n128_k64_g8_s4_ppersist_fwait_btma"))
            persist = &sv[i];
    }
    assert_non_null(ws);
    assert_non_null(persist);
    size_t *pick = malloc(nsv * sizeof *pick);
    assert_non_null(pick);
    size_t n = mt_select_neighbours(sv, nsv, ws, "PIPE", pick);
    int chunked = 0;
    for (size_t i = 0; i < n; i++) {
        const mt_variant *v = &sv[pick[i]];
        if (strcmp(mt_variant_get(v, "PIPE"), "persist"))
            continue;
        assert_string_equal(v->name, "mtk_grouped_gemm_sm90_bf16_none_standard_store_m128_n256_k64_g8_s4_ppersist_fwait_"
                                     "btma_e32");
        chunked++;
    }
    assert_int_equal(chunked, 1);
    n = mt_select_neighbours(sv, nsv, persist, "EPI_COLS", pick);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++)
        assert_true(mt_variant_int(&sv[pick[i]], "EPI_COLS", 0) == 32 ||
                    mt_variant_int(&sv[pick[i]], "EPI_COLS", 0) == 64);
    /* The chunked 128 x 256 tile has one CLUSTER neighbour, its CTA pair;
     * from a 128 x 128 pair, EPI_COLS 0 is reached with CLUSTER following
     * (pairs exist only with column chunks). */
    const mt_variant *e32 = NULL, *pair = NULL, *pair128 = NULL;
    for (size_t i = 0; i < nsv; i++) {
        if (!strcmp(sv[i].name, "mtk_grouped_gemm_sm90_bf16_none_standard_store_m128_n256_k64_g8_s4_ppersist_fwait_btma_e32"))
            e32 = &sv[i];
        if (!strcmp(sv[i].name,
                    "mtk_grouped_gemm_sm90_bf16_none_standard_store_m128_n256_k64_g8_s4_ppersist_fwait_btma_e32_c2"))
            pair = &sv[i];
        if (!strcmp(sv[i].name,
                    "mtk_grouped_gemm_sm90_bf16_none_standard_store_m128_n128_k64_g8_s4_ppersist_fwait_btma_e32_c2"))
            pair128 = &sv[i];
    }
    assert_non_null(e32);
    assert_non_null(pair);
    assert_non_null(pair128);
    n = mt_select_neighbours(sv, nsv, e32, "CLUSTER", pick);
    assert_int_equal(n, 1);
    assert_ptr_equal(&sv[pick[0]], pair);
    n = mt_select_neighbours(sv, nsv, pair128, "EPI_COLS", pick);
    int unchunked = 0;
    for (size_t i = 0; i < n; i++)
        if (mt_variant_int(&sv[pick[i]], "EPI_COLS", -1) == 0) {
            assert_int_equal(mt_variant_int(&sv[pick[i]], "CLUSTER", 0), 1);
            unchunked++;
        }
    assert_int_equal(unchunked, 1);
    free(pick);
    free(sv);
}

/* PAD_SKIP (a persistent 128-row tile's warpgroup of padding rows skipping
 * its MMAs): the persistent tile's one neighbour along it is its "yes"
 * twin, and from that twin the PIPE round still reaches the other
 * pipelines, with PAD_SKIP following to "no". */
static void test_neighbours_pad_skip(void **state)
{
    (void)state;
    size_t nsv = 0;
    mt_variant *sv = sm90_points("none", "store", &nsv);
    const mt_variant *persist =
        named(sv, nsv, "mtk_grouped_gemm_sm90_bf16_none_standard_store_m128_n128_k64_g8_s4_ppersist_fwait_btma");
    const mt_variant *skip =
        named(sv, nsv, "mtk_grouped_gemm_sm90_bf16_none_standard_store_m128_n128_k64_g8_s4_ppersist_fwait_btma_psyes");
    size_t *pick = malloc(nsv * sizeof *pick);
    assert_non_null(pick);
    size_t n = mt_select_neighbours(sv, nsv, persist, "PAD_SKIP", pick);
    assert_int_equal(n, 1);
    assert_ptr_equal(&sv[pick[0]], skip);
    n = mt_select_neighbours(sv, nsv, skip, "PIPE", pick);
    int ws = 0;
    for (size_t i = 0; i < n; i++) {
        const mt_variant *v = &sv[pick[i]];
        assert_string_equal(mt_variant_get(v, "PAD_SKIP"), "no");
        ws += !strcmp(v->name, "mtk_grouped_gemm_sm90_bf16_none_standard_store_m128_n128_k64_g8_s4_pws_fwait_btma");
    }
    assert_int_equal(ws, 1);
    free(pick);
    free(sv);
}

/* Neighbours along TURNS (a round stage 3 no longer runs: the turns lost
 * to their twins, session 57, but a stored pipeline may hold such a tile):
 * from the chunked persist fp8 tile (the Qwen3 fp8 M = 4096 GEMM1 of both
 * shipped files) its one twin with MMA turns; along PIPE from the
 * unchunked persist twin, the sync tile (no copying warpgroup, no turns)
 * comes with TURNS no, the ws twin keeps its turns. */
static void test_neighbours_turns(void **state)
{
    (void)state;
    size_t n = 0;
    mt_variant *v = sm90_points("fp8-block", "store", &n);
    static const char *const base = "mtk_grouped_gemm_sm90_bf16_fp8xblock_standard_store_m128_n128_k128_g8_s4_"
                                    "ppersist_fwait_btma_e64_psyes";
    char twin_name[MT_VARIANT_NAME_MAX];
    snprintf(twin_name, sizeof twin_name, "%s_tnyes", base);
    const mt_variant *plain = named(v, n, base), *twin = named(v, n, twin_name);
    size_t *pick = malloc(n * sizeof *pick);
    assert_non_null(pick);
    size_t k = mt_select_neighbours(v, n, plain, "TURNS", pick);
    assert_int_equal(k, 1);
    assert_ptr_equal(&v[pick[0]], twin);
    k = mt_select_neighbours(v, n, named(v, n, "mtk_grouped_gemm_sm90_bf16_fp8xblock_standard_store_m128_n128_k128_"
                                                "g8_s4_ppersist_fwait_btma_tnyes"), "PIPE", pick);
    int ws_turns = 0, sync = 0;
    for (size_t i = 0; i < k; i++) {
        const mt_variant *u = &v[pick[i]];
        if (!strcmp(mt_variant_get(u, "PIPE"), "sync")) {
            sync++;
            assert_string_equal(mt_variant_get(u, "TURNS"), "no");
        }
        ws_turns += !strcmp(u->name, "mtk_grouped_gemm_sm90_bf16_fp8xblock_standard_store_m128_n128_k128_g8_s4_"
                                     "pws_fwait_btma_tnyes");
    }
    printf("  fp8 persist 128 x 128 with turns: %zu neighbours along PIPE, %d sync\n", k, sync);
    assert_int_equal(ws_turns, 1);
    assert_int_equal(sync, 1);
    free(pick);
    free(v);
}

/* Stage 3's register caps of a one-token grouped_gemv tile: from the
 * uncapped 4-warp tile its seven capped twins (16 to 64 warps an SM),
 * nothing else changed; along WARPS, a tile capped at 20 warps (5 CTAs of
 * 4) finds the 8-warp tile with another cap (20 is no whole number of
 * 8-warp CTAs), and the uncapped one the 8-warp tile uncapped. */
static void test_neighbours_sm_warps(void **state)
{
    (void)state;
    size_t ngv = 0;
    mt_variant *gv = gemv_points("none", &ngv);
    const char *base = "mtk_grouped_gemv_bf16_none_standard_silu_m1_n16_w4_u4_a1";
    const mt_variant *plain = named(gv, ngv, base);
    char capped_name[MT_VARIANT_NAME_MAX];
    snprintf(capped_name, sizeof capped_name, "%s_o20", base);
    const mt_variant *capped = named(gv, ngv, capped_name);
    size_t *pick = malloc(ngv * sizeof *pick);
    assert_non_null(pick);
    size_t n = mt_select_neighbours(gv, ngv, plain, "SM_WARPS", pick);
    assert_int_equal(n, 7);
    int64_t caps = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(mt_variant_differs_only_in(&gv[pick[i]], plain, "SM_WARPS", NULL));
        caps += mt_variant_int(&gv[pick[i]], "SM_WARPS", 0);
    }
    assert_int_equal(caps, 16 + 20 + 24 + 32 + 40 + 48 + 64);
    n = mt_select_neighbours(gv, ngv, capped, "WARPS", pick);
    assert_true(n >= 1);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(mt_variant_int(&gv[pick[i]], "WARPS", 0), 8);
        assert_int_equal(mt_variant_int(&gv[pick[i]], "SM_WARPS", 0) % 8, 0);
    }
    n = mt_select_neighbours(gv, ngv, plain, "WARPS", pick);
    assert_int_equal(n, 1);
    assert_int_equal(mt_variant_int(&gv[pick[0]], "WARPS", 0), 8);
    assert_int_equal(mt_variant_int(&gv[pick[0]], "SM_WARPS", -1), 0);
    free(pick);
    free(gv);
}

/* A chained GEMM1's unchained twin (CHAIN=0), by which the plan goes
 * where the chained tile cannot be the problem's GEMM1 and which the GPU
 * tests' twin check runs: for a capped tile (SM_WARPS) its capped twin
 * where loaded (the tuner loads every variant), else the uncapped one's
 * (the default set has only the uncapped unchained tile), else none. */
static void test_find_unchained(void **state)
{
    (void)state;
    size_t ngv = 0;
    mt_variant *gv = gemv_points("fp8-block", &ngv);
    static const char *const names[] = {
        "mtk_grouped_gemv_bf16_fp8xblock_standard_silu_m1_n16_w4_u4_a1_aqcta_oqlast_c16_o24",
        "mtk_grouped_gemv_bf16_fp8xblock_standard_silu_m1_n16_w4_u4_a1_aqcta_oqlast_c16",
        "mtk_grouped_gemv_bf16_fp8xblock_standard_silu_m1_n16_w4_u4_a1_aqcta_oqlast"};
    mt_kernel *every = calloc(ngv, sizeof *every), few[3];
    assert_non_null(every);
    memset(few, 0, sizeof few);
    for (size_t i = 0; i < ngv; i++)
        every[i].v = gv[i];
    for (int i = 0; i < 3; i++)
        few[i].v = *named(gv, ngv, names[i]);
    const mt_variant *capped = &few[0].v;
    const mt_kernel_set all_set = {.k = every, .n = ngv}, default_set = {.k = few, .n = 3},
                        alone = {.k = few, .n = 1};
    const mt_kernel *t = mt_kernel_set_find_unchained(&all_set, capped);
    assert_non_null(t);
    assert_string_equal(t->v.name, "mtk_grouped_gemv_bf16_fp8xblock_standard_silu_m1_n16_w4_u4_a1_aqcta_oqlast_o24");
    t = mt_kernel_set_find_unchained(&default_set, capped);
    assert_non_null(t);
    assert_string_equal(t->v.name, names[2]);
    assert_ptr_equal(mt_kernel_set_find_unchained(&default_set, &few[1].v), &few[2]);
    assert_null(mt_kernel_set_find_unchained(&alone, capped));
    free(every);
    free(gv);
}

/* Stage 1 takes a warpgroup-MMA tile shape once, whatever its K tile (one
 * 128-byte panel a stage or two): at Qwen3 bf16 M = 8 and 4096 no two of
 * the first eight picks (as many shapes, before any fill-up) differ in
 * BLOCK_K, and a two-panel pick is one the model ranks ahead of its
 * one-panel twins (on a tie the one-panel tile is taken; stage 3's
 * BLOCK_K round times the other). */
static void test_select_one_k_tile_per_shape(void **state)
{
    (void)state;
    size_t nsv = 0;
    mt_variant *sv = sm90_points("none", NULL, &nsv);
    static const int64_t Ms[] = {8, 4096};
    for (int m = 0; m < 2; m++) {
        mt_problem p = qwen3(Ms[m]);
        size_t pick[8];
        const size_t k = mt_select_stage(sv, nsv, &p, 1, 0, SM_COUNT, 8, pick);
        assert_int_equal(k, 8);
        for (size_t i = 0; i < k; i++) {
            const mt_variant *v = &sv[pick[i]];
            const int64_t bk = mt_variant_int(v, "BLOCK_K", 0);
            for (size_t j = 0; j < i; j++)
                if (mt_variant_int(&sv[pick[j]], "BLOCK_K", 0) != bk &&
                    mt_variant_differs_only_in(&sv[pick[j]], v, "BLOCK_K", "STAGES"))
                    fail_msg("M = %lld: %s and %s", (long long)Ms[m], v->name, sv[pick[j]].name);
            if (bk == 64)
                continue;
            const double t = mt_gemm_model_us(v, &p, 0, SM_COUNT);
            for (size_t j = 0; j < nsv; j++)
                if (mt_variant_int(&sv[j], "BLOCK_K", 0) != bk &&
                    mt_variant_differs_only_in(&sv[j], v, "BLOCK_K", "STAGES"))
                    assert_true(mt_gemm_model_us(&sv[j], &p, 0, SM_COUNT) > t);
        }
    }
    free(sv);
}

/* Stage 3's neighbour along BLOCK_K of a 16-bit warpgroup-MMA tile: its
 * twin with the other K tile (two 128-byte panels a stage, or one) at the
 * depth that holds the same bytes of K (8 stages of 64 against 4 of 128),
 * everything else the same; an 8-bit tile, whose K tile is its one
 * panel, has none. */
static void test_neighbours_block_k(void **state)
{
    (void)state;
    size_t nsv = 0, n8 = 0;
    mt_variant *sv = sm90_points("none", "store", &nsv), *s8 = sm90_points("fp8-block", "store", &n8);
    size_t *pick = malloc((nsv > n8 ? nsv : n8) * sizeof *pick);
    assert_non_null(pick);
    static const char *const pair[2] = {
        "mtk_grouped_gemm_sm90_bf16_none_standard_store_m16_n128_k64_g1_s8_pws_fwait_btma_swyes",
        "mtk_grouped_gemm_sm90_bf16_none_standard_store_m16_n128_k128_g1_s4_pws_fwait_btma_swyes"};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(mt_select_neighbours(sv, nsv, named(sv, nsv, pair[i]), "BLOCK_K", pick), 1);
        assert_string_equal(sv[pick[0]].name, pair[1 - i]);
    }
    const mt_variant *block =
        named(s8, n8, "mtk_grouped_gemm_sm90_bf16_fp8xblock_standard_store_m16_n128_k128_g1_s3_pws_fwait_btma_swyes");
    assert_int_equal(mt_select_neighbours(s8, n8, block, "BLOCK_K", pick), 0);
    free(pick);
    free(s8);
    free(sv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_split_where_k_is_long),
        cmocka_unit_test(test_select_stage_split),
        cmocka_unit_test(test_select_stage_fused_only),
        cmocka_unit_test(test_select_gemm2_any_split),
        cmocka_unit_test(test_select_gemv_for_decode),
        cmocka_unit_test(test_default_is_unsplit),
        cmocka_unit_test(test_select_swapped_sm90),
        cmocka_unit_test(test_model_tiled_out_quant),
        cmocka_unit_test(test_neighbours_follow_the_loads),
        cmocka_unit_test(test_neighbours_persist_in_chunks),
        cmocka_unit_test(test_neighbours_pad_skip),
        cmocka_unit_test(test_neighbours_turns),
        cmocka_unit_test(test_neighbours_sm_warps),
        cmocka_unit_test(test_find_unchained),
        cmocka_unit_test(test_neighbours_block_k),
        cmocka_unit_test(test_select_one_k_tile_per_shape),
        cmocka_unit_test(test_neighbours_split_in_ws),
        cmocka_unit_test(test_neighbours_width_swapped_only),
        cmocka_unit_test(test_select_row_tma_roles),
        cmocka_unit_test(test_gemv_own_quant_roles),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
