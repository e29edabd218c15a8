/*
 * The generator handle: the environment (read once, here), the template
 * folders and their precedence, loading every template, messages.
 * Calls: gen/template.c, common/util.h.
 */
#define _GNU_SOURCE   /* realpath, dladdr */
#include <dirent.h>
#include <dlfcn.h>
#include <nvrtc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "gen/gen_internal.h"

#define DEFAULT_BUDGET 50000000L
#define DEFAULT_MEM_LIMIT ((size_t)64 << 20)

/* Everything the generator takes from the environment. */
typedef struct gen_env {
    const char *template_dir;    /* MT_TEMPLATE_DIR: replaces the built-in folder */
    const char *template_path;   /* MT_TEMPLATE_PATH: user folders, colon-separated */
    const char *cache_dir;       /* MT_CACHE_DIR */
    const char *xdg_cache_home;  /* XDG_CACHE_HOME */
    const char *home;            /* HOME */
    const char *cuda_include;    /* MT_CUDA_INCLUDE: the CUDA headers NVRTC may include */
} gen_env;

static int is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static const char *env_or_null(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static void read_env(gen_env *e)
{
    e->template_dir = env_or_null("MT_TEMPLATE_DIR");
    e->template_path = env_or_null("MT_TEMPLATE_PATH");
    e->cache_dir = env_or_null("MT_CACHE_DIR");
    e->xdg_cache_home = env_or_null("XDG_CACHE_HOME");
    e->home = env_or_null("HOME");
    e->cuda_include = env_or_null("MT_CUDA_INCLUDE");
}

/* NVRTC 13 has no built-in <cuda_fp16.h> & co.: use the headers of the
 * toolkit that the loaded libnvrtc belongs to (<lib>/../include), so that
 * headers and compiler always match. */
static void find_cuda_include(mt_gen *g, const gen_env *env)
{
    g->cuda_include[0] = '\0';
    if (env->cuda_include) {
        mt_strlcpy(g->cuda_include, env->cuda_include, sizeof g->cuda_include);
        return;
    }
    Dl_info info;
    char lib[PATH_MAX], cand[PATH_MAX + 32];
    if (dladdr((void *)nvrtcVersion, &info) && info.dli_fname && realpath(info.dli_fname, lib)) {
        char *slash = strrchr(lib, '/');
        if (slash) {
            *slash = '\0';
            snprintf(cand, sizeof cand, "%s/../include", lib);
            char inc[PATH_MAX];
            if (realpath(cand, inc) && is_dir(inc)) {
                mt_strlcpy(g->cuda_include, inc, sizeof g->cuda_include);
                return;
            }
        }
    }
    if (is_dir("/usr/local/cuda/include"))
        mt_strlcpy(g->cuda_include, "/usr/local/cuda/include", sizeof g->cuda_include);
}

mt_status gen_set_err(mt_gen *g, mt_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[sizeof g->err];   /* fmt's arguments may point into g->err */
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    memcpy(g->err, tmp, sizeof tmp);
    return st;
}

static mt_status add_dir(mt_gen *g, const char *dir, size_t n)
{
    char **d = realloc(g->dirs, (g->ndirs + 1) * sizeof *d);
    if (!d)
        return gen_set_err(g, MT_ERR_NO_MEMORY, "out of memory");
    g->dirs = d;
    if (!(d[g->ndirs] = strndup(dir, n)))
        return gen_set_err(g, MT_ERR_NO_MEMORY, "out of memory");
    g->ndirs++;
    return MT_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_template(const void *a, const void *b)
{
    return strcmp(((const gen_template *)a)->family, ((const gen_template *)b)->family);
}

gen_template *gen_find_template(mt_gen *g, const char *family)
{
    for (size_t i = 0; family && i < g->ntemplates; i++)
        if (strcmp(g->templates[i].family, family) == 0)
            return &g->templates[i];
    return NULL;
}

/* The family names (`x` of x.lua) in a folder, sorted. */
static mt_status list_families(mt_gen *g, const char *dir, char ***out, size_t *count)
{
    *out = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d)
        return gen_set_err(g, MT_ERR_IO, "cannot open template folder %s", dir);
    mt_status st = MT_OK;
    struct dirent *e;
    while ((e = readdir(d)) && !st) {
        size_t n = strlen(e->d_name);
        if (n <= 4 || strcmp(e->d_name + n - 4, ".lua") != 0 || e->d_name[0] == '.')
            continue;
        char **l = realloc(*out, (*count + 1) * sizeof *l);
        if (!l || !(l[*count] = strndup(e->d_name, n - 4))) {
            if (l)
                *out = l;
            st = gen_set_err(g, MT_ERR_NO_MEMORY, "out of memory");
            break;
        }
        *out = l;
        (*count)++;
    }
    closedir(d);
    if (*count)
        qsort(*out, *count, sizeof **out, cmp_str);
    return st;
}

static mt_status load_dir(mt_gen *g, const char *dir, const mt_gen_config *cfg)
{
    char **fam = NULL;
    size_t nf = 0;
    mt_status st = list_families(g, dir, &fam, &nf);
    for (size_t i = 0; i < nf && !st; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s.lua", dir, fam[i]);
        gen_template *have = gen_find_template(g, fam[i]);
        if (have) {
            if (g->verbose)
                fprintf(stderr, "moetune gen: template %s: %s overrides %s\n", fam[i], have->path,
                        path);
            continue;
        }
        gen_template *t = realloc(g->templates, (g->ntemplates + 1) * sizeof *t);
        if (!t) {
            st = gen_set_err(g, MT_ERR_NO_MEMORY, "out of memory");
            break;
        }
        g->templates = t;
        char msg[sizeof g->err];
        st = gen_template_load(&t[g->ntemplates], path, fam[i],
                               cfg->lua_instr_budget > 0 ? cfg->lua_instr_budget : DEFAULT_BUDGET,
                               cfg->lua_mem_limit > 0 ? cfg->lua_mem_limit : DEFAULT_MEM_LIMIT,
                               msg, sizeof msg);
        g->ntemplates++;   /* even when failed: close frees what it holds */
        if (st)
            gen_set_err(g, st, "%s", msg);
    }
    for (size_t i = 0; i < nf; i++)
        free(fam[i]);
    free(fam);
    return st;
}

static void set_cache_dir(mt_gen *g, const mt_gen_config *cfg, const gen_env *env)
{
    g->cache_dir[0] = '\0';
    if (cfg->no_cache)
        return;
    if (cfg->cache_dir && *cfg->cache_dir)
        mt_strlcpy(g->cache_dir, cfg->cache_dir, sizeof g->cache_dir);
    else if (env->cache_dir)
        mt_strlcpy(g->cache_dir, env->cache_dir, sizeof g->cache_dir);
    else if (env->xdg_cache_home)
        snprintf(g->cache_dir, sizeof g->cache_dir, "%s/moetune", env->xdg_cache_home);
    else if (env->home)
        snprintf(g->cache_dir, sizeof g->cache_dir, "%s/.cache/moetune", env->home);
}

mt_status mt_gen_open(const mt_gen_config *cfg_in, mt_gen **out)
{
    if (!out)
        return MT_ERR_INVALID_ARG;
    mt_gen *g = calloc(1, sizeof *g);
    *out = g;
    if (!g)
        return MT_ERR_NO_MEMORY;
    mt_gen_config defaults = {0};
    const mt_gen_config *cfg = cfg_in ? cfg_in : &defaults;
    gen_env env;
    read_env(&env);
    g->jobs = cfg->jobs;
    g->progress = cfg->progress;
    g->verbose = cfg->verbose;
    set_cache_dir(g, cfg, &env);
    find_cuda_include(g, &env);

    mt_status st = MT_OK;
    for (int i = 0; i < cfg->ntemplate_dirs && !st; i++) {
        if (!cfg->template_dirs[i] || !is_dir(cfg->template_dirs[i]))
            return gen_set_err(g, MT_ERR_IO, "template folder %s does not exist",
                               cfg->template_dirs[i] ? cfg->template_dirs[i] : "(null)");
        st = add_dir(g, cfg->template_dirs[i], strlen(cfg->template_dirs[i]));
    }
    for (const char *p = env.template_path; p && *p && !st;) {
        const char *colon = strchr(p, ':');
        size_t n = colon ? (size_t)(colon - p) : strlen(p);
        if (n)
            st = add_dir(g, p, n);
        if (n && !st && !is_dir(g->dirs[g->ndirs - 1]))
            return gen_set_err(g, MT_ERR_IO, "template folder %s (from MT_TEMPLATE_PATH) does "
                               "not exist", g->dirs[g->ndirs - 1]);
        p += n + (colon != NULL);
    }
    if (!cfg->no_builtin && !st) {
        const char *builtin = env.template_dir ? env.template_dir
                              : is_dir(MT_TEMPLATE_DIR_BUILD) ? MT_TEMPLATE_DIR_BUILD
                                                              : MT_TEMPLATE_DIR_INSTALL;
        if (is_dir(builtin))
            st = add_dir(g, builtin, strlen(builtin));
        else if (env.template_dir)
            return gen_set_err(g, MT_ERR_IO, "template folder %s (from MT_TEMPLATE_DIR) does "
                               "not exist", builtin);
        else if (g->verbose)
            fprintf(stderr, "moetune gen: no built-in template folder (%s)\n", builtin);
    }
    for (size_t i = 0; i < g->ndirs && !st; i++)
        st = load_dir(g, g->dirs[i], cfg);
    if (!st && g->ntemplates > 1)
        qsort(g->templates, g->ntemplates, sizeof *g->templates, cmp_template);
    return st;
}

void mt_gen_close(mt_gen *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->ntemplates; i++)
        gen_template_free(&g->templates[i]);
    free(g->templates);
    for (size_t i = 0; i < g->ndirs; i++)
        free(g->dirs[i]);
    free(g->dirs);
    free(g);
}

const char *mt_gen_errmsg(const mt_gen *g) { return g ? g->err : "out of memory"; }

size_t mt_gen_family_count(const mt_gen *g) { return g ? g->ntemplates : 0; }

const char *mt_gen_family_name(const mt_gen *g, size_t i)
{
    return g && i < g->ntemplates ? g->templates[i].family : NULL;
}

const char *mt_gen_family_path(const mt_gen *g, size_t i)
{
    return g && i < g->ntemplates ? g->templates[i].path : NULL;
}

size_t mt_gen_template_dir_count(const mt_gen *g) { return g ? g->ndirs : 0; }

const char *mt_gen_template_dir(const mt_gen *g, size_t i)
{
    return g && i < g->ndirs ? g->dirs[i] : NULL;
}

const char *mt_gen_cache_dir(const mt_gen *g) { return g ? g->cache_dir : ""; }

const char *mt_gen_cache_error(const mt_gen *g) { return g ? g->cache_err : ""; }

void mt_gen_get_stats(const mt_gen *g, mt_gen_stats *out)
{
    if (!out)
        return;
    if (g)
        *out = g->stats;
    else
        memset(out, 0, sizeof *out);
}
