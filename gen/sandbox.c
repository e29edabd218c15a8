/*
 * The sandboxed Lua state a template runs in: only string/math/table and a
 * few base functions, the `mt` helper library, a memory cap (custom
 * allocator) and an instruction budget (count hook). Every call into Lua
 * goes through gen_lua_call: protected, with a traceback.
 * Calls: Lua C API, common/util.h.
 */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "gen/gen_internal.h"

#define HOOK_STEP 1000   /* instructions between budget checks */
#define ALLOC_BYTES_PER_STEP 64   /* bytes allocated that count as one instruction */

static void *sandbox_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    gen_lua *s = ud;
    if (nsize == 0) {
        if (ptr)
            s->used -= osize;
        free(ptr);
        return NULL;
    }
    size_t old = ptr ? osize : 0;
    /* Lua requires shrinking to succeed, so only growth is refused; once the
     * cap is hit, all growth fails until the call ends, so that a pcall in
     * the template cannot catch the error and try again forever. */
    if (nsize > old && (s->mem_hit || s->used - old + nsize > s->limit)) {
        s->mem_hit = 1;
        return NULL;
    }
    void *p = realloc(ptr, nsize);
    if (p) {
        s->used = s->used - old + nsize;
        /* A string function works in C, where the count hook never fires,
         * for time in proportion to what it allocates: charged to the
         * budget, so that a loop of s:upper() on megabytes ends too (a
         * 4 MiB one ran about 9 ms a call, a day to the budget). */
        if (nsize > old)
            s->executed += (long)((nsize - old) / ALLOC_BYTES_PER_STEP);
    }
    return p;
}

static void budget_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    gen_lua *s;
    lua_getallocf(L, (void **)&s);
    s->executed += HOOK_STEP;
    if (s->executed > s->budget) {
        /* Fire on every instruction from now on, so a pcall in the template
         * cannot swallow the error and keep going. */
        if (!s->budget_hit)
            lua_sethook(L, budget_hook, LUA_MASKCOUNT, 1);
        s->budget_hit = 1;
        luaL_error(L, "template %s exceeded its instruction budget (%I instructions)", s->family,
                   (LUAI_UACINT)s->budget);
    }
}

/* mt.subst(text, values): ${NAME} -> values[NAME]. */
static int l_subst(lua_State *L)
{
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    luaL_checktype(L, 2, LUA_TTABLE);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *open = strstr(p, "${");
        if (!open || open >= end) {
            luaL_addlstring(&b, p, (size_t)(end - p));
            break;
        }
        luaL_addlstring(&b, p, (size_t)(open - p));
        const char *close = strchr(open + 2, '}');
        if (!close)
            return luaL_error(L, "mt.subst: unterminated placeholder '${'");
        char key[64];
        size_t klen = (size_t)(close - open - 2);
        if (klen == 0 || klen >= sizeof key)
            return luaL_error(L, "mt.subst: bad placeholder name of length %d", (int)klen);
        memcpy(key, open + 2, klen);
        key[klen] = '\0';
        lua_getfield(L, 2, key);
        if (lua_isinteger(L, -1)) {
            lua_pushfstring(L, "%I", (LUAI_UACINT)lua_tointeger(L, -1));
        } else if (lua_type(L, -1) == LUA_TNUMBER) {
            lua_Number x = lua_tonumber(L, -1);
            lua_Integer i;
            if (!lua_numbertointeger(x, &i) || (lua_Number)i != x)
                return luaL_error(L, "mt.subst: value of ${%s} is %f, not an integer", key, x);
            lua_pushfstring(L, "%I", (LUAI_UACINT)i);
        } else if (lua_type(L, -1) == LUA_TSTRING) {
            lua_pushvalue(L, -1);
        } else {
            return luaL_error(L, "mt.subst: no value (or a %s) for placeholder ${%s}",
                              luaL_typename(L, -1), key);
        }
        /* The buffer may sit on the stack: move the text under our two values. */
        lua_remove(L, -2);
        luaL_addvalue(&b);
        p = close + 1;
    }
    luaL_pushresult(&b);
    return 1;
}

