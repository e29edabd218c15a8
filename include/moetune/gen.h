/*
 * moetune generator: Lua templates -> variants -> amalgamated CUDA source ->
 * NVRTC images (cubin or PTX), with a content-addressed compile cache.
 *
 * A template is `<family>.lua` in a template folder; its contract is in
 * docs/TEMPLATES.md. Templates run in a sandboxed Lua state with an
 * instruction budget and a memory cap. The generator needs no GPU.
 *
 * Threading: an mt_gen handle is used by one thread at a time; mt_gen_compile
 * runs NVRTC on its own worker threads internally.
 */
#ifndef MOETUNE_GEN_H
#define MOETUNE_GEN_H

#include <stddef.h>
#include <stdint.h>
#include "moetune/status.h"
#include "moetune/variant.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_gen mt_gen;

typedef struct mt_gen_config {
    /* User template folders, highest precedence first. They come before the
     * folders of env MT_TEMPLATE_PATH, which come before the built-in one. */
    const char *const *template_dirs;
    int ntemplate_dirs;
    const char *cache_dir;   /* NULL: env MT_CACHE_DIR, $XDG_CACHE_HOME/moetune, ~/.cache/moetune */
    int jobs;                /* NVRTC worker threads; 0: one per online core */
    int progress;            /* a progress line per compiled variant on stderr */
    int verbose;             /* notes (overrides, corrupt cache entries) on stderr */
    int no_builtin;          /* skip the built-in template folder */
    int no_cache;            /* neither read nor write the compile cache */
    long lua_instr_budget;   /* per call into Lua; 0: 50,000,000 */
    size_t lua_mem_limit;    /* bytes per template state; 0: 64 MiB */
} mt_gen_config;

/* Open a generator: reads the environment once, then loads and validates
 * every template of every folder (a family found in several folders is taken
 * from the folder with the highest precedence). cfg may be NULL (defaults).
 * *out is set even on failure (unless MT_ERR_NO_MEMORY), so that
 * mt_gen_errmsg can tell why; close it in every case.
 * Errors: MT_ERR_TEMPLATE (names the file and line), MT_ERR_IO. */
mt_status mt_gen_open(const mt_gen_config *cfg, mt_gen **out);
void mt_gen_close(mt_gen *g);                 /* NULL is a no-op */
/* The message of the last failure on g ("" if none). Never NULL. */
const char *mt_gen_errmsg(const mt_gen *g);

/* Loaded families, sorted by name. */
size_t mt_gen_family_count(const mt_gen *g);
const char *mt_gen_family_name(const mt_gen *g, size_t i);     /* NULL if out of range */
const char *mt_gen_family_path(const mt_gen *g, size_t i);     /* the .lua file it came from */
/* The folders searched, highest precedence first. */
size_t mt_gen_template_dir_count(const mt_gen *g);
const char *mt_gen_template_dir(const mt_gen *g, size_t i);
/* The cache folder in use ("" when the cache is off). */
const char *mt_gen_cache_dir(const mt_gen *g);

/* sha256 of the family's .lua and of every header reachable from the
 * `#include "..."` lines written literally in it (recursively), in a fixed
 * order. MT_ERR_NOT_FOUND for an unknown family. */
mt_status mt_gen_template_hash(mt_gen *g, const char *family, char hex[65]);

/* Known targets: sm_80, sm_86, sm_89, sm_90a, and compute_90 (PTX for newer
 * GPUs: sm = 90 without the sm_90a features). */
int mt_gen_arch_known(const char *arch);
/* The known targets' names, for messages ("sm_80, ..., compute_90"), into
 * buf (cut to size; MT_GEN_ARCH_NAMES_SIZE holds them all); returns buf. */
#define MT_GEN_ARCH_NAMES_SIZE 128
const char *mt_gen_arch_names(char *buf, size_t size);

#define MT_GEN_MAX_FILTERS 16
/* A walk takes at most this many points a family after the filters (with
 * defaults_only, default points): beyond it, walking would take minutes of
 * Lua calls, and the family needs filters. */
#define MT_GEN_MAX_WALK_POINTS 20000000
typedef struct mt_gen_filter {
    const char *family;      /* NULL: every family (see mt_gen_enumerate) */
    const char *arch;        /* required: "sm_90a", ... */
    int defaults_only;       /* keep only points matching the template's default_set */
    /* With a family named, a filter value outside a parameter's domain is an
     * error (a typo shows); set this to make it select nothing instead, to
     * ask several families with one problem's values (w4a16 of a family
     * without weight-only modes: no variants). */
    int lenient_values;
    /* With every family (family NULL): a family over MT_GEN_MAX_WALK_POINTS
     * is left out and named in the report's `unwalked`, instead of refusing
     * the whole walk. For a listing; a compile or a tune would lose the
     * family's variants without a word, so they leave it 0. */
    int skip_over_cap;
    int nparams;             /* name=value pairs; several on one name = any of them */
    struct {
        const char *name, *value;
    } params[MT_GEN_MAX_FILTERS];
} mt_gen_filter;

