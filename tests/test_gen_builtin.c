/*
 * The real templates (env MT_TEMPLATE_DIR, set by CTest to templates/):
 * every family loads, its default set for sm_90a and sm_80 is non-empty
 * (a Hopper-only family prunes every sm_80 point as "needs sm_90a"), and a
 * sample of it compiles with NVRTC (the sm_90a images with the launch
 * protocol's mark); grouped_gemm's split-K parameter prunes
 * what it should and its default tiles compile in every quant mode. Kept
 * apart from tests/test_gen.c so that templates still being written do not
 * hide generator failures.
 */
#define _GNU_SOURCE /* memmem */
#include "tests/support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "moetune/gen.h"
#include "templates/gemv_args.h"

#define SAMPLE_PER_FAMILY 4
#define PDL_MARK "mt_pdl_aware" /* with its NUL: the whole name in the string table */

static void test_builtin_templates_compile(void **state)
{
    (void)state;
    const char *dir = getenv("MT_TEMPLATE_DIR");
    if (!dir || !*dir)
        fail_msg("MT_TEMPLATE_DIR is not set (CTest sets it to the source templates/ folder)");
    mt_gen_config cfg = {.no_cache = 1};
    mt_gen *g = NULL;
    mt_status st = mt_gen_open(&cfg, &g);
    if (st)
        fail_msg("loading the templates of %s: %s", dir, mt_gen_errmsg(g));
    if (mt_gen_family_count(g) == 0)
        fail_msg("no templates in %s: the real kernel templates (templates/*.lua) are missing",
                 dir);
    static const char *const archs[] = {"sm_90a", "sm_80"};
    for (size_t f = 0; f < mt_gen_family_count(g); f++) {
        const char *family = mt_gen_family_name(g, f);
        char hash[65];
        assert_int_equal(mt_gen_template_hash(g, family, hash), MT_OK);
        for (size_t a = 0; a < 2; a++) {
            mt_gen_filter flt = {.family = family, .arch = archs[a], .defaults_only = 1};
            mt_variant *v = NULL;
            size_t n = 0;
            mt_prune_report r;
            st = mt_gen_enumerate(g, &flt, &v, &n, &r);
            if (st)
                fail_msg("%s for %s: %s", family, archs[a], mt_gen_errmsg(g));
            if (n == 0 && a == 1 && r.nreasons == 1 && !strcmp(r.reasons[0].reason, "needs sm_90a")) {
                /* A Hopper-only family (wgmma): it must say so for every point. */
                printf("  %s sm_80: every default point pruned, \"needs sm_90a\"\n", family);
                free(v);
                continue;
            }
            if (n == 0)
                fail_msg("%s has no valid default variant for %s", family, archs[a]);
            /* An even spread over the default set. */
            mt_variant sample[SAMPLE_PER_FAMILY];
            size_t ns = n < SAMPLE_PER_FAMILY ? n : SAMPLE_PER_FAMILY;
            for (size_t i = 0; i < ns; i++)
                sample[i] = v[i * n / ns];
            free(v);
            mt_kernel_binary *b = NULL;
            st = mt_gen_compile(g, sample, ns, &b);
            if (st)
                fail_msg("%s for %s: %s", family, archs[a], mt_gen_errmsg(g));
            for (size_t i = 0; i < ns; i++) {
                assert_int_equal(b[i].status, MT_OK);
                assert_true(b[i].image_len > 0);
                /* Every family keeps the launch protocol of mt_device.cuh:
                 * its sm_90a images carry the mark the runtime looks up
                 * (runtime/moe_launch.c), an ELF symbol. */
                if (a == 0 && !memmem(b[i].image, b[i].image_len, PDL_MARK, sizeof PDL_MARK))
                    fail_msg("%s: the sm_90a image has no %s symbol (MT_PDL_AWARE missing from "
                             "the family's render)", sample[i].name, PDL_MARK);
                /* ptxas compiles it as written (no serialized warpgroup
                 * MMAs, C7514, and no other performance note). */
                if (b[i].log && strstr(b[i].log, "Performance Loss"))
                    fail_msg("%s (%s): %s", sample[i].name, archs[a], b[i].log);
            }
            printf("  %s %s: %d default points, %d valid, compiled %zu\n", family, archs[a],
                   r.enumerated, r.valid, ns);
            mt_kernel_binaries_free(b, ns);
        }
    }
    mt_gen_close(g);
}

/* The headers a family's default sources include (the `#line 1 "name"`
 * marks of the amalgamation), each name once, into names[]. */
static size_t included_headers(mt_gen *g, const char *family, char names[][128], size_t max)
{
    size_t nv = 0, count = 0;
    mt_gen_filter f = {.family = family, .arch = "sm_90a", .defaults_only = 1};
    mt_variant *v = NULL;
    if (mt_gen_enumerate(g, &f, &v, &nv, NULL))
        fail_msg("%s: %s", family, mt_gen_errmsg(g));
    for (size_t i = 0; i < nv; i++) {
        char *src = NULL;
        size_t len = 0;
        if (mt_gen_source(g, &v[i], &src, &len))
            fail_msg("%s: %s", v[i].name, mt_gen_errmsg(g));
        static const char mark[] = "#line 1 \"";
        for (const char *p = strstr(src, mark); p; p = strstr(p + 1, mark)) {
            const char *name = p + sizeof mark - 1, *q = strchr(name, '"');
            size_t k = 0;
            if (!q || (size_t)(q - name) >= 128)
                continue;
            while (k < count && (strlen(names[k]) != (size_t)(q - name) ||
                                 strncmp(names[k], name, (size_t)(q - name))))
                k++;
            if (k == count && count < max) {
                memcpy(names[count], name, (size_t)(q - name));
                names[count++][q - name] = '\0';
            }
        }
        free(src);
    }
    free(v);
    return count;
}

