/*
 * `moetune gen`: list, emit and compile kernel variants from the Lua
 * templates. Strings from the command line are turned into an mt_gen_config
 * and mt_gen_filter here; all the work is done by the gen module.
 * Calls: moetune/gen.h, common/util.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/templates.h"
#include "common/util.h"
#include "moetune/gen.h"

#define MAX_LIST 64

typedef struct gen_args {
    const char *family;
    const char *archs[8];
    int narchs;
    int defaults;
    mt_gen_filter filter;            /* params only; family/arch set per call */
    char param_text[MT_GEN_MAX_FILTERS][160];   /* NAME=VALUE split in place */
    const char *templates[MAX_LIST];
    int ntemplates;
    const char *names[MAX_LIST];     /* positional: canonical variant names */
    int nnames;
    const char *out_dir, *cache_dir;
    int jobs, no_cache, verbose, progress;
    char arch_text[128];
} gen_args;

static const char usage_filters[] =
    "filters:\n"
    "  --family F        one template family (default: every family)\n"
    "  --arch A          sm_80, sm_86, sm_89, sm_90a (default) or compute_90 (PTX)%s\n"
    "  --dtype D, --quant Q, --format F, --op O\n"
    "                    shorthands for --param dtype=D etc.\n"
    "  --param NAME=VALUE  keep points with that value (repeat a name for any of several)\n"
    "  --defaults        keep only the templates' default sets\n";

static const char usage_other[] =
    "options:\n"
    "  --templates DIR   an extra template folder (repeatable; wins over the built-in one;\n"
    "                    env MT_TEMPLATE_PATH adds more, MT_TEMPLATE_DIR replaces the built-in)\n"
    "  -v, --verbose     notes on stderr (template overrides, corrupt cache entries)\n"
    "  -h, --help        this text\n";

static void usage(FILE *f, const char *sub)
{
    if (!sub) {
        fprintf(f, "usage: moetune gen <list|emit|compile|families> [options]\n\n"
                   "  list      the valid variants (name, threads, shared memory) and why the\n"
                   "            others were pruned\n"
                   "  emit      the self-contained CUDA source of variants\n"
                   "  compile   compile variants with NVRTC (cached), report failures\n"
                   "  families  the loaded template families and their files\n\n"
                   "Compile the default kernel set:\n"
                   "  moetune gen compile --defaults --arch sm_90a,sm_80\n\n"
                   "`moetune gen <command> --help` for the options of each.\n");
        return;
    }
    if (!strcmp(sub, "list"))
        fprintf(f, "usage: moetune gen list [filters]\n\nPrints one valid variant per line "
                   "(name, threads per block, dynamic shared memory),\nthen the number of "
                   "points enumerated, valid and pruned per reason. Without\n--family, a "
                   "family with more than %d points after the filters is\nnot listed but "
                   "named (with --family, it is refused: exit 1).\n\n", MT_GEN_MAX_WALK_POINTS);
    else if (!strcmp(sub, "emit"))
        fprintf(f, "usage: moetune gen emit [NAME...] [filters] [-o DIR]\n\nWrites the "
                   "amalgamated source of the named variants (or of every variant the\nfilters "
                   "select) to DIR/NAME.cu, or to stdout without -o. Names and the\n"
                   "filters other than --arch exclude each other.\n\n");
    else if (!strcmp(sub, "compile"))
        fprintf(f, "usage: moetune gen compile [NAME...] [filters] [--jobs N] [--cache DIR]\n"
                   "                           [--no-cache] [--progress|--quiet] [-o DIR]\n\n"
                   "Compiles with NVRTC (cubin for sm_XX, PTX for compute_XX) through the "
                   "compile cache\n(--cache, else MT_CACHE_DIR, $XDG_CACHE_HOME/moetune, "
                   "~/.cache/moetune), writes\nDIR/ARCH/NAME.cubin|.ptx with -o, prints a "
                   "summary; exit 1 if any variant failed.\nNames and the filters other than "
                   "--arch exclude each other, as do --cache and\n--no-cache, and --progress "
                   "and --quiet.\n"
                   "  --jobs N   parallel NVRTC compilations (default: one per core)\n\n"
                   "Compile the default kernel set:\n"
                   "  moetune gen compile --defaults --arch sm_90a,sm_80\n\n");
    else
        fprintf(f, "usage: moetune gen families [--templates DIR]\n\nLists the template "
                   "families, their versions' files and the folders searched.\n\n");
    if (strcmp(sub, "families"))   /* families lists them all: no filter */
        fprintf(f, usage_filters, strcmp(sub, "emit") ? "; a comma list: sm_90a,sm_80" : "");
    fputs(usage_other, f);
}

