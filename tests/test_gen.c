/*
 * Tests of the generator on the test templates in tests/data/templates/:
 * enumeration and pruning, defaults and filters, the sandbox and its limits,
 * template validation, amalgamation, NVRTC determinism and the compile cache.
 * The real templates are tested by tests/test_gen_builtin.c.
 */
#define _DEFAULT_SOURCE
#include "tests/support.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "moetune/gen.h"

#define DATA MT_TEMPLATE_DIR_BUILD "/../tests/data/templates"

/* A generator over one test folder only (no built-in templates). */
static mt_status open_dir(const char *dir, const char *cache, mt_gen **g)
{
    const char *dirs[] = {dir};
    mt_gen_config cfg = {.template_dirs = dirs, .ntemplate_dirs = 1, .no_builtin = 1,
                         .cache_dir = cache, .no_cache = cache == NULL, .jobs = 2,
                         .lua_instr_budget = 2000000};
    return mt_gen_open(&cfg, g);
}

static mt_gen *open_ok(const char *dir, const char *cache)
{
    mt_gen *g = NULL;
    mt_status st = open_dir(dir, cache, &g);
    if (st)
        fprintf(stderr, "open %s: %s\n", dir, mt_gen_errmsg(g));
    assert_int_equal(st, MT_OK);
    return g;
}

/* The toy family's rules, restated in C (see good/toy.lua). */
static const int toy_blocks[] = {32, 64, 128, 256}, toy_stages[] = {1, 2, 3};

static int toy_default(int d, int b, int s)
{
    return toy_blocks[b] == 64 || (d == 1 && toy_stages[s] == 1);
}

static void toy_expect(int smem_limit, int defaults_only, int *enumerated, int *valid,
                       int *smem_pruned, int *f16_pruned)
{
    *enumerated = *valid = *smem_pruned = *f16_pruned = 0;
    for (int d = 0; d < 2; d++)
        for (int b = 0; b < 4; b++)
            for (int s = 0; s < 3; s++) {
                if (defaults_only && !toy_default(d, b, s))
                    continue;
                ++*enumerated;
                if (toy_blocks[b] * toy_stages[s] * 256 > smem_limit)
                    ++*smem_pruned;
                else if (d == 1 && toy_blocks[b] == 32)
                    ++*f16_pruned;
                else
                    ++*valid;
            }
}

static int reason_count(const mt_prune_report *r, const char *reason)
{
    for (int i = 0; i < r->nreasons; i++)
        if (strcmp(r->reasons[i].reason, reason) == 0)
            return r->reasons[i].count;
    return 0;
}

static void test_enumerate_counts(void **state)
{
    (void)state;
    mt_gen *g = open_ok(DATA "/good", NULL);
    assert_int_equal(mt_gen_family_count(g), 1);
    assert_string_equal(mt_gen_family_name(g, 0), "toy");
    struct { const char *arch; int smem; } archs[] = {{"sm_86", 101376}, {"sm_90a", 232448},
                                                       {"sm_80", 166912}};
    for (size_t a = 0; a < MT_ARRAY_LEN(archs); a++)
        for (int defaults = 0; defaults <= 1; defaults++) {
            mt_gen_filter f = {.family = "toy", .arch = archs[a].arch, .defaults_only = defaults};
            mt_variant *v = NULL;
            size_t n = 0;
            mt_prune_report r;
            assert_int_equal(mt_gen_enumerate(g, &f, &v, &n, &r), MT_OK);
            int e, ok, ps, pf;
            toy_expect(archs[a].smem, defaults, &e, &ok, &ps, &pf);
            assert_int_equal(r.enumerated, e);
            assert_int_equal(r.valid, ok);
            assert_int_equal((int)n, ok);
            assert_int_equal(reason_count(&r, "shared memory exceeds the target"), ps);
            assert_int_equal(reason_count(&r, "f16 needs BLOCK >= 64"), pf);
            assert_int_equal(r.nreasons, (ps > 0) + (pf > 0));
            /* Typed variants: params in declaration order, launch, name. */
            for (size_t i = 0; i < n; i++) {
                assert_string_equal(v[i].family, "toy");
                assert_string_equal(v[i].arch, archs[a].arch);
                assert_int_equal(v[i].template_version, 1);
                assert_int_equal(v[i].nparams, 3);
                assert_string_equal(v[i].params[1].name, "BLOCK");
                int64_t blk = mt_variant_int(&v[i], "BLOCK", -1),
                        stg = mt_variant_int(&v[i], "STAGES", -1);
                assert_int_equal(v[i].threads, blk);
                assert_int_equal(v[i].smem_bytes, blk * stg * 256);
                char want[64];
                snprintf(want, sizeof want, "mtk_toy_%s_b%d_s%d", mt_variant_get(&v[i], "dtype"),
                         (int)blk, (int)stg);
                assert_string_equal(v[i].name, want);
            }
            /* Deterministic order: the first parameter turns slowest. */
            if (!defaults && n > 1) {
                assert_string_equal(v[0].name, "mtk_toy_f32_b32_s1");
                assert_string_equal(v[1].name, "mtk_toy_f32_b32_s2");
            }
            free(v);
        }
    mt_gen_close(g);
}

typedef struct walk {
    const mt_variant *want;   /* what mt_gen_enumerate listed */
    size_t seen, stop_after;
} walk;

static int walk_one(const mt_variant *v, void *ctx)
{
    walk *w = ctx;
    assert_string_equal(v->name, w->want[w->seen].name);
    assert_int_equal(v->smem_bytes, w->want[w->seen].smem_bytes);
    return ++w->seen == w->stop_after;
}

/* mt_gen_enumerate_each hands out the variants mt_gen_enumerate lists, in
 * its order and with the same report, and stops when asked. */