static void family_hash_in(const char *dir, const char *family, char hex[65])
{
    const char *dirs[] = {dir};
    mt_gen_config cfg = {.template_dirs = dirs, .ntemplate_dirs = 1, .no_builtin = 1,
                         .no_cache = 1};
    mt_gen *g = NULL;
    if (mt_gen_open(&cfg, &g) || mt_gen_template_hash(g, family, hex))
        fail_msg("templates of %s: %s", dir, mt_gen_errmsg(g));
    mt_gen_close(g);
}

/* An edit to any header that a family's kernels include changes the
 * family's template hash, which is what tells a stored kernel from one the
 * templates now generate (runtime, `moetune db refresh`): also a header
 * that a render picks by the variant (grouped_gemm_sm90's pipelines of
 * their own, act_quant's wide quantizer). Each header is edited in turn in
 * a copy of the template folder. */
static void test_template_hash_covers_included_headers(void **state)
{
    (void)state;
    const char *src_dir = getenv("MT_TEMPLATE_DIR");
    if (!src_dir || !*src_dir)
        fail_msg("MT_TEMPLATE_DIR is not set (CTest sets it to the source templates/ folder)");
    const char *dir = mt_test_tmpdir("hash_headers");
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cp '%s'/*.lua '%s'/*.cuh '%s'/*.h '%s'/", src_dir, src_dir, src_dir, dir);
    assert_int_equal(system(cmd), 0);
    mt_gen *g = mt_test_open_templates();
    int checked = 0;
    for (size_t f = 0; f < mt_gen_family_count(g); f++) {
        const char *family = mt_gen_family_name(g, f);
        char names[32][128], before[65], after[65];
        const size_t n = included_headers(g, family, names, 32);
        family_hash_in(dir, family, before);
        for (size_t i = 0; i < n; i++) {
            char path[800], *body = NULL, msg[256];
            size_t len = 0;
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            assert_int_equal(mt_file_read(path, &body, &len, msg, sizeof msg), MT_OK);
            FILE *w = fopen(path, "ab");
            assert_non_null(w);
            fputs("\n/* edited */\n", w);
            fclose(w);
            family_hash_in(dir, family, after);
            if (!strcmp(before, after))
                fail_msg("%s: an edit to %s, which its kernels include, leaves the family's "
                         "template hash as it was (write the include line out whole in the "
                         ".lua)", family, names[i]);
            assert_int_equal(mt_file_write_atomic(path, body, len, msg, sizeof msg), MT_OK);
            free(body);
            checked++;
        }
    }
    printf("  %d (family, included header) pairs: each edit changes the hash\n", checked);
    assert_true(checked > 0);
    mt_gen_close(g);
}

static int reason_count(const mt_prune_report *r, const char *reason)
{
    for (int i = 0; i < r->nreasons; i++)
        if (!strcmp(r->reasons[i].reason, reason))
            return r->reasons[i].count;
    return 0;
}

/* Every quant mode of moetune/problem.h, by name. */
static const char *const all_quants[] = {"none",        "fp8-tensor", "fp8-token", "fp8-block",
                                         "int8-tensor", "int8-token", "int8-block", "w8a16",
                                         "w4a16"};

/* Variants of a GEMM family for arch under the filter pairs kv
 * (NULL-ended); a value outside the family's domain admits none. */
static mt_variant *family_points(mt_gen *g, const char *family, const char *arch,
                                 int defaults_only, const char *const *kv, size_t *n,
                                 mt_prune_report *r)
{
    mt_gen_filter f = {.family = family, .arch = arch, .defaults_only = defaults_only,
                       .lenient_values = 1};
    for (int i = 0; kv[i]; i += 2, f.nparams++) {
        f.params[f.nparams].name = kv[i];
        f.params[f.nparams].value = kv[i + 1];
    }
    mt_variant *v = NULL;
    if (mt_gen_enumerate(g, &f, &v, n, r))
        fail_msg("%s for %s: %s", family, arch, mt_gen_errmsg(g));
    return v;
}

/* SPLIT_K: the split points are exactly the unsplit decode points with
 * GROUP_M = 1 (every other check is blind to it), the two split-only
 * reasons count the rest, and the names carry it (and PREFETCH after it). */
static void test_split_k_pruning(void **state)
{
    (void)state;
    mt_gen *g = mt_test_open_templates();
    const char *const kv[] = {"dtype", "bf16", "quant", "none", "format", "standard",
                              "epilogue", "store", NULL};
    size_t n = 0;
    mt_prune_report r;
    mt_variant *v = family_points(g, "grouped_gemm", "sm_90a", 0, kv, &n, &r);
    int valid[9] = {0};   /* by SPLIT_K */
    int decode_unsplit = 0;
    for (size_t i = 0; i < n; i++) {
        const int64_t sk = mt_variant_int(&v[i], "SPLIT_K", -1);
        const int64_t bm = mt_variant_int(&v[i], "BLOCK_M", -1);
        const int64_t gm = mt_variant_int(&v[i], "GROUP_M", -1);
        assert_true(sk == 1 || sk == 2 || sk == 4 || sk == 8);
        valid[sk]++;
        if (sk > 1)
            assert_true(bm <= 32 && gm == 1);
        else if (bm <= 32 && gm == 1)
            decode_unsplit++;
        char tail[32];   /* SPLIT_K, then the last parameter, PREFETCH */
        snprintf(tail, sizeof tail, "_sk%lld_pf%lld", (long long)sk,
                 (long long)mt_variant_int(&v[i], "PREFETCH", -1));
        const size_t len = strlen(v[i].name);
        assert_true(len > strlen(tail) && !strcmp(v[i].name + len - strlen(tail), tail));
    }
    free(v);
    assert_true(decode_unsplit > 0);
    assert_int_equal(valid[2], decode_unsplit);
    assert_int_equal(valid[4], decode_unsplit);
    assert_int_equal(valid[8], decode_unsplit);
    /* The split checks come first: per split value, BLOCK_M 64 and 128 (half
     * of the BLOCK_M values), then GROUP_M 8 of the rest. */
    const int per_sk = r.enumerated / 4;
    assert_int_equal(reason_count(&r, "split-K only for decode tiles (BLOCK_M <= 32)"),
                     3 * per_sk / 2);
    assert_int_equal(reason_count(&r, "split-K tiles take GROUP_M = 1"), 3 * per_sk / 4);
    mt_gen_close(g);
}

