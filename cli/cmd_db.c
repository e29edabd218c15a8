/*
 * `moetune db`: show, export, import, merge, verify, prune, refresh and
 * make deterministic tuned databases. Calls the public db API
 * (moetune/db.h); refresh and deterministic also the templates
 * (moetune/gen.h, tuner/refresh.h, tuner/deterministic.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/templates.h"
#include "common/util.h"
#include "moetune/db.h"
#include "moetune/gen.h"
#include "tuner/deterministic.h"
#include "tuner/refresh.h"

static int fail_db(mt_db *db)
{
    fprintf(stderr, "moetune db: %s\n", mt_db_errmsg(db));
    mt_db_close(db);
    return MT_EXIT_FAIL;
}

/* The message (fmt NULL: one already printed), then the usage line. */
static int usage_error(const char *usage, const char *fmt, const char *arg)
{
    if (fmt) {
        fprintf(stderr, "moetune db: ");
        fprintf(stderr, fmt, arg);
        fputc('\n', stderr);
    }
    fprintf(stderr, "usage: %s\n", usage);
    return MT_EXIT_USAGE;
}

/* Report a failed write into dst and close it; a dst this command created
 * and left empty is removed again (a merge whose first source is missing
 * leaves no new file behind). */
static int fail_into(mt_db *db, const char *dst, int existed)
{
    int rc = fail_db(db);
    if (!existed)
        mt_db_remove_if_empty(dst, NULL);
    return rc;
}

/* Open or report; returns NULL after printing the reason. */
static mt_db *open_or_report(const char *path, int flags)
{
    mt_db *db = NULL;
    if (mt_db_open(path, flags, &db) != MT_OK) {
        fail_db(db);
        return NULL;
    }
    return db;
}

/* The sources a merge or an import takes in one call, said in its help and
 * messages. */
#define DB_MAX_SOURCES 15
#define DB_STR_(x) #x
#define DB_STR(x) DB_STR_(x)

/* Options: "--name VALUE" pairs and flags; positional args collected. */
typedef struct opts {
    const char *pos[DB_MAX_SOURCES + 1];
    int npos;   /* all of them: those past pos[] are counted, for the message */
    const char *sku, *out, *vllm, *hash, *E_text;
    int64_t E;   /* --E as a number (run_sub): 0 when not given */
    int images, vllm_flag, dry_run, compile, history, newer, help;
} opts;

/* vllm_value: "--vllm" takes a folder (export) rather than being a flag. */
static int parse_opts(int argc, char **argv, const char *usage, const char *const *allowed,
                      int vllm_value, opts *o)
{
    memset(o, 0, sizeof *o);
    mt_arg_seen seen = {.cmd = "db"};   /* no option of db repeats */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            o->help = 1;
            return 0;
        }
        if (a[0] != '-' || !strcmp(a, "-")) {
            if (o->npos < (int)MT_ARRAY_LEN(o->pos))
                o->pos[o->npos] = a;
            o->npos++;
            continue;
        }
        int ok = 0;
        for (const char *const *p = allowed; *p; p++)
            ok |= !strcmp(*p, a);
        if (!ok)
            return usage_error(usage, "unknown option '%s'", a);
        const char **val = !strcmp(a, "--sku") ? &o->sku
                         : !strcmp(a, "--E") ? &o->E_text
                         : !strcmp(a, "-o") ? &o->out
                         : !strcmp(a, "--template-hash") ? &o->hash
                         : !strcmp(a, "--vllm") && vllm_value ? &o->vllm : NULL;
        if (val) {
            if (i + 1 >= argc)
                return usage_error(usage, "option '%s' needs a value", a);
            if (!mt_arg_value(&seen, a, argv[i + 1]))
                return usage_error(usage, NULL, NULL);
            *val = argv[++i];
        } else if (!strcmp(a, "--images"))
            o->images = 1;
        else if (!strcmp(a, "--vllm"))
            o->vllm_flag = 1;
        else if (!strcmp(a, "--dry-run"))
            o->dry_run = 1;
        else if (!strcmp(a, "--compile"))
            o->compile = 1;
        else if (!strcmp(a, "--history"))
            o->history = 1;
        else if (!strcmp(a, "--newer"))
            o->newer = 1;
    }
    return 0;
}