static void test_enumerate_each(void **state)
{
    (void)state;
    mt_gen *g = open_ok(DATA "/good", NULL);
    mt_gen_filter f = {.family = "toy", .arch = "sm_90a"};
    mt_variant *v = NULL;
    size_t n = 0;
    mt_prune_report r1, r2;
    assert_int_equal(mt_gen_enumerate(g, &f, &v, &n, &r1), MT_OK);
    assert_true(n > 3);
    walk w = {.want = v, .stop_after = (size_t)-1};
    assert_int_equal(mt_gen_enumerate_each(g, &f, walk_one, &w, &r2), MT_OK);
    assert_int_equal(w.seen, n);
    assert_int_equal(r2.enumerated, r1.enumerated);
    assert_int_equal(r2.valid, r1.valid);
    w = (walk){.want = v, .stop_after = 3};
    f.family = NULL;   /* every family: stopping ends the walk over families too */
    assert_int_equal(mt_gen_enumerate_each(g, &f, walk_one, &w, NULL), MT_OK);
    assert_int_equal(w.seen, 3);
    assert_int_equal(mt_gen_enumerate_each(g, &f, NULL, NULL, NULL), MT_ERR_INVALID_ARG);
    /* A filter no family knows is refused before any variant is handed out. */
    mt_gen_filter bad = {.arch = "sm_90a", .nparams = 1};
    bad.params[0].name = "NO_SUCH", bad.params[0].value = "1";
    w = (walk){.want = v, .stop_after = (size_t)-1};
    assert_int_equal(mt_gen_enumerate_each(g, &bad, walk_one, &w, NULL), MT_ERR_INVALID_ARG);
    assert_int_equal(w.seen, 0);
    bad.params[0].name = "BLOCK", bad.params[0].value = "12345";
    assert_int_equal(mt_gen_enumerate_each(g, &bad, walk_one, &w, NULL), MT_ERR_INVALID_ARG);
    assert_int_equal(w.seen, 0);
    free(v);
    mt_gen_close(g);
}

static void test_filters(void **state)
{
    (void)state;
    mt_gen *g = open_ok(DATA "/good", NULL);
    mt_variant *v = NULL;
    size_t n = 0;
    mt_gen_filter f = {.family = "toy", .arch = "sm_90a", .nparams = 3};
    f.params[0].name = "dtype";
    f.params[0].value = "f16";
    f.params[1].name = "BLOCK";
    f.params[1].value = "64";
    f.params[2].name = "BLOCK";
    f.params[2].value = "128";
    assert_int_equal(mt_gen_enumerate(g, &f, &v, &n, NULL), MT_OK);
    assert_int_equal((int)n, 2 * 3);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(mt_variant_get(&v[i], "dtype"), "f16");
    free(v);

    f.nparams = 1;
    f.params[0].name = "BLOCK";
    f.params[0].value = "48";
    assert_int_equal(mt_gen_enumerate(g, &f, &v, &n, NULL), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(mt_gen_errmsg(g), "BLOCK"));
    assert_non_null(strstr(mt_gen_errmsg(g), "48"));
    /* lenient_values: the same filter selects nothing (asking several families). */
    f.lenient_values = 1;
    assert_int_equal(mt_gen_enumerate(g, &f, &v, &n, NULL), MT_OK);
    assert_int_equal((int)n, 0);
    free(v);
    f.params[0].value = "64";
    assert_int_equal(mt_gen_enumerate(g, &f, &v, &n, NULL), MT_OK);
    assert_int_equal((int)n, 2 * 3);   /* BLOCK 64 only: both dtypes x its 3 other points */
    free(v);
    f.lenient_values = 0;
    f.params[0].value = "48";
    f.params[0].name = "BLOK";
    assert_int_equal(mt_gen_enumerate(g, &f, &v, &n, NULL), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(mt_gen_errmsg(g), "BLOK"));
    /* Every family: an undeclared parameter is an error only if no family has it. */
    f.family = NULL;
    assert_int_equal(mt_gen_enumerate(g, &f, &v, &n, NULL), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(mt_gen_errmsg(g), "BLOK"));
    f.arch = "sm_75";
    f.nparams = 0;
    assert_int_equal(mt_gen_enumerate(g, &f, &v, &n, NULL), MT_ERR_UNSUPPORTED);
    assert_non_null(strstr(mt_gen_errmsg(g), "sm_75"));
    /* compute_90 is known and uses the sm_90 limits. */
    f.arch = "compute_90";
    assert_int_equal(mt_gen_enumerate(g, &f, &v, &n, NULL), MT_OK);
    assert_true(n > 0);
    assert_string_equal(v[0].arch, "compute_90");
    mt_variant found;
    assert_int_equal(mt_gen_find(g, v[n - 1].name, "compute_90", &found), MT_OK);
    assert_memory_equal(&found, &v[n - 1], sizeof found);
    assert_int_equal(mt_gen_find(g, "mtk_toy_f16_b32_s1", "sm_90a", &found), MT_ERR_NOT_FOUND);
    free(v);
    mt_gen_close(g);
}

static void expect_open_error(const char *dir, mt_status want, const char *const *needles)
{
    mt_gen *g = NULL;
    mt_status st = open_dir(dir, NULL, &g);
    const char *msg = mt_gen_errmsg(g);
    if (st != want)
        fprintf(stderr, "%s: status %d, message: %s\n", dir, st, msg);
    assert_int_equal(st, want);
    for (const char *const *n = needles; *n; n++) {
        if (!strstr(msg, *n))
            fprintf(stderr, "message lacks '%s': %s\n", *n, msg);
        assert_non_null(strstr(msg, *n));
    }
    mt_gen_close(g);
}

/* A parameter's omit_in_name value stays out of the kernel names: the
 * points that existed before the parameter keep their names, the others
 * carry the parameter like any other. */
static void test_omit_in_name(void **state)
{
    (void)state;
    mt_gen *g = open_ok(DATA "/omit", NULL);
    mt_gen_filter f = {.family = "renamed", .arch = "sm_90a"};
    mt_variant *v = NULL;
    size_t n = 0;
    assert_int_equal(mt_gen_enumerate(g, &f, &v, &n, NULL), MT_OK);
    assert_int_equal((int)n, 4);
    static const char *const want[] = {"mtk_renamed_b32", "mtk_renamed_b32_spon", "mtk_renamed_b64",
                                       "mtk_renamed_b64_spon"};
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(v[i].name, want[i]);
        assert_string_equal(mt_variant_get(&v[i], "SPLIT"), i % 2 ? "on" : "off");
    }
    free(v);
    mt_gen_close(g);
}

/* The gated family's reasons, and its rules restated (see
 * gated/gated.lua): a point's reason is the first refusal in declaration
 * order, EXTRA's only_if, then TAIL's, then valid(); -1 for a valid point. */
static const char *const gated_reasons[] = {"EXTRA: kind b only", "EXTRA: WIDTH 2 or more",
                                            "TAIL: only 0 here (its only_if)",
                                            "EXTRA max: WIDTH 2"};

static int gated_reason(int kind, int width, int extra, int tail)
{
    static const int widths[] = {1, 2, 4};
    if (extra != 0 && kind != 1)
        return 0;
    if (extra != 0 && widths[width] < 2)
        return 1;
    if (tail != 0 && extra == 0)
        return 2;
    if (extra == 2 && widths[width] == 4)
        return 3;
    return -1;
}