/* mt_gen_find decodes a canonical name instead of walking the space: every
 * sampled variant of both GEMM families (whose family names begin one
 * another, and one of which leaves SWAP=no out of its names) comes back as
 * enumerated, and a point valid() refuses is not found, with its reason. */
static void test_find_decodes_names(void **state)
{
    (void)state;
    mt_gen *g = mt_test_open_templates();
    static const char *const families[] = {"grouped_gemm", "grouped_gemm_sm90"};
    const char *const kv[] = {"dtype", "bf16", "quant", "fp8-block", "format", "standard", NULL};
    for (int f = 0; f < 2; f++) {
        size_t n = 0;
        mt_variant *v = family_points(g, families[f], "sm_90a", 0, kv, &n, NULL);
        assert_true(n > 100);
        int checked = 0;
        for (size_t i = 0; i < n; i += 37, checked++) {
            mt_variant got;
            if (mt_gen_find(g, v[i].name, "sm_90a", &got) != MT_OK)
                fail_msg("%s: %s", v[i].name, mt_gen_errmsg(g));
            assert_string_equal(got.name, v[i].name);
            assert_string_equal(got.family, families[f]);
            assert_int_equal(got.threads, v[i].threads);
            assert_int_equal(got.smem_bytes, v[i].smem_bytes);
            assert_int_equal(got.nparams, v[i].nparams);
        }
        printf("  %s: %d of %zu names found again\n", families[f], checked, n);
        free(v);
    }
    mt_variant got;
    assert_int_equal(mt_gen_find(g, "mtk_grouped_gemm_sm90_bf16_none_standard_store_m16_n128_k64_g1_s4_"
                                    "ppingpong_fwait_btma_swyes", "sm_90a", &got),
                     MT_ERR_NOT_FOUND);
    assert_non_null(strstr(mt_gen_errmsg(g), "pingpong swapped: each computing warpgroup takes a whole "
                                             "tile of 64 weight rows"));
    assert_int_equal(mt_gen_find(g, "mtk_grouped_gemm_sm90_bf16_none_standard_store_m16_n64_k64_g1_s4_"
                                    "ppingpong_fwait_btma_swyes", "sm_90a", &got),
                     MT_OK);
    assert_int_equal(got.threads, 384);
    assert_int_equal(mt_gen_find(g, "mtk_grouped_gemm_sm90_bf16_none_standard_store_m64_n64_k64_g1_s4_"
                                    "ppingpong_fwait_btma_trailing", "sm_90a", &got),
                     MT_ERR_NOT_FOUND);
    mt_gen_close(g);
}

/* Does name[0, *len) end in tail? Then *len drops it, so that the part
 * before it can be read next. */
static int strip_tail(const char *name, size_t *len, const char *tail)
{
    const size_t tl = strlen(tail);
    if (*len <= tl || strncmp(name + *len - tl, tail, tl))
        return 0;
    *len -= tl;
    return 1;
}

/* grouped_gemm_sm90's SWAP (version 7): the unswapped points keep their
 * version-6 names (the tuned databases' keys), the swapped ones end in
 * "_swyes"; swapped tiles have whole warpgroups of 64 weight rows and a
 * copying warpgroup, in every pipeline that has one, the persistent loop
 * with block scales too; tiles under 64 token rows are all swapped. PIPE pingpong: two computing warpgroups and a copying one
 * (384 threads), each group a whole tile: 64 token rows, or swapped 64
 * weight rows. SPLIT_K > 1 ("_sk2", "_sk4"): swapped "ws" tiles
 * that store their rows only. PAD_SKIP=yes ("_psyes"): the persistent
 * tiles of 128 unswapped token rows only. TURNS=yes ("_tnyes", last of
 * all): block modes, 128 unswapped token rows, PIPE ws or persist. */