static int add_param(gen_args *a, const char *name, const char *value)
{
    if (a->filter.nparams >= MT_GEN_MAX_FILTERS) {
        fprintf(stderr, "moetune gen: at most %d parameter filters\n", MT_GEN_MAX_FILTERS);
        return 0;
    }
    char *t = a->param_text[a->filter.nparams];
    if (!value) {   /* NAME=VALUE */
        if (strlen(name) >= sizeof a->param_text[0]) {
            fprintf(stderr, "moetune gen: --param '%.40s...' is too long (at most %zu "
                            "characters)\n", name, sizeof a->param_text[0] - 1);
            return 0;
        }
        mt_strlcpy(t, name, sizeof a->param_text[0]);
        char *eq = strchr(t, '=');
        if (!eq || eq == t || !eq[1]) {
            fprintf(stderr, "moetune gen: --param wants NAME=VALUE, not '%s'\n", name);
            return 0;
        }
        *eq = '\0';
        name = t;
        value = eq + 1;
    }
    a->filter.params[a->filter.nparams].name = name;
    a->filter.params[a->filter.nparams].value = value;
    a->filter.nparams++;
    return 1;
}

static int parse_archs(gen_args *a, const char *text, int many)
{
    mt_strlcpy(a->arch_text, text, sizeof a->arch_text);
    a->narchs = 0;
    char *save = NULL;
    for (char *t = strtok_r(a->arch_text, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!mt_gen_arch_known(t)) {
            char known[MT_GEN_ARCH_NAMES_SIZE];
            fprintf(stderr, "moetune gen: unknown arch '%s' (known: %s)\n", t,
                    mt_gen_arch_names(known, sizeof known));
            return 0;
        }
        if (a->narchs == (int)MT_ARRAY_LEN(a->archs))
            return 0;
        a->archs[a->narchs++] = t;
    }
    if (a->narchs == 0 || (a->narchs > 1 && !many)) {
        fprintf(stderr, "moetune gen: --arch wants %s\n", many ? "a comma list" : "one arch");
        return 0;
    }
    return 1;
}

/* --jobs N: at most 4096 parallel compilations. */
static int parse_jobs(const char *s, int *out)
{
    int64_t x;
    if (!mt_arg_int(s, 0, 4096, &x))
        return 0;
    *out = (int)x;
    return 1;
}

