/*
 * moetune database: the SQLite store of tuned fused-MoE pipelines per GPU SKU.
 *
 * One file holds, for one or more SKUs: provenance rows (where and with what
 * software a result was measured), kernels (variant text, CUDA source and
 * the compiled image, each with its SHA-256), entries ((SKU, problem key, M)
 * -> the fastest pipeline and its times), the history of every entry ever
 * offered, the tuner's candidate log (resume + rejections) and reference
 * configurations imported from vLLM's per-device JSON files.
 *
 * Files are recognized by PRAGMA application_id (MT_DB_APPLICATION_ID) and
 * versioned by PRAGMA user_version; older versions are migrated when opened
 * for writing. WAL mode and a busy timeout let several tuner processes write
 * one file; every write call is its own transaction. A file goes to WAL mode
 * after its writer's first commit (a new file when it is created), so that
 * one a writer refuses, or a write that fails, keeps every byte, its journal
 * mode too. docs/DATABASE.md
 * describes the schema and the JSON layouts.
 *
 * Every call returns an mt_status; on failure the message (which names the
 * file) is on the handle: mt_db_errmsg. A handle is used by one thread at a
 * time.
 */
#ifndef MOETUNE_DB_H
#define MOETUNE_DB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "moetune/problem.h"
#include "moetune/status.h"
#include "moetune/variant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "MoEt" */
#define MT_DB_APPLICATION_ID 0x4d6f4574
/* The schema version this build writes and reads. */
#define MT_DB_SCHEMA_VERSION 2

typedef struct mt_db mt_db;

enum {
    MT_DB_READONLY = 1,   /* never write; a missing file is an error */
    MT_DB_CREATE = 2      /* create the file when missing (ignored with READONLY) */
};

/*
 * Open (and with MT_DB_CREATE create) a moetune database. A missing file
 * without MT_DB_CREATE, a file that is not SQLite, a truncated file, an
 * SQLite file of another application, a schema newer than this build, or an
 * older schema opened read-only all fail (MT_ERR_IO, MT_ERR_DB) with a
 * message naming the file; nothing in an existing file is changed by a
 * failed open. Even on failure *out is set to a handle (or NULL when out of
 * memory) so that mt_db_errmsg can be read; close it with mt_db_close.
 */
mt_status mt_db_open(const char *path, int flags, mt_db **out);
/* Close; NULL is a no-op. */
void mt_db_close(mt_db *db);
/* One read snapshot over several reads (a lookup, then the kernels its
 * entry names): a writer in another process that commits in between is not
 * seen half-way. mt_db_read_end closes it; no write in between. */
mt_status mt_db_read_begin(mt_db *db);
void mt_db_read_end(mt_db *db);
/* Delete the database at path (and SQLite's side files) if it holds no row
 * at all: for a command that created it and then failed before writing
 * anything (a tune without a GPU, a merge whose first source is missing).
 * *removed (may be NULL) says whether it went. A file that is not a
 * moetune database, has rows, or is open elsewhere (another writer about to
 * store its first row) is left alone. */
mt_status mt_db_remove_if_empty(const char *path, int *removed /* out */);
/* The last error message on this handle ("" when none). Never NULL. */
const char *mt_db_errmsg(const mt_db *db);
/* The path the handle was opened with. */
const char *mt_db_path(const mt_db *db);

/* ---- problem keys ---- */

/* Routing (mt_routing, problem.h) is part of the key. */
typedef mt_routing mt_db_routing;

#define MT_DB_SKU_MAX 64

/* Everything but M that identifies a tuned result, plus the GPU SKU. */
typedef struct mt_db_key {
    char sku[MT_DB_SKU_MAX];  /* "NVIDIA H200" as the driver names it */
    int64_t E, topk, K, N;
    mt_dtype dtype;
    mt_quant_mode quant;
    int group_size;
    int has_zero_point;
    mt_act_format format;
    mt_activation activation;
    int has_expert_map;
    int apply_router_weight_on_input;
    mt_db_routing routing;
} mt_db_key;

/* Key of a problem on a SKU. routing NULL means "uniform". MT_ERR_INVALID_ARG
 * for an unknown routing or a SKU name too long. */
mt_status mt_db_key_from_problem(const mt_problem *p, const char *sku, const char *routing,
                                 mt_db_key *out);
/* Canonical one-line text of the key without the SKU, e.g.
 * "E=128,topk=8,K=7168,N=2048,dtype=bf16,quant=fp8-block,group=0,zp=0,
 *  format=standard,act=silu,expert_map=0,rw_on_input=0,routing=uniform"
 * (one line). Used for display and in the JSON layout. */