static void test_sm90_swap_names_and_pruning(void **state)
{
    (void)state;
    mt_gen *g = mt_test_open_templates();
    static const char *const quants[] = {"none", "fp8-block"};
    for (int q = 0; q < 2; q++) {
        const char *const kv[] = {"dtype", "bf16", "quant", quants[q], "format", "standard",
                                  "epilogue", "store", NULL};
        size_t n = 0;
        mt_prune_report r;
        mt_variant *v = family_points(g, "grouped_gemm_sm90", "sm_90a", 0, kv, &n, &r);
        int swapped = 0, v6_name = 0, pingpong = 0, swapped_pingpong = 0, split = 0;
        int swapped_persist = 0, pad_skips = 0, turns = 0;
        for (size_t i = 0; i < n; i++) {
            const int swap = !strcmp(mt_variant_get(&v[i], "SWAP"), "yes");
            const char *pipe = mt_variant_get(&v[i], "PIPE");
            if (!strcmp(pipe, "pingpong")) {
                pingpong++;
                swapped_pingpong += swap;
                assert_int_equal(mt_variant_int(&v[i], swap ? "BLOCK_N" : "BLOCK_M", 0), 64);
                assert_int_equal(v[i].threads, 384);
            }
            /* ALOAD=tma (A rows by TMA) adds "_atma" last; never with
             * PIPE sync (no copying warpgroup), CTA pairs or swapped
             * operands. */
            size_t len = strlen(v[i].name);
            /* TURNS=yes ("_tnyes", last of all): the block modes' tiles of
             * two unswapped computing warpgroups on one tile, ws or persist. */
            const int turn = !strcmp(mt_variant_get(&v[i], "TURNS"), "yes");
            assert_int_equal(strip_tail(v[i].name, &len, "_tnyes"), turn);
            if (turn) {
                turns++;
                assert_string_equal(quants[q], "fp8-block");
                assert_true(!strcmp(pipe, "ws") || !strcmp(pipe, "persist"));
                assert_int_equal(mt_variant_int(&v[i], "BLOCK_M", 0), 128);
                assert_false(swap);
            }
            /* PAD_SKIP=yes ("_psyes", before it): the persistent tiles of
             * two unswapped computing warpgroups only. */
            const int pad_skip = !strcmp(mt_variant_get(&v[i], "PAD_SKIP"), "yes");
            assert_int_equal(strip_tail(v[i].name, &len, "_psyes"), pad_skip);
            if (pad_skip) {
                pad_skips++;
                assert_string_equal(pipe, "persist");
                assert_int_equal(mt_variant_int(&v[i], "BLOCK_M", 0), 128);
                assert_false(swap);
            }
            const int sk = (int)mt_variant_int(&v[i], "SPLIT_K", 0);
            char sk_tail[8];
            snprintf(sk_tail, sizeof sk_tail, "_sk%d", sk);
            assert_int_equal(strip_tail(v[i].name, &len, sk_tail), sk > 1);
            if (sk > 1) {
                split++;
                assert_string_equal(pipe, "ws");
                assert_string_equal(mt_variant_get(&v[i], "SWAP"), "yes");
            } else {
                assert_int_equal(sk, 1);
            }
            const int atma = !strcmp(mt_variant_get(&v[i], "ALOAD"), "tma");
            assert_int_equal(strip_tail(v[i].name, &len, "_atma"), atma);
            if (atma) {
                assert_string_not_equal(pipe, "sync");
                assert_int_equal(mt_variant_int(&v[i], "CLUSTER", 0), 1);
                assert_string_equal(mt_variant_get(&v[i], "SWAP"), "no");
            }
            assert_int_equal(strip_tail(v[i].name, &len, "_swyes"), swap);
            if (swap) {
                swapped++;
                assert_int_equal(mt_variant_int(&v[i], "BLOCK_N", 0) % 64, 0);
                assert_string_not_equal(pipe, "sync");
                swapped_persist += !strcmp(pipe, "persist");
            } else {
                assert_true(mt_variant_int(&v[i], "BLOCK_M", 0) >= 64);
            }
            v6_name += !strcmp(v[i].name, q == 0 ? "mtk_grouped_gemm_sm90_bf16_none_standard_store_"
                                                   "m128_n256_k64_g8_s4_pws_fwait_btma"
                                                 : "mtk_grouped_gemm_sm90_bf16_fp8xblock_standard_store_"
                                                   "m128_n128_k128_g8_s3_ppersist_fwait_btma");
        }
        printf("  grouped_gemm_sm90 %s: %zu points, %d swapped, %d pingpong (%d swapped)\n", quants[q], n,
               swapped, pingpong, swapped_pingpong);
        assert_true(swapped > 0 && (size_t)swapped < n);
        assert_true(split > 0 && split < swapped);
        assert_true(pingpong > swapped_pingpong && swapped_pingpong > 0);
        assert_true(reason_count(&r, "pingpong swapped: each computing warpgroup takes a whole tile of 64 "
                                     "weight rows") > 0);
        assert_true(reason_count(&r, "pingpong: each computing warpgroup takes a whole tile of 64 token "
                                     "rows") > 0);
        assert_int_equal(v6_name, 1);
        assert_true(swapped_persist > 0);
        assert_true(pad_skips > 0);
        assert_true(reason_count(&r, "PAD_SKIP: the persistent tiles of two computing warpgroups "
                                     "(128 token rows)") > 0);
        assert_true(q == 0 ? turns == 0 : turns > 0);
        assert_true(reason_count(&r, "TURNS: block modes, two computing warpgroups on one tile (128 token "
                                     "rows, PIPE ws or persist)") > 0);
        free(v);
    }
    mt_gen_close(g);
}

/* grouped_gemm_sm90 OQUANT=last ("_oqlast", after every other tail): GEMM1
 * tiles of the block modes with the activation fused, unswapped, of a
 * pipeline with a copying warpgroup (ws, persist, pingpong), unpaired and
 * unsplit, whose BLOCK_N / 2 activated columns divide 128; each one's
 * OQUANT=step twin is a point too. Its source includes the out-quant
 * header and takes the routing argument (act_q, act_scale); the twin's
 * neither, so that the stored kernels of every other variant stay as they
 * were. Pruned with a reason for a storing tile, a mode without block
 * scales, and a pair of CTAs. */
static void test_sm90_out_quant_points(void **state)
{
    (void)state;
    mt_gen *g = mt_test_open_templates();
    const char *const kv[] = {"dtype", "bf16", "quant", "fp8-block", "format", "standard", NULL};
    size_t n = 0;
    mt_prune_report r;
    mt_variant *v = family_points(g, "grouped_gemm_sm90", "sm_90a", 0, kv, &n, &r);
    int last = 0, pipes[4] = {0};
    static const char *const pipe_names[] = {"ws", "persist", "pingpong", "sync"};
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(v[i].name);
        const int oq = mt_variant_quantizes_out(&v[i]);
        assert_int_equal(strip_tail(v[i].name, &len, "_oqlast"), oq);
        if (!oq)
            continue;
        last++;
        assert_string_not_equal(mt_variant_get(&v[i], "epilogue"), "store");
        assert_string_not_equal(mt_variant_get(&v[i], "epilogue"), "sum");
        assert_string_equal(mt_variant_get(&v[i], "SWAP"), "no");
        assert_int_equal(mt_variant_int(&v[i], "CLUSTER", 0), 1);
        assert_int_equal(mt_variant_int(&v[i], "SPLIT_K", 0), 1);
        assert_int_equal(128 % (mt_variant_int(&v[i], "BLOCK_N", 0) / 2), 0);
        for (int k = 0; k < 4; k++)
            pipes[k] += !strcmp(mt_variant_get(&v[i], "PIPE"), pipe_names[k]);
        char twin[sizeof v[i].name];
        snprintf(twin, sizeof twin, "%.*s", (int)len, v[i].name);
        int found = 0;
        for (size_t j = 0; j < n && !found; j++)
            found = !strcmp(v[j].name, twin);
        assert_true(found);
        if (last == 1) {   /* the sources of one and of its twin */
            mt_variant t;
            char *src = NULL, *tsrc = NULL;
            assert_int_equal(mt_gen_find(g, twin, "sm_90a", &t), MT_OK);
            assert_int_equal(mt_gen_source(g, &v[i], &src, NULL), MT_OK);
            assert_int_equal(mt_gen_source(g, &t, &tsrc, NULL), MT_OK);
            assert_non_null(strstr(src, "struct out_group {"));
            assert_non_null(strstr(src, "enum { LAST_QUANT = 1 };"));
            assert_non_null(strstr(src, "const __grid_constant__ mt_gemv_slot_args args"));
            assert_null(strstr(tsrc, "struct out_group {"));
            assert_null(strstr(tsrc, "enum { LAST_QUANT = 1 };"));
            assert_non_null(strstr(tsrc, "const __grid_constant__ mt_gemm_args args"));
            free(src);
            free(tsrc);
        }
    }
    printf("  grouped_gemm_sm90 fp8-block OQUANT=last: %d points (ws %d, persist %d, pingpong %d)\n", last,
           pipes[0], pipes[1], pipes[2]);
    assert_true(pipes[0] > 0 && pipes[1] > 0 && pipes[2] > 0);
    assert_int_equal(pipes[3], 0);
    assert_true(reason_count(&r, "OQUANT last: GEMM1 of the block modes with the activation fused") > 0);
    assert_true(reason_count(&r, "OQUANT last: unswapped tiles of PIPE ws, persist or pingpong, unpaired, "
                                 "unsplit") > 0);
    free(v);
    const char *const none[] = {"dtype", "bf16", "quant", "none", "format", "standard", "epilogue", "silu", NULL};
    v = family_points(g, "grouped_gemm_sm90", "sm_90a", 0, none, &n, &r);
    for (size_t i = 0; i < n; i++)
        assert_false(mt_variant_quantizes_out(&v[i]));
    assert_true(reason_count(&r, "OQUANT last: GEMM1 of the block modes with the activation fused") > 0);
    free(v);
    mt_gen_close(g);
}

