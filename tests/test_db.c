/*
 * Tests of the tuned-kernel database (moetune/db.h): schema, migration,
 * kernels and their hashes, entries and the nearest-M rule, merge, JSON and
 * vLLM layouts, bad files (and every writer that refuses one: the file keeps
 * every byte), crash safety and concurrent writers.
 */
#define _DEFAULT_SOURCE
#include "tests/support.h"

#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/json.h"
#include "common/util.h"
#include "db/db_internal.h"
#include "moetune/db.h"
#include "moetune/gen.h"
#include "moetune/tuner.h"
#include "tests/db_fixture.h"
#include "tuner/deterministic.h"
#include "tuner/refresh.h"

#define SKU_A "NVIDIA H200"
#define SKU_B "NVIDIA H100 80GB HBM3"
#define ARCH "sm_90a"

static char *path_in(const char *dir, const char *name)
{
    static char bufs[4][1024];
    static int next;
    char *p = bufs[next++ % 4];
    snprintf(p, sizeof bufs[0], "%s/%s", dir, name);
    return p;
}

static mt_db *open_ok(const char *path, int flags)
{
    mt_db *db = NULL;
    mt_status st = mt_db_open(path, flags, &db);
    if (st != MT_OK)
        fail_msg("open %s: %s", path, mt_db_errmsg(db));
    return db;
}

#define CHECK_OK(db, call)                                                       \
    do {                                                                         \
        mt_status st_ = (call);                                                  \
        if (st_ != MT_OK)                                                        \
            fail_msg("%s -> %s: %s", #call, mt_status_str(st_), mt_db_errmsg(db)); \
    } while (0)

static mt_db_key make_key(const char *sku, int64_t E, int64_t N)
{
    mt_problem p;
    mt_problem_init(&p, 1, E, 8, 2048, N);
    mt_db_key k;
    assert_int_equal(mt_db_key_from_problem(&p, sku, "uniform", &k), MT_OK);
    return k;
}

static int64_t make_prov(mt_db *db, const char *sku, const char *cc, const char *hash)
{
    mt_db_provenance p = {0};
    mt_strlcpy(p.sku, sku, sizeof p.sku);
    mt_strlcpy(p.cc, cc, sizeof p.cc);
    p.sm_count = 132;
    p.mem_clock_khz = 2619000;
    mt_strlcpy(p.driver_version, "580.65", sizeof p.driver_version);
    mt_strlcpy(p.cuda_version, "13.0", sizeof p.cuda_version);
    mt_strlcpy(p.nvrtc_version, "13.0.48", sizeof p.nvrtc_version);
    mt_strlcpy(p.moetune_version, "0.1.0", sizeof p.moetune_version);
    mt_strlcpy(p.template_hash, hash, sizeof p.template_hash);
    int64_t id = 0;
    CHECK_OK(db, mt_db_put_provenance(db, &p, &id));
    assert_true(id > 0);
    return id;
}

static mt_variant make_variant(const char *family, int bm, int bn, int bk)
{
    mt_variant v = {0};
    mt_strlcpy(v.family, family, sizeof v.family);
    mt_strlcpy(v.arch, ARCH, sizeof v.arch);
    v.template_version = 1;
    v.threads = 128;
    v.smem_bytes = 1024 * bm / 16;
    char s[16];
    const char *names[] = {"BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "WARPS", "STAGES"};
    int vals[] = {bm, bn, bk, 8, bm >= 64 ? 8 : 4, 3};
    for (int i = 0; i < 6; i++) {
        snprintf(s, sizeof s, "%d", vals[i]);
        assert_int_equal(mt_variant_add(&v, names[i], s), MT_OK);
    }
    const char *ab[] = {"m", "n", "k", "g", "w", "s"};
    assert_int_equal(mt_variant_make_name(&v, ab), MT_OK);
    return v;
}

/* Store a kernel whose source and image are derived from its name. */
static void put_kernel(mt_db *db, const mt_variant *v)
{
    char src[512], img[300];
    snprintf(src, sizeof src, "extern \"C\" __global__ void %s() {}\n", v->name);
    for (size_t i = 0; i < sizeof img; i++)
        img[i] = (char)(v->name[i % strlen(v->name)] ^ (int)i);
    mt_db_kernel k = {.variant = *v, .source = src, .source_len = strlen(src), .image = img,
                      .image_len = sizeof img, .is_ptx = 0};
    mt_strlcpy(k.template_hash, "tmplA", sizeof k.template_hash);
    CHECK_OK(db, mt_db_put_kernel(db, &k));
}

static mt_db_entry make_entry(const mt_db_key *k, int64_t M, double t, const char *gemm1,
                              const char *gemm2)
{
    mt_db_entry e;
    memset(&e, 0, sizeof e);
    e.key = *k;
    e.M = M;
    mt_strlcpy(e.pipeline.backend, gemm1 ? "moetune" : "cublas", sizeof e.pipeline.backend);
    mt_strlcpy(e.pipeline.arch, ARCH, sizeof e.pipeline.arch);
    e.pipeline.nsteps = 2;
    mt_strlcpy(e.pipeline.steps[0].role, "gemm1", sizeof e.pipeline.steps[0].role);
    mt_strlcpy(e.pipeline.steps[0].kernel, gemm1 ? gemm1 : MT_DB_LIBRARY_KERNEL,
               sizeof e.pipeline.steps[0].kernel);
    mt_strlcpy(e.pipeline.steps[1].role, "gemm2", sizeof e.pipeline.steps[1].role);
    mt_strlcpy(e.pipeline.steps[1].kernel, gemm2 ? gemm2 : MT_DB_LIBRARY_KERNEL,
               sizeof e.pipeline.steps[1].kernel);
    e.time_us = t;
    e.default_time_us = t * 1.5;
    e.cublas_time_us = M % 2 ? MT_DB_NO_TIME : t * 1.2;
    e.rel_err = 1e-3;
    return e;
}

static int count_cb(const mt_db_entry *e, void *ctx)
{
    (void)e;
    (*(int *)ctx)++;
    return 0;
}

static int count_entries(mt_db *db, int history)
{
    int n = 0;
    mt_db_filter f = {.history = history};
    CHECK_OK(db, mt_db_foreach_entry(db, &f, count_cb, &n));
    return n;
}

static int64_t raw_int(const char *path, const char *sql)
{
    sqlite3 *h;
    assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
    sqlite3_stmt *s;
    assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &s, NULL), SQLITE_OK);
    int64_t x = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
    sqlite3_finalize(s);
    sqlite3_close(h);
    return x;
}

/* ---- tests ---- */

static void test_key_and_pipeline_text(void **state)
{
    (void)state;
    mt_problem p;
    mt_problem_init(&p, 1, 256, 8, 7168, 2048);
    p.quant.mode = MT_QUANT_W4A16;
    p.quant.group_size = 128;
    p.quant.has_zero_point = 1;
    p.activation = MT_ACT_GELU;
    mt_db_key k, k2;
    assert_int_equal(mt_db_key_from_problem(&p, SKU_A, "skewed", &k), MT_OK);
    assert_int_equal(mt_db_key_from_problem(&p, SKU_A, "zipf", &k2), MT_ERR_INVALID_ARG);
    char text[512], msg[256];
    assert_int_equal(mt_db_key_format(&k, text, sizeof text), MT_OK);
    assert_int_equal(mt_db_key_parse(text, SKU_A, &k2, msg, sizeof msg), MT_OK);
    assert_memory_equal(&k, &k2, sizeof k);
    assert_int_equal(mt_db_key_parse("E=1,topk=2", SKU_A, &k2, msg, sizeof msg), MT_ERR_INVALID_ARG);
    mt_db_entry e = make_entry(&k, 4, 1.0, "mtk_a", "mtk_b");
    char pt[MT_DB_PIPELINE_TEXT_MAX];
    mt_db_pipeline pp;
    assert_int_equal(mt_db_pipeline_format(&e.pipeline, pt, sizeof pt), MT_OK);
    assert_int_equal(mt_db_pipeline_parse(pt, &pp, msg, sizeof msg), MT_OK);
    assert_memory_equal(&pp, &e.pipeline, sizeof pp);
    assert_string_equal(mt_db_pipeline_kernel(&pp, "gemm2"), "mtk_b");
    assert_null(mt_db_pipeline_kernel(&pp, "act"));
    assert_int_equal(pp.launch_late, 0);
    /* The launch mode: written only when late, read in either spelling. */
    e.pipeline.launch_late = 1;
    assert_int_equal(mt_db_pipeline_format(&e.pipeline, pt, sizeof pt), MT_OK);
    assert_non_null(strstr(pt, ";launch=late"));
    assert_int_equal(mt_db_pipeline_parse(pt, &pp, msg, sizeof msg), MT_OK);
    assert_memory_equal(&pp, &e.pipeline, sizeof pp);
    assert_int_equal(mt_db_pipeline_parse("backend=moetune;arch=sm_90a;launch=early;gemm1=a;gemm2=b", &pp,
                                          msg, sizeof msg),
                     MT_OK);
    assert_int_equal(pp.launch_late, 0);
    static const char *const bad[] = {"backend=moetune;arch=sm_90a;gemm1=a;gemm2=b;launch=soon",
                                      "backend=moetune;arch=sm_90a;gemm1=a;gemm2=b;launch=late;launch=late","arch=sm_90a;gemm1=x", "backend=tpu;gemm1=x",
                                      "backend=moetune;gemm2=a;gemm1=b",
                                      "backend=moetune;gemm1=a;gemm1=b",
                                      "backend=moetune;fuse=a", "backend=moetune;gemm1="};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(mt_db_pipeline_parse(bad[i], &pp, msg, sizeof msg), MT_ERR_INVALID_ARG);
    char sel[64];
    mt_db_vllm_selector(&k, sel, sizeof sel);
    assert_string_equal(sel, "dtype=int4_w4a16");
}

static void test_create_and_reopen(void **state)
{
    (void)state;
    const char *path = path_in(mt_test_tmpdir("db_create"), "a.db");
    mt_db *db = open_ok(path, MT_DB_CREATE);
    mt_db_key k = make_key(SKU_A, 8, 512);
    int64_t prov = make_prov(db, SKU_A, "9.0", "tmplA");
    assert_int_equal(make_prov(db, SKU_A, "9.0", "tmplA"), prov);   /* deduplicated */
    assert_true(make_prov(db, SKU_A, "9.0", "tmplB") != prov);
    mt_db_entry e = make_entry(&k, 16, 12.5, NULL, NULL);
    CHECK_OK(db, mt_db_put_entry(db, &e, prov, NULL));
    mt_db_close(db);
    mt_db_close(NULL);
    assert_int_equal(raw_int(path, "PRAGMA application_id"), MT_DB_APPLICATION_ID);
    assert_int_equal(raw_int(path, "PRAGMA user_version"), MT_DB_SCHEMA_VERSION);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM provenance"), 2);

    db = open_ok(path, MT_DB_READONLY);
    mt_db_entry out;
    int exact = 0;
    CHECK_OK(db, mt_db_lookup(db, &k, 16, &out, &exact));
    assert_int_equal(exact, 1);
    assert_true(out.time_us == 12.5);
    assert_true(out.cublas_time_us == e.cublas_time_us);
    assert_string_equal(out.prov.template_hash, "tmplA");
    assert_int_equal(out.prov.id, prov);
    /* Writes on a read-only handle fail cleanly. */
    assert_int_equal(mt_db_put_entry(db, &e, prov, NULL), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(mt_db_errmsg(db), "read-only"));
    mt_db_close(db);
}

static void expect_open_fails(const char *path, int flags, mt_status want, const char *what);

