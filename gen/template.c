/*
 * Loading a template file and validating what its Lua table holds into C
 * (gen_template), and the three calls into it (valid, launch, render).
 * Every Lua interaction runs inside a protected call (gen_lua_call), so a
 * memory error or a misbehaving metamethod can never reach lua_atpanic.
 * Calls: gen/sandbox.c, Lua C API, common/util.h, moetune/variant.h.
 */
#include <lauxlib.h>
#include <errno.h>
#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "gen/gen_internal.h"

/* What one protected step needs and gives back. */
typedef enum { STEP_LOAD, STEP_GATE, STEP_VALID, STEP_LAUNCH, STEP_RENDER } step_kind;

typedef struct step {
    step_kind kind;
    gen_template *t;
    const char *family;      /* expected family (load) */
    const int *point;
    int q;                   /* the gated parameter (STEP_GATE) */
    const gen_target *tg;
    const char *name;
    mt_status st;            /* a validation failure found in C */
    char msg[1024];
    int ok;                  /* gate, valid */
    char reason[128];
    int threads, smem;       /* launch */
    char *src;               /* render, malloc'd */
    size_t len;
} step;

#define FAIL(c, ...)                                                   \
    do {                                                               \
        (c)->st = mt_errf((c)->msg, sizeof (c)->msg, MT_ERR_TEMPLATE, __VA_ARGS__); \
        return 0;                                                      \
    } while (0)