/* A subcommand: its command line (usage, the options it takes, how many
 * positional arguments), its help, and run(), which gets the parsed options
 * once mt_cmd_db has checked them. */
typedef struct db_sub {
    const char *name;
    const char *usage;
    const char *const *allowed;   /* NULL-terminated */
    int vllm_value;               /* "--vllm" takes a folder (export) */
    int min_pos, max_pos;         /* positional arguments */
    const char *pos_error;        /* when there are fewer or more */
    const char *help;
    int (*run)(const opts *o);
} db_sub;

/* ---- show ---- */

typedef struct ref_list {
    mt_db_vllm_config *v;
    size_t n, cap;
} ref_list;

static int collect_ref(const mt_db_vllm_config *c, void *ctx)
{
    ref_list *r = ctx;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 32;
        mt_db_vllm_config *v = realloc(r->v, cap * sizeof *v);
        if (!v)
            return 1;
        r->v = v;
        r->cap = cap;
    }
    r->v[r->n++] = *c;
    return 0;
}

typedef struct show_ctx {
    char last_group[600];
    int64_t last_prov;
    ref_list refs;
    int rows;
} show_ctx;

static void short_name(const char *name, char *out, size_t size)
{
    if (!name) {
        mt_strlcpy(out, "-", size);
        return;
    }
    if (!strncmp(name, "mtk_", 4))
        name += 4;
    mt_strlcpy(out, name, size);
    if (strlen(name) >= size && size > 3)
        memcpy(out + size - 3, "..", 3);
}

static void print_prov(const mt_db_provenance *p)
{
    char when[32] = "?";
    time_t t = (time_t)p->created;
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
    printf("  provenance #%lld: %s cc %s, %d SMs, mem clock %lld kHz, driver %s, CUDA %s, "
           "NVRTC %s, moetune %s, templates %.12s, %s\n",
           (long long)p->id, p->sku, p->cc, p->sm_count, (long long)p->mem_clock_khz,
           p->driver_version, p->cuda_version, p->nvrtc_version, p->moetune_version,
           p->template_hash, when);
}

static int show_row(const mt_db_entry *e, void *ctx)
{
    show_ctx *s = ctx;
    char key[512], group[600];
    mt_db_key_format(&e->key, key, sizeof key);
    snprintf(group, sizeof group, "%s | %s", e->key.sku, key);
    if (strcmp(group, s->last_group) != 0) {
        printf("%s== %s\n", s->rows ? "\n" : "", group);
        printf("  %6s %-8s %10s %8s %8s %9s  %-34s %-34s %s\n", "M", "backend", "time_us",
               "x_dflt", "x_cublas", "rel_err", "gemm1", "gemm2", "vllm(BM/BN/BK/G/w/s)");
        mt_strlcpy(s->last_group, group, sizeof s->last_group);
        s->last_prov = -1;
    }
    if (e->prov.id != s->last_prov) {
        print_prov(&e->prov);
        s->last_prov = e->prov.id;
    }
    char g1[35], g2[35], xc[16] = "-", ref[48] = "-", dev[MT_DB_SKU_MAX], sel[64];
    short_name(mt_db_pipeline_kernel(&e->pipeline, "gemm1"), g1, sizeof g1);
    short_name(mt_db_pipeline_kernel(&e->pipeline, "gemm2"), g2, sizeof g2);
    if (e->cublas_time_us > 0 && e->time_us > 0)
        snprintf(xc, sizeof xc, "%.2f", e->cublas_time_us / e->time_us);
    mt_db_vllm_device_name(e->key.sku, dev, sizeof dev);
    mt_db_vllm_selector(&e->key, sel, sizeof sel);
    for (size_t i = 0; i < s->refs.n; i++) {
        const mt_db_vllm_config *r = &s->refs.v[i];
        if (r->E == e->key.E && r->N == e->key.N && r->M == e->M && !strcmp(r->device, dev) &&
            !strcmp(r->selector, sel))
            snprintf(ref, sizeof ref, "%d/%d/%d/%d/%d/%d", r->block_m, r->block_n, r->block_k,
                     r->group_m, r->num_warps, r->num_stages);
    }
    printf("  %6lld %-8s %10.2f %8.2f %8s %9.2e  %-34s %-34s %s\n", (long long)e->M,
           e->pipeline.backend, e->time_us, e->time_us > 0 ? e->default_time_us / e->time_us : 0.0,
           xc, e->rel_err, g1, g2, ref);
    s->rows++;
    return 0;
}