static void test_migration_v1_to_v2(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("db_migrate");
    char path[800], damaged_v1[800], msg[512];   /* path_in's buffers are reused */
    mt_strlcpy(path, path_in(dir, "v1.db"), sizeof path);
    mt_strlcpy(damaged_v1, path_in(dir, "v1-damaged.db"), sizeof damaged_v1);
    assert_int_equal(mt_db__create_at_version(path, 1, msg, sizeof msg), MT_OK);
    assert_int_equal(raw_int(path, "PRAGMA user_version"), 1);
    /* A v1 row, written as a v1 build would (no routing column yet). */
    mt_fix_sql(path,
             "INSERT INTO provenance VALUES (1, 'NVIDIA H200', '9.0', 132, 2619000, '580', '13.0', "
             "'13.0', '0.0.9', 'oldhash', 1700000000);"
             "INSERT INTO problem_key VALUES (1, 8, 8, 2048, 512, 'bf16', 'none', 0, 0, "
             "'standard', 'silu', 0, 0);"
             "INSERT INTO entry VALUES (1, 'NVIDIA H200', 1, 32, "
             "'backend=cublas;arch=sm_90a;gemm1=cublas', 7.5, 9.0, NULL, 0.001, 1, 1700000001);");
    mt_db *db = NULL;
    assert_int_equal(mt_db_open(path, MT_DB_READONLY, &db), MT_ERR_DB);
    assert_non_null(strstr(mt_db_errmsg(db), "older"));
    assert_non_null(strstr(mt_db_errmsg(db), path));
    mt_db_close(db);
    assert_int_equal(raw_int(path, "PRAGMA user_version"), 1);   /* untouched */

    /* A damaged v1 file (an entry whose provenance is missing) is not
     * migrated: the writer would refuse it next, so it keeps every byte. */
    assert_int_equal(mt_db__create_at_version(damaged_v1, 1, msg, sizeof msg), MT_OK);
    mt_fix_sql(damaged_v1,
             "INSERT INTO problem_key VALUES (1, 8, 8, 2048, 512, 'bf16', 'none', 0, 0, "
             "'standard', 'silu', 0, 0);"
             "INSERT INTO entry VALUES (1, 'NVIDIA H200', 1, 32, "
             "'backend=cublas;arch=sm_90a;gemm1=cublas', 7.5, 9.0, NULL, 0.001, 7, 1700000001);");
    expect_open_fails(damaged_v1, 0, MT_ERR_DB, "damaged, so it was not migrated");
    assert_int_equal(raw_int(damaged_v1, "PRAGMA user_version"), 1);

    db = open_ok(path, 0);
    mt_db_close(db);
    assert_int_equal(raw_int(path, "PRAGMA user_version"), 2);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM sqlite_master WHERE name = 'entry_by_key'"), 1);
    db = open_ok(path, MT_DB_READONLY);
    mt_db_key k = make_key(SKU_A, 8, 512);
    mt_db_entry out;
    CHECK_OK(db, mt_db_lookup(db, &k, 32, &out, NULL));
    assert_true(out.time_us == 7.5);
    assert_int_equal(out.key.routing, MT_ROUTING_UNIFORM);
    assert_string_equal(out.prov.template_hash, "oldhash");
    k.routing = MT_ROUTING_SKEWED;
    assert_int_equal(mt_db_lookup(db, &k, 32, &out, NULL), MT_ERR_NOT_FOUND);
    CHECK_OK(db, mt_db_verify(db, NULL, NULL, NULL));
    mt_db_close(db);
    /* The new identity index includes routing: both keys can coexist. */
    db = open_ok(path, 0);
    mt_db_entry e = make_entry(&k, 32, 3.0, NULL, NULL);
    CHECK_OK(db, mt_db_put_entry(db, &e, 1, NULL));
    assert_int_equal(count_entries(db, 0), 2);
    mt_db_close(db);
}

static void test_kernel_hash(void **state)
{
    (void)state;
    const char *path = path_in(mt_test_tmpdir("db_kernel"), "k.db");
    mt_db *db = open_ok(path, MT_DB_CREATE);
    mt_variant v = make_variant("grouped_gemm", 64, 128, 64);
    put_kernel(db, &v);
    mt_db_kernel k;
    CHECK_OK(db, mt_db_get_kernel(db, v.name, ARCH, &k));
    assert_memory_equal(&k.variant, &v, sizeof v);
    assert_non_null(strstr(k.source, v.name));
    assert_int_equal(k.image_len, 300);
    char hex[65];
    mt_sha256_hex(k.image, k.image_len, hex);
    assert_string_equal(hex, k.image_sha256);
    char family[48], hash[65];
    CHECK_OK(db, mt_db_kernel_origin(db, v.name, ARCH, family, hash));
    assert_string_equal(family, "grouped_gemm");
    assert_string_equal(hash, "tmplA");
    assert_int_equal(mt_db_kernel_origin(db, "mtk_none", ARCH, family, hash), MT_ERR_NOT_FOUND);
    assert_int_equal(mt_db_kernel_origin(db, v.name, "sm_80", family, hash), MT_ERR_NOT_FOUND);
    /* A wrong hash handed in with the image is refused. */
    mt_db_kernel bad = k;
    bad.image_sha256[0] = bad.image_sha256[0] == '0' ? '1' : '0';
    assert_int_equal(mt_db_put_kernel(db, &bad), MT_ERR_MISMATCH);
    mt_db_kernel_free(&k);
    assert_int_equal(mt_db_get_kernel(db, "mtk_nope", ARCH, &k), MT_ERR_NOT_FOUND);
    CHECK_OK(db, mt_db_verify(db, NULL, NULL, NULL));
    mt_db_close(db);

    /* Flip one byte of the stored image behind the library's back. */
    mt_fix_sql(path, "UPDATE kernel SET image = CAST(substr(image, 1, 10) || X'5A' || "
                   "substr(image, 12) AS BLOB)");
    db = open_ok(path, 0);
    assert_int_equal(mt_db_get_kernel(db, v.name, ARCH, &k), MT_ERR_DB);
    assert_non_null(strstr(mt_db_errmsg(db), "does not match"));
    assert_non_null(strstr(mt_db_errmsg(db), v.name));
    assert_null(k.image);
    int problems = 0;
    assert_int_equal(mt_db_verify(db, NULL, NULL, &problems), MT_ERR_DB);
    assert_int_equal(problems, 1);
    assert_non_null(strstr(mt_db_errmsg(db), v.name));
    /* A bad kernel is no damage to the SQLite file itself. */
    problems = -1;
    CHECK_OK(db, mt_db_verify_storage(db, NULL, NULL, &problems));
    assert_int_equal(problems, 0);
    /* Writers that vouch for the stored kernels refuse it. */
    assert_int_equal(mt_db_refuse_damaged_kernels(db, "nothing was done"), MT_ERR_DB);
    assert_non_null(strstr(mt_db_errmsg(db), "a stored kernel is damaged, so nothing was done"));
    assert_non_null(strstr(mt_db_errmsg(db), v.name));
    /* A backup with images is refused (its import would be: the export
     * once wrote it and exited 0), and nothing is written; one without
     * images is no copy of the bad image. */
    const char *json = path_in(mt_test_tmpdir("db_kernel"), "k.json");
    remove(json);
    assert_int_equal(mt_db_export_json(db, json, MT_DB_JSON_IMAGES), MT_ERR_DB);
    assert_non_null(strstr(mt_db_errmsg(db), v.name));
    assert_non_null(strstr(mt_db_errmsg(db), "the export wrote nothing"));
    FILE *f = fopen(json, "r");
    assert_null(f);
    CHECK_OK(db, mt_db_export_json(db, json, 0));
    mt_db_close(db);
}

/* A database with no row is removed with its side files; one with rows,
 * or a file that is not a moetune database, is left alone. */
static void test_remove_if_empty(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("db_remove");
    const char *path = path_in(dir, "e.db");
    mt_db *db = open_ok(path, MT_DB_CREATE);
    /* Open elsewhere (a second writer that has stored nothing yet): kept. */
    int removed = -1;
    assert_int_equal(mt_db_remove_if_empty(path, &removed), MT_OK);
    assert_int_equal(removed, 0);
    assert_int_equal(access(path, F_OK), 0);
    mt_db_close(db);
    assert_int_equal(mt_db_remove_if_empty(path, &removed), MT_OK);
    assert_int_equal(removed, 1);
    assert_int_equal(access(path, F_OK), -1);
    char side[700];
    snprintf(side, sizeof side, "%s-wal", path);
    assert_int_equal(access(side, F_OK), -1);
    db = open_ok(path, MT_DB_CREATE);
    make_prov(db, SKU_A, "9.0", "tmplA");
    mt_db_close(db);
    assert_int_equal(mt_db_remove_if_empty(path, &removed), MT_OK);
    assert_int_equal(removed, 0);
    assert_int_equal(access(path, F_OK), 0);
    const char *text = path_in(dir, "notes.txt");
    FILE *f = fopen(text, "w");
    assert_non_null(f);
    fputs("not a database\n", f);
    fclose(f);
    assert_int_not_equal(mt_db_remove_if_empty(text, &removed), MT_OK);
    assert_int_equal(removed, 0);
    assert_int_equal(access(text, F_OK), 0);
}

/* An index that disagrees with its table: both verifies report it. */
static void test_verify_storage(void **state)
{
    (void)state;
    const char *path = path_in(mt_test_tmpdir("db_storage"), "s.db");
    mt_db *db = open_ok(path, MT_DB_CREATE);
    int64_t prov = make_prov(db, SKU_A, "9.0", "tmplA");
    mt_db_key k = make_key(SKU_A, 64, 1024);
    mt_db_entry e = make_entry(&k, 16, 10.0, NULL, NULL);
    CHECK_OK(db, mt_db_put_entry(db, &e, prov, NULL));
    int problems = -1;
    CHECK_OK(db, mt_db_verify_storage(db, NULL, NULL, &problems));
    assert_int_equal(problems, 0);
    mt_db_close(db);

    mt_fix_damage_index(path);
    db = open_ok(path, 0);
    assert_int_equal(mt_db_verify_storage(db, NULL, NULL, &problems), MT_ERR_DB);
    assert_true(problems >= 1);
    assert_non_null(strstr(mt_db_errmsg(db), "integrity check"));
    assert_non_null(strstr(mt_db_errmsg(db), "entry_by_key"));
    int all = 0;
    assert_int_equal(mt_db_verify(db, NULL, NULL, &all), MT_ERR_DB);
    assert_true(all >= problems);
    assert_int_equal(mt_db_verify_storage(NULL, NULL, NULL, NULL), MT_ERR_INVALID_ARG);
    mt_db_close(db);
}

static void test_put_entry_keeps_faster(void **state)
{
    (void)state;
    const char *path = path_in(mt_test_tmpdir("db_faster"), "f.db");
    mt_db *db = open_ok(path, MT_DB_CREATE);
    int64_t prov = make_prov(db, SKU_A, "9.0", "tmplA");
    mt_db_key k = make_key(SKU_A, 64, 1024);
    const double times[] = {10.0, 12.0, 8.0, 8.0, 9.0};
    const mt_db_put_outcome want[] = {MT_DB_PUT_INSERTED, MT_DB_PUT_KEPT, MT_DB_PUT_REPLACED,
                                      MT_DB_PUT_KEPT, MT_DB_PUT_KEPT};
    double best = 1e30;
    for (int i = 0; i < 5; i++) {
        mt_db_entry e = make_entry(&k, 128, times[i], NULL, NULL);
        mt_db_put_outcome out;
        CHECK_OK(db, mt_db_put_entry(db, &e, prov, &out));
        assert_int_equal(out, want[i]);
        if (times[i] < best)
            best = times[i];
        mt_db_entry got;
        CHECK_OK(db, mt_db_lookup(db, &k, 128, &got, NULL));
        assert_true(got.time_us == best);
    }
    assert_int_equal(count_entries(db, 0), 1);
    assert_int_equal(count_entries(db, 1), 4);   /* 8.0 offered twice: one record */
    mt_db_entry bad = make_entry(&k, 0, 1.0, NULL, NULL);
    assert_int_equal(mt_db_put_entry(db, &bad, prov, NULL), MT_ERR_INVALID_ARG);
    bad = make_entry(&k, 5, 1.0, NULL, NULL);
    assert_int_not_equal(mt_db_put_entry(db, &bad, prov + 100, NULL), MT_OK);   /* no such provenance */
    assert_int_equal(count_entries(db, 1), 4);   /* the failed put left nothing */
    /* A pipeline that would not read back (no gemm2) is refused by name,
     * and leaves the file readable. */
    mt_db_entry half = make_entry(&k, 256, 1.0, "mtk_g1", "mtk_g2");
    half.pipeline.nsteps = 1;   /* gemm1 alone */
    assert_int_equal(mt_db_put_entry(db, &half, prov, NULL), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(mt_db_errmsg(db), "lacks gemm1 or gemm2"));
    assert_int_equal(count_entries(db, 0), 1);
    assert_int_equal(count_entries(db, 1), 4);
    /* A result that beat the stored pipeline in its own run replaces the
     * entry even at a higher time than the stored one (from another run). */
    mt_db_entry slower = make_entry(&k, 128, 11.0, NULL, NULL);
    mt_db_put_outcome out;
    CHECK_OK(db, mt_db_replace_entry(db, &slower, prov, &out));
    assert_int_equal(out, MT_DB_PUT_REPLACED);
    mt_db_entry got;
    CHECK_OK(db, mt_db_lookup(db, &k, 128, &got, NULL));
    assert_true(got.time_us == 11.0);
    assert_int_equal(count_entries(db, 0), 1);
    assert_int_equal(count_entries(db, 1), 5);
    assert_int_equal(mt_db_replace_entry(db, &bad, prov + 100, NULL) == MT_OK, 0);
    mt_db_close(db);
}