mt_status mt_db_key_format(const mt_db_key *k, char *out, size_t size);
/* Parse that text (all fields required, in any order); sku is set from the
 * argument (may be NULL: empty). */
mt_status mt_db_key_parse(const char *text, const char *sku, mt_db_key *out, char *msg,
                          size_t msg_size);

/* ---- pipelines ---- */

#define MT_DB_MAX_STEPS 6
#define MT_DB_PIPELINE_TEXT_MAX 2048
/* A step whose kernel is this name runs a library (cuBLAS) call, not a
 * stored kernel. */
#define MT_DB_LIBRARY_KERNEL "cublas"

typedef struct mt_db_step {
    char role[16];                    /* align, quant, gemm1, act, gemm2, reduce */
    char kernel[MT_VARIANT_NAME_MAX]; /* variant name or MT_DB_LIBRARY_KERNEL */
} mt_db_step;

typedef struct mt_db_pipeline {
    char backend[16];   /* "moetune", "cublas" or "default" */
    char arch[16];      /* the kernels' arch, e.g. "sm_90a" */
    int nsteps;
    mt_db_step steps[MT_DB_MAX_STEPS]; /* roles in the order listed above */
    int launch_late;    /* "launch=late": the GEMMs read nothing before the step
                         * ahead is done (no early weight loads under a
                         * dependent launch); 0, the default ("launch=early",
                         * not written): they may (docs/RUNTIME.md) */
} mt_db_pipeline;

/* "backend=moetune;arch=sm_90a;align=mtk_..;gemm1=mtk_..;...[;launch=late]" */
mt_status mt_db_pipeline_format(const mt_db_pipeline *p, char *out, size_t size);
/* Parse and validate (known backend and roles, roles in order, no repeats). */
mt_status mt_db_pipeline_parse(const char *text, mt_db_pipeline *out, char *msg, size_t msg_size);
/* The kernel name of a role, or NULL. */
const char *mt_db_pipeline_kernel(const mt_db_pipeline *p, const char *role);

/* ---- provenance ---- */

typedef struct mt_db_provenance {
    int64_t id;             /* set by put and by reads */
    char sku[MT_DB_SKU_MAX];
    char cc[8];             /* compute capability "9.0" */
    int sm_count;
    int64_t mem_clock_khz;  /* as the driver reports it */
    char driver_version[32];
    char cuda_version[32];
    char nvrtc_version[32];
    char moetune_version[32];
    char template_hash[65];
    int64_t created;        /* unix seconds; 0 on put: now */
} mt_db_provenance;

/* Store a provenance row, or find the identical one (all fields but id and
 * created equal); *id is its row id. */
mt_status mt_db_put_provenance(mt_db *db, const mt_db_provenance *p, int64_t *id /* out */);

/* Names of the fields that differ between a stored provenance and the
 * current machine among template_hash, nvrtc_version, driver_version,
 * cuda_version, moetune_version, written comma-separated into msg; returns
 * how many differ (0: a perfect match). */
int mt_db_provenance_mismatch(const mt_db_provenance *stored, const mt_db_provenance *current,
                              char *msg, size_t msg_size);

/* ---- kernels ---- */

typedef struct mt_db_kernel {
    mt_variant variant;     /* name, arch, family, params */
    char *source;           /* amalgamated CUDA source (NUL-terminated) */
    size_t source_len;
    void *image;            /* cubin or PTX; NULL when only the source is kept */
    size_t image_len;
    int is_ptx;
    char template_hash[65];
    char source_sha256[65];
    char image_sha256[65];  /* "" when there is no image */
} mt_db_kernel;

/*
 * Insert or replace the kernel (variant.name, variant.arch). The SHA-256s
 * are computed here; when k->image_sha256 (or source_sha256) is non-empty on
 * entry it must equal the computed one, else MT_ERR_MISMATCH (a caller
 * passing along a hash it received, e.g. on import, so the image is
 * verified). The caller keeps ownership of k.
 */
mt_status mt_db_put_kernel(mt_db *db, const mt_db_kernel *k);
/*
 * Read a kernel. On success *out holds malloc'd source and image (release
 * with mt_db_kernel_free). MT_ERR_NOT_FOUND when absent; MT_ERR_DB when the
 * stored image or source does not match its stored hash, or the variant
 * text does not parse.
 */
