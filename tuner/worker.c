/*
 * The tuning worker (see worker.h).
 *
 * Per M: the untuned default pipeline and cuBLAS are measured first (the
 * baselines), then stage 1 times the most promising GEMM1 tiles (each with
 * its GEMM2 sibling), stage 1b the pipelines the database holds for this M
 * and its nearest tuned neighbours (measure_neighbours), stage 2 times
 * GEMM2 tiles under the best GEMM1 (GEMM1 and GEMM2 have other shapes and
 * may want other tiles; they must share BLOCK_M because they share the
 * alignment), stage 3 refines the best pair one parameter at a time by
 * measurement (refine below), stage 4 times the best with the other launch
 * order (settle_launch), and the final round times the fastest few again
 * (final_round). The candidates of a stage are compiled
 * together, in parallel, before they are timed one by one. Every candidate
 * is checked against the reference before it is timed; the winner is the
 * fastest correct pipeline, and only if it beats the default is it stored as
 * "moetune" (else the default is stored).
 */
#define _POSIX_C_SOURCE 200809L
#include "tuner/worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "moetune/db.h"
#include "tuner/harness.h"
#include "tuner/select.h"
#include "tuner/timing.h"

typedef struct worker {
    const mt_tune_opts *o;
    mt_tune_backend be;
    mt_db *db;
    int fd;
    int64_t prov_id;
    char arch[16];
    mt_db_provenance prov;
    mt_variant *all, *defaults;
    size_t nall, ndefaults;
    mt_variant *search[2];     /* the variants of `all` that o->only admits as
                                * GEMM1 [0] and as GEMM2 [1] (`all` itself
                                * when no filter applies to that GEMM) */
    size_t nsearch[2];
    int measured;              /* candidates this worker has measured */
    int restarted;             /* a worker of the run died before this one: the M
                                * values it passes again are not news */
} worker;

static void report(worker *w, const char *line)
{
    if (w->fd < 0)
        return;
    size_t n = strlen(line);
    /* One write per line: the supervisor reads whole lines. */
    if (write(w->fd, line, n) != (ssize_t)n)
        w->fd = -1;
}

mt_status mt_tune_key(const mt_tune_opts *o, const char *sku, mt_db_key *key, char *msg,
                      size_t msg_size)
{
    mt_status st = mt_db_key_from_problem(&o->shape, sku, o->routing, key);
    if (st)
        return mt_errf(msg, msg_size, st, "cannot make a database key (SKU '%s', routing '%s')",
                       sku, o->routing ? o->routing : "uniform");
    return MT_OK;
}

/* A candidate's text (worker.h). */
static void pipeline_text(const char *prefix, const mt_variant *g1, const mt_variant *g2, int late,
                          char *out, size_t size)
{
    snprintf(out, size, "%sgemm1=%s;gemm2=%s%s", prefix, g1->name, g2->name, late ? MT_TUNE_LATE_SUFFIX : "");
}

int mt_tune_text_is_late(const char *text)
{
    size_t n = strlen(text), k = strlen(MT_TUNE_LATE_SUFFIX);
    return n >= k && !strcmp(text + n - k, MT_TUNE_LATE_SUFFIX);
}

int mt_tune_is_mark(const char *text)
{
    return !strcmp(text, MT_TUNE_DONE_MARK) || !strcmp(text, MT_TUNE_START_MARK);
}

/* Times the pipeline of text (g1 NULL: cuBLAS), named to the supervisor
 * first ("C M text"), so that a fault or a hang of it is recorded against
 * it; "R" once it came back measured, so that a failure while recording
 * the outcome (a full disk) is not taken for the kernel's; the caller
 * reports "D" when it has recorded the outcome. */
static mt_status measure_in_flight(worker *w, int64_t M, const char *text, const mt_variant *g1,
                                   const mt_variant *g2, mt_measure *m, char *msg, size_t msg_size)
{
    char line[1024];
    snprintf(line, sizeof line, "C %lld %s\n", (long long)M, text);
    report(w, line);
    memset(m, 0, sizeof *m);
    w->measured++;
    mt_status st = g1 ? w->be.measure(w->be.self, g1, g2, mt_tune_text_is_late(text), m, msg, msg_size)
                      : w->be.measure_cublas(w->be.self, m, msg, msg_size);
    if (!st)
        report(w, "R\n");
    return st;
}

/* Measure one candidate unless the log has it; record the result. */
static mt_status measure_one(worker *w, const mt_db_key *key, int64_t M, const char *text,
                             const mt_variant *g1, const mt_variant *g2, char *msg,
                             size_t msg_size)
{
    int seen = 0;
    mt_status st = mt_db_candidate_seen(w->db, key, M, text, &seen);
    if (st)
        return mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(w->db));
    if (seen)
        return MT_OK;
    mt_measure m;
    if ((st = measure_in_flight(w, M, text, g1, g2, &m, msg, msg_size)))
        return st;
    mt_db_candidate c = {.key = *key, .M = M, .pipeline = text, .ok = m.ok,
                         .time_us = m.ok ? m.time_us : MT_DB_NO_TIME,
                         .rel_err = m.rel_err, .reason = m.ok ? NULL : m.reason};
    if ((st = mt_db_record_candidate(w->db, &c)))
        return mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(w->db));
    report(w, "D\n");
    if (w->o->log)
        fprintf(w->o->log, "  M=%-5lld %-9s %8.1f us  err %.1e  %s\n", (long long)M,
                m.ok ? "ok" : "rejected", m.ok ? m.time_us : 0.0, m.rel_err,
                m.ok ? text : m.reason);
    return MT_OK;
}

/* Fastest correct measured candidate of (key, M) with the given prefix. */
typedef struct best_scan {
    const struct worker *w;
    const mt_db_key *key;
    int64_t M;
    const char *prefix;
    int exact;              /* the text equal to prefix, not only starting with it */
    int64_t skip_block_m;   /* > 0: pass over pairs whose GEMM1 has this BLOCK_M */
    int final_only;         /* only the final round's medians (MT_TUNE_FINAL_NOTE) */
    double us, rel_err;
    char text[1024];
    int count, rejected;
} best_scan;

static int same_key(const mt_db_key *a, const mt_db_key *b)
{
    char ta[512], tb[512];
    return !strcmp(a->sku, b->sku) && mt_db_key_format(a, ta, sizeof ta) == MT_OK &&
           mt_db_key_format(b, tb, sizeof tb) == MT_OK && !strcmp(ta, tb);
}

static int64_t gemm1_block_m(const struct worker *w, const char *text);

static int scan_best(const mt_db_candidate *c, void *ctx)
{
    best_scan *b = ctx;
    if (c->M != b->M || !same_key(&c->key, b->key) ||
        (b->exact ? strcmp(c->pipeline, b->prefix) : strncmp(c->pipeline, b->prefix, strlen(b->prefix))) ||
        mt_tune_is_mark(c->pipeline))
        return 0;
    if (b->skip_block_m > 0) {   /* pairs of another BLOCK_M, of kernels of this search */
        const int64_t bm = gemm1_block_m(b->w, c->pipeline);
        if (bm == 0 || bm == b->skip_block_m)
            return 0;
    }
    b->count++;
    if (!c->ok) {
        b->rejected++;
        return 0;
    }
    if (b->final_only && (!c->reason || strcmp(c->reason, MT_TUNE_FINAL_NOTE)))
        return 0;
    if (c->time_us < b->us) {
        b->us = c->time_us;
        b->rel_err = c->rel_err;
        mt_strlcpy(b->text, c->pipeline, sizeof b->text);
    }
    return 0;
}

