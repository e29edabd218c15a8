/*
 * Stored kernels against the current templates (tuner/refresh.h), on the
 * real templates (MT_TEMPLATE_DIR, set by CTest): a kernel whose source the
 * templates still generate gets the current template hash, one whose source
 * or variant differs keeps its own, one the templates do not make is left
 * alone; a dry run changes nothing. And the shipped database: in
 * rollback-journal mode, sound, no kernel in it waits for a refresh (a
 * template edit that left a shipped kernel's source as it was must come
 * with `moetune db refresh`), and no entry sums by atomics.
 */
#include "tests/support.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "moetune/db.h"
#include "moetune/gen.h"
#include "tests/db_fixture.h"
#include "tuner/deterministic.h"
#include "tuner/refresh.h"

/* Store v with source text (NULL: what the templates generate) and image
 * (image_len bytes; NULL: none) as made from templates of hash `hash`. */
static void put_with_image(mt_db *db, mt_gen *g, const mt_variant *v, const char *text,
                           const char *hash, const void *image, size_t image_len)
{
    mt_db_kernel k;
    memset(&k, 0, sizeof k);
    k.variant = *v;
    k.image = (void *)image, k.image_len = image_len;
    char *src = NULL;
    size_t len = 0;
    if (!text) {
        assert_int_equal(mt_gen_source(g, v, &src, &len), MT_OK);
        k.source = src, k.source_len = len;
    } else {
        k.source = (char *)text, k.source_len = strlen(text);
    }
    mt_strlcpy(k.template_hash, hash, sizeof k.template_hash);
    if (mt_db_put_kernel(db, &k))
        fail_msg("%s", mt_db_errmsg(db));
    free(src);
}

static void put(mt_db *db, mt_gen *g, const mt_variant *v, const char *text, const char *hash)
{
    put_with_image(db, g, v, text, hash, NULL, 0);
}

/* v's name with a suffix (short names: the reduce family's). */
static void name_with(mt_variant *v, const char *suffix)
{
    size_t n = strlen(v->name);
    assert_true(n + strlen(suffix) < sizeof v->name);
    memcpy(v->name + n, suffix, strlen(suffix) + 1);
}

static const char *origin(mt_db *db, const mt_variant *v)
{
    static char hash[65];
    char family[48];
    assert_int_equal(mt_db_kernel_origin(db, v->name, v->arch, family, hash), MT_OK);
    return hash;
}

typedef struct lines {
    char text[8][1024];
    int n;
} lines;

static void keep(const char *line, void *ctx)
{
    lines *l = ctx;
    if (l->n < 8)
        mt_strlcpy(l->text[l->n], line, sizeof l->text[0]);
    l->n++;
}

static int said(const lines *l, const char *name, const char *what)
{
    for (int i = 0; i < l->n && i < 8; i++)
        if (strstr(l->text[i], name) && strstr(l->text[i], what))
            return 1;
    return 0;
}

/* The reduce family's sm_90a defaults (two or more) and its current
 * template hash, and a new database file in a folder of its own. */
static mt_variant *reduce_defaults(mt_gen *g, char now[65])
{
    size_t n = 0;
    mt_variant *v = mt_test_sm90a_defaults(g, "moe_reduce", &n);
    assert_true(n >= 2);
    assert_int_equal(mt_gen_template_hash(g, "moe_reduce", now), MT_OK);
    return v;
}

static mt_db *new_db(const char *folder, char file[700])
{
    snprintf(file, 700, "%s/r.db", mt_test_tmpdir(folder));
    return mt_fix_open_db(file, MT_DB_CREATE);
}