/* Returns -1 to continue, else an exit code. */
static int parse(int argc, char **argv, const char *sub, gen_args *a)
{
    memset(a, 0, sizeof *a);
    a->archs[0] = "sm_90a";
    a->narchs = 1;
    a->progress = isatty(2);
    const int is_compile = !strcmp(sub, "compile"), is_emit = !strcmp(sub, "emit");
    const int is_families = !strcmp(sub, "families");
    char cmd[32];
    snprintf(cmd, sizeof cmd, "gen %s", sub);
    /* The filters on parameters add up; so do template folders. */
    mt_arg_seen seen = {.cmd = cmd, .repeatable = (const char *const[]){
        "--param", "--dtype", "--quant", "--format", "--op", "--templates", NULL}};
    int said_progress = 0, said_quiet = 0;
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = 1;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout, sub);
            return MT_EXIT_OK;
        } else if (!strcmp(o, "-v") || !strcmp(o, "--verbose")) {
            a->verbose = 1;
            takes = 0;
        } else if (!is_families && !strcmp(o, "--defaults")) {
            a->defaults = 1;
            takes = 0;
        } else if (is_compile && !strcmp(o, "--no-cache")) {
            a->no_cache = 1;
            takes = 0;
        } else if (is_compile && (!strcmp(o, "--progress") || !strcmp(o, "--quiet"))) {
            a->progress = !strcmp(o, "--progress");
            said_progress |= a->progress;
            said_quiet |= !a->progress;
            takes = 0;
        } else if (o[0] != '-') {
            if (!is_emit && !is_compile) {
                fprintf(stderr, "moetune gen %s: unexpected argument '%s'\n", sub, o);
                return MT_EXIT_USAGE;
            }
            if (a->nnames == MAX_LIST) {
                fprintf(stderr,
                        "moetune gen %s: more than %d variant names in one call; select them "
                        "with --family/--param filters or split the list\n",
                        sub, MAX_LIST);
                return MT_EXIT_USAGE;
            }
            a->names[a->nnames++] = o;
            takes = 0;
        }
        if (!takes)
            continue;
        static const char *const with_value[] = {"--family", "--arch", "--dtype", "--quant",
                                                 "--format", "--op", "--param", "--templates",
                                                 "-o", "--cache", "--jobs"};
        int known = 0;
        for (size_t k = 0; k < MT_ARRAY_LEN(with_value); k++)
            known |= !strcmp(o, with_value[k]);
        if (is_families)   /* it lists every family: filters do not apply */
            known = !strcmp(o, "--templates");
        if (!known) {
            fprintf(stderr, "moetune gen %s: unknown option '%s' (see --help)\n", sub, o);
            return MT_EXIT_USAGE;
        }
        if (!val) {
            fprintf(stderr, "moetune gen %s: %s needs a value (see --help)\n", sub, o);
            return MT_EXIT_USAGE;
        }
        if (!mt_arg_value(&seen, o, val))
            return MT_EXIT_USAGE;
        int ok = 1;
        if (!strcmp(o, "--family"))
            a->family = val;
        else if (!strcmp(o, "--arch"))
            ok = parse_archs(a, val, !is_emit);
        else if (!strcmp(o, "--dtype") || !strcmp(o, "--quant") || !strcmp(o, "--format") ||
                 !strcmp(o, "--op"))
            ok = add_param(a, o + 2, val);
        else if (!strcmp(o, "--param"))
            ok = add_param(a, val, NULL);
        else if (!strcmp(o, "--templates") && a->ntemplates < MAX_LIST)
            a->templates[a->ntemplates++] = val;
        else if (!strcmp(o, "--templates")) {
            fprintf(stderr, "moetune gen %s: more than %d --templates folders\n", sub, MAX_LIST);
            return MT_EXIT_USAGE;
        }
        else if ((is_emit || is_compile) && !strcmp(o, "-o"))
            a->out_dir = val;
        else if (is_compile && !strcmp(o, "--cache"))
            a->cache_dir = val;
        else if (is_compile && !strcmp(o, "--jobs"))
            ok = parse_jobs(val, &a->jobs);
        else {
            fprintf(stderr, "moetune gen %s: unknown option '%s' (see --help)\n", sub, o);
            return MT_EXIT_USAGE;
        }
        if (!ok) {
            fprintf(stderr, "moetune gen %s: bad value '%s' for %s\n", sub, val, o);
            return MT_EXIT_USAGE;
        }
        i++;
    }
    /* Named variants are found by name: filters would silently not apply. */
    const int filters = a->family || a->filter.nparams || a->defaults;
    if (mt_arg_exclusive(cmd, a->nnames > 0, "variant names", filters,
                         "filters (--family, --param, --dtype, --quant, --format, --op, --defaults)") ||
        mt_arg_exclusive(cmd, a->no_cache, "--no-cache", a->cache_dir != NULL, "--cache") ||
        mt_arg_exclusive(cmd, said_progress, "--progress", said_quiet, "--quiet"))
        return MT_EXIT_USAGE;
    return -1;
}

