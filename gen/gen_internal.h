/*
 * Private to the gen/ folder: the loaded-template structures and the
 * functions the gen/ sources share. Nothing here is public API.
 */
#ifndef MT_GEN_INTERNAL_H
#define MT_GEN_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "moetune/gen.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

typedef struct lua_State lua_State;

/* ---- sandbox.c: one sandboxed Lua state per template ---- */
typedef struct gen_lua {
    lua_State *L;
    size_t used, limit;        /* bytes in use, cap */
    long budget, executed;     /* instruction budget per call, count so far */
    int mem_hit, budget_hit;   /* set when a limit fired during the current call */
    char family[48];           /* for messages */
} gen_lua;

mt_status gen_lua_open(gen_lua **out, const char *family, long budget, size_t limit, char *msg,
                       size_t msg_size);
void gen_lua_close(gen_lua *s);
/* Load a text chunk (never bytecode) named "@path" and run it; on success
 * its first result is left on the stack. */
mt_status gen_lua_run_file(gen_lua *s, const char *path, const char *text, size_t len, char *msg,
                           size_t msg_size);
/* lua_pcall with a traceback handler, a fresh instruction budget and the
 * limits translated into clear messages. Function and nargs on the stack. */
mt_status gen_lua_call(gen_lua *s, int nargs, int nresults, char *msg, size_t msg_size);

/* ---- template.c: templates validated into C ---- */
typedef struct gen_value {
    char text[48];             /* as it appears in names and variants */
    int is_int;
    int64_t i;
} gen_value;

typedef struct gen_param {
    char name[32];
    char abbrev[16];
    int omit;                  /* index of the value left out of names, -1: none */
    int nvalues;
    gen_value *values;
    /* only_if(p, target): where the parameter may take a value other than
     * its first, p holding the parameters declared before it; a registry
     * reference, LUA_NOREF where every value goes everywhere. */
    int ref_only_if;
} gen_param;

typedef struct gen_default {   /* one default_set entry: param index -> value index, -1 = any */
    int value[MT_VARIANT_MAX_PARAMS];
} gen_default;

typedef struct gen_target {
    const char *arch;
    int sm;
    int smem_per_block, regs_per_sm, max_threads, threads_per_sm, smem_per_sm;
    int is_ptx;
} gen_target;

typedef struct gen_template {
    char family[48];
    char path[PATH_MAX];       /* the .lua file */
    char dir[PATH_MAX];        /* its folder */
    char doc[256];
    /* The targets the family builds for (`archs`); none: every target. */
    const gen_target *archs[8];
    int narchs;
    int version;
    int nparams;
    gen_param params[MT_VARIANT_MAX_PARAMS];
    int ndefaults;
    gen_default *defaults;
    gen_lua *lua;
    int ref_valid, ref_launch, ref_render;   /* registry references; valid may be absent */
} gen_template;

mt_status gen_template_load(gen_template *t, const char *path, const char *family, long budget,
                            size_t mem_limit, char *msg, size_t msg_size);
void gen_template_free(gen_template *t);
/* Value index of `text` in parameter p's domain, or -1. */
int gen_template_value_index(const gen_template *t, int p, const char *text);
int gen_template_param_index(const gen_template *t, const char *name);
int gen_template_is_default(const gen_template *t, const int *point);
/* Fill a variant (family, arch, version, params, name) from a point. */
mt_status gen_template_variant(const gen_template *t, const int *point, const char *arch,
                               mt_variant *v, char *msg, size_t msg_size);
/* Point of a variant: its params must be exactly the declared ones. */
/* The point whose canonical name is `name` (1), or 0 when no point of t
 * has it. Reads the name only: no Lua call, no walk. */
int gen_template_decode_name(const gen_template *t, const char *name, int *point);
mt_status gen_template_point(const gen_template *t, const mt_variant *v, int *point, char *msg,
                             size_t msg_size);
/* Whether the family builds for tg (its `archs`, or none declared); if
 * not, reason says which targets it needs. */
int gen_template_builds_for(const gen_template *t, const gen_target *tg, char *reason,
                            size_t reason_size);
/* Parameter q's only_if on the parameters before it in point (its own
 * value not read): *ok 1/0, reason set when 0; *ok 1 where q has none. */
mt_status gen_template_gate(gen_template *t, int q, const int *point, const gen_target *tg,
                            int *ok, char *reason, size_t reason_size, char *msg, size_t msg_size);
/* Whether a point is valid: the family builds for tg, each parameter off
 * its first value passes its only_if, in declaration order (unless
 * gates_checked: a walk that has asked them on the way), then valid(p,
 * target). *ok 1/0; reason set when 0. */
mt_status gen_template_valid(gen_template *t, const int *point, const gen_target *tg,
                             int gates_checked, int *ok, char *reason, size_t reason_size,
                             char *msg, size_t msg_size);
mt_status gen_template_launch(gen_template *t, const int *point, const gen_target *tg,
                              int *threads, int *smem, char *msg, size_t msg_size);
/* render(p, name): *src malloc'd. */
mt_status gen_template_render(gen_template *t, const int *point, const char *name, char **src,
                              size_t *len, char *msg, size_t msg_size);

/* ---- enumerate.c ---- */
const gen_target *gen_target_find(const char *arch);
/* The template and point of a variant made earlier: its family is loaded,
 * its version is the template's and its name is the one its parameters give
 * today (MT_ERR_NOT_FOUND, MT_ERR_INCOMPATIBLE, set on g). Validity for a
 * target is not checked. */
mt_status gen_locate(mt_gen *g, const mt_variant *v, gen_template **t, int *point);

/* ---- compile.c ---- */
void gen_nvrtc_version(int *major, int *minor);

/* ---- cache.c: content-addressed compile cache ---- */
/* Key over everything that determines the image. */
void gen_cache_key(const char *source, size_t len, const char *const *opts, int nopts,
                   const char *arch, char hex[65]);
typedef enum { GEN_CACHE_MISS, GEN_CACHE_HIT, GEN_CACHE_CORRUPT } gen_cache_result;
gen_cache_result gen_cache_read(const char *dir, const char *key, uint8_t **image, size_t *len,
                                char *msg, size_t msg_size);
mt_status gen_cache_write(const char *dir, const char *key, const uint8_t *image, size_t len,
                          char *msg, size_t msg_size);

/* ---- gen.c: the handle ---- */
struct mt_gen {
    char err[4096];
    gen_template *templates;   /* sorted by family */
    size_t ntemplates;
    char **dirs;               /* search order, highest precedence first */
    size_t ndirs;
    char cache_dir[PATH_MAX];  /* "" = no cache */
    char cache_err[512];       /* the first failed cache write ("" none) */
    char cuda_include[PATH_MAX]; /* the toolkit headers for `#include <cuda_fp16.h>` */
    int jobs, progress, verbose;
    mt_gen_stats stats;
};

gen_template *gen_find_template(mt_gen *g, const char *family);
mt_status gen_set_err(mt_gen *g, mt_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
