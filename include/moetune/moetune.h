/*
 * libmoetune: the one header an inference engine includes.
 *
 * It serves tuned fused-MoE kernels: a context opens a GPU and the tuned
 * databases, a modular kernel is composed from a prepare/finalize object
 * and an experts object for one problem shape, and its call enqueues the
 * whole fused MoE on a CUDA stream. docs/RUNTIME.md is the guide; this
 * header is the contract.
 *
 * Conventions (as in every moetune module):
 *  - Every fallible call returns an mt_status (MT_OK == 0). The detailed
 *    message is kept on the handle that failed: mt_context_errmsg,
 *    mt_modular_kernel_errmsg. Handle-less calls take a message buffer.
 *  - destroy(NULL) does nothing. Handles are opaque.
 *  - "device pointer": memory of the context's GPU (cuMemAlloc, cudaMalloc,
 *    torch tensors...), "host pointer": CPU memory. The caller owns every
 *    pointer it passes; libmoetune keeps none after a call returns, except
 *    where a function says otherwise.
 *  - Tensor layouts, dtypes and the quant-mode layouts are those of
 *    moetune/problem.h (vLLM's layouts, row-major, densely packed).
 *
 * Threading: a context may be shared by any number of threads. Creating and
 * destroying modular kernels is serialized internally. One modular kernel
 * is used by one thread (one stream) at a time; several threads may each run
 * their own modular kernel concurrently. Destroy every modular kernel before
 * its context.
 *
 * Link: libmoetune.so (pkg-config moetune, or find_package(moetune) and the
 * target moetune::moetune). It loads libcuda.so.1 at run time, so a program
 * linked with it starts on machines without a GPU and gets MT_ERR_NO_DRIVER
 * or MT_ERR_NO_DEVICE from mt_context_create.
 */
#ifndef MOETUNE_MOETUNE_H
#define MOETUNE_MOETUNE_H

#include <stddef.h>
#include <stdint.h>
#include "moetune/problem.h"
#include "moetune/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA driver's stream type (identical to cuda.h's and to the runtime's
 * cudaStream_t), declared here so that this header needs no CUDA headers. */
typedef struct CUstream_st *CUstream;

/* The library version, "MAJOR.MINOR.PATCH". Never NULL. */
const char *mt_version(void);

/* The hash of the templates built into this library (64 hex digits): a
 * database entry whose provenance carries another hash was tuned with other
 * kernel sources and is reported when used. Never NULL. */
const char *mt_template_hash(void);

/* ------------------------------------------------------------------------
 * Context
 * ------------------------------------------------------------------------ */

typedef struct mt_context mt_context;

typedef enum mt_log_level {
    MT_LOG_DEBUG = 0,   /* every lookup decision */
    MT_LOG_INFO,        /* which database or default served a kernel */
    MT_LOG_WARN         /* stale provenance, compile fallbacks */
} mt_log_level;

/* Log callback: `message` is a host string valid during the call only. It
 * may be called from any thread that creates a modular kernel, never from
 * mt_modular_kernel_run; never while the context's lock is held (the lines
 * of a creation come once it is released), so it may call into moetune,
 * on the same context too. */
typedef void (*mt_log_fn)(void *user, mt_log_level level, const char *message);

typedef struct mt_context_config {
    int device;              /* CUDA device ordinal */
    /* Databases, opened read-only (host strings, copied). The user database
     * overrides the system one: a lookup tries the user database first at
     * every step. NULL: none. A path that cannot be opened is an error. */
    const char *system_db;
    const char *user_db;
    mt_log_fn log;           /* NULL: no logging (the default) */
    void *log_user;          /* passed to log, never dereferenced */
    mt_log_level log_level;  /* least level passed to log */
    int no_defaults;         /* 1: a lookup that finds no tuned entry fails
                                (MT_ERR_NOT_FOUND) instead of using the
                                built-in defaults */
} mt_context_config;

/* Fill *cfg with the defaults (device 0, no databases, no log). */
void mt_context_config_init(mt_context_config *cfg);

/*
 * Open GPU cfg->device (its primary context, the one the CUDA runtime uses)
 * and the databases. cfg may be NULL (defaults). *out is set even on failure
 * (unless MT_ERR_NO_MEMORY) so that mt_context_errmsg can say why; destroy
 * it in every case. Errors: MT_ERR_NO_DRIVER (no libcuda.so.1),
 * MT_ERR_NO_DEVICE (no such GPU), MT_ERR_UNSUPPORTED (a GPU that no kernel
 * of this build runs on: compute capability below 8.0 or from 10.0 on),
 * MT_ERR_CUDA, MT_ERR_IO / MT_ERR_DB (a database), MT_ERR_INVALID_ARG (out
 * NULL). A context whose creation failed serves nothing: composing on it is
 * refused with its reason.
 */
