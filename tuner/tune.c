/*
 * The tuning supervisor (see moetune/tuner.h): forks a worker, watches what
 * it is measuring, and when it dies or hangs records the candidate in flight
 * as rejected and starts a new worker, which resumes from the database.
 * This process never loads the CUDA driver.
 */
#define _POSIX_C_SOURCE 200809L
#include "moetune/tuner.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "moetune/db.h"
#include "tuner/roofline.h"
#include "tuner/worker.h"

void mt_tune_default_ms(mt_tune_opts *o)
{
    static const int64_t ms[] = {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128,
                                 256, 512, 1024, 1536, 2048, 3072, 4096};
    o->nM = (int)(sizeof ms / sizeof ms[0]);
    memcpy(o->Ms, ms, sizeof ms);
}

/* A tuning process (a worker, or the supervisor of one device) exits 0 on
 * success, else EXIT_STATUS_BASE + its status, which its parent reads back
 * with exit_status: a database or file error stays one, not a bug. */
#define EXIT_STATUS_BASE 16

static int exit_code_of(mt_status st) { return st == MT_OK ? 0 : EXIT_STATUS_BASE + (int)st; }

/* The status a child's wait status carries; MT_ERR_INTERNAL for a child
 * killed by a signal or exiting with a code no tuning process uses. */
static mt_status exit_status(int status)
{
    if (!WIFEXITED(status))
        return MT_ERR_INTERNAL;
    const int code = WEXITSTATUS(status);
    if (code == 0)
        return MT_OK;
    if (code > EXIT_STATUS_BASE && code < EXIT_STATUS_BASE + MT_STATUS_COUNT_)
        return (mt_status)(code - EXIT_STATUS_BASE);
    return MT_ERR_INTERNAL;
}

static int needs_gpu(mt_status st) { return st == MT_ERR_NO_DRIVER || st == MT_ERR_NO_DEVICE; }

/* Record the candidate in flight as rejected (the worker cannot). */
static mt_status reject_in_flight(const mt_tune_opts *o, const char *sku, int64_t M,
                                  const char *cand, const char *reason, char *msg,
                                  size_t msg_size)
{
    mt_db *db = NULL;
    mt_db_key key;
    mt_status st = mt_tune_key(o, sku, &key, msg, msg_size);
    if (st)
        return st;
    if ((st = mt_db_open(o->db_path, MT_DB_CREATE, &db))) {
        mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(db));
        mt_db_close(db);
        return st;
    }
    mt_db_candidate c = {.key = key, .M = M, .pipeline = cand, .ok = 0,
                         .time_us = MT_DB_NO_TIME, .rel_err = MT_DB_NO_TIME, .reason = reason};
    st = mt_db_record_candidate(db, &c);
    if (st)
        mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(db));
    mt_db_close(db);
    return st;
}

typedef struct watch {
    char line[2048];
    size_t len;
    int64_t M;
    char cand[1024];
    int in_flight;
    int progressed;
    char sku[64];
} watch;

static void take_line(watch *w, const char *line)
{
    if (line[0] == 'C' && line[1] == ' ') {
        char *end;
        w->M = strtoll(line + 2, &end, 10);
        mt_strlcpy(w->cand, *end == ' ' ? end + 1 : end, sizeof w->cand);
        w->in_flight = 1;
    } else if (line[0] == 'S' && line[1] == ' ') {
        mt_strlcpy(w->sku, line + 2, sizeof w->sku);
    } else if (line[0] == 'R') {   /* measured: what fails next is not the kernel's */
        w->in_flight = 0;
    } else if (line[0] == 'D') {
        w->in_flight = 0;
        w->progressed = 1;
    }
}

/* Run one worker under watch; returns its wait status, or -1 when we killed
 * it for a timeout (*timed_out = 1). */