/* only_if: a walk that skips a parameter's values past its first where
 * its only_if refuses counts those points as pruned for its reason, as if
 * it had asked each one, and lists the valid points in the order of the
 * full walk; a lookup by name asks the same rules. archs: a target the
 * family does not build for refuses every point, walked or looked up. */
static void test_only_if_and_archs(void **state)
{
    (void)state;
    static const char *const kinds[] = {"a", "b"}, *const widths[] = {"1", "2", "4"},
                             *const extras[] = {"off", "on", "max"}, *const tails[] = {"0", "1"};
    static const struct { const char *name, *value; int defaults; } cases[] = {
        {NULL, NULL, 0}, {"kind", "a", 0}, {"EXTRA", "on", 0}, {"TAIL", "1", 0}, {NULL, NULL, 1}};
    mt_gen *g = open_ok(DATA "/gated", NULL);
    for (size_t c = 0; c < MT_ARRAY_LEN(cases); c++) {
        mt_gen_filter f = {.family = "gated", .arch = "sm_90a", .defaults_only = cases[c].defaults};
        if (cases[c].name) {
            f.nparams = 1;
            f.params[0].name = cases[c].name;
            f.params[0].value = cases[c].value;
        }
        mt_variant *v = NULL;
        size_t n = 0;
        mt_prune_report r;
        assert_int_equal(mt_gen_enumerate(g, &f, &v, &n, &r), MT_OK);
        int enumerated = 0, valid = 0, counts[MT_ARRAY_LEN(gated_reasons)] = {0};
        for (int k = 0; k < 2; k++)
            for (int w = 0; w < 3; w++)
                for (int e = 0; e < 3; e++)
                    for (int t = 0; t < 2; t++) {
                        const char *value[] = {kinds[k], widths[w], extras[e], tails[t]};
                        const char *names[] = {"kind", "WIDTH", "EXTRA", "TAIL"};
                        int admitted = !cases[c].defaults || w == 1;
                        for (int p = 0; p < 4 && cases[c].name; p++)
                            if (!strcmp(names[p], cases[c].name))
                                admitted &= !strcmp(value[p], cases[c].value);
                        if (!admitted)
                            continue;
                        enumerated++;
                        const int why = gated_reason(k, w, e, t);
                        if (why >= 0) {
                            counts[why]++;
                            continue;
                        }
                        char want[64];
                        snprintf(want, sizeof want, "mtk_gated_%s_w%s_e%s%s", kinds[k], widths[w],
                                 extras[e], t ? "_t1" : "");
                        assert_true((size_t)valid < n);
                        assert_string_equal(v[valid++].name, want);
                    }
        assert_int_equal(r.enumerated, enumerated);
        assert_int_equal(r.valid, valid);
        assert_int_equal((int)n, valid);
        int distinct = 0;
        for (size_t i = 0; i < MT_ARRAY_LEN(gated_reasons); i++) {
            assert_int_equal(reason_count(&r, gated_reasons[i]), counts[i]);
            distinct += counts[i] > 0;
        }
        assert_int_equal(r.nreasons, distinct);
        free(v);
    }
    mt_variant v;
    assert_int_equal(mt_gen_find(g, "mtk_gated_b_w2_eon_t1", "sm_90a", &v), MT_OK);
    assert_int_equal(mt_gen_find(g, "mtk_gated_a_w2_eon", "sm_90a", &v), MT_ERR_NOT_FOUND);
    assert_non_null(strstr(mt_gen_errmsg(g), "EXTRA: kind b only"));
    assert_int_equal(mt_gen_find(g, "mtk_gated_b_w2_eoff_t1", "sm_90a", &v), MT_ERR_NOT_FOUND);
    assert_non_null(strstr(mt_gen_errmsg(g), "TAIL: only 0 here (its only_if)"));
    for (int defaults = 0; defaults <= 1; defaults++) {
        mt_gen_filter f = {.family = "gated", .arch = "sm_86", .defaults_only = defaults};
        mt_variant *none = NULL;
        size_t n = 1;
        mt_prune_report r;
        assert_int_equal(mt_gen_enumerate(g, &f, &none, &n, &r), MT_OK);
        assert_int_equal((int)n, 0);
        assert_int_equal(r.enumerated, defaults ? 12 : 36);
        assert_int_equal(r.nreasons, 1);
        assert_int_equal(reason_count(&r, "needs sm_80 or sm_90a"), r.enumerated);
        free(none);
    }
    assert_int_equal(mt_gen_find(g, "mtk_gated_b_w2_eon_t1", "sm_86", &v), MT_ERR_NOT_FOUND);
    assert_non_null(strstr(mt_gen_errmsg(g), "needs sm_80 or sm_90a"));
    mt_gen_close(g);

    /* An only_if that reads a parameter declared after its own: a template
     * error naming both, from a walk and from a lookup. */
    g = open_ok(DATA "/bad_gate", NULL);
    mt_gen_filter f = {.family = "bad_gate", .arch = "sm_90a"};
    mt_variant *list = NULL;
    size_t n = 0;
    assert_int_equal(mt_gen_enumerate(g, &f, &list, &n, NULL), MT_ERR_TEMPLATE);
    assert_null(list);
    assert_non_null(strstr(mt_gen_errmsg(g), "only_if of parameter 'B' reads 'C'"));
    assert_int_equal(mt_gen_find(g, "mtk_bad_gate_a1_b1_c0", "sm_90a", &v), MT_ERR_TEMPLATE);
    assert_non_null(strstr(mt_gen_errmsg(g), "only_if of parameter 'B' reads 'C'"));
    mt_gen_close(g);
}

static void test_bad_templates(void **state)
{
    (void)state;
    unlink("/tmp/moetune-evil-was-here");
    expect_open_error(DATA "/bad_syntax", MT_ERR_TEMPLATE,
                      (const char *[]){"bad_syntax.lua:3:", NULL});
    expect_open_error(DATA "/bad_toplevel", MT_ERR_TEMPLATE,
                      (const char *[]){"bad_toplevel.lua:2:", "io", NULL});
    assert_int_not_equal(access("/tmp/moetune-evil-was-here", F_OK), 0);
    expect_open_error(DATA "/bad_default", MT_ERR_TEMPLATE,
                      (const char *[]){"bad_default", "BLOCK_M", "48", NULL});
    expect_open_error(DATA "/bad_values", MT_ERR_TEMPLATE,
                      (const char *[]){"bad_values", "SPLIT_K", "values[3]", NULL});
    expect_open_error(DATA "/bad_omit", MT_ERR_TEMPLATE,
                      (const char *[]){"bad_omit", "SPLIT", "omit_in_name", NULL});
    expect_open_error(DATA "/bad_archs", MT_ERR_TEMPLATE,
                      (const char *[]){"bad_archs", "archs[2]", "not a known target", NULL});
    expect_open_error(DATA "/bad_gate_omit", MT_ERR_TEMPLATE,
                      (const char *[]){"bad_gate_omit", "'B'", "omit_in_name must be its first",
                                       NULL});
    expect_open_error(DATA "/does_not_exist", MT_ERR_IO,
                      (const char *[]){"does_not_exist", NULL});
    mt_gen_close(NULL);
}

