/*
 * Tests of the tuner on the CPU with the fake backend: a whole run into a
 * database, a faulting and a hanging candidate isolated and recorded, resume
 * after the tuner is killed at a random point (nothing finished is lost,
 * at most the candidate in flight is measured again), a database write
 * that fails in the worker not taken for its candidate's fault, a worker
 * that dies with its supervisor, and bad options.
 */
#define _GNU_SOURCE /* prlimit */
#include "tests/support.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "moetune/db.h"
#include "moetune/tuner.h"
#include "tests/db_fixture.h"
#include "tuner/worker.h"

static void opts(mt_tune_opts *o, const char *db)
{
    memset(o, 0, sizeof *o);
    mt_problem_init(&o->shape, 1, 64, 6, 2048, 1408);
    o->label = "test";
    static const int64_t ms[] = {1, 16, 256, 4096};
    memcpy(o->Ms, ms, sizeof ms);
    o->nM = 4;
    o->db_path = db;
    o->backend = "fake";
    o->isolate = 1;
    o->max_candidates = 6;
    o->candidate_timeout_s = 1;
    /* No final round: the tests that count what the fake measured count each
     * pipeline once; test_run_end_to_end and the final round's own test
     * turn it on. */
    o->finalists = -1;
}

/* opts() tuning M alone. */
static void opts_at(mt_tune_opts *o, const char *db, int64_t M)
{
    opts(o, db);
    o->Ms[0] = M;
    o->nM = 1;
}

static int verify_quiet(mt_db *db)
{
    int problems = -1;
    assert_int_equal(mt_db_verify(db, NULL, NULL, &problems), MT_OK);
    return problems;
}

typedef struct cand_scan {
    int total, rejected, faults, timeouts;
    char second[256];   /* gemm1 of the second stage-1 candidate */
    int stage1;
} cand_scan;

static int scan(const mt_db_candidate *c, void *ctx)
{
    cand_scan *s = ctx;
    s->total++;
    if (!c->ok) {
        s->rejected++;
        s->faults += c->reason && !strncmp(c->reason, "fault", 5);
        s->timeouts += c->reason && !strncmp(c->reason, "timeout", 7);
    }
    if (c->M == 256 && !strncmp(c->pipeline, "gemm1=", 6) && ++s->stage1 == 2) {
        const char *end = strstr(c->pipeline, ";gemm2=");
        size_t n = (size_t)(end - (c->pipeline + 6));
        memcpy(s->second, c->pipeline + 6, n);
        s->second[n] = '\0';
    }
    return 0;
}

/* Every candidate row of the database at path through fn, which must
 * verify clean afterwards. */
static void foreach_candidate(const char *path, int (*fn)(const mt_db_candidate *, void *),
                              void *ctx)
{
    mt_db *db = NULL;
    assert_int_equal(mt_db_open(path, MT_DB_READONLY, &db), MT_OK);
    assert_int_equal(mt_db_foreach_candidate(db, fn, ctx), MT_OK);
    assert_int_equal(verify_quiet(db), 0);
    mt_db_close(db);
}

static cand_scan scan_db(const char *path)
{
    cand_scan s;
    memset(&s, 0, sizeof s);
    foreach_candidate(path, scan, &s);
    return s;
}

static void test_run_end_to_end(void **state)
{
    (void)state;
    char path[600], msg[1024];
    snprintf(path, sizeof path, "%s/tune.db", mt_test_tmpdir("tune-e2e"));
    mt_tune_opts o;
    opts(&o, path);
    o.finalists = 0;   /* the default: 4 */
    mt_tune_summary s;
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    assert_int_equal(s.nrows, 4);
    assert_string_equal(s.sku, "FAKE GPU");
    for (int i = 0; i < 4; i++) {
        assert_true(s.rows[i].time_us > 0);
        assert_true(s.rows[i].time_us <= s.rows[i].default_us);   /* never worse than default */
        assert_true(s.rows[i].candidates >= 3);
        assert_non_null(strstr(s.rows[i].gemm1, "grouped_gemm"));
    }
    cand_scan c = scan_db(path);
    assert_int_equal(c.rejected, 0);
    /* A second run finds everything done and measures nothing new. */
    setenv("MT_FAKE_LOG", "/dev/null", 1);
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    unsetenv("MT_FAKE_LOG");
    assert_int_equal(scan_db(path).total, c.total);
    /* --retune of one M measures it again, and the run's winner replaces
     * the entry. Its candidates are not quite the first run's, though the
     * fake numbers are deterministic: the entry of M = 4096, tuned after
     * M = 256 in the first run, joins stage 1b, wins there, and stage 3
     * refines from it (three candidates the first run did not time, two it
     * did are not timed again). */
    char log[700], out[700], line[1024];
    snprintf(log, sizeof log, "%s.measured", path);
    snprintf(out, sizeof out, "%s.log", path);
    o.Ms[0] = 256;
    o.nM = 1;
    o.retune = 1;
    o.log = fopen(out, "w");
    assert_non_null(o.log);
    setenv("MT_FAKE_LOG", log, 1);
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    unsetenv("MT_FAKE_LOG");
    fclose(o.log);
    assert_true(scan_db(path).total >= c.total);
    FILE *f = fopen(log, "r");
    int measured = 0;
    assert_non_null(f);
    while (fgets(line, sizeof line, f))
        measured += strncmp(line, "256 ", 4) == 0 ? 1 : -1000;
    fclose(f);
    assert_true(measured >= 3);
    int replaced = 0, forgot = 0;
    assert_non_null(f = fopen(out, "r"));
    while (fgets(line, sizeof line, f)) {
        forgot += strstr(line, "M=256: tuning again") != NULL;
        replaced += strstr(line, "replaced the stored entry (its pipeline timed again") != NULL;
    }
    fclose(f);
    assert_int_equal(forgot, 1);
    assert_int_equal(replaced, 1);
}

static void test_fault_and_hang_are_isolated(void **state)
{
    (void)state;
    char ref[600], path[600], msg[1024];
    const char *dir = mt_test_tmpdir("tune-fault");
    snprintf(ref, sizeof ref, "%s/ref.db", dir);
    mt_tune_opts o;
    opts(&o, ref);
    mt_tune_summary s;
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    cand_scan c = scan_db(ref);
    assert_true(strlen(c.second) > 0);

    /* The same run where that candidate kills its process, then hangs. */
    const char *envs[] = {"MT_FAKE_FAULT", "MT_FAKE_HANG"};
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/run%d.db", dir, k);
        opts(&o, path);
        setenv(envs[k], c.second, 1);
        assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
        unsetenv(envs[k]);
        assert_true(s.worker_restarts >= 1);
        assert_int_equal(s.nrows, 4);
        cand_scan r = scan_db(path);
        assert_true(r.rejected >= 1);
        assert_true(k == 0 ? r.faults >= 1 : r.timeouts >= 1);
        for (int i = 0; i < 4; i++)
            assert_string_not_equal(s.rows[i].gemm1, c.second);
    }
}

static int count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    int n = 0, ch;
    if (!f)
        return 0;
    while ((ch = fgetc(f)) != EOF)
        n += ch == '\n';
    fclose(f);
    return n;
}

/* Lines measured more than once in the fake backend's log. */
static int repeats(const char *path)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "sort '%s' | uniq -d | wc -l", path);
    FILE *p = popen(cmd, "r");
    int n = -1;
    assert_non_null(p);
    assert_int_equal(fscanf(p, "%d", &n), 1);
    pclose(p);
    return n;
}

static void test_resume_after_kill(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("tune-kill");
    char path[600], log[600], msg[1024];
    srand((unsigned)time(NULL));
    for (int round = 0; round < 3; round++) {
        snprintf(path, sizeof path, "%s/kill%d.db", dir, round);
        snprintf(log, sizeof log, "%s/kill%d.log", dir, round);
        mt_tune_opts o;
        opts(&o, path);
        setenv("MT_FAKE_LOG", log, 1);
        setenv("MT_FAKE_DELAY_MS", "15", 1);
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            setpgid(0, 0);   /* so the kill takes the worker too */
            mt_tune_summary s;
            _exit(mt_tune_run(&o, &s, msg, sizeof msg) == MT_OK ? 0 : 1);
        }
        setpgid(pid, pid);
        /* Kill somewhere in the middle of the run. */
        struct timespec ts = {0, (100 + rand() % 400) * 1000000L};
        nanosleep(&ts, NULL);
        kill(-pid, SIGKILL);
        waitpid(pid, NULL, 0);
        int before = count_lines(log);
        unsetenv("MT_FAKE_DELAY_MS");
        mt_tune_summary s;
        assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
        unsetenv("MT_FAKE_LOG");
        assert_int_equal(s.nrows, 4);
        /* Nothing finished was measured again; at most the one in flight. */
        int again = repeats(log);
        printf("round %d: killed after %d measurements, %d measured twice\n", round, before,
               again);
        assert_true(again <= 1);
        cand_scan c = scan_db(path);
        assert_int_equal(c.rejected, 0);
    }
}