/* Compile the n variants v together: each one must compile to an image. */
static void compile_all(mt_gen *g, const mt_variant *v, size_t n, const char *what, const char *arch)
{
    mt_kernel_binary *b = NULL;
    const mt_status st = mt_gen_compile(g, v, n, &b);
    for (size_t i = 0; i < n; i++)
        if (b && b[i].status)
            fail_msg("compiling %s: %.4000s", b[i].variant.name, b[i].log ? b[i].log : "");
    assert_int_equal(st, MT_OK);
    for (size_t i = 0; i < n; i++) {
        assert_true(b[i].image_len > 0);
        /* ptxas's performance note (C7514, C7520: warpgroup MMAs
         * serialized), asked of the warpgroup-MMA tiles only. */
        if (!strcmp(arch, "sm_90a") && !strcmp(b[i].variant.family, "grouped_gemm_sm90") && b[i].log &&
            strstr(b[i].log, "Performance Loss"))
            fail_msg("%s: %s", b[i].variant.name, b[i].log);
    }
    printf("  %s %s: compiled %zu\n", what, arch, n);
    mt_kernel_binaries_free(b, n);
}

/* The default set has one split-K tile per quant mode (16x64, BLOCK_K 128
 * for 8-bit activations, 64 otherwise, 4 slices) in every dtype, format and
 * epilogue; one of each quant mode compiles for sm_90a and sm_80 (fp8:
 * sm_90a only). */
static void test_split_k_defaults_compile(void **state)
{
    (void)state;
    const char *const *quants = all_quants;
    static const char *const archs[] = {"sm_90a", "sm_80"};
    static const char *const formats[] = {"standard", "batched"};
    static const char *const epis[] = {"store", "silu", "gelu", "sum"};
    mt_gen *g = mt_test_open_templates();
    for (int a = 0; a < 2; a++) {
        mt_variant sample[40];
        size_t ns = 0;
        for (size_t q = 0; q < 9; q++) {
            const char *const kv[] = {"quant", quants[q], "SPLIT_K", "4", NULL};
            size_t n = 0;
            mt_variant *v = family_points(g, "grouped_gemm", archs[a], 1, kv, &n, NULL);
            if (a == 1 && !strncmp(quants[q], "fp8", 3)) {
                assert_int_equal(n, 0);
                free(v);
                continue;
            }
            assert_int_equal(n, 2 * (4 + 3));   /* dtype x (standard: 4 epilogues, batched: 3, no "sum") */
            const int w8a8 = !strncmp(quants[q], "fp8", 3) || !strncmp(quants[q], "int8", 4);
            for (size_t i = 0; i < n; i++) {
                assert_int_equal(mt_variant_int(&v[i], "BLOCK_M", 0), 16);
                assert_int_equal(mt_variant_int(&v[i], "BLOCK_N", 0), 64);
                assert_int_equal(mt_variant_int(&v[i], "BLOCK_K", 0), w8a8 ? 128 : 64);
                assert_int_equal(mt_variant_int(&v[i], "GROUP_M", 0), 1);
            }
            /* A different dtype, format and epilogue from one mode to the
             * next (the standard format's four epilogues include "sum"). */
            const char *fmt = formats[(q / 2) % 2];
            const char *epi = epis[q % (strcmp(fmt, "standard") ? 3 : 4)];
            size_t want = n;
            for (size_t i = 0; i < n && want == n; i++)
                if (!strcmp(mt_variant_get(&v[i], "dtype"), q % 2 ? "fp16" : "bf16") &&
                    !strcmp(mt_variant_get(&v[i], "format"), fmt) &&
                    !strcmp(mt_variant_get(&v[i], "epilogue"), epi))
                    want = i;
            assert_true(want < n);
            sample[ns++] = v[want];
            free(v);
        }
        compile_all(g, sample, ns, "grouped_gemm split-K defaults", archs[a]);
    }
    mt_gen_close(g);
}

/* Every default tile of the warpgroup-MMA family, in the block-scaled and
 * the unscaled mode, compiles without a ptxas performance note: C7514
 * (warpgroup MMAs serialized) is what the removed FOLD=pingpong loop got,
 * and such a kernel still runs, only 40 % slower (docs/PERFORMANCE.md). */