/* Template `family` with `nparams` parameters P1.. of 64 values each
 * (abbrev p<i>), its body's other fields `extra`, into folder dir. */
static void write_wide_template(const char *dir, const char *family, int nparams, const char *extra)
{
    char path[1200], lua[8192];
    int n = snprintf(lua, sizeof lua, "local v = {} for i = 1, 64 do v[i] = i end\n"
                     "return { family = '%s', version = 1, params = {\n", family);
    for (int p = 1; p <= nparams; p++)
        n += snprintf(lua + n, sizeof lua - (size_t)n, "  { name = 'P%d', abbrev = 'p%d', values = v },\n",
                      p, p);
    snprintf(lua + n, sizeof lua - (size_t)n,
             "}, default_set = { {} }, %s\n"
             "  launch = function(p, t) return { threads = 32, smem = 0 } end,\n"
             "  render = function(p, name) return 'extern \"C\" __global__ void ' .. name .. '() {}' end }\n",
             extra);
    snprintf(path, sizeof path, "%s/%s.lua", dir, family);
    assert_int_equal(mt_file_write_atomic(path, lua, strlen(lua), NULL, 0), MT_OK);
}

static const char *new_folder(const char *tmp, const char *name)
{
    static char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    assert_int_equal(mkdir(dir, 0755), 0);
    return dir;
}

static int count_variant(const mt_variant *v, void *ctx)
{
    (void)v;
    ++*(int *)ctx;
    return 0;
}

/* What a template may not do to the generator: give two points one name,
 * carry a family name that variants cut short, be a device, or ask for a
 * walk (or a walk of its defaults) too large to finish; and the counts of
 * what is pruned unwalked hold at INT_MAX instead of going negative. */
static void test_template_limits(void **state)
{
    (void)state;
    const char *tmp = mt_test_tmpdir("gen-limits");
    char path[1200];
    const char *dir = new_folder(tmp, "clash");
    static const char clash[] =
        "return { family = 'x', version = 1,\n"
        "  params = { { name = 'A', abbrev = 'a', values = { 0, 1 }, omit_in_name = 0 },\n"
        "             { name = 'B', abbrev = 'a', values = { 0, 1 } } },\n"
        "  default_set = { {} }, launch = function(p, t) return { threads = 32, smem = 0 } end,\n"
        "  render = function(p, name) return '' end }\n";
    snprintf(path, sizeof path, "%s/x.lua", dir);
    assert_int_equal(mt_file_write_atomic(path, clash, strlen(clash), NULL, 0), MT_OK);
    expect_open_error(dir, MT_ERR_TEMPLATE, (const char *[]){"'A' and 'B'", "'_a0'", NULL});

    dir = new_folder(tmp, "long");
    write_wide_template(dir, "abcdefghij_abcdefghij_abcdefghij_abcdefghij_abcdefghij", 1, "");
    expect_open_error(dir, MT_ERR_TEMPLATE, (const char *[]){"has 54 characters, at most 47", NULL});

    dir = new_folder(tmp, "device");
    snprintf(path, sizeof path, "%s/x.lua", dir);
    assert_int_equal(symlink("/dev/zero", path), 0);
    expect_open_error(dir, MT_ERR_TEMPLATE, (const char *[]){"not a regular file", NULL});

    /* 64^8 points, every one a default; a small family named first. */
    dir = new_folder(tmp, "huge");
    write_wide_template(dir, "aaa", 1, "");
    write_wide_template(dir, "zzz", 8, "");
    mt_gen *g = open_ok(dir, NULL);
    assert_string_equal(mt_gen_family_name(g, 0), "aaa");
    mt_gen_filter f = {.arch = "sm_90a", .defaults_only = 1};
    int seen = 0;
    assert_int_equal(mt_gen_enumerate_each(g, &f, count_variant, &seen, NULL), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(mt_gen_errmsg(g), "family zzz has 281474976710656 default points"));
    assert_int_equal(seen, 0);   /* refused before the walk of aaa handed out its 64 */
    f.defaults_only = 0;
    assert_int_equal(mt_gen_enumerate_each(g, &f, count_variant, &seen, NULL), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(mt_gen_errmsg(g), "family zzz has 281474976710656 points"));
    assert_int_equal(seen, 0);
    /* A listing (skip_over_cap) leaves zzz out, names it, walks aaa;
     * zzz named by the filter is still refused. */
    mt_prune_report r;
    f.skip_over_cap = 1;
    assert_int_equal(mt_gen_enumerate_each(g, &f, count_variant, &seen, &r), MT_OK);
    assert_int_equal(seen, 64);
    assert_int_equal(r.valid, 64);
    assert_int_equal(r.nunwalked, 1);
    assert_string_equal(r.unwalked[0].family, "zzz");
    assert_true(r.unwalked[0].points == 281474976710656.0);
    f.family = "zzz";
    assert_int_equal(mt_gen_enumerate_each(g, &f, count_variant, &seen, &r), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(mt_gen_errmsg(g), "family zzz has 281474976710656 points"));
    f.skip_over_cap = 0;
    seen = 0;
    f.family = "aaa";
    assert_int_equal(mt_gen_enumerate_each(g, &f, count_variant, &seen, NULL), MT_OK);
    assert_int_equal(seen, 64);
    mt_gen_close(g);

    /* Two such families built for sm_90a only, counted unwalked for sm_80. */
    dir = new_folder(tmp, "counted");
    write_wide_template(dir, "aaa", 8, "archs = { 'sm_90a' },");
    write_wide_template(dir, "zzz", 8, "archs = { 'sm_90a' },");
    g = open_ok(dir, NULL);
    f = (mt_gen_filter){.arch = "sm_80"};
    assert_int_equal(mt_gen_enumerate_each(g, &f, count_variant, &seen, &r), MT_OK);
    assert_int_equal(r.enumerated, INT_MAX);
    assert_int_equal(r.valid, 0);
    assert_int_equal(r.nreasons, 2);
    assert_int_equal(r.reasons[0].count, INT_MAX);
    mt_gen_close(g);
}