static int l_ceil_div(lua_State *L)
{
    lua_Integer a = luaL_checkinteger(L, 1), d = luaL_checkinteger(L, 2);
    if (d <= 0)
        return luaL_error(L, "mt.ceil_div: divisor %I must be positive", (LUAI_UACINT)d);
    if (a < 0)
        return luaL_error(L, "mt.ceil_div: dividend %I must not be negative", (LUAI_UACINT)a);
    lua_pushinteger(L, a / d + (a % d != 0));
    return 1;
}

/* setmetatable without finalizers: a __gc runs where the budget does not
 * reach (a collection between calls, lua_close), so a looping one hung
 * the generator. Lua 5.4 marks an object for finalization only when its
 * metatable has __gc as it is set, so refusing it here is enough. */
static int l_setmetatable(lua_State *L)
{
    if (lua_type(L, 2) == LUA_TTABLE) {
        lua_pushliteral(L, "__gc");
        const int gc = lua_rawget(L, 2) != LUA_TNIL;
        lua_pop(L, 1);
        if (gc)
            return luaL_error(L, "setmetatable: a metatable with __gc (a finalizer) is not "
                                 "allowed in a template");
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

static const char *const base_allowed[] = {
    "pairs", "ipairs", "select", "type", "tostring", "tonumber", "error", "assert",
    "pcall", "next", "rawget", "rawequal", "setmetatable", "getmetatable", "_VERSION",
    "string", "math", "table", "mt",
};

static int allowed_global(const char *name)
{
    for (size_t i = 0; i < MT_ARRAY_LEN(base_allowed); i++)
        if (strcmp(name, base_allowed[i]) == 0)
            return 1;
    return 0;
}

static void remove_field(lua_State *L, const char *lib, const char *field)
{
    if (lua_getglobal(L, lib) == LUA_TTABLE) {
        lua_pushnil(L);
        lua_setfield(L, -2, field);
    }
    lua_pop(L, 1);
}

/* Runs protected: opening libraries can run out of memory. */
static int sandbox_setup(lua_State *L)
{
    luaL_requiref(L, LUA_GNAME, luaopen_base, 1);
    luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
    luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
    luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
    lua_pop(L, 4);
    lua_getglobal(L, "setmetatable");
    lua_pushcclosure(L, l_setmetatable, 1);
    lua_setglobal(L, "setmetatable");
    static const luaL_Reg mtlib[] = {{"subst", l_subst}, {"ceil_div", l_ceil_div}, {NULL, NULL}};
    luaL_newlib(L, mtlib);
    lua_setglobal(L, "mt");
    /* Whitelist the globals: collect the names to drop, then drop them
     * (clearing fields during `next` is allowed, but this is clearer). */
    lua_pushglobaltable(L);
    lua_newtable(L);
    int ndrop = 0;
    lua_pushnil(L);
    while (lua_next(L, -3)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING || !allowed_global(lua_tostring(L, -1))) {
            lua_pushvalue(L, -1);
            lua_rawseti(L, -3, ++ndrop);
        }
    }
    for (int i = 1; i <= ndrop; i++) {
        lua_rawgeti(L, -1, i);
        lua_pushnil(L);
        lua_rawset(L, -4);
    }
    lua_pop(L, 2);
    /* string.dump exposes bytecode; math.random is seeded per state, and a
     * rendered kernel must be a function of its point alone. The pattern
     * functions match in C, where the instruction budget never fires: a
     * pattern with many quantifiers backtracks for hours (a 30-byte subject
     * and 30 "a*" went past a minute), so templates do without them
     * (mt.subst and string.format build the source). */
    static const char *const matchers[] = {"find", "match", "gmatch", "gsub"};
    for (size_t i = 0; i < MT_ARRAY_LEN(matchers); i++)
        remove_field(L, LUA_STRLIBNAME, matchers[i]);
    remove_field(L, LUA_STRLIBNAME, "dump");
    remove_field(L, LUA_MATHLIBNAME, "random");
    remove_field(L, LUA_MATHLIBNAME, "randomseed");
    return 0;
}

mt_status gen_lua_open(gen_lua **out, const char *family, long budget, size_t limit, char *msg,
                       size_t msg_size)
{
    *out = NULL;
    gen_lua *s = calloc(1, sizeof *s);
    if (!s)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    s->limit = limit;
    s->budget = budget;
    mt_strlcpy(s->family, family, sizeof s->family);
    s->L = lua_newstate(sandbox_alloc, s);
    if (!s->L) {
        free(s);
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "cannot create a Lua state");
    }
    lua_pushcfunction(s->L, sandbox_setup);
    if (lua_pcall(s->L, 0, 0, 0) != LUA_OK) {
        mt_status st = mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "cannot set up the Lua sandbox: %s",
                               lua_tostring(s->L, -1));
        gen_lua_close(s);
        return st;
    }
    *out = s;
    return MT_OK;
}