static void test_sm90_defaults_not_serialized(void **state)
{
    (void)state;
    mt_gen *g = mt_test_open_templates();
    static const char *const quants[] = {"none", "fp8-block"};
    for (int q = 0; q < 2; q++) {
        const char *const kv[] = {"quant", quants[q], "dtype", "bf16", "format", "standard",
                                  "epilogue", "store"};
        mt_variant *v = NULL;
        mt_kernel_binary *b = NULL;
        const size_t n = mt_test_compile_defaults(g, "grouped_gemm_sm90", "sm_90a", kv, 8, &v, &b);
        assert_true(n >= 4);
        for (size_t i = 0; i < n; i++)
            if (b[i].log && strstr(b[i].log, "Performance Loss"))
                fail_msg("%s: %s", b[i].variant.name, b[i].log);
        printf("  grouped_gemm_sm90 %s defaults: %zu compiled, no performance note\n", quants[q], n);
        mt_kernel_binaries_free(b, n);
        free(v);
    }
    mt_gen_close(g);
}

/* k points of v[0 .. n) drawn at even steps through it (so over its tile
 * shapes, stages and loads, not only its last parameters), into out. */
static size_t pick_spread(const mt_variant *v, size_t n, size_t k, mt_variant *out)
{
    assert_true(n >= k);
    for (size_t i = 0; i < k; i++)
        out[i] = v[(i * n) / k + (i * 7) % (n / k)];
    return k;
}

/* Swapped block-scaled tiles in the persistent loop (the fp8 decode GEMM2s'
 * shape: few token rows, K of a few blocks) were pruned from f4f792e to
 * 20e8318, while ptxas serialized their warpgroup MMAs (C7520). Twelve of
 * them, six of each block mode drawn at even steps through its enumeration,
 * compile with no performance note. */
static void test_sm90_swapped_block_persist_compiles(void **state)
{
    (void)state;
    mt_gen *g = mt_test_open_templates();
    static const char *const quants[] = {"fp8-block", "int8-block"};
    mt_variant pick[12];
    size_t np = 0;
    for (int q = 0; q < 2; q++) {
        const char *const kv[] = {"quant", quants[q], "PIPE", "persist", "SWAP", "yes", NULL};
        size_t n = 0;
        mt_variant *v = family_points(g, "grouped_gemm_sm90", "sm_90a", 0, kv, &n, NULL);
        np += pick_spread(v, n, 6, pick + np);
        free(v);
    }
    compile_all(g, pick, np, "grouped_gemm_sm90 swapped block-scaled persistent tiles, no performance note,", "sm_90a");
    mt_gen_close(g);
}

/* BLOCK_K 128 of 16-bit values: a stage of two 128-byte panels a row
 * (grouped_gemm_sm90.cuh, sm90_shape), so that a stage reads 256 bytes of
 * every weight row. Offered with every pipeline, with the shared memory of
 * both panels; two tiles of each pipeline, and two of fp16, compile with
 * no performance note; five are default tiles. */
static void test_sm90_two_panel_tiles(void **state)
{
    (void)state;
    mt_gen *g = mt_test_open_templates();
    static const char *const pipes[] = {"sync", "ws", "persist", "pingpong"};
    mt_variant pick[10];
    size_t np = 0;
    for (int i = 0; i < 5; i++) {
        const char *const kv[] = {"quant", "none", "BLOCK_K", "128", "dtype", i < 4 ? "bf16" : "fp16",
                                  "PIPE", pipes[i % 4], NULL};
        size_t n = 0;
        mt_variant *v = family_points(g, "grouped_gemm_sm90", "sm_90a", 0, kv, &n, NULL);
        for (size_t j = 0; j < n; j++) {
            const int64_t bm = mt_variant_int(&v[j], "BLOCK_M", 0), bn = mt_variant_int(&v[j], "BLOCK_N", 0);
            assert_true((int64_t)v[j].smem_bytes >= mt_variant_int(&v[j], "STAGES", 0) * (bm + bn) * 256);
        }
        np += pick_spread(v, n, 2, pick + np);
        free(v);
    }
    compile_all(g, pick, np, "grouped_gemm_sm90 16-bit tiles of two panels a stage, no performance note,", "sm_90a");
    /* The default set has five of them, for the GPU tests, at 3 stages,
     * which no other default tile of the family has (a test picks them
     * out by name: _s3_p). */
    const char *const none_kv[] = {"quant", "none", "dtype", "bf16", "format", "standard",
                                   "epilogue", "store", NULL};
    size_t nd = 0, two = 0;
    mt_variant *d = family_points(g, "grouped_gemm_sm90", "sm_90a", 1, none_kv, &nd, NULL);
    for (size_t i = 0; i < nd; i++) {
        const int panels2 = mt_variant_int(&d[i], "BLOCK_K", 0) == 128;
        two += panels2;
        assert_int_equal(mt_variant_int(&d[i], "STAGES", 0) == 3, panels2);
    }
    free(d);
    assert_int_equal(two, 5);
    const char *const fp8_kv[] = {"quant", "fp8-block", "STAGES", "3", NULL};
    free(family_points(g, "grouped_gemm_sm90", "sm_90a", 1, fp8_kv, &nd, NULL));
    assert_int_equal(nd, 0);
    /* A stage is one panel or two: half a panel (8-bit values, BLOCK_K
     * 64) has no tile. */
    const char *const kv8[] = {"quant", "fp8-tensor", "BLOCK_K", "64", NULL};
    size_t n8 = 1;
    free(family_points(g, "grouped_gemm_sm90", "sm_90a", 0, kv8, &n8, NULL));
    assert_int_equal(n8, 0);
    mt_gen_close(g);
}