static int is_ident(const char *s, int lower_only)
{
    if (!*s)
        return 0;
    for (const char *c = s; *c; c++) {
        int ok = (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' ||
                 (!lower_only && *c >= 'A' && *c <= 'Z');
        if (!ok)
            return 0;
    }
    return 1;
}

static int is_alnum_str(const char *s)
{
    for (const char *c = s; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')))
            return 0;
    return 1;
}

/* How a value reads inside a canonical name (see mt_variant_make_name). */
static void name_form(const char *v, char *out, size_t size)
{
    size_t i = 0;
    for (; v[i] && i + 1 < size; i++) {
        char c = v[i];
        out[i] = ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) ? c : 'x';
    }
    out[i] = '\0';
}

/* One parameter's part of kernel names for one value: abbrev and value. */
typedef struct segment {
    char text[16 + 48];
    int param;
} segment;

static int cmp_segments(const void *x, const void *y)
{
    return strcmp(((const segment *)x)->text, ((const segment *)y)->text);
}

/* Where a value is left out of names (omit_in_name), the later parameters'
 * parts move up a place: two parameters that can write the same part
 * could then give two points one name, and one of them would be reached
 * by no name. Refused at load where any parameter omits a value. */
static int segments_distinct(step *c)
{
    const gen_template *t = c->t;
    int omits = -1;
    size_t n = 0;
    for (int p = 0; p < t->nparams; p++) {
        n += (size_t)t->params[p].nvalues;
        if (t->params[p].omit >= 0 && omits < 0)
            omits = p;
    }
    if (omits < 0)
        return 1;
    segment *s = calloc(n, sizeof *s);
    if (!s)
        FAIL(c, "out of memory");
    n = 0;
    for (int p = 0; p < t->nparams; p++)
        for (int k = 0; k < t->params[p].nvalues; k++) {
            char form[48];
            name_form(t->params[p].values[k].text, form, sizeof form);
            snprintf(s[n].text, sizeof s[n].text, "%s%s", t->params[p].abbrev, form);
            s[n++].param = p;
        }
    qsort(s, n, sizeof *s, cmp_segments);
    int clash = -1;
    for (size_t i = 1; i < n && clash < 0; i++)
        if (!strcmp(s[i - 1].text, s[i].text) && s[i - 1].param != s[i].param)
            clash = (int)i;
    segment a = clash >= 0 ? s[clash - 1] : (segment){{0}, 0}, b = clash >= 0 ? s[clash] : a;
    free(s);
    if (clash >= 0)
        FAIL(c, "template %s: parameters '%s' and '%s' both write '_%s' into kernel names; with "
                "omit_in_name (parameter '%s') two points could get one name",
             t->family, t->params[a.param].name, t->params[b.param].name, a.text,
             t->params[omits].name);
    return 1;
}

/* Field of the table at `idx` without metamethods. */
static int rawfield(lua_State *L, int idx, const char *key)
{
    idx = lua_absindex(L, idx);
    lua_pushstring(L, key);
    return lua_rawget(L, idx);
}

/* The scalar at the top as a domain value; 0 if neither integer nor string. */
static int read_value(lua_State *L, gen_value *out)
{
    memset(out, 0, sizeof *out);
    if (lua_isinteger(L, -1)) {
        out->is_int = 1;
        out->i = lua_tointeger(L, -1);
        snprintf(out->text, sizeof out->text, "%lld", (long long)out->i);
        return 1;
    }
    if (lua_type(L, -1) == LUA_TSTRING) {
        size_t n;
        const char *s = lua_tolstring(L, -1, &n);
        if (n == 0 || n >= sizeof out->text || strlen(s) != n || strpbrk(s, ";= \t\n"))
            return 0;
        mt_strlcpy(out->text, s, sizeof out->text);
        return 1;
    }
    return 0;
}

static int load_params(lua_State *L, step *c, int tbl)
{
    gen_template *t = c->t;
    if (rawfield(L, tbl, "params") != LUA_TTABLE)
        FAIL(c, "template %s: 'params' must be a list of tables", t->family);
    int np = (int)lua_rawlen(L, -1);
    if (np < 1 || np > MT_VARIANT_MAX_PARAMS)
        FAIL(c, "template %s: 'params' must hold 1 to %d entries, not %d", t->family,
             MT_VARIANT_MAX_PARAMS, np);
    for (int i = 0; i < np; i++) {
        gen_param *p = &t->params[i];
        if (lua_rawgeti(L, -1, i + 1) != LUA_TTABLE)
            FAIL(c, "template %s: params[%d] must be a table", t->family, i + 1);
        if (rawfield(L, -1, "name") != LUA_TSTRING || !is_ident(lua_tostring(L, -1), 0) ||
            lua_rawlen(L, -1) >= sizeof p->name)
            FAIL(c, "template %s: params[%d].name must be an identifier of at most %zu characters",
                 t->family, i + 1, sizeof p->name - 1);
        mt_strlcpy(p->name, lua_tostring(L, -1), sizeof p->name);
        lua_pop(L, 1);
        for (int j = 0; j < i; j++)
            if (strcmp(t->params[j].name, p->name) == 0)
                FAIL(c, "template %s: parameter '%s' is declared twice", t->family, p->name);
        int ty = rawfield(L, -1, "abbrev");
        if (ty != LUA_TNIL && (ty != LUA_TSTRING || !is_alnum_str(lua_tostring(L, -1)) ||
                               lua_rawlen(L, -1) >= sizeof p->abbrev))
            FAIL(c, "template %s: parameter '%s': abbrev must be letters/digits, at most %zu",
                 t->family, p->name, sizeof p->abbrev - 1);
        if (ty == LUA_TSTRING)
            mt_strlcpy(p->abbrev, lua_tostring(L, -1), sizeof p->abbrev);
        lua_pop(L, 1);
        if (rawfield(L, -1, "values") != LUA_TTABLE || lua_rawlen(L, -1) < 1)
            FAIL(c, "template %s: parameter '%s': values must be a non-empty list", t->family,
                 p->name);
        int nv = (int)lua_rawlen(L, -1);
        if (nv > 4096)
            FAIL(c, "template %s: parameter '%s' has %d values (at most 4096)", t->family,
                 p->name, nv);
        p->values = calloc((size_t)nv, sizeof *p->values);
        if (!p->values)
            FAIL(c, "out of memory");
        p->nvalues = nv;
        for (int k = 0; k < nv; k++) {
            lua_rawgeti(L, -1, k + 1);
            if (!read_value(L, &p->values[k]))
                FAIL(c, "template %s: parameter '%s': values[%d] must be an integer or a "
                        "non-empty string of at most %zu characters without ';', '=' or blanks "
                        "(got a %s)", t->family, p->name, k + 1, sizeof p->values[k].text - 1,
                     luaL_typename(L, -1));
            lua_pop(L, 1);
            char a[48], b[48];
            name_form(p->values[k].text, a, sizeof a);
            for (int j = 0; j < k; j++) {
                name_form(p->values[j].text, b, sizeof b);
                if (strcmp(a, b) == 0)
                    FAIL(c, "template %s: parameter '%s': values '%s' and '%s' give the same "
                            "kernel name", t->family, p->name, p->values[j].text,
                         p->values[k].text);
            }
        }
        lua_pop(L, 1);   /* values */
        /* omit_in_name: a value that names leave out (a parameter added
         * after kernels with the older names were tuned). */
        p->omit = -1;
        ty = rawfield(L, -1, "omit_in_name");
        if (ty != LUA_TNIL) {
            gen_value ov;
            if (read_value(L, &ov))
                for (int k = 0; k < nv; k++)
                    if (strcmp(ov.text, p->values[k].text) == 0)
                        p->omit = k;
            if (p->omit < 0)
                FAIL(c, "template %s: parameter '%s': omit_in_name must be one of its values",
                     t->family, p->name);
        }
        lua_pop(L, 1);   /* omit_in_name */
        /* only_if: a function of the parameters declared before this one
         * (and the target) saying where it may leave its first value, so
         * that a walk skips the other values there unvisited. */
        p->ref_only_if = LUA_NOREF;
        ty = rawfield(L, -1, "only_if");
        if (ty != LUA_TNIL && (ty != LUA_TFUNCTION || i == 0 || nv < 2))
            FAIL(c, "template %s: parameter '%s': only_if must be a function, on a parameter "
                    "with two values or more that is not the first declared", t->family, p->name);
        /* A stored variant made before the parameter resolves to its
         * omit_in_name value, which every point may take: the first. */
        if (ty != LUA_TNIL && p->omit > 0)
            FAIL(c, "template %s: parameter '%s': with only_if, omit_in_name must be its first "
                    "value", t->family, p->name);
        if (ty == LUA_TNIL)
            lua_pop(L, 1);
        else
            p->ref_only_if = luaL_ref(L, LUA_REGISTRYINDEX);
        lua_pop(L, 1);   /* params[i] */
    }
    t->nparams = np;
    lua_pop(L, 1);
    if (!segments_distinct(c))
        return 0;
    return 1;
}

static int load_defaults(lua_State *L, step *c, int tbl)
{
    gen_template *t = c->t;
    if (rawfield(L, tbl, "default_set") != LUA_TTABLE)
        FAIL(c, "template %s: 'default_set' must be a list of partial parameter tables",
             t->family);
    int nd = (int)lua_rawlen(L, -1);
    if (nd < 1)
        FAIL(c, "template %s: 'default_set' is empty (use { {} } to make every variant a "
                "default)", t->family);
    t->defaults = calloc((size_t)nd, sizeof *t->defaults);
    if (!t->defaults)
        FAIL(c, "out of memory");
    t->ndefaults = nd;
    for (int i = 0; i < nd; i++) {
        gen_default *d = &t->defaults[i];
        for (int k = 0; k < MT_VARIANT_MAX_PARAMS; k++)
            d->value[k] = -1;
        if (lua_rawgeti(L, -1, i + 1) != LUA_TTABLE)
            FAIL(c, "template %s: default_set[%d] must be a table", t->family, i + 1);
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            if (lua_type(L, -2) != LUA_TSTRING)
                FAIL(c, "template %s: default_set[%d] has a key that is not a parameter name",
                     t->family, i + 1);
            const char *key = lua_tostring(L, -2);
            int p = gen_template_param_index(t, key);
            if (p < 0)
                FAIL(c, "template %s: default_set[%d] names parameter '%s', which is not "
                        "declared", t->family, i + 1, key);
            gen_value v;
            int vi = read_value(L, &v) ? gen_template_value_index(t, p, v.text) : -1;
            if (vi < 0)
                FAIL(c, "template %s: default_set[%d]: parameter '%s' has no value '%s' in its "
                        "domain", t->family, i + 1, key,
                     lua_type(L, -1) == LUA_TSTRING || lua_type(L, -1) == LUA_TNUMBER
                         ? lua_tostring(L, -1) : luaL_typename(L, -1));
            d->value[p] = vi;
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return 1;
}

/* archs: the targets a family builds for (a Hopper-only family's wgmma),
 * optional; each one a target the generator knows. */
static int load_archs(lua_State *L, step *c, int tbl)
{
    gen_template *t = c->t;
    int ty = rawfield(L, tbl, "archs");
    if (ty == LUA_TNIL) {
        lua_pop(L, 1);
        return 1;
    }
    int n = ty == LUA_TTABLE ? (int)lua_rawlen(L, -1) : 0;
    if (n < 1 || n > (int)MT_ARRAY_LEN(t->archs))
        FAIL(c, "template %s: 'archs' must list 1 to %zu targets", t->family,
             MT_ARRAY_LEN(t->archs));
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, -1, i + 1);
        const gen_target *tg = lua_type(L, -1) == LUA_TSTRING ? gen_target_find(lua_tostring(L, -1))
                                                              : NULL;
        char known[MT_GEN_ARCH_NAMES_SIZE];
        if (!tg)
            FAIL(c, "template %s: archs[%d] is not a known target (%s)", t->family, i + 1,
                 mt_gen_arch_names(known, sizeof known));
        t->archs[t->narchs++] = tg;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return 1;
}

static int load_function(lua_State *L, step *c, int tbl, const char *field, int optional,
                         int *ref)
{
    int ty = rawfield(L, tbl, field);
    if (ty == LUA_TNIL && optional) {
        lua_pop(L, 1);
        *ref = LUA_NOREF;
        return 1;
    }
    if (ty != LUA_TFUNCTION)
        FAIL(c, "template %s: '%s' must be a function, not a %s", c->t->family, field,
             lua_typename(L, ty));
    *ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return 1;
}

/* Protected: the template's table is at index 2. */
static int step_load(lua_State *L, step *c)
{
    gen_template *t = c->t;
    if (!lua_istable(L, 2))
        FAIL(c, "template %s: the file must return a table, not a %s", t->path,
             luaL_typename(L, 2));
    if (rawfield(L, 2, "family") != LUA_TSTRING || !is_ident(lua_tostring(L, -1), 1) ||
        strcmp(lua_tostring(L, -1), c->family) != 0)
        FAIL(c, "template %s: 'family' must be \"%s\" (the file's base name, [a-z0-9_]+)",
             t->path, c->family);
    lua_pop(L, 1);
    if (rawfield(L, 2, "version") != LUA_TNUMBER || !lua_isinteger(L, -1) ||
        lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > 1000000000)
        FAIL(c, "template %s: 'version' must be an integer >= 1", t->family);
    t->version = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    int ty = rawfield(L, 2, "doc");
    if (ty != LUA_TNIL && ty != LUA_TSTRING)
        FAIL(c, "template %s: 'doc' must be a string", t->family);
    if (ty == LUA_TSTRING)
        mt_strlcpy(t->doc, lua_tostring(L, -1), sizeof t->doc);
    lua_pop(L, 1);
    if (!load_archs(L, c, 2) || !load_params(L, c, 2) || !load_defaults(L, c, 2))
        return 0;
    if (!load_function(L, c, 2, "valid", 1, &t->ref_valid) ||
        !load_function(L, c, 2, "launch", 0, &t->ref_launch) ||
        !load_function(L, c, 2, "render", 0, &t->ref_render))
        return 0;
    return 0;
}

static int ro_newindex(lua_State *L)
{
    return luaL_error(L, "the parameter table is read-only (tried to set '%s')",
                      luaL_tolstring(L, 2, NULL));
}

static int ro_index(lua_State *L)
{
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL)
        return 1;
    if (lua_type(L, lua_upvalueindex(2)) == LUA_TSTRING)
        return luaL_error(L, "only_if of parameter '%s' reads '%s', which is not a parameter "
                          "declared before it", lua_tostring(L, lua_upvalueindex(2)),
                          luaL_tolstring(L, 2, NULL));
    return luaL_error(L, "template reads undeclared parameter '%s'", luaL_tolstring(L, 2, NULL));
}