/* Runs b's scan over the candidate log. */
static mt_status scan_candidates(worker *w, best_scan *b, char *msg, size_t msg_size)
{
    mt_status st = mt_db_foreach_candidate(w->db, scan_best, b);
    return st ? mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(w->db)) : MT_OK;
}

/* The fastest correct candidate at M whose pipeline text starts with
 * prefix; with skip_block_m > 0, of those whose GEMM1 has another BLOCK_M. */
static mt_status find_best_but(worker *w, const mt_db_key *key, int64_t M, const char *prefix,
                               int64_t skip_block_m, best_scan *b, char *msg, size_t msg_size)
{
    memset(b, 0, sizeof *b);
    b->w = w;
    b->key = key;
    b->M = M;
    b->prefix = prefix;
    b->skip_block_m = skip_block_m;
    b->us = 1e30;
    return scan_candidates(w, b, msg, msg_size);
}

static mt_status find_best(worker *w, const mt_db_key *key, int64_t M, const char *prefix,
                           best_scan *b, char *msg, size_t msg_size)
{
    return find_best_but(w, key, M, prefix, 0, b, msg, msg_size);
}

/* find_best among the final round's medians where it timed any (a pipeline
 * left out of it keeps its one time, which must not win on luck); all
 * candidates where the round is off. */
static mt_status find_final(worker *w, const mt_db_key *key, int64_t M, const char *prefix,
                            best_scan *b, char *msg, size_t msg_size)
{
    if (w->o->finalists < 0)
        return find_best(w, key, M, prefix, b, msg, msg_size);
    best_scan f = {.w = w, .key = key, .M = M, .prefix = prefix, .final_only = 1, .us = 1e30};
    mt_status st = scan_candidates(w, &f, msg, msg_size);
    if (st)
        return st;
    if (f.us < 1e30) {
        *b = f;
        return MT_OK;
    }
    return find_best(w, key, M, prefix, b, msg, msg_size);
}

/* *ok: the candidate of exactly this text at M was timed and passed the
 * oracle. */
static mt_status passed(worker *w, const mt_db_key *key, int64_t M, const char *text, int *ok,
                        char *msg, size_t msg_size)
{
    best_scan b = {.w = w, .key = key, .M = M, .prefix = text, .exact = 1, .us = 1e30};
    mt_status st = scan_candidates(w, &b, msg, msg_size);
    *ok = b.us < 1e30;
    return st;
}

int mt_tune_again(const mt_tune_opts *o)
{
    return o->retune || o->retime;
}

static const mt_variant *by_name(const worker *w, const char *name, size_t len)
{
    for (size_t i = 0; i < w->nall; i++)
        if (strlen(w->all[i].name) == len && !strncmp(w->all[i].name, name, len))
            return &w->all[i];
    return NULL;
}

/* Indices into list (a subset of w->all, like the default set) -> indices
 * into w->all; (size_t)-1 where a name is not there. */
static void to_all(const worker *w, const mt_variant *list, size_t *pick, size_t n)
{
    if (list == w->all)
        return;
    for (size_t i = 0; i < n; i++) {
        const mt_variant *v = by_name(w, list[pick[i]].name, strlen(list[pick[i]].name));
        pick[i] = v ? (size_t)(v - w->all) : (size_t)-1;
    }
}

/* Does filter i of o->only apply to the candidates of GEMM `gemm` (1, 2)? */
static int applies(const mt_tune_opts *o, int i, int gemm)
{
    return o->only[i].role == 0 || o->only[i].role == gemm;
}

/* Does v pass o->only as a candidate for GEMM `gemm`: for each filtered
 * parameter that applies and that v's family declares, v's value is one of
 * those given for it. */
static int admitted(const mt_tune_opts *o, const mt_variant *v, int gemm)
{
    for (int i = 0; i < o->nonly; i++) {
        const char *have = mt_variant_get(v, o->only[i].name);
        if (!have || !applies(o, i, gemm))
            continue;
        int any = 0;
        for (int j = 0; j < o->nonly && !any; j++)
            any = applies(o, j, gemm) && !strcmp(o->only[j].name, o->only[i].name) &&
                  !strcmp(o->only[j].value, have);
        if (!any)
            return 0;
    }
    return 1;
}

/* w->search: the variants the stages choose from, per GEMM. A filter on a
 * parameter no variant declares, or filters that leave a GEMM nothing, are
 * an error. */
static mt_status make_search_set(worker *w, char *msg, size_t msg_size)
{
    const mt_tune_opts *o = w->o;
    for (int i = 0; i < o->nonly; i++) {
        if (o->only[i].role < 0 || o->only[i].role > 2)
            return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                           "filter %s=%s: role %d is none of 0 (both GEMMs), 1 (GEMM1), 2 (GEMM2)",
                           o->only[i].name, o->only[i].value, o->only[i].role);
        int declared = 0;
        for (size_t k = 0; k < w->nall && !declared; k++)
            declared = mt_variant_get(&w->all[k], o->only[i].name) != NULL;
        if (!declared)
            return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                           "--param %s=%s: no GEMM variant for this problem has a parameter '%s'",
                           o->only[i].name, o->only[i].value, o->only[i].name);
    }
    for (int g = 0; g < 2; g++) {
        int filtered = 0;
        for (int i = 0; i < o->nonly; i++)
            filtered |= applies(o, i, g + 1);
        if (!filtered) {
            w->search[g] = w->all;
            w->nsearch[g] = w->nall;
            continue;
        }
        if (!(w->search[g] = malloc((w->nall ? w->nall : 1) * sizeof *w->search[g])))
            return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
        for (size_t k = 0; k < w->nall; k++)
            if (admitted(o, &w->all[k], g + 1))
                w->search[g][w->nsearch[g]++] = w->all[k];
        if (w->nsearch[g] == 0)
            return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                           "the --param filters admit none of the %zu GEMM variants of this problem as "
                           "GEMM%d",
                           w->nall, g + 1);
    }
    return MT_OK;
}

/* Stage 1's GEMM2 for GEMM1 tile g1: its own GEMM2 tile (the store
 * sibling), or where the GEMM2 filters refuse that tile, the best-modelled
 * GEMM2 they admit that can follow g1 (mt_select_gemm2_for); NULL: none. */
static const mt_variant *stage1_gemm2(worker *w, const mt_problem *p, const mt_variant *g1)
{
    const size_t sib = mt_find_store_sibling(w->all, w->nall, g1);
    if (sib != (size_t)-1 && admitted(w->o, &w->all[sib], 2))
        return &w->all[sib];
    size_t pick;
    if (mt_select_gemm2_for(w->search[1], w->nsearch[1], p, g1, w->prov.sm_count, 1, &pick) == 0)
        return NULL;
    to_all(w, w->search[1], &pick, 1);
    return pick == (size_t)-1 ? NULL : &w->all[pick];
}