/* The rule, written independently of the SQL. */
static int64_t nearest(const int64_t *tuned, int n, int64_t M)
{
    int64_t best = -1;
    for (int i = 0; i < n; i++) {
        int64_t d = tuned[i] > M ? tuned[i] - M : M - tuned[i];
        int64_t bd = best > M ? best - M : M - best;
        if (best < 0 || d < bd || (d == bd && tuned[i] > best))
            best = tuned[i];
    }
    return best;
}

static void test_lookup_nearest(void **state)
{
    (void)state;
    const char *path = path_in(mt_test_tmpdir("db_lookup"), "l.db");
    mt_db *db = open_ok(path, MT_DB_CREATE);
    int64_t prov = make_prov(db, SKU_A, "9.0", "tmplA");
    mt_db_key k = make_key(SKU_A, 128, 768);
    const int64_t tuned[] = {1, 16, 64, 256, 1024};
    for (int i = 0; i < 5; i++) {
        mt_db_entry e = make_entry(&k, tuned[i], 1.0 + (double)tuned[i], NULL, NULL);
        CHECK_OK(db, mt_db_put_entry(db, &e, prov, NULL));
    }
    for (int64_t M = 0; M <= 1500; M++) {
        mt_db_entry out;
        int exact = -1;
        CHECK_OK(db, mt_db_lookup(db, &k, M, &out, &exact));
        int64_t want = nearest(tuned, 5, M);
        if (out.M != want)
            fail_msg("M=%lld: got Mt=%lld, want %lld", (long long)M, (long long)out.M, (long long)want);
        assert_int_equal(exact, want == M);
        assert_true(out.time_us == 1.0 + (double)want);
    }
    /* Ties go to the larger tuned M. */
    mt_db_entry out;
    CHECK_OK(db, mt_db_lookup(db, &k, 40, &out, NULL));
    assert_int_equal(out.M, 64);
    CHECK_OK(db, mt_db_lookup(db, &k, 160, &out, NULL));
    assert_int_equal(out.M, 256);
    /* Other SKU: nothing by name, found through the compute capability. */
    mt_db_key kb = k;
    mt_strlcpy(kb.sku, SKU_B, sizeof kb.sku);
    assert_int_equal(mt_db_lookup(db, &kb, 16, &out, NULL), MT_ERR_NOT_FOUND);
    int exact = 0;
    CHECK_OK(db, mt_db_lookup_cc(db, &kb, "9.0", 17, &out, &exact));
    assert_string_equal(out.key.sku, SKU_A);
    assert_int_equal(out.M, 16);
    assert_int_equal(exact, 0);
    assert_int_equal(mt_db_lookup_cc(db, &kb, "8.0", 16, &out, NULL), MT_ERR_NOT_FOUND);
    /* With two same-CC SKUs at equal distance the name that sorts first wins. */
    int64_t provb = make_prov(db, SKU_B, "9.0", "tmplA");
    mt_db_entry eb = make_entry(&kb, 64, 0.5, NULL, NULL);
    CHECK_OK(db, mt_db_put_entry(db, &eb, provb, NULL));
    CHECK_OK(db, mt_db_lookup_cc(db, &kb, "9.0", 64, &out, NULL));
    assert_string_equal(out.key.sku, strcmp(SKU_A, SKU_B) < 0 ? SKU_A : SKU_B);
    /* Provenance mismatch report. */
    mt_db_provenance cur = out.prov;
    char msg[256];
    assert_int_equal(mt_db_provenance_mismatch(&out.prov, &cur, msg, sizeof msg), 0);
    mt_strlcpy(cur.template_hash, "other", sizeof cur.template_hash);
    mt_strlcpy(cur.nvrtc_version, "12.9", sizeof cur.nvrtc_version);
    assert_int_equal(mt_db_provenance_mismatch(&out.prov, &cur, msg, sizeof msg), 2);
    assert_string_equal(msg, "template_hash,nvrtc_version");
    /* Unknown key. */
    mt_db_key k2 = make_key(SKU_A, 3, 768);
    assert_int_equal(mt_db_lookup(db, &k2, 1, &out, NULL), MT_ERR_NOT_FOUND);
    mt_db_close(db);
}

/* A database at path with an entry per M (times[i] us), recorded at
 * recorded[i] (seconds since the epoch; recorded NULL: now). */
static void fill_recorded(const char *path, const char *sku, const int64_t *Ms, const double *times,
                          const int64_t *recorded, int n, int bm)
{
    mt_db *db = open_ok(path, MT_DB_CREATE);
    int64_t prov = make_prov(db, sku, "9.0", "tmplA");
    mt_db_key k = make_key(sku, 128, 768);
    for (int i = 0; i < n; i++) {
        mt_variant g1 = make_variant("grouped_gemm", bm, 64, 32 * (i + 1));
        mt_variant g2 = make_variant("grouped_gemm2", bm, 128, 32 * (i + 1));
        put_kernel(db, &g1);
        put_kernel(db, &g2);
        mt_db_entry e = make_entry(&k, Ms[i], times[i], g1.name, g2.name);
        e.recorded = recorded ? recorded[i] : 0;
        CHECK_OK(db, mt_db_put_entry(db, &e, prov, NULL));
    }
    mt_db_close(db);
}

static void fill(const char *path, const char *sku, const int64_t *Ms, const double *times, int n,
                 int bm)
{
    fill_recorded(path, sku, Ms, times, NULL, n, bm);
}

/* The time of the entry at M in db (-1 when there is none) and when it
 * was recorded (recorded may be NULL). */
static double entry_time(mt_db *db, int64_t M, int64_t *recorded)
{
    mt_db_key k = make_key(SKU_A, 128, 768);
    mt_db_entry out;
    int exact = 0;
    if (mt_db_lookup(db, &k, M, &out, &exact) != MT_OK || !exact)
        return -1;
    if (recorded)
        *recorded = out.recorded;
    return out.time_us;
}

/* MT_DB_MERGE_NEWER: the entry recorded later wins, slower or not; in the
 * same second the strictly faster; the winner keeps its own date.
 * MT_DB_MERGE_FASTER on the same files keeps the lower times. */
static void test_merge_newer(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("db_merge_newer");
    const char *a = path_in(dir, "a.db"), *a2 = path_in(dir, "a2.db"), *b = path_in(dir, "b.db");
    /* M=1: b newer and slower; M=2: b older and faster; M=4: b in the
     * same second and faster; M=16: b in the same second and slower;
     * M=8: only in b. */
    const int64_t ma[] = {1, 2, 4, 16}, mb[] = {1, 2, 4, 8, 16};
    const double ta[] = {10.0, 5.0, 6.0, 2.0}, tb[] = {12.0, 4.0, 5.5, 3.0, 2.5};
    const int64_t ra[] = {1000, 3000, 2500, 2500}, rb[] = {2000, 2000, 2500, 2000, 2500};
    fill_recorded(a, SKU_A, ma, ta, ra, 4, 16);
    fill_recorded(a2, SKU_A, ma, ta, ra, 4, 16);
    fill_recorded(b, SKU_A, mb, tb, rb, 5, 16);
    mt_db *db = open_ok(a, 0);
    mt_db_merge_stats ms;
    assert_int_equal(mt_db_merge_by(db, b, (mt_db_merge_rule)7, &ms), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(mt_db_errmsg(db), "unknown rule 7"));
    assert_int_equal(ms.entries_kept, 0);
    CHECK_OK(db, mt_db_merge_by(db, b, MT_DB_MERGE_NEWER, &ms));
    assert_int_equal(ms.entries_inserted, 1);
    assert_int_equal(ms.entries_replaced, 2);
    assert_int_equal(ms.entries_kept, 2);
    const int64_t Ms[] = {1, 2, 4, 8, 16}, want_rec[] = {2000, 3000, 2500, 2000, 2500};
    const double want_t[] = {12.0, 5.0, 5.5, 3.0, 2.0};
    for (int i = 0; i < 5; i++) {
        int64_t rec = 0;
        assert_true(entry_time(db, Ms[i], &rec) == want_t[i]);
        assert_int_equal(rec, want_rec[i]);
    }
    /* The losers stay in the history; merging again changes nothing. */
    assert_int_equal(count_entries(db, 1), 9);
    CHECK_OK(db, mt_db_merge_by(db, b, MT_DB_MERGE_NEWER, &ms));
    assert_int_equal(ms.entries_inserted + ms.entries_replaced, 0);
    CHECK_OK(db, mt_db_verify(db, NULL, NULL, NULL));
    /* A date before 1970 is refused. */
    mt_db_key k = make_key(SKU_A, 128, 768);
    mt_variant g1 = make_variant("grouped_gemm", 16, 64, 32), g2 = make_variant("grouped_gemm2", 16, 128, 32);
    mt_db_entry e = make_entry(&k, 1, 1.0, g1.name, g2.name);
    e.recorded = -5;
    int64_t prov = make_prov(db, SKU_A, "9.0", "tmplA");
    assert_int_equal(mt_db_put_entry(db, &e, prov, NULL), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(mt_db_errmsg(db), "recorded before 1970"));
    assert_true(entry_time(db, 1, NULL) == 12.0);
    mt_db_close(db);
    db = open_ok(a2, 0);
    CHECK_OK(db, mt_db_merge_by(db, b, MT_DB_MERGE_FASTER, &ms));
    assert_int_equal(ms.entries_inserted, 1);
    assert_int_equal(ms.entries_replaced, 2);
    assert_int_equal(ms.entries_kept, 2);
    const double want_fast[] = {10.0, 4.0, 5.5, 3.0, 2.0};
    for (int i = 0; i < 5; i++)
        assert_true(entry_time(db, Ms[i], NULL) == want_fast[i]);
    mt_db_close(db);
}

static void test_merge(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("db_merge");
    const char *a = path_in(dir, "a.db"), *b = path_in(dir, "b.db");
    const int64_t ma[] = {1, 2}, mb[] = {1, 2, 4};
    const double ta[] = {10.0, 5.0}, tb[] = {7.0, 9.0, 3.0};
    fill(a, SKU_A, ma, ta, 2, 16);
    fill(b, SKU_A, mb, tb, 3, 16);   /* same kernel names for M=1, 2 */
    mt_db *db = open_ok(a, 0);
    mt_db_merge_stats ms;
    assert_int_equal(mt_db_merge(db, path_in(dir, "missing.db"), &ms), MT_ERR_IO);
    assert_non_null(strstr(mt_db_errmsg(db), "missing.db"));
    CHECK_OK(db, mt_db_merge(db, b, &ms));
    assert_int_equal(ms.entries_inserted, 1);
    assert_int_equal(ms.entries_replaced, 1);
    assert_int_equal(ms.entries_kept, 1);
    assert_int_equal(ms.kernels_added, 2);
    assert_int_equal(ms.kernels_present, 4);
    mt_db_key k = make_key(SKU_A, 128, 768);
    for (int i = 0; i < 3; i++) {
        mt_db_entry out;
        CHECK_OK(db, mt_db_lookup(db, &k, mb[i], &out, NULL));
        double want = i < 2 && ta[i] < tb[i] ? ta[i] : tb[i];
        assert_true(out.time_us == want);
    }
    /* Both records of each overlapping M are in the history. */
    assert_int_equal(count_entries(db, 1), 5);
    CHECK_OK(db, mt_db_verify(db, NULL, NULL, NULL));
    /* Merging again changes nothing. */
    CHECK_OK(db, mt_db_merge(db, b, &ms));
    assert_int_equal(ms.entries_inserted + ms.entries_replaced, 0);
    assert_int_equal(ms.history, 0);
    assert_int_equal(count_entries(db, 1), 5);
    mt_db_close(db);
    /* Nothing is merged, imported or pruned in a damaged file. */
    const char *json = path_in(dir, "b.json");
    db = open_ok(b, 0);
    CHECK_OK(db, mt_db_export_json(db, json, 0));
    mt_db_close(db);
    mt_fix_damage_index(a);
    db = open_ok(a, 0);
    assert_int_equal(mt_db_merge(db, b, &ms), MT_ERR_DB);
    assert_non_null(strstr(mt_db_errmsg(db), "damaged, so nothing was merged into it"));
    assert_non_null(strstr(mt_db_errmsg(db), "entry_by_key"));
    assert_int_equal(mt_db_import_json(db, json, &ms), MT_ERR_DB);
    assert_non_null(strstr(mt_db_errmsg(db), "damaged, so nothing was imported into it"));
    const char *vllm = path_in(dir, "E=8,N=14336,device_name=NVIDIA_H200.json");
    FILE *f = fopen(vllm, "w");
    assert_non_null(f);
    fputs("{\"1\": {\"BLOCK_SIZE_M\": 16, \"BLOCK_SIZE_N\": 32, \"BLOCK_SIZE_K\": 64, "
          "\"GROUP_SIZE_M\": 1, \"num_warps\": 4, \"num_stages\": 3}}", f);
    fclose(f);
    int nref = -1;
    assert_int_equal(mt_db_import_vllm(db, vllm, &nref), MT_ERR_DB);
    assert_int_equal(nref, 0);
    assert_non_null(strstr(mt_db_errmsg(db), "damaged, so nothing was imported into it"));
    mt_db_prune_stats ps;
    assert_int_equal(mt_db_prune(db, NULL, NULL, 0, &ps), MT_ERR_DB);
    assert_non_null(strstr(mt_db_errmsg(db), "damaged, so nothing was pruned from it"));
    assert_int_equal(count_entries(db, 1), 5);
    mt_db_close(db);
}

