/*
 * The runtime context: one GPU, the read-only databases, the log callback
 * and the in-memory cache of loaded kernels (each kernel is loaded or
 * compiled once per context and shared by every modular kernel).
 *
 * May call: db, the driver table, NVRTC, runtime/moe_launch, rt_lookup.
 */
#define _POSIX_C_SOURCE 200809L
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_internal.h"

const char *mt_version(void) { return MT_VERSION_STRING; }

void mt_context_config_init(mt_context_config *cfg)
{
    if (cfg)
        memset(cfg, 0, sizeof *cfg);
}

void mt_rt_log(const mt_context *ctx, mt_log_level level, const char *fmt, ...)
{
    if (!ctx || !ctx->log || level < ctx->log_level)
        return;
    char line[MT_RT_MSG + 512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (ctx->holding_log) {   /* only the lock's holder sets it: held for mt_rt_unlock */
        mt_buf *held = &((mt_context *)ctx)->held_log;
        const char lv = (char)('0' + level);
        mt_buf_append(held, &lv, 1);
        mt_buf_append(held, line, strlen(line) + 1);
        return;
    }
    ctx->log(ctx->log_user, level, line);
}

mt_status mt_rt_lock(mt_context *ctx, char *msg, size_t msg_size)
{
    pthread_mutex_lock(&ctx->lock);
    ctx->holding_log = 1;
    if (mt_cu.cuCtxSetCurrent(ctx->gpu.ctx) != CUDA_SUCCESS)
        return mt_errf(msg, msg_size, MT_ERR_CUDA, "cannot make the GPU context current");
    return MT_OK;
}

void mt_rt_unlock(mt_context *ctx)
{
    mt_buf held = ctx->held_log;
    memset(&ctx->held_log, 0, sizeof ctx->held_log);
    ctx->holding_log = 0;
    pthread_mutex_unlock(&ctx->lock);
    for (size_t at = 0; held.data && at < held.len;) {
        const char *text = held.data + at + 1;
        ctx->log(ctx->log_user, (mt_log_level)(held.data[at] - '0'), text);
        at += 2 + strlen(text);
    }
    mt_buf_free(&held);
}

void mt_rt_current_provenance(const mt_gpu *gpu, mt_db_provenance *out)
{
    memset(out, 0, sizeof *out);
    int maj = 0, min = 0;
    mt_strlcpy(out->sku, gpu->name, sizeof out->sku);
    snprintf(out->cc, sizeof out->cc, "%d.%d", gpu->cc_major, gpu->cc_minor);
    out->sm_count = gpu->sm_count;
    out->mem_clock_khz = gpu->mem_clock_khz;
    snprintf(out->driver_version, sizeof out->driver_version, "%d.%d",
             gpu->driver_version / 1000, gpu->driver_version % 1000 / 10);
    snprintf(out->cuda_version, sizeof out->cuda_version, "%d.%d", CUDA_VERSION / 1000,
             CUDA_VERSION % 1000 / 10);
    if (nvrtcVersion(&maj, &min) == NVRTC_SUCCESS)
        snprintf(out->nvrtc_version, sizeof out->nvrtc_version, "%d.%d", maj, min);
    mt_strlcpy(out->moetune_version, MT_VERSION_STRING, sizeof out->moetune_version);
    mt_strlcpy(out->template_hash, mt_template_hash(), sizeof out->template_hash);
}

mt_status mt_context_create(const mt_context_config *cfg, mt_context **out)
{
    if (!out)
        return MT_ERR_INVALID_ARG;
    *out = NULL;
    mt_context_config dflt;
    mt_context_config_init(&dflt);
    if (!cfg)
        cfg = &dflt;
    mt_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return MT_ERR_NO_MEMORY;
    *out = ctx;
    ctx->log = cfg->log;
    ctx->log_user = cfg->log_user;
    ctx->log_level = cfg->log_level;
    ctx->no_defaults = cfg->no_defaults;
    if (pthread_mutex_init(&ctx->lock, NULL) != 0)
        return mt_errf(ctx->err, sizeof ctx->err, MT_ERR_INTERNAL, "pthread_mutex_init failed");
    ctx->lock_ok = 1;
    mt_status st = mt_gpu_open(cfg->device, &ctx->gpu, ctx->err, sizeof ctx->err);
    if (st)
        return st;
    mt_strlcpy(ctx->arch, mt_gpu_arch(&ctx->gpu), sizeof ctx->arch);
    snprintf(ctx->cc, sizeof ctx->cc, "%d.%d", ctx->gpu.cc_major, ctx->gpu.cc_minor);
    mt_rt_current_provenance(&ctx->gpu, &ctx->prov);
    const char *paths[MT_RT_MAX_DBS] = {cfg->user_db, cfg->system_db};
    for (int i = 0; i < MT_RT_MAX_DBS; i++) {
        if (!paths[i])
            continue;
        mt_db *db = NULL;
        st = mt_db_open(paths[i], MT_DB_READONLY, &db);
        if (st) {
            mt_errf(ctx->err, sizeof ctx->err, st, "opening the %s database: %s",
                    i == 0 ? "user" : "system", db ? mt_db_errmsg(db) : "out of memory");
            mt_db_close(db);
            return st;
        }
        ctx->dbs[ctx->ndbs++] = db;
        mt_rt_log(ctx, MT_LOG_INFO, "moetune: %s database %s opened", i == 0 ? "user" : "system",
                  paths[i]);
    }
    mt_rt_log(ctx, MT_LOG_INFO, "moetune %s: GPU %d %s (cc %s, %s), %d database(s)",
              MT_VERSION_STRING, cfg->device, ctx->gpu.name, ctx->cc, ctx->arch, ctx->ndbs);
    ctx->ready = 1;
    return MT_OK;
}

mt_status mt_rt_context_usable(const mt_context *ctx, char *msg, size_t msg_size)
{
    if (!ctx)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "the context is NULL");
    if (!ctx->ready)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "the context's creation failed: %s",
                       ctx->err[0] ? ctx->err : "(no reason recorded)");
    return MT_OK;
}

