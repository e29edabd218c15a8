/*
 * Taking the atomics out of a tuned database (tuner/deterministic.h), on
 * the real templates (MT_TEMPLATE_DIR, set by CTest): an entry whose GEMM2
 * is a tiled "sum" gets the fastest passed candidate of its run with the
 * same GEMM1 and a GEMM2 that stores per slot (not a rejected one, not one
 * under another GEMM1, not another atomic sum), that kernel compiled and
 * stored; an entry without one is reported and left; a dry run changes
 * nothing; a second run finds nothing to do.
 */
#include "tests/support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "moetune/db.h"
#include "moetune/gen.h"
#include "tests/db_fixture.h"
#include "tuner/deterministic.h"

#define SKU "NVIDIA H200"
#define TILE "_m128_n256_k64_g8_s4_ppersist_fwait_btma_e32"
static const char *const g1 = "mtk_grouped_gemm_sm90_bf16_none_standard_silu" TILE,
                  *const sum2 = "mtk_grouped_gemm_sm90_bf16_none_standard_sum" TILE,
                  *const store2 = "mtk_grouped_gemm_sm90_bf16_none_standard_store" TILE,
                  *const sum2b = "mtk_grouped_gemm_sm90_bf16_none_standard_sum" TILE "_atma",
                  *const store2b = "mtk_grouped_gemm_sm90_bf16_none_standard_store" TILE "_atma",
                  *const other1 = "mtk_grouped_gemm_sm90_bf16_none_standard_store" TILE "_c2";

/* Kernel `name` as the templates make it (source only). */
static void put_kernel(mt_db *db, mt_gen *g, const char *name)
{
    mt_db_kernel k;
    memset(&k, 0, sizeof k);
    if (mt_gen_find(g, name, "sm_90a", &k.variant))
        fail_msg("no variant %s", name);
    size_t len = 0;
    assert_int_equal(mt_gen_source(g, &k.variant, &k.source, &len), MT_OK);
    k.source_len = len;
    assert_int_equal(mt_gen_template_hash(g, k.variant.family, k.template_hash), MT_OK);
    if (mt_db_put_kernel(db, &k))
        fail_msg("%s", mt_db_errmsg(db));
    free(k.source);
}

static void put_entry(mt_db *db, const mt_db_key *key, int64_t M, const char *gemm2, double us,
                      int64_t prov)
{
    char text[1024];
    snprintf(text, sizeof text,
             "backend=moetune;arch=sm_90a;align=mtk_moe_align_t1024;gemm1=%s;gemm2=%s;"
             "reduce=mtk_moe_reduce_bf16_t256", g1, gemm2);
    mt_db_entry e;
    memset(&e, 0, sizeof e);
    e.key = *key;
    e.M = M;
    char msg[256];
    assert_int_equal(mt_db_pipeline_parse(text, &e.pipeline, msg, sizeof msg), MT_OK);
    e.time_us = us;
    e.default_time_us = 2 * us;
    e.cublas_time_us = MT_DB_NO_TIME;
    e.rel_err = 1e-3;
    assert_int_equal(mt_db_put_entry(db, &e, prov, NULL), MT_OK);
}

/* late: timed with launch=late (the tuner's stage 4). */
static void put_candidate(mt_db *db, const mt_db_key *key, int64_t M, const char *gemm1,
                          const char *gemm2, int ok, double us, int late)
{
    char text[1024];
    snprintf(text, sizeof text, "gemm1=%s;gemm2=%s%s", gemm1, gemm2, late ? ";launch=late" : "");
    mt_db_candidate c = {.key = *key, .M = M, .pipeline = text, .ok = ok,
                         .time_us = ok ? us : MT_DB_NO_TIME, .rel_err = ok ? 2e-3 : MT_DB_NO_TIME,
                         .reason = ok ? NULL : "wrong result"};
    assert_int_equal(mt_db_record_candidate(db, &c), MT_OK);
}

typedef struct lines {
    char text[4][2048];
    int n;
} lines;

static void keep(const char *line, void *ctx)
{
    lines *l = ctx;
    if (l->n < 4)
        mt_strlcpy(l->text[l->n], line, sizeof l->text[0]);
    l->n++;
}