static int cmd_show(const opts *o)
{
    mt_db_filter f = {.sku = o->sku, .E = o->E, .history = o->history};
    mt_db *db = open_or_report(o->pos[0], MT_DB_READONLY);
    if (!db)
        return MT_EXIT_FAIL;
    show_ctx s = {.last_prov = -1};
    mt_status st = mt_db_foreach_vllm_config(db, NULL, 0, 0, collect_ref, &s.refs);
    if (!st)
        st = mt_db_foreach_entry(db, &f, show_row, &s);
    free(s.refs.v);
    if (st)
        return fail_db(db);
    if (!s.rows)
        printf("no entries%s%s\n", o->sku ? " for SKU " : "", o->sku ? o->sku : "");
    mt_db_close(db);
    return MT_EXIT_OK;
}

/* ---- export / import ---- */

static int cmd_export(const opts *o)
{
    if (o->images && o->vllm && !o->out) {   /* --images would silently do nothing */
        fprintf(stderr, "moetune db: --images goes with the JSON export, which --vllm DIR "
                        "replaces unless -o FILE is given too\n");
        return MT_EXIT_USAGE;
    }
    mt_db *db = open_or_report(o->pos[0], MT_DB_READONLY);
    if (!db)
        return MT_EXIT_FAIL;
    if (o->vllm) {
        int files = 0;
        if (mt_db_export_vllm(db, o->vllm, &files))
            return fail_db(db);
        fprintf(stderr, "wrote %d vLLM config file(s) to %s\n", files, o->vllm);
    }
    if (!o->vllm || o->out) {
        int flags = MT_DB_JSON_PRETTY | (o->images ? MT_DB_JSON_IMAGES : 0);
        if (mt_db_export_json(db, o->out ? o->out : "-", flags))
            return fail_db(db);
    }
    mt_db_close(db);
    return MT_EXIT_OK;
}

/* What an import or a merge of one file did. */
static void print_merge_stats(const char *file, const mt_db_merge_stats *s)
{
    printf("%s: entries %lld new, %lld replaced, %lld kept; kernels %lld new, %lld present; "
           "history %lld; candidates %lld; references %lld\n", file,
           (long long)s->entries_inserted, (long long)s->entries_replaced,
           (long long)s->entries_kept, (long long)s->kernels_added, (long long)s->kernels_present,
           (long long)s->history, (long long)s->candidates, (long long)s->references);
}

/* A source that is DST itself (another name or a link of the same file)
 * would be merged into itself: refused, DST closed (and removed when this
 * command created it). Checked with DST open, so that a DST this command
 * has just created counts too. 1 when refused. */
static int refuse_source_is_dst(mt_db *db, const opts *o, int existed)
{
    struct stat dst, src;
    if (stat(o->pos[0], &dst) != 0)
        return 0;
    for (int i = 1; i < o->npos; i++)
        if (stat(o->pos[i], &src) == 0 && src.st_dev == dst.st_dev && src.st_ino == dst.st_ino) {
            fprintf(stderr, "moetune db: %s is the destination %s itself; nothing was done\n",
                    o->pos[i], o->pos[0]);
            mt_db_close(db);
            if (!existed)
                mt_db_remove_if_empty(o->pos[0], NULL);
            return 1;
        }
    return 0;
}