static int ro_pairs(lua_State *L)
{
    lua_getglobal(L, "next");
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_pushnil(L);
    return 3;
}

/* Push the read-only `p` of a point: its first n parameters, and where
 * gated names a parameter, p is that one's only_if argument. */
static void push_point(lua_State *L, const gen_template *t, const int *point, int n,
                       const char *gated)
{
    lua_createtable(L, 0, n);            /* hidden values */
    for (int i = 0; i < n; i++) {
        const gen_value *v = &t->params[i].values[point[i]];
        if (v->is_int)
            lua_pushinteger(L, (lua_Integer)v->i);
        else
            lua_pushstring(L, v->text);
        lua_setfield(L, -2, t->params[i].name);
    }
    lua_newtable(L);                     /* proxy */
    lua_createtable(L, 0, 4);            /* its metatable */
    lua_pushvalue(L, -3);
    if (gated)
        lua_pushstring(L, gated);
    else
        lua_pushnil(L);
    lua_pushcclosure(L, ro_index, 2);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, ro_newindex);
    lua_setfield(L, -2, "__newindex");
    lua_pushvalue(L, -3);
    lua_pushcclosure(L, ro_pairs, 1);
    lua_setfield(L, -2, "__pairs");
    lua_pushliteral(L, "read-only");
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);
    lua_remove(L, -2);
}