/* The variant of the evil family doing `what`, enumerated with a filter. */
static mt_status evil_variant(mt_gen *g, const char *what, mt_variant *out)
{
    mt_gen_filter f = {.family = "evil", .arch = "sm_90a", .nparams = 1};
    f.params[0].name = "what";
    f.params[0].value = what;
    mt_variant *v = NULL;
    size_t n = 0;
    mt_status st = mt_gen_enumerate(g, &f, &v, &n, NULL);
    if (!st) {
        assert_int_equal((int)n, 1);
        *out = v[0];
    }
    free(v);
    return st;
}

static void test_sandbox(void **state)
{
    (void)state;
    unlink("/tmp/moetune-evil-was-here");
    mt_gen *g = open_ok(DATA "/evil", NULL);
    mt_variant v;
    char *src = NULL;
    /* Forbidden functions: a clear error naming the template and its line. */
    static const struct { const char *what, *needle; } cases[] = {
        {"os", "'os'"}, {"io", "'io'"}, {"require", "'require'"}, {"load", "'load'"},
        {"dofile", "'dofile'"}, {"dump", "dump"}, {"random", "random"}, {"debug", "'debug'"},
        {"pwrite", "read-only"}, {"undeclared", "BLOCK_M"}, {"nonstring", "must return a string"},
        {"match", "'find'"}, {"gsubmethod", "'gsub'"}, {"finalizer", "__gc"},
        {"upper", "instruction budget"},
    };
    for (size_t i = 0; i < MT_ARRAY_LEN(cases); i++) {
        assert_int_equal(evil_variant(g, cases[i].what, &v), MT_OK);
        mt_status st = mt_gen_source(g, &v, &src, NULL);
        const char *msg = mt_gen_errmsg(g);
        if (st != MT_ERR_TEMPLATE || !strstr(msg, cases[i].needle) || !strstr(msg, "evil"))
            fprintf(stderr, "case %s: %d %s\n", cases[i].what, st, msg);
        assert_int_equal(st, MT_ERR_TEMPLATE);
        assert_null(src);
        assert_non_null(strstr(msg, cases[i].needle));
        if (strcmp(cases[i].what, "nonstring") != 0)
            assert_non_null(strstr(msg, "evil.lua:"));
    }
    assert_int_not_equal(access("/tmp/moetune-evil-was-here", F_OK), 0);

    /* Limits: endless loops (even inside pcall) and memory hogs. */
    assert_int_equal(evil_variant(g, "loop", &v), MT_ERR_TEMPLATE);
    assert_non_null(strstr(mt_gen_errmsg(g), "instruction budget"));
    assert_null(strstr(mt_gen_errmsg(g), "invalid option"));
    assert_non_null(strstr(mt_gen_errmsg(g), "(2000000 instructions)"));
    assert_non_null(strstr(mt_gen_errmsg(g), "evil.lua:"));
    assert_int_equal(evil_variant(g, "pcallloop", &v), MT_ERR_TEMPLATE);
    assert_non_null(strstr(mt_gen_errmsg(g), "instruction budget"));
    assert_int_equal(evil_variant(g, "hog", &v), MT_OK);
    assert_int_equal(mt_gen_source(g, &v, &src, NULL), MT_ERR_TEMPLATE);
    assert_non_null(strstr(mt_gen_errmsg(g), "memory limit"));
    assert_int_equal(evil_variant(g, "pcallhog", &v), MT_OK);
    assert_int_equal(mt_gen_source(g, &v, &src, NULL), MT_ERR_TEMPLATE);
    assert_non_null(strstr(mt_gen_errmsg(g), "memory limit"));
    assert_int_equal(evil_variant(g, "badlaunch", &v), MT_ERR_TEMPLATE);
    assert_non_null(strstr(mt_gen_errmsg(g), "threads = 4096"));

    /* The state still works after all that. */
    assert_int_equal(evil_variant(g, "ok", &v), MT_OK);
    size_t len = 0;
    assert_int_equal(mt_gen_source(g, &v, &src, &len), MT_OK);
    assert_non_null(strstr(src, "mtk_evil_ok"));
    assert_int_equal(len, strlen(src));
    free(src);
    /* A variant from elsewhere must agree with the loaded template. */
    v.template_version = 2;
    assert_int_equal(mt_gen_source(g, &v, &src, NULL), MT_ERR_INCOMPATIBLE);
    v.template_version = 1;
    mt_strlcpy(v.params[0].value, "nope", sizeof v.params[0].value);
    assert_int_equal(mt_gen_source(g, &v, &src, NULL), MT_ERR_INCOMPATIBLE);
    mt_gen_close(g);
}

static void test_amalgamation(void **state)
{
    (void)state;
    mt_gen *g = open_ok(DATA "/good", NULL);
    mt_variant v;
    assert_int_equal(mt_gen_find(g, "mtk_toy_f16_b64_s2", "sm_90a", &v), MT_OK);
    char *src = NULL;
    assert_int_equal(mt_gen_source(g, &v, &src, NULL), MT_OK);
    /* Quoted includes are inlined once, with #line; angle includes stay. */
    assert_null(strstr(src, "#include \"toy"));
    assert_non_null(strstr(src, "#include <cuda_fp16.h>"));
    assert_non_null(strstr(src, "#line 1 \"toy.cuh\""));
    assert_non_null(strstr(src, "#line 1 \"toy_math.cuh\""));
    const char *first = strstr(src, "toy_scale(float x)");
    assert_non_null(first);
    assert_null(strstr(first + 1, "toy_scale(float x)"));
    assert_non_null(strstr(src, "extern \"C\" __global__ void mtk_toy_f16_b64_s2(__half *out)"));
    assert_non_null(strstr(src, "toy_body<__half, 64, 2>"));
    free(src);
    char h1[65], h2[65];
    assert_int_equal(mt_gen_template_hash(g, "toy", h1), MT_OK);
    assert_int_equal(mt_gen_template_hash(g, "toy", h2), MT_OK);
    assert_string_equal(h1, h2);
    assert_int_equal(strlen(h1), 64);
    assert_int_equal(mt_gen_template_hash(g, "nope", h1), MT_ERR_NOT_FOUND);
    mt_gen_close(g);
}

