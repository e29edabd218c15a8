/*
 * Build-time tool: write the C file of libmoetune's built-in default
 * kernels (see runtime/rt_defaults.h).
 *
 *   mt_embed_defaults TEMPLATE_DIR OUT.c
 *
 * Loads the templates of TEMPLATE_DIR only (no user folders, no cache),
 * enumerates every family's default variants for MT_RT_DEFAULTS_ARCH and
 * renders their sources. Output is deterministic, so an unchanged template
 * folder gives a byte-identical file.
 *
 * May call: mt_gen, common/util.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "moetune/gen.h"
#include "runtime/rt_defaults.h"

/* Emit s as a C string literal split at its newlines. */
static void emit_string(mt_buf *b, const char *s, size_t n)
{
    mt_buf_puts(b, "\n    \"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') {
            mt_buf_puts(b, i + 1 < n ? "\\n\"\n    \"" : "\\n");
        } else if (c == '\\' || c == '"') {
            mt_buf_printf(b, "\\%c", c);
        } else if (c == '?') {
            mt_buf_puts(b, "\\?");   /* no trigraphs */
        } else if (c < 32 || c > 126) {
            mt_buf_printf(b, "\\%03o", c);
        } else {
            char ch = (char)c;
            mt_buf_append(b, &ch, 1);
        }
    }
    mt_buf_puts(b, "\"");
}

typedef struct fam {
    char name[48];
    char hash[65];
    char *first;          /* source of its first variant */
    size_t prefix;        /* common prefix length, cut at a line end */
} fam;

/* A part: text after a family's prefix and a variant's head (its first
 * line there, the #line naming it) that several of its variants share (a
 * pipeline's own header, inlined), from its first member. */
typedef struct part {
    size_t family;
    const char *first;    /* the first member's source after the family prefix */
    size_t len;           /* shared by every member, cut at a line end */
} part;

/* Shared text shorter than this is left in the suffixes. */
#define MIN_PART 1024

/* Common prefix of a and b (lengths na, nb), cut back to a line end. */
static size_t common_lines(const char *a, size_t na, const char *b, size_t nb)
{
    size_t k = 0;
    while (k < na && k < nb && a[k] == b[k])
        k++;
    while (k > 0 && a[k - 1] != '\n')
        k--;
    return k;
}

/* Splits each variant's source past its family prefix (pre[i] bytes) into
 * its head (the first line there, the #line naming it), a part and its
 * tail. A variant joins the part of its family whose first member shares
 * the most lines with it past the head (at least MIN_PART bytes; the part
 * then shrinks to what every member shares), or starts one; parts of a
 * single member are dropped (their text stays in the tail). Fills
 * head_len, part_of (0: none) and parts[1..], returns the number of parts
 * counting the empty part 0. parts has room for nv + 1. */