static void push_target(lua_State *L, const gen_target *tg)
{
    lua_createtable(L, 0, 7);
    lua_pushstring(L, tg->arch);
    lua_setfield(L, -2, "arch");
    lua_pushinteger(L, tg->sm);
    lua_setfield(L, -2, "sm");
    lua_pushinteger(L, tg->smem_per_block);
    lua_setfield(L, -2, "smem_per_block");
    lua_pushinteger(L, tg->regs_per_sm);
    lua_setfield(L, -2, "regs_per_sm");
    lua_pushinteger(L, tg->max_threads);
    lua_setfield(L, -2, "max_threads");
    lua_pushinteger(L, tg->threads_per_sm);
    lua_setfield(L, -2, "threads_per_sm");
    lua_pushinteger(L, tg->smem_per_sm);
    lua_setfield(L, -2, "smem_per_sm");
}

static int int_field(lua_State *L, int idx, const char *key, lua_Integer *out)
{
    int ok = rawfield(L, idx, key) == LUA_TNUMBER && lua_isinteger(L, -1);
    if (ok)
        *out = lua_tointeger(L, -1);
    lua_pop(L, 1);
    return ok;
}

static int step_call(lua_State *L, step *c)
{
    gen_template *t = c->t;
    int ref = c->kind == STEP_GATE ? t->params[c->q].ref_only_if
            : c->kind == STEP_VALID ? t->ref_valid
            : c->kind == STEP_LAUNCH ? t->ref_launch : t->ref_render;
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
    if (c->kind == STEP_GATE)
        push_point(L, t, c->point, c->q, t->params[c->q].name);
    else
        push_point(L, t, c->point, t->nparams, NULL);
    if (c->kind == STEP_RENDER)
        lua_pushstring(L, c->name);
    else
        push_target(L, c->tg);
    lua_call(L, 2, 2);
    if (c->kind == STEP_VALID || c->kind == STEP_GATE) {
        const char *fn = c->kind == STEP_GATE ? "only_if" : "valid";
        if (!lua_isboolean(L, -2))
            FAIL(c, "template %s: %s%s%s() must return true, or false and a reason (got a %s)",
                 t->family, c->kind == STEP_GATE ? t->params[c->q].name : "",
                 c->kind == STEP_GATE ? "." : "", fn, luaL_typename(L, -2));
        c->ok = lua_toboolean(L, -2);
        if (!c->ok && lua_type(L, -1) == LUA_TSTRING)
            mt_strlcpy(c->reason, lua_tostring(L, -1), sizeof c->reason);
        else if (!c->ok && c->kind == STEP_GATE)
            snprintf(c->reason, sizeof c->reason, "%s: only %s here (its only_if)",
                     t->params[c->q].name, t->params[c->q].values[0].text);
        else if (!c->ok)
            mt_strlcpy(c->reason, "(no reason given)", sizeof c->reason);
    } else if (c->kind == STEP_LAUNCH) {
        lua_Integer th, sm;
        if (!lua_istable(L, -2) || !int_field(L, -2, "threads", &th) ||
            !int_field(L, -2, "smem", &sm))
            FAIL(c, "template %s: launch() must return { threads = <integer>, smem = <integer> }",
                 t->family);
        if (th < 1 || th > c->tg->max_threads)
            FAIL(c, "template %s: launch() gives threads = %lld, outside 1..%d for %s", t->family,
                 (long long)th, c->tg->max_threads, c->tg->arch);
        if (sm < 0 || sm > c->tg->smem_per_block)
            FAIL(c, "template %s: launch() gives smem = %lld, outside 0..%d for %s (valid() "
                    "should have pruned this point)", t->family, (long long)sm,
                 c->tg->smem_per_block, c->tg->arch);
        c->threads = (int)th;
        c->smem = (int)sm;
    } else {
        if (lua_type(L, -2) != LUA_TSTRING)
            FAIL(c, "template %s: render() must return a string (got a %s)", t->family,
                 luaL_typename(L, -2));
        size_t n;
        const char *s = lua_tolstring(L, -2, &n);
        /* An empty source or one with a NUL byte (NVRTC would stop there
         * while the hash covers all of it) is refused (RELIABILITY.md R5, R8). */
        if (n == 0 || memchr(s, '\0', n))
            FAIL(c, "template %s: render() returned %s", t->family,
                 n == 0 ? "an empty string" : "a string with a NUL byte");
        c->src = malloc(n + 1);
        if (!c->src)
            FAIL(c, "out of memory");
        memcpy(c->src, s, n + 1);
        c->len = n;
    }
    return 0;
}