/* What reaches NVRTC reads no file outside the template folders but the
 * toolkit headers it may name: a quoted include that leads out of the
 * folders (an absolute path, "..", a link inside that points out) is not
 * found, and every other include-like form (angle brackets with a path,
 * the "%:" spelling, a continued line, a macro, a comment ahead of the
 * "#", __has_include) is refused before NVRTC could open the file; nothing
 * of the outside file reaches the source. A header inside, and
 * <stdint.h>, still serve. */
static void test_includes_stay_inside(void **state)
{
    (void)state;
    const char *tmp = mt_test_tmpdir("gen-includes");
    char tpl[1024], outside[1024], path[1200], lua[4096];
    snprintf(tpl, sizeof tpl, "%s/tpl", tmp);
    snprintf(outside, sizeof outside, "%s/outside.h", tmp);
    assert_int_equal(mkdir(tpl, 0755), 0);
    static const char secret[] = "int outside_secret = 42;\n";
    assert_int_equal(mt_file_write_atomic(outside, secret, strlen(secret), NULL, 0), MT_OK);
    snprintf(path, sizeof path, "%s/inside.h", tpl);
    assert_int_equal(mt_file_write_atomic(path, "int inside_ok;\n", 15, NULL, 0), MT_OK);
    snprintf(path, sizeof path, "%s/link.h", tpl);
    assert_int_equal(symlink(outside, path), 0);
    /* Lua long strings: the directives as the template writes them. */
    snprintf(lua, sizeof lua,
             "local X = [==[%s]==]\n"
             "local INC = {\n"
             "  '#include \"' .. X .. '\"',\n"
             "  '#include \"../outside.h\"',\n"
             "  '#include \"link.h\"',\n"
             "  '#include <' .. X .. '>',\n"
             "  '%%:include \"' .. X .. '\"',\n"
             "  '#inc\\\\\\nlude <' .. X .. '>',\n"
             "  '#define F \"' .. X .. '\"\\n#include F',\n"
             "  '/* note */ #include <' .. X .. '>',\n"
             "  '#if __has_include(<' .. X .. '>)\\n#endif',\n"
             "  '#include \"inside.h\"',\n"
             "  '#include <stdint.h>',\n"
             "}\n"
             "return { family = 'inc', version = 1, doc = 'includes',\n"
             "  params = { { name = 'I', abbrev = 'i', values = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 } } },\n"
             "  default_set = { { I = 1 } },\n"
             "  valid = function(p, t) return true end,\n"
             "  launch = function(p, t) return { threads = 32, smem = 0 } end,\n"
             "  render = function(p, name)\n"
             "    return INC[p.I] .. '\\nextern \"C\" __global__ void ' .. name .. '() {}\\n'\n"
             "  end }\n", outside);
    snprintf(path, sizeof path, "%s/inc.lua", tpl);
    assert_int_equal(mt_file_write_atomic(path, lua, strlen(lua), NULL, 0), MT_OK);
    mt_gen *g = open_ok(tpl, NULL);
    for (int i = 1; i <= 11; i++) {
        char name[32];
        snprintf(name, sizeof name, "mtk_inc_i%d", i);
        mt_variant v;
        assert_int_equal(mt_gen_find(g, name, "sm_90a", &v), MT_OK);
        char *src = NULL;
        mt_status st = mt_gen_source(g, &v, &src, NULL);
        if (i < 10) {
            const char *m = mt_gen_errmsg(g);
            if (st != MT_ERR_TEMPLATE || !(strstr(m, "template folders") || strstr(m, "__has_include")))
                fail_msg("case %d: status %d, \"%s\"", i, st, m);
            assert_null(src);
        } else {
            assert_int_equal(st, MT_OK);
            assert_non_null(strstr(src, i == 10 ? "int inside_ok;" : "#include <stdint.h>"));
            assert_null(strstr(src, "outside_secret"));
            free(src);
        }
    }
    mt_gen_close(g);
}

/* The known targets' names come from the generator's own table: each one
 * listed is known, the H100/H200 target and the PTX one among them, and a
 * short buffer gets a terminated prefix. */
static void test_arch_names(void **state)
{
    (void)state;
    char buf[MT_GEN_ARCH_NAMES_SIZE], copy[MT_GEN_ARCH_NAMES_SIZE];
    assert_ptr_equal(mt_gen_arch_names(buf, sizeof buf), buf);
    strcpy(copy, buf);
    int n = 0, sm90a = 0, ptx = 0;
    char *save = NULL;
    for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save), n++) {
        assert_true(mt_gen_arch_known(t));
        sm90a += strcmp(t, "sm_90a") == 0;
        ptx += strcmp(t, "compute_90") == 0;
    }
    assert_int_equal(n, 5);
    assert_int_equal(sm90a, 1);
    assert_int_equal(ptx, 1);
    assert_false(mt_gen_arch_known("sm_99"));
    char small[9];
    mt_gen_arch_names(small, sizeof small);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_memory_equal(small, buf, sizeof small - 1);
}

static void test_override(void **state)
{
    (void)state;
    /* A user folder's family wins over the built-in folder's. */
    char *saved = getenv("MT_TEMPLATE_DIR") ? strdup(getenv("MT_TEMPLATE_DIR")) : NULL;
    setenv("MT_TEMPLATE_DIR", DATA "/good", 1);
    const char *dirs[] = {DATA "/override"};
    mt_gen_config cfg = {.template_dirs = dirs, .ntemplate_dirs = 1, .no_cache = 1};
    mt_gen *g = NULL;
    assert_int_equal(mt_gen_open(&cfg, &g), MT_OK);
    assert_int_equal(mt_gen_family_count(g), 1);
    assert_non_null(strstr(mt_gen_family_path(g, 0), "override/toy.lua"));
    assert_int_equal(mt_gen_template_dir_count(g), 2);
    assert_non_null(strstr(mt_gen_template_dir(g, 1), "good"));
    mt_gen_filter f = {.family = "toy", .arch = "sm_80"};
    mt_variant *v = NULL;
    size_t n = 0;
    assert_int_equal(mt_gen_enumerate(g, &f, &v, &n, NULL), MT_OK);
    assert_int_equal((int)n, 2);
    assert_int_equal(v[0].template_version, 7);
    assert_string_equal(v[0].name, "mtk_toy_w1");
    free(v);
    mt_gen_close(g);
    /* Without the user folder the built-in toy is back. */
    cfg.ntemplate_dirs = 0;
    assert_int_equal(mt_gen_open(&cfg, &g), MT_OK);
    assert_non_null(strstr(mt_gen_family_path(g, 0), "good/toy.lua"));
    mt_gen_close(g);
    if (saved)
        setenv("MT_TEMPLATE_DIR", saved, 1);
    else
        unsetenv("MT_TEMPLATE_DIR");
    free(saved);
}

