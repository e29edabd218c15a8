/*
 * NVRTC compilation of rendered variants: sources are rendered on the
 * calling thread (Lua states are not shared), cache hits are served at once,
 * the misses go to a pool of worker threads that only call NVRTC.
 * Calls: NVRTC, pthreads, gen/render.c, gen/cache.c, common/util.h.
 */
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "gen/gen_internal.h"

/* -lineinfo keeps profiler line tables; the rest is the language level and
 * "every function is a device function" (rendered kernels say __global__). */
static const char *const base_opts[] = {"-std=c++17", "-default-device", "-lineinfo"};
#define MAX_OPTS (2 + (int)MT_ARRAY_LEN(base_opts))

void gen_nvrtc_version(int *major, int *minor)
{
    if (nvrtcVersion(major, minor) != NVRTC_SUCCESS)
        *major = *minor = 0;
}

typedef struct job {
    mt_kernel_binary *b;
    char key[65];
    char arch_opt[48];
    const char *opts[MAX_OPTS];
    int nopts;
    double seconds;
} job;

typedef struct pool {
    mt_gen *g;
    job *jobs;
    size_t njobs, next;
    size_t done, total;        /* for the progress line */
    pthread_mutex_t lock;
} pool;

static char *dup_text(const char *s)
{
    char *d = strdup(s ? s : "");
    return d;
}

static void progress(pool *p, const mt_kernel_binary *b, double seconds)
{
    /* Called with p->lock held. */
    p->done++;
    if (!p->g->progress)
        return;
    if (b->status != MT_OK)
        fprintf(stderr, "[%zu/%zu] FAILED %s (%s)\n", p->done, p->total, b->variant.name,
                b->variant.arch);
    else if (b->cache_hit)
        fprintf(stderr, "[%zu/%zu] compiled %s for %s (cache hit)\n", p->done, p->total,
                b->variant.name, b->variant.arch);
    else
        fprintf(stderr, "[%zu/%zu] compiled %s for %s (%.1f s)\n", p->done, p->total,
                b->variant.name, b->variant.arch, seconds);
}

#define NVRTC_TRY(call)                                                                    \
    do {                                                                                   \
        nvrtcResult r_ = (call);                                                           \
        if (r_ != NVRTC_SUCCESS) {                                                         \
            mt_buf_printf(&log, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,       \
                          nvrtcGetErrorString(r_));                                        \
            st = MT_ERR_NVRTC;                                                             \
            goto done;                                                                     \
        }                                                                                  \
    } while (0)

static void compile_one(job *j)
{
    mt_kernel_binary *b = j->b;
    mt_buf log = {0};
    mt_status st = MT_OK;
    nvrtcProgram prog = NULL;
    char progname[MT_VARIANT_NAME_MAX + 8];
    snprintf(progname, sizeof progname, "%s.cu", b->variant.name);
    double t0 = mt_now();
    NVRTC_TRY(nvrtcCreateProgram(&prog, b->source, progname, 0, NULL, NULL));
    nvrtcResult cr = nvrtcCompileProgram(prog, j->nopts, j->opts);
    size_t lsize = 0;
    if (nvrtcGetProgramLogSize(prog, &lsize) == NVRTC_SUCCESS && lsize > 1) {
        char *l = malloc(lsize);
        if (l && nvrtcGetProgramLog(prog, l) == NVRTC_SUCCESS)
            mt_buf_append(&log, l, strlen(l));
        free(l);
    }
    if (cr != NVRTC_SUCCESS) {
        mt_buf_printf(&log, "nvrtcCompileProgram: %s\n", nvrtcGetErrorString(cr));
        st = MT_ERR_NVRTC;
        goto done;
    }
    size_t n = 0;
    if (b->is_ptx)
        NVRTC_TRY(nvrtcGetPTXSize(prog, &n));
    else
        NVRTC_TRY(nvrtcGetCUBINSize(prog, &n));
    b->image = malloc(n ? n : 1);
    if (!b->image) {
        st = MT_ERR_NO_MEMORY;
        goto done;
    }
    if (b->is_ptx)
        NVRTC_TRY(nvrtcGetPTX(prog, (char *)b->image));
    else
        NVRTC_TRY(nvrtcGetCUBIN(prog, (char *)b->image));
    b->image_len = n;
done:
    if (prog)
        nvrtcDestroyProgram(&prog);
    if (st) {
        free(b->image);
        b->image = NULL;
        b->image_len = 0;
    }
    b->status = st;
    b->log = log.data ? log.data : dup_text("");
    j->seconds = mt_now() - t0;
}