static int step_entry(lua_State *L)
{
    step *c = lua_touserdata(L, 1);
    return c->kind == STEP_LOAD ? step_load(L, c) : step_call(L, c);
}

/* Run a step protected; the Lua error or the C validation failure -> msg. */
static mt_status run_step(step *c, int with_table, char *msg, size_t msg_size)
{
    lua_State *L = c->t->lua->L;
    c->st = MT_OK;
    lua_pushcfunction(L, step_entry);
    lua_pushlightuserdata(L, c);
    if (with_table)
        lua_rotate(L, -3, 2);   /* table, fn, ud -> fn, ud, table */
    mt_status st = gen_lua_call(c->t->lua, with_table ? 2 : 1, 0, msg, msg_size);
    if (st == MT_OK && c->st != MT_OK) {
        free(c->src);
        c->src = NULL;
        st = mt_errf(msg, msg_size, c->st, "%s", c->msg);
    }
    return st;
}

int gen_template_param_index(const gen_template *t, const char *name)
{
    for (int i = 0; i < t->nparams; i++)
        if (strcmp(t->params[i].name, name) == 0)
            return i;
    return -1;
}

int gen_template_value_index(const gen_template *t, int p, const char *text)
{
    for (int k = 0; k < t->params[p].nvalues; k++)
        if (strcmp(t->params[p].values[k].text, text) == 0)
            return k;
    return -1;
}