static void test_refresh_kernels(void **state)
{
    (void)state;
    mt_gen *g = mt_test_open_templates();
    char now[65], file[700];
    mt_variant *v = reduce_defaults(g, now);
    mt_db *db = new_db("refresh", file);
    const char *old = "0123456789abcdef";
    mt_variant same = v[0], edited = v[1], other_version = v[0], current = v[0];
    put(db, g, &same, NULL, old);                        /* still generated as it is */
    put(db, g, &edited, "// another source\n", old);     /* the source changed since */
    other_version.template_version = 999;                /* made by another version */
    name_with(&other_version, "_old");
    put(db, g, &other_version, "// old\n", old);
    name_with(&current, "_now");
    put(db, g, &current, "// now\n", now);                /* already current: untouched */
    mt_variant stranger = v[0];
    mt_strlcpy(stranger.family, "no_such_family", sizeof stranger.family);
    snprintf(stranger.name, sizeof stranger.name, "mtk_no_such_family_1");
    put(db, g, &stranger, "// ?\n", old);

    /* A dry run reports and counts, and changes nothing. */
    mt_refresh_stats s;
    lines l = {0};
    char msg[1024];
    assert_int_equal(mt_refresh_kernels(db, g, MT_REFRESH_DRY_RUN, keep, &l, &s, msg, sizeof msg), MT_OK);
    assert_int_equal(s.current, 1);
    assert_int_equal(s.refreshed, 1);
    assert_int_equal(s.changed, 1);
    assert_int_equal(s.unknown, 2);
    assert_int_equal(l.n, 4);   /* one line per kernel that is not current */
    assert_true(said(&l, same.name, "same variant and source"));
    assert_true(said(&l, edited.name, "another source"));
    assert_true(said(&l, other_version.name, "version 999"));
    assert_true(said(&l, stranger.name, "no family no_such_family"));
    assert_string_equal(origin(db, &same), old);

    /* The real run brings only the unchanged kernel up to date. */
    assert_int_equal(mt_refresh_kernels(db, g, 0, NULL, NULL, &s, msg, sizeof msg), MT_OK);
    assert_int_equal(s.refreshed, 1);
    assert_string_equal(origin(db, &same), now);
    assert_string_equal(origin(db, &edited), old);
    assert_string_equal(origin(db, &other_version), old);
    assert_int_equal(mt_refresh_kernels(db, g, 0, NULL, NULL, &s, msg, sizeof msg), MT_OK);
    assert_int_equal(s.current, 2);
    assert_int_equal(s.refreshed, 0);
    assert_int_equal(mt_db_verify(db, NULL, NULL, NULL), MT_OK);

    /* The setter only touches the source it was told about. */
    assert_int_equal(mt_db_set_kernel_template_hash(db, edited.name, edited.arch,
                                                    "feedfeed", now), MT_ERR_NOT_FOUND);
    assert_string_equal(origin(db, &edited), old);
    assert_int_equal(mt_refresh_kernels(NULL, g, 0, NULL, NULL, &s, msg, sizeof msg),
                     MT_ERR_INVALID_ARG);
    mt_db_close(db);
    /* A kernel whose stored source no longer matches its hash is not
     * marked current (it once was, and the runtime then trusted it). */
    char sql[512];
    snprintf(sql, sizeof sql, "UPDATE kernel SET template_hash = '%s', source = 'X' || "
             "substr(source, 2) WHERE name = '%s'", old, same.name);
    mt_fix_sql(file, sql);
    db = mt_fix_open_db(file, 0);
    assert_int_equal(mt_refresh_kernels(db, g, 0, NULL, NULL, &s, msg, sizeof msg), MT_ERR_DB);
    assert_non_null(strstr(msg, "a stored kernel is damaged, so no kernel was refreshed"));
    assert_non_null(strstr(msg, same.name));
    assert_string_equal(origin(db, &same), old);
    mt_db_close(db);
    snprintf(sql, sizeof sql, "DELETE FROM kernel WHERE name = '%s'", same.name);
    mt_fix_sql(file, sql);
    /* Nothing is refreshed in a damaged file (an entry, so that the
     * damaged index has a row to disagree about). */
    db = mt_fix_open_db(file, 0);
    mt_problem p;
    mt_problem_init(&p, 64, 8, 2, 256, 128);
    mt_fix_put_entry(db, &p, "TEST GPU", "9.0", 16, "x", now);
    mt_db_close(db);
    mt_fix_damage_index(file);
    db = mt_fix_open_db(file, 0);
    assert_int_equal(mt_refresh_kernels(db, g, 0, NULL, NULL, &s, msg, sizeof msg), MT_ERR_DB);
    assert_non_null(strstr(msg, "damaged, so no kernel was refreshed"));
    mt_db_close(db);
    free(v);
    mt_gen_close(g);
}