static mt_gen *open_gen(const gen_args *a)
{
    /* gen calls every --templates that is no folder missing; a file is
     * named for what it is. */
    for (int i = 0; i < a->ntemplates; i++) {
        struct stat st;
        if (stat(a->templates[i], &st) == 0 && !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "moetune gen: --templates %s is not a folder\n", a->templates[i]);
            return NULL;
        }
    }
    mt_gen_config cfg = {.template_dirs = a->templates, .ntemplate_dirs = a->ntemplates,
                         .cache_dir = a->cache_dir, .jobs = a->jobs, .progress = a->progress,
                         .verbose = a->verbose, .no_cache = a->no_cache};
    return mt_cli_open_templates(&cfg, "gen", "--templates, MT_TEMPLATE_PATH and MT_TEMPLATE_DIR");
}

/* The variants to work on: the named ones, or the filtered ones, per arch. */
static int select_variants(mt_gen *g, const gen_args *a, mt_variant **out, size_t *count)
{
    *out = NULL;
    *count = 0;
    mt_buf all = {0};
    for (int k = 0; k < a->narchs; k++) {
        if (a->nnames) {
            for (int i = 0; i < a->nnames; i++) {
                mt_variant v;
                if (mt_gen_find(g, a->names[i], a->archs[k], &v) != MT_OK) {
                    fprintf(stderr, "moetune gen: %s\n", mt_gen_errmsg(g));
                    mt_buf_free(&all);
                    return 0;
                }
                mt_buf_append(&all, (const char *)&v, sizeof v);
            }
            continue;
        }
        mt_gen_filter f = a->filter;
        f.family = a->family;
        f.arch = a->archs[k];
        f.defaults_only = a->defaults;
        mt_variant *v = NULL;
        size_t n = 0;
        if (mt_gen_enumerate(g, &f, &v, &n, NULL) != MT_OK) {
            fprintf(stderr, "moetune gen: %s\n", mt_gen_errmsg(g));
            mt_buf_free(&all);
            return 0;
        }
        mt_buf_append(&all, (const char *)v, n * sizeof *v);
        free(v);
    }
    if (all.oom) {
        fprintf(stderr, "moetune gen: out of memory\n");
        mt_buf_free(&all);
        return 0;
    }
    *out = (mt_variant *)(void *)all.data;
    *count = all.len / sizeof(mt_variant);
    return 1;
}

static int print_variant(const mt_variant *v, void *ctx)
{
    (void)ctx;
    printf("%s  %s  threads=%d  smem=%d\n", v->name, v->arch, v->threads, v->smem_bytes);
    return 0;
}

/* Printed as the walk finds them (a whole space is over a million variants
 * of about 3 KB each: collecting them first took gigabytes). */
static int cmd_list(mt_gen *g, const gen_args *a)
{
    mt_prune_report reports[8];
    memset(reports, 0, sizeof reports);
    for (int k = 0; k < a->narchs; k++) {
        mt_gen_filter f = a->filter;
        f.family = a->family;
        f.arch = a->archs[k];
        f.defaults_only = a->defaults;
        /* Every family: one too large to walk is left out and named below,
         * and the others are listed. */
        f.skip_over_cap = 1;
        if (mt_gen_enumerate_each(g, &f, print_variant, NULL, &reports[k]) != MT_OK) {
            fprintf(stderr, "moetune gen: %s\n", mt_gen_errmsg(g));
            return MT_EXIT_FAIL;
        }
    }
    for (int k = 0; k < a->narchs; k++) {
        const mt_prune_report *r = &reports[k];
        printf("# %s: %d points enumerated, %d valid, %d pruned\n", a->archs[k], r->enumerated,
               r->valid, r->enumerated - r->valid);
        for (int i = 0; i < r->nreasons; i++)
            printf("#   %6d  %s\n", r->reasons[i].count, r->reasons[i].reason);
        for (int i = 0; i < r->nunwalked && i < (int)MT_ARRAY_LEN(r->unwalked); i++) {
            char note[512];
            snprintf(note, sizeof note, "%s: family %s not listed: %.0f points after the filters, "
                     "over the walk's %d; list it with --family %s and filters (--dtype, --quant, "
                     "--format, --op, --param, --defaults)", a->archs[k], r->unwalked[i].family,
                     r->unwalked[i].points, MT_GEN_MAX_WALK_POINTS, r->unwalked[i].family);
            printf("# %s\n", note);
            fprintf(stderr, "moetune gen list: %s\n", note);
        }
        if (r->nunwalked > (int)MT_ARRAY_LEN(r->unwalked))
            printf("# %s: %d more families not listed\n", a->archs[k],
                   r->nunwalked - (int)MT_ARRAY_LEN(r->unwalked));
    }
    return MT_EXIT_OK;
}