static void *worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        job *j = p->next < p->njobs ? &p->jobs[p->next++] : NULL;
        pthread_mutex_unlock(&p->lock);
        if (!j)
            return NULL;
        compile_one(j);
        mt_kernel_binary *b = j->b;
        char msg[512] = "";
        pthread_mutex_lock(&p->lock);
        mt_status wst = MT_OK;
        if (b->status == MT_OK && p->g->cache_dir[0])
            wst = gen_cache_write(p->g->cache_dir, j->key, b->image, b->image_len, msg,
                                  sizeof msg);
        if (wst && p->g->stats.cache_write_failed++ == 0)
            mt_strlcpy(p->g->cache_err, msg, sizeof p->g->cache_err);
        if (wst && p->g->verbose)
            fprintf(stderr, "moetune gen: could not write the cache entry: %s\n", msg);
        if (b->status == MT_OK)
            p->g->stats.compiled++;
        else
            p->g->stats.failed++;
        progress(p, b, j->seconds);
        pthread_mutex_unlock(&p->lock);
    }
}

static int default_jobs(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n > 256 ? 256 : n) : 1;
}

mt_status mt_gen_compile(mt_gen *g, const mt_variant *v, size_t n, mt_kernel_binary **out)
{
    if (!g || (!v && n) || !out)
        return MT_ERR_INVALID_ARG;
    *out = NULL;
    if (n == 0)
        return MT_OK;
    mt_kernel_binary *bins = calloc(n, sizeof *bins);
    job *jobs = calloc(n, sizeof *jobs);
    if (!bins || !jobs) {
        free(bins);
        free(jobs);
        return gen_set_err(g, MT_ERR_NO_MEMORY, "out of memory");
    }
    pool p = {.g = g, .jobs = jobs, .total = n};
    char include_opt[PATH_MAX + 32] = "";
    if (g->cuda_include[0])
        snprintf(include_opt, sizeof include_opt, "--include-path=%s", g->cuda_include);
    pthread_mutex_init(&p.lock, NULL);
    for (size_t i = 0; i < n; i++) {
        mt_kernel_binary *b = &bins[i];
        b->variant = v[i];
        const gen_target *tg = gen_target_find(v[i].arch);
        mt_status st = MT_OK;
        if (!tg)
            st = gen_set_err(g, MT_ERR_UNSUPPORTED, "variant %s: unknown arch '%s'", v[i].name,
                             v[i].arch);
        else
            st = mt_gen_source(g, &v[i], &b->source, &b->source_len);
        if (st) {
            b->status = st;
            b->log = dup_text(g->err);
            g->stats.failed++;
            progress(&p, b, 0);
            continue;
        }
        b->is_ptx = tg->is_ptx;
        mt_sha256_hex(b->source, b->source_len, b->source_sha);
        job *j = &jobs[p.njobs];   /* a cache hit leaves the slot to the next item */
        memset(j, 0, sizeof *j);
        j->b = b;
        snprintf(j->arch_opt, sizeof j->arch_opt, "--gpu-architecture=%s", tg->arch);
        j->opts[j->nopts++] = j->arch_opt;
        for (size_t k = 0; k < MT_ARRAY_LEN(base_opts); k++)
            j->opts[j->nopts++] = base_opts[k];
        if (include_opt[0])
            j->opts[j->nopts++] = include_opt;
        gen_cache_key(b->source, b->source_len, j->opts, j->nopts, tg->arch, j->key);
        if (g->cache_dir[0]) {
            char msg[512] = "";
            gen_cache_result r = gen_cache_read(g->cache_dir, j->key, &b->image, &b->image_len,
                                                msg, sizeof msg);
            if (r == GEN_CACHE_HIT) {
                g->stats.cache_hits++;
                b->cache_hit = 1;
                b->log = dup_text("");
                progress(&p, b, 0);
                continue;
            }
            g->stats.cache_misses++;
            if (r == GEN_CACHE_CORRUPT) {
                g->stats.cache_corrupt++;
                if (g->verbose)
                    fprintf(stderr, "moetune gen: %s; recompiling\n", msg);
            }
        }
        p.njobs++;
    }
    int nthreads = g->jobs > 0 ? g->jobs : default_jobs();
    if ((size_t)nthreads > p.njobs)
        nthreads = (int)p.njobs;
    pthread_t tids[256];
    int started = 0;
    for (; started < nthreads && started < (int)MT_ARRAY_LEN(tids); started++)
        if (pthread_create(&tids[started], NULL, worker, &p) != 0)
            break;
    if (started == 0)
        worker(&p);   /* no thread could start: compile here */
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    pthread_mutex_destroy(&p.lock);
    free(jobs);
    mt_status first = MT_OK;
    size_t nfailed = 0, ifirst = 0;
    for (size_t i = 0; i < n; i++)
        if (bins[i].status && nfailed++ == 0) {
            first = bins[i].status;
            ifirst = i;
        }
    if (first)
        gen_set_err(g, first, "%zu of %zu variants failed; the first, %s for %s: %.2000s",
                    nfailed, n, bins[ifirst].variant.name, bins[ifirst].variant.arch,
                    bins[ifirst].log ? bins[ifirst].log : "");
    *out = bins;
    return first;
}

void mt_kernel_binaries_free(mt_kernel_binary *b, size_t n)
{
    if (!b)
        return;
    for (size_t i = 0; i < n; i++) {
        free(b[i].source);
        free(b[i].image);
        free(b[i].log);
    }
    free(b);
}