typedef struct snapshot {
    mt_buf text;
} snapshot;

static int snap_entry(const mt_db_entry *e, void *ctx)
{
    mt_buf *b = ctx;
    char key[512], pipe[MT_DB_PIPELINE_TEXT_MAX];
    mt_db_key_format(&e->key, key, sizeof key);
    mt_db_pipeline_format(&e->pipeline, pipe, sizeof pipe);
    mt_buf_printf(b, "%s|%s|%lld|%s|%.17g|%.17g|%.17g|%.17g|%lld|%s|%s|%d|%lld|%s|%lld\n",
                  e->key.sku, key, (long long)e->M, pipe, e->time_us, e->default_time_us,
                  e->cublas_time_us, e->rel_err, (long long)e->recorded, e->prov.sku, e->prov.cc,
                  e->prov.sm_count, (long long)e->prov.mem_clock_khz, e->prov.template_hash,
                  (long long)e->prov.created);
    return 0;
}

static int snap_kernel(const mt_db_kernel *k, void *ctx)
{
    mt_buf *b = ctx;
    mt_buf_printf(b, "%s|%s|%s|%s|%d|%s\n", k->variant.name, k->variant.arch, k->source_sha256,
                  k->image_sha256, k->is_ptx, k->template_hash);
    return 0;
}

static int snap_candidate(const mt_db_candidate *c, void *ctx)
{
    mt_buf *b = ctx;
    mt_buf_printf(b, "%s|%lld|%s|%d|%.17g|%.17g|%s|%lld\n", c->key.sku, (long long)c->M,
                  c->pipeline, c->ok, c->time_us, c->rel_err, c->reason, (long long)c->recorded);
    return 0;
}

static int snap_ref(const mt_db_vllm_config *c, void *ctx)
{
    mt_buf *b = ctx;
    mt_buf_printf(b, "%s|%lld|%lld|%s|%lld|%d|%d|%d|%d|%d|%d\n", c->device, (long long)c->E,
                  (long long)c->N, c->selector, (long long)c->M, c->block_m, c->block_n,
                  c->block_k, c->group_m, c->num_warps, c->num_stages);
    return 0;
}

/* Everything the database holds, as text (images by hash). */
static char *snapshot_db(mt_db *db)
{
    mt_buf b = {0};
    mt_db_filter hist = {.history = 1};
    CHECK_OK(db, mt_db_foreach_kernel(db, 0, snap_kernel, &b));
    CHECK_OK(db, mt_db_foreach_entry(db, NULL, snap_entry, &b));
    CHECK_OK(db, mt_db_foreach_entry(db, &hist, snap_entry, &b));
    CHECK_OK(db, mt_db_foreach_candidate(db, snap_candidate, &b));
    CHECK_OK(db, mt_db_foreach_vllm_config(db, NULL, 0, 0, snap_ref, &b));
    mt_buf_puts(&b, "");
    return b.data;
}

static void add_candidates_and_refs(mt_db *db)
{
    mt_db_key k = make_key(SKU_A, 128, 768);
    mt_db_candidate c = {.key = k, .M = 4, .pipeline = "gemm1=mtk_x;gemm2=mtk_y", .ok = 0,
                         .time_us = MT_DB_NO_TIME, .rel_err = 0.5, .reason = "wrong result"};
    CHECK_OK(db, mt_db_record_candidate(db, &c));
    c.pipeline = "gemm1=mtk_z;gemm2=mtk_y";
    c.ok = 1;
    c.time_us = 3.25;
    c.rel_err = 1e-4;
    c.reason = NULL;
    CHECK_OK(db, mt_db_record_candidate(db, &c));
    mt_db_vllm_config r = {.device = "NVIDIA_H200", .E = 128, .N = 768, .M = 4, .block_m = 16,
                           .block_n = 64, .block_k = 128, .group_m = 1, .num_warps = 4,
                           .num_stages = 3};
    CHECK_OK(db, mt_db_put_vllm_config(db, &r));
}

static void test_candidates(void **state)
{
    (void)state;
    const char *path = path_in(mt_test_tmpdir("db_cand"), "c.db");
    mt_db *db = open_ok(path, MT_DB_CREATE);
    mt_db_key k = make_key(SKU_A, 128, 768);
    int seen = 1;
    CHECK_OK(db, mt_db_candidate_seen(db, &k, 4, "gemm1=mtk_x;gemm2=mtk_y", &seen));
    assert_int_equal(seen, 0);
    add_candidates_and_refs(db);
    CHECK_OK(db, mt_db_candidate_seen(db, &k, 4, "gemm1=mtk_x;gemm2=mtk_y", &seen));
    assert_int_equal(seen, 1);
    CHECK_OK(db, mt_db_candidate_seen(db, &k, 8, "gemm1=mtk_x;gemm2=mtk_y", &seen));
    assert_int_equal(seen, 0);
    /* Re-recording replaces the row, it does not add one. */
    mt_db_candidate c = {.key = k, .M = 4, .pipeline = "gemm1=mtk_x;gemm2=mtk_y", .ok = 0,
                         .time_us = MT_DB_NO_TIME, .rel_err = MT_DB_NO_TIME, .reason = "timeout"};
    CHECK_OK(db, mt_db_record_candidate(db, &c));
    assert_int_equal(raw_int(path, "SELECT count(*) FROM candidate"), 2);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM candidate WHERE reason = 'timeout' "
                                   "AND status = 'rejected' AND rel_err IS NULL"), 1);
    /* Forgetting (key, M) deletes its rows only: not another M's, not
     * another key's; an unknown key forgets nothing. */
    c.M = 8;
    CHECK_OK(db, mt_db_record_candidate(db, &c));
    mt_db_key other = make_key(SKU_A, 64, 768);
    c.key = other;
    c.M = 4;
    CHECK_OK(db, mt_db_record_candidate(db, &c));
    int forgotten = -1;
    CHECK_OK(db, mt_db_forget_candidates(db, &k, 4, &forgotten));
    assert_int_equal(forgotten, 2);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM candidate"), 2);
    CHECK_OK(db, mt_db_candidate_seen(db, &k, 8, "gemm1=mtk_x;gemm2=mtk_y", &seen));
    assert_int_equal(seen, 1);
    CHECK_OK(db, mt_db_forget_candidates(db, &k, 4, &forgotten));
    assert_int_equal(forgotten, 0);
    mt_db_key none = make_key(SKU_A, 32, 768);
    CHECK_OK(db, mt_db_forget_candidates(db, &none, 4, &forgotten));
    assert_int_equal(forgotten, 0);
    mt_db_key nosku = k;
    nosku.sku[0] = '\0';
    assert_int_equal(mt_db_forget_candidates(db, &nosku, 8, NULL), MT_ERR_INVALID_ARG);
    mt_db_close(db);
    /* Read-only: refused whether or not there is something to forget. */
    db = open_ok(path, MT_DB_READONLY);
    assert_int_not_equal(mt_db_forget_candidates(db, &k, 8, &forgotten), MT_OK);
    assert_int_not_equal(mt_db_forget_candidates(db, &none, 8, &forgotten), MT_OK);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM candidate"), 2);
    mt_db_close(db);
}

/* A file the user may not write is refused when opened for writing (SQLite
 * opened it read-only without a word, and a tuner found out after a
 * measurement); read-only opens still work. Root writes any file: skipped. */
static void test_read_only_file_refused_for_writing(void **state)
{
    (void)state;
    if (geteuid() == 0)
        skip();
    const char *a = path_in(mt_test_tmpdir("db_read_only"), "ro.db");
    const int64_t ms[] = {1};
    const double ts[] = {10.0};
    fill(a, SKU_A, ms, ts, 1, 16);
    assert_int_equal(chmod(a, 0444), 0);
    mt_db *db = NULL;
    assert_int_equal(mt_db_open(a, 0, &db), MT_ERR_IO);
    assert_non_null(strstr(mt_db_errmsg(db), "cannot be written"));
    mt_db_close(db);
    db = open_ok(a, MT_DB_READONLY);
    mt_db_close(db);
}

/* A reader's snapshot (mt_db_read_begin) does not see a writer's commit
 * until it ends: the runtime's lookup and the kernels its entry names come
 * from one state of the file. */
static void test_read_snapshot(void **state)
{
    (void)state;
    const char *a = path_in(mt_test_tmpdir("db_snapshot"), "s.db");
    const int64_t ms[] = {1, 8};
    const double ts[] = {10.0, 5.0};
    fill(a, SKU_A, ms, ts, 2, 16);
    mt_db *reader = open_ok(a, MT_DB_READONLY), *writer = open_ok(a, 0);
    CHECK_OK(reader, mt_db_read_begin(reader));
    assert_int_equal(count_entries(reader, 0), 2);
    mt_db_prune_stats ps;
    CHECK_OK(writer, mt_db_prune(writer, SKU_A, NULL, 0, &ps));
    assert_int_equal(count_entries(writer, 0), 0);
    assert_int_equal(count_entries(reader, 0), 2);   /* still the snapshot */
    mt_db_read_end(reader);
    assert_int_equal(count_entries(reader, 0), 0);
    mt_db_read_end(reader);   /* none open: harmless */
    mt_db_close(writer);
    mt_db_close(reader);
}

/* An entry at an M no problem has (a damaged row; the runtime's reach once
 * multiplied it, overflowing) is a problem verify names. */
static void test_verify_entry_m(void **state)
{
    (void)state;
    const char *a = path_in(mt_test_tmpdir("db_verify_m"), "m.db");
    const int64_t ms[] = {1, 8};
    const double ts[] = {10.0, 5.0};
    fill(a, SKU_A, ms, ts, 2, 16);
    mt_db *db = open_ok(a, 0);
    CHECK_OK(db, mt_db_verify(db, NULL, NULL, NULL));
    mt_db_close(db);
    mt_fix_sql(a, "UPDATE entry SET M = 4611686018427387904 + M WHERE M = 8");
    db = open_ok(a, 0);
    int problems = 0;
    assert_int_equal(mt_db_verify(db, NULL, NULL, &problems), MT_ERR_DB);
    assert_int_equal(problems, 1);
    assert_non_null(strstr(mt_db_errmsg(db), "M=4611686018427387912: M outside [1, 1048576]"));
    mt_db_close(db);
}

static void test_json_roundtrip(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("db_json");
    const char *a = path_in(dir, "a.db");
    const int64_t ms[] = {1, 2, 8};
    const double ts[] = {10.0, 5.0, 2.5};
    fill(a, SKU_A, ms, ts, 3, 16);
    const double ts2[] = {11.0, 4.0, 2.5};
    fill(a, SKU_A, ms, ts2, 3, 64);   /* history with losers and winners */
    mt_db *db = open_ok(a, 0);
    add_candidates_and_refs(db);
    char *want = snapshot_db(db);
    CHECK_OK(db, mt_db_export_json(db, path_in(dir, "full.json"), MT_DB_JSON_IMAGES | MT_DB_JSON_PRETTY));
    CHECK_OK(db, mt_db_export_json(db, path_in(dir, "lean.json"), 0));
    mt_db_close(db);

    mt_db *b = open_ok(path_in(dir, "b.db"), MT_DB_CREATE);
    mt_db_merge_stats st;
    CHECK_OK(b, mt_db_import_json(b, path_in(dir, "full.json"), &st));
    char *got = snapshot_db(b);
    assert_string_equal(got, want);
    free(got);
    /* Images came back byte for byte. */
    mt_variant v = make_variant("grouped_gemm", 16, 64, 64);
    mt_db_kernel k;
    CHECK_OK(b, mt_db_get_kernel(b, v.name, ARCH, &k));
    assert_int_equal(k.image_len, 300);
    mt_db_kernel_free(&k);
    CHECK_OK(b, mt_db_verify(b, NULL, NULL, NULL));
    mt_db_close(b);

    /* Without images: everything else is kept, kernels keep their source. */
    mt_db *c = open_ok(path_in(dir, "c.db"), MT_DB_CREATE);
    CHECK_OK(c, mt_db_import_json(c, path_in(dir, "lean.json"), &st));
    CHECK_OK(c, mt_db_get_kernel(c, v.name, ARCH, &k));
    assert_null(k.image);
    assert_non_null(strstr(k.source, v.name));
    mt_db_kernel_free(&k);
    mt_db_close(c);

    /* A tampered image hash: the import fails and leaves nothing behind. */
    char *text;
    size_t len;
    char msg[256];
    assert_int_equal(mt_file_read(path_in(dir, "full.json"), &text, &len, msg, sizeof msg), MT_OK);
    char *h = strstr(text, "\"image_sha256\": \"");
    assert_non_null(h);
    h += strlen("\"image_sha256\": \"");
    *h = *h == 'a' ? 'b' : 'a';
    assert_int_equal(mt_file_write_atomic(path_in(dir, "bad.json"), text, len, msg, sizeof msg), MT_OK);
    free(text);
    mt_db *d = open_ok(path_in(dir, "d.db"), MT_DB_CREATE);
    assert_int_not_equal(mt_db_import_json(d, path_in(dir, "bad.json"), &st), MT_OK);
    assert_non_null(strstr(mt_db_errmsg(d), "SHA-256"));
    assert_int_equal(count_entries(d, 0), 0);
    /* Not JSON / not ours. */
    assert_int_equal(mt_file_write_atomic(path_in(dir, "x.json"), "{\"format\": 1,}", 14, msg,
                                          sizeof msg), MT_OK);
    assert_int_equal(mt_db_import_json(d, path_in(dir, "x.json"), &st), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(mt_db_errmsg(d), "byte"));
    mt_db_close(d);
    free(want);
}