/* --retune tunes each M once per run: a GEMM1 that kills the worker (the
 * second stage-1 candidate at M = 256) restarts it wherever it is timed, and
 * the restarted worker does not tune the M values this run has finished
 * again, nor time a faulting candidate again (recorded as rejected). A
 * second run with --retune starts over. */
static void test_retune_once_across_restarts(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("tune-retune");
    char path[600], log[600], msg[1024];
    snprintf(path, sizeof path, "%s/retune.db", dir);
    snprintf(log, sizeof log, "%s/retune.log", dir);
    mt_tune_opts o;
    mt_tune_summary s;
    opts(&o, path);
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    cand_scan c = scan_db(path);
    assert_true(strlen(c.second) > 0);
    o.retune = 1;
    setenv("MT_FAKE_FAULT", c.second, 1);
    setenv("MT_FAKE_LOG", log, 1);
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    unsetenv("MT_FAKE_FAULT");
    assert_int_equal(s.nrows, 4);
    /* One restart for each pair with the faulting GEMM1 (stage 3 may time
     * it at several M), each recorded once as a fault and not tried again. */
    cand_scan after = scan_db(path);
    assert_true(s.worker_restarts >= 1);
    assert_int_equal(s.worker_restarts, after.faults);
    int first = count_lines(log);
    assert_true(first >= 4 * 3);
    assert_int_equal(repeats(log), 0);
    /* Again: every M is tuned again (the faulting candidate, a rejection
     * of the last run now forgotten, is timed too and may change the
     * stages' path, so the counts need not be equal). */
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    unsetenv("MT_FAKE_LOG");
    assert_true(count_lines(log) - first >= 4 * 3);
    assert_true(repeats(log) >= first - 2);
}

static void test_bad_options(void **state)
{
    (void)state;
    char path[600], msg[1024];
    snprintf(path, sizeof path, "%s/bad.db", mt_test_tmpdir("tune-bad"));
    mt_tune_opts o;
    mt_tune_summary s;
    opts(&o, path);
    o.nM = 0;
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_ERR_INVALID_ARG);
    opts(&o, path);
    o.shape.topk = 99;
    assert_int_not_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    assert_non_null(strstr(msg, "topk"));
    opts(&o, "/proc/no/such/dir/x.db");
    assert_int_not_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    assert_non_null(strstr(msg, "/proc/no/such/dir/x.db"));
    opts(&o, path);
    o.routing = "sideways";
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_ERR_INVALID_ARG);
    opts(&o, path);
    o.Ms[2] = o.Ms[0];   /* the same M twice: refused, not tuned and printed twice */
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(msg, "M=1 is listed twice"));
    opts(&o, path);
    o.ndevices = 2, o.devices[0] = 3, o.devices[1] = 3;
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(msg, "device 3 is listed twice"));
}

/* The BLOCK_M of the first fake variant name in text (fake names put it
 * right after the epilogue: ..._silu_64_128_...); 0 if there is none. */
static int fake_block_m(const char *text)
{
    static const char *const epilogues[] = {"_store_", "_silu_", "_gelu_"};
    const char *first = NULL;
    size_t skip = 0;
    for (int i = 0; i < 3; i++) {
        const char *at = strstr(text, epilogues[i]);
        if (at && (!first || at < first))
            first = at, skip = strlen(epilogues[i]);
    }
    int bm = 0;
    return first && sscanf(first + skip, "%d", &bm) == 1 ? bm : 0;
}

/* Counts the pipelines of the search (all but the "default;" one and
 * cuBLAS) whose GEMM1 or GEMM2 is not a BLOCK_M=16 tile. */
static int scan_only_m16(const mt_db_candidate *c, void *ctx)
{
    int *bad = ctx;
    const char *g2 = strstr(c->pipeline, ";gemm2=");
    if (!strncmp(c->pipeline, "gemm1=", 6) && g2)
        *bad += fake_block_m(c->pipeline) != 16 || fake_block_m(g2) != 16;
    return 0;
}

static void test_param_filter(void **state)
{
    (void)state;
    char path[600], msg[1024];
    snprintf(path, sizeof path, "%s/only.db", mt_test_tmpdir("tune-only"));
    mt_tune_opts o;
    mt_tune_summary s;
    opts(&o, path);
    o.only[0].name = "BLOCK_M", o.only[0].value = "16";
    o.nonly = 1;
    o.max_candidates = 12;
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    assert_int_equal(s.nrows, 4);
    int bad = 0;
    foreach_candidate(path, scan_only_m16, &bad);
    assert_int_equal(bad, 0);
    for (int i = 0; i < s.nrows; i++)
        assert_true(s.rows[i].candidates >= 4);   /* default, cuBLAS and the search */
    for (int i = 0; i < s.nrows; i++)
        if (!strcmp(s.rows[i].winner, "moetune"))
            assert_int_equal(fake_block_m(s.rows[i].gemm1), 16);
    /* A parameter no variant has, and a value that admits nothing. */
    opts(&o, path);
    o.only[0].name = "NO_SUCH", o.only[0].value = "1";
    o.nonly = 1;
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_ERR_INVALID_ARG);
    o.only[0].name = "BLOCK_M", o.only[0].value = "17";
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_ERR_INVALID_ARG);
}

/* Fake variant names end in the STAGES value: "_<stages>". */
static int ends_in(const char *name, size_t len, const char *tail)
{
    const size_t n = strlen(tail);
    return len > n && !strncmp(name + len - n, tail, n);
}

/* Of the search's pipelines (not the "default;" one, not cuBLAS): how many
 * have a GEMM1 (a GEMM2) with 3 stages, and how many in all. */
typedef struct stages_scan {
    int n, g1_s3, g2_s3;
} stages_scan;

static int scan_stages(const mt_db_candidate *c, void *ctx)
{
    stages_scan *s = ctx;
    const char *g2 = strstr(c->pipeline, ";gemm2=");
    if (strncmp(c->pipeline, "gemm1=", 6) || !g2)
        return 0;
    s->n++;
    s->g1_s3 += ends_in(c->pipeline, (size_t)(g2 - c->pipeline), "_3");
    s->g2_s3 += ends_in(g2, 1 + strcspn(g2 + 1, ";"), "_3");   /* a launch=late may follow */
    return 0;
}

/* --param gemm1:NAME=VALUE and gemm2:NAME=VALUE filter one GEMM's
 * candidates only; the other GEMM's are searched as usual. */
static void test_param_filter_per_gemm(void **state)
{
    (void)state;
    char path[600], msg[1024];
    for (int gemm = 1; gemm <= 2; gemm++) {
        snprintf(path, sizeof path, "%s/only-gemm%d.db", mt_test_tmpdir("tune-only-gemm"), gemm);
        mt_tune_opts o;
        mt_tune_summary s;
        opts_at(&o, path, 256);
        o.only[0].name = "STAGES", o.only[0].value = "3", o.only[0].role = gemm;
        o.nonly = 1;
        assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
        stages_scan sc = {0};
        foreach_candidate(path, scan_stages, &sc);
        assert_true(sc.n >= 4);
        /* The filtered GEMM has 3 stages throughout, the other not. */
        assert_int_equal(gemm == 1 ? sc.g1_s3 : sc.g2_s3, sc.n);
        assert_true((gemm == 1 ? sc.g2_s3 : sc.g1_s3) < sc.n);
    }
    /* A role that names no GEMM. */
    mt_tune_opts o;
    mt_tune_summary s;
    opts(&o, path);
    o.only[0].name = "STAGES", o.only[0].value = "3", o.only[0].role = 3;
    o.nonly = 1;
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_ERR_INVALID_ARG);
}

/* Timed pipelines of a tuned GEMM1 ("gemm1=" ones): how many, and how
 * many of them with the fused activation. */
typedef struct fused_scan {
    int n, fused;
} fused_scan;

static int scan_fused(const mt_db_candidate *c, void *ctx)
{
    fused_scan *s = ctx;
    if (strncmp(c->pipeline, "gemm1=", 6))
        return 0;
    char gemm1[300];
    mt_strlcpy(gemm1, c->pipeline, sizeof gemm1);
    gemm1[strcspn(gemm1, ";")] = '\0';
    s->n++;
    s->fused += strstr(gemm1, "_silu_") != NULL;
    return 0;
}