/* Compile the n candidates of w->all at pick (and with `partner`, each
 * one's partner[i] too, where not NULL: the GEMM2 a stage-1 GEMM1 is
 * timed with) in one parallel batch before they are timed one by one; a
 * failure here is only noted: each measurement compiles what is missing
 * and records its own failure. */
static void preload(worker *w, const size_t *pick, size_t n, const mt_variant *const *partner)
{
    if (!w->be.preload || n == 0)
        return;
    mt_variant *v = malloc(2 * n * sizeof *v);
    size_t k = 0;
    if (!v)
        return;
    for (size_t i = 0; i < n; i++) {
        if (pick[i] == (size_t)-1)
            continue;
        v[k++] = w->all[pick[i]];
        if (partner && partner[i] && partner[i] != &w->all[pick[i]])
            v[k++] = *partner[i];
    }
    char msg[1024];
    if (w->be.preload(w->be.self, v, k, msg, sizeof msg) && w->o->log)
        fprintf(w->o->log, "  (compiling the candidates together failed, so one by one: %s)\n",
                msg);
    free(v);
}

/* Parse a candidate's text (pipeline_text) back to the variants. */
static int parse_pair(const worker *w, const char *text, const mt_variant **g1,
                      const mt_variant **g2)
{
    const char *a = strstr(text, "gemm1="), *b = strstr(text, ";gemm2=");
    if (!a || !b)
        return 0;
    *g1 = by_name(w, a + 6, (size_t)(b - (a + 6)));
    *g2 = by_name(w, b + 7, strcspn(b + 7, ";"));
    return *g1 && *g2;
}

/* The BLOCK_M of a pipeline text's GEMM1; 0 where it names no variant here. */
static int64_t gemm1_block_m(const worker *w, const char *text)
{
    const mt_variant *g1, *g2;
    return parse_pair(w, text, &g1, &g2) ? mt_variant_int(g1, "BLOCK_M", 0) : 0;
}

/* Stage 1b: the pipelines the database holds for this problem at M and at
 * the nearest tuned M on either side. A tile that wins at a neighbouring M
 * often wins here too, but the model's ranking need not put it among its
 * picks. This M's stored pipeline is timed in the same run as the new
 * candidates, so the run's winner replaces it even when the stored time,
 * from another run, is lower (store_winner). Entries whose kernels are no
 * longer variants here (other templates) or that the --param filters
 * exclude are passed over for the next nearest; the untuned default pair
 * is timed already. */
typedef struct stored_pair {
    int64_t M;
    const mt_variant *g1, *g2;
    int late;   /* the entry's launch=late */
} stored_pair;

/* Entries come ordered by M within the key: the last below M, the one at
 * M and the first above (then the scan stops). */
typedef struct stored_scan {
    const worker *w;
    const mt_db_key *key;
    int64_t M;
    stored_pair pick[3];   /* below, at, above; g1 NULL: none */
    int foreign_at_m;      /* the entry at M has kernels of other templates */
} stored_scan;

static int scan_stored(const mt_db_entry *e, void *ctx)
{
    stored_scan *s = ctx;
    const char *k1 = mt_db_pipeline_kernel(&e->pipeline, "gemm1");
    const char *k2 = mt_db_pipeline_kernel(&e->pipeline, "gemm2");
    if (!k1 || !k2 || !same_key(&e->key, s->key))
        return 0;
    stored_pair p = {e->M, by_name(s->w, k1, strlen(k1)), by_name(s->w, k2, strlen(k2)),
                     e->pipeline.launch_late};
    if (!p.g1 || !p.g2) {
        s->foreign_at_m |= e->M == s->M;
        return 0;
    }
    if (!admitted(s->w->o, p.g1, 1) || !admitted(s->w->o, p.g2, 2))
        return 0;
    s->pick[e->M < s->M ? 0 : e->M == s->M ? 1 : 2] = p;
    return e->M > s->M;
}

/* *retimed: this M's stored pipeline is among those timed (the winner then
 * replaces its entry); *own_ok (may be NULL): it also passed the oracle.
 * *foreign: this M's stored pipeline cannot be timed again, its kernels
 * being of other templates (under --retune or --retime the winner replaces
 * it too: its time, from another run and other templates, would otherwise
 * keep it for good). */
static mt_status measure_neighbours(worker *w, const mt_db_key *key, int64_t M,
                                    const mt_variant *d1, const mt_variant *d2, int *retimed,
                                    int *own_ok, int *foreign, char *msg, size_t msg_size)
{
    stored_scan s = {.w = w, .key = key, .M = M};
    mt_db_filter f = {.sku = key->sku, .E = key->E};
    mt_status st = mt_db_foreach_entry(w->db, &f, scan_stored, &s);
    if (st)
        return mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(w->db));
    *retimed = s.pick[1].g1 != NULL;
    *foreign = s.foreign_at_m;
    for (int i = 0; i < 3 && !st; i++) {
        const stored_pair *p = &s.pick[i];
        if (!p->g1)
            continue;
        /* The default pair is timed as the default, under that name. */
        const int is_default = p->g1 == d1 && p->g2 == d2 && !p->late;
        char text[1024];
        pipeline_text(is_default ? "default;" : "", p->g1, p->g2, p->late, text, sizeof text);
        if (!is_default)
            st = measure_one(w, key, M, text, p->g1, p->g2, msg, msg_size);
        if (!st && i == 1 && own_ok)
            st = passed(w, key, M, text, own_ok, msg, msg_size);
    }
    return st;
}