int gen_template_is_default(const gen_template *t, const int *point)
{
    for (int d = 0; d < t->ndefaults; d++) {
        int match = 1;
        for (int i = 0; i < t->nparams && match; i++)
            if (t->defaults[d].value[i] >= 0 && t->defaults[d].value[i] != point[i])
                match = 0;
        if (match)
            return 1;
    }
    return 0;
}

mt_status gen_template_load(gen_template *t, const char *path, const char *family, long budget,
                            size_t mem_limit, char *msg, size_t msg_size)
{
    memset(t, 0, sizeof *t);
    t->ref_valid = t->ref_launch = t->ref_render = LUA_NOREF;
    /* A longer name would be cut short in every variant (mt_variant.family)
     * and the family then found by no name. */
    if (strlen(family) >= sizeof t->family)
        return mt_errf(msg, msg_size, MT_ERR_TEMPLATE,
                       "template %s: the family name (the file's base name) has %zu characters, "
                       "at most %zu", path, strlen(family), sizeof t->family - 1);
    /* Read whole before Lua sees it: a device or a huge file would be read
     * past any of the state's limits. */
    struct stat sb;
    const char *why = stat(path, &sb) != 0                  ? strerror(errno)
                      : !S_ISREG(sb.st_mode)                ? "not a regular file"
                      : (uint64_t)sb.st_size > (uint64_t)mem_limit ? "larger than the template memory limit"
                                                            : NULL;
    if (why)
        return mt_errf(msg, msg_size, MT_ERR_TEMPLATE, "template %s: %s", path, why);
    mt_strlcpy(t->family, family, sizeof t->family);
    mt_strlcpy(t->path, path, sizeof t->path);
    mt_strlcpy(t->dir, path, sizeof t->dir);
    char *slash = strrchr(t->dir, '/');
    if (slash)
        *slash = '\0';
    else
        mt_strlcpy(t->dir, ".", sizeof t->dir);
    char *text = NULL;
    size_t len = 0;
    mt_status st = mt_file_read(path, &text, &len, msg, msg_size);
    if (st)
        return st;
    st = gen_lua_open(&t->lua, family, budget, mem_limit, msg, msg_size);
    if (!st)
        st = gen_lua_run_file(t->lua, path, text, len, msg, msg_size);
    free(text);
    if (st)
        return st;
    step c = {.kind = STEP_LOAD, .t = t, .family = family};
    return run_step(&c, 1, msg, msg_size);
}