/* --param gemm1:epilogue=silu: the search times fused GEMM1 tiles, each
 * with its GEMM2 (the store tiles the filter leaves out of GEMM1's part
 * still serve as siblings), not the default and cuBLAS alone. */
static void test_param_filter_fused_gemm1(void **state)
{
    (void)state;
    char path[600], msg[1024];
    snprintf(path, sizeof path, "%s/fused.db", mt_test_tmpdir("tune-fused-gemm1"));
    mt_tune_opts o;
    mt_tune_summary s;
    opts_at(&o, path, 64);
    o.only[0].name = "epilogue", o.only[0].value = "silu", o.only[0].role = 1;
    o.nonly = 1;
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    fused_scan sc = {0};
    foreach_candidate(path, scan_fused, &sc);
    printf("  %d GEMM1 pipelines timed, %d fused\n", sc.n, sc.fused);
    assert_true(sc.n >= 4);
    assert_int_equal(sc.fused, sc.n);
}

/* Candidates of one M: counts those whose pipeline is `text`, or (text
 * empty) keeps the first "gemm1=" one in it. */
typedef struct pair_scan {
    int64_t M;
    char text[600];
    int found;
} pair_scan;

static int scan_pair(const mt_db_candidate *c, void *ctx)
{
    pair_scan *s = ctx;
    if (c->M != s->M)
        return 0;
    if (s->text[0])
        s->found += !strcmp(c->pipeline, s->text);
    else if (!strncmp(c->pipeline, "gemm1=", 6))
        mt_strlcpy(s->text, c->pipeline, sizeof s->text);
    return 0;
}

/* The correct tuned candidates of one M: texts and times, and the
 * fastest whose GEMM pair differs from `not` ("gemm1=A;gemm2=B"). */
typedef struct times_scan {
    int64_t M;
    const char *not;
    int n;
    char text[256][600];
    double us[256];
    int best;   /* index of that fastest, -1 */
} times_scan;

static int same_pair(const char *text, const char *pair)
{
    return !strncmp(text, pair, strlen(pair)) && (!text[strlen(pair)] || text[strlen(pair)] == ';');
}

static int scan_times(const mt_db_candidate *c, void *ctx)
{
    times_scan *s = ctx;
    if (c->M != s->M || !c->ok || strncmp(c->pipeline, "gemm1=", 6) || s->n == 256)
        return 0;
    mt_strlcpy(s->text[s->n], c->pipeline, sizeof s->text[0]);
    s->us[s->n] = c->time_us;
    if (!same_pair(c->pipeline, s->not) && (s->best < 0 || c->time_us < s->us[s->best]))
        s->best = s->n;
    s->n++;
    return 0;
}

static times_scan *scan_times_of(const char *path, int64_t M, const char *not)
{
    times_scan *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->M = M;
    s->not = not;
    s->best = -1;
    foreach_candidate(path, scan_times, s);
    return s;
}

/* The final round: a pair whose first time reads 0.85 of its time
 * (MT_FAKE_LUCKY) wins a run without the round, and with it (the default)
 * is timed again, keeps its true time, and loses to the true winner, which
 * its lucky time pushed out of the first pass's 3 % margin. */
static void test_final_round_beats_a_lucky_first_time(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("tune-final");
    char ref[600], path[600], msg[1024], winner[600], lucky[600], pair[600];
    mt_tune_opts o;
    mt_tune_summary s;
    snprintf(ref, sizeof ref, "%s/ref.db", dir);
    opts_at(&o, ref, 4096);
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    assert_string_equal(s.rows[0].winner, "moetune");
    snprintf(winner, sizeof winner, "gemm1=%s;gemm2=%s", s.rows[0].gemm1, s.rows[0].gemm2);
    /* The runner-up: the fastest other pair, within 1/0.85 of the winner. */
    times_scan *t0 = scan_times_of(ref, 4096, winner);
    assert_true(t0->best >= 0);
    assert_true(t0->us[t0->best] < s.rows[0].time_us / 0.85);
    const char *text = t0->text[t0->best], *g2 = strstr(text, ";gemm2=") + 7;
    const int n1 = (int)(g2 - 7 - (text + 6)), n2 = (int)strcspn(g2, ";");
    snprintf(pair, sizeof pair, "gemm1=%.*s;gemm2=%.*s", n1, text + 6, n2, g2);
    snprintf(lucky, sizeof lucky, "%.*s %.*s", n1, text + 6, n2, g2);
    setenv("MT_FAKE_LUCKY", lucky, 1);
    for (int round = 0; round < 2; round++) {
        snprintf(path, sizeof path, "%s/run%d.db", dir, round);
        opts_at(&o, path, 4096);
        o.finalists = round ? 0 : -1;
        assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
        char stored[600];
        snprintf(stored, sizeof stored, "gemm1=%s;gemm2=%s", s.rows[0].gemm1, s.rows[0].gemm2);
        /* The lucky pair's texts that both runs timed: the same times
         * with the round, a lucky one without. */
        times_scan *t = scan_times_of(path, 4096, "");
        int common = 0, differ = 0;
        for (int i = 0; i < t->n; i++)
            for (int j = 0; j < t0->n; j++)
                if (same_pair(t->text[i], pair) && !strcmp(t->text[i], t0->text[j])) {
                    common++;
                    differ += t->us[i] != t0->us[j];
                }
        assert_true(common >= 1);
        if (round == 0) {
            assert_true(same_pair(stored, pair));   /* the setup: lucky wins without the round */
            assert_true(differ >= 1);
        } else {
            assert_false(same_pair(stored, pair));
            assert_string_equal(stored, winner);   /* pushed out of the first pass, found by the next */
            assert_int_equal(differ, 0);
            assert_true(s.rows[0].time_us <= t0->us[t0->best]);
        }
        free(t);
    }
    unsetenv("MT_FAKE_LUCKY");
    free(t0);
}

/* The final round's pipeline that faults, hangs or reads wrong when timed
 * again: what went wrong is recorded against it (rejected, its one time
 * gone), a fault or a hang costs the worker, not the run, and the entry is
 * another pair's median. */
typedef struct again_scan {
    const char *pair;     /* "gemm1=A;gemm2=B" */
    const char *reason;   /* how its rejections begin */
    const char *entry;    /* the entry's pipeline text */
    int rejected, as_expected, pair_medians, entry_median;
    double entry_us;
} again_scan;

static int scan_again(const mt_db_candidate *c, void *ctx)
{
    again_scan *s = ctx;
    const int median = c->ok && c->reason && !strcmp(c->reason, MT_TUNE_FINAL_NOTE);
    if (same_pair(c->pipeline, s->pair)) {
        s->pair_medians += median;
        if (!c->ok) {
            s->rejected++;
            s->as_expected += c->reason && !strncmp(c->reason, s->reason, strlen(s->reason));
        }
    }
    if (!strcmp(c->pipeline, s->entry)) {
        s->entry_median = median;
        s->entry_us = c->time_us;
    }
    return 0;
}

static void test_final_round_fault_hang_wrong(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("tune-again");
    char path[600], msg[1024], pair[600], again[600];
    mt_tune_opts o;
    mt_tune_summary s;
    snprintf(path, sizeof path, "%s/ref.db", dir);
    opts_at(&o, path, 4096);
    o.finalists = 0;
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    assert_string_equal(s.rows[0].winner, "moetune");
    snprintf(pair, sizeof pair, "gemm1=%s;gemm2=%s", s.rows[0].gemm1, s.rows[0].gemm2);
    static const char *const modes[] = {"fault", "hang", "wrong"};
    static const char *const reasons[] = {"fault", "timeout", "fake: wrong the second time"};
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s/%s.db", dir, modes[k]);
        snprintf(again, sizeof again, "%s %s %s", modes[k], s.rows[0].gemm1, s.rows[0].gemm2);
        setenv("MT_FAKE_AGAIN", again, 1);
        opts_at(&o, path, 4096);
        o.finalists = 0;
        mt_tune_summary r;
        assert_int_equal(mt_tune_run(&o, &r, msg, sizeof msg), MT_OK);
        unsetenv("MT_FAKE_AGAIN");
        assert_int_equal(r.nrows, 1);
        if (k < 2)
            assert_true(r.worker_restarts >= 1);
        else
            assert_int_equal(r.worker_restarts, 0);
        /* The pair is rejected for what went wrong, in the launch order
         * the round timed again (in both, where both were finalists: the
         * fake goes wrong at a text's second time in a process), keeps no
         * median, and the entry is another pair's median. */
        char entry[600];
        snprintf(entry, sizeof entry, "gemm1=%s;gemm2=%s%s", r.rows[0].gemm1, r.rows[0].gemm2,
                 r.rows[0].launch_late ? MT_TUNE_LATE_SUFFIX : "");
        again_scan a = {.pair = pair, .reason = reasons[k], .entry = entry};
        foreach_candidate(path, scan_again, &a);
        assert_true(a.rejected >= 1);
        assert_int_equal(a.as_expected, a.rejected);
        assert_int_equal(a.pair_medians, 0);
        assert_true(strcmp(r.rows[0].gemm1, s.rows[0].gemm1) || strcmp(r.rows[0].gemm2, s.rows[0].gemm2));
        assert_true(a.entry_median);
        assert_true(a.entry_us == r.rows[0].time_us);
    }
}