/* Stage 3, by measurement: starting from the best pipeline, time the
 * variants of the search set that differ from its GEMM1 (then its GEMM2)
 * in one of these parameters, one parameter at a time, each round starting
 * from the best so far (coordinate descent). The model of select.c ranks
 * tile shapes; it cannot tell pipeline depths, warp layouts or prefetch
 * hints apart, so these are settled on the GPU; nor grouped_gemv's chunks
 * in flight, warps per CTA and lookahead (UNROLL, WARPS, AHEAD: the first
 * stage takes one tile of each shape, so it times one of them). A PIPE
 * value the tile cannot take with its weight loads comes with the other
 * loads (mt_select_neighbours), and "persist"
 * for a tile too wide for its whole fp32 epilogue tile comes with the
 * epilogue in column chunks (EPI_COLS, the next round). ALOAD: the A rows
 * by TMA (GEMM2 reading the sorted intermediate) or by cp.async; the model
 * cannot tell the two apart either. BLOAD: the weight tiles by TMA or by
 * cp.async, which the model weighs by a small factor only (a "sync" tile
 * has both since session 29). SPLIT_K: the slices of K per output
 * tile, which the model counts as waves of CTAs at full bandwidth and so
 * cannot weigh against the last wave's idle SMs (a swapped warpgroup-MMA
 * tile takes it with PIPE ws, so a "persist" tile's split neighbours come
 * with that pipeline: mt_select_neighbours). BLOCK_N of a swapped
 * warpgroup-MMA tile only (SWAP=yes, a few tokens per expert): the width of
 * the weight rows a tile streams sets how evenly the tiles spread over the
 * SMs, which the model's waves weigh coarsely (Qwen3 bf16 M = 8: 16 x 64
 * "persist" 144.0 us, the model's 16 x 256 146.2; docs/PERFORMANCE.md,
 * session 23); other tiles' widths stay the model's
 * (mt_select_neighbours). BLOCK_K: how many bytes of each weight row a
 * stage reads (a warpgroup-MMA tile of 16-bit values: 128, or 256 in two
 * panels); the model weighs runs under 128 bytes only, and counts a CTA's
 * latency in K steps per stage in flight, not in the bytes of a row a step
 * reads. The twin timed holds the same bytes of K in its stages (the STAGES
 * round comes next; with fewer CTAs an SM where the longer stage needs more
 * shared memory). PAD_SKIP: whether a persistent 128-row tile's
 * warpgroup of padding rows skips its MMAs, which the model does not weigh.
 * AQUANT: whether a decode GEMM1 quantizes its own A rows (no quant launch,
 * the quantization done again by every CTA of a slot) or the quant step
 * does; the model weighs neither; likewise whether a decode GEMM2 applies
 * the activation to GEMM1's output and quantizes it itself (no act launch;
 * the model counts the launch saved, not the work done again) or the act
 * step does. OQUANT: whether a decode GEMM1 quantizes its activated output
 * for GEMM2 (the last CTA of each group; no act launch) or the act step
 * does. SM_WARPS: a one-token tile's register cap, more CTAs an SM (more
 * loads in flight) against spills, which the model does not weigh.
 * (Not TURNS, MMA turns of a block-mode tile's two computing warpgroups:
 * correct, and 1.2 to 5 % slower than its twin in every GEMM that the A/B
 * of session 57 timed on an H100, docs/PERFORMANCE.md; its tiles stay in
 * the GPU tests' default set and out of the tuner.) First of all,
 * GEMM1's "epilogue": the activation fused into it or not (the other one
 * of "store" and the problem's activation), so that the rounds after it
 * refine the pipeline of whichever won; the first stage's few picks may
 * all have been of one kind. */
static const char *const refine_params[] = {"epilogue", "PREFETCH", "BLOCK_N", "BLOCK_K",  "STAGES",
                                            "WARPS_N",  "PIPE",     "BLOAD",   "SPLIT_K",  "EPI_COLS",
                                            "ALOAD",    "CLUSTER",  "PAD_SKIP", "UNROLL",  "WARPS",
                                            "AHEAD",    "SM_WARPS", "AQUANT",   "OQUANT",   NULL};

/* Whether stage 3 may time u as the GEMM (second: GEMM2) of a round along
 * param, with partner as the pair's other GEMM: u must fit the role
 * (mt_gemm_role_fits: ALOAD=tma is GEMM2's in the standard format, the
 * topk sum GEMM2's) and the pair (mt_gemm_pair_fits: a GEMM2 activating
 * GEMM1's output after a GEMM1 storing it); along "epilogue", GEMM1 takes
 * "store" or the problem's own activation, GEMM2 "store" or a topk sum
 * ("sum", "lastsum": this round weighs it against the reduce step), a
 * tiled family's "sum" (atomics) only under o->atomic_sums. */
static int refinable(const mt_tune_opts *o, const mt_db_key *key, const mt_problem *p, const mt_variant *u,
                     const mt_variant *partner, const char *param, int second)
{
    if (second && mt_variant_sums_by_atomics(u) && !o->atomic_sums)
        return 0;
    if (!mt_gemm_role_fits(u, p, second) || !(second ? mt_gemm_pair_fits(partner, u) : mt_gemm_pair_fits(u, partner)))
        return 0;
    if (strcmp(param, "epilogue"))
        return 1;
    const char *epi = mt_variant_get(u, "epilogue");
    if (!epi)
        return 0;
    if (second)
        return mt_variant_is_gemm2_epilogue(u);
    return !strcmp(epi, "store") || !strcmp(epi, mt_activation_name(key->activation));
}

/* Stage 3's last round: the best pair's GEMM1 running GEMM2 in its own
 * launch (grouped_gemv CHAIN: a decode batch in one launch, no reduce,
 * quant or act launch), each chained GEMM1 that differs from it only in
 * CHAIN, the problem's activation fused and, in the block modes, the
 * quantizations it takes over (AQUANT, OQUANT), with any register cap
 * (SM_WARPS), timed with the GEMM2 tile it runs (its GEMM2 sibling,
 * mt_find_store_sibling). Last, because no round after it could move such
 * a pair: its GEMM2 is fixed by its GEMM1. */
static mt_status chain_round(worker *w, const mt_db_key *key, const mt_problem *p, int64_t skip_block_m,
                             char *msg, size_t msg_size)
{
    static const char *const free_params[] = {"CHAIN", "epilogue", "AQUANT", "OQUANT", "SM_WARPS", NULL};
    best_scan b;
    const mt_variant *g1, *g2;
    mt_status st = find_best_but(w, key, p->M, "gemm1=", skip_block_m, &b, msg, msg_size);
    if (st || b.us >= 1e30 || !parse_pair(w, b.text, &g1, &g2) || mt_variant_chain(g1) > 0)
        return st;
    const char *act = mt_activation_name(key->activation);
    for (size_t i = 0; i < w->nsearch[0] && !st; i++) {
        const mt_variant *u = &w->search[0][i];
        const char *epi = mt_variant_get(u, "epilogue");
        if (mt_variant_chain(u) <= 0 || !epi || strcmp(epi, act) || !mt_gemm_role_fits(u, p, 0) ||
            !mt_variant_differs_only_among(u, g1, free_params))
            continue;
        const size_t h = mt_find_store_sibling(w->all, w->nall, u);
        if (h == (size_t)-1 || !admitted(w->o, &w->all[h], 2))
            continue;
        char text[1024];
        pipeline_text("", u, &w->all[h], 0, text, sizeof text);   /* it waits at its start */
        st = measure_one(w, key, p->M, text, u, &w->all[h], msg, msg_size);
    }
    return st;
}

/* Stage 3 from the best pair, or with skip_block_m > 0 from the best pair
 * whose GEMM1 has another BLOCK_M than skip_block_m (each round from the
 * best of that kind as it then stands), then the chain round. */
static mt_status refine(worker *w, const mt_db_key *key, const mt_problem *p, int64_t skip_block_m,
                        char *msg, size_t msg_size)
{
    const int64_t M = p->M;
    const size_t most = w->nsearch[0] > w->nsearch[1] ? w->nsearch[0] : w->nsearch[1];
    size_t *pick = malloc((most ? most : 1) * sizeof *pick);
    mt_status st = MT_OK;
    if (!pick)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    for (int second = 0; second < 2 && !st; second++)
        for (int i = 0; refine_params[i] && !st; i++) {
            best_scan b;
            const mt_variant *g1, *g2;
            if ((st = find_best_but(w, key, M, "gemm1=", skip_block_m, &b, msg, msg_size)) ||
                b.us >= 1e30 || !parse_pair(w, b.text, &g1, &g2))
                break;
            size_t n = mt_select_neighbours(w->search[second], w->nsearch[second], second ? g2 : g1,
                                            refine_params[i], pick);
            to_all(w, w->search[second], pick, n);
            size_t kept = 0;
            for (size_t k = 0; k < n; k++)
                if (pick[k] != (size_t)-1 &&
                    refinable(w->o, key, p, &w->all[pick[k]], second ? g1 : g2, refine_params[i], second))
                    pick[kept++] = pick[k];
            n = kept;
            preload(w, pick, n, NULL);
            const int late = mt_tune_text_is_late(b.text);   /* the best's launch, kept */
            for (size_t k = 0; k < n && !st; k++) {
                const mt_variant *u = &w->all[pick[k]];
                char text[1024];
                pipeline_text("", second ? g1 : u, second ? u : g2, late, text, sizeof text);
                st = measure_one(w, key, M, text, second ? g1 : u, second ? u : g2, msg, msg_size);
            }
        }
    free(pick);
    return st ? st : chain_round(w, key, p, skip_block_m, msg, msg_size);
}