void mt_context_destroy(mt_context *ctx)
{
    if (!ctx)
        return;
    if (ctx->gpu.ctx)
        mt_cu.cuCtxSetCurrent(ctx->gpu.ctx);
    for (size_t i = 0; i < ctx->nloaded; i++) {
        mt_kernel_unload(&ctx->loaded[i]->k);
        free(ctx->loaded[i]);
    }
    free(ctx->loaded);
    mt_buf_free(&ctx->held_log);
    for (int i = 0; i < ctx->ndbs; i++)
        mt_db_close(ctx->dbs[i]);
    mt_gpu_close(&ctx->gpu);
    if (ctx->lock_ok)
        pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

const char *mt_context_errmsg(const mt_context *ctx) { return ctx ? ctx->err : "no context"; }
const char *mt_context_device_name(const mt_context *ctx) { return ctx ? ctx->gpu.name : ""; }
const char *mt_context_arch(const mt_context *ctx) { return ctx ? ctx->arch : ""; }

#define NVRTC_TRY(call)                                                                     \
    do {                                                                                    \
        nvrtcResult r_ = (call);                                                            \
        if (r_ != NVRTC_SUCCESS) {                                                          \
            st = mt_errf(msg, msg_size, MT_ERR_NVRTC, "%s failed: %s", #call,               \
                         nvrtcGetErrorString(r_));                                          \
            goto done;                                                                      \
        }                                                                                   \
    } while (0)

mt_status mt_rt_nvrtc_compile(const char *source, const char *name, const char *arch,
                              void **image, size_t *image_len, char *msg, size_t msg_size)
{
    mt_status st = MT_OK;
    nvrtcProgram prog = NULL;
    char arch_opt[48], progname[MT_VARIANT_NAME_MAX + 8];
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", arch);
    snprintf(progname, sizeof progname, "%s.cu", name);
    /* The options of gen/compile.c minus -lineinfo: the templates include
     * no CUDA header, so no include path is needed. */
    const char *opts[] = {arch_opt, "-std=c++17", "-default-device"};
    *image = NULL;
    *image_len = 0;
    NVRTC_TRY(nvrtcCreateProgram(&prog, source, progname, 0, NULL, NULL));
    nvrtcResult cr = nvrtcCompileProgram(prog, (int)MT_ARRAY_LEN(opts), opts);
    if (cr != NVRTC_SUCCESS) {
        size_t lsize = 0;
        char *log = NULL;
        if (nvrtcGetProgramLogSize(prog, &lsize) == NVRTC_SUCCESS && (log = malloc(lsize + 1)) &&
            nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS)
            log[lsize] = '\0';
        st = mt_errf(msg, msg_size, MT_ERR_NVRTC, "compiling %s for %s: %s: %.700s", name, arch,
                     nvrtcGetErrorString(cr), log ? log : "");
        free(log);
        goto done;
    }
    size_t n = 0;
    NVRTC_TRY(nvrtcGetCUBINSize(prog, &n));
    if (!(*image = malloc(n ? n : 1))) {
        st = mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    NVRTC_TRY(nvrtcGetCUBIN(prog, (char *)*image));
    *image_len = n;
done:
    if (prog)
        nvrtcDestroyProgram(&prog);
    if (st) {
        free(*image);
        *image = NULL;
    }
    return st;
}

/* One kernel to bring in: its variant, and an image or a source to compile. */
typedef struct load_job {
    mt_variant v;
    const char *origin;      /* "database X" or "built-in defaults", for messages */
    char origin_buf[600];
    void *image;             /* to load, malloc'd; NULL: compile source */
    char *source;
    mt_status st;
    char msg[MT_RT_MSG];
} load_job;

static void *compile_worker(void *arg)
{
    load_job *j = arg;
    size_t len = 0;
    j->st = mt_rt_nvrtc_compile(j->source, j->v.name, j->v.arch, &j->image, &len, j->msg,
                                sizeof j->msg);
    return NULL;
}

static const mt_kernel *find_loaded(const mt_context *ctx, const char *name)
{
    for (size_t i = 0; i < ctx->nloaded; i++)
        if (!strcmp(ctx->loaded[i]->k.v.name, name))
            return &ctx->loaded[i]->k;
    return NULL;
}

/* Fill job j for `name` from db (if it has the kernel for arch) or the
 * built-in defaults. A stored image is used when it was built for this
 * GPU's arch; otherwise its stored source is compiled. */
static mt_status prepare_job(mt_context *ctx, mt_db *db, const char *arch, const char *name,
                             load_job *j, char *msg, size_t msg_size)
{
    memset(j, 0, sizeof *j);
    mt_status st = MT_ERR_NOT_FOUND;
    if (db) {
        mt_db_kernel k;
        memset(&k, 0, sizeof k);
        st = mt_db_get_kernel(db, name, arch, &k);
        if (st && st != MT_ERR_NOT_FOUND)
            return mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(db));
        if (st == MT_OK) {
            snprintf(j->origin_buf, sizeof j->origin_buf, "database %s", mt_db_path(db));
            j->v = k.variant;
            const char *fh = mt_rt_default_family_hash(k.variant.family);
            if (fh && k.template_hash[0] && strcmp(fh, k.template_hash))
                mt_rt_log(ctx, MT_LOG_WARN,
                          "moetune: kernel %s in %s was generated from other %s templates "
                          "(hash %.12s, built-in %.12s); using its stored source as is",
                          name, mt_db_path(db), k.variant.family, k.template_hash, fh);
            if (k.image && !k.is_ptx && !strcmp(arch, ctx->arch)) {
                j->image = k.image;
                k.image = NULL;
            } else if (k.image && k.is_ptx) {
                j->image = k.image;   /* the driver JIT-compiles PTX for this GPU */
                k.image = NULL;
            } else {
                j->source = k.source;
                k.source = NULL;
                mt_rt_log(ctx, MT_LOG_INFO, "moetune: compiling %s (%s) from its stored source for %s",
                          name, mt_db_path(db), ctx->arch);
            }
            mt_db_kernel_free(&k);
        }
    }
    if (st == MT_ERR_NOT_FOUND) {
        if ((st = mt_rt_default_get(name, &j->v, &j->source, msg, msg_size))) {
            /* A tuned entry named it: the database lacks what it refers to. */
            if (db && st == MT_ERR_NOT_FOUND)
                return mt_errf(msg, msg_size, MT_ERR_DB, "kernel %s (%s), named by a tuned "
                               "entry of %s, is neither in that database nor among the built-in "
                               "defaults (`moetune db verify` names such entries)",
                               name, arch, mt_db_path(db));
            return st;
        }
        mt_strlcpy(j->origin_buf, "built-in defaults", sizeof j->origin_buf);
        mt_rt_log(ctx, MT_LOG_DEBUG, "moetune: compiling built-in %s for %s", name, ctx->arch);
    }
    j->origin = j->origin_buf;
    mt_strlcpy(j->v.arch, ctx->arch, sizeof j->v.arch);
    return MT_OK;
}

static mt_status keep_loaded(mt_context *ctx, const mt_kernel *k, const mt_kernel **out,
                             char *msg, size_t msg_size)
{
    if (ctx->nloaded == ctx->cap_loaded) {
        size_t cap = ctx->cap_loaded ? 2 * ctx->cap_loaded : 16;
        rt_loaded **l = realloc(ctx->loaded, cap * sizeof *l);
        if (!l)
            return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
        ctx->loaded = l;
        ctx->cap_loaded = cap;
    }
    rt_loaded *e = malloc(sizeof *e);
    if (!e)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    e->k = *k;
    ctx->loaded[ctx->nloaded++] = e;
    *out = &e->k;
    return MT_OK;
}

mt_status mt_rt_load_kernels(mt_context *ctx, mt_db *db, const char *arch,
                             const char *const *names, size_t n, const mt_kernel **out,
                             char *msg, size_t msg_size)
{
    mt_status st = MT_OK;
    load_job *jobs = calloc(n ? n : 1, sizeof *jobs);
    pthread_t *th = calloc(n ? n : 1, sizeof *th);
    char *started = calloc(n ? n : 1, 1);
    size_t nj = 0;
    if (!jobs || !th || !started) {
        st = mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        out[i] = find_loaded(ctx, names[i]);
        int dup = 0;
        for (size_t q = 0; q < nj && !dup; q++)
            dup = !strcmp(jobs[q].v.name, names[i]);
        if (out[i] || dup)
            continue;
        if ((st = prepare_job(ctx, db, arch, names[i], &jobs[nj], msg, msg_size)))
            goto done;
        nj++;
    }
    /* NVRTC compiles of a composed kernel's few kernels run side by side. */
    for (size_t q = 0; q < nj; q++)
        if (!jobs[q].image)
            started[q] = pthread_create(&th[q], NULL, compile_worker, &jobs[q]) == 0;
    for (size_t q = 0; q < nj; q++) {
        if (started[q])
            pthread_join(th[q], NULL);
        else if (!jobs[q].image)
            compile_worker(&jobs[q]);
    }
    for (size_t q = 0; q < nj; q++)
        if (jobs[q].st) {
            st = mt_errf(msg, msg_size, jobs[q].st, "kernel %s from %s: %s", jobs[q].v.name,
                         jobs[q].origin, jobs[q].msg);
            goto done;
        }
    for (size_t q = 0; q < nj; q++) {
        mt_kernel k;
        char lmsg[MT_RT_MSG];
        if ((st = mt_kernel_load(&k, &jobs[q].v, jobs[q].image, lmsg, sizeof lmsg))) {
            st = mt_errf(msg, msg_size, st, "loading kernel %s from %s: %s", jobs[q].v.name,
                         jobs[q].origin, lmsg);
            goto done;
        }
        const mt_kernel *kept;
        if ((st = keep_loaded(ctx, &k, &kept, msg, msg_size))) {
            mt_kernel_unload(&k);
            goto done;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (!out[i] && !(out[i] = find_loaded(ctx, names[i]))) {
            st = mt_errf(msg, msg_size, MT_ERR_INTERNAL, "kernel %s was not loaded", names[i]);
            goto done;
        }
done:
    for (size_t q = 0; jobs && q < nj; q++) {
        free(jobs[q].image);
        free(jobs[q].source);
    }
    free(jobs);
    free(th);
    free(started);
    return st;
}
