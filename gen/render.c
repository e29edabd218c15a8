/*
 * Rendering a variant and amalgamating its source: every `#include "x"`
 * line is replaced by the file's contents (each file once), with #line
 * directives, so the source is self-contained. Also the template hash.
 * Calls: gen/template.c, common/util.h.
 */
#define _DEFAULT_SOURCE   /* realpath */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "gen/gen_internal.h"

#define MAX_INCLUDE_DEPTH 32

typedef struct amal {
    mt_gen *g;
    gen_template *t;
    mt_buf out;
    char **seen;      /* canonical paths already included, in order */
    size_t nseen;
    char msg[2048];
} amal;

/* If the line at `line` (length n) is `#include "name"`, copy name. */
static int include_line(const char *line, size_t n, char *name, size_t size)
{
    const char *p = line, *end = line + n;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p == end || *p++ != '#')
        return 0;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if ((size_t)(end - p) < 8 || strncmp(p, "include", 7) != 0)
        return 0;
    p += 7;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p == end || *p++ != '"')
        return 0;
    const char *q = memchr(p, '"', (size_t)(end - p));
    if (!q || q == p || (size_t)(q - p) >= size)
        return 0;
    memcpy(name, p, (size_t)(q - p));
    name[q - p] = '\0';
    return 1;
}

/* Canonical path of `name` seen from `dir`, then the template's folder,
 * then every template folder; *display is the path relative to the folder
 * it was found in, so that the source does not depend on where moetune is
 * installed. Only files inside a template folder count: a name that leads
 * out of them (an absolute path, "..", a link) is not found, so that a
 * template cannot put an arbitrary file of the machine into a kernel's
 * source, which databases store and exports print. */
static int resolve(amal *a, const char *dir, const char *name, char *path, char *display)
{
    const char *bases[2 + 64];
    size_t nb = 0;
    bases[nb++] = dir;
    bases[nb++] = a->t->dir;
    for (size_t i = 0; i < a->g->ndirs && nb < MT_ARRAY_LEN(bases); i++)
        bases[nb++] = a->g->dirs[i];
    for (size_t i = 0; i < nb; i++) {
        char cand[PATH_MAX];
        if (name[0] == '/')
            mt_strlcpy(cand, name, sizeof cand);
        else if ((size_t)snprintf(cand, sizeof cand, "%s/%s", bases[i], name) >= sizeof cand)
            continue;
        if (access(cand, R_OK) == 0 && realpath(cand, path)) {
            /* The template folder it lives in; its path relative to it is
             * the one the source shows. */
            for (size_t k = 1; k < nb; k++) {
                char base[PATH_MAX];
                size_t bl;
                if (realpath(bases[k], base) && (bl = strlen(base)) && !strncmp(path, base, bl) &&
                    path[bl] == '/') {
                    mt_strlcpy(display, path + bl + 1, PATH_MAX);
                    return 1;
                }
            }
        }
    }
    return 0;
}

static int already_seen(amal *a, const char *path)
{
    for (size_t i = 0; i < a->nseen; i++)
        if (strcmp(a->seen[i], path) == 0)
            return 1;
    return 0;
}

static mt_status add_seen(amal *a, const char *path)
{
    char **s = realloc(a->seen, (a->nseen + 1) * sizeof *s);
    if (!s)
        return MT_ERR_NO_MEMORY;
    a->seen = s;
    if (!(s[a->nseen] = strdup(path)))
        return MT_ERR_NO_MEMORY;
    a->nseen++;
    return MT_OK;
}

static mt_status amal_text(amal *a, const char *text, size_t len, const char *display,
                           const char *dir, int depth)
{
    if (depth > MAX_INCLUDE_DEPTH)
        return mt_errf(a->msg, sizeof a->msg, MT_ERR_TEMPLATE, "%s: includes nested deeper "
                       "than %d", display, MAX_INCLUDE_DEPTH);
    const char *p = text, *end = text + len;
    int lineno = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        lineno++;
        char name[512], path[PATH_MAX], child_display[PATH_MAX];
        if (!include_line(p, n, name, sizeof name)) {
            mt_buf_append(&a->out, p, n);
            mt_buf_append(&a->out, "\n", 1);
        } else if (!resolve(a, dir, name, path, child_display)) {
            return mt_errf(a->msg, sizeof a->msg, MT_ERR_TEMPLATE, "%s:%d: cannot find included "
                           "file \"%s\" inside the template folders (searched the including "
                           "folder and the template folders; files outside them are not "
                           "included)", display, lineno, name);
        } else if (already_seen(a, path)) {
            mt_buf_printf(&a->out, "/* \"%s\" is already included above */\n", name);
        } else {
            char *body = NULL;
            size_t blen = 0;
            mt_status st = add_seen(a, path);
            if (!st)
                st = mt_file_read(path, &body, &blen, a->msg, sizeof a->msg);
            if (st)
                return st == MT_ERR_NO_MEMORY
                           ? mt_errf(a->msg, sizeof a->msg, st, "out of memory") : st;
            char child_dir[PATH_MAX];
            mt_strlcpy(child_dir, path, sizeof child_dir);
            *strrchr(child_dir, '/') = '\0';
            mt_buf_printf(&a->out, "#line 1 \"%s\"\n", child_display);
            st = amal_text(a, body, blen, child_display, child_dir, depth + 1);
            free(body);
            if (st)
                return st;
            mt_buf_printf(&a->out, "#line %d \"%s\"\n", lineno + 1, display);
        }
        p += n + 1;
    }
    return a->out.oom ? mt_errf(a->msg, sizeof a->msg, MT_ERR_NO_MEMORY, "out of memory")
                      : MT_OK;
}

