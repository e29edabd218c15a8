/*
 * libmoetune internals shared by the runtime's files: the context (GPU,
 * databases, log, the in-memory kernel cache), the lookup (pure CPU, so the
 * CPU tests call it directly), the built-in defaults, NVRTC.
 *
 * May call: db, runtime/moe_launch, the driver table, NVRTC, cuBLAS.
 */
#ifndef MT_RUNTIME_RT_INTERNAL_H
#define MT_RUNTIME_RT_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>

#include "common/cuda_driver.h"
#include "common/util.h"
#include "moetune/db.h"
#include "moetune/moetune.h"
#include "runtime/moe_launch.h"

#define MT_RT_MSG 1024
#define MT_RT_MAX_DBS 2

/* A kernel loaded by the context; modular kernels borrow it. */
typedef struct rt_loaded {
    mt_kernel k;
} rt_loaded;

struct mt_context {
    char err[MT_RT_MSG];
    mt_gpu gpu;
    char arch[16];
    char cc[8];
    mt_db *dbs[MT_RT_MAX_DBS];   /* user first, then system */
    int ndbs;
    mt_log_fn log;
    void *log_user;
    mt_log_level log_level;
    int no_defaults;
    mt_db_provenance prov;       /* this machine, for mismatch reports */
    pthread_mutex_t lock;        /* kernel cache, databases, err during create */
    int lock_ok;
    int ready;                   /* mt_context_create returned MT_OK */
    /* Log lines of the thread holding `lock`, each a level byte, the text
     * and a NUL, passed to the callback once the lock is released
     * (mt_rt_unlock): a callback that calls into moetune would otherwise
     * wait on the lock its own thread holds. */
    mt_buf held_log;
    int holding_log;
    rt_loaded **loaded;          /* stable pointers: modular kernels hold them */
    size_t nloaded, cap_loaded;
};

/* What a lookup needs to know about the machine. */
typedef struct mt_rt_machine {
    char sku[MT_DB_SKU_MAX];
    char cc[8];
    char arch[16];
    mt_db_provenance prov;
} mt_rt_machine;

/* The result of a lookup: where from, and the pipeline to load. */
typedef struct mt_rt_choice {
    mt_lookup_info info;
    mt_db_pipeline pipeline;
    mt_db *db;                   /* the database that served it, or NULL */
} mt_rt_choice;

/*
 * Pick the pipeline for problem p (format set) at M: the user database then
 * the system one (dbs in that order) for this SKU at the nearest tuned M;
 * then the same for the compute capability (another SKU); then the
 * built-in defaults (unless no_defaults: MT_ERR_NOT_FOUND). A database
 * error other than "not found" is returned. The provenance of a database
 * entry is compared with m->prov; differences are in info.provenance_diff.
 * The templates count as the same when every kernel of the entry is stored
 * with its family's built-in template hash, whatever the entry's (global)
 * template hash: an edit of one family leaves the others' entries current.
 */
mt_status mt_rt_lookup(mt_db *const *dbs, int ndbs, const mt_rt_machine *m, const mt_problem *p,
                       int64_t M, int no_defaults, mt_rt_choice *out, char *msg, size_t msg_size);

/* BLOCK_M of the default grouped GEMM for M tokens off sm_90a: rows per
 * expert a = M * topk / E; a < 24 -> 16, a < 192 -> 64, else 128
 * (common/defaults.h; sm_90a has its own tiles there). */
int mt_rt_default_block_m(const mt_problem *p, int64_t M);

/* The default pipeline of p at M (backend "default", arch `arch`). */
mt_status mt_rt_default_pipeline(const mt_problem *p, int64_t M, const char *arch,
                                 mt_db_pipeline *out, char *msg, size_t msg_size);

/* Find the built-in default variant of `family` whose params include every
 * name=value pair of kv (npairs pairs, kv[2i] name, kv[2i+1] value). */
mt_status mt_rt_default_find(const char *family, const char *const *kv, int npairs,
                             mt_variant *out, char *msg, size_t msg_size);
/* The built-in default named `name`: its variant and malloc'd source. */
mt_status mt_rt_default_get(const char *name, mt_variant *v, char **source, char *msg,
                            size_t msg_size);
/* The family's template hash built into the library, or NULL. */
const char *mt_rt_default_family_hash(const char *family);