/* A copy of the reduce family (its Lua file, and its header with two lines
 * added at the top, so that every line of its code moves) in a folder of
 * its own, which wins over the built-in one. */
static mt_gen *shifted_reduce(void)
{
    const char *dir = mt_test_tmpdir("refresh_shifted");
    const char *src = getenv("MT_TEMPLATE_DIR");
    static const char *const files[] = {"moe_reduce.lua", "moe_reduce.cuh"};
    for (int i = 0; i < 2; i++) {
        char from[700], to[700];
        snprintf(from, sizeof from, "%s/%s", src, files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
        assert_non_null(in);
        assert_non_null(out);
        if (i == 1)
            fputs("/* moved */\n\n", out);
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, in)) > 0)
            assert_int_equal(fwrite(buf, 1, n, out), n);
        fclose(in);
        fclose(out);
    }
    const char *dirs[] = {dir};
    mt_gen_config cfg = {.template_dirs = dirs, .ntemplate_dirs = 1, .no_cache = 1};
    mt_gen *g = NULL;
    if (mt_gen_open(&cfg, &g))
        fail_msg("%s", mt_gen_errmsg(g));
    return g;
}

/* Double the alignment in the section header of the image's first .text.*
 * section: its bytes stay, the header (not a line table) changes. */
static void double_text_align(uint8_t *img, size_t len)
{
    uint64_t shoff = 0, strs = 0;
    memcpy(&shoff, img + 0x28, 8);
    uint16_t shentsize, shnum, shstrndx;
    memcpy(&shentsize, img + 0x3a, 2);
    memcpy(&shnum, img + 0x3c, 2);
    memcpy(&shstrndx, img + 0x3e, 2);
    assert_true(shoff + (uint64_t)shnum * shentsize <= len && shstrndx < shnum);
    memcpy(&strs, img + shoff + (uint64_t)shstrndx * shentsize + 0x18, 8);
    for (uint16_t i = 0; i < shnum; i++) {
        uint8_t *h = img + shoff + (uint64_t)i * shentsize;
        uint32_t name;
        memcpy(&name, h, 4);
        if (!strncmp((const char *)img + strs + name, ".text.", 6)) {
            uint64_t align;
            memcpy(&align, h + 0x30, 8);
            align *= 2;
            memcpy(h + 0x30, &align, 8);
            return;
        }
    }
    fail_msg("no .text.* section in the image");
}

/* MT_REFRESH_COMPILE. Kernels stored as made by other templates, with
 * a source the templates no longer generate: one with the image of the
 * reduce family's header with its lines moved (the same code, other line
 * tables), which is brought up to date with the current source and image;
 * one with an image for another target (its ELF flags changed), then one
 * whose code section has another alignment in its header, which stay
 * changed. Without the flag both are changed; a dry run writes nothing. */
