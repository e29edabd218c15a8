/*
 * Stored kernels against the current templates (see refresh.h).
 */
#include "tuner/refresh.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* What the walk needs of a stored kernel (its source stays in the file). */
typedef struct stored {
    mt_variant v;
    char template_hash[65], source_sha256[65], image_sha256[65];
} stored;

/* Appends each kernel to an mt_buf of `stored` records. */
static int collect(const mt_db_kernel *k, void *ctx)
{
    stored s;
    s.v = k->variant;
    mt_strlcpy(s.template_hash, k->template_hash, sizeof s.template_hash);
    mt_strlcpy(s.source_sha256, k->source_sha256, sizeof s.source_sha256);
    mt_strlcpy(s.image_sha256, k->image_sha256, sizeof s.image_sha256);
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

typedef enum verdict { V_CURRENT, V_REFRESH, V_SAME_CODE, V_CHANGED, V_UNKNOWN } verdict;

/* Read a little-endian field of an ELF64 image (bounds checked by the caller). */
static uint64_t le(const uint8_t *p, int n)
{
    uint64_t x = 0;
    for (int i = n - 1; i >= 0; i--)
        x = x << 8 | p[i];
    return x;
}

/* SHA-256 of what an image runs: for a cubin (ELF64), its header's flags
 * (the target) and every section but those that NVRTC's -lineinfo adds for
 * the tools (.debug_* line tables, .nv_debug_* line maps and PTX text, and
 * their relocations, none of them loaded: no SHF_ALLOC), each by its name,
 * every field of its header but the name's index and the file offset (so
 * its size too, which for .nv.shared.* is the static shared memory, before
 * its bytes), and its bytes; so that an edit that only moves source lines
 * leaves it alone. For PTX, or a cubin this cannot read, the whole image. */
static void code_sha256(const uint8_t *img, size_t len, int is_ptx, char hex[65])
{
    enum { SHT_NOBITS = 8, SHF_ALLOC = 2 };
    mt_buf b = {0};
    const int elf = !is_ptx && len >= 64 && !memcmp(img, "\177ELF", 4) && img[4] == 2 && img[5] == 1;
    const uint64_t shoff = elf ? le(img + 0x28, 8) : 0;
    const uint64_t shentsize = elf ? le(img + 0x3a, 2) : 0, shnum = elf ? le(img + 0x3c, 2) : 0,
                   shstrndx = elf ? le(img + 0x3e, 2) : 0;
    int ok = elf && shentsize >= 64 && shstrndx < shnum && shoff <= len && shnum <= (len - shoff) / shentsize;
    const uint8_t *strs = NULL;
    uint64_t strs_len = 0;
    if (ok) {
        const uint8_t *h = img + shoff + shstrndx * shentsize;
        const uint64_t at = le(h + 0x18, 8);
        strs_len = le(h + 0x20, 8);
        ok = at <= len && strs_len <= len - at;
        if (ok)
            strs = img + at;
    }
    if (ok)
        mt_buf_append(&b, (const char *)img + 0x30, 4);   /* e_flags */
    for (uint64_t i = 0; ok && i < shnum; i++) {
        const uint8_t *h = img + shoff + i * shentsize;
        const uint64_t name = le(h, 4), type = le(h + 4, 4), flags = le(h + 8, 8), off = le(h + 0x18, 8),
                       size = le(h + 0x20, 8);
        const char *nm = name < strs_len ? (const char *)strs + name : NULL;
        if (!nm || !memchr(nm, 0, strs_len - name) ||
            (type != SHT_NOBITS && (off > len || size > len - off))) {
            ok = 0;
            break;
        }
        const char *bare = strncmp(nm, ".rela", 5) ? nm : nm + 5;
        if (!(flags & SHF_ALLOC) && (!strncmp(bare, ".debug_", 7) || !strncmp(bare, ".nv_debug_", 10)))
            continue;
        mt_buf_append(&b, nm, strlen(nm) + 1);
        mt_buf_append(&b, (const char *)h + 4, 0x14);      /* type, flags, addr */
        mt_buf_append(&b, (const char *)h + 0x20, 0x20);   /* size, link, info, addralign, entsize */
        if (type != SHT_NOBITS)
            mt_buf_append(&b, (const char *)img + off, size);
    }
    if (ok && !b.oom)
        mt_sha256_hex(b.data, b.len, hex);
    else
        mt_sha256_hex(img, len, hex);
    mt_buf_free(&b);
}

/* Compile cur; does it run the same code as the stored image? On a match
 * *out holds the new binary (source and image from the current templates),
 * for the caller to store and free; else `other` says how it differs. */
static mt_status same_code(mt_db *db, mt_gen *g, const stored *s, const mt_variant *cur,
                           mt_kernel_binary **out, int *same, char other[300], char *msg, size_t msg_size)
{
    *same = 0;
    *out = NULL;
    snprintf(other, 300, "other code");
    mt_db_kernel k;
    mt_status st = mt_db_get_kernel(db, s->v.name, s->v.arch, &k);
    if (st)
        return mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(db));
    mt_kernel_binary *b = NULL;
    st = mt_gen_compile(g, cur, 1, &b);
    if (st && !b) {
        mt_db_kernel_free(&k);
        return mt_errf(msg, msg_size, st, "%s", mt_gen_errmsg(g));
    }
    if (b[0].status != MT_OK) {
        const char *log = b[0].log && b[0].log[0] ? b[0].log : mt_gen_errmsg(g);
        snprintf(other, 300, "it does not compile here: %.*s", (int)strcspn(log, "\n"), log);
    } else if (k.image && b[0].is_ptx == k.is_ptx) {
        char was[65], now[65];
        code_sha256(k.image, k.image_len, k.is_ptx, was);
        code_sha256(b[0].image, b[0].image_len, b[0].is_ptx, now);
        *same = !strcmp(was, now);
    }
    mt_db_kernel_free(&k);
    if (*same)
        *out = b;
    else
        mt_kernel_binaries_free(b, 1);
    return MT_OK;
}