static void expect_gemm2(mt_db *db, const mt_db_key *key, int64_t M, const char *gemm2, double us)
{
    mt_db_entry e;
    int exact = 0;
    assert_int_equal(mt_db_lookup(db, key, M, &e, &exact), MT_OK);
    assert_true(exact);
    assert_string_equal(mt_db_pipeline_kernel(&e.pipeline, "gemm2"), gemm2);
    assert_string_equal(mt_db_pipeline_kernel(&e.pipeline, "gemm1"), g1);
    assert_string_equal(mt_db_pipeline_kernel(&e.pipeline, "reduce"), "mtk_moe_reduce_bf16_t256");
    assert_true(e.time_us > us - 1e-3 && e.time_us < us + 1e-3);
}

/* A new database `name` with a provenance row (*prov), the key of a
 * Qwen3-like problem on SKU (*key), and the align, reduce and GEMM1 kernels
 * of the entries. */
static mt_db *new_db(mt_gen *g, const char *name, mt_db_key *key, int64_t *prov)
{
    char file[700];
    snprintf(file, sizeof file, "%s/%s", mt_test_tmpdir("deterministic"), name);
    mt_db *db = mt_fix_open_db(file, MT_DB_CREATE);
    *prov = mt_fix_put_prov(db, SKU, "9.0", "feed");
    mt_problem p;
    mt_problem_init(&p, 64, 128, 8, 2048, 768);
    assert_int_equal(mt_db_key_from_problem(&p, SKU, NULL, key), MT_OK);
    put_kernel(db, g, "mtk_moe_align_t1024");
    put_kernel(db, g, "mtk_moe_reduce_bf16_t256");
    put_kernel(db, g, g1);
    return db;
}

static void test_atomic_sums_replaced(void **state)
{
    (void)state;
    mt_gen *g = mt_test_open_templates();
    mt_db_key key;
    int64_t prov;
    mt_db *db = new_db(g, "d.db", &key, &prov);
    put_kernel(db, g, sum2);
    put_kernel(db, g, store2b);
    /* M 64: the sum won by a hair; its store twin under the same GEMM1 is
     * the one to take (a faster rejected one, a faster one under another
     * GEMM1 and another sum are not), launched late as it was timed. */
    put_entry(db, &key, 64, sum2, 100.0, prov);
    put_candidate(db, &key, 64, g1, sum2, 1, 100.0, 0);
    put_candidate(db, &key, 64, g1, sum2b, 1, 100.2, 0);
    put_candidate(db, &key, 64, g1, store2b, 0, 99.0, 0);
    put_candidate(db, &key, 64, other1, store2, 1, 90.0, 0);
    put_candidate(db, &key, 64, g1, store2, 1, 101.0, 1);
    /* M 128: only sums were timed under its GEMM1: left. */
    put_entry(db, &key, 128, sum2, 200.0, prov);
    put_candidate(db, &key, 128, g1, sum2, 1, 200.0, 0);
    put_candidate(db, &key, 128, other1, store2, 1, 150.0, 0);
    /* M 256: already storing per slot: not touched. */
    put_entry(db, &key, 256, store2b, 300.0, prov);

    mt_deterministic_stats s;
    lines l = {0};
    char msg[1024];
    assert_int_equal(mt_make_deterministic(db, g, 1, keep, &l, &s, msg, sizeof msg), MT_OK);
    assert_int_equal(s.entries, 2);
    assert_int_equal(s.replaced, 1);
    assert_int_equal(s.left, 1);
    assert_int_equal(l.n, 2);
    assert_non_null(strstr(l.text[0], "M=64"));
    assert_non_null(strstr(l.text[0], store2));
    assert_non_null(strstr(l.text[0], "+1.0 %"));
    assert_non_null(strstr(l.text[0], "launched late"));
    assert_non_null(strstr(l.text[1], "M=128"));
    assert_non_null(strstr(l.text[1], "left as it is"));
    expect_gemm2(db, &key, 64, sum2, 100.0);   /* the dry run changed nothing */
    mt_db_kernel k;
    assert_int_equal(mt_db_get_kernel(db, store2, "sm_90a", &k), MT_ERR_NOT_FOUND);

    assert_int_equal(mt_make_deterministic(db, g, 0, NULL, NULL, &s, msg, sizeof msg), MT_OK);
    assert_int_equal(s.replaced, 1);
    expect_gemm2(db, &key, 64, store2, 101.0);
    expect_gemm2(db, &key, 128, sum2, 200.0);
    mt_db_entry e;
    assert_int_equal(mt_db_lookup(db, &key, 64, &e, NULL), MT_OK);
    assert_int_equal(e.pipeline.launch_late, 1);
    assert_int_equal(mt_db_lookup(db, &key, 128, &e, NULL), MT_OK);
    assert_int_equal(e.pipeline.launch_late, 0);
    expect_gemm2(db, &key, 256, store2b, 300.0);
    /* The new GEMM2 is stored compiled, from the current templates. */
    assert_int_equal(mt_db_get_kernel(db, store2, "sm_90a", &k), MT_OK);
    assert_non_null(k.image);
    assert_true(k.image_len > 0);
    char now[65];
    assert_int_equal(mt_gen_template_hash(g, "grouped_gemm_sm90", now), MT_OK);
    assert_string_equal(k.template_hash, now);
    mt_db_kernel_free(&k);
    assert_int_equal(mt_db_verify(db, NULL, NULL, NULL), MT_OK);

    /* Done once: the run after it replaces nothing. */
    assert_int_equal(mt_make_deterministic(db, g, 0, NULL, NULL, &s, msg, sizeof msg), MT_OK);
    assert_int_equal(s.entries, 1);
    assert_int_equal(s.replaced, 0);
    assert_int_equal(s.left, 1);
    mt_db_close(db);
    mt_gen_close(g);
}

