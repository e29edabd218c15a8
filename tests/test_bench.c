/*
 * CPU tests of the benchmark's tuned column (tuner/bench.c,
 * tuner/tuned_plan.c): the runtime-style lookup of the tuned pipeline in a
 * database made here, the mapping of its steps to a plan, the JSON line,
 * the table row and the chart with and without a tuned series, and the
 * database errors `moetune bench --db` reports before touching a GPU.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/db_fixture.h"
#include "tests/support.h"

#include "common/json.h"
#include "common/util.h"
#include "moetune/db.h"
#include "moetune/moetune.h"
#include "tuner/bench.h"
#include "tuner/cublas_baseline.h"
#include "tuner/harness.h"
#include "tuner/tuned_plan.h"

#define SKU "NVIDIA H200"
#define OTHER_SKU "NVIDIA H100 80GB HBM3"

static void machine(mt_rt_machine *m, const char *sku)
{
    memset(m, 0, sizeof *m);
    mt_strlcpy(m->sku, sku, sizeof m->sku);
    mt_strlcpy(m->cc, "9.0", sizeof m->cc);
    mt_strlcpy(m->arch, "sm_90a", sizeof m->arch);
    mt_strlcpy(m->prov.sku, sku, sizeof m->prov.sku);
}

static void test_lookup(void **state)
{
    (void)state;
    char path[512], msg[512];
    snprintf(path, sizeof path, "%s/tuned.db", mt_test_tmpdir("bench_lookup"));
    mt_problem p, other, h100_only;
    mt_problem_init(&p, 1, 64, 6, 2048, 1408);
    other = p;
    other.K = 4096;
    h100_only = p;
    h100_only.E = 128;
    mt_db *w = mt_fix_open_db(path, MT_DB_CREATE);
    mt_fix_put_entry(w, &p, SKU, "9.0", 64, "m64", mt_template_hash());
    mt_fix_put_entry(w, &p, SKU, "9.0", 1024, "m1024", mt_template_hash());
    mt_fix_put_entry(w, &h100_only, OTHER_SKU, "9.0", 32, "h100", mt_template_hash());
    mt_db_close(w);
    mt_db *db = mt_fix_open_db(path, MT_DB_READONLY);
    mt_rt_machine m;
    machine(&m, SKU);
    mt_tuned_choice c;
    /* Nearest tuned M: 100 is nearer 64, 600 nearer 1024, 64 exact. */
    p.M = 100;
    assert_int_equal(mt_tuned_lookup(&db, 1, &m, &p, &c, msg, sizeof msg), MT_OK);
    assert_int_equal(c.found, 1);
    assert_string_equal(c.gemm1, "mtk_m64");
    assert_int_equal(c.c.info.tuned_m, 64);
    assert_int_equal(c.c.info.exact, 0);
    assert_int_equal(c.c.info.source, MT_LOOKUP_TUNED);
    assert_ptr_equal(c.c.db, db);
    p.M = 600;
    assert_int_equal(mt_tuned_lookup(&db, 1, &m, &p, &c, msg, sizeof msg), MT_OK);
    assert_string_equal(c.gemm1, "mtk_m1024");
    assert_int_equal(c.c.info.tuned_m, 1024);
    p.M = 64;
    assert_int_equal(mt_tuned_lookup(&db, 1, &m, &p, &c, msg, sizeof msg), MT_OK);
    assert_int_equal(c.c.info.exact, 1);
    /* Another SKU of the same compute capability, as the runtime falls back. */
    h100_only.M = 8;
    assert_int_equal(mt_tuned_lookup(&db, 1, &m, &h100_only, &c, msg, sizeof msg), MT_OK);
    assert_int_equal(c.found, 1);
    assert_int_equal(c.c.info.source, MT_LOOKUP_SAME_CC);
    assert_string_equal(c.gemm1, "mtk_h100");
    /* No entry for the problem: found = 0, never the built-in defaults. */
    other.M = 64;
    assert_int_equal(mt_tuned_lookup(&db, 1, &m, &other, &c, msg, sizeof msg), MT_OK);
    assert_int_equal(c.found, 0);
    assert_string_equal(c.gemm1, "");
    /* ... nor on a machine of another compute capability. */
    mt_rt_machine a100;
    machine(&a100, "NVIDIA A100");
    mt_strlcpy(a100.cc, "8.0", sizeof a100.cc);
    p.M = 64;
    assert_int_equal(mt_tuned_lookup(&db, 1, &a100, &p, &c, msg, sizeof msg), MT_OK);
    assert_int_equal(c.found, 0);
    /* Composing nothing is an error, not a crash (no GPU needed to say so). */
    mt_moe_plan plan;
    assert_int_equal(mt_tuned_plan_compose(NULL, &c, &p, &plan, msg, sizeof msg),
                     MT_ERR_NOT_FOUND);
    mt_db_close(db);
}