static int supervise(const mt_tune_opts *o, watch *w, int restarted, int *timed_out, char *msg,
                     size_t msg_size)
{
    int fds[2];
    *timed_out = 0;
    if (pipe(fds) != 0) {
        mt_errf(msg, msg_size, MT_ERR_IO, "pipe: %s", strerror(errno));
        return -2;
    }
    fflush(NULL);
    const pid_t supervisor = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        mt_errf(msg, msg_size, MT_ERR_IO, "fork: %s", strerror(errno));
        return -2;
    }
    if (pid == 0) {
        /* The worker dies with its supervisor: a hung one, which never
         * writes and so never meets the closed pipe, held its GPU for good
         * once the supervisor was killed. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != supervisor)
            _exit(exit_code_of(MT_ERR_INTERNAL));
        close(fds[0]);
        char wmsg[2048] = "", sku[64];
        mt_status st = mt_tune_worker(o, fds[1], restarted, sku, sizeof sku, wmsg, sizeof wmsg);
        if (st)
            fprintf(stderr, "moetune tune: worker: %s: %s\n", mt_status_str(st), wmsg);
        fflush(NULL);
        _exit(exit_code_of(st));
    }
    close(fds[1]);
    const double limit = o->candidate_timeout_s > 0 ? o->candidate_timeout_s : 30.0;
    const double phase_limit = 1800.0;   /* compiling and preparing data */
    double since = mt_now();
    w->len = 0;
    w->in_flight = 0;
    for (;;) {
        struct pollfd pf = {.fd = fds[0], .events = POLLIN};
        int r = poll(&pf, 1, 200);
        if (r < 0 && errno == EINTR)
            continue;
        if (r > 0) {
            char buf[1024];
            ssize_t n = read(fds[0], buf, sizeof buf);
            if (n <= 0)
                break;   /* the worker closed its end: it is exiting */
            for (ssize_t i = 0; i < n; i++) {
                if (buf[i] == '\n') {
                    w->line[w->len < sizeof w->line ? w->len : sizeof w->line - 1] = '\0';
                    take_line(w, w->line);
                    w->len = 0;
                    since = mt_now();
                } else if (w->len < sizeof w->line - 1) {
                    w->line[w->len++] = buf[i];
                }
            }
        }
        double waited = mt_now() - since;
        if ((w->in_flight && waited > limit) || (!w->in_flight && waited > phase_limit)) {
            kill(pid, SIGKILL);
            *timed_out = 1;
            break;
        }
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return *timed_out ? -1 : status;
}

static mt_status fill_summary(const mt_tune_opts *o, mt_tune_summary *s, char *msg,
                              size_t msg_size);

int mt_tune_shard(int n, int index, int count, int *out)
{
    int k = 0;
    if (count <= 0)
        count = 1, index = 0;
    for (int i = 0; i < n; i++)
        if (i % count == index)
            out[k++] = i;
    return k;
}

/* Tune o->Ms on one device under supervision; the SKU the worker saw is
 * written to sku. */
static mt_status run_one_device(const mt_tune_opts *o, char *sku, size_t sku_size,
                                int *restarts, char *msg, size_t msg_size)
{
    watch w;
    memset(&w, 0, sizeof w);
    mt_status st = MT_OK;
    if (!o->isolate) {
        st = mt_tune_worker(o, -1, 0, w.sku, sizeof w.sku, msg, msg_size);
        mt_strlcpy(sku, w.sku, sku_size);
        return st;
    }
    int attempts_without_progress = 0, workers = 0;
    for (;;) {
        int timed_out = 0;
        w.progressed = 0;
        int status = supervise(o, &w, workers++ > 0, &timed_out, msg, msg_size);
        mt_strlcpy(sku, w.sku, sku_size);
        if (status == -2)
            return MT_ERR_IO;
        const mt_status ws = timed_out ? MT_ERR_INTERNAL : exit_status(status);
        if (!timed_out && ws == MT_OK)
            return MT_OK;
        if (!timed_out && needs_gpu(ws))
            return mt_errf(msg, msg_size, ws,
                           "tuning needs a GPU and the CUDA driver (see the worker's message)");
        if (!timed_out && ws == MT_ERR_INVALID_ARG)
            return mt_errf(msg, msg_size, ws,
                           "the options do not fit this problem (see the worker's message)");
        if (!w.in_flight) {
            /* Failed outside a candidate: not a bad kernel. A failure the
             * worker reported (the database, a file, a template) is its
             * own; one it could not report is tried once more. */
            if (!timed_out && ws != MT_ERR_INTERNAL)
                return mt_errf(msg, msg_size, ws, "the tuning worker failed outside any "
                               "candidate: %s (see its message above)", mt_status_str(ws));
            if (++attempts_without_progress >= 2)
                return mt_errf(msg, msg_size, MT_ERR_INTERNAL,
                               "the tuning worker failed twice outside any candidate "
                               "(exit status %d); see its messages above",
                               WIFEXITED(status) ? WEXITSTATUS(status) : -1);
            continue;
        }
        attempts_without_progress = 0;
        char reason[128];
        if (timed_out)
            snprintf(reason, sizeof reason, "timeout: ran past %.0f s",
                     o->candidate_timeout_s > 0 ? o->candidate_timeout_s : 30.0);
        else if (WIFSIGNALED(status))
            snprintf(reason, sizeof reason, "fault: the worker died of signal %d",
                     WTERMSIG(status));
        else
            snprintf(reason, sizeof reason, "fault: the worker exited with status %d",
                     WEXITSTATUS(status));
        (*restarts)++;
        if (o->log)
            fprintf(o->log, "[%s] M=%lld: candidate rejected (%s): %s; restarting the worker\n",
                    o->label, (long long)w.M, reason, w.cand);
        if ((st = reject_in_flight(o, w.sku, w.M, w.cand, reason, msg, msg_size)))
            return st;
        w.in_flight = 0;
    }
}

/* One supervisor process per device, each with its share of the M values;
 * one that fails does not stop the others (its M values stay unfinished). */
static mt_status run_devices(const mt_tune_opts *o, mt_tune_summary *s, char *msg,
                             size_t msg_size)
{
    pid_t pids[64];
    int fds[64];
    int started = 0;
    mt_status st = MT_OK;
    for (int d = 0; d < o->ndevices; d++) {
        mt_tune_opts sub = *o;
        sub.ndevices = 0;
        sub.device = o->devices[d];
        sub.nM = 0;
        for (int i = d; i < o->nM; i += o->ndevices)
            sub.Ms[sub.nM++] = o->Ms[i];
        if (sub.nM == 0)
            continue;
        int p[2];
        if (pipe(p) != 0)
            return mt_errf(msg, msg_size, MT_ERR_IO, "pipe: %s", strerror(errno));
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            close(p[0]);
            char sku[64] = "", m[2048] = "";
            int restarts = 0;
            mt_status cst = run_one_device(&sub, sku, sizeof sku, &restarts, m, sizeof m);
            if (cst)
                fprintf(stderr, "moetune tune: device %d: %s: %s\n", sub.device,
                        mt_status_str(cst), m);
            dprintf(p[1], "%s\n%d\n", sku, restarts);
            _exit(exit_code_of(cst));
        }
        close(p[1]);
        if (pid < 0) {
            close(p[0]);
            return mt_errf(msg, msg_size, MT_ERR_IO, "fork: %s", strerror(errno));
        }
        pids[started] = pid;
        fds[started++] = p[0];
    }
    int failed = 0, no_gpu = 0, invalid = 0;
    mt_status first = MT_OK;   /* the first device's failure */
    int same = 1;              /* every failed device failed with it */
    for (int i = 0; i < started; i++) {
        char buf[256] = "";
        ssize_t n = read(fds[i], buf, sizeof buf - 1);
        close(fds[i]);
        buf[n > 0 ? n : 0] = '\0';
        char *nl = strchr(buf, '\n');
        if (nl) {
            *nl = '\0';
            if (buf[0])
                mt_strlcpy(s->sku, buf, sizeof s->sku);
            s->worker_restarts += atoi(nl + 1);
        }
        int status = 0;
        while (waitpid(pids[i], &status, 0) < 0 && errno == EINTR)
            ;
        const mt_status ds = exit_status(status);
        if (ds && !failed++)
            first = ds;
        same &= ds == MT_OK || ds == first;
        no_gpu += needs_gpu(ds);
        invalid += ds == MT_ERR_INVALID_ARG;
    }
    if (no_gpu == started && started > 0)
        st = mt_errf(msg, msg_size, MT_ERR_NO_DEVICE, "none of the %d devices could "
                     "tune (their messages are above)", started);
    else if (invalid == started && started > 0)
        st = mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "every device refused the options "
                     "(their messages are above)");
    else if (failed == started && started > 0)
        st = mt_errf(msg, msg_size, same ? first : MT_ERR_INTERNAL,
                     "every device's tuning failed%s%s (their messages are above)",
                     same ? ": " : "", same ? mt_status_str(first) : "");
    return st;
}