void gen_template_free(gen_template *t)
{
    if (!t)
        return;
    for (int i = 0; i < MT_VARIANT_MAX_PARAMS; i++)
        free(t->params[i].values);
    free(t->defaults);
    gen_lua_close(t->lua);
    memset(t, 0, sizeof *t);
}

mt_status gen_template_variant(const gen_template *t, const int *point, const char *arch,
                               mt_variant *v, char *msg, size_t msg_size)
{
    memset(v, 0, sizeof *v);
    mt_strlcpy(v->family, t->family, sizeof v->family);
    mt_strlcpy(v->arch, arch, sizeof v->arch);
    v->template_version = t->version;
    for (int i = 0; i < t->nparams; i++)
        if (mt_variant_add(v, t->params[i].name, t->params[i].values[point[i]].text))
            return mt_errf(msg, msg_size, MT_ERR_TEMPLATE, "template %s: parameter '%s' = '%s' "
                           "does not fit a variant", t->family, t->params[i].name,
                           t->params[i].values[point[i]].text);
    const char *abbrevs[MT_VARIANT_MAX_PARAMS], *omit[MT_VARIANT_MAX_PARAMS];
    for (int i = 0; i < t->nparams; i++) {
        abbrevs[i] = t->params[i].abbrev;
        omit[i] = t->params[i].omit >= 0 ? t->params[i].values[t->params[i].omit].text : NULL;
    }
    if (mt_variant_make_name_omitting(v, abbrevs, omit))
        return mt_errf(msg, msg_size, MT_ERR_TEMPLATE, "template %s: the kernel name of a "
                       "point is longer than %d characters", t->family, MT_VARIANT_NAME_MAX - 1);
    return MT_OK;
}

/* The point named by the tail of a canonical name (after "mtk_<family>"):
 * parameter i reads "_<abbrev><value as names write it>", or nothing when
 * it has the value that names leave out. It backtracks, so a value whose
 * name form begins another's cannot mislead it. */
static int decode_from(const gen_template *t, const char *s, int i, int *point)
{
    if (i == t->nparams)
        return *s == '\0';
    const gen_param *p = &t->params[i];
    point[i] = p->omit;
    if (p->omit >= 0 && decode_from(t, s, i + 1, point))
        return 1;
    const size_t al = strlen(p->abbrev);
    if (s[0] != '_' || strncmp(s + 1, p->abbrev, al) != 0)
        return 0;
    for (int k = 0; k < p->nvalues; k++) {
        char form[sizeof p->values[k].text];
        name_form(p->values[k].text, form, sizeof form);
        const size_t fl = strlen(form);
        point[i] = k;
        if (k != p->omit && strncmp(s + 1 + al, form, fl) == 0 &&
            decode_from(t, s + 1 + al + fl, i + 1, point))
            return 1;
    }
    return 0;
}

int gen_template_decode_name(const gen_template *t, const char *name, int *point)
{
    const size_t fl = strlen(t->family);
    return strncmp(name, "mtk_", 4) == 0 && strncmp(name + 4, t->family, fl) == 0 &&
           decode_from(t, name + 4 + fl, 0, point);
}

