/*
 * `moetune bench`: time the fused-MoE pipeline of one shape over an M sweep
 * (tuned from a database, untuned default, best default variant) against
 * cuBLAS grouped GEMMs (needs a GPU).
 */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "common/util.h"
#include "tuner/bench.h"
#include "tuner/roofline.h"

/* An output file (--json, --svg) that the bench fills in memory; at the end
 * the file is replaced when the run succeeded or wrote something (the JSON
 * rows of the M values measured before a failure). A run that fails before
 * any result (no GPU, a bad option found late) leaves an existing file as
 * it was. Whether the file can be written is checked at the start. */
typedef struct out_file {
    const char *path;
    char *data;
    size_t len;
    FILE *f;
    int atomic;   /* a regular file (or a new one): replaced by a rename */
} out_file;

static int out_open(out_file *o, const char *path)
{
    memset(o, 0, sizeof *o);
    o->path = path;
    if (!path)
        return 1;
    /* A regular file is replaced atomically, which needs its folder to be
     * writable; anything else (/dev/stdout, a pipe) is written in place. */
    struct stat sb;
    int exists = stat(path, &sb) == 0;
    /* Refused now, not after the whole sweep has run (an empty path was
     * refused with the options). */
    if (exists && S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "moetune bench: cannot write '%s': a folder, not a file\n", path);
        return 0;
    }
    o->atomic = !exists || S_ISREG(sb.st_mode);
    char dir[4096];
    mt_strlcpy(dir, path, sizeof dir);
    if ((o->atomic ? access(dirname(dir), W_OK) : access(path, W_OK)) != 0 ||
        !(o->f = open_memstream(&o->data, &o->len))) {
        fprintf(stderr, "moetune bench: cannot write %s%s\n", path,
                o->atomic ? " (its folder must be writable)" : "");
        return 0;
    }
    return 1;
}

static int write_in_place(const out_file *o, char *msg, size_t msg_size)
{
    FILE *f = fopen(o->path, "w");
    int ok = f && fwrite(o->data, 1, o->len, f) == o->len;
    if (f && fclose(f) != 0)
        ok = 0;
    if (!ok)
        snprintf(msg, msg_size, "cannot write %s", o->path);
    return ok;
}

/* Close, and write the file when the run succeeded (ok) or wrote into it.
 * Returns 0 when writing failed. */
static int out_close(out_file *o, int ok)
{
    if (!o->f)
        return 1;
    fclose(o->f);
    char msg[512];
    int done = !ok && o->len == 0;
    if (!done)
        done = o->atomic ? mt_file_write_atomic(o->path, o->data, o->len, msg, sizeof msg) == MT_OK
                         : write_in_place(o, msg, sizeof msg);
    if (!done)
        fprintf(stderr, "moetune bench: %s\n", msg);
    free(o->data);
    return done;
}

/* "--experts-hit M:N,...": want[i] = N for the M of Ms[i]; each M one of
 * the --M values, N in [topk, min(E, M * topk)] (a token's topk experts are
 * distinct). 0 (false) after a message. */
static int parse_experts_hit(const char *text, const mt_problem *shape, const int64_t *Ms, int nM,
                             int *want)
{
    for (const char *p = text;; p++) {
        const char *end = p;
        int64_t m = 0, n = 0;
        /* Digits only, as every number of the command line (mt_arg_digits). */
        if (!mt_arg_digits(p, &end, &m) || *end != ':' || !mt_arg_digits(end + 1, &end, &n) ||
            (*end && *end != ',')) {
            fprintf(stderr, "moetune bench: --experts-hit wants M:N pairs, comma-separated: '%s'\n",
                    text);
            return 0;
        }
        int i = 0;
        while (i < nM && Ms[i] != m)
            i++;
        if (i == nM) {
            fprintf(stderr, "moetune bench: --experts-hit: M=%lld is not one of the --M values\n",
                    (long long)m);
            return 0;
        }
        /* m is one of the validated --M values: m * topk cannot overflow. */
        const long long most = shape->E < m * shape->topk ? shape->E : m * shape->topk;
        if (n < shape->topk || n > most) {
            fprintf(stderr, "moetune bench: --experts-hit: M=%lld can hit %lld to %lld experts, not "
                    "%lld\n", (long long)m, (long long)shape->topk, most, (long long)n);
            return 0;
        }
        want[i] = (int)n;
        p = end;
        if (!*p)
            return 1;
    }
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: moetune bench (--preset NAME | --E n --topk n --K n --N n) [options]\n\n"
            MT_SHAPE_ARGS_HELP
            "  --M LIST          comma-separated token counts (default 1,32,256,4096)\n"
            "  --reps N          timed repetitions per point (default 30)\n"
            "  --max-candidates N  per M and format, time only the untuned default and\n"
            "                    the best-modelled other default variants, N in all\n"
            "                    (default 0: every default variant)\n"
            "  --pipeline-only   leave out the batched experts stage and cuBLAS (about\n"
            "                    half the time; their JSON fields are null)\n"
            "  --db FILE         also time the tuned pipeline libmoetune would take from\n"
            "                    this database (this GPU's entry at the nearest M, checked\n"
            "                    once against the CPU reference); no entry: the column is\n"
            "                    empty\n"
            "  --experts-hit M:N,...  at each listed M, route the tokens so that N distinct\n"
            "                    experts are hit (the first such seed; another run's\n"
            "                    routing of the shape, a peer table's; scripts/gpu-bench-all.sh)\n"
            "  --json FILE       also write one JSON line per M\n"
            "  --svg FILE        also write a chart (time and roofline fraction against M)\n\n"
            "Times, per M, the whole standard-format pipeline: tuned (with --db), the\n"
            "untuned default and the best of the default kernel variants; then the\n"
            "batched experts stage alone and cuBLAS grouped GEMMs around the same\n"
            "activation on the same data. Each point is a CUDA-graph replay after an\n"
            "L2 flush; the median is printed. The roofline is the H200's on every GPU\n"
            "(%.1f TB/s device to device, %.0f TFLOP/s dense bf16, 8-bit twice that:\n"
            "the peer table's ceilings), so on another card its fraction compares with\n"
            "the H200, not with that card's own limits.\n",
            MT_H200_HBM_BYTES_PER_S * 1e-12, MT_H200_BF16_FLOPS * 1e-12);
}