/* Write a copy of file `from` to `to` with the first `what` after the
 * first `after` replaced by `with`. */
static void rewrite(const char *from, const char *to, const char *after, const char *what,
                    const char *with)
{
    char *text, msg[256];
    size_t len;
    assert_int_equal(mt_file_read(from, &text, &len, msg, sizeof msg), MT_OK);
    char *a = strstr(text, after);
    assert_non_null(a);
    char *w = strstr(a, what);
    assert_non_null(w);
    const size_t head = (size_t)(w - text), tail = len - head - strlen(what);
    char *out = malloc(len + strlen(with) + 1);
    assert_non_null(out);
    memcpy(out, text, head);
    memcpy(out + head, with, strlen(with));
    memcpy(out + head + strlen(with), w + strlen(what), tail);
    assert_int_equal(mt_file_write_atomic(to, out, head + strlen(with) + tail, msg, sizeof msg), MT_OK);
    free(out);
    free(text);
}

/* An import of records that cannot serve is refused as a whole, with the
 * record and the reason named, and the database is as it was: an entry
 * whose kernels are in neither the file nor the database, a time of 0 (it
 * would win every later comparison), an M past MT_MAX_TOKENS, and a kernel
 * whose source was edited after its SHA-256 was taken, also where the
 * database already has that kernel. A merge of a database with such an
 * entry is refused the same way. */
static void test_import_refuses_what_cannot_run(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("db_import_refuses");
    char a[1024];   /* path_in's buffers are reused */
    mt_strlcpy(a, path_in(dir, "a.db"), sizeof a);
    const int64_t ms[] = {1, 2};
    const double ts[] = {10.0, 5.0};
    fill(a, SKU_A, ms, ts, 2, 16);
    mt_db *db = open_ok(a, 0);
    /* A candidate and a reference config, so that every section has a row. */
    mt_db_candidate cand = {.key = make_key(SKU_A, 128, 768), .M = 4, .pipeline = "p", .ok = 1,
                            .time_us = 3.0, .rel_err = MT_DB_NO_TIME};
    CHECK_OK(db, mt_db_record_candidate(db, &cand));
    mt_db_vllm_config ref = {.device = "NVIDIA_H200", .E = 128, .N = 768, .M = 4, .block_m = 16,
                             .block_n = 64, .block_k = 128, .group_m = 1, .num_warps = 4,
                             .num_stages = 3};
    CHECK_OK(db, mt_db_put_vllm_config(db, &ref));
    CHECK_OK(db, mt_db_export_json(db, path_in(dir, "full.json"), MT_DB_JSON_IMAGES | MT_DB_JSON_PRETTY));
    char *want = snapshot_db(db);
    mt_db_close(db);
    static const struct { const char *after, *what, *with, *says; } cases[] = {
        {"\"entries\"", "gemm1=mtk_", "gemm1=mtk_ghost_",
         "entries[0]: entry NVIDIA H200 M=1: its gemm1 kernel mtk_ghost_"},
        {"\"entries\"", "\"time_us\": ", "\"time_us\": 0, \"was_time_us\": ",
         "entries[0]: entry NVIDIA H200 M=1: time_us missing or not above 0"},
        {"\"entries\"", "\"M\": ", "\"M\": 1099511627776, \"was_M\": ", "M outside [1, 2^20]"},
        {"\"kernels\"", "extern", "extErn", "source does not match its SHA-256"},
        /* Keys and records no problem could have: every section checks them. */
        {"\"entries\"", "\"key\": \"E=", "\"key\": \"E=-", "problem key E=-128,"},
        {"\"entries\"", "topk=8,", "topk=200,", "topk=200 exceeds E=128"},
        {"\"history\"", "\"key\": \"E=128,topk=8,K=2048", "\"key\": \"E=128,topk=8,K=2047",
         "K=2047 must be a multiple of 8"},
        {"\"history\"", "\"M\": ", "\"M\": -7, \"was_M\": ",
         "history record NVIDIA H200 M=-7: M outside [1, 2^20]"},
        {"\"candidates\"", "topk=8,", "topk=0,", "topk=0 must be >= 1"},
        {"\"candidates\"", "\"M\": ", "\"M\": -1, \"was_M\": ", "candidate NVIDIA H200 M=-1"},
        {"\"references\"", "\"M\": ", "\"M\": -3, \"was_M\": ",
         "E, N and M must be at least 1"},
    };
    char msg[256];
    for (size_t i = 0; i < MT_ARRAY_LEN(cases); i++) {
        rewrite(path_in(dir, "full.json"), path_in(dir, "bad.json"), cases[i].after,
                cases[i].what, cases[i].with);
        /* Into the database the file came from (it has every kernel), and
         * into a new one. */
        for (int fresh = 0; fresh < 2; fresh++) {
            const char *t = path_in(dir, fresh ? "new.db" : "t.db");
            unlink(t);
            if (!fresh) {
                char *bytes;
                size_t n;
                assert_int_equal(mt_file_read(a, &bytes, &n, msg, sizeof msg), MT_OK);
                assert_int_equal(mt_file_write_atomic(t, bytes, n, msg, sizeof msg), MT_OK);
                free(bytes);
            }
            mt_db *d = open_ok(t, MT_DB_CREATE);
            char *before = snapshot_db(d);
            mt_db_merge_stats st;
            assert_int_not_equal(mt_db_import_json(d, path_in(dir, "bad.json"), &st), MT_OK);
            if (!strstr(mt_db_errmsg(d), cases[i].says) || !strstr(mt_db_errmsg(d), "bad.json"))
                fail_msg("case %zu: \"%s\" lacks \"%s\" or the file", i, mt_db_errmsg(d), cases[i].says);
            char *after = snapshot_db(d);
            assert_string_equal(after, before);
            if (!fresh)
                assert_string_equal(after, want);
            free(before);
            free(after);
            mt_db_close(d);
        }
    }
    /* The same entry in a database (written past moetune/db.h) given to a
     * merge. */
    mt_fix_sql(a, "UPDATE entry SET pipeline = replace(pipeline, 'gemm1=mtk_', 'gemm1=mtk_ghost_') "
                  "WHERE M = 1");
    mt_db *d = open_ok(path_in(dir, "m.db"), MT_DB_CREATE);
    mt_db_merge_stats st;
    assert_int_equal(mt_db_merge(d, a, &st), MT_ERR_NOT_FOUND);
    assert_non_null(strstr(mt_db_errmsg(d), "merge "));
    assert_non_null(strstr(mt_db_errmsg(d), "its gemm1 kernel mtk_ghost_"));
    assert_int_equal(count_entries(d, 0), 0);
    mt_db_close(d);
    free(want);
}

/* An export never writes over the database it reads, under any of its
 * names (its path, another spelling of it, a link to it) or over its
 * -wal/-shm/-journal files; the file is as it was. */
/* Problem keys written past moetune/db.h that name no problem moetune can
 * run (a topk above E, a dtype it does not know): verify reports them, a
 * merge refuses them and leaves its destination as it was. */
static void test_bad_keys_in_a_file(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("db_bad_keys");
    char a[1024];   /* path_in's buffers are reused */
    mt_strlcpy(a, path_in(dir, "a.db"), sizeof a);
    const int64_t ms[] = {1};
    const double ts[] = {10.0};
    fill(a, SKU_A, ms, ts, 1, 16);
    mt_db *db = open_ok(a, MT_DB_READONLY);
    CHECK_OK(db, mt_db_verify(db, NULL, NULL, NULL));
    mt_db_close(db);
    mt_fix_sql(a, "UPDATE problem_key SET topk = 300");
    db = open_ok(a, MT_DB_READONLY);
    int problems = 0;
    assert_int_equal(mt_db_verify(db, NULL, NULL, &problems), MT_ERR_DB);
    assert_int_equal(problems, 1);
    assert_non_null(strstr(mt_db_errmsg(db), "topk=300 exceeds E=128"));
    mt_db_close(db);
    mt_db *d = open_ok(path_in(dir, "m.db"), MT_DB_CREATE);
    mt_db_merge_stats st;
    assert_int_equal(mt_db_merge(d, a, &st), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(mt_db_errmsg(d), "topk=300 exceeds E=128"));
    assert_int_equal(count_entries(d, 0), 0);
    assert_int_equal(count_entries(d, 1), 0);
    mt_db_close(d);
    mt_fix_sql(a, "UPDATE problem_key SET topk = 8, dtype = 'bogus'");
    db = open_ok(a, MT_DB_READONLY);
    assert_int_equal(mt_db_verify(db, NULL, NULL, &problems), MT_ERR_DB);
    assert_non_null(strstr(mt_db_errmsg(db), "unknown name (bogus/"));
    mt_db_close(db);
}

static void test_export_not_onto_itself(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("db_export_self");
    char a[1024], other[1024], link[1024];
    mt_strlcpy(a, path_in(dir, "a.db"), sizeof a);
    const int64_t ms[] = {1};
    const double ts[] = {10.0};
    fill(a, SKU_A, ms, ts, 1, 16);
    snprintf(other, sizeof other, "%s/./a.db", dir);
    snprintf(link, sizeof link, "%s/link.db", dir);
    assert_int_equal(symlink(a, link), 0);
    mt_db *db = open_ok(a, 0);
    char *want = snapshot_db(db);
    const char *targets[] = {a, other, link, path_in(dir, "a.db-wal"), path_in(dir, "a.db-journal")};
    for (size_t i = 0; i < MT_ARRAY_LEN(targets); i++) {
        assert_int_equal(mt_db_export_json(db, targets[i], 0), MT_ERR_INVALID_ARG);
        assert_non_null(strstr(mt_db_errmsg(db), "is the database itself"));
    }
    /* Opened through the link, its files are still the target's. */
    mt_db *via = open_ok(link, 0);
    assert_int_equal(mt_db_export_json(via, path_in(dir, "a.db-wal"), 0), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_db_export_json(via, path_in(dir, "a.db"), 0), MT_ERR_INVALID_ARG);
    mt_db_close(via);
    CHECK_OK(db, mt_db_export_json(db, path_in(dir, "a.json"), 0));
    mt_db_close(db);
    db = open_ok(a, MT_DB_READONLY);
    char *got = snapshot_db(db);
    assert_string_equal(got, want);
    CHECK_OK(db, mt_db_verify(db, NULL, NULL, NULL));
    mt_db_close(db);
    free(got);
    free(want);
}