mt_status mt_tune_run(const mt_tune_opts *o, mt_tune_summary *s, char *msg, size_t msg_size)
{
    memset(s, 0, sizeof *s);
    double t0 = mt_now();
    mt_status st = mt_problem_validate(&o->shape, msg, msg_size);
    if (st)
        return st;
    mt_routing routing;
    if (o->routing && mt_routing_parse(o->routing, &routing))
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                       "unknown routing '%s' (uniform, balanced or skewed)", o->routing);
    if (!o->db_path || !*o->db_path)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "no database path given");
    if (o->nM < 1 || o->nM > MT_TUNE_MAX_M)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "between 1 and %d values of M",
                       MT_TUNE_MAX_M);
    if (o->shard_count < 0 || (o->shard_count > 0 &&
                               (o->shard_index < 0 || o->shard_index >= o->shard_count)))
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "shard %d/%d: need 0 <= I < N",
                       o->shard_index, o->shard_count);
    if (o->ndevices < 0 || o->ndevices > 64)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "between 1 and 64 devices");
    for (int i = 0; i < o->nM; i++)
        for (int j = 0; j < i; j++)
            if (o->Ms[i] == o->Ms[j])
                return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "M=%lld is listed twice",
                               (long long)o->Ms[i]);
    for (int i = 0; i < o->ndevices; i++)
        for (int j = 0; j < i; j++)
            if (o->devices[i] == o->devices[j])
                return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "device %d is listed twice",
                               o->devices[i]);
    mt_tune_opts mine = *o;
    static int runs;   /* several runs of one process in one second (threads too) */
    snprintf(mine.run_id, sizeof mine.run_id, "run %ld.%lld.%d", (long)getpid(),
             (long long)time(NULL), __atomic_fetch_add(&runs, 1, __ATOMIC_RELAXED));
    int idx[MT_TUNE_MAX_M];
    mine.nM = mt_tune_shard(o->nM, o->shard_index, o->shard_count, idx);
    for (int i = 0; i < mine.nM; i++)
        mine.Ms[i] = o->Ms[idx[i]];
    if (mine.nM == 0) {   /* more shards than work items: this one has none */
        s->idle_shard = 1;
        return MT_OK;
    }
    const int existed = access(o->db_path, F_OK) == 0;
    /* Fail early, in this process, on a database we cannot write, or whose
     * SQLite file is damaged: results written into a file whose indexes
     * disagree with its tables may not be found again, and each costs GPU
     * time. (An unsound entry or kernel does not stop the run: tuning may
     * replace it.) */
    mt_db *probe = NULL;
    if ((st = mt_db_open(o->db_path, MT_DB_CREATE, &probe)) ||
        (st = mt_db_refuse_damaged(probe, "nothing was tuned into it; tune into another "
                                          "file"))) {
        mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(probe));
        mt_db_close(probe);
        return st;
    }
    mt_db_close(probe);
    if (mine.ndevices == 1)
        mine.device = mine.devices[0], mine.ndevices = 0;
    if (mine.ndevices > 1)
        st = run_devices(&mine, s, msg, msg_size);
    else
        st = run_one_device(&mine, s->sku, sizeof s->sku, &s->worker_restarts, msg, msg_size);
    if (st) {
        /* A database this run created and left empty (no GPU, a bad
         * option found by the worker) does not stay behind. */
        if (!existed)
            mt_db_remove_if_empty(o->db_path, NULL);
        return st;
    }
    s->wall_s = mt_now() - t0;
    return fill_summary(&mine, s, msg, msg_size);
}