/* An entry whose GEMM2 cannot be read (here missing from the file) stops
 * the walk with an error naming it: it was once skipped as if it were a
 * library backend's, and the run said "0 entries sum by atomics". */
static void test_unreadable_gemm2_is_an_error(void **state)
{
    (void)state;
    mt_gen *g = mt_test_open_templates();
    mt_db_key key;
    int64_t prov;
    mt_db *db = new_db(g, "u.db", &key, &prov);
    put_entry(db, &key, 64, sum2, 100.0, prov);   /* sum2 itself is not stored */
    mt_deterministic_stats s;
    char msg[1024];
    assert_int_not_equal(mt_make_deterministic(db, g, 1, NULL, NULL, &s, msg, sizeof msg), MT_OK);
    assert_non_null(strstr(msg, sum2));
    assert_non_null(strstr(msg, "M=64"));
    assert_non_null(strstr(msg, "moetune db verify"));
    mt_db_close(db);
    mt_gen_close(g);
}

/* Which variants the walk treats as atomic sums: the tiled families'
 * "sum", not grouped_gemv's (a token's slots in order) nor a store. */
static void test_sums_by_atomics(void **state)
{
    (void)state;
    mt_gen *g = mt_test_open_templates();
    mt_variant v;
    assert_int_equal(mt_gen_find(g, sum2, "sm_90a", &v), MT_OK);
    assert_true(mt_variant_sums_by_atomics(&v));
    assert_int_equal(mt_gen_find(g, store2, "sm_90a", &v), MT_OK);
    assert_false(mt_variant_sums_by_atomics(&v));
    assert_int_equal(mt_gen_find(g, "mtk_grouped_gemm_bf16_none_standard_sum_m16_n64_k64_g1_wm1_wn4_s4_sk4_pf0",
                                 "sm_90a", &v),
                     MT_OK);
    assert_true(mt_variant_sums_by_atomics(&v));
    assert_int_equal(mt_gen_find(g, "mtk_grouped_gemv_bf16_none_standard_sum_m1_n16_w4_u2_a0", "sm_90a", &v),
                     MT_OK);
    assert_false(mt_variant_sums_by_atomics(&v));
    mt_gen_close(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_atomic_sums_replaced),
        cmocka_unit_test(test_unreadable_gemm2_is_an_error),
        cmocka_unit_test(test_sums_by_atomics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