static void test_refresh_by_code(void **state)
{
    (void)state;
    mt_gen *g = mt_test_open_templates(), *moved = shifted_reduce();
    char now[65], file[700];
    mt_variant *v = reduce_defaults(g, now);
    mt_kernel_binary *b = NULL, *m = NULL;
    assert_int_equal(mt_gen_compile(g, v, 2, &b), MT_OK);
    assert_int_equal(mt_gen_compile(moved, v, 2, &m), MT_OK);
    assert_false(b[0].image_len == m[0].image_len && !memcmp(b[0].image, m[0].image, b[0].image_len));
    mt_db *db = new_db("refresh_code", file);
    const char *old = "0123456789abcdef";
    put_with_image(db, g, &v[0], m[0].source, old, m[0].image, m[0].image_len);
    uint8_t *aligned = malloc(m[1].image_len);
    assert_non_null(aligned);
    memcpy(aligned, m[1].image, m[1].image_len);
    double_text_align(aligned, m[1].image_len);
    m[1].image[0x30] ^= 0x01;   /* e_flags: another target */
    put_with_image(db, g, &v[1], m[1].source, old, m[1].image, m[1].image_len);

    mt_refresh_stats s;
    lines l = {0};
    char msg[1024];
    assert_int_equal(mt_refresh_kernels(db, g, MT_REFRESH_DRY_RUN, NULL, NULL, &s, msg, sizeof msg), MT_OK);
    assert_int_equal(s.changed, 2);
    assert_int_equal(s.refreshed + s.same_code, 0);
    assert_int_equal(mt_refresh_kernels(db, g, MT_REFRESH_DRY_RUN | MT_REFRESH_COMPILE, keep, &l, &s, msg,
                                        sizeof msg), MT_OK);
    assert_int_equal(s.refreshed, 1);
    assert_int_equal(s.same_code, 1);
    assert_int_equal(s.changed, 1);
    assert_true(said(&l, v[0].name, "compiles to the same code as the stored image"));
    assert_true(said(&l, v[1].name, "and other code"));
    assert_string_equal(origin(db, &v[0]), old);   /* the dry run wrote nothing */

    assert_int_equal(mt_refresh_kernels(db, g, MT_REFRESH_COMPILE, NULL, NULL, &s, msg, sizeof msg), MT_OK);
    assert_int_equal(s.same_code, 1);
    assert_string_equal(origin(db, &v[0]), now);
    assert_string_equal(origin(db, &v[1]), old);
    mt_db_kernel k;
    assert_int_equal(mt_db_get_kernel(db, v[0].name, v[0].arch, &k), MT_OK);
    assert_int_equal(k.source_len, b[0].source_len);   /* the current source and image */
    assert_memory_equal(k.source, b[0].source, b[0].source_len);
    assert_int_equal(k.image_len, b[0].image_len);
    assert_memory_equal(k.image, b[0].image, b[0].image_len);
    mt_db_kernel_free(&k);
    /* Now current by its source; the other one still changed, and so with
     * its code section's alignment changed in the header alone. */
    assert_int_equal(mt_refresh_kernels(db, g, MT_REFRESH_COMPILE, NULL, NULL, &s, msg, sizeof msg), MT_OK);
    assert_int_equal(s.current, 1);
    assert_int_equal(s.changed, 1);
    put_with_image(db, g, &v[1], m[1].source, old, aligned, m[1].image_len);
    free(aligned);
    assert_int_equal(mt_refresh_kernels(db, g, MT_REFRESH_COMPILE, NULL, NULL, &s, msg, sizeof msg), MT_OK);
    assert_int_equal(s.same_code, 0);
    assert_int_equal(s.changed, 1);
    assert_int_equal(mt_db_verify(db, NULL, NULL, NULL), MT_OK);
    mt_db_close(db);
    mt_kernel_binaries_free(b, 2);
    mt_kernel_binaries_free(m, 2);
    free(v);
    mt_gen_close(moved);
    mt_gen_close(g);
}

/* v without parameter `name`, as a kernel stored before it was added. */
static mt_variant without_param(const mt_variant *v, const char *name)
{
    mt_variant out = *v;
    out.nparams = 0;
    for (int i = 0; i < v->nparams; i++)
        if (strcmp(v->params[i].name, name))
            out.params[out.nparams++] = v->params[i];
    assert_int_equal(out.nparams, v->nparams - 1);
    return out;
}

/* A kernel stored before a parameter with an omit_in_name value was added
 * (grouped_gemm_sm90's SWAP, "no") is that value's point: it resolves,
 * and a refresh brings it up to date when its source is the same. Without
 * a parameter that has no such value it is of other templates. */