static size_t find_parts(size_t nv, char *const *src, const size_t *len, const size_t *pre,
                         const size_t *fam_of, size_t *head_len, size_t *part_of, part *parts)
{
    size_t np = 1;
    for (size_t i = 0; i < nv; i++) {
        const char *nl = memchr(src[i] + pre[i], '\n', len[i] - pre[i]);
        head_len[i] = nl ? (size_t)(nl - (src[i] + pre[i])) + 1 : len[i] - pre[i];
        const char *rest = src[i] + pre[i] + head_len[i];
        const size_t nrest = len[i] - pre[i] - head_len[i];
        size_t best = 0, best_len = 0;
        for (size_t j = 1; j < np; j++) {
            if (parts[j].family != fam_of[i])
                continue;
            const size_t k = common_lines(parts[j].first, parts[j].len, rest, nrest);
            if (k >= MIN_PART && k > best_len)
                best = j, best_len = k;
        }
        if (!best) {
            best = np++;
            parts[best] = (part){fam_of[i], rest, nrest};
        } else {
            parts[best].len = best_len;   /* <= its length: a common prefix */
        }
        part_of[i] = best;
    }
    /* Keep the parts of two members or more, in order. */
    size_t kept = 1;
    for (size_t j = 1; j < np; j++) {
        size_t members = 0;
        for (size_t i = 0; i < nv; i++)
            members += part_of[i] == j;
        const size_t to = members >= 2 ? kept++ : 0;
        for (size_t i = 0; i < nv; i++)
            if (part_of[i] == j)
                part_of[i] = to;
        if (to)
            parts[to] = parts[j];
    }
    return kept;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s TEMPLATE_DIR OUT.c\n", argv[0]);
        return 2;
    }
    const char *dirs[] = {argv[1]};
    mt_gen_config cfg = {.template_dirs = dirs, .ntemplate_dirs = 1, .no_builtin = 1,
                         .no_cache = 1};
    mt_gen *g = NULL;
    mt_variant *v = NULL;
    size_t nv = 0;
    char **src = NULL;
    size_t *len = NULL;
    fam *fams = NULL;
    size_t nf = 0, *fam_of = NULL, *pre = NULL, *head_len = NULL, *part_of = NULL;
    part *parts = NULL;
    mt_buf out = {0};
    int rc = 1;
    if (mt_gen_open(&cfg, &g)) {
        fprintf(stderr, "embed_defaults: %s\n", mt_gen_errmsg(g));
        goto done;
    }
    nf = mt_gen_family_count(g);
    fams = calloc(nf ? nf : 1, sizeof *fams);
    mt_gen_filter f = {.arch = MT_RT_DEFAULTS_ARCH, .defaults_only = 1};
    if (!fams || mt_gen_enumerate(g, &f, &v, &nv, NULL)) {
        fprintf(stderr, "embed_defaults: enumerating: %s\n", mt_gen_errmsg(g));
        goto done;
    }
    const size_t n = nv ? nv : 1;
    src = calloc(n, sizeof *src);
    len = calloc(n, sizeof *len);
    fam_of = calloc(n, sizeof *fam_of);
    pre = calloc(n, sizeof *pre);
    head_len = calloc(n, sizeof *head_len);
    part_of = calloc(n, sizeof *part_of);
    parts = calloc(nv + 1, sizeof *parts);
    if (!src || !len || !fam_of || !pre || !head_len || !part_of || !parts)
        goto done;
    mt_sha256 all;
    mt_sha256_init(&all);
    for (size_t i = 0; i < nf; i++) {
        mt_strlcpy(fams[i].name, mt_gen_family_name(g, i), sizeof fams[i].name);
        if (mt_gen_template_hash(g, fams[i].name, fams[i].hash)) {
            fprintf(stderr, "embed_defaults: %s\n", mt_gen_errmsg(g));
            goto done;
        }
        char line[160];
        snprintf(line, sizeof line, "%s=%s\n", fams[i].name, fams[i].hash);
        mt_sha256_update(&all, line, strlen(line));
    }
    uint8_t digest[32];
    char all_hex[65];
    mt_sha256_final(&all, digest);
    mt_hex(digest, 32, all_hex);

    for (size_t i = 0; i < nv; i++) {
        if (mt_gen_source(g, &v[i], &src[i], &len[i])) {
            fprintf(stderr, "embed_defaults: %s: %s\n", v[i].name, mt_gen_errmsg(g));
            goto done;
        }
        size_t fi = 0;
        while (fi < nf && strcmp(fams[fi].name, v[i].family))
            fi++;
        fam_of[i] = fi;
        fam *fm = &fams[fi];
        if (!fm->first) {
            fm->first = src[i];
            fm->prefix = len[i];
        } else {
            size_t k = 0;
            while (k < fm->prefix && k < len[i] && fm->first[k] == src[i][k])
                k++;
            fm->prefix = k;
        }
    }
    for (size_t i = 0; i < nf; i++)   /* a line boundary keeps the halves readable */
        while (fams[i].prefix > 0 && fams[i].first[fams[i].prefix - 1] != '\n')
            fams[i].prefix--;

    for (size_t i = 0; i < nv; i++)
        pre[i] = fams[fam_of[i]].prefix;
    const size_t np = find_parts(nv, src, len, pre, fam_of, head_len, part_of, parts);

    mt_buf_puts(&out, "/* Generated by runtime/tools/embed_defaults.c: do not edit. */\n"
                      "#include \"runtime/rt_defaults.h\"\n\n");
    mt_buf_printf(&out, "const char mt_rt_templates_hash[65] = \"%s\";\n\n", all_hex);
    mt_buf_puts(&out, "const mt_rt_default_family mt_rt_default_families[] = {\n");
    for (size_t i = 0; i < nf; i++) {
        mt_buf_printf(&out, "  {\"%s\", \"%s\",", fams[i].name, fams[i].hash);
        emit_string(&out, fams[i].first ? fams[i].first : "", fams[i].prefix);
        mt_buf_puts(&out, "},\n");
    }
    mt_buf_printf(&out, "};\nconst size_t mt_rt_default_family_count = %zu;\n\n", nf);
    mt_buf_puts(&out, "const char *const mt_rt_default_parts[] = {");
    for (size_t j = 0; j < np; j++) {
        emit_string(&out, j ? parts[j].first : "", j ? parts[j].len : 0);
        mt_buf_puts(&out, ",");
    }
    mt_buf_printf(&out, "\n};\nconst size_t mt_rt_default_part_count = %zu;\n\n", np);
    mt_buf_puts(&out, "const mt_rt_default_variant mt_rt_default_variants[] = {\n");
    for (size_t i = 0; i < nv; i++) {
        char text[4096];
        if (mt_variant_format(&v[i], text, sizeof text)) {
            fprintf(stderr, "embed_defaults: %s: variant text too long\n", v[i].name);
            goto done;
        }
        mt_buf_puts(&out, "  {");
        emit_string(&out, text, strlen(text));
        const size_t tail = pre[i] + head_len[i] + (part_of[i] ? parts[part_of[i]].len : 0);
        mt_buf_printf(&out, ", %zu,", fam_of[i]);
        emit_string(&out, src[i] + pre[i], head_len[i]);
        mt_buf_printf(&out, ", %zu,", part_of[i]);
        emit_string(&out, src[i] + tail, len[i] - tail);
        mt_buf_puts(&out, "},\n");
    }
    mt_buf_printf(&out, "};\nconst size_t mt_rt_default_variant_count = %zu;\n", nv);
    if (out.oom) {
        fprintf(stderr, "embed_defaults: out of memory\n");
        goto done;
    }
    char msg[512];
    if (mt_file_write_atomic(argv[2], out.data, out.len, msg, sizeof msg)) {
        fprintf(stderr, "embed_defaults: %s\n", msg);
        goto done;
    }
    rc = 0;
done:
    for (size_t i = 0; src && i < nv; i++)
        free(src[i]);
    free(src);
    free(len);
    free(fams);
    free(fam_of);
    free(pre);
    free(head_len);
    free(part_of);
    free(parts);
    free(v);
    mt_buf_free(&out);
    mt_gen_close(g);
    return rc;
}
