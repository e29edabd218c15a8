/*
 * CPU tests of libmoetune: no GPU is needed (creating a context must fail
 * cleanly here), composition rules and their messages, the lookup order
 * against databases written here with fake entries, the default tile rule,
 * argument validation and destroy(NULL).
 */
#define _POSIX_C_SOURCE 200809L
#include "tests/db_fixture.h"
#include "tests/support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/defaults.h"
#include "common/util.h"
#include "moetune/db.h"
#include "moetune/gen.h"
#include "moetune/moetune.h"
#include "runtime/rt_internal.h"


#define SKU "NVIDIA H200"
#define OTHER_SKU "NVIDIA H100 80GB HBM3"

static void test_version_and_hash(void **state)
{
    (void)state;
    const char *v = mt_version();
    int a, b, c;
    assert_int_equal(sscanf(v, "%d.%d.%d", &a, &b, &c), 3);
    const char *h = mt_template_hash();
    assert_int_equal(strlen(h), 64);
    assert_int_equal(strspn(h, "0123456789abcdef"), 64);
}

/* The standard prepare/finalize and experts, and a small bf16 problem. */
static void standard_objects(mt_prepare_finalize **pf, mt_experts **ex, mt_problem *p)
{
    assert_int_equal(mt_prepare_finalize_create(MT_PF_STANDARD, pf), MT_OK);
    assert_int_equal(mt_experts_create(MT_EXPERTS_MOETUNE, MT_FORMAT_STANDARD, ex), MT_OK);
    mt_problem_init(p, 64, 8, 2, 128, 128);
}

/* A standard bf16 modular kernel composed on ctx is refused
 * (MT_ERR_INVALID_ARG) with the message want. */
static void compose_refused(mt_context *ctx, const char *want)
{
    mt_prepare_finalize *pf;
    mt_experts *ex;
    mt_problem p;
    standard_objects(&pf, &ex, &p);
    mt_modular_kernel *mk = NULL;
    assert_int_equal(mt_modular_kernel_create(ctx, pf, ex, &p, &mk), MT_ERR_INVALID_ARG);
    assert_string_equal(mt_modular_kernel_errmsg(mk), want);
    mt_modular_kernel_destroy(mk);
    mt_experts_destroy(ex);
    mt_prepare_finalize_destroy(pf);
}

static void test_context_without_gpu(void **state)
{
    (void)state;
    mt_context_config cfg;
    mt_context_config_init(&cfg);
    mt_context *ctx = NULL;
    mt_status st = mt_context_create(&cfg, &ctx);
    assert_non_null(ctx);
    if (st == MT_OK) {   /* a machine with a GPU: nothing to check here */
        mt_context_destroy(ctx);
        skip();
    }
    assert_true(st == MT_ERR_NO_DRIVER || st == MT_ERR_NO_DEVICE);
    assert_true(strlen(mt_context_errmsg(ctx)) > 10);
    printf("  context: %s: %s\n", mt_status_str(st), mt_context_errmsg(ctx));
    /* Nothing is composed on a context whose creation failed; the refusal
     * quotes why it failed. */
    char want[MT_RT_MSG + 64];
    snprintf(want, sizeof want, "the context's creation failed: %s", mt_context_errmsg(ctx));
    compose_refused(ctx, want);
    mt_context_destroy(ctx);
    assert_int_equal(mt_context_create(NULL, NULL), MT_ERR_INVALID_ARG);
}

typedef struct log_seen {
    mt_context *ctx;
    int n, lock_free, levels[4];
    char text[4][64];
} log_seen;

static void seen_log(void *user, mt_log_level level, const char *message)
{
    log_seen *s = user;
    if (s->n < 4) {
        s->levels[s->n] = (int)level;
        mt_strlcpy(s->text[s->n], message, sizeof s->text[0]);
    }
    s->n++;
    /* What a callback that calls into moetune needs: the lock free. */
    if (pthread_mutex_trylock(&s->ctx->lock) == 0) {
        s->lock_free++;
        pthread_mutex_unlock(&s->ctx->lock);
    }
}

/* Log lines of a locked stretch (a kernel's creation) reach the callback
 * after the lock is released, in order, with their levels: a callback that
 * created a kernel on the same context once waited forever on the lock
 * its own thread held. (The lock is taken by hand here: mt_rt_lock also
 * makes the GPU context current.) */