static int cmd_import(const opts *o)
{
    const int existed = access(o->pos[0], F_OK) == 0;
    mt_db *db = open_or_report(o->pos[0], MT_DB_CREATE);
    if (!db)
        return MT_EXIT_FAIL;
    if (refuse_source_is_dst(db, o, existed))
        return MT_EXIT_USAGE;
    for (int i = 1; i < o->npos; i++) {
        if (o->vllm_flag) {
            int n = 0;
            if (mt_db_import_vllm(db, o->pos[i], &n))
                return fail_into(db, o->pos[0], existed);
            printf("%s: %d reference config(s)\n", o->pos[i], n);
        } else {
            mt_db_merge_stats s;
            if (mt_db_import_json(db, o->pos[i], &s))
                return fail_into(db, o->pos[0], existed);
            print_merge_stats(o->pos[i], &s);
        }
    }
    mt_db_close(db);
    return MT_EXIT_OK;
}

/* ---- merge / verify / prune ---- */

static int cmd_merge(const opts *o)
{
    const int existed = access(o->pos[0], F_OK) == 0;
    mt_db *db = open_or_report(o->pos[0], MT_DB_CREATE);
    if (!db)
        return MT_EXIT_FAIL;
    if (refuse_source_is_dst(db, o, existed))
        return MT_EXIT_USAGE;
    for (int i = 1; i < o->npos; i++) {
        mt_db_merge_stats s;
        if (mt_db_merge_by(db, o->pos[i], o->newer ? MT_DB_MERGE_NEWER : MT_DB_MERGE_FASTER, &s))
            return fail_into(db, o->pos[0], existed);
        print_merge_stats(o->pos[i], &s);
    }
    mt_db_close(db);
    return MT_EXIT_OK;
}

static void print_problem(const char *problem, void *ctx)
{
    (void)ctx;
    printf("problem: %s\n", problem);
}

static int cmd_verify(const opts *o)
{
    mt_db *db = open_or_report(o->pos[0], MT_DB_READONLY);
    if (!db)
        return MT_EXIT_FAIL;
    int problems = 0;
    mt_status st = mt_db_verify(db, print_problem, NULL, &problems);
    if (st && !problems)
        return fail_db(db);
    printf("%s: %s (%d problem%s)\n", o->pos[0], problems ? "FAILED" : "ok", problems,
           problems == 1 ? "" : "s");
    mt_db_close(db);
    return problems ? MT_EXIT_FAIL : MT_EXIT_OK;
}

static int cmd_prune(const opts *o)
{
    mt_db *db = open_or_report(o->pos[0], o->dry_run ? MT_DB_READONLY : 0);
    if (!db)
        return MT_EXIT_FAIL;
    mt_db_prune_stats s;
    if (mt_db_prune(db, o->sku, o->hash, o->dry_run, &s))
        return fail_db(db);
    printf("%s%s: entries %lld, history %lld, candidates %lld, kernels %lld, provenance %lld\n",
           o->dry_run ? "would delete from " : "deleted from ", o->pos[0], (long long)s.entries,
           (long long)s.history, (long long)s.candidates, (long long)s.kernels,
           (long long)s.provenance);
    mt_db_close(db);
    return MT_EXIT_OK;
}

static void print_line(const char *line, void *ctx)
{
    (void)ctx;
    printf("  %s\n", line);
}

/* A command over one database and the templates the tuner uses: open both
 * (the database read-only for a dry run), then job(), whose status is the
 * exit code's. */
typedef int (*template_job)(mt_db *db, mt_gen *g, const char *path, const opts *o);

static int run_with_templates(const opts *o, template_job job)
{
    mt_gen *g = mt_cli_open_templates(NULL, "db", "MT_TEMPLATE_PATH and MT_TEMPLATE_DIR");
    if (!g)
        return MT_EXIT_FAIL;
    mt_db *db = open_or_report(o->pos[0], o->dry_run ? MT_DB_READONLY : 0);
    if (!db) {
        mt_gen_close(g);
        return MT_EXIT_FAIL;
    }
    int rc = job(db, g, o->pos[0], o);
    mt_gen_close(g);
    mt_db_close(db);
    return rc;
}