mt_status mt_db_get_kernel(mt_db *db, const char *name, const char *arch, mt_db_kernel *out);
/* The family of kernel (name, arch) and the hash of that family's templates
 * it was generated from, without reading its source or image.
 * MT_ERR_NOT_FOUND when the database does not store it. */
mt_status mt_db_kernel_origin(mt_db *db, const char *name, const char *arch, char family[48],
                              char template_hash[65]);
/* Free the buffers of a kernel from mt_db_get_kernel / iteration; NULL ok. */
void mt_db_kernel_free(mt_db_kernel *k);

/* ---- entries ---- */

#define MT_DB_NO_TIME (-1.0)   /* cublas_time_us when cuBLAS was not timed */

typedef struct mt_db_entry {
    mt_db_key key;
    int64_t M;
    mt_db_pipeline pipeline;
    double time_us;          /* end to end, the tuned pipeline */
    double default_time_us;  /* the untuned default; MT_DB_NO_TIME when it failed its check */
    double cublas_time_us;   /* MT_DB_NO_TIME when absent */
    double rel_err;          /* against the reference */
    int64_t recorded;        /* unix seconds when stored */
    mt_db_provenance prov;   /* filled on reads */
} mt_db_entry;

typedef enum mt_db_put_outcome {
    MT_DB_PUT_INSERTED = 0,  /* no entry existed */
    /* The offer won: strictly faster; in an MT_DB_MERGE_NEWER merge
     * recorded later, or in the same second and strictly faster; always
     * for mt_db_replace_entry. */
    MT_DB_PUT_REPLACED,
    MT_DB_PUT_KEPT           /* the stored one won */
} mt_db_put_outcome;

/*
 * Offer a result for (e->key, e->M), measured under provenance row
 * provenance_id: it becomes the entry when none exists or when strictly
 * faster than the stored one. Either way it is recorded in the history, so
 * both records survive. e->prov is ignored; e->recorded is when it was
 * measured (unix seconds; 0: now; negative refused). outcome may be NULL.
 * One transaction.
 */
mt_status mt_db_put_entry(mt_db *db, const mt_db_entry *e, int64_t provenance_id,
                          mt_db_put_outcome *outcome /* out */);
/*
 * The same, but e becomes the entry even when the stored time is lower: for
 * a result that beat the stored entry's pipeline timed again in its own run
 * (the tuner does that), where the stored time came from another run.
 */
mt_status mt_db_replace_entry(mt_db *db, const mt_db_entry *e, int64_t provenance_id,
                              mt_db_put_outcome *outcome /* out */);

/*
 * The entry for key (incl. key->sku) at the nearest tuned M: the tuned Mt
 * with the smallest |M - Mt|; on a tie the larger Mt (a kernel tuned for
 * more rows handles fewer rows safely, the reverse may under-tile). *exact
 * is 1 when Mt == M (exact may be NULL). MT_ERR_NOT_FOUND when the SKU has
 * no entry for the key.
 */
mt_status mt_db_lookup(mt_db *db, const mt_db_key *key, int64_t M, mt_db_entry *out,
                       int *exact /* out */);
/*
 * The same rule over every SKU whose provenance has compute capability cc
 * (the "similar SKU" fallback); key->sku is ignored. Ties in |M - Mt| and
 * Mt go to the SKU name that sorts first. out->key.sku says which SKU was
 * used.
 */
mt_status mt_db_lookup_cc(mt_db *db, const mt_db_key *key, const char *cc, int64_t M,
                          mt_db_entry *out, int *exact /* out */);

/* Iteration filter: NULL members / zero match everything. */
typedef struct mt_db_filter {
    const char *sku;
    int64_t E;
    int history;   /* iterate entry_history instead of the entries */
} mt_db_filter;

/* Calls cb for every matching entry ordered by SKU, key, M (history: and
 * recorded time). cb returns nonzero to stop (the call then returns MT_OK).
 * The entry is valid only during the call. filter may be NULL. */
mt_status mt_db_foreach_entry(mt_db *db, const mt_db_filter *filter,
                              int (*cb)(const mt_db_entry *e, void *ctx), void *ctx);
/* Record that kernel (name, arch), whose stored source has SHA-256
 * source_sha256, is what the templates of hash template_hash generate
 * (tuner/refresh.h checks that first). MT_ERR_NOT_FOUND when no kernel of
 * that name, arch and source is stored. One transaction. */
mt_status mt_db_set_kernel_template_hash(mt_db *db, const char *name, const char *arch,
                                        const char *source_sha256, const char *template_hash);