static void test_refresh_added_parameter(void **state)
{
    (void)state;
    mt_gen *g = mt_test_open_templates();
    size_t n = 0;
    mt_variant *v = mt_test_sm90a_defaults(g, "grouped_gemm_sm90", &n);
    size_t i = 0;
    while (i < n && strcmp(mt_variant_get(&v[i], "SWAP"), "no"))
        i++;
    assert_true(i < n);
    mt_variant before = without_param(&v[i], "SWAP"), out;
    assert_int_equal(mt_gen_resolve(g, &before, &out), MT_OK);
    assert_string_equal(mt_variant_get(&out, "SWAP"), "no");
    assert_string_equal(out.name, v[i].name);
    mt_variant no_stages = without_param(&v[i], "STAGES");
    assert_int_equal(mt_gen_resolve(g, &no_stages, &out), MT_ERR_INCOMPATIBLE);
    assert_non_null(strstr(mt_gen_errmsg(g), "STAGES"));
    /* A parameter the template does not declare, in place of the omitted
     * one: refused, and named. */
    mt_variant stranger = before;
    assert_int_equal(mt_variant_add(&stranger, "BOGUS", "1"), MT_OK);
    assert_int_equal(mt_gen_resolve(g, &stranger, &out), MT_ERR_INCOMPATIBLE);
    assert_non_null(strstr(mt_gen_errmsg(g), "'BOGUS'"));

    const char *path = mt_test_tmpdir("refresh_added");
    char file[700], now[65];
    snprintf(file, sizeof file, "%s/r.db", path);
    assert_int_equal(mt_gen_template_hash(g, "grouped_gemm_sm90", now), MT_OK);
    mt_db *db = mt_fix_open_db(file, MT_DB_CREATE);
    put(db, g, &before, NULL, "0123456789abcdef");
    mt_refresh_stats s;
    char msg[1024];
    assert_int_equal(mt_refresh_kernels(db, g, 0, NULL, NULL, &s, msg, sizeof msg), MT_OK);
    assert_int_equal(s.refreshed, 1);
    assert_int_equal(s.changed + s.unknown, 0);
    assert_string_equal(origin(db, &before), now);
    mt_db_close(db);
    free(v);
    mt_gen_close(g);
}

/* What the current templates make of a stored variant, without walking the
 * family: the same variant for a current one; refusals named. */
static void test_resolve(void **state)
{
    (void)state;
    mt_gen *g = mt_test_open_templates();
    size_t n = 0;
    mt_variant *v = mt_test_sm90a_defaults(g, "grouped_gemm_sm90", &n);
    assert_true(n > 0);
    mt_variant out, bad = v[0];
    assert_int_equal(mt_gen_resolve(g, &v[0], &out), MT_OK);
    char a[4096], b[4096];
    assert_int_equal(mt_variant_format(&v[0], a, sizeof a), MT_OK);
    assert_int_equal(mt_variant_format(&out, b, sizeof b), MT_OK);
    assert_string_equal(a, b);
    bad.template_version = 1;
    assert_int_equal(mt_gen_resolve(g, &bad, &out), MT_ERR_INCOMPATIBLE);
    assert_non_null(strstr(mt_gen_errmsg(g), "version 1"));
    bad = v[0];
    mt_strlcpy(bad.name, "mtk_grouped_gemm_sm90_renamed", sizeof bad.name);
    assert_int_equal(mt_gen_resolve(g, &bad, &out), MT_ERR_INCOMPATIBLE);
    assert_non_null(strstr(mt_gen_errmsg(g), "does not match its parameters"));
    bad = v[0];
    mt_strlcpy(bad.arch, "sm_99z", sizeof bad.arch);
    assert_int_equal(mt_gen_resolve(g, &bad, &out), MT_ERR_UNSUPPORTED);
    bad = v[0];
    mt_strlcpy(bad.family, "no_such_family", sizeof bad.family);
    assert_int_equal(mt_gen_resolve(g, &bad, &out), MT_ERR_NOT_FOUND);
    free(v);
    mt_gen_close(g);
}

typedef struct sku_scan {
    const char *file;   /* the file's name */
    int entries, foreign;
    char first_foreign[MT_DB_SKU_MAX];
} sku_scan;

static int scan_sku(const mt_db_entry *e, void *ctx)
{
    sku_scan *s = ctx;
    char name[MT_DB_SKU_MAX + 8];
    mt_db_shipped_name(e->key.sku, name, sizeof name);
    s->entries++;
    if (strcmp(name, s->file) && !s->foreign++)
        mt_strlcpy(s->first_foreign, e->key.sku, sizeof s->first_foreign);
    return 0;
}