/* opts_at(M) with max_candidates into a new database DIR/NAME.db (its
 * path into path): one row, the winner moetune's. */
static void tune_one_m(const char *name, int64_t M, int max_candidates, char *path, size_t path_size,
                       mt_tune_summary *s)
{
    char msg[1024];
    snprintf(path, path_size, "%s/%s.db", mt_test_tmpdir(name), name);
    mt_tune_opts o;
    opts_at(&o, path, M);
    o.max_candidates = max_candidates;
    assert_int_equal(mt_tune_run(&o, s, msg, sizeof msg), MT_OK);
    assert_int_equal(s->nrows, 1);
    assert_string_equal(s->rows[0].winner, "moetune");
}

/* Stage 3 times the winner's GEMM1 with the other pipeline depth (fake
 * names end in STAGES: 3 or 4) under the winner's GEMM2: a pair that the
 * first two stages do not time here. */
static void test_refines_the_winner(void **state)
{
    (void)state;
    char path[600];
    mt_tune_summary s;
    tune_one_m("tune-refine", 4096, 1, path, sizeof path, &s);
    pair_scan sc = {.M = 4096};
    char g1[256];
    mt_strlcpy(g1, s.rows[0].gemm1, sizeof g1);
    char *last = g1 + strlen(g1) - 1;
    assert_true(*last == '3' || *last == '4');
    *last = *last == '3' ? '4' : '3';
    snprintf(sc.text, sizeof sc.text, "gemm1=%s;gemm2=%s", g1, s.rows[0].gemm2);
    foreach_candidate(path, scan_pair, &sc);
    assert_int_equal(sc.found, 1);
}

typedef struct runner_up_scan {
    int64_t M;
    int skip_block_m;   /* the winner's */
    int others, refined;
} runner_up_scan;

/* Counts the pairs of another BLOCK_M than the winner's, and those of them
 * whose two GEMMs differ in pipeline depth (the last character of a fake
 * name): the first stages pair a GEMM1 with its GEMM2 twin, so only stage
 * 3 times such a pair, and stage 2 only under the winner's GEMM1. */
static int scan_runner_up(const mt_db_candidate *c, void *ctx)
{
    runner_up_scan *s = ctx;
    const char *sep = strstr(c->pipeline, ";gemm2=");
    if (c->M != s->M || !c->ok || strncmp(c->pipeline, "gemm1=", 6) || !sep ||
        fake_block_m(c->pipeline) == s->skip_block_m)
        return 0;
    const char *g2 = sep + 7, *g2_end = g2 + strcspn(g2, ";");
    s->others++;
    s->refined += sep[-1] != g2_end[-1];
    return 0;
}

/* Stage 3 refines the best pair of another BLOCK_M than the winner's too
 * (here the first stages time 128- and 64-row pairs and the 128-row ones
 * win): pairs of 64-row tiles of two pipeline depths are timed. Stage 2
 * pairs GEMM2 tiles with stage 1's best GEMM1, a 128-row one here (the
 * winner's BLOCK_M is asserted), so its pairs do not count. */
static void test_refines_the_runner_up_block_m(void **state)
{
    (void)state;
    char path[600];
    mt_tune_summary s;
    tune_one_m("tune-runner-up", 4096, 3, path, sizeof path, &s);
    char winner[600];
    snprintf(winner, sizeof winner, "gemm1=%s;gemm2=%s", s.rows[0].gemm1, s.rows[0].gemm2);
    runner_up_scan r = {.M = 4096, .skip_block_m = fake_block_m(winner)};
    assert_int_equal(r.skip_block_m, 128);
    foreach_candidate(path, scan_runner_up, &r);
    assert_true(r.others >= 1);
    assert_true(r.refined >= 1);
}

/* Stage 4: the best pipeline is timed launched the other way too, and the
 * entry keeps the faster (the fake's MT_FAKE_LATE: the time launched late
 * over the time launched early; by default late is slower). A retune times
 * the stored entry again in its own launch mode (stage 1b). */