/* Stage 4: the best pipeline launched the other way. Launched early, a
 * GEMM may request its first weight tiles before it waits for the step
 * ahead (mt_moe_run); that mostly gains at small M (H200: 2-6 % up to
 * M = 256) but lost 5-7 % at DeepSeek-V3 fp8 M = 64 to 256, where the
 * pipeline's launches overlapped less (docs/PERFORMANCE.md, session 25),
 * which no model here predicts, so each entry times both. */
static mt_status settle_launch(worker *w, const mt_db_key *key, int64_t M, char *msg, size_t msg_size)
{
    best_scan b;
    const mt_variant *g1, *g2;
    mt_status st = find_best(w, key, M, "gemm1=", &b, msg, msg_size);
    /* (A GEMM1 running GEMM2 in its launch waits at its start either way.) */
    if (st || b.us >= 1e30 || !parse_pair(w, b.text, &g1, &g2) || mt_variant_chain(g1) > 0)
        return st;
    char text[1024];
    pipeline_text("", g1, g2, !mt_tune_text_is_late(b.text), text, sizeof text);
    return measure_one(w, key, M, text, g1, g2, msg, msg_size);
}

/* The final round. Every candidate is timed once, and the fastest of some
 * tens of times that differ by a few tenths of a percent is partly the
 * luckiest: at Qwen3 fp8 M = 8 the search's own timings put a pick ahead
 * that a same-call A/B read 0.9 % slower (docs/PERFORMANCE.md, session 36).
 * So the fastest few correct tuned pipelines within FINAL_MARGIN of the
 * best (those whose kernels are here), and the untuned default, are timed
 * again in turn, FINAL_ROUNDS times each, in alternating order so that a
 * drift of the card's speed falls on each alike. Each keeps the median of
 * its new times, marked MT_TUNE_FINAL_NOTE; one that fails its check now is
 * rejected. store_winner then picks among the marked pipelines alone, so
 * that none left out of the round wins on its one time (final_round passes
 * again where one left out reads faster than the best median). */
enum { FINAL_MAX = 16, FINAL_ROUNDS = 3, FINAL_PASSES = 4 };
#define FINAL_MARGIN 1.03

typedef struct final_scan {
    const worker *w;
    const mt_db_key *key;
    int64_t M;
    int n, max;
    double done_us;   /* the best median of the passes before */
    struct finalist {
        char text[1024];
        double us, rel_err, t[FINAL_ROUNDS];
        const mt_variant *g1, *g2;
        int ok;
    } f[FINAL_MAX + 1];   /* the tuned ones, fastest first, then the default */
    struct finalist dflt;
} final_scan;

/* Keeps the max fastest correct tuned pipelines whose kernels are here and
 * that no pass has timed again in f, fastest first, the default, if no pass
 * has, in dflt, and the best tuned median of the passes in done_us. */
static int scan_final(const mt_db_candidate *c, void *ctx)
{
    final_scan *s = ctx;
    const mt_variant *g1, *g2;
    const int dflt = !strncmp(c->pipeline, "default;", 8);
    if (c->M != s->M || !c->ok || !same_key(&c->key, s->key) || (!dflt && strncmp(c->pipeline, "gemm1=", 6)))
        return 0;
    if (c->reason && !strcmp(c->reason, MT_TUNE_FINAL_NOTE)) {   /* timed again by a pass */
        if (!dflt && c->time_us < s->done_us)
            s->done_us = c->time_us;
        return 0;
    }
    if (!parse_pair(s->w, c->pipeline, &g1, &g2))
        return 0;
    int i = s->n;
    if (dflt)
        i = -1;
    else if (i == s->max) {   /* full: replaces the slowest, if faster */
        if (c->time_us >= s->f[i - 1].us)
            return 0;
        i--;
    } else
        s->n++;
    for (; i > 0 && s->f[i - 1].us > c->time_us; i--)
        s->f[i] = s->f[i - 1];
    struct finalist *f = i < 0 ? &s->dflt : &s->f[i];
    memset(f, 0, sizeof *f);
    mt_strlcpy(f->text, c->pipeline, sizeof f->text);
    f->us = c->time_us;
    f->g1 = g1;
    f->g2 = g2;
    f->ok = 1;
    return 0;
}

/* Records finalist f's outcome: its median, or rejected with reason. */
static mt_status record_final(worker *w, const mt_db_key *key, int64_t M, struct finalist *f,
                              const char *reason, char *msg, size_t msg_size)
{
    mt_db_candidate c = {.key = *key, .M = M, .pipeline = f->text, .ok = !reason,
                         .time_us = MT_DB_NO_TIME, .rel_err = f->rel_err, .reason = reason};
    if (!reason) {
        c.time_us = mt_sort_median(f->t, FINAL_ROUNDS);
        c.reason = MT_TUNE_FINAL_NOTE;
    }
    mt_status st = mt_db_record_candidate(w->db, &c);
    if (st)
        return mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(w->db));
    if (w->o->log && reason)
        fprintf(w->o->log, "  M=%-5lld final round: rejected  %s: %s\n", (long long)M, f->text, reason);
    else if (w->o->log)
        fprintf(w->o->log, "  M=%-5lld final round: %8.1f -> %8.1f us  %s\n", (long long)M, f->us,
                c.time_us, f->text);
    return MT_OK;
}

/* One pass of the final round over the pipelines no pass has timed again:
 * the want fastest tuned ones within the margin and the default. *more = 0
 * where none of the tuned ones could beat the best median of the passes
 * before (then only the default, if it has no median yet, is timed). */