/* A shipped database is in rollback-journal mode, verifies clean, holds
 * entries of the SKU its name says and of no other (the runtime trusts the
 * SKU, and a card looks its file up by name), and holds no kernel that a
 * refresh would bring up to date: a template edit that kept a shipped
 * kernel's source must come with `moetune db refresh db/tuned/FILE.db`, or
 * the runtime reports the kernel as made from other templates. Kernels
 * whose source changed are counted, not failed: they wait for tuning on the
 * GPU. And no entry's GEMM2 sums by atomics (results reproducible run to
 * run; `moetune db deterministic` takes them out). */
static void check_shipped_database(mt_gen *g, const char *dir, const char *file)
{
    char path[900];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    /* Rollback-journal mode (header bytes 18 and 19 are 1; WAL writes 2),
     * so that it opens read-only from a read-only install folder
     * (db/tuned/README.md). */
    FILE *f = fopen(path, "rb");
    unsigned char head[20] = {0};
    assert_non_null(f);
    assert_int_equal(fread(head, 1, sizeof head, f), sizeof head);
    fclose(f);
    if (head[18] != 1 || head[19] != 1)
        fail_msg("%s is in WAL mode: run sqlite3 on it with \"PRAGMA wal_checkpoint(TRUNCATE); "
                 "PRAGMA journal_mode=DELETE\"", path);
    mt_db *db = mt_fix_open_db(path, MT_DB_READONLY);
    sku_scan k = {.file = file};
    assert_int_equal(mt_db_foreach_entry(db, NULL, scan_sku, &k), MT_OK);
    if (k.entries == 0 || k.foreign)
        fail_msg("%s: %d entries, %d of them of a SKU whose file is not %s (first: '%s')", path,
                 k.entries, k.foreign, file, k.first_foreign);
    mt_refresh_stats s;
    lines l = {0};
    char msg[1024];
    assert_int_equal(mt_refresh_kernels(db, g, MT_REFRESH_DRY_RUN, keep, &l, &s, msg, sizeof msg), MT_OK);
    printf("%s: %d entries, %d kernels current, %d to refresh, %d changed, %d of older template "
           "versions\n", path, k.entries, s.current, s.refreshed, s.changed, s.unknown);
    if (s.refreshed)
        fail_msg("%d kernel(s) of %s are what the current templates generate but carry an "
                 "older template hash: run `moetune db refresh %s`", s.refreshed, path, path);
    int problems = -1;
    assert_int_equal(mt_db_verify(db, NULL, NULL, &problems), MT_OK);
    mt_deterministic_stats d;
    assert_int_equal(mt_make_deterministic(db, g, 1, NULL, NULL, &d, msg, sizeof msg), MT_OK);
    if (d.entries)
        fail_msg("%d entries of %s add GEMM2's rows by atomics: run `moetune db deterministic %s`",
                 d.entries, path, path);
    mt_db_close(db);
}

static int is_shipped_file(const struct dirent *e)
{
    const size_t len = strlen(e->d_name);
    return len > 3 && !strcmp(e->d_name + len - 3, ".db");
}

/* Every database in db/tuned/ (one per GPU SKU, in name order), the H200's
 * among them. */
static void test_shipped_databases(void **state)
{
    (void)state;
    const char *tdir = getenv("MT_TEMPLATE_DIR");
    if (!tdir || !*tdir)
        fail_msg("MT_TEMPLATE_DIR is not set (CTest sets it to the source templates/ folder)");
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/../db/tuned", tdir);
    snprintf(path, sizeof path, "%s/nvidia-h200.db", dir);
    if (access(path, R_OK) != 0)
        fail_msg("no shipped database at %s", path);
    struct dirent **files = NULL;
    const int n = scandir(dir, &files, is_shipped_file, alphasort);
    assert_true(n >= 1);
    mt_gen *g = mt_test_open_templates();
    for (int i = 0; i < n; i++) {
        check_shipped_database(g, dir, files[i]->d_name);
        free(files[i]);
    }
    free(files);
    mt_gen_close(g);
    printf("shipped databases checked: %d\n", n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refresh_kernels),
        cmocka_unit_test(test_refresh_by_code),
        cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_refresh_added_parameter),
        cmocka_unit_test(test_shipped_databases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