static void test_settles_the_launch(void **state)
{
    (void)state;
    char path[600], log[700], line[1024], msg[1024];
    const struct { const char *factor; int late; } cases[] = {{NULL, 0}, {"0.9", 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(path, sizeof path, "%s/launch%zu.db", mt_test_tmpdir("tune-launch"), i);
        mt_tune_opts o;
        mt_tune_summary s;
        opts_at(&o, path, 4096);
        if (cases[i].factor)
            setenv("MT_FAKE_LATE", cases[i].factor, 1);
        assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
        mt_db_key key;
        assert_int_equal(mt_db_key_from_problem(&o.shape, s.sku, o.routing, &key), MT_OK);
        mt_db *db = NULL;
        mt_db_entry e;
        assert_int_equal(mt_db_open(path, MT_DB_READONLY, &db), MT_OK);
        assert_int_equal(mt_db_lookup(db, &key, 4096, &e, NULL), MT_OK);
        mt_db_close(db);
        assert_string_equal(e.pipeline.backend, "moetune");
        assert_int_equal(e.pipeline.launch_late, cases[i].late);
        /* Both launches of the winning pair were timed. */
        pair_scan early = {.M = 4096}, late = {.M = 4096};
        snprintf(early.text, sizeof early.text, "gemm1=%s;gemm2=%s", mt_db_pipeline_kernel(&e.pipeline, "gemm1"),
                 mt_db_pipeline_kernel(&e.pipeline, "gemm2"));
        assert_true(strlen(early.text) + 12 < sizeof late.text);
        memcpy(late.text, early.text, strlen(early.text));
        strcat(late.text, ";launch=late");
        foreach_candidate(path, scan_pair, &early);
        foreach_candidate(path, scan_pair, &late);
        assert_int_equal(early.found, 1);
        assert_int_equal(late.found, 1);
        /* Retuned: the stored pair is timed in its launch mode (stage 1b),
         * and when that is late and wins there, stages 2 and 3 time their
         * candidates late too, so more than stage 1b's and stage 4's two
         * lines are late; otherwise only stage 4's one is. */
        snprintf(log, sizeof log, "%s.measured", path);
        setenv("MT_FAKE_LOG", log, 1);
        o.retune = 1;
        assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
        unsetenv("MT_FAKE_LOG");
        unsetenv("MT_FAKE_LATE");
        char want[700];
        snprintf(want, sizeof want, "4096 %s %s%s\n", mt_db_pipeline_kernel(&e.pipeline, "gemm1"),
                 mt_db_pipeline_kernel(&e.pipeline, "gemm2"), cases[i].late ? " late" : "");
        FILE *f = fopen(log, "r");
        int seen = 0, late_lines = 0;
        assert_non_null(f);
        while (fgets(line, sizeof line, f)) {
            seen += !strcmp(line, want);
            late_lines += strstr(line, " late\n") != NULL;
        }
        fclose(f);
        assert_int_equal(seen, 1);
        if (cases[i].late)
            assert_true(late_lines > 2);
        else
            assert_int_equal(late_lines, 1);
    }
}

/* Put M = 4096's entry at M with time_us, GEMM1 and GEMM2 renamed (g1 NULL:
 * kept). */
static void put_pair_at(const char *path, const mt_db_key *key, int64_t M, const char *g1,
                        const char *g2, double time_us)
{
    mt_db *db = NULL;
    mt_db_entry e;
    int64_t prov = 0;
    assert_int_equal(mt_db_open(path, 0, &db), MT_OK);
    assert_int_equal(mt_db_lookup(db, key, 4096, &e, NULL), MT_OK);
    assert_int_equal(mt_db_put_provenance(db, &e.prov, &prov), MT_OK);
    e.M = M;
    e.time_us = time_us;
    for (int i = 0; i < e.pipeline.nsteps; i++) {
        mt_db_step *st = &e.pipeline.steps[i];
        if (g1 && (!strcmp(st->role, "gemm1") || !strcmp(st->role, "gemm2")))
            mt_strlcpy(st->kernel, st->role[4] == '1' ? g1 : g2, sizeof st->kernel);
    }
    assert_int_equal(mt_db_put_entry(db, &e, prov, NULL), MT_OK);
    mt_db_close(db);
}

/* name with its tile values `from` replaced by `to` (fake names). */
static void retile(const char *name, const char *from, const char *to, char *out, size_t size)
{
    const char *at = strstr(name, from);
    assert_non_null(at);
    snprintf(out, size, "%.*s%s%s", (int)(at - name), name, to, at + strlen(from));
}

/* Stage 1b: tuning an M times the pipelines stored at it and at its
 * nearest tuned neighbours, and the run's winner replaces the stored
 * entry. The pair stored at M = 2048 is a 128-row tile with the other
 * STAGES and BLOCK_N than the default set's (the best that a --param
 * filtered run times at M = 4096), which no stage at M = 16 reaches by
 * itself: the model ranks small row blocks first, stage 2 keeps the best
 * GEMM1's BLOCK_M, stage 3 varies STAGES of that. An entry at M = 256 whose
 * GEMM1 is no variant any more (other templates) is passed over without
 * error, so M = 2048 is the neighbour above; below, M = 8 is the nearest
 * and M = 4 is not timed. The
 * entry at M = 16 itself holds M = 4096's pair at 0.5 us (as if from a
 * faster run): it is timed again and replaced. */
static void test_times_the_neighbours_winners(void **state)
{
    (void)state;
    char path[600], msg[1024];
    snprintf(path, sizeof path, "%s/neighbours.db", mt_test_tmpdir("tune-neighbours"));
    mt_tune_opts o;
    mt_tune_summary s;
    opts_at(&o, path, 4096);
    o.only[0].name = "BLOCK_M", o.only[0].value = "128";
    o.only[1].name = "BLOCK_N", o.only[1].value = "64";
    o.only[2].name = "STAGES", o.only[2].value = "3";
    o.nonly = 3;
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    assert_int_equal(s.nrows, 1);
    pair_scan want = {.M = 4096};
    foreach_candidate(path, scan_pair, &want);
    assert_non_null(strstr(want.text, "_128_64_32_8_2_2_3;"));   /* fake names: the values */
    char g1[256], *g2 = strstr(want.text, ";gemm2=");
    assert_non_null(g2);
    mt_strlcpy(g1, want.text + 6, (size_t)(g2 - want.text) - 6 + 1);
    g2 += 7;

    mt_db_key key;
    assert_int_equal(mt_db_key_from_problem(&o.shape, s.sku, o.routing, &key), MT_OK);
    put_pair_at(path, &key, 2048, g1, g2, 1000.0);
    put_pair_at(path, &key, 256, "mtk_grouped_gemm_retired_tile", g2, 1000.0);
    put_pair_at(path, &key, 16, NULL, NULL, 0.5);   /* M = 4096's pair */
    /* Below M = 16: the nearest (M = 8) is timed, not M = 4. */
    char near1[256], near2[256], far1[256], far2[256];
    retile(g1, "_128_64_32_8_2_2_3", "_128_128_32_8_2_2_3", near1, sizeof near1);
    retile(g2, "_128_64_32_8_2_2_3", "_128_128_32_8_2_2_3", near2, sizeof near2);
    retile(g1, "_128_64_32_8_2_2_3", "_64_64_32_8_2_2_3", far1, sizeof far1);
    retile(g2, "_128_64_32_8_2_2_3", "_64_64_32_8_2_2_3", far2, sizeof far2);
    put_pair_at(path, &key, 8, near1, near2, 1000.0);
    put_pair_at(path, &key, 4, far1, far2, 1000.0);

    o.nonly = 0;
    o.Ms[0] = 16;
    o.max_candidates = 1;
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    assert_int_equal(s.nrows, 1);
    want.M = 16;
    want.found = 0;
    /* Not foreach_candidate: the entries put by hand name kernels that the
     * database does not store, which its verify reports. */
    mt_db *db = NULL;
    assert_int_equal(mt_db_open(path, MT_DB_READONLY, &db), MT_OK);
    assert_int_equal(mt_db_foreach_candidate(db, scan_pair, &want), MT_OK);
    assert_int_equal(want.found, 1);
    pair_scan stored = {.M = 16};
    mt_db_entry e;
    int exact = 0;
    assert_int_equal(mt_db_lookup(db, &key, 4096, &e, NULL), MT_OK);
    snprintf(stored.text, sizeof stored.text, "gemm1=%s;gemm2=%s",
             mt_db_pipeline_kernel(&e.pipeline, "gemm1"), mt_db_pipeline_kernel(&e.pipeline, "gemm2"));
    assert_string_not_equal(stored.text, want.text);
    assert_int_equal(mt_db_foreach_candidate(db, scan_pair, &stored), MT_OK);
    assert_int_equal(stored.found, 1);
    pair_scan below = {.M = 16}, far = {.M = 16};
    snprintf(below.text, sizeof below.text, "gemm1=%s;gemm2=%s", near1, near2);
    snprintf(far.text, sizeof far.text, "gemm1=%s;gemm2=%s", far1, far2);
    assert_int_equal(mt_db_foreach_candidate(db, scan_pair, &below), MT_OK);
    assert_int_equal(mt_db_foreach_candidate(db, scan_pair, &far), MT_OK);
    assert_int_equal(below.found, 1);
    assert_int_equal(far.found, 0);
    /* The stored entry at M = 16 (0.5 us, "another run") was timed again
     * with the rest: the run's winner replaced it. */
    assert_int_equal(mt_db_lookup(db, &key, 16, &e, &exact), MT_OK);
    assert_int_equal(exact, 1);
    assert_true(e.time_us > 0.5);
    assert_true(fabs(e.time_us - s.rows[0].time_us) < 1e-9);
    mt_db_close(db);
}

/* Lines of the fake backend's measurement log (MT_FAKE_LOG) for M, -1 if
 * any line is of another M. */
static int measured_at(const char *log, int64_t M)
{
    char line[1024], want[32];
    int n = 0, other = 0;
    snprintf(want, sizeof want, "%lld ", (long long)M);
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f))
        strncmp(line, want, strlen(want)) == 0 ? n++ : other++;
    fclose(f);
    return other ? -1 : n;
}

