/*
 * Stored kernels against the current templates (see refresh.h).
 */
#include "tuner/refresh.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* What the walk needs of a stored kernel (its source stays in the file). */
typedef struct stored {
    mt_variant v;
    char template_hash[65], source_sha256[65], image_sha256[65];
    int is_ptx;
} stored;

/* Appends each kernel to an mt_buf of `stored` records. */
static int collect(const mt_db_kernel *k, void *ctx)
{
    stored s;
    s.v = k->variant;
    mt_strlcpy(s.template_hash, k->template_hash, sizeof s.template_hash);
    mt_strlcpy(s.source_sha256, k->source_sha256, sizeof s.source_sha256);
    mt_strlcpy(s.image_sha256, k->image_sha256, sizeof s.image_sha256);
    s.is_ptx = k->is_ptx;
    mt_buf_append(ctx, (const char *)&s, sizeof s);
    return 0;
}

static void say(void (*report)(const char *, void *), void *ctx, const stored *s,
                const char *fmt, ...)
{
    if (!report)
        return;
    char why[1024], line[MT_VARIANT_NAME_MAX + 1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    snprintf(line, sizeof line, "%s (%s): %s", s->v.name, s->v.arch, why);
    report(line, ctx);
}

typedef enum verdict { V_CURRENT, V_REFRESH, V_SAME_IMAGE, V_CHANGED, V_UNKNOWN } verdict;

/* Does cur, compiled now, give the stored image byte for byte? On a match
 * *src (the current source, the caller frees it) is kept for the update. */
static mt_status same_image(mt_gen *g, const stored *s, const mt_variant *cur, char **src,
                            size_t *src_len, int *same, char *msg, size_t msg_size)
{
    *same = 0;
    mt_kernel_binary *b = NULL;
    mt_status st = mt_gen_compile(g, cur, 1, &b);
    if (st && !b)
        return mt_errf(msg, msg_size, st, "%s", mt_gen_errmsg(g));
    if (b[0].status == MT_OK && b[0].is_ptx == s->is_ptx) {
        char sha[65];
        mt_sha256_hex(b[0].image, b[0].image_len, sha);
        if (!strcmp(sha, s->image_sha256) && b[0].source) {
            *src = b[0].source, *src_len = b[0].source_len;
            b[0].source = NULL;
            *same = 1;
        }
    }
    mt_kernel_binaries_free(b, 1);
    return MT_OK;
}

/* Compare one stored kernel with what g makes of it; *hash gets the
 * family's current template hash. */
static mt_status judge(mt_gen *g, const stored *s, unsigned flags, char hash[65], verdict *out,
                       char **new_src, size_t *new_len, void (*report)(const char *, void *), void *ctx,
                       char *msg, size_t msg_size)
{
    mt_status st = mt_gen_template_hash(g, s->v.family, hash);
    if (st == MT_ERR_NOT_FOUND) {
        say(report, ctx, s, "no family %s among the templates", s->v.family);
        *out = V_UNKNOWN;
        return MT_OK;
    }
    if (st)
        return mt_errf(msg, msg_size, st, "%s", mt_gen_errmsg(g));
    if (!strcmp(hash, s->template_hash)) {
        *out = V_CURRENT;
        return MT_OK;
    }
    mt_variant cur;
    st = mt_gen_resolve(g, &s->v, &cur);
    if (st == MT_ERR_NOT_FOUND || st == MT_ERR_INCOMPATIBLE || st == MT_ERR_UNSUPPORTED) {
        say(report, ctx, s, "not a variant of the current templates: %s", mt_gen_errmsg(g));
        *out = V_UNKNOWN;
        return MT_OK;
    }
    if (st)
        return mt_errf(msg, msg_size, st, "%s", mt_gen_errmsg(g));
    /* A parameter added since (with its omit_in_name value, the only one
     * resolve fills in) is no change of the kernel: compare the rest. */
    mt_variant cur_as_stored = cur;
    cur_as_stored.nparams = 0;
    for (int i = 0; i < cur.nparams; i++)
        if (mt_variant_get(&s->v, cur.params[i].name))
            cur_as_stored.params[cur_as_stored.nparams++] = cur.params[i];
    char was[4096], now[4096];
    if (mt_variant_format(&s->v, was, sizeof was) ||
        mt_variant_format(&cur_as_stored, now, sizeof now))
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "%s: variant text too long",
                       s->v.name);
    if (strcmp(was, now)) {
        say(report, ctx, s, "the current templates make another variant of that name "
            "(stored: %s; now: %s)", was, now);
        *out = V_CHANGED;
        return MT_OK;
    }
    char *src = NULL;
    size_t len = 0;
    if ((st = mt_gen_source(g, &cur, &src, &len)))
        return mt_errf(msg, msg_size, st, "%s", mt_gen_errmsg(g));
    char sha[65];
    mt_sha256_hex(src, len, sha);
    free(src);
    if (strcmp(sha, s->source_sha256)) {
        int same = 0;
        if ((flags & MT_REFRESH_COMPILE) && s->image_sha256[0] &&
            (st = same_image(g, s, &cur, new_src, new_len, &same, msg, msg_size)))
            return st;
        if (same) {
            say(report, ctx, s, "another source (sha256 %.12s, stored %.12s) that compiles to the "
                "stored image byte for byte: template hash %.12s -> %.12s", sha, s->source_sha256,
                s->template_hash, hash);
            *out = V_SAME_IMAGE;
            return MT_OK;
        }
        say(report, ctx, s, "the current templates generate another source (sha256 %.12s, "
            "stored %.12s)%s", sha, s->source_sha256,
            (flags & MT_REFRESH_COMPILE) && s->image_sha256[0] ? ", and another image" : "");
        *out = V_CHANGED;
        return MT_OK;
    }
    say(report, ctx, s, "same variant and source as the current templates make: template "
        "hash %.12s -> %.12s", s->template_hash, hash);
    *out = V_REFRESH;
    return MT_OK;
}