static mt_status final_pass(worker *w, const mt_db_key *key, int64_t M, int want, int *more,
                            char *msg, size_t msg_size)
{
    *more = 0;
    final_scan *s = calloc(1, sizeof *s);
    if (!s)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    s->w = w;
    s->key = key;
    s->M = M;
    s->max = want < FINAL_MAX ? want : FINAL_MAX;
    s->done_us = 1e30;
    mt_status st = mt_db_foreach_candidate(w->db, scan_final, s);
    if (st) {
        free(s);
        return mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(w->db));
    }
    int n = 0;   /* the tuned ones within the margin, then the default */
    if (s->n > 0 && s->f[0].us < s->done_us) {
        while (n < s->n && s->f[n].us <= s->f[0].us * FINAL_MARGIN)
            n++;
        *more = 1;
    }
    if (s->dflt.ok)   /* until it has its median (a pass cut short before it) */
        s->f[n++] = s->dflt;
    for (int r = 0; r < FINAL_ROUNDS && !st; r++)
        for (int j = 0; j < n && !st; j++) {
            struct finalist *f = &s->f[r % 2 ? n - 1 - j : j];
            mt_measure m;
            if (!f->ok || (st = measure_in_flight(w, M, f->text, f->g1, f->g2, &m, msg, msg_size)))
                continue;
            f->t[r] = m.time_us;
            f->rel_err = m.rel_err > f->rel_err ? m.rel_err : f->rel_err;
            if (!m.ok) {   /* wrong now: rejected, with the reason */
                f->ok = 0;
                st = record_final(w, key, M, f, m.reason, msg, msg_size);
            }
            if (!st)
                report(w, "D\n");
        }
    for (int i = 0; i < n && !st; i++)
        if (s->f[i].ok)
            st = record_final(w, key, M, &s->f[i], NULL, msg, msg_size);
    free(s);
    return st;
}

/* Passes until the fastest tuned pipeline is one timed again (a pipeline
 * that read fast once may push the true best out of the first pass's
 * margin), FINAL_PASSES at most. */
static mt_status final_round(worker *w, const mt_db_key *key, int64_t M, char *msg,
                             size_t msg_size)
{
    const int want = w->o->finalists == 0 ? 4 : w->o->finalists;
    mt_status st = MT_OK;
    for (int pass = 0, more = want > 0; pass < FINAL_PASSES && more && !st; pass++)
        st = final_pass(w, key, M, want, &more, msg, msg_size);
    return st;
}

static mt_status store_kernel(worker *w, const mt_variant *v, char *msg, size_t msg_size)
{
    mt_db_kernel k;
    memset(&k, 0, sizeof k);
    mt_status st = w->be.kernel(w->be.self, v, &k, msg, msg_size);
    if (st)
        return st;
    st = mt_db_put_kernel(w->db, &k);
    if (st)
        mt_errf(msg, msg_size, st, "storing kernel %s: %s", v->name, mt_db_errmsg(w->db));
    free(k.source);
    free(k.image);
    return st;
}

/* Store the winner: the fastest correct moetune pipeline if it beats the
 * untuned default, else the default. cuBLAS is timed as a baseline but not
 * stored: its GEMM sizes come from host-side token counts, so it cannot run
 * graph-safe inside an engine's call. */
static mt_status store_winner(worker *w, const mt_db_key *key, const mt_problem *p, int retimed,
                              int foreign, double cublas_us, char *msg, size_t msg_size)
{
    best_scan ours, dflt;
    mt_status st;
    if ((st = find_final(w, key, p->M, "gemm1=", &ours, msg, msg_size)) ||
        (st = find_final(w, key, p->M, "default;", &dflt, msg, msg_size)))
        return st;
    if (dflt.us >= 1e30 && ours.us >= 1e30)
        return mt_errf(msg, msg_size, MT_ERR_MISMATCH,
                       "M=%lld: no candidate passed its check, the default neither: no entry "
                       "stored", (long long)p->M);
    /* A default that failed its check (wrong or faulting) loses to any
     * correct tuned pipeline; the entry then has no default time. */
    const int tuned = ours.us < dflt.us;
    const best_scan *win = tuned ? &ours : &dflt;
    if (dflt.us >= 1e30 && w->o->log)
        fprintf(w->o->log, "  M=%-5lld the untuned default failed its check; storing the best "
                           "correct pipeline\n", (long long)p->M);
    const mt_variant *g1, *g2;
    if (!parse_pair(w, win->text, &g1, &g2))
        return mt_errf(msg, msg_size, MT_ERR_INTERNAL, "cannot parse candidate '%s'", win->text);
    mt_db_entry e;
    memset(&e, 0, sizeof e);
    e.key = *key;
    e.M = p->M;
    mt_strlcpy(e.pipeline.backend, tuned ? "moetune" : "default", sizeof e.pipeline.backend);
    mt_strlcpy(e.pipeline.arch, w->arch, sizeof e.pipeline.arch);
    e.pipeline.launch_late = mt_tune_text_is_late(win->text);
    mt_variant steps[6];
    const char *roles[6];
    int n = 0;
    if ((st = w->be.pipeline(w->be.self, g1, g2, steps, roles, &n, msg, msg_size)))
        return st;
    for (int i = 0; i < n && i < MT_DB_MAX_STEPS; i++) {
        if ((st = store_kernel(w, &steps[i], msg, msg_size)))
            return st;
        mt_db_step *s = &e.pipeline.steps[e.pipeline.nsteps++];
        mt_strlcpy(s->role, roles[i], sizeof s->role);
        mt_strlcpy(s->kernel, steps[i].name, sizeof s->kernel);
    }
    e.time_us = win->us;
    e.default_time_us = dflt.us < 1e30 ? dflt.us : MT_DB_NO_TIME;
    e.cublas_time_us = cublas_us;
    e.rel_err = win->rel_err;
    mt_db_put_outcome out;
    const int replace = retimed || (foreign && mt_tune_again(w->o));
    if ((st = replace ? mt_db_replace_entry(w->db, &e, w->prov_id, &out)
                      : mt_db_put_entry(w->db, &e, w->prov_id, &out)))
        return mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(w->db));
    if (w->o->log && out != MT_DB_PUT_INSERTED) {
        char why[128];
        if (retimed)
            snprintf(why, sizeof why, "its pipeline timed again in this run");
        else if (replace)
            snprintf(why, sizeof why, "%s: its kernels are no variants of these templates, not timed again",
                     w->o->retime ? "retime" : "retune");
        else
            snprintf(why, sizeof why, "times of two runs");
        if (out == MT_DB_PUT_KEPT)
            fprintf(w->o->log, "  M=%-5lld kept the stored entry (%s)\n", (long long)p->M, why);
        else
            fprintf(w->o->log, "  M=%-5lld replaced the stored entry (%s): %s\n", (long long)p->M, why,
                    win->text);
    }
    return MT_OK;
}

static mt_status report_sku(worker *w, char *sku, size_t sku_size)
{
    char line[128];
    snprintf(line, sizeof line, "S %s\n", w->prov.sku);
    report(w, line);
    mt_strlcpy(sku, w->prov.sku, sku_size);
    return MT_OK;
}

/* What (key, M) holds for a run: ours, a mark of this run (its reason
 * names the run: a worker of this run started or finished the M before a
 * restart); done, a completion mark (ours where the run tunes again). */
typedef struct mark_scan {
    const mt_db_key *key;
    int64_t M;
    const char *run_id;
    int again;
    int ours;
    mt_tune_item_state s;
} mark_scan;

static int scan_mark(const mt_db_candidate *c, void *ctx)
{
    mark_scan *m = ctx;
    if (c->M != m->M || !same_key(&c->key, m->key))
        return 0;
    m->s.rows++;
    const int mine = c->reason && !strcmp(c->reason, m->run_id);
    if (!mt_tune_is_mark(c->pipeline))
        m->s.candidates++;
    else if (mine)
        m->ours = 1;
    if (!strcmp(c->pipeline, MT_TUNE_DONE_MARK) && (mine || !m->again))
        m->s.done = 1;
    return 0;
}

