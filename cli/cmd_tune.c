/*
 * `moetune tune`: the main job. Tunes one problem shape over an M sweep on
 * this GPU into a database (see moetune/tuner.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "common/cuda_driver.h"
#include "moetune/tuner.h"

_Static_assert(MT_ARG_MAX_MS <= MT_TUNE_MAX_M, "--M takes no more values than a tune holds");

/* GPU count, asked in a child process: this process must not initialize
 * CUDA before it forks its workers. */
static int count_gpus(void)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        char m[256];
        int n = 0;
        if (mt_cuda_load(m, sizeof m) == MT_OK)
            mt_cu.cuDeviceGetCount(&n);
        _exit(n > 200 ? 200 : n);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
        return 0;
    return WEXITSTATUS(status);
}

/* 1: parsed; 0: a bad value; -1: "all" and no GPU answers. */
static int parse_devices(const char *v, mt_tune_opts *o)
{
    if (!strcmp(v, "all")) {
        o->ndevices = count_gpus();
        for (int i = 0; i < o->ndevices && i < 64; i++)
            o->devices[i] = i;
        return o->ndevices > 0 ? 1 : -1;
    }
    int64_t d[64];
    int n = 0;
    if (!mt_arg_int_list(v, 0, 1023, d, 64, &n))
        return 0;
    for (int i = 0; i < n; i++)
        o->devices[i] = (int)d[i];
    o->ndevices = n;
    return 1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: moetune tune (--preset NAME | --E n --topk n --K n --N n) [options]\n\n"
            MT_SHAPE_ARGS_HELP
            "  --M LIST              token counts (default 1 2 4 8 16 24 32 48 64 96 128 256\n"
            "                        512 1024 1536 2048 3072 4096); a list is comma-separated:\n"
            "                        --M 1,8,64\n"
            "  --routing R           uniform (default), balanced or skewed\n"
            "  --db PATH             the database to write (default moetune.db)\n"
            "  --max-candidates N    GEMM1 tiles timed per M (default 12; GEMM2: half)\n"
            "  --finalists N         the final round: the N fastest tuned pipelines of an M\n"
            "                        within 3 %% of the best, and the default, timed again\n"
            "                        three times each in turn; the entry is the fastest\n"
            "                        median (default 4; 0: no final round)\n"
            "  --timeout S           per-candidate time limit in whole seconds (default 30)\n"
            "  --reps N              timed repetitions per candidate (default 20)\n"
            "  --device N            GPU ordinal (default 0)\n"
            "  --devices all|0,1,..  one worker per GPU, the M values dealt between them\n"
            "  --shard I/N           only work items i with i %% N == I (Slurm array task,\n"
            "                        Kubernetes indexed Job); merge shards with `moetune db merge`\n"
            "  --param [gemm1:|gemm2:]NAME=VALUE\n"
            "                        search only GEMM variants with that parameter value,\n"
            "                        for both GEMMs or (prefixed) for one (repeat a name for\n"
            "                        any of several; at most %d; the default pipeline is\n"
            "                        still timed; the M values count as tuned, so explore\n"
            "                        into a database of its own):\n"
            "                        --param BLOCK_M=16 --param gemm2:PIPE=pingpong\n"
            "  --retune              tune again the M values an earlier run left, finished\n"
            "                        or cut short: their candidate log is forgotten, the\n"
            "                        stored pipeline is timed again with the new candidates\n"
            "                        and the run's winner replaces it\n"
            "  --retime              --retune without a search: at an M whose stored pipeline\n"
            "                        is of these templates and passes its check again, time\n"
            "                        only the stored pipelines of it and its neighbours (made\n"
            "                        from these templates), the default and the other launch\n"
            "                        order of the fastest tuned one, and store the fastest;\n"
            "                        for a template change that keeps what each kernel does\n"
            "                        (other M, or a stored pipeline that fails: the search)\n"
            "  --atomic-sums         also time GEMM2 tiles that add each token's slots into\n"
            "                        the output by fp32 atomics (epilogue \"sum\"; not\n"
            "                        bitwise reproducible run to run, so off by default)\n"
            "  --no-isolate          run in this process (a faulting kernel ends the run)\n"
            "  --backend gpu|fake    fake: deterministic numbers without a GPU (for tests)\n"
            "  --list-presets        print the model presets\n\n"
            "Every candidate is checked against the CPU oracle before it is timed; faults\n"
            "and hangs are recorded as rejected and the run carries on. Results are\n"
            "committed as measured: rerunning the same command resumes.\n"
            "Exit codes: 0 ok, 1 failed, 2 bad usage, 3 no GPU or driver.\n",
            MT_TUNE_MAX_ONLY);
}