static int write_file(const char *dir, const char *sub, const char *name, const char *ext,
                      const void *data, size_t len)
{
    char folder[4096], path[4400], msg[512];
    snprintf(folder, sizeof folder, "%s%s%s", dir, sub ? "/" : "", sub ? sub : "");
    snprintf(path, sizeof path, "%s/%s%s", folder, name, ext);
    if (mt_mkdirs(folder, msg, sizeof msg) != MT_OK ||
        mt_file_write_atomic(path, data, len, msg, sizeof msg) != MT_OK) {
        fprintf(stderr, "moetune gen: %s\n", msg);
        return 0;
    }
    return 1;
}

static int cmd_emit(mt_gen *g, const gen_args *a)
{
    mt_variant *v = NULL;
    size_t n = 0;
    if (!select_variants(g, a, &v, &n))
        return MT_EXIT_FAIL;
    int rc = MT_EXIT_OK;
    for (size_t i = 0; i < n && rc == MT_EXIT_OK; i++) {
        char *src = NULL;
        size_t len = 0;
        if (mt_gen_source(g, &v[i], &src, &len) != MT_OK) {
            fprintf(stderr, "moetune gen: %s\n", mt_gen_errmsg(g));
            rc = MT_EXIT_FAIL;
        } else if (a->out_dir) {
            if (!write_file(a->out_dir, NULL, v[i].name, ".cu", src, len))
                rc = MT_EXIT_FAIL;
        } else {
            if (n > 1)
                printf("// ===== %s (%s) =====\n", v[i].name, v[i].arch);
            fwrite(src, 1, len, stdout);
        }
        free(src);
    }
    if (a->out_dir && rc == MT_EXIT_OK)
        fprintf(stderr, "wrote %zu source(s) to %s\n", n, a->out_dir);
    free(v);
    return rc;
}

/* The first `lines` lines of a log holding `want` (NULL: any), indented;
 * how many it printed. */
static int print_log_lines(const char *log, int lines, const char *want)
{
    int shown = 0;
    for (const char *p = log; shown < lines && p && *p;) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", len, p);
        if (!want || strstr(line, want)) {
            printf("    %s\n", line);
            shown++;
        }
        p = nl ? nl + 1 : NULL;
    }
    return shown;
}

/* A failed compile's log: its error lines (warnings can fill its head),
 * or its head where no line says "error". */
static void print_failure_log(const char *log)
{
    if (!print_log_lines(log, 8, "error"))
        print_log_lines(log, 8, NULL);
}