mt_status gen_template_point(const gen_template *t, const mt_variant *v, int *point, char *msg,
                             size_t msg_size)
{
    /* A variant recorded before a parameter with an omit_in_name value was
     * added lacks it: it is that value's point (its name is the same). */
    int recorded = 0;
    for (int i = 0; i < t->nparams; i++) {
        const char *val = mt_variant_get(v, t->params[i].name);
        recorded += val != NULL;
        point[i] = val ? gen_template_value_index(t, i, val) : t->params[i].omit;
        if (point[i] < 0)
            return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE, "variant %s: parameter '%s' = "
                           "'%s' is not in template %s's domain", v->name, t->params[i].name,
                           val ? val : "(missing)", t->family);
    }
    if (v->nparams == recorded)
        return MT_OK;
    for (int i = 0; i < v->nparams; i++)
        if (gen_template_param_index(t, v->params[i].name) < 0)
            return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE, "variant %s has parameter '%s', "
                           "which template %s does not declare", v->name, v->params[i].name,
                           t->family);
    return mt_errf(msg, msg_size, MT_ERR_INCOMPATIBLE, "variant %s has %d parameters; template %s "
                   "declares %d", v->name, v->nparams, t->family, t->nparams);
}

/* One yes-or-no step (a gate or valid) into *ok and reason. */
static mt_status run_check(step *c, int *ok, char *reason, size_t reason_size, char *msg,
                           size_t msg_size)
{
    mt_status st = run_step(c, 0, msg, msg_size);
    if (!st) {
        *ok = c->ok;
        mt_strlcpy(reason, c->reason, reason_size);
    }
    return st;
}

mt_status gen_template_gate(gen_template *t, int q, const int *point, const gen_target *tg,
                            int *ok, char *reason, size_t reason_size, char *msg, size_t msg_size)
{
    *ok = 1;
    if (t->params[q].ref_only_if == LUA_NOREF)
        return MT_OK;
    step c = {.kind = STEP_GATE, .t = t, .point = point, .q = q, .tg = tg};
    return run_check(&c, ok, reason, reason_size, msg, msg_size);
}

int gen_template_builds_for(const gen_template *t, const gen_target *tg, char *reason,
                            size_t reason_size)
{
    for (int i = 0; i < t->narchs; i++)
        if (t->archs[i] == tg)
            return 1;
    if (t->narchs == 0)
        return 1;
    mt_buf b = {0};
    for (int i = 0; i < t->narchs; i++)
        mt_buf_printf(&b, "%s%s", i == 0 ? "needs " : i + 1 < t->narchs ? ", " : " or ",
                      t->archs[i]->arch);
    mt_strlcpy(reason, b.data ? b.data : "needs another target", reason_size);
    mt_buf_free(&b);
    return 0;
}

mt_status gen_template_valid(gen_template *t, const int *point, const gen_target *tg,
                             int gates_checked, int *ok, char *reason, size_t reason_size,
                             char *msg, size_t msg_size)
{
    *ok = gen_template_builds_for(t, tg, reason, reason_size);
    if (!*ok)
        return MT_OK;
    for (int q = 0; q < t->nparams && !gates_checked; q++) {
        mt_status st = point[q] == 0 ? MT_OK
                       : gen_template_gate(t, q, point, tg, ok, reason, reason_size, msg, msg_size);
        if (st || !*ok)
            return st;
    }
    if (t->ref_valid == LUA_NOREF)
        return MT_OK;
    step c = {.kind = STEP_VALID, .t = t, .point = point, .tg = tg};
    return run_check(&c, ok, reason, reason_size, msg, msg_size);
}

mt_status gen_template_launch(gen_template *t, const int *point, const gen_target *tg,
                              int *threads, int *smem, char *msg, size_t msg_size)
{
    step c = {.kind = STEP_LAUNCH, .t = t, .point = point, .tg = tg};
    mt_status st = run_step(&c, 0, msg, msg_size);
    *threads = c.threads;
    *smem = c.smem;
    return st;
}

mt_status gen_template_render(gen_template *t, const int *point, const char *name, char **src,
                              size_t *len, char *msg, size_t msg_size)
{
    step c = {.kind = STEP_RENDER, .t = t, .point = point, .name = name};
    mt_status st = run_step(&c, 0, msg, msg_size);
    *src = c.src;
    *len = c.len;
    return st;
}