/* Lines of path that contain needle. */
static int lines_with(const char *path, const char *needle)
{
    char line[1024];
    int n = 0;
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

/* One run of o (its log into out, the fake backend's measurements into
 * measured, both new); the summary's first row. */
static mt_tune_row run_logged(mt_tune_opts *o, const char *out, const char *measured)
{
    char msg[1024];
    mt_tune_summary s;
    remove(measured);   /* the fake backend appends */
    o->log = fopen(out, "w");
    assert_non_null(o->log);
    setenv("MT_FAKE_LOG", measured, 1);
    assert_int_equal(mt_tune_run(o, &s, msg, sizeof msg), MT_OK);
    unsetenv("MT_FAKE_LOG");
    fclose(o->log);
    o->log = NULL;
    assert_int_equal(s.nrows, 1);
    return s.rows[0];
}

/* --retune and --retime at an M whose stored entry has kernels of other
 * templates (stage 1b cannot time it again): the full search, and the run's
 * winner replaces it, though the stored time (0.5 us, from another run) is
 * lower; otherwise such an entry could never be tuned away. */
static void test_retune_replaces_foreign_entry(void **state)
{
    (void)state;
    for (int retime = 0; retime < 2; retime++) {
        char path[600], out[700], measured[700], want[200], msg[1024];
        snprintf(path, sizeof path, "%s/foreign-%d.db", mt_test_tmpdir("tune-foreign"), retime);
        snprintf(out, sizeof out, "%s.log", path);
        snprintf(measured, sizeof measured, "%s.measured", path);
        mt_tune_opts o;
        mt_tune_summary s;
        opts(&o, path);
        o.nM = 2;
        o.Ms[0] = 16;
        o.Ms[1] = 4096;
        assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
        mt_db_key key;
        assert_int_equal(mt_db_key_from_problem(&o.shape, s.sku, o.routing, &key), MT_OK);
        put_pair_at(path, &key, 16, "mtk_grouped_gemm_retired_tile", "mtk_grouped_gemm_retired_tile", 0.5);
        o.nM = 1;
        o.retune = !retime;
        o.retime = retime;
        const mt_tune_row r = run_logged(&o, out, measured);
        /* The search: a retime alone times at most the default, three stored
         * pipelines and one launch order more. */
        assert_true(measured_at(measured, 16) > 5);
        snprintf(want, sizeof want,
                 "M=16    replaced the stored entry (%s: its kernels are no variants of these templates",
                 retime ? "retime" : "retune");
        assert_int_equal(lines_with(out, want), 1);
        assert_int_equal(lines_with(out, "retimed"), 0);
        mt_db *db = NULL;
        mt_db_entry e;
        int exact = 0;
        assert_int_equal(mt_db_open(path, MT_DB_READONLY, &db), MT_OK);
        assert_int_equal(mt_db_lookup(db, &key, 16, &e, &exact), MT_OK);
        assert_int_equal(exact, 1);
        assert_true(fabs(e.time_us - r.time_us) < 1e-9 && e.time_us > 0.5);
        assert_string_not_equal(mt_db_pipeline_kernel(&e.pipeline, "gemm1"), "mtk_grouped_gemm_retired_tile");
        mt_db_close(db);
    }
}

/* --retune and --retime at an M that an earlier run left without its
 * completion mark (cut short within it, as a call's time limit does) start
 * it afresh: the earlier run's candidates, the default's time among them,
 * are forgotten, not resumed (resumed, a retune timed only what stage 1b
 * added, and the entry kept the earlier run's times). A plain run still
 * resumes such an M. */
static void test_tune_again_forgets_a_cut_short_run(void **state)
{
    (void)state;
    for (int retime = 0; retime < 2; retime++) {
        char path[600], out[700], measured[700], want[200];
        snprintf(path, sizeof path, "%s/cut-%d.db", mt_test_tmpdir("tune-cut"), retime);
        snprintf(out, sizeof out, "%s.log", path);
        snprintf(measured, sizeof measured, "%s.measured", path);
        mt_tune_opts o;
        opts_at(&o, path, 256);
        run_logged(&o, out, measured);
        const int fresh = measured_at(measured, 256);
        mt_fix_sql(path, "DELETE FROM candidate WHERE pipeline = 'item-complete'");
        run_logged(&o, out, measured);   /* plain: resumed */
        const int resumed = measured_at(measured, 256);
        assert_int_equal(lines_with(out, "tuning again"), 0);
        assert_true(resumed < fresh);
        mt_fix_sql(path, "DELETE FROM candidate WHERE pipeline = 'item-complete'");
        const int left = scan_db(path).total;   /* the first run's and the resumed run's */
        o.retune = !retime;
        o.retime = retime;
        run_logged(&o, out, measured);
        snprintf(want, sizeof want, "M=256: tuning again (%d candidates of an earlier run forgotten)", left);
        assert_int_equal(lines_with(out, want), 1);
        /* What the first run timed, or (a retime) the default and the stored pipelines. */
        assert_true(measured_at(measured, 256) >= (retime ? 2 : fresh));
        /* A second such run forgets this one's candidates in turn, here
         * with this one cut short too (its start mark alone left). */
        mt_fix_sql(path, "DELETE FROM candidate WHERE pipeline = 'item-complete'");
        const int mine = scan_db(path).total - 1;
        run_logged(&o, out, measured);
        snprintf(want, sizeof want, "M=256: tuning again (%d candidates of an earlier run forgotten)", mine);
        assert_int_equal(lines_with(out, want), 1);
    }
}

/* --retime at an M an earlier run tuned to a pipeline of its own (not the
 * default) times that pipeline again, with the default and the neighbours'
 * stored pipelines, no search, and the fastest replaces the entry: a third
 * or less of what --retune measures there. Where the stored pipeline fails
 * (here it kills the worker), the full search. */
static void test_retime_times_the_stored_pipelines(void **state)
{
    (void)state;
    char path[600], out[700], log[700], msg[1024];
    const char *dir = mt_test_tmpdir("tune-retime");
    snprintf(path, sizeof path, "%s/retime.db", dir);
    snprintf(out, sizeof out, "%s/retime.log", dir);
    snprintf(log, sizeof log, "%s/retime.measured", dir);
    mt_tune_opts o;
    mt_tune_summary s;
    opts(&o, path);
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    int i = 1;   /* an M after the first, with one above it, whose winner is its own pipeline */
    while (i + 1 < s.nrows && strcmp(s.rows[i].winner, "moetune"))
        i++;
    assert_true(i + 1 < s.nrows);
    const mt_tune_row *own = &s.rows[i], *above = &s.rows[i + 1];
    const int64_t M = own->M;
    char stored[600], neighbour[600], said[100];
    snprintf(stored, sizeof stored, "%lld %s %s%s\n", (long long)M, own->gemm1, own->gemm2,
             own->launch_late ? " late" : "");
    snprintf(neighbour, sizeof neighbour, "%lld %s %s%s\n", (long long)M, above->gemm1, above->gemm2,
             above->launch_late ? " late" : "");
    snprintf(said, sizeof said, "M=%lld: retimed (the stored pipelines, no search)", (long long)M);

    opts_at(&o, path, M);
    o.retime = 1;
    const mt_tune_row r = run_logged(&o, out, log);
    const int retimed = measured_at(log, M);
    assert_int_equal(lines_with(out, said), 1);
    assert_int_equal(lines_with(out, "replaced the stored entry (its pipeline timed again"), 1);
    assert_int_equal(lines_with(log, stored), 1);   /* the stored pipeline, timed again */
    assert_int_equal(lines_with(log, neighbour), 1);   /* and the next M's, here */
    assert_true(retimed >= 2);
    mt_db *db = NULL;
    mt_db_key key;
    mt_db_entry e;
    int exact = 0;
    assert_int_equal(mt_db_key_from_problem(&o.shape, s.sku, o.routing, &key), MT_OK);
    assert_int_equal(mt_db_open(path, MT_DB_READONLY, &db), MT_OK);
    assert_int_equal(mt_db_lookup(db, &key, M, &e, &exact), MT_OK);
    assert_int_equal(exact, 1);
    assert_true(fabs(e.time_us - r.time_us) < 1e-9);
    assert_string_equal(mt_db_pipeline_kernel(&e.pipeline, "gemm1"), r.gemm1);
    mt_db_close(db);

    /* The same M under --retune: the search as well. */
    opts_at(&o, path, M);
    o.retune = 1;
    const mt_tune_row t = run_logged(&o, out, log);
    assert_true(measured_at(log, M) >= 3 * retimed);

    /* The GEMM1 stored now faults: the search, and another GEMM1 wins. (A
     * worker killed by the fault may lose its last log lines.) */
    opts_at(&o, path, M);
    o.retime = 1;
    setenv("MT_FAKE_FAULT", t.gemm1, 1);
    const mt_tune_row f = run_logged(&o, out, log);
    unsetenv("MT_FAKE_FAULT");
    assert_int_equal(lines_with(out, said), 0);
    assert_true(lines_with(out, "the stored pipeline failed here: the search") >= 1);
    assert_string_not_equal(f.gemm1, t.gemm1);
    assert_true(measured_at(log, M) >= 3 * retimed);
}

static void test_shards_cover_every_item_once(void **state)
{
    (void)state;
    for (int n = 0; n <= 40; n++)
        for (int count = 1; count <= 24; count++) {
            int seen[64] = {0}, out[64];
            for (int i = 0; i < count; i++) {
                int k = mt_tune_shard(n, i, count, out);
                for (int j = 0; j < k; j++) {
                    assert_true(out[j] >= 0 && out[j] < n);
                    seen[out[j]]++;
                }
            }
            for (int i = 0; i < n; i++)
                assert_int_equal(seen[i], 1);
        }
}

/* Shards written to their own databases and merged equal one whole run. */
static void test_shards_merge_to_whole(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("tune-shard");
    char whole[600], part[600], merged[600], msg[1024];
    snprintf(whole, sizeof whole, "%s/whole.db", dir);
    snprintf(merged, sizeof merged, "%s/merged.db", dir);
    mt_tune_opts o;
    mt_tune_summary s;
    opts(&o, whole);
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    mt_db *dst = NULL;
    assert_int_equal(mt_db_open(merged, MT_DB_CREATE, &dst), MT_OK);
    for (int i = 0; i < 3; i++) {
        snprintf(part, sizeof part, "%s/shard%d.db", dir, i);
        opts(&o, part);
        o.shard_index = i;
        o.shard_count = 3;
        assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
        assert_int_equal(s.nrows, i == 0 ? 2 : 1);   /* 4 values of M over 3 shards */
        mt_db_merge_stats ms;
        assert_int_equal(mt_db_merge(dst, part, &ms), MT_OK);
    }
    mt_db_close(dst);
    for (int i = 0; i < 2; i++) {
        opts(&o, i ? merged : whole);
        setenv("MT_FAKE_LOG", "/dev/null", 1);
        assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);   /* all done: a lookup */
        unsetenv("MT_FAKE_LOG");
        assert_int_equal(s.nrows, 4);
        assert_int_equal(s.unfinished, 0);
    }
}