mt_status mt_refresh_kernels(mt_db *db, mt_gen *g, unsigned flags,
                             void (*report)(const char *line, void *ctx), void *ctx,
                             mt_refresh_stats *stats, char *msg, size_t msg_size)
{
    mt_refresh_stats none;
    if (!stats)
        stats = &none;
    memset(stats, 0, sizeof *stats);
    if (!db || !g)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "refresh: no database or generator");
    mt_status st = mt_db_refuse_damaged(db, "no kernel was refreshed");
    if (st)
        return mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(db));
    mt_buf l = {0};
    st = mt_db_foreach_kernel(db, 0, collect, &l);
    if (st)
        mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(db));
    else if (l.oom)
        st = mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "refresh: out of memory");
    const stored *all = (const stored *)(void *)l.data;
    for (size_t i = 0; i < l.len / sizeof *all && !st; i++) {
        const stored *s = &all[i];
        char hash[65];
        verdict v;
        char *src = NULL;
        size_t len = 0;
        st = judge(g, s, flags, hash, &v, &src, &len, report, ctx, msg, msg_size);
        if (!st && !(flags & MT_REFRESH_DRY_RUN)) {
            if (v == V_REFRESH)
                st = mt_db_set_kernel_template_hash(db, s->v.name, s->v.arch, s->source_sha256, hash);
            else if (v == V_SAME_IMAGE)
                st = mt_db_set_kernel_source(db, s->v.name, s->v.arch, s->image_sha256, src, len, hash);
            if (st)
                mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(db));
        }
        free(src);
        if (st)
            break;
        stats->by_image += v == V_SAME_IMAGE;
        (*(v == V_CURRENT                         ? &stats->current
           : v == V_REFRESH || v == V_SAME_IMAGE ? &stats->refreshed
           : v == V_CHANGED                       ? &stats->changed
                                                  : &stats->unknown))++;
    }
    mt_buf_free(&l);
    return st;
}