typedef struct count_ctx {
    const mt_db_key *key;
    mt_tune_summary *s;
} count_ctx;

static int count_candidates(const mt_db_candidate *c, void *ctx)
{
    count_ctx *cc = ctx;
    char a[512], b[512];
    if (strcmp(c->key.sku, cc->key->sku) || mt_db_key_format(&c->key, a, sizeof a) ||
        mt_db_key_format(cc->key, b, sizeof b) || strcmp(a, b) ||
        mt_tune_is_mark(c->pipeline))
        return 0;
    for (int i = 0; i < cc->s->nrows; i++)
        if (cc->s->rows[i].M == c->M) {
            cc->s->rows[i].candidates++;
            cc->s->rows[i].rejected += !c->ok;
        }
    return 0;
}

static mt_status fill_summary(const mt_tune_opts *o, mt_tune_summary *s, char *msg,
                              size_t msg_size)
{
    mt_db *db = NULL;
    mt_db_key key;
    mt_status st = mt_tune_key(o, s->sku, &key, msg, msg_size);
    if (st)
        return st;
    if ((st = mt_db_open(o->db_path, MT_DB_READONLY, &db))) {
        mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(db));
        mt_db_close(db);
        return st;
    }
    for (int i = 0; i < o->nM && !st; i++) {
        mt_db_entry e;
        int exact = 0;
        mt_tune_row *r = &s->rows[s->nrows];
        memset(r, 0, sizeof *r);
        r->M = o->Ms[i];
        /* Finished: its completion mark (this run's, where it tunes again),
         * not merely an entry (an earlier run's would pass for this one's,
         * at an M a failed device never reached). */
        mt_tune_item_state is;
        if ((st = mt_tune_item_state_of(db, &key, o->Ms[i], o->run_id, mt_tune_again(o), &is))) {
            mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(db));
            break;
        }
        st = is.done ? mt_db_lookup(db, &key, o->Ms[i], &e, &exact) : MT_ERR_NOT_FOUND;
        if (st == MT_ERR_NOT_FOUND || (!st && !exact)) {
            s->unfinished_M[s->unfinished++] = o->Ms[i];   /* a failed device's share, a failed M */
            st = MT_OK;
            continue;
        }
        if (st) {
            mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(db));
            break;
        }
        mt_strlcpy(r->winner, e.pipeline.backend, sizeof r->winner);
        r->launch_late = e.pipeline.launch_late;
        const char *g1 = mt_db_pipeline_kernel(&e.pipeline, "gemm1");
        const char *g2 = mt_db_pipeline_kernel(&e.pipeline, "gemm2");
        mt_strlcpy(r->gemm1, g1 ? g1 : "", sizeof r->gemm1);
        mt_strlcpy(r->gemm2, g2 ? g2 : "", sizeof r->gemm2);
        r->time_us = e.time_us;
        r->default_us = e.default_time_us;
        r->cublas_us = e.cublas_time_us;
        r->rel_err = e.rel_err;
        s->sm_count = e.prov.sm_count;
        s->nrows++;
    }
    if (!st) {
        count_ctx cc = {&key, s};
        st = mt_db_foreach_candidate(db, count_candidates, &cc);
        if (st)
            mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(db));
    }
    mt_db_close(db);
    return st;
}