static void test_steps(void **state)
{
    (void)state;
    mt_db_pipeline pl;
    char msg[256];
    mt_step step_of[MT_DB_MAX_STEPS];
    const char *names[MT_DB_MAX_STEPS];
    size_t n = 0;
    assert_int_equal(mt_db_pipeline_parse("backend=moetune;arch=sm_90a;align=k_al;quant=k_q;"
                                          "gemm1=k_g1;act=k_act;gemm2=k_g2;reduce=k_r",
                                          &pl, msg, sizeof msg),
                     MT_OK);
    assert_int_equal(mt_tuned_steps(&pl, step_of, names, &n, msg, sizeof msg), MT_OK);
    assert_int_equal(n, 6);
    static const mt_step want[] = {MT_STEP_ALIGN, MT_STEP_QUANT, MT_STEP_GEMM1,
                                   MT_STEP_ACT,   MT_STEP_GEMM2, MT_STEP_REDUCE};
    static const char *const want_names[] = {"k_al", "k_q", "k_g1", "k_act", "k_g2", "k_r"};
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(step_of[i], want[i]);
        assert_string_equal(names[i], want_names[i]);
    }
    /* A cuBLAS entry cannot be composed from kernels. */
    assert_int_equal(mt_db_pipeline_parse("backend=cublas;arch=sm_90a;gemm1=cublas;act=k_act;"
                                          "gemm2=cublas",
                                          &pl, msg, sizeof msg),
                     MT_OK);
    assert_int_equal(mt_tuned_steps(&pl, step_of, names, &n, msg, sizeof msg),
                     MT_ERR_UNSUPPORTED);
    assert_non_null(strstr(msg, "gemm1=cublas"));
    mt_tuned_choice c;
    memset(&c, 0, sizeof c);
    c.found = 1;
    c.c.pipeline = pl;
    mt_problem p;
    mt_problem_init(&p, 8, 64, 6, 2048, 1408);
    mt_moe_plan plan;
    assert_int_equal(mt_tuned_plan_compose(NULL, &c, &p, &plan, msg, sizeof msg),
                     MT_ERR_UNSUPPORTED);
}

/* A row as bench fills it; tuned: 0 no database, 1 no entry, 2 found. */
static mt_bench_row make_row(int64_t M, int tuned)
{
    mt_bench_row r;
    memset(&r, 0, sizeof r);
    mt_problem_init(&r.p, M, 128, 8, 2048, 768);
    r.experts_hit = 8;
    r.seed = 1042;
    r.candidates = 6;
    r.dflt = (mt_bench_time){.us = 50.0 + (double)M, .min_us = NAN, .max_us = NAN};
    mt_strlcpy(r.dflt.name, "k_default", sizeof r.dflt.name);
    r.best = (mt_bench_time){.us = 40.0 + (double)M, .min_us = 39.0 + (double)M,
                             .max_us = 42.0 + (double)M};
    mt_strlcpy(r.best.name, "k_best", sizeof r.best.name);
    r.roofline_us = 20.0;
    r.flops = 1e9;
    r.weight_bytes = 1e8;
    r.tuned_state = tuned;
    r.tuned.us = r.tuned.min_us = r.tuned.max_us = INFINITY;
    if (tuned == 2) {
        r.tuned = (mt_bench_time){.us = 30.0 + (double)M, .min_us = 29.5 + (double)M,
                                  .max_us = 31.0 + (double)M};
        mt_strlcpy(r.tuned.name, "mtk_tuned", sizeof r.tuned.name);
        r.tuned_from_m = 64;
        r.tuned_source = "tuned";
        r.tuned_step_us[MT_STEP_ALIGN] = 2.5;
        r.tuned_step_us[MT_STEP_GEMM1] = 20.25;
        r.tuned_step_us[MT_STEP_GEMM2] = 10.0;
    }
    return r;
}