static void amal_free(amal *a)
{
    for (size_t i = 0; i < a->nseen; i++)
        free(a->seen[i]);
    free(a->seen);
    mt_buf_free(&a->out);
}

/* Angle includes NVRTC may resolve itself: the toolkit's own headers the
 * device code needs, by bare name. */
static const char *const angle_includes[] = {"stdint.h", "cuda_fp16.h", "cuda_bf16.h",
                                             "cuda_fp8.h"};

/* src as the preprocessor sees its lines: continuations joined, comments
 * gone (string and character literals kept whole, so that a "/" "*" in
 * one starts nothing). */
static char *preprocessor_lines(const char *src, size_t len)
{
    char *out = malloc(len + 1), *o = out;
    if (!out)
        return NULL;
    char quote = 0;
    for (size_t i = 0; i < len; i++) {
        const char c = src[i];
        if (c == '\\' && i + 1 < len && src[i + 1] == '\n') {   /* continuation */
            i++;
            continue;
        }
        if (quote) {
            *o++ = c;
            if (c == '\\' && i + 1 < len)
                *o++ = src[++i];
            else if (c == quote || c == '\n')
                quote = 0;
        } else if (c == '"' || c == '\'') {
            quote = c;
            *o++ = c;
        } else if (c == '/' && i + 1 < len && src[i + 1] == '/') {
            while (i + 1 < len && src[i + 1] != '\n')
                i++;
        } else if (c == '/' && i + 1 < len && src[i + 1] == '*') {
            for (i += 2; i + 1 < len && !(src[i] == '*' && src[i + 1] == '/'); i++)
                if (src[i] == '\n')
                    *o++ = '\n';   /* keep the line count */
            i++;
            *o++ = ' ';
        } else {
            *o++ = c;
        }
    }
    *o = '\0';
    return out;
}

/* What reaches NVRTC may read no file but the template folders' (inlined
 * above) and the toolkit headers of angle_includes: any other include-like
 * directive (also spelled "%:" or "??=", or naming a macro) and
 * __has_include are refused, since NVRTC would open absolute paths and put
 * what it reads into the image and its log. */
static mt_status check_directives(const char *src, size_t len, char *msg, size_t msg_size)
{
    char *text = preprocessor_lines(src, len);
    if (!text)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    mt_status st = MT_OK;
    int lineno = 0;
    for (char *line = text, *next; line && !st; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        lineno++;
        if (strstr(line, "__has_include")) {
            st = mt_errf(msg, msg_size, MT_ERR_TEMPLATE, "line %d: __has_include is not allowed "
                         "(it looks at files outside the template folders)", lineno);
            break;
        }
        const char *p = line + strspn(line, " \t");
        if (*p == '#')
            p++;
        else if (!strncmp(p, "%:", 2))
            p += 2;
        else if (!strncmp(p, "?\?=", 3))
            p += 3;
        else
            continue;
        p += strspn(p, " \t");
        static const char *const include_like[] = {"include", "include_next", "import", "embed"};
        const size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyz_");
        int include = 0, ok = 0;
        for (size_t k = 0; k < MT_ARRAY_LEN(include_like); k++)
            include |= strlen(include_like[k]) == n && !strncmp(p, include_like[k], n);
        if (!include)
            continue;
        /* Only "#include <name>" of the list, and nothing after it. */
        const char *name = p + n + strspn(p + n, " \t"), *end;
        if (n == 7 && *name == '<' && (end = strchr(name, '>')) && !end[1 + strspn(end + 1, " \t\r")])
            for (size_t k = 0; k < MT_ARRAY_LEN(angle_includes) && !ok; k++)
                ok = strlen(angle_includes[k]) == (size_t)(end - name - 1) &&
                     !strncmp(name + 1, angle_includes[k], (size_t)(end - name - 1));
        if (!ok)
            st = mt_errf(msg, msg_size, MT_ERR_TEMPLATE, "line %d: \"%.80s\": the source may "
                         "include only files of the template folders (#include \"x\") and "
                         "<stdint.h>, <cuda_fp16.h>, <cuda_bf16.h>, <cuda_fp8.h>", lineno, line);
    }
    free(text);
    return st;
}