/* Compare one stored kernel with what g makes of it; *hash gets the
 * family's current template hash. */
static mt_status judge(mt_db *db, mt_gen *g, const stored *s, unsigned flags, char hash[65],
                       verdict *out, mt_kernel_binary **rebuilt, void (*report)(const char *, void *),
                       void *ctx, char *msg, size_t msg_size)
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
        char other[300] = "";
        if ((flags & MT_REFRESH_COMPILE) && s->image_sha256[0] &&
            (st = same_code(db, g, s, &cur, rebuilt, &same, other, msg, msg_size)))
            return st;
        if (same) {
            say(report, ctx, s, "another source (sha256 %.12s, stored %.12s) that compiles to the "
                "same code as the stored image (line tables aside): template hash %.12s -> %.12s",
                sha, s->source_sha256, s->template_hash, hash);
            *out = V_SAME_CODE;
            return MT_OK;
        }
        say(report, ctx, s, "the current templates generate another source (sha256 %.12s, "
            "stored %.12s)%s%s", sha, s->source_sha256, other[0] ? ", and " : "", other);
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
    if (!st)
        st = mt_db_refuse_damaged_kernels(db, "no kernel was refreshed");
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
        verdict v = V_UNKNOWN;
        mt_kernel_binary *rebuilt = NULL;
        st = judge(db, g, s, flags, hash, &v, &rebuilt, report, ctx, msg, msg_size);
        if (!st && !(flags & MT_REFRESH_DRY_RUN)) {
            if (v == V_REFRESH) {
                st = mt_db_set_kernel_template_hash(db, s->v.name, s->v.arch, s->source_sha256, hash);
            } else if (v == V_SAME_CODE) {
                mt_db_kernel k = {.variant = rebuilt->variant, .source = rebuilt->source,
                                  .source_len = rebuilt->source_len, .image = rebuilt->image,
                                  .image_len = rebuilt->image_len, .is_ptx = rebuilt->is_ptx};
                mt_strlcpy(k.template_hash, hash, sizeof k.template_hash);
                st = mt_db_put_kernel(db, &k);
            }
            if (st)
                mt_errf(msg, msg_size, st, "%s", mt_db_errmsg(db));
        }
        if (rebuilt)
            mt_kernel_binaries_free(rebuilt, 1);
        if (st)
            break;
        stats->same_code += v == V_SAME_CODE;
        (*(v == V_CURRENT                        ? &stats->current
           : v == V_REFRESH || v == V_SAME_CODE ? &stats->refreshed
           : v == V_CHANGED                      ? &stats->changed
                                                 : &stats->unknown))++;
    }
    mt_buf_free(&l);
    return st;
}