mt_status mt_tune_item_state_of(mt_db *db, const mt_db_key *key, int64_t M, const char *run_id,
                                int again, mt_tune_item_state *out)
{
    mark_scan m = {.key = key, .M = M, .run_id = run_id, .again = again};
    mt_status st = mt_db_foreach_candidate(db, scan_mark, &m);
    *out = m.s;
    return st;
}

/* --retune, --retime: unless this run has started (key, M) already, what
 * an earlier run left there is forgotten, finished (with its completion
 * mark) or cut short within the M (no mark: its candidates are not
 * resumed either), and this run's start mark goes in. *ours: the M was
 * this run's before (then a completion mark, if any, is this run's). */
static mt_status start_again(worker *w, const mt_db_key *key, int64_t M, int *ours, char *msg,
                             size_t msg_size)
{
    mark_scan m = {.key = key, .M = M, .run_id = w->o->run_id, .again = 1};
    mt_status st = mt_db_foreach_candidate(w->db, scan_mark, &m);
    *ours = m.ours;
    if (st || m.ours)
        return st ? mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(w->db)) : MT_OK;
    if (m.s.rows && (st = mt_db_forget_candidates(w->db, key, M, NULL)))
        return mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(w->db));
    if (w->o->log && m.s.candidates)
        fprintf(w->o->log, "[%s] M=%lld: tuning again (%d candidates of an earlier run forgotten)\n",
                w->o->label, (long long)M, m.s.candidates);
    mt_db_candidate mark = {.key = *key, .M = M, .pipeline = MT_TUNE_START_MARK, .ok = 1,
                            .time_us = MT_DB_NO_TIME, .rel_err = MT_DB_NO_TIME,
                            .reason = w->o->run_id[0] ? w->o->run_id : NULL};
    if ((st = mt_db_record_candidate(w->db, &mark)))
        return mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(w->db));
    return MT_OK;
}

/* Stages 1 to 3 of the search at p.M (the default pair d1, d2 timed
 * already): GEMM1 tiles with their GEMM2 siblings, the stored pipelines
 * (stage 1b: *retimed, *foreign as measure_neighbours says), GEMM2 tiles
 * under the best GEMM1, then the refinement by measurement. */
static mt_status search(worker *w, const mt_db_key *key, const mt_problem *p, const mt_variant *d1,
                        const mt_variant *d2, int *retimed, int *foreign, char *msg, size_t msg_size)
{
    const mt_tune_opts *o = w->o;
    const int64_t M = p->M;
    char text[1024];
    mt_status st = MT_OK;
    const int max = o->max_candidates > 0 ? o->max_candidates : 12;
    size_t *pick = calloc(2 * (size_t)max + 1, sizeof *pick);
    /* Stage 1's GEMM2 for each pick (stage1_gemm2), found once. */
    const mt_variant **pair2 = calloc(2 * (size_t)max + 1, sizeof *pair2);
    if (!pick || !pair2) {
        st = mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    /* Stage 1: GEMM1 tiles with their GEMM2 siblings: the default set's
     * tiles (those the GPU tests run) and the model's picks. */
    size_t n1 = mt_select_stage_in(w->search[0], w->nsearch[0], w->all, w->nall, p, 1, 0,
                                   w->prov.sm_count, max, pick);
    to_all(w, w->search[0], pick, n1);
    size_t nd = 0;
    if (w->search[0] == w->all) {   /* no filter on GEMM1 */
        nd = mt_select_stage(w->defaults, w->ndefaults, p, 1, 0, w->prov.sm_count, max,
                             pick + n1);
        to_all(w, w->defaults, pick + n1, nd);
    }
    for (size_t i = 0; i < n1 + nd; i++)
        pair2[i] = pick[i] == (size_t)-1 ? NULL : stage1_gemm2(w, p, &w->all[pick[i]]);
    preload(w, pick, n1 + nd, pair2);
    for (size_t i = 0; i < n1 + nd && !st; i++) {
        const mt_variant *g1 = pick[i] == (size_t)-1 ? NULL : &w->all[pick[i]], *g2 = pair2[i];
        if (!g1 || !g2)
            continue;
        if (!strcmp(g1->name, d1->name) && !strcmp(g2->name, d2->name))
            continue;   /* the default pair: timed already */
        pipeline_text("", g1, g2, 0, text, sizeof text);
        st = measure_one(w, key, M, text, g1, g2, msg, msg_size);
    }
    if (st || (st = measure_neighbours(w, key, M, d1, d2, retimed, NULL, foreign, msg, msg_size)))
        goto done;
    /* Stage 2: GEMM2 tiles under the best GEMM1. */
    best_scan b;
    const mt_variant *bg1, *bg2;
    if ((st = find_best(w, key, M, "gemm1=", &b, msg, msg_size)))
        goto done;
    if (b.us < 1e30 && parse_pair(w, b.text, &bg1, &bg2)) {
        size_t n2 = mt_select_gemm2_for(w->search[1], w->nsearch[1], p, bg1, w->prov.sm_count,
                                        max / 2 > 0 ? max / 2 : 1, pick);
        to_all(w, w->search[1], pick, n2);
        preload(w, pick, n2, NULL);
        const int late = mt_tune_text_is_late(b.text);   /* the best's launch, kept */
        for (size_t i = 0; i < n2 && !st; i++) {
            if (pick[i] == (size_t)-1 ||
                (!late && !strcmp(bg1->name, d1->name) && !strcmp(w->all[pick[i]].name, d2->name)))
                continue;   /* the default pair: timed already */
            pipeline_text("", bg1, &w->all[pick[i]], late, text, sizeof text);
            st = measure_one(w, key, M, text, bg1, &w->all[pick[i]], msg, msg_size);
        }
        if (st)
            goto done;
    }
    /* Stage 3 twice: from the winner, then from the best pair of another
     * BLOCK_M. The first stage times one pipeline of each shape, the
     * model's pick, which need not be the shape's best. DeepSeek-V3 fp8 at
     * M = 1024 and 2048, tuned from an empty database (H100, session 31):
     * the winners, swapped 32-row tiles, took 7 and 15 % longer than the
     * shipped 64-row `pingpong` pairs, which that run never timed; its
     * 64-row pairs were `sync` and `ws` tiles, and stage 3 walked the
     * winner's parameters alone. From the best 64-row pair it walks PIPE
     * (then GEMM2's PIPE and ALOAD) too. */
    if ((st = refine(w, key, p, 0, msg, msg_size)) ||
        (st = find_best(w, key, M, "gemm1=", &b, msg, msg_size)))
        goto done;
    const int64_t winner_bm = b.us < 1e30 ? gemm1_block_m(w, b.text) : 0;
    if (winner_bm > 0)
        st = refine(w, key, p, winner_bm, msg, msg_size);
done:
    free(pick);
    free(pair2);
    return st;
}

static mt_status tune_m(worker *w, int64_t M, char *msg, size_t msg_size)
{
    const mt_tune_opts *o = w->o;
    mt_problem p = o->shape;
    p.M = M;
    mt_db_key key;
    mt_status st = mt_tune_key(o, w->prov.sku, &key, msg, msg_size);
    if (st)
        return st;
    int done = 0;
    if ((st = mt_db_candidate_seen(w->db, &key, M, MT_TUNE_DONE_MARK, &done)))
        return mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(w->db));
    mt_tune_item_state was = {0};
    if (mt_tune_again(o)) {
        int ours = 0;
        if ((st = start_again(w, &key, M, &ours, msg, msg_size)))
            return st;
        done = done && ours;
    } else if (!done && (st = mt_tune_item_state_of(w->db, &key, M, o->run_id, 0, &was))) {
        return mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(w->db));
    }
    if (done) {
        if (o->log && !w->restarted)
            fprintf(o->log, "[%s] M=%lld: tuned already (its completion mark is in the "
                    "database): skipped\n", o->label, (long long)M);
        return MT_OK;
    }
    if (o->log && was.candidates && !w->restarted)
        fprintf(o->log, "[%s] M=%lld: resuming: %d candidates already logged are not measured "
                "again\n", o->label, (long long)M, was.candidates);
    mt_routing routing = MT_ROUTING_UNIFORM;
    uint64_t seed = 0;
    int hit = -1;
    if (o->routing && mt_routing_parse(o->routing, &routing))
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "unknown routing '%s'", o->routing);
    if ((st = mt_tuning_seed(&p, routing, &seed, &hit)))
        return mt_errf(msg, msg_size, st, "out of memory choosing the routing");
    if (o->log)
        fprintf(o->log,
                "[%s] M=%lld: preparing data and reference (routing seed %llu: %d of %lld experts hit)\n",
                o->label, (long long)M, (unsigned long long)seed, hit, (long long)p.E);
    if ((st = w->be.open_item(w->be.self, &p, routing, seed, msg, msg_size)))
        return st;
    char text[1024];
    int retimed = 0;   /* this M's stored pipeline timed again */
    int foreign = 0;   /* this M's stored pipeline is of other templates */
    /* Baselines: the untuned default and cuBLAS. */
    size_t di = mt_find_default(w->defaults, w->ndefaults, &p);
    if (di == (size_t)-1) {
        st = mt_errf(msg, msg_size, MT_ERR_NOT_FOUND, "no default GEMM tile for M=%lld",
                     (long long)M);
        goto done;
    }
    const mt_variant *d1 = by_name(w, w->defaults[di].name, strlen(w->defaults[di].name));
    size_t d2i = d1 ? mt_find_store_sibling(w->all, w->nall, d1) : (size_t)-1;
    if (!d1 || d2i == (size_t)-1) {
        st = mt_errf(msg, msg_size, MT_ERR_NOT_FOUND, "default tile %s is not a valid variant",
                     w->defaults[di].name);
        goto done;
    }
    const mt_variant *d2 = &w->all[d2i];
    pipeline_text("default;", d1, d2, 0, text, sizeof text);
    if ((st = measure_one(w, &key, M, text, d1, d2, msg, msg_size)) ||
        (st = measure_one(w, &key, M, "cublas", NULL, NULL, msg, msg_size)))
        goto done;
    /* --retime: the stored pipelines alone, where this M's own passed its
     * check here; otherwise (none, of other templates, faulted or wrong)
     * the search. */
    int searched = 1;
    if (o->retime) {
        int own_ok = 0;
        if ((st = measure_neighbours(w, &key, M, d1, d2, &retimed, &own_ok, &foreign, msg, msg_size)))
            goto done;
        searched = !(retimed && own_ok);
        if (o->log && retimed)
            fprintf(o->log, "[%s] M=%lld: %s\n", o->label, (long long)M,
                    searched ? "the stored pipeline failed here: the search"
                             : "retimed (the stored pipelines, no search)");
    }
    if (searched && (st = search(w, &key, &p, d1, d2, &retimed, &foreign, msg, msg_size)))
        goto done;
    if ((st = settle_launch(w, &key, M, msg, msg_size)) ||
        (st = final_round(w, &key, M, msg, msg_size)))
        goto done;
    best_scan cb;
    if ((st = find_best(w, &key, M, "cublas", &cb, msg, msg_size)) ||
        (st = store_winner(w, &key, &p, retimed, foreign, cb.us < 1e30 ? cb.us : MT_DB_NO_TIME, msg,
                           msg_size)))
        goto done;
    mt_db_candidate mark = {.key = key, .M = M, .pipeline = MT_TUNE_DONE_MARK, .ok = 1,
                            .time_us = MT_DB_NO_TIME, .rel_err = MT_DB_NO_TIME,
                            .reason = o->run_id[0] ? o->run_id : NULL};
    if ((st = mt_db_record_candidate(w->db, &mark)))
        mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(w->db));