/* One worker per device; a device that cannot start leaves its share
 * unfinished and reported, the others' results are kept. */
static void test_devices_and_a_broken_one(void **state)
{
    (void)state;
    char path[600], msg[1024];
    snprintf(path, sizeof path, "%s/dev.db", mt_test_tmpdir("tune-dev"));
    mt_tune_opts o;
    mt_tune_summary s;
    opts(&o, path);
    o.ndevices = 3;
    o.devices[0] = 0, o.devices[1] = 1, o.devices[2] = 2;
    setenv("MT_FAKE_BROKEN_DEVICE", "1", 1);
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    assert_int_equal(s.nrows, 3);
    assert_int_equal(s.unfinished, 1);
    assert_int_equal(s.unfinished_M[0], 16);   /* M values dealt 0,1,2,0: device 1 had M=16 */
    unsetenv("MT_FAKE_BROKEN_DEVICE");
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);   /* the rerun finishes it */
    assert_int_equal(s.nrows, 4);
    assert_int_equal(s.unfinished, 0);
    /* No device can tune: that is "no GPU" (the CLI's exit 3), not an
     * internal error. */
    setenv("MT_FAKE_BROKEN_DEVICE", "0,1,2", 1);
    o.retune = 1;
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_ERR_NO_DEVICE);
    assert_non_null(strstr(msg, "none of the 3 devices"));
    unsetenv("MT_FAKE_BROKEN_DEVICE");
    /* Options every device refuses: bad usage (exit 2), not an internal
     * error. */
    o.only[0].name = "NO_SUCH", o.only[0].value = "1";
    o.nonly = 1;
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_ERR_INVALID_ARG);
    assert_non_null(strstr(msg, "every device refused the options"));
    o.nonly = 0;
    /* A failure every device reports alike (here a file error) is that
     * failure, not an internal error. */
    char io[16];
    snprintf(io, sizeof io, "%d", (int)MT_ERR_IO);
    setenv("MT_FAKE_BROKEN_STATUS", io, 1);
    setenv("MT_FAKE_BROKEN_DEVICE", "0,1,2", 1);
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_ERR_IO);
    assert_non_null(strstr(msg, "every device's tuning failed: "));
    assert_non_null(strstr(msg, mt_status_str(MT_ERR_IO)));
    unsetenv("MT_FAKE_BROKEN_STATUS");
    unsetenv("MT_FAKE_BROKEN_DEVICE");
}

static int count_at_16(const mt_db_candidate *c, void *ctx)
{
    *(int *)ctx += c->M == 16 && !mt_tune_is_mark(c->pipeline);
    return 0;
}

/* An M where no candidate passes its check stays unfinished and the run
 * goes on to the next M (it once stopped there, calling it a failure
 * "outside any candidate", and every plain rerun stopped there again). */
static void test_an_m_without_a_passing_candidate_does_not_stop_the_run(void **state)
{
    (void)state;
    char path[600], msg[1024];
    snprintf(path, sizeof path, "%s/nopass.db", mt_test_tmpdir("tune-nopass"));
    mt_tune_opts o;
    mt_tune_summary s;
    opts(&o, path);
    o.nM = 2;   /* M = 1 and 16 */
    setenv("MT_FAKE_FAULT", "grouped_gemm", 1);   /* every tiled candidate and default faults */
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    unsetenv("MT_FAKE_FAULT");
    assert_int_equal(s.unfinished, 2);
    assert_int_equal(s.nrows, 0);
    int at16 = 0;
    foreach_candidate(path, count_at_16, &at16);
    assert_true(at16 > 0);   /* M = 16 was reached */
}

/* Under --retune an M counts as finished by this run's completion mark,
 * not by an entry: an earlier run's entry passed for this run's result at
 * the M a broken device never reached. */
static void test_retune_counts_only_its_own_results(void **state)
{
    (void)state;
    char path[600], msg[1024];
    snprintf(path, sizeof path, "%s/again.db", mt_test_tmpdir("tune-again-marks"));
    mt_tune_opts o;
    mt_tune_summary s;
    opts(&o, path);
    o.nM = 2;   /* M = 1 and 16 */
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    assert_int_equal(s.unfinished, 0);
    o.ndevices = 2;
    o.devices[0] = 0, o.devices[1] = 1;
    o.retune = 1;
    setenv("MT_FAKE_BROKEN_DEVICE", "1", 1);
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    unsetenv("MT_FAKE_BROKEN_DEVICE");
    assert_int_equal(s.nrows, 1);
    assert_int_equal(s.unfinished, 1);
    assert_int_equal(s.unfinished_M[0], 16);
}

/* A worker that fails outside any candidate with a status of its own (a
 * database or file error) ends the run with that status at once; only a
 * failure it could not report is tried again and called internal. */
static void test_worker_failure_keeps_its_status(void **state)
{
    (void)state;
    char path[600], msg[1024], io[16];
    snprintf(path, sizeof path, "%s/worker.db", mt_test_tmpdir("tune-worker-status"));
    mt_tune_opts o;
    mt_tune_summary s;
    opts(&o, path);
    o.nM = 1;
    snprintf(io, sizeof io, "%d", (int)MT_ERR_IO);
    setenv("MT_FAKE_BROKEN_STATUS", io, 1);
    setenv("MT_FAKE_BROKEN_DEVICE", "0", 1);
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_ERR_IO);
    assert_non_null(strstr(msg, "failed outside any candidate"));
    assert_int_equal(s.worker_restarts, 0);
    unsetenv("MT_FAKE_BROKEN_DEVICE");
    unsetenv("MT_FAKE_BROKEN_STATUS");
}

/* A damaged database is refused before any candidate is timed, with a
 * message naming the file and the damage, and is left as it was. */
static void test_refuses_a_damaged_database(void **state)
{
    (void)state;
    char path[600], msg[1024];
    snprintf(path, sizeof path, "%s/damaged.db", mt_test_tmpdir("tune-damaged"));
    mt_tune_opts o;
    opts(&o, path);
    o.nM = 1;
    mt_tune_summary s;
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    const int before = scan_db(path).total;
    mt_fix_damage_index(path);
    o.Ms[0] = 256;
    setenv("MT_FAKE_LOG", "/dev/null", 1);
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_ERR_DB);
    unsetenv("MT_FAKE_LOG");
    assert_non_null(strstr(msg, path));
    assert_non_null(strstr(msg, "is damaged, so nothing was tuned"));
    assert_non_null(strstr(msg, "integrity check"));
    assert_non_null(strstr(msg, "moetune db verify"));
    mt_db *db = mt_fix_open_db(path, MT_DB_READONLY);
    cand_scan c;
    memset(&c, 0, sizeof c);
    assert_int_equal(mt_db_foreach_candidate(db, scan, &c), MT_OK);
    assert_int_equal(c.total, before);
    mt_db_close(db);
}

/* A run that fails before writing anything (no GPU: here a broken fake
 * device) leaves no database behind when it created the file, and keeps
 * one that was there; a shard with no work touches no file. */
static void test_failed_run_leaves_no_file(void **state)
{
    (void)state;
    char path[600], msg[1024];
    snprintf(path, sizeof path, "%s/none.db", mt_test_tmpdir("tune-none"));
    mt_tune_opts o;
    mt_tune_summary s;
    opts(&o, path);
    o.nM = 1;
    setenv("MT_FAKE_BROKEN_DEVICE", "0", 1);
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_ERR_NO_DEVICE);
    assert_int_equal(access(path, F_OK), -1);
    unsetenv("MT_FAKE_BROKEN_DEVICE");
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    const int rows = scan_db(path).total;
    setenv("MT_FAKE_BROKEN_DEVICE", "0", 1);
    o.Ms[0] = 256;
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_ERR_NO_DEVICE);
    unsetenv("MT_FAKE_BROKEN_DEVICE");
    assert_int_equal(scan_db(path).total, rows);   /* there before: kept as it was */

    char idle[600];
    snprintf(idle, sizeof idle, "%s/idle.db", mt_test_tmpdir("tune-idle"));
    opts(&o, idle);
    o.nM = 2;
    o.shard_index = 3, o.shard_count = 4;
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    assert_int_equal(s.idle_shard, 1);
    assert_int_equal(s.nrows, 0);
    assert_int_equal(access(idle, F_OK), -1);
}

/* A database that cannot grow (disk full, emulated with RLIMIT_FSIZE) makes
 * the run fail with a clear message; what was committed stays intact and
 * complete, and a rerun with space finishes the job. */