mt_status mt_gen_source(mt_gen *g, const mt_variant *v, char **source, size_t *len)
{
    if (!g || !v || !source)
        return MT_ERR_INVALID_ARG;
    *source = NULL;
    if (len)
        *len = 0;
    gen_template *t = NULL;
    int point[MT_VARIANT_MAX_PARAMS];
    mt_status st = gen_locate(g, v, &t, point);
    if (st)
        return st;
    char msg[2048];
    char *text = NULL;
    size_t tlen = 0;
    st = gen_template_render(t, point, v->name, &text, &tlen, msg, sizeof msg);
    if (st)
        return gen_set_err(g, st, "%s (rendering %s)", msg, v->name);
    amal a = {.g = g, .t = t};
    char display[MT_VARIANT_NAME_MAX + 8];
    snprintf(display, sizeof display, "%s.cu", v->name);
    st = amal_text(&a, text, tlen, display, t->dir, 0);
    free(text);
    if (!st)
        st = check_directives(a.out.data, a.out.len, a.msg, sizeof a.msg);
    if (st) {
        gen_set_err(g, st, "template %s, variant %s: %s", t->family, v->name, a.msg);
        amal_free(&a);
        return st;
    }
    *source = a.out.data;
    if (len)
        *len = a.out.len;
    a.out.data = NULL;
    amal_free(&a);
    return MT_OK;
}

/* Every `#include "x"` written anywhere in a text (a .lua holds them inside
 * strings, so not only at line starts); hashed depth first. */
static mt_status hash_includes(amal *a, mt_sha256 *h, const char *text, size_t len,
                               const char *dir, int anywhere, int depth)
{
    if (depth > MAX_INCLUDE_DEPTH)
        return MT_OK;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        const char *q = p;
        char name[512], path[PATH_MAX], display[PATH_MAX];
        while (q < p + n) {
            const char *hash = anywhere ? memchr(q, '#', (size_t)(p + n - q)) : q;
            if (!hash)
                break;
            size_t rest = (size_t)(p + n - hash);
            if (include_line(hash, rest, name, sizeof name) && resolve(a, dir, name, path, display) &&
                !already_seen(a, path)) {
                char *body = NULL;
                size_t blen = 0;
                mt_status st = add_seen(a, path);
                if (!st)
                    st = mt_file_read(path, &body, &blen, a->msg, sizeof a->msg);
                if (st)
                    return st;
                mt_sha256_update(h, display, strlen(display) + 1);
                mt_sha256_update(h, body, blen);
                char child_dir[PATH_MAX];
                mt_strlcpy(child_dir, path, sizeof child_dir);
                *strrchr(child_dir, '/') = '\0';
                st = hash_includes(a, h, body, blen, child_dir, 0, depth + 1);
                free(body);
                if (st)
                    return st;
            }
            if (!anywhere)
                break;
            q = hash + 1;
        }
        p += n + 1;
    }
    return MT_OK;
}

mt_status mt_gen_template_hash(mt_gen *g, const char *family, char hex[65])
{
    if (!g || !family || !hex)
        return MT_ERR_INVALID_ARG;
    gen_template *t = gen_find_template(g, family);
    if (!t)
        return gen_set_err(g, MT_ERR_NOT_FOUND, "no template family '%s'", family);
    char *text = NULL;
    size_t len = 0;
    char msg[1024];
    mt_status st = mt_file_read(t->path, &text, &len, msg, sizeof msg);
    if (st)
        return gen_set_err(g, st, "%s", msg);
    amal a = {.g = g, .t = t};
    mt_sha256 h;
    mt_sha256_init(&h);
    mt_sha256_update(&h, text, len);
    st = hash_includes(&a, &h, text, len, t->dir, 1, 0);
    free(text);
    if (st) {
        gen_set_err(g, st, "template %s: %s", family, a.msg);
        amal_free(&a);
        return st;
    }
    uint8_t d[32];
    mt_sha256_final(&h, d);
    mt_hex(d, 32, hex);
    amal_free(&a);
    return MT_OK;
}