done:
    w->be.close_item(w->be.self);
    return st;
}

mt_status mt_tune_worker(const mt_tune_opts *o, int report_fd, int restarted, char *sku, size_t sku_size,
                         char *msg, size_t msg_size)
{
    worker w;
    memset(&w, 0, sizeof w);
    w.o = o;
    w.fd = report_fd;
    w.restarted = restarted;
    mt_status st;
    const int fake = o->backend && !strcmp(o->backend, "fake");
    st = fake ? mt_tune_backend_fake(o->device, &w.be, msg, msg_size)
              : mt_tune_backend_gpu(o->device, o->reps > 0 ? o->reps : 20, &w.be, msg, msg_size);
    if (st)
        return st;
    if ((st = w.be.provenance(w.be.self, &w.prov, w.arch, msg, msg_size)) ||
        (st = report_sku(&w, sku, sku_size)) ||
        (st = w.be.gemm_variants(w.be.self, &o->shape, 0, &w.all, &w.nall, msg, msg_size)) ||
        (st = w.be.gemm_variants(w.be.self, &o->shape, 1, &w.defaults, &w.ndefaults, msg,
                                 msg_size)) ||
        (st = make_search_set(&w, msg, msg_size)))
        goto done;
    if ((st = mt_db_open(o->db_path, MT_DB_CREATE, &w.db))) {
        mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(w.db));
        goto done;
    }
    if ((st = mt_db_put_provenance(w.db, &w.prov, &w.prov_id))) {
        mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(w.db));
        goto done;
    }
    for (int i = 0; i < o->nM && !st; i++) {
        const int before = w.measured;
        st = tune_m(&w, o->Ms[i], msg, msg_size);
        /* No candidate passed its check there: that M stays unfinished (the
         * summary says so), the others go on; said once, not again by each
         * worker restarted later in the run, which measures nothing there. */
        if (st == MT_ERR_MISMATCH) {
            if (o->log && (w.measured > before || !restarted))
                fprintf(o->log, "[%s] M=%lld: not finished: %s\n", o->label, (long long)o->Ms[i],
                        msg);
            st = MT_OK;
        }
    }
done:
    mt_db_close(w.db);
    for (int g = 0; g < 2; g++)
        if (w.search[g] != w.all)
            free(w.search[g]);
    free(w.all);
    free(w.defaults);
    if (w.be.destroy)
        w.be.destroy(w.be.self);
    return st;
}