static void test_vllm_layout(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("db_vllm");
    const char *a = path_in(dir, "a.db");
    const int64_t ms[] = {1, 16, 256};
    const double ts[] = {3.0, 4.0, 20.0};
    fill(a, SKU_A, ms, ts, 3, 32);
    mt_db *db = open_ok(a, 0);
    /* A cuBLAS-backed entry is not exported. */
    mt_db_key k = make_key(SKU_A, 128, 768);
    mt_db_entry e = make_entry(&k, 4096, 50.0, NULL, NULL);
    CHECK_OK(db, mt_db_put_entry(db, &e, 1, NULL));
    int files = 0;
    char out[512];
    snprintf(out, sizeof out, "%s/vllm", dir);
    CHECK_OK(db, mt_db_export_vllm(db, out, &files));
    assert_int_equal(files, 1);
    char dev[64], fname[1024];
    mt_db_vllm_device_name(SKU_A, dev, sizeof dev);
    assert_null(strchr(dev, ' '));
    snprintf(fname, sizeof fname, "%s/E=128,N=768,device_name=%s.json", out, dev);
    char *text;
    size_t len;
    char msg[256];
    assert_int_equal(mt_file_read(fname, &text, &len, msg, sizeof msg), MT_OK);
    mt_json *root;
    assert_int_equal(mt_json_parse(text, len, NULL, &root, msg, sizeof msg), MT_OK);
    free(text);
    /* M = 256's GEMM1 has BLOCK_K 96 (fill), which no Triton tile has: that
     * M is left out, vLLM takes the nearest one the file has. */
    assert_int_equal(mt_json_len(root), 2);
    assert_null(mt_json_get(root, "256"));
    for (int i = 0; i < 2; i++) {
        char m[16];
        snprintf(m, sizeof m, "%lld", (long long)ms[i]);
        const mt_json *cfg = mt_json_get(root, m);
        assert_non_null(cfg);
        mt_db_entry got;
        CHECK_OK(db, mt_db_lookup(db, &k, ms[i], &got, NULL));
        mt_db_kernel kk;
        CHECK_OK(db, mt_db_get_kernel(db, mt_db_pipeline_kernel(&got.pipeline, "gemm1"), ARCH, &kk));
        const char *pairs[][2] = {{"BLOCK_SIZE_M", "BLOCK_M"}, {"BLOCK_SIZE_N", "BLOCK_N"},
                                  {"BLOCK_SIZE_K", "BLOCK_K"}, {"GROUP_SIZE_M", "GROUP_M"},
                                  {"num_warps", "WARPS"},      {"num_stages", "STAGES"}};
        for (int p = 0; p < 6; p++) {
            int64_t x;
            assert_true(mt_json_int(mt_json_get(cfg, pairs[p][0]), &x));
            assert_int_equal(x, mt_variant_int(&kk.variant, pairs[p][1], -1));
        }
        mt_db_kernel_free(&kk);
    }
    assert_null(mt_json_get(root, "4096"));
    mt_json_free(root);

    /* Import into another database as reference records. */
    mt_db *b = open_ok(path_in(dir, "b.db"), MT_DB_CREATE);
    int count = 0;
    CHECK_OK(b, mt_db_import_vllm(b, fname, &count));
    assert_int_equal(count, 2);
    mt_buf refs = {0};
    CHECK_OK(b, mt_db_foreach_vllm_config(b, dev, 128, 768, snap_ref, &refs));
    assert_non_null(strstr(refs.data, "|128|768||16|"));
    mt_buf_free(&refs);
    /* vLLM names with a dtype and block shape. */
    char fp8[1024];
    snprintf(fp8, sizeof fp8, "%s/E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,"
             "block_shape=[128,128].json", dir);
    const char *body = "{\"1\": {\"BLOCK_SIZE_M\": 16, \"BLOCK_SIZE_N\": 64, \"BLOCK_SIZE_K\": 128,"
                       " \"GROUP_SIZE_M\": 1, \"num_warps\": 4, \"num_stages\": 3, \"kpack\": 2}}";
    assert_int_equal(mt_file_write_atomic(fp8, body, strlen(body), msg, sizeof msg), MT_OK);
    CHECK_OK(b, mt_db_import_vllm(b, fp8, &count));
    assert_int_equal(count, 1);
    refs = (mt_buf){0};
    CHECK_OK(b, mt_db_foreach_vllm_config(b, "NVIDIA_H200", 256, 0, snap_ref, &refs));
    assert_string_equal(refs.data, "NVIDIA_H200|256|256|dtype=fp8_w8a8,block_shape=[128,128]|1|16|64|128|1|4|3\n");
    mt_buf_free(&refs);
    char badname[1024];
    snprintf(badname, sizeof badname, "%s/config.json", dir);
    assert_int_equal(mt_file_write_atomic(badname, body, strlen(body), msg, sizeof msg), MT_OK);
    assert_int_equal(mt_db_import_vllm(b, badname, &count), MT_ERR_INVALID_ARG);
    const char *badbody = "{\"x\": {}}";
    assert_int_equal(mt_file_write_atomic(fp8, badbody, strlen(badbody), msg, sizeof msg), MT_OK);
    assert_int_equal(mt_db_import_vllm(b, fp8, &count), MT_ERR_INVALID_ARG);
    /* A block size that is not positive. */
    const char *negative = "{\"1\": {\"BLOCK_SIZE_M\": -16, \"BLOCK_SIZE_N\": 64, \"BLOCK_SIZE_K\": 128,"
                           " \"GROUP_SIZE_M\": 1, \"num_warps\": 4, \"num_stages\": 3}}";
    assert_int_equal(mt_file_write_atomic(fp8, negative, strlen(negative), msg, sizeof msg), MT_OK);
    assert_int_equal(mt_db_import_vllm(b, fp8, &count), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(mt_db_errmsg(b), "BLOCK_SIZE_M: positive integer expected"));
    /* vLLM's ROCm files say num_stages 0. */
    const char *rocm = "{\"1\": {\"BLOCK_SIZE_M\": 16, \"BLOCK_SIZE_N\": 64, \"BLOCK_SIZE_K\": 128,"
                       " \"GROUP_SIZE_M\": 1, \"num_warps\": 4, \"num_stages\": 0}}";
    assert_int_equal(mt_file_write_atomic(fp8, rocm, strlen(rocm), msg, sizeof msg), MT_OK);
    CHECK_OK(b, mt_db_import_vllm(b, fp8, &count));
    assert_int_equal(count, 1);
    mt_db_close(b);
    mt_db_close(db);
}

static void file_hash(const char *path, char hex[65])
{
    char *text;
    size_t len;
    char msg[256];
    assert_int_equal(mt_file_read(path, &text, &len, msg, sizeof msg), MT_OK);
    mt_sha256_hex(text, len, hex);
    free(text);
}

/* Opening must fail with `want`, name the file and mention `what`, and
 * leave the file's bytes as they were. */
static void expect_open_fails(const char *path, int flags, mt_status want, const char *what)
{
    struct stat sb;
    int exists = stat(path, &sb) == 0;
    char before[65] = "", after[65] = "";
    if (exists)
        file_hash(path, before);
    mt_db *db = NULL;
    mt_status st = mt_db_open(path, flags, &db);
    if (st != want || !strstr(mt_db_errmsg(db), path) || !strstr(mt_db_errmsg(db), what))
        fail_msg("open %s: status %d (want %d), message '%s' (want '%s')", path, st, want,
                 mt_db_errmsg(db), what);
    mt_db_close(db);
    if (exists) {
        file_hash(path, after);
        assert_string_equal(before, after);
    } else {
        assert_int_not_equal(stat(path, &sb), 0);
    }
}

/* A new database at dir/name with sql run on it afterwards; its path. */
static const char *damaged(const char *dir, const char *name, const char *sql)
{
    const char *path = path_in(dir, name);
    mt_db_close(open_ok(path, MT_DB_CREATE));
    mt_fix_sql(path, sql);
    return path;
}

static void test_bad_files(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("db_bad");
    char msg[256];
    expect_open_fails(path_in(dir, "none.db"), MT_DB_READONLY, MT_ERR_IO, "no such");
    expect_open_fails(path_in(dir, "none.db"), 0, MT_ERR_IO, "no such");
    const char *text = path_in(dir, "text.db");
    const char *junk = "this is not a database, just some words in a file.\n";
    mt_buf big = {0};
    for (int i = 0; i < 10; i++)
        mt_buf_puts(&big, junk);
    assert_int_equal(mt_file_write_atomic(text, big.data, big.len, msg, sizeof msg), MT_OK);
    mt_buf_free(&big);
    expect_open_fails(text, 0, MT_ERR_DB, "not an SQLite");
    expect_open_fails(text, MT_DB_CREATE, MT_ERR_DB, "not an SQLite");
    const char *empty = path_in(dir, "empty.db");
    assert_int_equal(mt_file_write_atomic(empty, "", 0, msg, sizeof msg), MT_OK);
    expect_open_fails(empty, MT_DB_READONLY, MT_ERR_DB, "empty");

    const char *foreign = path_in(dir, "foreign.db");
    mt_fix_sql(foreign, "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);"
                      "INSERT INTO users VALUES (1, 'x')");
    expect_open_fails(foreign, MT_DB_CREATE, MT_ERR_DB, "not a moetune database");
    const char *other_app = path_in(dir, "otherapp.db");
    mt_fix_sql(other_app, "PRAGMA application_id = 1234; CREATE TABLE t (x)");
    expect_open_fails(other_app, 0, MT_ERR_DB, "application_id");

    /* Ours but with a table dropped. */
    const char *partial = damaged(dir, "partial.db", "DROP TABLE candidate");
    expect_open_fails(partial, 0, MT_ERR_DB, "candidate");
    /* The same in rollback-journal mode, as the shipped files are: a refused
     * open leaves the file so, header and all (switching to WAL rewrites it). */
    const char *partial_del = damaged(dir, "partial-delete.db",
                                      "PRAGMA journal_mode = DELETE; DROP TABLE candidate");
    expect_open_fails(partial_del, 0, MT_ERR_DB, "candidate");
    assert_int_equal(raw_int(partial_del, "PRAGMA user_version"), MT_DB_SCHEMA_VERSION);
    /* A table without one of its columns is refused at open, not by the
     * first statement that reads it. */
    const char *no_column = damaged(dir, "no-column.db", "PRAGMA journal_mode = DELETE; "
                                                         "ALTER TABLE entry DROP COLUMN rel_err");
    expect_open_fails(no_column, 0, MT_ERR_DB, "no column 'rel_err'");
    expect_open_fails(no_column, MT_DB_READONLY, MT_ERR_DB, "no column 'rel_err'");
    /* A migration that fails (version 1 stamped on the current schema,
     * whose routing column is there already) leaves the file as it was. */
    const char *bad_migration = damaged(dir, "bad-migration.db",
                                        "PRAGMA journal_mode = DELETE; PRAGMA user_version = 1");
    expect_open_fails(bad_migration, 0, MT_ERR_DB, "migration");

    const char *newer = damaged(dir, "newer.db", "PRAGMA user_version = 99");
    expect_open_fails(newer, 0, MT_ERR_DB, "newer");
    expect_open_fails(newer, MT_DB_READONLY, MT_ERR_DB, "newer");

    /* Truncated: a database of several pages cut in half. */
    const char *trunc = path_in(dir, "trunc.db");
    const int64_t ms[] = {1, 2, 3, 4, 5, 6, 7, 8};
    const double ts[] = {1, 2, 3, 4, 5, 6, 7, 8};
    fill(trunc, SKU_A, ms, ts, 8, 16);
    struct stat sb;
    assert_int_equal(stat(trunc, &sb), 0);
    assert_true(sb.st_size > 8192);
    assert_int_equal(truncate(trunc, sb.st_size / 2), 0);
    expect_open_fails(trunc, 0, MT_ERR_DB, "truncated");
    expect_open_fails(trunc, MT_DB_READONLY, MT_ERR_DB, "truncated");

    mt_db *db = NULL;
    assert_int_equal(mt_db_open("", 0, &db), MT_ERR_INVALID_ARG);
    assert_true(strlen(mt_db_errmsg(db)) > 0);
    mt_db_close(db);
    assert_non_null(mt_db_errmsg(NULL));
}

/* Byte 18 of the file's header: 1 in rollback-journal mode, 2 in WAL. */
static int journal_byte(const char *path)
{
    unsigned char hdr[19];
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(hdr, 1, sizeof hdr, f), sizeof hdr);
    fclose(f);
    return hdr[18];
}

/* The writers that open a file for writing and then refuse it when its
 * SQLite file is damaged (mt_db_refuse_damaged), each run once below. */
enum { W_MERGE, W_IMPORT, W_VLLM, W_PRUNE, W_REFRESH, W_DETERMINISTIC, W_TUNE, W_COUNT };
static const char *const refusing_writer[W_COUNT] = {
    "merge", "import", "import-vllm", "prune", "refresh", "deterministic", "tune"};

/* Writer `which` on the file at path, the inputs it reads in dir; its
 * status, its message in msg. */