static void copy_file(const char *from, const char *to)
{
    char *data = NULL;
    size_t len = 0;
    assert_int_equal(mt_file_read(from, &data, &len, NULL, 0), MT_OK);
    assert_int_equal(mt_file_write_atomic(to, data, len, NULL, 0), MT_OK);
    free(data);
}

/* The single cache entry's path in `dir`. */
static void cache_entry(const char *dir, char *path, size_t size)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".bin")) {
            int n = snprintf(path, size, "%s/%s", dir, e->d_name);
            assert_true(n > 0 && (size_t)n < size);
            found++;
        }
    closedir(d);
    assert_int_equal(found, 1);
}

static void compile_one(mt_gen *g, const mt_variant *v, mt_kernel_binary **b)
{
    mt_status st = mt_gen_compile(g, v, 1, b);
    if (st)
        fprintf(stderr, "compile: %s\n", mt_gen_errmsg(g));
    assert_int_equal(st, MT_OK);
    assert_int_equal((*b)[0].status, MT_OK);
    assert_true((*b)[0].image_len > 0);
}

static void test_determinism_and_ptx(void **state)
{
    (void)state;
    mt_gen *g = open_ok(DATA "/good", NULL);   /* no cache: NVRTC runs each time */
    mt_variant v[2];
    assert_int_equal(mt_gen_find(g, "mtk_toy_f16_b128_s2", "sm_90a", &v[0]), MT_OK);
    assert_int_equal(mt_gen_find(g, "mtk_toy_f16_b128_s2", "compute_90", &v[1]), MT_OK);
    mt_kernel_binary *a = NULL, *b = NULL;
    assert_int_equal(mt_gen_compile(g, v, 2, &a), MT_OK);
    assert_int_equal(mt_gen_compile(g, v, 2, &b), MT_OK);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(a[i].status, MT_OK);
        assert_int_equal(a[i].cache_hit, 0);
        assert_int_equal(a[i].image_len, b[i].image_len);
        assert_memory_equal(a[i].image, b[i].image, a[i].image_len);
        assert_string_equal(a[i].source_sha, b[i].source_sha);
        assert_non_null(a[i].log);
    }
    assert_int_equal(a[0].is_ptx, 0);
    assert_memory_equal(a[0].image, "\177ELF", 4);
    assert_int_equal(a[1].is_ptx, 1);
    assert_non_null(strstr((const char *)a[1].image, ".entry mtk_toy_f16_b128_s2"));
    assert_int_equal(a[1].image[a[1].image_len - 1], '\0');
    mt_kernel_binaries_free(a, 2);
    mt_kernel_binaries_free(b, 2);
    mt_kernel_binaries_free(NULL, 0);
    mt_gen_close(g);
}

static void test_cache(void **state)
{
    (void)state;
    const char *tmp = mt_test_tmpdir("gen-cache");
    char tdir[512], cdir[512], path[1024];
    snprintf(tdir, sizeof tdir, "%s/templates", tmp);
    snprintf(cdir, sizeof cdir, "%s/cache", tmp);
    assert_int_equal(mt_mkdirs(tdir, NULL, 0), MT_OK);
    static const char *files[] = {"toy.lua", "toy.cuh", "toy_math.cuh"};
    for (size_t i = 0; i < MT_ARRAY_LEN(files); i++) {
        char from[1024];
        snprintf(from, sizeof from, "%s/good/%s", DATA, files[i]);
        snprintf(path, sizeof path, "%s/%s", tdir, files[i]);
        copy_file(from, path);
    }
    mt_gen *g = open_ok(tdir, cdir);
    assert_string_equal(mt_gen_cache_dir(g), cdir);
    mt_variant v;
    assert_int_equal(mt_gen_find(g, "mtk_toy_f32_b64_s1", "sm_80", &v), MT_OK);
    mt_kernel_binary *first = NULL, *b = NULL;
    compile_one(g, &v, &first);
    assert_int_equal(first[0].cache_hit, 0);
    compile_one(g, &v, &b);   /* second compile: a hit, the same bytes */
    assert_int_equal(b[0].cache_hit, 1);
    assert_int_equal(b[0].image_len, first[0].image_len);
    assert_memory_equal(b[0].image, first[0].image, b[0].image_len);
    mt_kernel_binaries_free(b, 1);
    mt_gen_stats s;
    mt_gen_get_stats(g, &s);
    assert_int_equal(s.cache_hits, 1);
    assert_int_equal(s.cache_misses, 1);
    assert_int_equal(s.compiled, 1);

    /* A corrupted entry is detected, recompiled and overwritten. */
    char entry[700];
    cache_entry(cdir, entry, sizeof entry);
    char *data = NULL;
    size_t len = 0;
    assert_int_equal(mt_file_read(entry, &data, &len, NULL, 0), MT_OK);
    data[len - 10] ^= 0x5a;
    assert_int_equal(mt_file_write_atomic(entry, data, len, NULL, 0), MT_OK);
    free(data);
    compile_one(g, &v, &b);
    assert_int_equal(b[0].cache_hit, 0);
    assert_memory_equal(b[0].image, first[0].image, b[0].image_len);
    mt_kernel_binaries_free(b, 1);
    mt_gen_get_stats(g, &s);
    assert_int_equal(s.cache_corrupt, 1);
    compile_one(g, &v, &b);
    assert_int_equal(b[0].cache_hit, 1);
    mt_kernel_binaries_free(b, 1);
    /* A truncated entry too. */
    assert_int_equal(mt_file_write_atomic(entry, "MTKCACHE", 8, NULL, 0), MT_OK);
    compile_one(g, &v, &b);
    assert_int_equal(b[0].cache_hit, 0);
    mt_kernel_binaries_free(b, 1);
    mt_gen_get_stats(g, &s);
    assert_int_equal(s.cache_corrupt, 2);

    /* A change in an included header changes the key (and the template hash). */
    char h1[65], h2[65];
    assert_int_equal(mt_gen_template_hash(g, "toy", h1), MT_OK);
    snprintf(path, sizeof path, "%s/toy_math.cuh", tdir);
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    fputs("// edited\n", f);
    fclose(f);
    assert_int_equal(mt_gen_template_hash(g, "toy", h2), MT_OK);
    assert_string_not_equal(h1, h2);
    compile_one(g, &v, &b);
    assert_int_equal(b[0].cache_hit, 0);
    assert_string_not_equal(b[0].source_sha, first[0].source_sha);
    assert_non_null(strstr(b[0].source, "// edited"));
    mt_kernel_binaries_free(b, 1);
    mt_kernel_binaries_free(first, 1);

    /* A batch mixing hits and misses, in any order, then all hits. */
    mt_variant batch[4];
    static const char *names[] = {"mtk_toy_f32_b32_s1", "mtk_toy_f32_b64_s1",
                                  "mtk_toy_f16_b64_s1", "mtk_toy_f32_b32_s2"};
    for (int i = 0; i < 4; i++)
        assert_int_equal(mt_gen_find(g, names[i], "sm_80", &batch[i]), MT_OK);
    assert_int_equal(mt_gen_compile(g, batch + 1, 1, &b), MT_OK);
    mt_kernel_binaries_free(b, 1);
    for (int round = 0; round < 2; round++) {
        assert_int_equal(mt_gen_compile(g, batch, 4, &b), MT_OK);
        for (int i = 0; i < 4; i++) {
            assert_int_equal(b[i].status, MT_OK);
            assert_string_equal(b[i].variant.name, names[i]);
            assert_int_equal(b[i].cache_hit, round == 1 || i == 1);
            assert_non_null(strstr((const char *)b[i].source, names[i]));
        }
        mt_kernel_binaries_free(b, 4);
    }
    mt_gen_close(g);
}