static int refresh_job(mt_db *db, mt_gen *g, const char *path, const opts *o)
{
    mt_refresh_stats s;
    char msg[1024], same_code[64] = "";
    const unsigned flags = (o->dry_run ? MT_REFRESH_DRY_RUN : 0u) | (o->compile ? MT_REFRESH_COMPILE : 0u);
    mt_status st = mt_refresh_kernels(db, g, flags, print_line, NULL, &s, msg, sizeof msg);
    if (o->compile)
        snprintf(same_code, sizeof same_code, " (%d by their code)", s.same_code);
    printf("%s: kernels %d current, %d %s%s, %d changed, %d not of these templates\n", path, s.current,
           s.refreshed, o->dry_run ? "would be refreshed" : "refreshed", same_code, s.changed, s.unknown);
    if (st) {
        fprintf(stderr, "moetune db: refresh %s: %s\n", path, msg);
        return MT_EXIT_FAIL;
    }
    return MT_EXIT_OK;
}

static int cmd_refresh(const opts *o) { return run_with_templates(o, refresh_job); }

static int deterministic_job(mt_db *db, mt_gen *g, const char *path, const opts *o)
{
    const int dry_run = o->dry_run;
    mt_deterministic_stats s;
    char msg[1024];
    mt_status st = mt_make_deterministic(db, g, dry_run, print_line, NULL, &s, msg, sizeof msg);
    printf("%s: %d entries sum by atomics, %d %s, %d left\n", path, s.entries, s.replaced,
           dry_run ? "would be replaced" : "replaced", s.left);
    if (st) {
        fprintf(stderr, "moetune db: deterministic %s: %s\n", path, msg);
        return MT_EXIT_FAIL;
    }
    return s.left ? MT_EXIT_FAIL : MT_EXIT_OK;
}

static int cmd_deterministic(const opts *o) { return run_with_templates(o, deterministic_job); }

/* ---- the subcommands ---- */

#define OPTS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NO_OPTS ((const char *const[]){NULL})
#define ONE_DB "expected one database"
/* As many positional arguments as parse_opts holds. */
enum { MANY = (int)MT_ARRAY_LEN(((opts *)0)->pos) };

