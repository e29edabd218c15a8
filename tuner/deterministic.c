/*
 * Taking the atomics out of a tuned database (see deterministic.h).
 */
#include "tuner/deterministic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "tuner/kernel_set.h"
#include "tuner/worker.h"

/* Appends every entry to an mt_buf of mt_db_entry records. */
static int collect_entry(const mt_db_entry *e, void *ctx)
{
    mt_buf_append(ctx, (const char *)e, sizeof *e);
    return 0;
}

/* A candidate of the entry's run with the entry's GEMM1
 * ("gemm1=A;gemm2=B[;launch=late]", timed and passed). */
typedef struct pick {
    char gemm2[MT_VARIANT_NAME_MAX];
    int launch_late;   /* timed with launch=late */
    double time_us, rel_err;
} pick;

typedef struct scan {
    const mt_db_entry *e;
    char key[512];   /* e's key text (mt_db_key_format), formatted once */
    const char *gemm1;
    mt_buf picks;    /* of `pick` */
} scan;

/* Is the candidate's key the entry's? */
static int same_key(const scan *s, const mt_db_key *k)
{
    char text[512];
    return !strcmp(k->sku, s->e->key.sku) && mt_db_key_format(k, text, sizeof text) == MT_OK &&
           !strcmp(text, s->key);
}

/* The value of `role=` in a candidate's text, copied into out (empty: none). */
static void role_of(const char *text, const char *role, char *out, size_t size)
{
    const size_t n = strlen(role);
    out[0] = '\0';
    for (const char *p = text; *p; p += strcspn(p, ";"), p += *p == ';')
        if (!strncmp(p, role, n) && p[n] == '=') {
            const size_t len = strcspn(p + n + 1, ";");
            if (len < size) {
                memcpy(out, p + n + 1, len);
                out[len] = '\0';
            }
            return;
        }
}

static int collect_pick(const mt_db_candidate *c, void *ctx)
{
    scan *s = ctx;
    char g1[MT_VARIANT_NAME_MAX];
    pick k;
    if (!c->ok || c->time_us < 0 || c->M != s->e->M || !same_key(s, &c->key))
        return 0;
    role_of(c->pipeline, "gemm1", g1, sizeof g1);
    role_of(c->pipeline, "gemm2", k.gemm2, sizeof k.gemm2);
    if (strcmp(g1, s->gemm1) || !k.gemm2[0])
        return 0;
    k.launch_late = mt_tune_text_is_late(c->pipeline);
    k.time_us = c->time_us;
    k.rel_err = c->rel_err;
    mt_buf_append(&s->picks, (const char *)&k, sizeof k);
    return 0;
}

static int by_time(const void *a, const void *b)
{
    const pick *x = a, *y = b;
    return (x->time_us > y->time_us) - (x->time_us < y->time_us);
}

static void say(void (*report)(const char *, void *), void *ctx, const mt_db_entry *e, const char *what)
{
    if (!report)
        return;
    char key[512], line[2048];
    if (mt_db_key_format(&e->key, key, sizeof key))
        key[0] = '\0';
    snprintf(line, sizeof line, "%s M=%lld: %s", key, (long long)e->M, what);
    report(line, ctx);
}

/* One entry whose GEMM2 sums by atomics: the fastest deterministic GEMM2
 * of its run under its GEMM1, stored with the entry (not dry_run). *done:
 * 1 replaced (or would be), 0 no such candidate. */