#define MT_PRUNE_MAX_REASONS 32
typedef struct mt_prune_report {
    int enumerated;          /* points after the filters (and defaults_only), with those a
                              * parameter's only_if or the family's archs pruned unvisited */
    int valid;               /* points the archs, only_if and valid(p, target) accepted */
    int nreasons;            /* distinct rejection reasons; the last slot may be "(other reasons)" */
    struct {
        char reason[128];
        int count;
    } reasons[MT_PRUNE_MAX_REASONS];
    int nunwalked;           /* families left out by skip_over_cap (the first 8 named) */
    struct {
        char family[64];
        double points;       /* its points after the filters */
    } unwalked[8];
} mt_prune_report;

/* Enumerate the valid variants of one family (or all, family NULL) for one
 * arch, in a deterministic order (declaration order, last parameter fastest).
 * With one family, a filter on an undeclared parameter or with a value
 * outside its domain is MT_ERR_INVALID_ARG naming it. With every family, a
 * filter applies to the families that declare the parameter (the others are
 * unaffected) and it is an error only if no family declares the parameter or
 * has the value; reasons are then prefixed "family: ".
 * *out is malloc'd (free()); report may be NULL. A template error is
 * MT_ERR_TEMPLATE. */
mt_status mt_gen_enumerate(mt_gen *g, const mt_gen_filter *f, mt_variant **out, size_t *count,
                           mt_prune_report *report);
/* The same walk with each valid variant handed to cb as it is found (in
 * the order mt_gen_enumerate lists them) instead of collected: memory does
 * not grow with the number of variants. cb returns nonzero to stop (the
 * call then returns MT_OK, and the filter checks that need the whole walk
 * are skipped). */
mt_status mt_gen_enumerate_each(mt_gen *g, const mt_gen_filter *f,
                                int (*cb)(const mt_variant *v, void *ctx), void *ctx,
                                mt_prune_report *report);

/* Find a variant by canonical name for an arch (searches every family).
 * MT_ERR_NOT_FOUND if no valid variant has that name. */
mt_status mt_gen_find(mt_gen *g, const char *name, const char *arch, mt_variant *out);

/* What the loaded templates make today of a variant made earlier (e.g. one
 * read from a database): the variant of the same family, version and
 * parameters for its arch, threads and shared memory included.
 * MT_ERR_NOT_FOUND when the family is not loaded or valid() now refuses the
 * point; MT_ERR_INCOMPATIBLE when the version differs, a parameter is not
 * the family's, or the parameters give another name; MT_ERR_UNSUPPORTED for
 * an unknown arch. Unlike mt_gen_find, walks no parameter space. */
mt_status mt_gen_resolve(mt_gen *g, const mt_variant *v, mt_variant *out);

/* The variant's self-contained CUDA source: render(p, name) with every
 * `#include "x"` replaced by the file (see docs/TEMPLATES.md). *source is
 * malloc'd, NUL-terminated. MT_ERR_INCOMPATIBLE if v->template_version is not
 * the loaded template's version. */
mt_status mt_gen_source(mt_gen *g, const mt_variant *v, char **source, size_t *len);

typedef struct mt_kernel_binary {
    mt_variant variant;
    char *source;            /* amalgamated source (NULL if rendering failed) */
    size_t source_len;
    char source_sha[65];     /* sha256 hex of source */
    uint8_t *image;          /* cubin, or NUL-terminated PTX for compute_XX */
    size_t image_len;
    int is_ptx;
    char *log;               /* NVRTC log or the error message; "" on a cache hit */
    mt_status status;
    int cache_hit;
} mt_kernel_binary;

/* Compile n variants (each for its own v->arch) over a pool of cfg.jobs
 * threads, using the cache. *out (n items) is always set when n > 0 and
 * memory allows; each item has its own status and log. Returns MT_OK if all
 * succeeded, else the first failed item's status (all are attempted).
 * Free with mt_kernel_binaries_free. */
mt_status mt_gen_compile(mt_gen *g, const mt_variant *v, size_t n, mt_kernel_binary **out);
void mt_kernel_binaries_free(mt_kernel_binary *b, size_t n);

/* Counters since open (corrupt counts cache entries found damaged). */
typedef struct mt_gen_stats {
    int cache_hits, cache_misses, cache_corrupt, compiled, failed;
    int cache_write_failed;    /* images compiled but not stored in the cache */
} mt_gen_stats;
void mt_gen_get_stats(const mt_gen *g, mt_gen_stats *out);
/* Why the first cache write of g failed ("" when none did). */
const char *mt_gen_cache_error(const mt_gen *g);

#ifdef __cplusplus
}
#endif
#endif