int mt_cmd_bench(int argc, char **argv)
{
    mt_shape_args sa;
    mt_shape_args_init(&sa);
    const char *json = NULL, *svg = NULL, *db = NULL;
    int64_t Ms[MT_ARG_MAX_MS] = {1, 32, 256, 4096};
    int nM = 4;
    int64_t reps = 30, max_candidates = 0;
    int pipeline_only = 0;
    const char *hits = NULL;
    mt_arg_seen seen = {.cmd = "bench"};   /* no option of bench repeats */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return MT_EXIT_OK;
        }
        if (!strcmp(a, "--list-presets")) {
            mt_print_presets();
            return MT_EXIT_OK;
        }
        if (!strcmp(a, "--pipeline-only")) {   /* the one option without a value */
            pipeline_only = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "moetune bench: %s needs a value (or is no option: see --help)\n", a);
            return MT_EXIT_USAGE;
        }
        i++;
        if (!mt_arg_value(&seen, a, v))
            return MT_EXIT_USAGE;
        int taken = mt_shape_args_take(&sa, "bench", a, v), ok = 1;
        if (taken < 0)
            return MT_EXIT_USAGE;
        if (taken)
            continue;
        if (!strcmp(a, "--M"))
            ok = mt_arg_int_list(v, 1, MT_MAX_TOKENS, Ms, MT_ARG_MAX_MS, &nM);
        else if (!strcmp(a, "--reps"))
            ok = mt_arg_int(v, 1, 10000, &reps);
        else if (!strcmp(a, "--max-candidates"))
            ok = mt_arg_int(v, 0, 1000, &max_candidates);
        else if (!strcmp(a, "--db"))
            db = v;
        else if (!strcmp(a, "--experts-hit"))
            hits = v;
        else if (!strcmp(a, "--json"))
            json = v;
        else if (!strcmp(a, "--svg"))
            svg = v;
        else {
            fprintf(stderr, "moetune bench: unknown option %s\n", a);
            return MT_EXIT_USAGE;
        }
        if (!ok) {
            mt_arg_bad("bench", a, v);
            return MT_EXIT_USAGE;
        }
    }
    if (!mt_shape_args_finish(&sa, "bench"))
        return MT_EXIT_USAGE;
    for (int i = 1; svg && i < nM; i++)
        if (Ms[i] <= Ms[i - 1]) {   /* said now, not after the GPU work */
            fprintf(stderr, "moetune bench: --svg needs increasing --M values (%lld after %lld)\n",
                    (long long)Ms[i], (long long)Ms[i - 1]);
            return MT_EXIT_USAGE;
        }
    if (json && svg && !strcmp(json, svg)) {   /* one would overwrite the other */
        fprintf(stderr, "moetune bench: --json and --svg name the same file %s\n", json);
        return MT_EXIT_USAGE;
    }
    int want[64] = {0};
    if (hits && !parse_experts_hit(hits, &sa.shape, Ms, nM, want))
        return MT_EXIT_USAGE;
    mt_bench_opts o = {.shape = sa.shape, .label = sa.label, .Ms = Ms, .nM = nM,
                       .reps = (int)reps, .warmup = 3, .max_candidates = (int)max_candidates,
                       .pipeline_only = pipeline_only, .db_path = db,
                       .experts_hit_want = hits ? want : NULL};
    out_file jf, sf;
    int opened = out_open(&jf, json);
    opened = opened && out_open(&sf, svg);
    if (!opened) {
        out_close(&jf, 0);
        return MT_EXIT_FAIL;
    }
    o.json = jf.f, o.svg = sf.f;
    char msg[1024];
    mt_status st = mt_bench_run(&o, msg, sizeof msg);
    int written = out_close(&jf, st == MT_OK);
    written = out_close(&sf, st == MT_OK) && written;
    if (!st && !written)
        return MT_EXIT_FAIL;
    if (st) {
        fprintf(stderr, "moetune bench: %s: %s\n", mt_status_str(st), msg);
        return st == MT_ERR_NO_DRIVER || st == MT_ERR_NO_DEVICE ? MT_EXIT_NO_GPU : MT_EXIT_FAIL;
    }
    return MT_EXIT_OK;
}