static mt_status run_refusing_writer(int which, const char *path, const char *dir, mt_gen *g,
                                     char *msg, size_t msg_size)
{
    if (which == W_TUNE) {   /* the tuner opens the file itself (MT_DB_CREATE) */
        mt_tune_opts o;
        memset(&o, 0, sizeof o);
        mt_problem_init(&o.shape, 1, 64, 6, 2048, 1408);
        o.label = "refused";
        o.Ms[0] = 16;
        o.nM = 1;
        o.db_path = path;
        o.backend = "fake";
        o.isolate = 1;
        o.candidate_timeout_s = 1;
        mt_tune_summary s;
        return mt_tune_run(&o, &s, msg, msg_size);
    }
    mt_db *db = open_ok(path, MT_DB_CREATE);
    mt_db_merge_stats ms;
    mt_db_prune_stats ps;
    mt_refresh_stats rs;
    mt_deterministic_stats ds;
    int nref = 0;
    mt_status st = MT_ERR_INTERNAL;
    msg[0] = '\0';
    switch (which) {
    case W_MERGE: st = mt_db_merge(db, path_in(dir, "source.db"), &ms); break;
    case W_IMPORT: st = mt_db_import_json(db, path_in(dir, "source.json"), &ms); break;
    case W_VLLM:
        st = mt_db_import_vllm(db, path_in(dir, "E=8,N=14336,device_name=NVIDIA_H200.json"), &nref);
        break;
    case W_PRUNE: st = mt_db_prune(db, NULL, NULL, 0, &ps); break;
    case W_REFRESH: st = mt_refresh_kernels(db, g, 0, NULL, NULL, &rs, msg, msg_size); break;
    case W_DETERMINISTIC:
        st = mt_make_deterministic(db, g, 0, NULL, NULL, &ds, msg, msg_size);
        break;
    }
    if (!msg[0])
        mt_strlcpy(msg, mt_db_errmsg(db), msg_size);
    mt_db_close(db);
    return st;
}

/* A writer that died inside a transaction of a rollback-journal file
 * (here a child that spills its pages and _exits) leaves a hot -journal:
 * a read-only open rolls it back where it may write the file (it failed
 * every read, "attempt to write a readonly database") and sees the last
 * commit. A switch to WAL where SQLite cannot keep a -shm beside the file
 * (a folder there) is not made: the file was writable in its own mode and
 * stays so (it went to WAL and every later write failed). A migration
 * whose result lacks a column is refused before its commit: the file
 * keeps every byte (it was migrated and switched to WAL, then refused). */
static void test_left_journal_and_wal_place(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("db_left_journal");
    char path[800], side[820], msg[512], before[65], after[65];
    const int64_t ms[] = {1, 2, 3};
    const double ts[] = {5, 6, 7};
    mt_strlcpy(path, path_in(dir, "hot.db"), sizeof path);
    fill(path, SKU_A, ms, ts, 3, 16);
    mt_fix_sql(path, "PRAGMA journal_mode = DELETE");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        sqlite3 *h = NULL;
        if (sqlite3_open(path, &h) != SQLITE_OK ||
            sqlite3_exec(h, "PRAGMA cache_size = 1; BEGIN IMMEDIATE; DELETE FROM entry; "
                            "DELETE FROM kernel; CREATE TABLE filler (x); "
                            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                            "WHERE i < 4000) INSERT INTO filler SELECT randomblob(900) FROM n",
                         NULL, NULL, NULL) != SQLITE_OK)
            _exit(2);
        _exit(0);   /* no commit, no rollback: dead mid-transaction */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    snprintf(side, sizeof side, "%s-journal", path);
    assert_int_equal(access(side, F_OK), 0);
    mt_db *db = open_ok(path, MT_DB_READONLY);
    assert_int_equal(count_entries(db, 0), 3);
    mt_db_close(db);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM sqlite_master WHERE name = 'filler'"), 0);

    mt_strlcpy(path, path_in(dir, "noshm.db"), sizeof path);
    fill(path, SKU_A, ms, ts, 3, 16);
    mt_fix_sql(path, "PRAGMA journal_mode = DELETE");
    snprintf(side, sizeof side, "%s-shm", path);
    assert_int_equal(mkdir(side, 0755), 0);
    db = open_ok(path, 0);
    mt_db_key k = make_key(SKU_A, 128, 768);
    int64_t prov = make_prov(db, SKU_A, "9.0", "tmplA");
    for (int i = 0; i < 2; i++) {   /* the second write comes after the first commit */
        mt_db_entry e = make_entry(&k, 100 + i, 1.0, NULL, NULL);
        CHECK_OK(db, mt_db_put_entry(db, &e, prov, NULL));
    }
    mt_db_close(db);
    assert_int_equal(journal_byte(path), 1);
    db = open_ok(path, MT_DB_READONLY);
    assert_int_equal(count_entries(db, 0), 5);
    mt_db_close(db);

    mt_strlcpy(path, path_in(dir, "v1-short.db"), sizeof path);
    assert_int_equal(mt_db__create_at_version(path, 1, msg, sizeof msg), MT_OK);
    mt_fix_sql(path, "PRAGMA journal_mode = DELETE; ALTER TABLE candidate DROP COLUMN reason");
    file_hash(path, before);
    assert_int_equal(mt_db_open(path, 0, &db), MT_ERR_DB);
    assert_non_null(strstr(mt_db_errmsg(db), "table 'candidate' has no column 'reason'"));
    mt_db_close(db);
    file_hash(path, after);
    assert_string_equal(before, after);
    assert_int_equal(raw_int(path, "PRAGMA user_version"), 1);
}

/* A writer that refuses a damaged file leaves every byte of it, the
 * header's journal mode and change counter too, and makes no -wal, -shm
 * or -journal file beside it: the file stays in rollback-journal mode, as
 * the shipped ones are, until a writer's first write. (Each had switched
 * the file to WAL when it opened it, before its check.) */
static void test_refused_writers_keep_every_byte(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("db_refused");
    char msg[1024], before[65], after[65], side[820];
    const int64_t ms[] = {1, 2, 3};
    const double ts[] = {5, 6, 7};   /* not M: the damaged index disagrees */
    char source[800];   /* path_in's buffers are reused */
    mt_strlcpy(source, path_in(dir, "source.db"), sizeof source);
    fill(source, SKU_B, ms, ts, 3, 64);
    mt_db *db = open_ok(source, MT_DB_READONLY);
    CHECK_OK(db, mt_db_export_json(db, path_in(dir, "source.json"), 0));
    mt_db_close(db);
    const char *vllm = "{\"1\": {\"BLOCK_SIZE_M\": 16, \"BLOCK_SIZE_N\": 32, \"BLOCK_SIZE_K\": 64, "
                       "\"GROUP_SIZE_M\": 1, \"num_warps\": 4, \"num_stages\": 3}}";
    assert_int_equal(mt_file_write_atomic(path_in(dir, "E=8,N=14336,device_name=NVIDIA_H200.json"),
                                          vllm, strlen(vllm), msg, sizeof msg), MT_OK);
    /* A file with kernels and entries, in rollback-journal mode, damaged. */
    const char *master = path_in(dir, "master.db");
    fill(master, SKU_A, ms, ts, 3, 16);
    mt_fix_sql(master, "PRAGMA journal_mode = DELETE");
    mt_fix_damage_index(master);
    char *bytes = NULL;
    size_t len = 0;
    assert_int_equal(mt_file_read(master, &bytes, &len, msg, sizeof msg), MT_OK);
    assert_int_equal(journal_byte(master), 1);
    mt_gen *g = mt_test_open_templates();
    int changed = 0;
    for (int w = 0; w < W_COUNT; w++) {
        char path[800];
        snprintf(path, sizeof path, "%s/%s.db", dir, refusing_writer[w]);
        assert_int_equal(mt_file_write_atomic(path, bytes, len, msg, sizeof msg), MT_OK);
        file_hash(path, before);
        mt_status st = run_refusing_writer(w, path, dir, g, msg, sizeof msg);
        if (st != MT_ERR_DB || !strstr(msg, "damaged, so ") || !strstr(msg, path))
            fail_msg("%s: status %d, message '%s' (want MT_ERR_DB, the file damaged)",
                     refusing_writer[w], st, msg);
        /* Every writer is tried, then the test fails naming each that changed something. */
        file_hash(path, after);
        if (strcmp(before, after) && ++changed)
            print_error("%s: the refused file changed (header byte 18, the journal mode: "
                        "1 -> %d)\n", refusing_writer[w], journal_byte(path));
        static const char *const sfx[] = {"-wal", "-shm", "-journal"};
        for (size_t i = 0; i < MT_ARRAY_LEN(sfx); i++) {
            snprintf(side, sizeof side, "%s%s", path, sfx[i]);
            if (access(side, F_OK) == 0 && ++changed)
                print_error("%s: left %s beside the refused file\n", refusing_writer[w], side);
        }
    }
    mt_gen_close(g);
    assert_int_equal(changed, 0);
    /* A sound file in rollback-journal mode goes to WAL at its writer's
     * first write, and not before: an open for writing alone leaves it. */
    const char *sound = path_in(dir, "sound.db");
    fill(sound, SKU_A, ms, ts, 3, 16);
    mt_fix_sql(sound, "PRAGMA journal_mode = DELETE");
    file_hash(sound, before);
    db = open_ok(sound, 0);
    file_hash(sound, after);
    assert_string_equal(before, after);
    mt_db_merge_stats st;
    CHECK_OK(db, mt_db_merge(db, source, &st));
    mt_db_close(db);
    assert_int_equal(raw_int(sound, "SELECT count(*) FROM entry"), 6);
    assert_int_equal(journal_byte(sound), 2);
    free(bytes);
}

/* An import that stops at a bad record (after the good ones before it were
 * written in its transaction) leaves a rollback-journal file byte for byte
 * as it was: its first write transaction runs in the file's own journal
 * mode, and only a commit puts the file in WAL mode. (Switched to WAL at
 * the transaction's start, the refused file came back changed.) */
static void test_failed_import_keeps_every_byte(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("db_failed_import");
    char msg[1024], before[65], after[65], path[800], json[800], vllm[800];
    const int64_t ms[] = {1, 2, 3};
    const double ts[] = {5, 6, 7};
    mt_strlcpy(path, path_in(dir, "dest.db"), sizeof path);
    mt_strlcpy(json, path_in(dir, "bad.json"), sizeof json);
    mt_strlcpy(vllm, path_in(dir, "E=8,N=14336,device_name=NVIDIA_H200.json"), sizeof vllm);
    /* The source's export with its last entry's time made negative. */
    const char *source = path_in(dir, "source.db");
    fill(source, SKU_B, ms, ts, 3, 64);
    mt_db *db = open_ok(source, MT_DB_READONLY);
    CHECK_OK(db, mt_db_export_json(db, json, 0));
    mt_db_close(db);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(mt_file_read(json, &text, &len, msg, sizeof msg), MT_OK);
    char *last = NULL;
    for (char *p = strstr(text, "\"time_us\":"); p; p = strstr(p + 1, "\"time_us\":"))
        last = p;
    assert_non_null(last);
    last += strlen("\"time_us\":");
    mt_buf bad = {0};   /* "...:7" -> "...:-7": a negative time */
    mt_buf_printf(&bad, "%.*s-%s", (int)(last - text), text, last);
    assert_int_equal(mt_file_write_atomic(json, bad.data, bad.len, msg, sizeof msg), MT_OK);
    mt_buf_free(&bad);
    free(text);
    const char *bad_vllm = "{\"1\": {\"BLOCK_SIZE_M\": 16, \"BLOCK_SIZE_N\": 32, \"BLOCK_SIZE_K\": 64, "
                           "\"GROUP_SIZE_M\": 1, \"num_warps\": 4, \"num_stages\": 3}, "
                           "\"2\": {\"BLOCK_SIZE_M\": -5, \"BLOCK_SIZE_N\": 32, \"BLOCK_SIZE_K\": 64, "
                           "\"GROUP_SIZE_M\": 1, \"num_warps\": 4, \"num_stages\": 3}}";
    assert_int_equal(mt_file_write_atomic(vllm, bad_vllm, strlen(bad_vllm), msg, sizeof msg), MT_OK);
    for (int which = 0; which < 2; which++) {
        fill(path, SKU_A, ms, ts, 3, 16);
        mt_fix_sql(path, "PRAGMA journal_mode = DELETE");
        file_hash(path, before);
        db = open_ok(path, 0);
        mt_db_merge_stats st;
        int n = 0;
        mt_status got = which ? mt_db_import_vllm(db, vllm, &n) : mt_db_import_json(db, json, &st);
        if (got != MT_ERR_INVALID_ARG || !strstr(mt_db_errmsg(db), which ? "BLOCK_SIZE_M" : "time_us"))
            fail_msg("import %d: status %d, message '%s'", which, got, mt_db_errmsg(db));
        mt_db_close(db);
        file_hash(path, after);
        assert_string_equal(before, after);
        assert_int_equal(journal_byte(path), 1);
        char side[820];
        snprintf(side, sizeof side, "%s-wal", path);
        assert_int_not_equal(access(side, F_OK), 0);
        assert_int_equal(remove(path), 0);
    }
}