static void test_log_lines_wait_for_the_lock(void **state)
{
    (void)state;
    mt_context *ctx = calloc(1, sizeof *ctx);
    assert_non_null(ctx);
    assert_int_equal(pthread_mutex_init(&ctx->lock, NULL), 0);
    log_seen seen = {.ctx = ctx};
    ctx->log = seen_log;
    ctx->log_user = &seen;
    ctx->log_level = MT_LOG_DEBUG;
    pthread_mutex_lock(&ctx->lock);
    ctx->holding_log = 1;
    mt_rt_log(ctx, MT_LOG_INFO, "first %d", 1);
    mt_rt_log(ctx, MT_LOG_WARN, "second");
    assert_int_equal(seen.n, 0);   /* held while locked */
    mt_rt_unlock(ctx);
    assert_int_equal(seen.n, 2);
    assert_int_equal(seen.lock_free, 2);
    assert_string_equal(seen.text[0], "first 1");
    assert_int_equal(seen.levels[0], MT_LOG_INFO);
    assert_string_equal(seen.text[1], "second");
    assert_int_equal(seen.levels[1], MT_LOG_WARN);
    mt_rt_log(ctx, MT_LOG_DEBUG, "unlocked");   /* no lock held: at once */
    assert_int_equal(seen.n, 3);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

/* A context that opened its GPU and then failed on a database (here made by
 * hand: no GPU on this machine) holds a GPU context; composing on it once
 * went ahead and served the built-in defaults without the database the
 * caller configured. Refused now, with the database's error quoted. */
static void test_context_failed_on_database(void **state)
{
    (void)state;
    mt_context *ctx = calloc(1, sizeof *ctx);
    assert_non_null(ctx);
    ctx->gpu.ctx = (CUcontext)(uintptr_t)0x1000;   /* never used: the refusal comes first */
    mt_strlcpy(ctx->err, "opening the system database: /x.db: file is not a database", sizeof ctx->err);
    compose_refused(ctx, "the context's creation failed: opening the system database: /x.db: file is "
                         "not a database");
    char msg[256];
    assert_int_equal(mt_rt_context_usable(NULL, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_string_equal(msg, "the context is NULL");
    ctx->ready = 1;
    assert_int_equal(mt_rt_context_usable(ctx, msg, sizeof msg), MT_OK);
    free(ctx);
}

static void test_destroy_null(void **state)
{
    (void)state;
    mt_context_destroy(NULL);
    mt_prepare_finalize_destroy(NULL);
    mt_experts_destroy(NULL);
    mt_modular_kernel_destroy(NULL);
    assert_non_null(mt_context_errmsg(NULL));
    assert_non_null(mt_modular_kernel_errmsg(NULL));
    assert_int_equal(mt_modular_kernel_workspace_size(NULL), 0);
}

static void test_objects(void **state)
{
    (void)state;
    mt_prepare_finalize *pf = NULL;
    mt_experts *ex = NULL;
    assert_int_equal(mt_prepare_finalize_create(MT_PF_COUNT_, &pf), MT_ERR_INVALID_ARG);
    assert_null(pf);
    assert_int_equal(mt_prepare_finalize_create(MT_PF_STANDARD, NULL), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_experts_create(MT_EXPERTS_CUBLAS, MT_FORMAT_STANDARD, &ex),
                     MT_ERR_UNSUPPORTED);
    assert_null(ex);
    assert_int_equal(mt_experts_create(MT_EXPERTS_MOETUNE, MT_FORMAT_COUNT_, &ex),
                     MT_ERR_INVALID_ARG);
    assert_int_equal(mt_prepare_finalize_create(MT_PF_BATCHED, &pf), MT_OK);
    assert_string_equal(mt_prepare_finalize_name(pf), "batched");
    assert_int_equal(mt_prepare_finalize_format(pf), MT_FORMAT_BATCHED);
    assert_int_equal(mt_experts_create(MT_EXPERTS_CUBLAS, MT_FORMAT_BATCHED, &ex), MT_OK);
    assert_string_equal(mt_experts_name(ex), "cublas-batched");
    assert_true(mt_experts_accepts(ex, MT_QUANT_NONE));
    assert_false(mt_experts_accepts(ex, MT_QUANT_FP8_BLOCK));
    assert_false(mt_experts_accepts(ex, MT_QUANT_COUNT_));
    mt_experts_destroy(ex);
    /* moetune experts declare what the launcher says, not a fixed list. */
    for (int f = 0; f < MT_FORMAT_COUNT_; f++) {
        assert_int_equal(mt_experts_create(MT_EXPERTS_MOETUNE, (mt_act_format)f, &ex), MT_OK);
        assert_true(mt_experts_accepts(ex, MT_QUANT_NONE));
        for (int q = 0; q < MT_QUANT_COUNT_; q++)
            assert_int_equal(mt_experts_accepts(ex, (mt_quant_mode)q),
                             mt_rt_launcher_accepts((mt_quant_mode)q, (mt_act_format)f, NULL));
        mt_experts_destroy(ex);
    }
    mt_prepare_finalize_destroy(pf);
}

static void expect_compose(mt_pf_kind pk, mt_experts_kind ek, mt_act_format ef, mt_quant_mode q,
                           mt_status want, const char *const *words)
{
    mt_prepare_finalize *pf;
    mt_experts *ex;
    assert_int_equal(mt_prepare_finalize_create(pk, &pf), MT_OK);
    assert_int_equal(mt_experts_create(ek, ef, &ex), MT_OK);
    mt_problem p;
    mt_problem_init(&p, 64, 8, 2, 128, 128);
    p.quant.mode = q;
    char msg[512] = "";
    mt_status st = mt_compose_check(pf, ex, &p, msg, sizeof msg);
    if (st != want)
        fail_msg("%s + %s (%s): got %s (%s), want %s", mt_prepare_finalize_name(pf),
                 mt_experts_name(ex), mt_quant_mode_name(q), mt_status_str(st), msg,
                 mt_status_str(want));
    for (int i = 0; words && words[i]; i++)
        if (!strstr(msg, words[i]))
            fail_msg("message \"%s\" lacks \"%s\"", msg, words[i]);
    if (st)
        printf("  %s\n", msg);
    mt_experts_destroy(ex);
    mt_prepare_finalize_destroy(pf);
}

static void test_composition_rules(void **state)
{
    (void)state;
    expect_compose(MT_PF_STANDARD, MT_EXPERTS_MOETUNE, MT_FORMAT_STANDARD, MT_QUANT_NONE, MT_OK,
                   NULL);
    expect_compose(MT_PF_BATCHED, MT_EXPERTS_MOETUNE, MT_FORMAT_BATCHED, MT_QUANT_NONE, MT_OK,
                   NULL);
    expect_compose(MT_PF_BATCHED, MT_EXPERTS_CUBLAS, MT_FORMAT_BATCHED, MT_QUANT_NONE, MT_OK,
                   NULL);
    const char *fmt1[] = {"'standard'", "'moetune-batched'", "format mismatch", NULL};
    expect_compose(MT_PF_STANDARD, MT_EXPERTS_MOETUNE, MT_FORMAT_BATCHED, MT_QUANT_NONE,
                   MT_ERR_INCOMPATIBLE, fmt1);
    const char *fmt2[] = {"'batched'", "'moetune-standard'", "format mismatch", NULL};
    expect_compose(MT_PF_BATCHED, MT_EXPERTS_MOETUNE, MT_FORMAT_STANDARD, MT_QUANT_NONE,
                   MT_ERR_INCOMPATIBLE, fmt2);
    const char *fmt3[] = {"'standard'", "'cublas-batched'", "format mismatch", NULL};
    expect_compose(MT_PF_STANDARD, MT_EXPERTS_CUBLAS, MT_FORMAT_BATCHED, MT_QUANT_NONE,
                   MT_ERR_INCOMPATIBLE, fmt3);
    const char *q1[] = {"'batched'", "'cublas-batched'", "quant mismatch", "fp8-tensor",
                        "take: none", NULL};
    expect_compose(MT_PF_BATCHED, MT_EXPERTS_CUBLAS, MT_FORMAT_BATCHED, MT_QUANT_FP8_PER_TENSOR,
                   MT_ERR_INCOMPATIBLE, q1);
    /* moetune experts: whatever the launcher cannot run must be refused. */
    for (int q = 1; q < MT_QUANT_COUNT_; q++) {
        if (mt_rt_launcher_accepts((mt_quant_mode)q, MT_FORMAT_STANDARD, NULL))
            continue;
        const char *w[] = {"'moetune-standard'", "quant mismatch",
                           mt_quant_mode_name((mt_quant_mode)q), NULL};
        if (mt_quant_is_weight_only((mt_quant_mode)q))
            continue;   /* needs a group size: the problem itself is invalid */
        expect_compose(MT_PF_STANDARD, MT_EXPERTS_MOETUNE, MT_FORMAT_STANDARD, (mt_quant_mode)q,
                       MT_ERR_INCOMPATIBLE, w);
    }
    /* A bad problem is the problem's status, named as such. */
    mt_prepare_finalize *pf;
    mt_experts *ex;
    assert_int_equal(mt_prepare_finalize_create(MT_PF_STANDARD, &pf), MT_OK);
    assert_int_equal(mt_experts_create(MT_EXPERTS_MOETUNE, MT_FORMAT_STANDARD, &ex), MT_OK);
    mt_problem p;
    mt_problem_init(&p, 64, 8, 2, 130, 128);
    char msg[256];
    assert_int_equal(mt_compose_check(pf, ex, &p, msg, sizeof msg), MT_ERR_ALIGNMENT);
    assert_non_null(strstr(msg, "bad problem"));
    assert_int_equal(mt_compose_check(NULL, ex, &p, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(msg, "prepare/finalize"));
    /* A valid problem whose 8-bit rows are not whole 16-byte chunks: the
     * mode's need, said before any kernel is loaded (it once surfaced only
     * from creation, after compiling). */
    mt_problem_init(&p, 64, 8, 2, 264, 128);
    p.quant.mode = MT_QUANT_FP8_BLOCK;
    assert_int_equal(mt_problem_validate(&p, msg, sizeof msg), MT_OK);
    assert_int_equal(mt_compose_check(pf, ex, &p, msg, sizeof msg), MT_ERR_ALIGNMENT);
    assert_non_null(strstr(msg, "multiples of 16 (K=264"));
    /* The batched capacity defaults to M. */
    mt_problem q;
    mt_problem_init(&p, 64, 8, 2, 128, 128);
    mt_prepare_finalize *bpf;
    assert_int_equal(mt_prepare_finalize_create(MT_PF_BATCHED, &bpf), MT_OK);
    assert_int_equal(mt_rt_compose_problem(bpf, &p, &q, msg, sizeof msg), MT_OK);
    assert_int_equal(q.format, MT_FORMAT_BATCHED);
    assert_int_equal(q.max_tokens, 64);
    /* ... when it is 0; a negative one is refused, not taken as M. */
    p.max_tokens = -1;
    assert_int_equal(mt_rt_compose_problem(bpf, &p, &q, msg, sizeof msg), MT_ERR_SHAPE);
    assert_non_null(strstr(msg, "max_tokens=-1"));
    p.max_tokens = 0;
    mt_prepare_finalize_destroy(bpf);
    mt_experts_destroy(ex);
    mt_prepare_finalize_destroy(pf);
}

static void test_create_and_run_refuse_bad_input(void **state)
{
    (void)state;
    mt_prepare_finalize *pf;
    mt_experts *ex;
    mt_problem p;
    standard_objects(&pf, &ex, &p);
    mt_modular_kernel *mk = NULL;
    assert_int_equal(mt_modular_kernel_create(NULL, pf, ex, &p, &mk), MT_ERR_INVALID_ARG);
    assert_non_null(mk);
    assert_non_null(strstr(mt_modular_kernel_errmsg(mk), "context"));
    /* A kernel whose creation failed refuses every call instead of crashing
     * or running, and its message stays the reason (it once said "M=5 is
     * outside [0, 0]"). */
    mt_moe_tensors t;
    memset(&t, 0, sizeof t);
    char buf[64];
    assert_int_equal(mt_modular_kernel_run(mk, 1, NULL, buf, sizeof buf, NULL),
                     MT_ERR_INVALID_ARG);
    assert_int_equal(mt_modular_kernel_run(mk, 5, &t, buf, sizeof buf, NULL), MT_ERR_INVALID_ARG);
    mt_lookup_info info;
    assert_int_equal(mt_modular_kernel_lookup(mk, 1, &info), MT_ERR_INVALID_ARG);
    assert_int_equal(mt_modular_kernel_read_error(mk, 1, buf), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(mt_modular_kernel_errmsg(mk), "context"));
    assert_int_equal(mt_modular_kernel_workspace_size(mk), 0);
    assert_int_equal(mt_modular_kernel_max_m(mk), 0);
    assert_int_equal(mt_modular_kernel_run(NULL, 1, &t, buf, sizeof buf, NULL),
                     MT_ERR_INVALID_ARG);
    assert_int_equal(mt_modular_kernel_create(NULL, pf, ex, &p, NULL), MT_ERR_INVALID_ARG);
    mt_modular_kernel_destroy(mk);
    mt_experts_destroy(ex);
    mt_prepare_finalize_destroy(pf);
}

/* How many of the n GEMM variants vs (the default sets) common/defaults.c
 * calls p's default with the given epilogue; *name: the last such. */
static int count_defaults(const mt_variant *vs, size_t n, const mt_problem *p, const char *epilogue,
                          const char **name)
{
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        const mt_variant *v = &vs[i];
        if (strcmp(mt_variant_get(v, "dtype"), mt_dtype_name(p->dtype)) ||
            strcmp(mt_variant_get(v, "quant"), mt_quant_mode_name(p->quant.mode)) ||
            strcmp(mt_variant_get(v, "format"), mt_act_format_name(p->format)) ||
            strcmp(mt_variant_get(v, "epilogue"), epilogue) || !mt_default_gemm_is(v, p))
            continue;
        k++;
        *name = v->name;
    }
    return k;
}

/* Every problem the runtime accepts has a built-in default at every size of
 * M the tile rules distinguish, for each quant mode, format and activation,
 * on sm_90a: exactly one tile of the GEMM families' default sets is the
 * default (the runtime takes the first that matches, common/defaults.c's
 * pairs must single it out), GEMM1 with the activation, GEMM2 its store
 * twin, the same tiles the tuner takes for its baseline. */
static void test_defaults_cover_every_mode(void **state)
{
    (void)state;
    /* Rows per expert 0.06, 11.9, 12, 15.6, 23.9, 24, 62.5, 64, 187.5, 192
     * and 6250: every regime of the tile rules and their edges. */
    static const int64_t Ms[] = {1, 191, 192, 250, 383, 384, 1000, 1024, 3000, 3072, 100000};
    static const char *const families[] = {"grouped_gemm", "grouped_gemm_sm90"};
    mt_variant *all = NULL;
    size_t nall = 0;
    mt_gen *g = mt_test_open_templates();
    for (size_t f = 0; f < MT_ARRAY_LEN(families); f++) {
        size_t nv = 0;
        mt_variant *v = mt_test_sm90a_defaults(g, families[f], &nv);
        all = realloc(all, (nall + nv) * sizeof *all);
        assert_non_null(all);
        memcpy(all + nall, v, nv * sizeof *v);
        nall += nv;
        free(v);
    }
    mt_gen_close(g);
    char msg[512];
    for (int q = 0; q < MT_QUANT_COUNT_; q++)
        for (int f = 0; f < MT_FORMAT_COUNT_; f++)
            for (int a = 0; a < MT_ACT_COUNT_; a++)
                for (int dt = 0; dt < 2; dt++)
                    for (size_t m = 0; m < MT_ARRAY_LEN(Ms); m++) {
                        mt_problem p;
                        mt_problem_init(&p, Ms[m], 128, 8, 2048, 768);
                        p.dtype = dt ? MT_DTYPE_FP16 : MT_DTYPE_BF16;
                        p.quant.mode = (mt_quant_mode)q;
                        if (q == MT_QUANT_W8A16 || q == MT_QUANT_W4A16)
                            p.quant.group_size = 128;
                        p.format = (mt_act_format)f;
                        p.max_tokens = 64;
                        p.activation = (mt_activation)a;
                        char what[160];
                        snprintf(what, sizeof what, "%s %s %s %s M=%lld", mt_quant_mode_name(p.quant.mode),
                                 mt_act_format_name(p.format), mt_activation_name(p.activation),
                                 mt_dtype_name(p.dtype), (long long)Ms[m]);
                        mt_db_pipeline pl;
                        mt_status st = mt_rt_default_pipeline(&p, Ms[m], "sm_90a", &pl, msg,
                                                              sizeof msg);
                        if (st)
                            fail_msg("no default for %s: %s", what, msg);
                        const char *g1 = NULL, *g2 = NULL;
                        const int n1 = count_defaults(all, nall, &p, mt_activation_name(p.activation), &g1);
                        const int n2 = count_defaults(all, nall, &p, "store", &g2);
                        if (n1 != 1 || n2 != 1)
                            fail_msg("%s: %d GEMM1 and %d GEMM2 tiles are the default", what, n1, n2);
                        if (strcmp(g1, mt_db_pipeline_kernel(&pl, "gemm1")) ||
                            strcmp(g2, mt_db_pipeline_kernel(&pl, "gemm2")))
                            fail_msg("%s: the pipeline's GEMMs %s and %s are not the default tiles %s and %s",
                                     what, mt_db_pipeline_kernel(&pl, "gemm1"),
                                     mt_db_pipeline_kernel(&pl, "gemm2"), g1, g2);
                    }
    free(all);
}

/* libmoetune stores its default kernels' sources in pieces (family prefix,
 * head, shared part, suffix; runtime/rt_defaults.h): each must come back
 * as the templates render it. */
static void test_default_sources_whole(void **state)
{
    (void)state;
    mt_gen_config cfg = {.no_cache = 1};
    mt_gen *g = NULL;
    mt_variant *v = NULL;
    size_t nv = 0;
    mt_gen_filter f = {.arch = "sm_90a", .defaults_only = 1};
    if (mt_gen_open(&cfg, &g) || mt_gen_enumerate(g, &f, &v, &nv, NULL))
        fail_msg("templates: %s", mt_gen_errmsg(g));
    assert_true(nv > 1000);
    size_t shared = 0;
    for (size_t i = 0; i < nv; i++) {
        char msg[256], *want = NULL, *got = NULL;
        size_t n = 0;
        mt_variant dv;
        assert_int_equal(mt_gen_source(g, &v[i], &want, &n), MT_OK);
        if (mt_rt_default_get(v[i].name, &dv, &got, msg, sizeof msg))
            fail_msg("%s: %s", v[i].name, msg);
        if (strlen(got) != n || memcmp(got, want, n))
            fail_msg("%s: the built-in source differs from the templates' rendering", v[i].name);
        shared += strstr(want, "#line 1 \"grouped_gemm_sm90_chunked.cuh\"") != NULL;
        free(want);
        free(got);
    }
    assert_true(shared > 100);   /* the chunked ones, whose header is a shared part */
    free(v);
    mt_gen_close(g);
}

static void test_default_tile_rule(void **state)
{
    (void)state;
    mt_problem p;
    mt_problem_init(&p, 1, 128, 8, 2048, 768);
    /* rows per expert = M * 8 / 128 = M / 16 */
    assert_int_equal(mt_rt_default_block_m(&p, 1), 16);
    assert_int_equal(mt_rt_default_block_m(&p, 383), 16);   /* 23.9 */
    assert_int_equal(mt_rt_default_block_m(&p, 384), 64);   /* 24 */
    assert_int_equal(mt_rt_default_block_m(&p, 3071), 64);  /* 191.9 */
    assert_int_equal(mt_rt_default_block_m(&p, 3072), 128); /* 192 */
    char msg[256];
    mt_db_pipeline pl;
    assert_int_equal(mt_rt_default_pipeline(&p, 4, "sm_90a", &pl, msg, sizeof msg), MT_OK);
    assert_string_equal(pl.backend, "default");
    assert_non_null(mt_db_pipeline_kernel(&pl, "align"));
    assert_non_null(mt_db_pipeline_kernel(&pl, "reduce"));
    assert_non_null(strstr(mt_db_pipeline_kernel(&pl, "gemm1"), "_m16_"));
    assert_non_null(strstr(mt_db_pipeline_kernel(&pl, "gemm1"), "silu"));
    assert_non_null(strstr(mt_db_pipeline_kernel(&pl, "gemm2"), "store"));
    p.format = MT_FORMAT_BATCHED;
    p.max_tokens = 8;
    p.dtype = MT_DTYPE_FP16;
    assert_int_equal(mt_rt_default_pipeline(&p, 4096, "sm_90a", &pl, msg, sizeof msg), MT_OK);
    assert_null(mt_db_pipeline_kernel(&pl, "align"));
    assert_non_null(strstr(mt_db_pipeline_kernel(&pl, "gemm1"), "_m128_"));
    assert_non_null(strstr(mt_db_pipeline_kernel(&pl, "gemm1"), "fp16"));
    /* Every default step's source is built in and names its kernel. */
    for (int i = 0; i < pl.nsteps; i++) {
        mt_variant v;
        char *src = NULL;
        assert_int_equal(mt_rt_default_get(pl.steps[i].kernel, &v, &src, msg, sizeof msg), MT_OK);
        assert_non_null(strstr(src, pl.steps[i].kernel));
        assert_non_null(strstr(src, "extern \"C\" __global__"));
        free(src);
    }
    /* 128-row tiles run on warpgroup MMA on sm_90a only, warp-specialized
     * with TMA weight loads: 128x256 for 16-bit operands, 128x128 for 8-bit
     * ones; never weight-only. */
    assert_non_null(strstr(mt_db_pipeline_kernel(&pl, "gemm1"), "grouped_gemm_sm90_fp16_"));
    assert_non_null(strstr(mt_db_pipeline_kernel(&pl, "gemm1"), "_n256_"));
    assert_non_null(strstr(mt_db_pipeline_kernel(&pl, "gemm2"), "_pws_fwait_btma"));
    assert_int_equal(mt_rt_default_pipeline(&p, 4096, "sm_80", &pl, msg, sizeof msg), MT_OK);
    assert_null(strstr(mt_db_pipeline_kernel(&pl, "gemm1"), "sm90"));
    assert_non_null(strstr(mt_db_pipeline_kernel(&pl, "gemm1"), "_m128_"));
    /* sm_90a: warpgroup-MMA tiles in every regime (rows per expert here M / 16). */
    static const struct {
        mt_quant_mode q;
        int64_t M;
        const char *want[4];
    } sm90[] = {
        {MT_QUANT_NONE, 4, {"grouped_gemm_sm90_fp16_none_batched_", "_m16_n128_", "_pws_", "_swyes"}},
        {MT_QUANT_NONE, 250, {"_m32_n128_", "_pws_", "_swyes"}},
        {MT_QUANT_NONE, 1000, {"grouped_gemm_sm90_", "_m64_n128_", "_pws_"}},
        {MT_QUANT_NONE, 1024, {"_m128_n256_", "_pws_", "grouped_gemm_sm90_"}},
        {MT_QUANT_FP8_BLOCK, 4, {"_fp8xblock_", "_m16_n128_", "_swyes"}},
        {MT_QUANT_FP8_BLOCK, 3071, {"_fp8xblock_", "_m64_n128_", "_ppingpong_"}},
        {MT_QUANT_FP8_BLOCK, 4096, {"_fp8xblock_", "_m128_n128_", "_pws_"}},
        {MT_QUANT_INT8_BLOCK, 250, {"_int8xblock_", "_m32_n128_", "_swyes"}},
    };
    for (size_t i = 0; i < MT_ARRAY_LEN(sm90); i++) {
        p.quant.mode = sm90[i].q;
        assert_int_equal(mt_rt_default_pipeline(&p, sm90[i].M, "sm_90a", &pl, msg, sizeof msg), MT_OK);
        int swapped = 0;
        for (int w = 0; w < 4 && sm90[i].want[w]; w++)
            swapped |= !strcmp(sm90[i].want[w], "_swyes");
        for (int k = 0; k < 2; k++) {
            const char *name = mt_db_pipeline_kernel(&pl, k ? "gemm2" : "gemm1");
            for (int w = 0; w < 4 && sm90[i].want[w]; w++)
                if (!strstr(name, sm90[i].want[w]))
                    fail_msg("%s M=%lld %s: %s lacks %s", mt_quant_mode_name(sm90[i].q),
                             (long long)sm90[i].M, k ? "gemm2" : "gemm1", name, sm90[i].want[w]);
            if (!swapped)
                assert_null(strstr(name, "_swyes"));
            assert_null(strstr(name, "_sk2"));
            assert_null(strstr(name, "_atma"));
        }
    }
    /* The regimes' edges (rows per expert M / 16), bf16 in the standard format. */
    static const struct {
        int64_t M;
        const char *tile;
    } edges[] = {{191, "_m16_n128_"}, {192, "_m32_n128_"}, {383, "_m32_n128_"},
                 {384, "_m64_n128_"}, {1023, "_m64_n128_"}, {1024, "_m128_n256_"}};
    p.format = MT_FORMAT_STANDARD;
    p.dtype = MT_DTYPE_BF16;
    p.quant.mode = MT_QUANT_NONE;
    for (size_t i = 0; i < MT_ARRAY_LEN(edges); i++) {
        assert_int_equal(mt_rt_default_pipeline(&p, edges[i].M, "sm_90a", &pl, msg, sizeof msg), MT_OK);
        const char *name = mt_db_pipeline_kernel(&pl, "gemm1");
        if (!strstr(name, "grouped_gemm_sm90_bf16_none_standard_silu") || !strstr(name, edges[i].tile))
            fail_msg("M=%lld: %s is not the %s tile", (long long)edges[i].M, name, edges[i].tile);
    }
    p.format = MT_FORMAT_BATCHED;
    p.dtype = MT_DTYPE_FP16;
    /* The per-tensor and per-token modes keep grouped_gemm's 16-row tile at
     * decode (a one-token batch's error near the tests' tolerance). */
    p.quant.mode = MT_QUANT_FP8_PER_TENSOR;
    assert_int_equal(mt_rt_default_pipeline(&p, 4, "sm_90a", &pl, msg, sizeof msg), MT_OK);
    assert_null(strstr(mt_db_pipeline_kernel(&pl, "gemm1"), "sm90"));
    assert_non_null(strstr(mt_db_pipeline_kernel(&pl, "gemm1"), "_m16_"));
    assert_int_equal(mt_rt_default_pipeline(&p, 1000, "sm_90a", &pl, msg, sizeof msg), MT_OK);
    assert_non_null(strstr(mt_db_pipeline_kernel(&pl, "gemm1"), "_m64_n128_"));
    assert_non_null(strstr(mt_db_pipeline_kernel(&pl, "gemm1"), "_ppingpong_"));
    p.quant.mode = MT_QUANT_W4A16;
    p.quant.group_size = 128;
    assert_int_equal(mt_rt_default_pipeline(&p, 4096, "sm_90a", &pl, msg, sizeof msg), MT_OK);
    assert_null(strstr(mt_db_pipeline_kernel(&pl, "gemm1"), "sm90"));
    const char *kv[] = {"dtype", "bf16"};
    mt_variant v;
    assert_int_equal(mt_rt_default_find("moe_dispatch", kv, 1, &v, msg, sizeof msg), MT_OK);
    assert_non_null(mt_rt_default_family_hash("moe_dispatch"));
    assert_int_equal(mt_rt_default_find("no_such_family", NULL, 0, &v, msg, sizeof msg),
                     MT_ERR_NOT_FOUND);
}

/* ---- lookup order ---- */

static const char *gemm1_of(const mt_rt_choice *c)
{
    return mt_db_pipeline_kernel(&c->pipeline, "gemm1");
}

static void test_lookup_order(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("runtime_lookup");
    char user_path[512], sys_path[512];
    snprintf(user_path, sizeof user_path, "%s/user.db", dir);
    snprintf(sys_path, sizeof sys_path, "%s/system.db", dir);
    mt_problem p, p2, p3;
    mt_problem_init(&p, 1, 64, 6, 2048, 1408);
    p2 = p;
    p2.E = 128;
    p3 = p;
    p3.K = 4096;
    const char *hash = mt_template_hash();
    mt_db *w = mt_fix_open_db(sys_path, MT_DB_CREATE);
    mt_fix_put_entry(w, &p, SKU, "9.0", 16, "sys16", hash);
    mt_fix_put_entry(w, &p, SKU, "9.0", 256, "sys256", hash);
    mt_fix_put_entry(w, &p2, OTHER_SKU, "9.0", 32, "cc32", hash);     /* only another SKU */
    mt_fix_put_entry(w, &p3, "NVIDIA A100", "8.0", 32, "a100", hash); /* another cc */
    mt_db_close(w);
    w = mt_fix_open_db(user_path, MT_DB_CREATE);
    mt_fix_put_entry(w, &p, SKU, "9.0", 64, "user64", "0000stale");
    mt_db_close(w);

    mt_db *dbs[2] = {mt_fix_open_db(user_path, MT_DB_READONLY),
                     mt_fix_open_db(sys_path, MT_DB_READONLY)};
    mt_rt_machine m;
    memset(&m, 0, sizeof m);
    mt_strlcpy(m.sku, SKU, sizeof m.sku);
    mt_strlcpy(m.cc, "9.0", sizeof m.cc);
    mt_strlcpy(m.arch, "sm_90a", sizeof m.arch);
    mt_db_provenance *cur = &m.prov;
    mt_strlcpy(cur->sku, SKU, sizeof cur->sku);
    mt_strlcpy(cur->driver_version, "13.0", sizeof cur->driver_version);
    mt_strlcpy(cur->cuda_version, "13.0", sizeof cur->cuda_version);
    mt_strlcpy(cur->nvrtc_version, "13.0", sizeof cur->nvrtc_version);
    mt_strlcpy(cur->moetune_version, mt_version(), sizeof cur->moetune_version);
    mt_strlcpy(cur->template_hash, hash, sizeof cur->template_hash);
    mt_rt_choice c;
    char msg[512];

    /* The user database overrides the system one, even at a farther M. */
    assert_int_equal(mt_rt_lookup(dbs, 2, &m, &p, 16, 0, &c, msg, sizeof msg), MT_OK);
    assert_string_equal(gemm1_of(&c), "mtk_user64");
    assert_int_equal(c.info.source, MT_LOOKUP_TUNED);
    assert_int_equal(c.info.tuned_m, 64);
    assert_int_equal(c.info.exact, 0);
    assert_ptr_equal(c.db, dbs[0]);
    assert_string_equal(c.info.db_path, user_path);
    /* ... and its stale template hash is reported, not hidden. */
    assert_non_null(strstr(c.info.provenance_diff, "template_hash"));
    /* Unless every kernel of the entry is stored as generated from this
     * library's templates of its family: then only other families changed
     * since the tuning, and the entry is current. One kernel of other
     * templates makes it stale again. */
    static const char *const kernels[][2] = {
        {"a", "moe_align"}, {"user64", "grouped_gemm"}, {"g2", "grouped_gemm"}, {"r", "moe_reduce"}};
    w = mt_fix_open_db(user_path, 0);
    for (size_t i = 0; i < MT_ARRAY_LEN(kernels); i++)
        mt_fix_put_kernel(w, kernels[i][0], kernels[i][1], mt_rt_default_family_hash(kernels[i][1]));
    assert_int_equal(mt_rt_lookup(dbs, 2, &m, &p, 16, 0, &c, msg, sizeof msg), MT_OK);
    assert_string_equal(gemm1_of(&c), "mtk_user64");
    assert_string_equal(c.info.provenance_diff, "");
    mt_fix_put_kernel(w, "r", "moe_reduce", "0000stale");
    assert_int_equal(mt_rt_lookup(dbs, 2, &m, &p, 16, 0, &c, msg, sizeof msg), MT_OK);
    assert_string_equal(c.info.provenance_diff, "template_hash");
    mt_db_close(w);

    /* System database alone: nearest tuned M, ties to the larger. */
    assert_int_equal(mt_rt_lookup(dbs + 1, 1, &m, &p, 16, 0, &c, msg, sizeof msg), MT_OK);
    assert_string_equal(gemm1_of(&c), "mtk_sys16");
    assert_int_equal(c.info.exact, 1);
    assert_string_equal(c.info.provenance_diff, "");
    assert_int_equal(mt_rt_lookup(dbs + 1, 1, &m, &p, 200, 0, &c, msg, sizeof msg), MT_OK);
    assert_string_equal(gemm1_of(&c), "mtk_sys256");
    assert_string_equal(c.info.db_path, sys_path);
    /* An entry reaches 4x its M either way: 1024 still takes the M = 256
     * one, 4096 the built-in defaults; M = 4 still the M = 16 one, and the
     * user's M = 64 entry covers up to 256 but not 1024 (the system's
     * M = 256 entry does). */
    assert_int_equal(mt_rt_lookup(dbs + 1, 1, &m, &p, 1024, 0, &c, msg, sizeof msg), MT_OK);
    assert_string_equal(gemm1_of(&c), "mtk_sys256");
    assert_int_equal(mt_rt_lookup(dbs + 1, 1, &m, &p, 4096, 0, &c, msg, sizeof msg), MT_OK);
    assert_int_equal(c.info.source, MT_LOOKUP_DEFAULTS);
    assert_int_equal(mt_rt_lookup(dbs + 1, 1, &m, &p, 4, 0, &c, msg, sizeof msg), MT_OK);
    assert_string_equal(gemm1_of(&c), "mtk_sys16");
    assert_int_equal(mt_rt_lookup(dbs, 2, &m, &p, 1024, 0, &c, msg, sizeof msg), MT_OK);
    assert_string_equal(gemm1_of(&c), "mtk_sys256");
    assert_ptr_equal(c.db, dbs[1]);

    /* No entry for this SKU: another SKU of the same compute capability. */
    assert_int_equal(mt_rt_lookup(dbs, 2, &m, &p2, 8, 0, &c, msg, sizeof msg), MT_OK);
    assert_int_equal(c.info.source, MT_LOOKUP_SAME_CC);
    assert_string_equal(gemm1_of(&c), "mtk_cc32");
    assert_string_equal(c.info.sku, OTHER_SKU);

    /* Only another compute capability: the built-in defaults. */
    assert_int_equal(mt_rt_lookup(dbs, 2, &m, &p3, 8, 0, &c, msg, sizeof msg), MT_OK);
    assert_int_equal(c.info.source, MT_LOOKUP_DEFAULTS);
    assert_null(c.db);
    assert_string_equal(c.pipeline.backend, "default");
    assert_non_null(strstr(c.info.pipeline, "backend=default"));
    /* ... unless they are off. */
    assert_int_equal(mt_rt_lookup(dbs, 2, &m, &p3, 8, 1, &c, msg, sizeof msg), MT_ERR_NOT_FOUND);
    assert_non_null(strstr(msg, "built-in defaults are off"));
    assert_non_null(strstr(msg, SKU));
    /* No databases at all. */
    assert_int_equal(mt_rt_lookup(NULL, 0, &m, &p, 8, 0, &c, msg, sizeof msg), MT_OK);
    assert_int_equal(c.info.source, MT_LOOKUP_DEFAULTS);
    assert_string_equal(mt_lookup_source_name(MT_LOOKUP_SAME_CC), "same-cc");
    mt_db_close(dbs[0]);
    mt_db_close(dbs[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_and_hash),
        cmocka_unit_test(test_context_without_gpu),
        cmocka_unit_test(test_context_failed_on_database),
        cmocka_unit_test(test_log_lines_wait_for_the_lock),
        cmocka_unit_test(test_destroy_null),
        cmocka_unit_test(test_objects),
        cmocka_unit_test(test_composition_rules),
        cmocka_unit_test(test_create_and_run_refuse_bad_input),
        cmocka_unit_test(test_default_tile_rule),
        cmocka_unit_test(test_default_sources_whole),
        cmocka_unit_test(test_defaults_cover_every_mode),
        cmocka_unit_test(test_lookup_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