/* Write one JSON line of r into a string and parse it back. */
static mt_json *json_of(const mt_bench_opts *o, const mt_bench_row *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    mt_bench_write_json(f, o, r);
    fclose(f);
    assert_true(len > 0 && text[len - 1] == '\n');
    assert_null(memchr(text, '\n', len - 1));   /* one line */
    mt_json *root = NULL;
    char msg[256];
    if (mt_json_parse(text, len, NULL, &root, msg, sizeof msg))
        fail_msg("not JSON (%s): %s", msg, text);
    free(text);
    return root;
}

static double num(const mt_json *root, const char *key)
{
    double v = NAN;
    assert_true(mt_json_num(mt_json_get(root, key), &v));
    return v;
}

static int is_null(const mt_json *root, const char *key)
{
    const mt_json *v = mt_json_get(root, key);
    assert_non_null(v);   /* present, possibly null */
    return mt_json_type_of(v) == MT_JSON_NULL;
}

static void test_json(void **state)
{
    (void)state;
    mt_bench_opts o = {.label = "qwen \"quoted\"", .reps = 20, .db_path = "t.db"};
    mt_bench_row r = make_row(256, 2);
    mt_json *j = json_of(&o, &r);
    assert_string_equal(mt_json_str(mt_json_get(j, "label"), NULL), o.label);
    assert_true(fabs(num(j, "tuned_us") - r.tuned.us) < 1e-3);
    assert_true(fabs(num(j, "tuned_min_us") - r.tuned.min_us) < 1e-3);
    assert_true(fabs(num(j, "tuned_max_us") - r.tuned.max_us) < 1e-3);
    assert_true(fabs(num(j, "best_us") - r.best.us) < 1e-3);
    assert_true(fabs(num(j, "M") - 256) < 1e-9);
    assert_true(fabs(num(j, "seed") - 1042) < 1e-9);
    assert_string_equal(mt_json_str(mt_json_get(j, "tuned_kernel"), NULL), "mtk_tuned");
    assert_string_equal(mt_json_str(mt_json_get(j, "tuned_source"), NULL), "tuned");
    assert_true(fabs(num(j, "tuned_from_m") - 64) < 1e-9);
    assert_true(is_null(j, "tuned_error"));
    assert_true(is_null(j, "experts_only_us"));   /* not measured */
    assert_true(is_null(j, "cublas_us"));
    /* The steps the pipeline ran, and only those. */
    const mt_json *steps = mt_json_get(j, "tuned_steps_us");
    assert_non_null(steps);
    assert_true(fabs(num(steps, "gemm1") - 20.25) < 1e-3);
    assert_true(fabs(num(steps, "align") - 2.5) < 1e-3);
    assert_true(fabs(num(steps, "gemm2") - 10.0) < 1e-3);
    assert_null(mt_json_get(steps, "act"));
    assert_null(mt_json_get(steps, "quant"));
    mt_json_free(j);

    /* Found but failed its check: kernel and M kept, time null, reason given. */
    r.tuned.us = r.tuned.min_us = r.tuned.max_us = INFINITY;
    mt_strlcpy(r.tuned_error, "wrong result: rel_l2 \"0.5\"", sizeof r.tuned_error);
    j = json_of(&o, &r);
    assert_true(is_null(j, "tuned_us"));
    assert_string_equal(mt_json_str(mt_json_get(j, "tuned_kernel"), NULL), "mtk_tuned");
    assert_string_equal(mt_json_str(mt_json_get(j, "tuned_error"), NULL), r.tuned_error);
    mt_json_free(j);

    /* No entry, and no database: every tuned field null. */
    for (int state_ = 0; state_ < 2; state_++) {
        mt_bench_row n = make_row(8, state_);
        o.db_path = state_ ? "t.db" : NULL;
        j = json_of(&o, &n);
        static const char *const keys[] = {"tuned_us", "tuned_min_us", "tuned_max_us",
                                           "tuned_kernel", "tuned_from_m", "tuned_source",
                                           "tuned_error", "tuned_steps_us"};
        for (size_t k = 0; k < MT_ARRAY_LEN(keys); k++)
            assert_true(is_null(j, keys[k]));
        assert_true(fabs(num(j, "default_us") - n.dflt.us) < 1e-3);
        mt_json_free(j);
    }
}