static void test_disk_full(void **state)
{
    (void)state;
    char path[600];
    snprintf(path, sizeof path, "%s/full.db", mt_test_tmpdir("tune-full"));
    mt_tune_opts o;
    opts(&o, path);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char msg[1024];
        mt_tune_summary s;
        signal(SIGXFSZ, SIG_IGN);   /* writes past the limit fail with EFBIG */
        struct rlimit rl = {160 * 1024, 160 * 1024};
        setrlimit(RLIMIT_FSIZE, &rl);
        o.isolate = 0;
        mt_status st = mt_tune_run(&o, &s, msg, sizeof msg);
        printf("disk full: %s: %s\n", mt_status_str(st), msg);
        fflush(stdout);
        _exit(st == MT_OK ? 0 : strstr(msg, path) || strstr(msg, "full") || strstr(msg, "disk") ? 2 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 2);   /* failed, and said where */
    cand_scan c = scan_db(path);   /* opens, verifies: 0 problems */
    (void)c;
    char msg[1024];
    mt_tune_summary s;
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    assert_int_equal(s.nrows, 4);
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A child of parent (a supervisor's worker), from /proc; 0 if it has none.
 * A process's parent follows its name in /proc/PID/stat, a name that may
 * hold spaces and parentheses itself: read after the last ')'. */
static pid_t child_of(pid_t parent)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t found = 0;
    assert_non_null(d);
    while (!found && (e = readdir(d))) {
        char path[300], buf[512];
        int ppid = 0;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        buf[fread(buf, 1, sizeof buf - 1, f)] = '\0';
        fclose(f);
        const char *end = strrchr(buf, ')');
        if (end && sscanf(end + 1, " %*c %d", &ppid) == 1 && ppid == parent)
            found = (pid_t)atoi(e->d_name);
    }
    closedir(d);
    return found;
}

/* Runs o in a child process, as the CLI would run it, the fake backend
 * logging into log, with its stderr (and its workers') into the pipe err
 * where err is not NULL: the child writes the run's status, restarts and
 * message there and exits with the status. Returns the child's pid (the
 * supervisor) once its worker, *worker, is measuring a candidate (the fake
 * logs it before it sleeps or hangs), within 5 s. */
static pid_t start_tune(const mt_tune_opts *o, const char *log, const int err[2], pid_t *worker)
{
    setenv("MT_FAKE_LOG", log, 1);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char msg[1024] = "";
        mt_tune_summary s;
        signal(SIGXFSZ, SIG_IGN);   /* a write past a file size limit fails with EFBIG */
        if (err) {
            dup2(err[1], STDERR_FILENO);
            close(err[0]);
            close(err[1]);
        }
        mt_status st = mt_tune_run(o, &s, msg, sizeof msg);
        fprintf(stderr, "tune: %s, %d worker restart(s): %s\n", mt_status_str(st),
                s.worker_restarts, msg);
        fflush(NULL);
        _exit((int)st);
    }
    unsetenv("MT_FAKE_LOG");
    if (err)
        close(err[1]);
    for (int i = 0; i < 500 && count_lines(log) < 1; i++)
        nap_ms(10);
    *worker = count_lines(log) >= 1 ? child_of(pid) : 0;
    if (!*worker)
        kill(pid, SIGKILL);   /* a failed test leaves no run behind (its worker dies with it) */
    assert_true(*worker > 0);
    return pid;
}

/* A worker that cannot record a candidate it measured (its file size limit
 * dropped to nothing while the candidate ran, as a disk fills up) has
 * reported it measured ("R"): the run fails with the database's status and
 * the worker's message naming the file, with no restart and nothing
 * rejected, and a rerun measures that candidate again and finishes. (Taken
 * for the kernel's fault, the good candidate was rejected for good.) Only
 * the worker is limited, so the supervisor could record a rejection. */
static void test_record_failure_is_not_the_kernels(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("tune-record");
    char path[600], log[600], out[4096], msg[1024];
    snprintf(path, sizeof path, "%s/record.db", dir);
    snprintf(log, sizeof log, "%s/record.log", dir);
    mt_tune_opts o;
    opts_at(&o, path, 1);
    int err[2];
    assert_int_equal(pipe(err), 0);
    setenv("MT_FAKE_DELAY_MS", "200", 1);   /* time to find the worker mid-candidate */
    pid_t worker, pid = start_tune(&o, log, err, &worker);
    unsetenv("MT_FAKE_DELAY_MS");
    const struct rlimit none = {0, 0};   /* every write to a file fails: EFBIG */
    assert_int_equal(prlimit(worker, RLIMIT_FSIZE, &none, NULL), 0);
    size_t n = 0;
    ssize_t got;
    while ((got = read(err[0], out + n, sizeof out - 1 - n)) > 0)
        n += (size_t)got;
    out[n] = '\0';
    close(err[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    printf("%s", out);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), MT_ERR_DB);
    assert_non_null(strstr(out, "0 worker restart(s)"));
    assert_non_null(strstr(out, "failed outside any candidate"));
    assert_non_null(strstr(out, path));   /* the worker's message: the file it could not write */
    assert_int_equal(scan_db(path).rejected, 0);
    mt_tune_summary s;
    setenv("MT_FAKE_LOG", log, 1);
    assert_int_equal(mt_tune_run(&o, &s, msg, sizeof msg), MT_OK);
    unsetenv("MT_FAKE_LOG");
    assert_int_equal(s.nrows, 1);
    assert_int_equal(s.worker_restarts, 0);
    assert_int_equal(scan_db(path).rejected, 0);
    assert_int_equal(repeats(log), 1);   /* the candidate in flight, and only it */
}

/* A worker dies with its supervisor (PR_SET_PDEATHSIG): one hung in a
 * candidate never writes to its pipe, so never learns that the supervisor
 * is gone, and held its GPU for good. This process adopts the orphan (a
 * child subreaper), so that it waits for that very worker, whose pid
 * cannot be reused meanwhile, and kills it if it outlives the wait. */
static void test_worker_dies_with_its_supervisor(void **state)
{
    (void)state;
    const char *dir = mt_test_tmpdir("tune-orphan");
    char path[600], log[600];
    snprintf(path, sizeof path, "%s/orphan.db", dir);
    snprintf(log, sizeof log, "%s/orphan.log", dir);
    mt_tune_opts o;
    opts_at(&o, path, 1);
    o.candidate_timeout_s = 60;   /* the supervisor does not end the hang itself */
    setenv("MT_FAKE_HANG", "grouped_gemm", 1);   /* the first candidate (the default) */
    pid_t worker, pid = start_tune(&o, log, NULL, &worker);
    unsetenv("MT_FAKE_HANG");
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);   /* its worker is this process's child from here on */
    int status = 0;
    pid_t r = 0;
    for (int i = 0; i < 150 && (r = waitpid(worker, &status, WNOHANG)) == 0; i++)
        nap_ms(20);
    if (r != worker) {   /* it outlived its supervisor by 3 s: no leak from a failed test */
        printf("worker %ld outlived its supervisor\n", (long)worker);
        kill(worker, SIGKILL);
        waitpid(worker, NULL, 0);
    }
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    assert_int_equal(r, worker);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_run_end_to_end),
        cmocka_unit_test(test_fault_and_hang_are_isolated),
        cmocka_unit_test(test_worker_failure_keeps_its_status),
        cmocka_unit_test(test_resume_after_kill),
        cmocka_unit_test(test_param_filter),
        cmocka_unit_test(test_param_filter_per_gemm),
        cmocka_unit_test(test_param_filter_fused_gemm1),
        cmocka_unit_test(test_refines_the_winner),
        cmocka_unit_test(test_refines_the_runner_up_block_m),
        cmocka_unit_test(test_times_the_neighbours_winners),
        cmocka_unit_test(test_retune_once_across_restarts),
        cmocka_unit_test(test_retune_replaces_foreign_entry),
        cmocka_unit_test(test_retime_times_the_stored_pipelines),
        cmocka_unit_test(test_tune_again_forgets_a_cut_short_run),
        cmocka_unit_test(test_settles_the_launch),
        cmocka_unit_test(test_shards_cover_every_item_once),
        cmocka_unit_test(test_shards_merge_to_whole),
        cmocka_unit_test(test_devices_and_a_broken_one),
        cmocka_unit_test(test_an_m_without_a_passing_candidate_does_not_stop_the_run),
        cmocka_unit_test(test_retune_counts_only_its_own_results),
        cmocka_unit_test(test_disk_full),
        cmocka_unit_test(test_record_failure_is_not_the_kernels),
        cmocka_unit_test(test_worker_dies_with_its_supervisor),
        cmocka_unit_test(test_refuses_a_damaged_database),
        cmocka_unit_test(test_failed_run_leaves_no_file),
        cmocka_unit_test(test_final_round_beats_a_lucky_first_time),
        cmocka_unit_test(test_final_round_fault_hang_wrong),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