/* The decode family (grouped_gemv): its four default tiles in every mode
 * it has (none and the six w8a8 modes; no weight-only variant) for every
 * dtype, format and epilogue (the topk sums, "sum" and "lastsum", only with
 * the two slot-routed tiles, with and without lookahead), and in the block
 * modes that tile quantizing its own A rows: as they are (AQUANT=cta:
 * standard format, no topk sum) and after either activation (AQUANT=silu,
 * gelu: standard format, GEMM2's epilogues "store", "sum" and "lastsum"),
 * and that tile (step-fed and quantizing its own A rows) and one of 64
 * weight rows quantizing its activated output for GEMM2 (OQUANT=last:
 * standard format, a fused activation), that one also step-fed with every
 * epilogue; and in the 16-bit and block modes the one-token tile running
 * GEMM2 in its launch (CHAIN: standard format, a fused activation, in the
 * block modes quantizing its A rows and its output), with its GEMM2 tile
 * in the set; one kernel per mode, a GEMM2 of each topk sum, and in the
 * block modes every self-quantizing GEMM1 and the bf16 self-activating
 * GEMM2s and output-quantizing GEMM1s, and the bf16 chained tiles (each
 * also with its registers capped, SM_WARPS 24), compile
 * for sm_90a and sm_80, where the fp8 modes are pruned for their
 * conversions. */
static void test_gemv_defaults_compile(void **state)
{
    (void)state;
    const char *const *quants = all_quants;
    static const char *const archs[] = {"sm_90a", "sm_80"};
    mt_gen *g = mt_test_open_templates();
    for (int a = 0; a < 2; a++) {
        mt_variant sample[96];
        size_t ns = 0;
        for (size_t q = 0; q < 9; q++) {
            const char *const kv[] = {"quant", quants[q], NULL};
            size_t n = 0;
            mt_variant *v = family_points(g, "grouped_gemv", archs[a], 1, kv, &n, NULL);
            const int none = (a == 1 && !strncmp(quants[q], "fp8", 3)) || q >= 7;
            const int block = strstr(quants[q], "-block") != NULL;
            /* two tiles x dtype x format x (store, silu, gelu), and the
             * two slot-routed tiles in the standard format, with "sum" and
             * "lastsum" too; block modes: the self-quantizing tile x dtype x
             * (store, silu, gelu), and x activation x (store, sum, lastsum),
             * and the output-quantizing tiles (AQUANT step, cta; and one of
             * 64 weight rows) x dtype x (silu, gelu), and that last one's
             * step-fed twin x dtype x (store, silu, gelu, sum, lastsum);
             * 16-bit: a tile of eight warps, uncapped and capped at 48
             * warps, x dtype x (silu, store) */
            const int sixteen = !strcmp(quants[q], "none");
            const int chainable = sixteen || block;
            assert_int_equal(n, none ? 0 : 2 * 2 * 2 * 3 + 2 * 2 * 5 + (block ? 2 * 3 + 2 * 2 * 3 + 3 * 2 * 2 + 2 * 5 : 0) +
                                               (chainable ? 2 * 2 * 2 : 0) + (sixteen ? 2 * 2 * 2 : 0));
            size_t capped48 = 0;
            for (size_t i = 0; i < n; i++)
                if (mt_variant_int(&v[i], "SM_WARPS", -1) == 48) {
                    /* six CTAs of eight warps, asked of __launch_bounds__ */
                    char *src = NULL;
                    assert_int_equal(mt_gen_source(g, &v[i], &src, NULL), MT_OK);
                    assert_non_null(strstr(src, "__launch_bounds__(256, 6)"));
                    free(src);
                    assert_int_equal(mt_variant_chain(&v[i]), 0);
                    /* and its uncapped twin, the GPU tests' reference */
                    size_t twins = 0;
                    for (size_t j = 0; j < n; j++)
                        twins += mt_variant_same_but(&v[j], &v[i], "SM_WARPS", "0");
                    assert_int_equal(twins, 1);
                    sample[ns++] = v[i];
                    capped48++;
                }
            assert_int_equal(capped48, sixteen ? 2 * 2 : 0);
            if (n)
                sample[ns++] = v[(q * 7) % n];
            static const char *const sum_epis[] = {"sum", "lastsum"};
            for (int e = 0; e < 2; e++) {
                size_t sums = 0;
                int picked = 0;
                for (size_t i = 0; i < n; i++)
                    if (!strcmp(mt_variant_get(&v[i], "epilogue"), sum_epis[e]) &&
                        !mt_variant_quantizes_a(&v[i])) {
                        assert_int_equal(mt_variant_int(&v[i], "BLOCK_M", 0), 1);
                        sums++;
                        /* with and without lookahead, from mode to mode */
                        if (!picked && mt_variant_int(&v[i], "AHEAD", -1) == (int)((q + e) % 2)) {
                            sample[ns++] = v[i];
                            picked = 1;
                        }
                    }
                assert_int_equal(sums, none ? 0 : 2 * 2 + (block ? 2 : 0));
                assert_int_equal(picked, sums > 0);
            }
            size_t cta = 0;
            for (size_t i = 0; i < n; i++)
                if (!strcmp(mt_variant_get(&v[i], "AQUANT"), "cta") &&
                    strcmp(mt_variant_get(&v[i], "OQUANT"), "last")) {
                    assert_int_equal(mt_variant_int(&v[i], "BLOCK_M", 0), 1);
                    assert_string_equal(mt_variant_get(&v[i], "format"), "standard");
                    assert_false(mt_variant_sums_topk(&v[i]));
                    sample[ns++] = v[i];   /* every one: each dtype and epilogue */
                    cta++;
                }
            assert_int_equal(cta, none || !block ? 0 : 2 * 3);
            size_t acts = 0;
            for (size_t i = 0; i < n; i++)
                if (mt_variant_a_activation(&v[i])) {
                    assert_int_equal(mt_variant_int(&v[i], "BLOCK_M", 0), 1);
                    assert_string_equal(mt_variant_get(&v[i], "format"), "standard");
                    assert_true(mt_variant_is_gemm2_epilogue(&v[i]));
                    if (!strcmp(mt_variant_get(&v[i], "dtype"), "bf16"))
                        sample[ns++] = v[i];
                    acts++;
                }
            assert_int_equal(acts, none || !block ? 0 : 2 * 2 * 3);
            size_t last = 0;
            for (size_t i = 0; i < n; i++)
                if (!strcmp(mt_variant_get(&v[i], "OQUANT"), "last")) {
                    assert_int_equal(mt_variant_int(&v[i], "BLOCK_M", 0), 1);
                    assert_string_equal(mt_variant_get(&v[i], "format"), "standard");
                    assert_true(mt_variant_quantizes_out(&v[i]));
                    assert_false(mt_variant_is_gemm2_epilogue(&v[i]));
                    if (!strcmp(mt_variant_get(&v[i], "dtype"), "bf16"))
                        sample[ns++] = v[i];
                    last++;
                }
            assert_int_equal(last, none || !block ? 0 : (3 + 2) * 2 * 2);   /* + the chained tiles */
            size_t chains = 0;
            for (size_t i = 0; i < n; i++)
                if (mt_variant_chain(&v[i]) > 0) {
                    assert_int_equal(mt_variant_int(&v[i], "BLOCK_M", 0), 1);
                    assert_string_equal(mt_variant_get(&v[i], "format"), "standard");
                    assert_false(mt_variant_is_gemm2_epilogue(&v[i]));
                    assert_int_equal(mt_variant_quantizes_a(&v[i]), block);
                    assert_int_equal(mt_variant_quantizes_out(&v[i]), block);
                    /* its GEMM2 tile is in the default set too (the tests
                     * run the pipeline the runtime would) */
                    size_t halves = 0;
                    for (size_t j = 0; j < n; j++)
                        halves += mt_variant_is_chain_gemm2(&v[j], &v[i]);
                    assert_int_equal(halves, 1);
                    /* a capped one (SM_WARPS 24: six CTAs of four warps)
                     * asks __launch_bounds__ for them, and its uncapped
                     * twin, the GPU tests' way to its reference, is in
                     * the set */
                    const int64_t sm_warps = mt_variant_int(&v[i], "SM_WARPS", -1);
                    char *src = NULL;
                    assert_int_equal(mt_gen_source(g, &v[i], &src, NULL), MT_OK);
                    assert_int_equal(strstr(src, "__launch_bounds__(128, 6)") != NULL, sm_warps == 24);
                    free(src);
                    if (sm_warps) {
                        size_t twins = 0;
                        for (size_t j = 0; j < n; j++)
                            twins += mt_variant_same_but(&v[j], &v[i], "SM_WARPS", "0");
                        assert_int_equal(twins, 1);
                    }
                    if (!strcmp(mt_variant_get(&v[i], "dtype"), "bf16"))
                        sample[ns++] = v[i];
                    chains += !sm_warps;
                }
            assert_int_equal(chains, none || !chainable ? 0 : 2 * 2);
            free(v);
        }
        compile_all(g, sample, ns, "grouped_gemv defaults", archs[a]);
    }
    mt_gen_close(g);
}