static int count_char(const char *s, char c)
{
    int n = 0;
    for (; *s; s++)
        n += *s == c;
    return n;
}

/* The header's first line and the row, as printed. */
static void table_of(const mt_bench_opts *o, const mt_bench_row *r, char *head, char *row,
                     size_t size)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    mt_bench_print_header(f, o);
    mt_bench_print_row(f, o, r);
    fclose(f);
    char *l2 = strchr(text, '\n'), *l3 = l2 ? strchr(l2 + 1, '\n') : NULL;
    assert_non_null(l3);
    *l2 = '\0';
    mt_strlcpy(head, text, size);
    mt_strlcpy(row, l3 + 1, size);
    free(text);
}

static void test_table(void **state)
{
    (void)state;
    char head[2048], row[2048];
    mt_bench_opts o = {.label = "x", .reps = 20, .db_path = "t.db"};
    mt_bench_row r = make_row(256, 2);
    table_of(&o, &r, head, row, sizeof head);
    assert_non_null(strstr(head, "moetune tuned us"));
    assert_int_equal(count_char(head, '|'), count_char(row, '|'));
    assert_non_null(strstr(row, "| 286.0 (285.5-287.0) |"));
    assert_non_null(strstr(row, "mtk_tuned (M=64)"));
    assert_non_null(strstr(row, "| align 2.5, gemm1 20.2, gemm2 10.0 |"));
    /* No entry: empty tuned cells, the same column count. */
    r = make_row(256, 1);
    table_of(&o, &r, head, row, sizeof head);
    assert_int_equal(count_char(head, '|'), count_char(row, '|'));
    assert_null(strstr(row, "mtk_tuned"));
    /* No database: no tuned columns at all. */
    o.db_path = NULL;
    r = make_row(256, 0);
    table_of(&o, &r, head, row, sizeof head);
    assert_null(strstr(head, "tuned"));
    assert_int_equal(count_char(head, '|'), count_char(row, '|'));
    assert_non_null(strstr(row, "| 296.0 (295.0-298.0) |"));
}

static char *chart_of(const mt_bench_opts *o0, const mt_bench_row *rows, int n)
{
    char *text = NULL;
    size_t len = 0;
    mt_bench_opts o = *o0;
    o.nM = n;
    o.svg = open_memstream(&text, &len);
    char msg[256];
    assert_int_equal(mt_bench_write_chart(&o, rows, msg, sizeof msg), MT_OK);
    fclose(o.svg);
    return text;
}

static void test_chart(void **state)
{
    (void)state;
    mt_bench_opts o = {.label = "x", .reps = 20, .db_path = "t.db"};
    mt_bench_row rows[3] = {make_row(1, 2), make_row(32, 2), make_row(256, 2)};
    char *svg = chart_of(&o, rows, 3);
    assert_non_null(strstr(svg, "<svg"));
    assert_non_null(strstr(svg, "moetune tuned"));
    assert_non_null(strstr(svg, "moetune best"));
    free(svg);
    /* No tuned time anywhere: no tuned series. */
    for (int i = 0; i < 3; i++)
        rows[i].tuned_state = 1;
    svg = chart_of(&o, rows, 3);
    assert_null(strstr(svg, "moetune tuned"));
    assert_non_null(strstr(svg, "moetune untuned default"));
    free(svg);
}