/* Every kernel (with_image 0: image NULL, image_len 0, hashes still set). */
mt_status mt_db_foreach_kernel(mt_db *db, int with_image,
                               int (*cb)(const mt_db_kernel *k, void *ctx), void *ctx);

/* ---- the tuner's candidate log ---- */

typedef struct mt_db_candidate {
    mt_db_key key;
    int64_t M;
    const char *pipeline;   /* the candidate's text (any form the tuner uses) */
    int ok;                 /* 1 "ok", 0 "rejected" */
    double time_us;         /* MT_DB_NO_TIME when not timed */
    double rel_err;         /* MT_DB_NO_TIME when not checked */
    const char *reason;     /* why rejected ("wrong result", "fault", "timeout"); may be NULL */
    int64_t recorded;       /* filled on reads */
} mt_db_candidate;

/* Record (or re-record) one measured candidate; one transaction. */
mt_status mt_db_record_candidate(mt_db *db, const mt_db_candidate *c);
/* Delete the candidate log of (key->sku, key, M): every candidate and the
 * tuner's marks, so that M is tuned again; the entry stays. *count (may be
 * NULL): the rows deleted. One transaction. */
mt_status mt_db_forget_candidates(mt_db *db, const mt_db_key *key, int64_t M, int *count /* out */);
/* *seen = 1 when (key, M, pipeline text) was recorded. */
mt_status mt_db_candidate_seen(mt_db *db, const mt_db_key *key, int64_t M, const char *pipeline,
                               int *seen /* out */);
mt_status mt_db_foreach_candidate(mt_db *db, int (*cb)(const mt_db_candidate *c, void *ctx),
                                  void *ctx);

/* ---- vLLM reference configurations ---- */

typedef struct mt_db_vllm_config {
    char device[MT_DB_SKU_MAX];   /* device_name as in vLLM's file name */
    int64_t E, N, M;
    /* the rest of vLLM's file name after the device, without the leading
     * comma: "" or "dtype=fp8_w8a8" or "dtype=fp8_w8a8,block_shape=[128,128]" */
    char selector[64];
    int block_m, block_n, block_k, group_m, num_warps, num_stages;
} mt_db_vllm_config;

/* The file name of the tuned database shipped for a SKU (db/tuned/,
 * installed to share/moetune/tuned/): lower case, each run of other
 * characters one '-', then ".db" ("NVIDIA H100 80GB HBM3" ->
 * "nvidia-h100-80gb-hbm3.db"), as python/moetune/fused.py looks it up. */
void mt_db_shipped_name(const char *sku, char *out, size_t size);
/* vLLM's device_name for a SKU: spaces become '_'. */
void mt_db_vllm_device_name(const char *sku, char *out, size_t size);
/* vLLM's file-name selector of a key (see mt_db_vllm_config.selector). */
void mt_db_vllm_selector(const mt_db_key *k, char *out, size_t size);

mt_status mt_db_put_vllm_config(mt_db *db, const mt_db_vllm_config *c);
/* Reference configs for device (NULL: all) and E, N (0: all), ordered by
 * device, E, N, selector, M. */
mt_status mt_db_foreach_vllm_config(mt_db *db, const char *device, int64_t E, int64_t N,
                                    int (*cb)(const mt_db_vllm_config *c, void *ctx),
                                    void *ctx);

/* ---- maintenance ---- */

/*
 * Check everything: PRAGMA integrity_check, application id and schema
 * version, every kernel's source and image against their hashes, every
 * entry's pipeline parses and its kernels are present. Each problem found
 * is passed to report (may be NULL); *problems (may be NULL) gets the count.
 * Returns MT_OK when none, MT_ERR_DB when some (message: the first).
 */
mt_status mt_db_verify(mt_db *db, void (*report)(const char *problem, void *ctx), void *ctx,
                       int *problems /* out */);

/*
 * Only the SQLite level of mt_db_verify: PRAGMA integrity_check and
 * foreign_key_check. A file that fails it may lose what is written into it
 * (an index that disagrees with its table hides a row just stored); a file
 * that passes it takes writes safely even when some entry or kernel is
 * unsound. Reports and returns as mt_db_verify.
 */
mt_status mt_db_verify_storage(mt_db *db, void (*report)(const char *problem, void *ctx),
                               void *ctx, int *problems /* out */);
/* MT_ERR_DB when db's SQLite file fails mt_db_verify_storage, with the
 * message "the file is damaged, so <refused> (N problem(s); first: ...)";
 * what every writer calls before writing (tune, merge, import, prune,
 * refresh): rows written into a file whose indexes disagree with its
 * tables may not be found again. refused says what the caller did not do
 * ("nothing was merged into it"); the refused file is left byte for byte. */