int mt_cmd_tune(int argc, char **argv)
{
    mt_shape_args sa;
    mt_shape_args_init(&sa);
    mt_tune_opts o;
    memset(&o, 0, sizeof o);
    mt_tune_default_ms(&o);
    o.db_path = "moetune.db";
    o.isolate = 1;
    o.log = stderr;
    int64_t x;
    /* --param is documented as repeatable; every other value is one. */
    mt_arg_seen seen = {.cmd = "tune", .repeatable = (const char *const[]){"--param", NULL}};
    int no_gpu_for_all = 0;   /* --devices all found no GPU */
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
        if (!strcmp(a, "--no-isolate")) {
            o.isolate = 0;
            continue;
        }
        if (!strcmp(a, "--retune")) {
            o.retune = 1;
            continue;
        }
        if (!strcmp(a, "--retime")) {
            o.retime = 1;
            continue;
        }
        if (!strcmp(a, "--atomic-sums")) {
            o.atomic_sums = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "moetune tune: %s needs a value (or is no option: see --help)\n", a);
            return MT_EXIT_USAGE;
        }
        i++;
        if (!mt_arg_value(&seen, a, v))
            return MT_EXIT_USAGE;
        int taken = mt_shape_args_take(&sa, "tune", a, v), ok = 1;
        if (taken < 0)
            return MT_EXIT_USAGE;
        if (taken)
            continue;
        if (!strcmp(a, "--M"))
            ok = mt_arg_int_list(v, 1, MT_MAX_TOKENS, o.Ms, MT_ARG_MAX_MS, &o.nM);
        else if (!strcmp(a, "--routing")) {
            mt_routing r;
            ok = mt_routing_parse(v, &r) == MT_OK;
            o.routing = v;
        } else if (!strcmp(a, "--db"))
            o.db_path = v;
        else if (!strcmp(a, "--max-candidates"))
            ok = mt_arg_int(v, 1, 1000, &x), o.max_candidates = (int)x;
        else if (!strcmp(a, "--finalists"))
            ok = mt_arg_int(v, 0, 16, &x), o.finalists = x ? (int)x : -1;
        else if (!strcmp(a, "--timeout"))
            ok = mt_arg_int(v, 1, 86400, &x), o.candidate_timeout_s = (double)x;
        else if (!strcmp(a, "--reps"))
            ok = mt_arg_int(v, 1, 10000, &x), o.reps = (int)x;
        else if (!strcmp(a, "--device"))
            ok = mt_arg_int(v, 0, 1023, &x), o.device = (int)x;
        else if (!strcmp(a, "--devices")) {
            ok = parse_devices(v, &o);
            /* Said after every usage check: a bad command line is exit 2
             * on any machine. */
            no_gpu_for_all = ok < 0;
            ok = ok != 0;
        }
        else if (!strcmp(a, "--shard")) {
            int64_t i0, n0;
            char *slash = strchr(v, '/');
            ok = slash != NULL;
            if (ok) {
                *slash = '\0';
                ok = mt_arg_int(v, 0, 1 << 20, &i0) && mt_arg_int(slash + 1, 1, 1 << 20, &n0) &&
                     i0 < n0;
                *slash = '/';
                o.shard_index = (int)i0, o.shard_count = (int)n0;
            }
        } else if (!strcmp(a, "--param")) {
            /* [gemm1:|gemm2:]NAME=VALUE, split in place (argv[i] is v) */
            if (o.nonly == MT_TUNE_MAX_ONLY) {
                fprintf(stderr, "moetune tune: at most %d --param\n", MT_TUNE_MAX_ONLY);
                return MT_EXIT_USAGE;
            }
            char *name = argv[i];
            int role = 0;
            if (!strncmp(name, "gemm1:", 6) || !strncmp(name, "gemm2:", 6)) {
                role = name[4] - '0';
                name += 6;
            }
            char *eq = strchr(name, '=');
            ok = eq && eq != name && eq[1];
            if (ok) {
                *eq = '\0';
                o.only[o.nonly].name = name;
                o.only[o.nonly].role = role;
                o.only[o.nonly++].value = eq + 1;
            }
        } else if (!strcmp(a, "--backend")) {
            ok = !strcmp(v, "gpu") || !strcmp(v, "fake");
            o.backend = v;
        } else {
            fprintf(stderr, "moetune tune: unknown option %s\n", a);
            return MT_EXIT_USAGE;
        }
        if (!ok) {
            mt_arg_bad("tune", a, v);
            return MT_EXIT_USAGE;
        }
    }
    /* One worker per listed GPU leaves no place for a single --device; a
     * retime keeps the stored pipelines that a retune searches anew. */
    if (mt_arg_exclusive("tune", mt_arg_given(&seen, "--devices"), "--devices",
                         mt_arg_given(&seen, "--device"), "--device") ||
        mt_arg_exclusive("tune", o.retune, "--retune", o.retime, "--retime"))
        return MT_EXIT_USAGE;
    if (!mt_shape_args_finish(&sa, "tune"))
        return MT_EXIT_USAGE;
    if (no_gpu_for_all) {
        fprintf(stderr, "moetune tune: --devices all: no GPU found (tuning needs a GPU "
                        "and the CUDA driver)\n");
        return MT_EXIT_NO_GPU;
    }
    o.shape = sa.shape;
    o.label = sa.label;
    mt_tune_summary *s = calloc(1, sizeof *s);
    if (!s)
        return MT_EXIT_FAIL;
    char msg[2048];
    mt_status st = mt_tune_run(&o, s, msg, sizeof msg);
    if (st) {
        fprintf(stderr, "moetune tune: %s: %s\n", mt_status_str(st), msg);
        free(s);
        return st == MT_ERR_NO_DRIVER || st == MT_ERR_NO_DEVICE ? MT_EXIT_NO_GPU
               : st == MT_ERR_INVALID_ARG                    ? MT_EXIT_USAGE
                                                             : MT_EXIT_FAIL;
    }
    mt_tune_print_summary(&o, s, stdout);
    const int unfinished = s->unfinished;
    free(s);
    if (unfinished) {   /* a job that left M values without results did not succeed */
        fprintf(stderr, "moetune tune: %d M value(s) not finished (listed after the table)\n",
                unfinished);
        return MT_EXIT_FAIL;
    }
    return MT_EXIT_OK;
}