mt_status mt_context_create(const mt_context_config *cfg, mt_context **out);
void mt_context_destroy(mt_context *ctx);
/* Last error message of the context ("" when none). Never NULL. */
const char *mt_context_errmsg(const mt_context *ctx);
/* The GPU's name as the driver reports it (the database SKU) and its
 * NVRTC arch ("sm_90a"). Never NULL. */
const char *mt_context_device_name(const mt_context *ctx);
const char *mt_context_arch(const mt_context *ctx);

/* ------------------------------------------------------------------------
 * Prepare/finalize and experts objects (descriptions; no GPU needed)
 * ------------------------------------------------------------------------ */

typedef struct mt_prepare_finalize mt_prepare_finalize;
typedef struct mt_experts mt_experts;

typedef enum mt_pf_kind {
    /* No expert parallelism, standard format: the experts read the token
     * rows in place; prepare = align the slots to the experts, finalize =
     * the per-token weighted sum (moe_reduce). */
    MT_PF_STANDARD = 0,
    /* Batched format on one GPU: prepare = moe_dispatch (token rows to
     * [local_E, max_tokens, K], per-expert counts, slot -> row map; the
     * router weight is applied here when apply_router_weight_on_input);
     * finalize = moe_reduce over the slot -> row map. */
    MT_PF_BATCHED,
    MT_PF_COUNT_
} mt_pf_kind;

typedef enum mt_experts_kind {
    MT_EXPERTS_MOETUNE = 0,  /* moetune's generated kernels (tuned or default) */
    MT_EXPERTS_CUBLAS,       /* cublasGemmStridedBatchedEx over all local
                                experts with m = max_tokens (batched only) */
    MT_EXPERTS_COUNT_
} mt_experts_kind;

/* Create a prepare/finalize object. Errors: MT_ERR_INVALID_ARG. */
mt_status mt_prepare_finalize_create(mt_pf_kind kind, mt_prepare_finalize **out);
void mt_prepare_finalize_destroy(mt_prepare_finalize *pf);
/* Its name ("standard", "batched"), format, and whether it accepts a quant
 * mode (1/0). */
const char *mt_prepare_finalize_name(const mt_prepare_finalize *pf);
mt_act_format mt_prepare_finalize_format(const mt_prepare_finalize *pf);
int mt_prepare_finalize_accepts(const mt_prepare_finalize *pf, mt_quant_mode q);

/* Create an experts object of a kind and activation format.
 * Errors: MT_ERR_INVALID_ARG; MT_ERR_UNSUPPORTED for cuBLAS experts in the
 * standard format. */
mt_status mt_experts_create(mt_experts_kind kind, mt_act_format format, mt_experts **out);
void mt_experts_destroy(mt_experts *ex);
/* Its name ("moetune-standard", "moetune-batched", "cublas-batched"). */
const char *mt_experts_name(const mt_experts *ex);
mt_act_format mt_experts_format(const mt_experts *ex);
/* Whether the experts take quant mode q (1/0). For moetune's kernels this
 * asks the launcher what this build can run, so it follows new modes. */
int mt_experts_accepts(const mt_experts *ex, mt_quant_mode q);

/*
 * Can pf and ex serve problem p? MT_OK, or MT_ERR_INCOMPATIBLE with a
 * message naming both objects and the mismatch (format, or a quant mode one
 * side does not take), MT_ERR_ALIGNMENT for a w8a8 mode whose K or N is not
 * a multiple of 16, or the problem's validation status. p->format is
 * ignored (the prepare/finalize decides it). No GPU needed. msg: host
 * buffer or NULL.
 */
mt_status mt_compose_check(const mt_prepare_finalize *pf, const mt_experts *ex,
                           const mt_problem *p, char *msg, size_t msg_size);

/* ------------------------------------------------------------------------
 * Modular kernel
 * ------------------------------------------------------------------------ */

typedef struct mt_modular_kernel mt_modular_kernel;

/*
 * Compose pf and ex for problem p. p->M is the largest M a call may pass
 * (calls with a larger M are refused, see mt_modular_kernel_run); p->format
 * is taken from pf; with MT_PF_BATCHED, p->max_tokens is the capacity per
 * expert (0: p->M, enough whenever a token's topk experts are distinct).
 * Selects and loads every kernel now (tuned lookup per M bucket, see
 * mt_modular_kernel_lookup; compiling with NVRTC what has no loadable
 * image), so calls never compile, allocate or touch a database. pf and ex
 * are only read during the call (they may be destroyed afterwards).
 * *out is set even on failure (unless MT_ERR_NO_MEMORY); read the reason
 * with mt_modular_kernel_errmsg, then destroy it. Such a kernel refuses
 * every call (run, read_error, lookup: MT_ERR_INVALID_ARG, its message
 * still the reason; workspace size and max M 0).
 * Errors: MT_ERR_INCOMPATIBLE (see mt_compose_check), the problem's
 * validation status, MT_ERR_NOT_FOUND (no kernel and no_defaults),
 * MT_ERR_DB (a tuned entry names a kernel its database lacks),
 * MT_ERR_NVRTC, MT_ERR_CUDA, MT_ERR_CUBLAS, MT_ERR_INVALID_ARG.
 */