void gen_lua_close(gen_lua *s)
{
    if (!s)
        return;
    if (s->L)
        lua_close(s->L);
    free(s);
}

static int traceback_handler(lua_State *L)
{
    const char *m = lua_tostring(L, 1);
    if (!m)
        m = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    luaL_traceback(L, L, m, 1);
    return 1;
}

mt_status gen_lua_call(gen_lua *s, int nargs, int nresults, char *msg, size_t msg_size)
{
    lua_State *L = s->L;
    int base = lua_gettop(L) - nargs;   /* the function's slot */
    lua_pushcfunction(L, traceback_handler);
    lua_insert(L, base);
    s->executed = 0;
    s->mem_hit = s->budget_hit = 0;
    lua_sethook(L, budget_hook, LUA_MASKCOUNT, HOOK_STEP);
    int rc = lua_pcall(L, nargs, nresults, base);
    lua_sethook(L, NULL, 0, 0);
    mt_status st = MT_OK;
    if (rc != LUA_OK) {
        const char *m = lua_tostring(L, -1);
        /* A budget error's own message says so, with the template's line. */
        if (s->mem_hit && !s->budget_hit)
            st = mt_errf(msg, msg_size, MT_ERR_TEMPLATE,
                         "template %s exceeded its memory limit (%zu MiB)%s%s", s->family,
                         s->limit >> 20, m ? ": " : "", m ? m : "");
        else if (rc == LUA_ERRMEM)
            st = mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "template %s: out of memory",
                         s->family);
        else if (s->budget_hit)
            st = mt_errf(msg, msg_size, MT_ERR_TEMPLATE, "%s", m ? m : "");
        else
            st = mt_errf(msg, msg_size, MT_ERR_TEMPLATE, "template %s: %s", s->family,
                         m ? m : "(no message)");
        lua_settop(L, base - 1);
        /* Give the garbage of a failed call back before the next one. */
        lua_gc(L, LUA_GCCOLLECT);
        return st;
    }
    lua_remove(L, base);
    return MT_OK;
}

mt_status gen_lua_run_file(gen_lua *s, const char *path, const char *text, size_t len, char *msg,
                           size_t msg_size)
{
    char chunkname[PATH_MAX + 2];
    snprintf(chunkname, sizeof chunkname, "@%s", path);
    /* "t": text only; precompiled bytecode can break the VM's invariants. */
    int rc = luaL_loadbufferx(s->L, text, len, chunkname, "t");
    if (rc != LUA_OK) {
        mt_status st = mt_errf(msg, msg_size, MT_ERR_TEMPLATE, "template %s: %s", s->family,
                               lua_tostring(s->L, -1));
        lua_pop(s->L, 1);
        return st;
    }
    return gen_lua_call(s, 0, 1, msg, msg_size);
}