static void test_prune(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("db_prune");
    const char *path = path_in(dir, "p.db");
    const int64_t ms[] = {1, 2};
    const double ts[] = {1.0, 2.0};
    fill(path, SKU_A, ms, ts, 2, 16);
    fill(path, SKU_B, ms, ts, 2, 64);
    mt_db *db = open_ok(path, 0);
    mt_db_key kb = make_key(SKU_B, 128, 768);
    mt_db_candidate c = {.key = kb, .M = 1, .pipeline = "x", .ok = 0, .time_us = MT_DB_NO_TIME,
                         .rel_err = MT_DB_NO_TIME, .reason = "fault"};
    CHECK_OK(db, mt_db_record_candidate(db, &c));
    char before[65], after[65];
    int64_t kernels = raw_int(path, "SELECT count(*) FROM kernel");
    assert_int_equal(kernels, 8);
    mt_db_prune_stats ps;
    CHECK_OK(db, mt_db_prune(db, SKU_B, NULL, 1, &ps));   /* dry run */
    assert_int_equal(ps.entries, 2);
    assert_int_equal(ps.kernels, 4);
    assert_int_equal(ps.candidates, 1);
    assert_int_equal(count_entries(db, 0), 4);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM kernel"), 8);
    /* A read-only handle: the same counts from a copy in memory, the file
     * untouched; a real prune through it is refused. */
    mt_db *ro = open_ok(path, MT_DB_READONLY);
    mt_db_prune_stats rs;
    CHECK_OK(ro, mt_db_prune(ro, SKU_B, NULL, 1, &rs));
    assert_memory_equal(&rs, &ps, sizeof rs);
    assert_int_equal(mt_db_prune(ro, SKU_B, NULL, 0, &rs), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(mt_db_errmsg(ro), "read-only"));
    /* A failure inside the copy is reported on the handle. */
    assert_int_equal(mt_db_prune(ro, NULL, "nope", 1, &rs), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(mt_db_errmsg(ro), "template hash 'nope'"));
    mt_db_close(ro);
    assert_int_equal(count_entries(db, 0), 4);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM kernel"), 8);
    CHECK_OK(db, mt_db_prune(db, SKU_B, NULL, 0, &ps));
    assert_int_equal(ps.entries, 2);
    assert_int_equal(count_entries(db, 0), 2);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM kernel"), 4);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM candidate"), 0);
    CHECK_OK(db, mt_db_verify(db, NULL, NULL, NULL));
    /* Keeping tmplA removes nothing, not even an older history row of an
     * entry it keeps (made by another template); keeping another hash
     * removes the rest. */
    const int64_t old_prov = make_prov(db, SKU_A, "9.0", "oldtemplates");
    char sql[512];
    snprintf(sql, sizeof sql, "INSERT INTO entry_history (sku, key_id, M, pipeline, time_us, "
             "default_time_us, cublas_time_us, rel_err, provenance_id, recorded) SELECT sku, "
             "key_id, M, pipeline, time_us + 1, default_time_us, cublas_time_us, rel_err, %lld, "
             "recorded - 1 FROM entry WHERE sku = '%s' AND M = 1", (long long)old_prov, SKU_A);
    mt_fix_sql(path, sql);
    const int64_t history = raw_int(path, "SELECT count(*) FROM entry_history");
    assert_true(history >= 1);
    CHECK_OK(db, mt_db_prune(db, NULL, "tmplA", 0, &ps));
    assert_int_equal(ps.entries, 0);
    assert_int_equal(ps.history, 0);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM entry_history"), history);
    /* A hash that names no stored one (a typo, a cut one too short) is
     * refused rather than deleting every entry; so is a prefix that fits
     * two. A unique prefix of 6 or more names its hash. */
    assert_int_equal(mt_db_prune(db, NULL, "tmplNew", 0, &ps), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(mt_db_errmsg(db), "none of the stored ones"));
    assert_int_equal(mt_db_prune(db, NULL, "tmpl", 0, &ps), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(mt_db_errmsg(db), "too short"));
    assert_int_equal(count_entries(db, 0), 2);
    make_prov(db, SKU_A, "9.0", "abcdef01");
    make_prov(db, SKU_A, "9.0", "abcdef02");
    assert_int_equal(mt_db_prune(db, NULL, "abcdef", 1, &ps), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(mt_db_errmsg(db), "fits 2 stored ones"));
    assert_int_equal(mt_db_prune(db, NULL, "abcdef0", 1, &ps), MT_ERR_INVALID_ARG);
    CHECK_OK(db, mt_db_prune(db, NULL, "abcdef01", 1, &ps));
    assert_int_equal(ps.entries, 2);   /* the tmplA entries would go */
    mt_db_close(db);
    /* A whole hash that is not stored is refused like a cut one; keeping
     * one that no entry has removes the rest. */
    const char *fresh = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    db = open_ok(path, 0);
    assert_int_equal(mt_db_prune(db, NULL, fresh, 1, &ps), MT_ERR_INVALID_ARG);
    mt_db_close(db);
    fresh = "abcdef01";
    file_hash(path, before);
    db = open_ok(path, 0);
    CHECK_OK(db, mt_db_prune(db, NULL, fresh, 1, &ps));
    mt_db_close(db);
    file_hash(path, after);
    assert_string_equal(before, after);   /* a dry run changes no byte */
    db = open_ok(path, 0);
    CHECK_OK(db, mt_db_prune(db, NULL, fresh, 0, &ps));
    assert_int_equal(ps.entries, 2);
    assert_int_equal(ps.provenance, 4);   /* tmplA's, the older history row's and the two unused ones */
    assert_int_equal(count_entries(db, 0), 0);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM kernel"), 0);
    mt_db_close(db);
}

/* A child that writes entries forever, reporting each commit on a pipe. */
static void writer_child(const char *path, int flags, int fd, const char *sku, int64_t first,
                         int count)
{
    mt_db *db = NULL;
    if (mt_db_open(path, flags, &db) != MT_OK) {
        fprintf(stderr, "child: %s\n", mt_db_errmsg(db));
        _exit(3);
    }
    mt_db_key k = make_key(sku, 32, 256);
    int64_t prov = make_prov(db, sku, "9.0", "tmplA");
    for (int64_t i = first; count < 0 || i < first + count; i++) {
        mt_db_entry e = make_entry(&k, i + 1, 1.0 + (double)i, NULL, NULL);
        if (mt_db_put_entry(db, &e, prov, NULL) != MT_OK) {
            fprintf(stderr, "child: %s\n", mt_db_errmsg(db));
            _exit(4);
        }
        mt_db_candidate c = {.key = k, .M = i + 1, .pipeline = "p", .ok = 1, .time_us = 1.0,
                             .rel_err = 0.0};
        if (mt_db_record_candidate(db, &c) != MT_OK)
            _exit(5);
        int32_t ack = (int32_t)i;
        if (fd >= 0 && write(fd, &ack, sizeof ack) != (ssize_t)sizeof ack)
            _exit(6);
    }
    mt_db_close(db);
    _exit(0);
}

static void test_crash_safety(void **state)
{
    (void)state;
    const char *path = path_in(mt_test_tmpdir("db_crash"), "c.db");
    mt_db_close(open_ok(path, MT_DB_CREATE));
    mt_rng rng;
    mt_rng_seed(&rng, (uint64_t)time(NULL) ^ (uint64_t)getpid());
    for (int round = 0; round < 3; round++) {
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            writer_child(path, 0, fds[1], SKU_A, round * 100000, -1);
        }
        close(fds[1]);
        int kill_after = 5 + (int)(mt_rng_next(&rng) % 60);
        int32_t ack, last = -1;
        int acks = 0;
        while (acks < kill_after && read(fds[0], &ack, sizeof ack) == (ssize_t)sizeof ack) {
            last = ack;
            acks++;
        }
        usleep((useconds_t)(mt_rng_next(&rng) % 3000));   /* land somewhere mid-transaction */
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        while (read(fds[0], &ack, sizeof ack) == (ssize_t)sizeof ack)
            last = ack;   /* commits acknowledged before the kill */
        close(fds[0]);
        assert_true(last >= round * 100000);
        mt_db *db = open_ok(path, 0);
        CHECK_OK(db, mt_db_verify(db, NULL, NULL, NULL));
        mt_db_key k = make_key(SKU_A, 32, 256);
        for (int64_t i = round * 100000; i <= last; i++) {
            mt_db_entry out;
            int exact = 0;
            CHECK_OK(db, mt_db_lookup(db, &k, i + 1, &out, &exact));
            if (!exact)
                fail_msg("round %d: committed entry M=%lld lost", round, (long long)i + 1);
        }
        mt_db_close(db);
    }
}

static void test_concurrent_writers(void **state)
{
    (void)state;
    const char *path = path_in(mt_test_tmpdir("db_conc"), "w.db");
    mt_db_close(open_ok(path, MT_DB_CREATE));
    const int per = 60;
    pid_t pids[2];
    fflush(NULL);
    for (int c = 0; c < 2; c++) {
        pids[c] = fork();
        assert_true(pids[c] >= 0);
        if (pids[c] == 0)
            writer_child(path, 0, -1, c ? SKU_B : SKU_A, c * 1000, per);
    }
    for (int c = 0; c < 2; c++) {
        int status;
        assert_int_equal(waitpid(pids[c], &status, 0), pids[c]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    mt_db *db = open_ok(path, MT_DB_READONLY);
    CHECK_OK(db, mt_db_verify(db, NULL, NULL, NULL));
    for (int c = 0; c < 2; c++) {
        mt_db_key k = make_key(c ? SKU_B : SKU_A, 32, 256);
        for (int64_t i = c * 1000; i < c * 1000 + per; i++) {
            mt_db_entry out;
            int exact = 0;
            CHECK_OK(db, mt_db_lookup(db, &k, i + 1, &out, &exact));
            assert_int_equal(exact, 1);
        }
    }
    assert_int_equal(count_entries(db, 0), 2 * per);
    mt_db_close(db);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM candidate"), 2 * per);
}

/* Eight writers start at once on a file none of them finds: one creates
 * it, the others wait for its schema, and each writes its rows; the new
 * file is in WAL mode from its creation. */
static void test_concurrent_starts(void **state)
{
    (void)state;
    const char *path = path_in(mt_test_tmpdir("db_starts"), "n.db");
    enum { WRITERS = 8, PER = 5 };
    pid_t pids[WRITERS];
    fflush(NULL);
    for (int c = 0; c < WRITERS; c++) {
        pids[c] = fork();
        assert_true(pids[c] >= 0);
        if (pids[c] == 0)
            writer_child(path, MT_DB_CREATE, -1, SKU_A, c * 1000, PER);
    }
    for (int c = 0; c < WRITERS; c++) {
        int status;
        assert_int_equal(waitpid(pids[c], &status, 0), pids[c]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    assert_int_equal(journal_byte(path), 2);
    mt_db *db = open_ok(path, MT_DB_READONLY);
    CHECK_OK(db, mt_db_verify(db, NULL, NULL, NULL));
    assert_int_equal(count_entries(db, 0), WRITERS * PER);
    mt_db_close(db);
}

/* The shipped file's name of a SKU, as the Python package looks it up. */
static void test_shipped_name(void **state)
{
    (void)state;
    char out[64];
    mt_db_shipped_name("NVIDIA H200", out, sizeof out);
    assert_string_equal(out, "nvidia-h200.db");
    mt_db_shipped_name("NVIDIA H100 80GB HBM3", out, sizeof out);
    assert_string_equal(out, "nvidia-h100-80gb-hbm3.db");
    mt_db_shipped_name("  NVIDIA  H100 PCIe (rev. 2)  ", out, sizeof out);
    assert_string_equal(out, "nvidia-h100-pcie-rev-2.db");
    mt_db_shipped_name("", out, sizeof out);
    assert_string_equal(out, ".db");
    char small[10];   /* cut short, still a whole ".db" name */
    mt_db_shipped_name("NVIDIA H200", small, sizeof small);
    assert_string_equal(small, "nvidia.db");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_and_pipeline_text),
        cmocka_unit_test(test_create_and_reopen),
        cmocka_unit_test(test_migration_v1_to_v2),
        cmocka_unit_test(test_kernel_hash),
        cmocka_unit_test(test_verify_storage),
        cmocka_unit_test(test_remove_if_empty),
        cmocka_unit_test(test_put_entry_keeps_faster),
        cmocka_unit_test(test_lookup_nearest),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_merge_newer),
        cmocka_unit_test(test_candidates),
        cmocka_unit_test(test_verify_entry_m),
        cmocka_unit_test(test_read_snapshot),
        cmocka_unit_test(test_read_only_file_refused_for_writing),
        cmocka_unit_test(test_json_roundtrip),
        cmocka_unit_test(test_import_refuses_what_cannot_run),
        cmocka_unit_test(test_bad_keys_in_a_file),
        cmocka_unit_test(test_export_not_onto_itself),
        cmocka_unit_test(test_vllm_layout),
        cmocka_unit_test(test_shipped_name),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_refused_writers_keep_every_byte),
        cmocka_unit_test(test_left_journal_and_wal_place),
        cmocka_unit_test(test_failed_import_keeps_every_byte),
        cmocka_unit_test(test_prune),
        cmocka_unit_test(test_crash_safety),
        cmocka_unit_test(test_concurrent_writers),
        cmocka_unit_test(test_concurrent_starts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