static mt_status fix_entry(mt_db *db, mt_gen *g, const mt_db_entry *e, const char *gemm1, const char *gemm2,
                           int dry_run, void (*report)(const char *, void *), void *ctx, int *done,
                           char *msg, size_t msg_size)
{
    scan s = {.e = e, .gemm1 = gemm1};
    *done = 0;
    mt_status st = mt_db_key_format(&e->key, s.key, sizeof s.key);
    if (st)
        return mt_errf(msg, msg_size, st, "the key of M=%lld does not format", (long long)e->M);
    st = mt_db_foreach_candidate(db, collect_pick, &s);
    if (!st && s.picks.oom)
        st = mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    else if (st)
        mt_errf(msg, msg_size, st, "reading the candidates: %s", mt_db_errmsg(db));
    pick *p = (pick *)s.picks.data;
    const size_t n = s.picks.len / sizeof *p;
    if (n)
        qsort(p, n, sizeof *p, by_time);
    mt_variant v;
    size_t i = 0;
    for (; !st && i < n; i++)
        if (mt_gen_find(g, p[i].gemm2, e->pipeline.arch, &v) == MT_OK && !mt_variant_sums_by_atomics(&v))
            break;
    char what[1024];
    if (st || i == n) {
        snprintf(what, sizeof what,
                 "gemm2 %s (%.1f us) sums by atomics, and no candidate of its run with its gemm1 "
                 "stores per slot: left as it is", gemm2, e->time_us);
        if (!st)
            say(report, ctx, e, what);
        free(s.picks.data);
        return st;
    }
    snprintf(what, sizeof what, "gemm2 %s (%.1f us) -> %s%s (%.1f us, %+.1f %%)", gemm2, e->time_us,
             p[i].gemm2, p[i].launch_late ? " launched late" : "", p[i].time_us,
             (p[i].time_us / e->time_us - 1.0) * 100.0);
    say(report, ctx, e, what);
    *done = 1;
    if (dry_run) {
        free(s.picks.data);
        return MT_OK;
    }
    mt_db_entry fixed = *e;
    for (int k = 0; k < fixed.pipeline.nsteps; k++)
        if (!strcmp(fixed.pipeline.steps[k].role, "gemm2"))
            mt_strlcpy(fixed.pipeline.steps[k].kernel, p[i].gemm2, sizeof fixed.pipeline.steps[k].kernel);
    fixed.pipeline.launch_late = p[i].launch_late;   /* as it was timed */
    fixed.time_us = p[i].time_us;
    fixed.rel_err = p[i].rel_err;
    free(s.picks.data);
    mt_db_kernel k;
    int64_t prov = 0;
    if ((st = mt_kernel_record(g, &v, &k, msg, msg_size)))
        return st;
    st = mt_db_put_kernel(db, &k);
    mt_db_kernel_free(&k);
    if (!st)
        st = mt_db_put_provenance(db, &e->prov, &prov);
    if (!st)
        st = mt_db_replace_entry(db, &fixed, prov, NULL);
    if (st)
        mt_errf(msg, msg_size, st, "storing M=%lld: %s", (long long)e->M, mt_db_errmsg(db));
    return st;
}

mt_status mt_make_deterministic(mt_db *db, mt_gen *g, int dry_run,
                                void (*report)(const char *line, void *ctx), void *ctx,
                                mt_deterministic_stats *stats, char *msg, size_t msg_size)
{
    mt_deterministic_stats none;
    if (!stats)
        stats = &none;
    memset(stats, 0, sizeof *stats);
    mt_status st = mt_db_refuse_damaged(db, "nothing was made deterministic");
    if (st)
        return mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(db));
    mt_buf all = {0};
    if ((st = mt_db_foreach_entry(db, NULL, collect_entry, &all)) || all.oom) {
        free(all.data);
        return st ? mt_errf(msg, msg_size, st, "reading the entries: %s", mt_db_errmsg(db))
                  : mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    }
    const mt_db_entry *e = (const mt_db_entry *)all.data;
    const size_t n = all.len / sizeof *e;
    for (size_t i = 0; i < n && !st; i++) {
        const char *g1 = mt_db_pipeline_kernel(&e[i].pipeline, "gemm1");
        const char *g2 = mt_db_pipeline_kernel(&e[i].pipeline, "gemm2");
        mt_db_kernel k;
        if (!g1 || !g2 || !strcmp(g2, MT_DB_LIBRARY_KERNEL))
            continue;   /* no stored GEMM2 (a library backend): nothing to judge */
        /* A GEMM2 that cannot be read (missing, or its image or source not
         * its hash) cannot be judged: stop there, not pass it as fine. */
        if ((st = mt_db_get_kernel(db, g2, e[i].pipeline.arch, &k))) {
            st = mt_errf(msg, msg_size, st, "the gemm2 kernel %s (%s) of the entry at M=%lld: %s "
                         "(`moetune db verify` lists what is damaged)",
                         g2, e[i].pipeline.arch, (long long)e[i].M, mt_db_errmsg(db));
            break;
        }
        const int atomics = mt_variant_sums_by_atomics(&k.variant);
        mt_db_kernel_free(&k);
        if (!atomics)
            continue;
        stats->entries++;
        int done = 0;
        st = fix_entry(db, g, &e[i], g1, g2, dry_run, report, ctx, &done, msg, msg_size);
        if (done)
            stats->replaced++;
        else if (!st)
            stats->left++;
    }
    free(all.data);
    return st;
}