/* This machine's provenance (for comparisons with stored entries). */
void mt_rt_current_provenance(const mt_gpu *gpu, mt_db_provenance *out);
/* MT_OK if ctx is a context whose creation succeeded; else MT_ERR_INVALID_ARG
 * with why in msg (NULL, or the reason its creation failed: a context whose
 * database did not open holds a GPU but would serve without the database). */
mt_status mt_rt_context_usable(const mt_context *ctx, char *msg, size_t msg_size);
/* Take ctx's lock and make its GPU context current (MT_ERR_CUDA with why in
 * msg if it cannot be, the lock still held); mt_rt_unlock releases it, then
 * passes the log lines of the locked stretch to the callback. Every
 * creation that loads kernels goes through these two. */
mt_status mt_rt_lock(mt_context *ctx, char *msg, size_t msg_size);
void mt_rt_unlock(mt_context *ctx);

/* Compile a self-contained source for arch with NVRTC into a cubin
 * (*image malloc'd). The NVRTC log is in msg on failure. */
mt_status mt_rt_nvrtc_compile(const char *source, const char *name, const char *arch,
                              void **image, size_t *image_len, char *msg, size_t msg_size);

/* Log through the context's callback (no-op without one). */
void mt_rt_log(const mt_context *ctx, mt_log_level level, const char *fmt, ...) MT_PRINTF(3, 4);

/*
 * Load (or find already loaded) the kernels `names` (n of them) for the
 * context's GPU: from db (pipeline arch `arch`) when it has them — the
 * image when it loads on this GPU, else its source compiled with NVRTC —
 * otherwise from the built-in defaults. Missing compilations run in
 * parallel. out[i] is borrowed from the context. Called with ctx->lock held.
 */
mt_status mt_rt_load_kernels(mt_context *ctx, mt_db *db, const char *arch,
                             const char *const *names, size_t n, const mt_kernel **out,
                             char *msg, size_t msg_size);

/* ---- prepare/finalize and experts objects (runtime/rt_objects.c) ---- */

struct mt_prepare_finalize {
    mt_pf_kind kind;
    mt_act_format format;
};

struct mt_experts {
    mt_experts_kind kind;
    mt_act_format format;
    char name[32];
};

/* Does the launcher (runtime/moe_launch) run quant mode q in `format` on
 * arch (NULL: on the most capable target it knows)? */
int mt_rt_launcher_accepts(mt_quant_mode q, mt_act_format format, const char *arch);
/* p with the prepare/finalize's format (and, batched, max_tokens defaulted
 * to M), validated. */
mt_status mt_rt_compose_problem(const mt_prepare_finalize *pf, const mt_problem *p,
                                mt_problem *out, char *msg, size_t msg_size);

/* ---- cuBLAS experts (runtime/rt_cublas.c) ---- */

typedef struct rt_cublas rt_cublas;

/* cuBLAS's own workspace, carved out of the caller's: without one set per
 * call cuBLAS would use its default pool, allocated behind our back. */
#define MT_RT_CUBLAS_WS (32u << 20)

/* Workspace bytes the cuBLAS experts need at capacity `cap` rows per expert. */
size_t mt_rt_cublas_workspace(const mt_problem *p, int64_t cap);
mt_status mt_rt_cublas_create(rt_cublas **out, char *msg, size_t msg_size);
void mt_rt_cublas_destroy(rt_cublas *c);
/* Per expert e < experts: Y[e] [rows, n] = X[e] [rows, k] * W[e] [n, k]^T,
 * contiguous per expert, on the stream and workspace of the last bind. */
mt_status mt_rt_cublas_gemm(rt_cublas *c, mt_dtype dtype, int64_t experts, int64_t rows,
                            int64_t n, int64_t k, const void *w, const void *x, void *y,
                            char *msg, size_t msg_size);
/* Point the handle at a stream and at MT_RT_CUBLAS_WS bytes of workspace. */
mt_status mt_rt_cublas_bind(rt_cublas *c, void *ws, CUstream stream, char *msg, size_t msg_size);
/* Batched experts of p (p->max_tokens rows per expert): x [LE, cap, K] ->
 * y [LE, cap, K] using act (act_and_mul kernel) and ws (device). */
mt_status mt_rt_cublas_run(rt_cublas *c, const mt_problem *p, const mt_kernel *act, const void *x,
                           const int32_t *counts, const void *w1, const void *w2, void *y,
                           void *ws, CUstream stream, char *msg, size_t msg_size);

#endif