/* The cuBLAS baseline multiplies 16-bit operands: a quantized problem is
 * refused up front (it once read past fp8 weights and faulted the tuner's
 * worker), with no GPU needed to say so. */
static void test_cublas_baseline_refuses_quant(void **state)
{
    (void)state;
    char msg[256];
    mt_problem p;
    mt_problem_init(&p, 8, 16, 2, 256, 128);
    p.format = MT_FORMAT_BATCHED;
    p.max_tokens = 8;
    p.quant.mode = MT_QUANT_FP8_BLOCK;
    int32_t counts[16] = {0};
    mt_moe_tensors t;
    memset(&t, 0, sizeof t);
    mt_kernel act;
    memset(&act, 0, sizeof act);
    mt_cublas_baseline *cb = (mt_cublas_baseline *)&act;
    assert_int_equal(mt_cublas_baseline_create(&p, counts, &t, &act, &cb, msg, sizeof msg),
                     MT_ERR_UNSUPPORTED);
    assert_null(cb);
    assert_non_null(strstr(msg, "fp8-block"));
}

/* A bad --db fails first, with the db module's message naming the file. */
static void test_bad_database(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("bench_baddb");
    char junk[512], missing[512], msg[1024];
    snprintf(junk, sizeof junk, "%s/junk.db", dir);
    snprintf(missing, sizeof missing, "%s/missing.db", dir);
    FILE *f = fopen(junk, "w");
    assert_non_null(f);
    for (int i = 0; i < 64; i++)
        fputs("this is not a database file ", f);
    fclose(f);
    int64_t Ms[] = {1};
    mt_bench_opts o = {.label = "x", .Ms = Ms, .nM = 1, .reps = 1, .db_path = junk};
    mt_problem_init(&o.shape, 1, 64, 6, 2048, 1408);
    mt_status st = mt_bench_run(&o, msg, sizeof msg);
    assert_int_equal(st, MT_ERR_DB);
    assert_non_null(strstr(msg, junk));
    o.db_path = missing;
    st = mt_bench_run(&o, msg, sizeof msg);
    assert_int_equal(st, MT_ERR_IO);
    assert_non_null(strstr(msg, missing));
}

/* Distinct experts the data made from seed routes to (host-only data). */
static int hits_of_seed(const mt_problem *p, mt_routing routing, uint64_t seed)
{
    char msg[256];
    mt_problem_data d;
    assert_int_equal(mt_problem_data_make(&d, p, routing, seed, 0, msg, sizeof msg), MT_OK);
    const int hit = mt_experts_hit(d.h_topk_ids, p->M * p->topk, p->E,
                                   p->has_expert_map ? d.h_expert_map : NULL);
    mt_problem_data_free(&d);
    return hit;
}

/* The routing seed for a wanted count of experts hit (`bench --experts-hit`):
 * the data made with the seed found hits that many; a count the first seed
 * already has keeps it; one no seed reaches leaves the first seed. Mixtral
 * at M = 8 (16 slots over 8 experts) hits 7 or 8 with most seeds. */