/* The one .bin entry of dir other than `other` (NULL: the only one). */
static void cache_entry_besides(const char *dir, const char *other, char *path, size_t size)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (strstr(e->d_name, ".bin") && !strstr(e->d_name, ".tmp.") && (!other || strcmp(p, other))) {
            mt_strlcpy(path, p, size);
            found++;
        }
    }
    closedir(d);
    assert_int_equal(found, 1);
}

/* An entry copied or linked under another key's name is no image of that
 * key: recompiled, never served (format 1 hashed the payload alone, and
 * another kernel's image came back as a hit). */
static void test_cache_entry_of_another_key(void **state)
{
    (void)state;
    const char *cdir = mt_test_tmpdir("gen-cache-keys");
    mt_gen *g = open_ok(DATA "/good", cdir);
    mt_variant a, b;
    assert_int_equal(mt_gen_find(g, "mtk_toy_f32_b32_s1", "sm_80", &a), MT_OK);
    assert_int_equal(mt_gen_find(g, "mtk_toy_f16_b64_s1", "sm_80", &b), MT_OK);
    mt_kernel_binary *ba, *bb, *again;
    compile_one(g, &a, &ba);
    char ea[1024], eb[1024];
    cache_entry_besides(cdir, NULL, ea, sizeof ea);
    compile_one(g, &b, &bb);
    cache_entry_besides(cdir, ea, eb, sizeof eb);
    copy_file(ea, eb);   /* a's entry under b's key */
    compile_one(g, &b, &again);
    assert_int_equal(again[0].cache_hit, 0);
    assert_int_equal(again[0].image_len, bb[0].image_len);
    assert_memory_equal(again[0].image, bb[0].image, bb[0].image_len);
    mt_kernel_binaries_free(again, 1);
    assert_int_equal(unlink(eb), 0);
    assert_int_equal(symlink(ea, eb), 0);   /* a link to a's entry */
    compile_one(g, &b, &again);
    assert_int_equal(again[0].cache_hit, 0);
    assert_memory_equal(again[0].image, bb[0].image, bb[0].image_len);
    mt_kernel_binaries_free(again, 1);
    mt_gen_stats s;
    mt_gen_get_stats(g, &s);
    assert_int_equal(s.cache_corrupt, 2);
    mt_kernel_binaries_free(ba, 1);
    mt_kernel_binaries_free(bb, 1);
    mt_gen_close(g);
}

static void test_compile_failure_is_per_item(void **state)
{
    (void)state;
    const char *tmp = mt_test_tmpdir("gen-fail");
    char path[600];
    static const char broken[] =
        "return { family = \"broken\", version = 1,\n"
        "  params = { { name = \"OK\", values = { 0, 1 } } },\n"
        "  default_set = { {} },\n"
        "  launch = function(p, t) return { threads = 32, smem = 0 } end,\n"
        "  render = function(p, name)\n"
        "    if p.OK == 1 then return 'extern \"C\" __global__ void ' .. name .. '() {}\\n' end\n"
        "    return 'extern \"C\" __global__ void ' .. name .. '() { undefined_thing(); }\\n'\n"
        "  end }\n";
    snprintf(path, sizeof path, "%s/broken.lua", tmp);
    assert_int_equal(mt_file_write_atomic(path, broken, sizeof broken - 1, NULL, 0), MT_OK);
    mt_gen *g = open_ok(tmp, NULL);
    mt_gen_filter f = {.family = "broken", .arch = "sm_89"};
    mt_variant *v = NULL;
    size_t n = 0;
    assert_int_equal(mt_gen_enumerate(g, &f, &v, &n, NULL), MT_OK);
    assert_int_equal((int)n, 2);
    mt_kernel_binary *b = NULL;
    assert_int_equal(mt_gen_compile(g, v, n, &b), MT_ERR_NVRTC);
    assert_int_equal(b[0].status, MT_ERR_NVRTC);
    assert_non_null(strstr(b[0].log, "undefined_thing"));
    assert_non_null(strstr(b[0].log, "mtk_broken_0.cu"));
    assert_null(b[0].image);
    assert_int_equal(b[1].status, MT_OK);
    assert_non_null(strstr(mt_gen_errmsg(g), "1 of 2"));
    mt_kernel_binaries_free(b, n);
    free(v);
    mt_gen_close(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enumerate_counts),
        cmocka_unit_test(test_enumerate_each),
        cmocka_unit_test(test_filters),
        cmocka_unit_test(test_bad_templates),
        cmocka_unit_test(test_template_limits),
        cmocka_unit_test(test_omit_in_name),
        cmocka_unit_test(test_only_if_and_archs),
        cmocka_unit_test(test_sandbox),
        cmocka_unit_test(test_amalgamation),
        cmocka_unit_test(test_includes_stay_inside),
        cmocka_unit_test(test_arch_names),
        cmocka_unit_test(test_override),
        cmocka_unit_test(test_determinism_and_ptx),
        cmocka_unit_test(test_cache),
        cmocka_unit_test(test_cache_entry_of_another_key),
        cmocka_unit_test(test_compile_failure_is_per_item),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