mt_status mt_db_refuse_damaged(mt_db *db, const char *refused);
/* MT_ERR_DB when a stored kernel's source or image does not match its
 * SHA-256, with the message "a stored kernel is damaged, so <refused> (...)":
 * for a writer that vouches for the stored kernels as they are (refresh
 * marks them current). */
mt_status mt_db_refuse_damaged_kernels(mt_db *db, const char *refused);

typedef struct mt_db_prune_stats {
    int64_t entries, history, candidates, kernels, provenance;
} mt_db_prune_stats;

/*
 * Delete the entries (and their history and candidates) of SKU sku and/or
 * those whose provenance template hash differs from keep_template_hash (a
 * stored hash, whole or by a prefix of at least 6 characters that fits only
 * it; else MT_ERR_INVALID_ARG, nothing deleted); the
 * two filters combine with AND, NULL means "any". Then delete kernels no
 * entry uses and provenance rows nothing refers to, and VACUUM. With both
 * filters NULL only the unreferenced rows go. dry_run: count, change
 * nothing. stats may be NULL. A damaged db (mt_db_verify_storage) is
 * refused: through a bad index, kernels in use could look unused.
 */
mt_status mt_db_prune(mt_db *db, const char *sku, const char *keep_template_hash, int dry_run,
                      mt_db_prune_stats *stats /* out */);

typedef struct mt_db_merge_stats {
    int64_t entries_inserted, entries_replaced, entries_kept;
    int64_t kernels_added, kernels_present, history, candidates, references;
} mt_db_merge_stats;

/* Which entry a merge keeps where both databases hold one for an SKU, key
 * and M. */
typedef enum mt_db_merge_rule {
    MT_DB_MERGE_FASTER = 0,   /* the lower stored time (a tie: the destination's) */
    /* The later recorded (a tie: the lower time). For the results of a
     * later run that the stored times of earlier runs would outvote: a
     * retune that beat the stored pipeline timed again in its own run
     * (mt_db_replace_entry) stores its own run's times, which may be above
     * the older run's. An entry dated ahead of the clock (a machine whose
     * clock ran ahead) wins every such merge. */
    MT_DB_MERGE_NEWER
} mt_db_merge_rule;

/*
 * Merge the database at src_path into db in one transaction: provenance,
 * kernels (those db lacks), entries (per key and M the one `rule` picks;
 * both are recorded in the history), history, candidates and reference
 * configs. src is opened read-only and must be of this schema version. A
 * db whose SQLite file is damaged (mt_db_verify_storage) is refused. On
 * failure db is unchanged. mt_db_merge: with MT_DB_MERGE_FASTER.
 */
mt_status mt_db_merge_by(mt_db *db, const char *src_path, mt_db_merge_rule rule,
                         mt_db_merge_stats *stats /* out */);
mt_status mt_db_merge(mt_db *db, const char *src_path, mt_db_merge_stats *stats /* out */);

/* ---- JSON ---- */

enum {
    MT_DB_JSON_IMAGES = 1,   /* include kernel images as base64 */
    MT_DB_JSON_PRETTY = 2
};

/* Write the whole database as moetune JSON (docs/DATABASE.md) to path
 * ("-": stdout), atomically. */
mt_status mt_db_export_json(mt_db *db, const char *path, int flags);
/* Import a moetune JSON file: the rules of mt_db_merge (the lower stored
 * time wins; a damaged db refused); one transaction. */
mt_status mt_db_import_json(mt_db *db, const char *path, mt_db_merge_stats *stats /* out */);

/*
 * vLLM per-device configs: for every (E, N, SKU, dtype) with moetune-backend
 * entries write DIR/E=..,N=..,device_name=..[,dtype=..][,block_shape=[128,128]].json mapping M to
 * the gemm1 variant's BLOCK_M/BLOCK_N/BLOCK_K/GROUP_M/WARPS/STAGES. Entries
 * of other backends are skipped; when several keys share a file and an M,
 * the first in key order wins. *files gets the number of files written.
 */
mt_status mt_db_export_vllm(mt_db *db, const char *dir, int *files /* out */);
/* Import one vLLM config file as reference records (device, E, N and the
 * selector from its file name); *count gets the number of M rows. A
 * damaged db is refused, as by merge. */
mt_status mt_db_import_vllm(mt_db *db, const char *path, int *count /* out */);

#ifdef __cplusplus
}
#endif
#endif