static int cmd_compile(mt_gen *g, const gen_args *a)
{
    mt_variant *v = NULL;
    size_t n = 0;
    if (!select_variants(g, a, &v, &n))
        return MT_EXIT_FAIL;
    if (n == 0) {
        printf("nothing to compile: no valid variant matches\n");
        free(v);
        return MT_EXIT_OK;
    }
    double t0 = mt_now();
    mt_kernel_binary *b = NULL;
    mt_gen_compile(g, v, n, &b);
    free(v);
    if (!b) {
        fprintf(stderr, "moetune gen: %s\n", mt_gen_errmsg(g));
        return MT_EXIT_FAIL;
    }
    int compiled = 0, hits = 0, failed = 0, write_ok = 1;
    for (size_t i = 0; i < n; i++) {
        if (b[i].status != MT_OK) {
            if (failed++ == 0)
                printf("failures:\n");
            printf("  %s (%s): %s\n", b[i].variant.name, b[i].variant.arch,
                   mt_status_str(b[i].status));
            print_failure_log(b[i].log);
            continue;
        }
        b[i].cache_hit ? hits++ : compiled++;
        /* ptxas's performance notes (for example C7514: warpgroup MMAs
         * serialized) come with a working image; say so. */
        if (b[i].log && strstr(b[i].log, "Performance Loss")) {
            printf("warning: %s (%s) compiled with a performance note:\n", b[i].variant.name,
                   b[i].variant.arch);
            print_log_lines(b[i].log, 4, NULL);
        }
        if (a->out_dir && write_ok)
            write_ok = write_file(a->out_dir, b[i].variant.arch, b[i].variant.name,
                                  b[i].is_ptx ? ".ptx" : ".cubin", b[i].image,
                                  b[i].is_ptx ? b[i].image_len - 1 : b[i].image_len);
    }
    printf("%zu variant(s): %d compiled, %d cache hit(s), %d failed in %.1f s%s%s\n", n,
           compiled, hits, failed, mt_now() - t0, mt_gen_cache_dir(g)[0] ? "; cache " : "",
           mt_gen_cache_dir(g));
    if (a->out_dir && write_ok && failed < (int)n)
        printf("images in %s/<arch>/\n", a->out_dir);
    mt_kernel_binaries_free(b, n);
    mt_gen_stats gs;
    mt_gen_get_stats(g, &gs);
    if (gs.cache_write_failed)
        fprintf(stderr, "moetune gen: %d compiled image(s) could not be stored in the cache %s: "
                        "%s (give --cache DIR with a folder that can be written, or --no-cache)\n",
                gs.cache_write_failed, mt_gen_cache_dir(g), mt_gen_cache_error(g));
    return failed || !write_ok || gs.cache_write_failed ? MT_EXIT_FAIL : MT_EXIT_OK;
}

static int cmd_families(mt_gen *g)
{
    int failed = 0;
    for (size_t i = 0; i < mt_gen_family_count(g); i++) {
        char hash[65] = "";
        if (mt_gen_template_hash(g, mt_gen_family_name(g, i), hash) != MT_OK) {
            /* The hash covers the file and its includes: one is unreadable. */
            printf("%-24s %s  (no hash: %s)\n", mt_gen_family_name(g, i), mt_gen_family_path(g, i),
                   mt_gen_errmsg(g));
            failed = 1;
            continue;
        }
        printf("%-24s %s  (sha256 %.16s)\n", mt_gen_family_name(g, i), mt_gen_family_path(g, i),
               hash);
    }
    printf("# folders, highest precedence first:\n");
    for (size_t i = 0; i < mt_gen_template_dir_count(g); i++)
        printf("#   %s\n", mt_gen_template_dir(g, i));
    return failed ? MT_EXIT_FAIL : MT_EXIT_OK;
}

int mt_cmd_gen(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr, NULL);
        return MT_EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "-h") || !strcmp(sub, "--help") || !strcmp(sub, "help")) {
        usage(stdout, NULL);
        return MT_EXIT_OK;
    }
    if (strcmp(sub, "list") && strcmp(sub, "emit") && strcmp(sub, "compile") &&
        strcmp(sub, "families")) {
        fprintf(stderr, "moetune gen: unknown command '%s'\n", sub);
        usage(stderr, NULL);
        return MT_EXIT_USAGE;
    }
    gen_args a;
    int rc = parse(argc, argv, sub, &a);
    if (rc >= 0)
        return rc;
    mt_gen *g = open_gen(&a);
    if (!g)
        return MT_EXIT_FAIL;
    if (!strcmp(sub, "list"))
        rc = cmd_list(g, &a);
    else if (!strcmp(sub, "emit"))
        rc = cmd_emit(g, &a);
    else if (!strcmp(sub, "compile"))
        rc = cmd_compile(g, &a);
    else
        rc = cmd_families(g);
    mt_gen_close(g);
    return rc;
}