static void test_seed_for_hits(void **state)
{
    (void)state;
    mt_problem p;
    mt_problem_init(&p, 8, 8, 2, 64, 64);
    for (int want = 6; want <= 8; want++) {
        uint64_t seed = 0;
        int hit = 0;
        assert_int_equal(mt_routing_seed_for_hits(&p, MT_ROUTING_UNIFORM, 43, 1000, 4096, want, &seed, &hit),
                         MT_OK);
        assert_int_equal(hit, want);
        assert_int_equal((seed - 43) % 1000, 0);
        assert_int_equal(hits_of_seed(&p, MT_ROUTING_UNIFORM, seed), want);
    }
    uint64_t first = 0;
    int first_hit = 0, hit = 0;
    assert_int_equal(mt_routing_seed_for_hits(&p, MT_ROUTING_UNIFORM, 43, 1000, 1, 0, &first, &first_hit),
                     MT_OK);
    assert_int_equal(first, 43);
    uint64_t seed = 0;
    assert_int_equal(mt_routing_seed_for_hits(&p, MT_ROUTING_UNIFORM, 43, 1000, 4096, first_hit, &seed, &hit),
                     MT_OK);
    assert_int_equal(seed, 43);   /* the first seed already has it */
    /* 16 slots cannot hit 1 expert (topk 2 picks distinct ones). */
    assert_int_equal(mt_routing_seed_for_hits(&p, MT_ROUTING_UNIFORM, 43, 1000, 64, 1, &seed, &hit), MT_OK);
    assert_int_equal(seed, 43);
    assert_int_equal(hit, first_hit);
}

/* The tuner's seed (mt_tuning_seed): a decode batch routed uniformly hits
 * the expected number of experts, rounded (Mixtral M = 8: 7.2 -> 7, where
 * seed 8 hits all 8; DeepSeek-V2-Lite M = 8: 34.9 -> 35, where seed 8 hits
 * 39); M's own seed where it is typical already (one token; every expert
 * hit); skewed routing and expert maps keep M. */
static void test_tuning_seed(void **state)
{
    (void)state;
    static const struct { int64_t M, E, topk; int hits; } cases[] = {
        {8, 8, 2, 7}, {8, 64, 6, 35}, {8, 128, 8, 52}, {32, 256, 8, 163}, {1, 128, 8, 8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mt_problem p;
        mt_problem_init(&p, cases[i].M, cases[i].E, cases[i].topk, 64, 64);
        uint64_t seed = 0;
        int hit = 0;
        assert_int_equal(mt_tuning_seed(&p, MT_ROUTING_UNIFORM, &seed, &hit), MT_OK);
        assert_int_equal((seed - (uint64_t)p.M) % 1000, 0);
        assert_int_equal(hit, cases[i].hits);
        assert_int_equal(hits_of_seed(&p, MT_ROUTING_UNIFORM, seed), cases[i].hits);
    }
    mt_problem p;
    mt_problem_init(&p, 8, 8, 2, 64, 64);
    uint64_t seed = 0;
    int hit = 0;
    assert_int_equal(hits_of_seed(&p, MT_ROUTING_UNIFORM, 8), 8);   /* M's seed: all 8 */
    /* Skewed routing draws its slots from the seed too (balanced does not). */
    assert_int_equal(mt_tuning_seed(&p, MT_ROUTING_SKEWED, &seed, &hit), MT_OK);
    assert_int_equal(seed, 8);
    assert_int_equal(hit, hits_of_seed(&p, MT_ROUTING_SKEWED, 8));
    mt_problem_init(&p, 4096, 8, 2, 64, 64);   /* every expert hit by the first seed */
    assert_int_equal(mt_tuning_seed(&p, MT_ROUTING_UNIFORM, &seed, &hit), MT_OK);
    assert_int_equal(seed, 4096);
    mt_problem_init(&p, 8, 64, 6, 64, 64);   /* seed 8 hits 39, 35 expected */
    p.has_expert_map = 1;   /* every expert local: uniform routing would search */
    assert_int_equal(mt_tuning_seed(&p, MT_ROUTING_UNIFORM, &seed, &hit), MT_OK);
    assert_int_equal(seed, 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup),     cmocka_unit_test(test_steps),
        cmocka_unit_test(test_json),       cmocka_unit_test(test_table),
        cmocka_unit_test(test_chart),      cmocka_unit_test(test_bad_database),
        cmocka_unit_test(test_cublas_baseline_refuses_quant),
        cmocka_unit_test(test_seed_for_hits),   cmocka_unit_test(test_tuning_seed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