mt_status mt_modular_kernel_create(mt_context *ctx, const mt_prepare_finalize *pf,
                                   const mt_experts *ex, const mt_problem *p,
                                   mt_modular_kernel **out);
void mt_modular_kernel_destroy(mt_modular_kernel *mk);
/* Last error of the kernel ("" when none). Never NULL. */
const char *mt_modular_kernel_errmsg(const mt_modular_kernel *mk);
/* Bytes of device workspace a call needs (for any M up to the max M). */
size_t mt_modular_kernel_workspace_size(const mt_modular_kernel *mk);
/* The largest M a call accepts. */
int64_t mt_modular_kernel_max_m(const mt_modular_kernel *mk);

/*
 * Enqueue the fused MoE for M tokens on `stream`. t holds DEVICE pointers,
 * always in the standard layout (the prepare/finalize converts):
 *   hidden [M, K], out [M, K]: element dtype, 16-byte aligned;
 *   w1, w2 (and the quant scales): as problem.h says, 16-byte aligned;
 *   topk_ids [M, topk] int32, topk_weights [M, topk] fp32: 16-byte aligned;
 *   expert_map [E] int32 when the problem has one, else NULL;
 *   expert_num_tokens must be NULL (the batched prepare computes it).
 * workspace: DEVICE memory of at least mt_modular_kernel_workspace_size
 * bytes, 256-byte aligned, used only by this call (not shared with a call
 * in flight on another stream). M may be 0 (nothing is enqueued) up to the
 * max M; a larger M is refused with MT_ERR_SHAPE (no chunking: size the
 * kernel for the largest batch).
 * No allocation, no host synchronization, no blocking I/O: the call can be
 * captured into a CUDA graph (the graph then replays this M and these
 * pointers). It makes the context current on the calling thread.
 * A topk id outside [0, E), an expert_map entry outside [-1, local_E) (or
 * an expert over the batched capacity) found on the GPU is recorded in the
 * workspace, and the slot left out of the output: see
 * mt_modular_kernel_read_error.
 * Errors (message on mk): MT_ERR_INVALID_ARG (NULL pointer), MT_ERR_ALIGNMENT,
 * MT_ERR_SHAPE, MT_ERR_CUDA, MT_ERR_CUBLAS.
 */
mt_status mt_modular_kernel_run(mt_modular_kernel *mk, int64_t M, const mt_moe_tensors *t,
                                void *workspace, size_t workspace_size, CUstream stream);

/*
 * After the stream of the last call on this workspace has completed:
 * MT_OK, or MT_ERR_DEVICE_CHECK with a message (on mk) naming the offending
 * topk_ids element and what was wrong. Synchronous (copies a few bytes from
 * the device); not for the hot path. M is the M of that call.
 */
mt_status mt_modular_kernel_read_error(mt_modular_kernel *mk, int64_t M, const void *workspace);

/* Where the kernels of a call come from. */
typedef enum mt_lookup_source {
    MT_LOOKUP_TUNED = 0,      /* a database entry of this GPU's SKU */
    MT_LOOKUP_SAME_CC,        /* an entry of another SKU of the same compute capability */
    MT_LOOKUP_DEFAULTS,       /* the built-in default kernels */
    MT_LOOKUP_LIBRARY         /* cuBLAS experts: no lookup (built-in helper kernels) */
} mt_lookup_source;

/* Name of a lookup source ("tuned", "same-cc", "defaults", "library"). */
const char *mt_lookup_source_name(mt_lookup_source s);

typedef struct mt_lookup_info {
    mt_lookup_source source;
    int64_t bucket_m;          /* the M the lookup was made for */
    int64_t tuned_m;           /* M of the entry used (0 for defaults) */
    int exact;                 /* tuned_m == bucket_m */
    char db_path[512];         /* database that served it ("" otherwise) */
    char sku[64];              /* SKU of the entry ("" otherwise) */
    char pipeline[1024];       /* the pipeline text (docs/DATABASE.md form) */
    char provenance_diff[256]; /* fields that differ from this machine
                                  (template_hash, nvrtc_version, ...); "" */
} mt_lookup_info;

/* Which kernels a call with M tokens uses and where they came from (the
 * answer is cached at creation; nothing is looked up here). *info: host.
 * Errors: MT_ERR_INVALID_ARG, MT_ERR_SHAPE (M outside [1, max M]), with a
 * message on mk as every other call's (a failed creation's kept as is). */
mt_status mt_modular_kernel_lookup(const mt_modular_kernel *mk, int64_t M,
                                   mt_lookup_info *info /* out */);

#ifdef __cplusplus
}
#endif
#endif