/* "1.23x" of a baseline's time over ours, "-" where the baseline has none
 * (not timed, or it failed its check). */
static const char *speedup(double base_us, double us, char *buf, size_t size)
{
    if (base_us > 0)
        snprintf(buf, size, "%.2fx", base_us / us);
    else
        snprintf(buf, size, "-");
    return buf;
}

void mt_tune_print_summary(const mt_tune_opts *o, const mt_tune_summary *s, FILE *f)
{
    const mt_problem *p = &o->shape;
    if (s->idle_shard) {
        fprintf(f, "%s: shard %d/%d has no work: the %d M value(s) go to the other shards; "
                   "nothing was tuned or written\n", o->label, o->shard_index, o->shard_count,
                o->nM);
        return;
    }
    fprintf(f, "\n%s on %s: E=%lld topk=%lld K=%lld N=%lld %s %s %s, %d worker restart(s), "
               "%.1f s wall\n\n",
            o->label, s->sku, (long long)p->E, (long long)p->topk, (long long)p->K,
            (long long)p->N, mt_dtype_name(p->dtype), mt_act_format_name(p->format),
            mt_activation_name(p->activation), s->worker_restarts, s->wall_s);
    fprintf(f, "| M | winner | us | TFLOP/s | weight GB/s | H200 roofline | vs default | vs cuBLAS | "
               "candidates (rejected) | gemm1 | gemm2 |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < s->nrows; i++) {
        const mt_tune_row *r = &s->rows[i];
        mt_problem at = *p;
        at.M = r->M;
        const mt_roofline roof = mt_roofline_of(&at, mt_expected_experts_hit(&at));
        char dflt[32], cub[32];
        fprintf(f, "| %lld | %s%s | %.1f | %.1f | %.0f | %.2f | %s | %s | %d (%d) | %s | %s |\n",
                (long long)r->M, r->winner, r->launch_late ? " (late)" : "", r->time_us, roof.flops / r->time_us * 1e-6,
                roof.weight_bytes / r->time_us * 1e-3, roof.us / r->time_us,
                speedup(r->default_us, r->time_us, dflt, sizeof dflt),
                speedup(r->cublas_us, r->time_us, cub, sizeof cub), r->candidates, r->rejected, r->gemm1,
                r->gemm2);
    }
    if (s->unfinished)
        fprintf(f, "\n");
    for (int i = 0; i < s->unfinished; i++)
        fprintf(f, "M=%lld: NOT FINISHED (its worker failed, or no candidate passed its check "
                   "there; a plain rerun resumes it, one with --retune or --retime starts it "
                   "again)\n",
                (long long)s->unfinished_M[i]);
}