/* grouped_gemv's register caps (SM_WARPS) exist where an SM can hold the
 * CTAs they ask for: no more warps than its threads (1536 on sm_86 and
 * sm_89), and for a tile that quantizes its A rows, no more CTAs than its
 * shared memory holds with the quantized row and its scales
 * (MT_GEMV_AQ_MAX_K bytes and a float per 128) and the 1 KB the driver
 * keeps a CTA. Every other cap of whole CTAs is there. */
static void test_gemv_caps_fit_the_sm(void **state)
{
    (void)state;
    static const struct {
        const char *arch, *quant;
        int threads, smem;
    } sms[] = {{"sm_80", "int8-block", 2048, 167936},
               {"sm_86", "int8-block", 1536, 102400},
               {"sm_90a", "fp8-block", 2048, 233472}};
    static const int caps[] = {16, 20, 24, 32, 40, 48, 64};
    const int aq_cta = MT_GEMV_AQ_MAX_K + MT_GEMV_AQ_MAX_K / 128 * 4 + 1024;
    mt_gen *g = mt_test_open_templates();
    for (size_t a = 0; a < sizeof sms / sizeof sms[0]; a++)
        for (int aq = 0; aq < 2; aq++) {
            const char *const kv[] = {"dtype", "bf16", "quant", sms[a].quant, "format", "standard",
                                      "epilogue", "silu", "BLOCK_M", "1", "BLOCK_N", "16", "UNROLL", "2",
                                      "AHEAD", "0", "AQUANT", aq ? "cta" : "step", "OQUANT", "step",
                                      "CHAIN", "0", NULL};
            size_t n = 0;
            mt_variant *v = family_points(g, "grouped_gemv", sms[a].arch, 0, kv, &n, NULL);
            for (int warps = 4; warps <= 8; warps += 4)
                for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
                    const int cap = caps[c];
                    const int want = cap % warps == 0 && cap * 32 <= sms[a].threads &&
                                     (!aq || cap / warps * aq_cta <= sms[a].smem);
                    int have = 0;
                    for (size_t i = 0; i < n; i++)
                        have += mt_variant_int(&v[i], "WARPS", 0) == warps &&
                                mt_variant_int(&v[i], "SM_WARPS", 0) == cap;
                    if (have != want)
                        fail_msg("%s %s AQUANT %s, %d warps capped at %d: %d variants, want %d", sms[a].arch,
                                 sms[a].quant, aq ? "cta" : "step", warps, cap, have, want);
                }
            free(v);
        }
    mt_gen_close(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_templates_compile),
        cmocka_unit_test(test_template_hash_covers_included_headers),
        cmocka_unit_test(test_split_k_pruning),
        cmocka_unit_test(test_split_k_defaults_compile),
        cmocka_unit_test(test_sm90_defaults_not_serialized),
        cmocka_unit_test(test_sm90_out_quant_points),
        cmocka_unit_test(test_sm90_swapped_block_persist_compiles),
        cmocka_unit_test(test_sm90_two_panel_tiles),
        cmocka_unit_test(test_find_decodes_names),
        cmocka_unit_test(test_sm90_swap_names_and_pruning),
        cmocka_unit_test(test_gemv_defaults_compile),
        cmocka_unit_test(test_gemv_caps_fit_the_sm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