static const db_sub subs[] = {
    {"show", "moetune db show DB [--sku S] [--E N] [--history]",
     OPTS("--sku", "--E", "--history"), 0, 1, 1, ONE_DB,
     "Print the tuned entries, one table per SKU and problem key: M, backend, time, speed-up "
     "over the untuned default and cuBLAS, error, kernels, the vLLM reference config when one "
     "was imported, and the provenance.\n"
     "--history prints every record offered instead of the winners.",
     cmd_show},
    {"export", "moetune db export DB [-o FILE] [--images] [--vllm DIR]",
     OPTS("-o", "--images", "--vllm"), 1, 1, 1, ONE_DB,
     "Write the database as moetune JSON to FILE (default: stdout); --images includes the "
     "kernel images as base64. --vllm DIR instead writes vLLM's per-device config files "
     "(E=..,N=..,device_name=...json) from the gemm1 kernels of moetune-backend entries; "
     "with -o FILE as well, also the JSON (--images goes with the JSON only).",
     cmd_export},
    {"import", "moetune db import DB FILE... [--vllm]", OPTS("--vllm"), 0, 2, MANY,
     "expected a database and 1 to " DB_STR(DB_MAX_SOURCES) " files",
     "Import moetune JSON exports (at most " DB_STR(DB_MAX_SOURCES) " files, none of them DB "
     "itself) into DB (created if missing) with the merge rules: per key "
     "and M the faster entry wins, both are kept in the history. --vllm: the files are vLLM "
     "per-device configs, stored as reference records that `db show` prints beside the tuned "
     "kernels.",
     cmd_import},
    {"merge", "moetune db merge DST SRC... [--newer]", OPTS("--newer"), 0, 2, MANY,
     "expected a destination and 1 to " DB_STR(DB_MAX_SOURCES) " sources",
     "Merge each SRC database (at most " DB_STR(DB_MAX_SOURCES) ", none of them DST itself) "
     "into DST (created if missing), one transaction per SRC: per SKU, "
     "key and M the faster entry wins and both records stay in the history; kernels DST lacks "
     "are copied. --newer: the entry recorded later wins instead (in the same second the "
     "faster), for retunes of different points that ran apart from one file: each stores its "
     "own run's times, which the lower stored times of earlier runs would otherwise outvote.",
     cmd_merge},
    {"verify", "moetune db verify DB", NO_OPTS, 0, 1, 1, ONE_DB,
     "Check SQLite integrity, the application id and schema version, every kernel's source "
     "and image against their SHA-256, and that every entry's kernels are present. Exit 0 when "
     "all is well, 1 otherwise.",
     cmd_verify},
    {"prune", "moetune db prune DB [--sku S] [--template-hash H] [--dry-run]",
     OPTS("--sku", "--template-hash", "--dry-run"), 0, 1, 1, ONE_DB,
     "Delete the entries of SKU S and/or those measured with templates whose hash is not H "
     "(both given: both must hold; H is a stored hash, whole or by a prefix of 6+ characters "
     "that fits only it), with their history and candidates; then drop kernels no entry uses "
     "and unreferenced provenance, and VACUUM. Without filters only the unreferenced rows go. "
     "--dry-run counts only.",
     cmd_prune},
    {"refresh", "moetune db refresh DB [--dry-run] [--compile]", OPTS("--dry-run", "--compile"), 0, 1, 1,
     ONE_DB,
     "Check every stored kernel against the templates the tuner uses (MT_TEMPLATE_PATH, "
     "MT_TEMPLATE_DIR, else the installed ones). A kernel made from older templates whose "
     "variant and source the current templates generate the same, byte for byte, gets the "
     "current template hash, so the runtime no longer reports it as made from other "
     "templates; one whose source changed keeps its hash (tune it again). Nothing is "
     "timed, and without --compile nothing is compiled. --compile: a kernel whose source "
     "changed is compiled from the current templates (NVRTC, as the tuner would), and where "
     "its image holds the stored one's code byte for byte (line tables aside), the new source "
     "and image replace the stored ones with the current hash. --dry-run reports only (its "
     "compilations still go to the compile cache).",
     cmd_refresh},
    {"deterministic", "moetune db deterministic DB [--dry-run]", OPTS("--dry-run"), 0, 1, 1,
     ONE_DB,
     "Make every entry bitwise reproducible run to run: an entry whose GEMM2 adds each "
     "token's slots into the output by fp32 atomics (a grouped_gemm or grouped_gemm_sm90 tile "
     "with the epilogue \"sum\", which `moetune tune --atomic-sums` may choose) gets the "
     "fastest candidate of its own tuning run that keeps its GEMM1 and stores GEMM2 per slot, "
     "with that candidate's measured time; the GEMM2 kernel is compiled here (NVRTC, no GPU "
     "needed) and stored, the old entry stays in the history. An entry with no such "
     "candidate is reported and left (exit 1). --dry-run reports only.",
     cmd_deterministic},
};

static void db_usage(FILE *f)
{
    fprintf(f, "usage: moetune db <command> ...   (moetune db <command> --help)\n\n");
    for (size_t i = 0; i < MT_ARRAY_LEN(subs); i++)
        fprintf(f, "  %s\n", subs[i].usage);
}

/* Parse a subcommand's command line, print its help or check its
 * positional arguments, then run it. */
static int run_sub(const db_sub *sub, int argc, char **argv)
{
    opts o;
    int rc = parse_opts(argc, argv, sub->usage, sub->allowed, sub->vllm_value, &o);
    if (rc)
        return rc;
    if (o.help) {
        printf("usage: %s\n\n%s\n", sub->usage, sub->help);
        return MT_EXIT_OK;
    }
    if (o.npos < sub->min_pos || o.npos > sub->max_pos)
        return usage_error(sub->usage, "%s", sub->pos_error);
    if (o.E_text && !mt_arg_int(o.E_text, 1, INT64_MAX, &o.E))
        return usage_error(sub->usage, "bad --E '%s'", o.E_text);
    return sub->run(&o);
}

int mt_cmd_db(int argc, char **argv)
{
    if (argc < 2) {
        db_usage(stderr);
        return MT_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        db_usage(stdout);
        return MT_EXIT_OK;
    }
    for (size_t i = 0; i < MT_ARRAY_LEN(subs); i++)
        if (!strcmp(argv[1], subs[i].name))
            return run_sub(&subs[i], argc - 1, argv + 1);
    fprintf(stderr, "moetune db: unknown command '%s'\n", argv[1]);
    db_usage(stderr);
    return MT_EXIT_USAGE;
}
