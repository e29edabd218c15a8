/*
 * Strict bounded JSON reader, escaping writer and base64 (see json.h).
 * Recursion in the reader is capped by limits.max_depth; every size is
 * checked before it is used. May call only common/util.
 */
#include "common/json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mt_json {
    mt_json_type type;
    int b;
    int is_int;
    int64_t i;
    double num;
    char *s;            /* string contents, NUL-terminated */
    size_t slen;
    mt_json **items;    /* array elements or object values */
    mt_json **keys;     /* object member names (string nodes) */
    size_t n, cap;
};

typedef struct parser {
    const char *start, *p, *end;
    mt_json_limits lim;
    int depth;
    char *msg;
    size_t msg_size;
    mt_status st;
} parser;

static mt_json *perr(parser *ps, const char *at, const char *fmt, ...) MT_PRINTF(3, 4);
static mt_json *perr(parser *ps, const char *at, const char *fmt, ...)
{
    if (ps->st == MT_OK) {
        char what[200];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        ps->st = MT_ERR_INVALID_ARG;
        mt_errf(ps->msg, ps->msg_size, MT_ERR_INVALID_ARG, "JSON error at byte %zu: %s",
                (size_t)(at - ps->start), what);
    }
    return NULL;
}

static mt_json *oom(parser *ps)
{
    if (ps->st == MT_OK) {
        ps->st = MT_ERR_NO_MEMORY;
        mt_errf(ps->msg, ps->msg_size, MT_ERR_NO_MEMORY, "out of memory reading JSON at byte %zu",
                (size_t)(ps->p - ps->start));
    }
    return NULL;
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 when invalid. */
static size_t utf8_seq(const unsigned char *p, size_t avail)
{
    unsigned c = p[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0;
        if (c == 0xED)
            hi = 0x9F;   /* no encoded surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90;
        if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (avail < n)
        return 0;
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t k = 2; k < n; k++)
        if (p[k] < 0x80 || p[k] > 0xBF)
            return 0;
    return n;
}

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static mt_json *new_node(parser *ps, mt_json_type t)
{
    mt_json *v = calloc(1, sizeof *v);
    if (!v)
        return oom(ps);
    v->type = t;
    return v;
}

static int hex4(const char *p, unsigned *out)
{
    unsigned x = 0;
    for (int k = 0; k < 4; k++) {
        char c = p[k];
        x <<= 4;
        if (c >= '0' && c <= '9')
            x |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            x |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            x |= (unsigned)(c - 'A' + 10);
        else
            return 0;
    }
    *out = x;
    return 1;
}

static void put_utf8(mt_buf *b, unsigned cp)
{
    char o[4];
    size_t n;
    if (cp < 0x80) {
        o[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        o[0] = (char)(0xF0 | (cp >> 18));
        o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    mt_buf_append(b, o, n);
}

/* ps->p is at the opening quote. */
static mt_json *parse_string(parser *ps)
{
    const char *open = ps->p++;
    mt_buf b = {0};
    for (;;) {
        if (ps->p >= ps->end) {
            mt_buf_free(&b);
            return perr(ps, open, "unterminated string");
        }
        if (b.len > ps->lim.max_string) {
            mt_buf_free(&b);
            return perr(ps, open, "string longer than the limit of %zu bytes", ps->lim.max_string);
        }
        unsigned char c = (unsigned char)*ps->p;
        if (c == '"') {
            ps->p++;
            break;
        }
        if (c < 0x20) {
            mt_buf_free(&b);
            return perr(ps, ps->p, "control character 0x%02x in a string", c);
        }
        if (c == '\\') {
            if (ps->end - ps->p < 2) {
                mt_buf_free(&b);
                return perr(ps, ps->p, "unterminated escape");
            }
            char e = ps->p[1];
            const char *simple = strchr("\"\\/bfnrt", e);
            if (e && simple) {
                static const char repl[] = "\"\\/\b\f\n\r\t";
                mt_buf_append(&b, &repl[simple - "\"\\/bfnrt"], 1);
                ps->p += 2;
                continue;
            }
            if (e != 'u') {
                mt_buf_free(&b);
                return perr(ps, ps->p, "bad escape '\\%c'", e >= 0x20 && e < 0x7f ? e : '?');
            }
            unsigned cp;
            if (ps->end - ps->p < 6 || !hex4(ps->p + 2, &cp)) {
                mt_buf_free(&b);
                return perr(ps, ps->p, "bad \\u escape");
            }
            const char *esc = ps->p;
            ps->p += 6;
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
                mt_buf_free(&b);
                return perr(ps, esc, "lone low surrogate");
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u' ||
                    !hex4(ps->p + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                    mt_buf_free(&b);
                    return perr(ps, esc, "high surrogate without a low surrogate");
                }
                ps->p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            put_utf8(&b, cp);
            continue;
        }
        size_t n = utf8_seq((const unsigned char *)ps->p, (size_t)(ps->end - ps->p));
        if (!n) {
            mt_buf_free(&b);
            return perr(ps, ps->p, "invalid UTF-8 in a string");
        }
        mt_buf_append(&b, ps->p, n);
        ps->p += n;
    }
    if (!b.data)
        mt_buf_append(&b, "", 0);
    if (b.oom) {
        mt_buf_free(&b);
        return oom(ps);
    }
    if (b.len > ps->lim.max_string) {
        mt_buf_free(&b);
        return perr(ps, open, "string longer than the limit of %zu bytes", ps->lim.max_string);
    }
    mt_json *v = new_node(ps, MT_JSON_STRING);
    if (!v) {
        mt_buf_free(&b);
        return NULL;
    }
    v->s = b.data;
    v->slen = b.len;
    return v;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static mt_json *parse_number(parser *ps)
{
    const char *s = ps->p, *q = s;
    int integral = 1;
    if (q < ps->end && *q == '-')
        q++;
    if (q >= ps->end || !is_digit(*q))
        return perr(ps, s, "bad number");
    if (*q == '0') {
        q++;
        if (q < ps->end && is_digit(*q))
            return perr(ps, s, "leading zero in a number");
    } else
        while (q < ps->end && is_digit(*q))
            q++;
    if (q < ps->end && *q == '.') {
        integral = 0;
        q++;
        if (q >= ps->end || !is_digit(*q))
            return perr(ps, q, "digits expected after '.'");
        while (q < ps->end && is_digit(*q))
            q++;
    }
    if (q < ps->end && (*q == 'e' || *q == 'E')) {
        integral = 0;
        q++;
        if (q < ps->end && (*q == '+' || *q == '-'))
            q++;
        if (q >= ps->end || !is_digit(*q))
            return perr(ps, q, "digits expected in the exponent");
        while (q < ps->end && is_digit(*q))
            q++;
    }
    char tmp[128];
    size_t n = (size_t)(q - s);
    if (n >= sizeof tmp)
        return perr(ps, s, "number longer than %zu characters", sizeof tmp - 1);
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    errno = 0;
    double d = strtod(tmp, NULL);
    if (!isfinite(d))
        return perr(ps, s, "number out of range");
    mt_json *v = new_node(ps, MT_JSON_NUMBER);
    if (!v)
        return NULL;
    v->num = d;
    if (integral) {
        errno = 0;
        long long x = strtoll(tmp, NULL, 10);
        if (errno == 0) {
            v->is_int = 1;
            v->i = x;
        }
    }
    ps->p = q;
    return v;
}

static int grow(mt_json *v, int with_keys)
{
    if (v->n < v->cap)
        return 1;
    size_t cap = v->cap ? v->cap * 2 : 4;
    if (cap > SIZE_MAX / sizeof(mt_json *))
        return 0;
    mt_json **items = realloc(v->items, cap * sizeof *items);
    if (!items)
        return 0;
    v->items = items;
    if (with_keys) {
        mt_json **keys = realloc(v->keys, cap * sizeof *keys);
        if (!keys)
            return 0;
        v->keys = keys;
    }
    v->cap = cap;
    return 1;
}

static int key_cmp(const void *a, const void *b)
{
    const mt_json *x = *(const mt_json *const *)a, *y = *(const mt_json *const *)b;
    if (x->slen != y->slen)
        return x->slen < y->slen ? -1 : 1;
    return memcmp(x->s, y->s, x->slen);
}

/* Duplicate member names are refused: a reader could not know which to use. */
static const mt_json *find_duplicate_key(parser *ps, const mt_json *obj)
{
    if (obj->n < 2)
        return NULL;
    mt_json **sorted = malloc(obj->n * sizeof *sorted);
    if (!sorted) {
        oom(ps);
        return NULL;
    }
    memcpy(sorted, obj->keys, obj->n * sizeof *sorted);
    qsort(sorted, obj->n, sizeof *sorted, key_cmp);
    const mt_json *dup = NULL;
    for (size_t i = 1; i < obj->n && !dup; i++)
        if (key_cmp(&sorted[i - 1], &sorted[i]) == 0)
            dup = sorted[i];
    free(sorted);
    return dup;
}

static mt_json *parse_value(parser *ps);

static mt_json *parse_container(parser *ps, int is_obj)
{
    const char *open = ps->p++;
    if (ps->depth >= ps->lim.max_depth)
        return perr(ps, open, "nesting deeper than the limit of %d", ps->lim.max_depth);
    ps->depth++;
    mt_json *v = new_node(ps, is_obj ? MT_JSON_OBJECT : MT_JSON_ARRAY);
    if (!v)
        return NULL;
    char close = is_obj ? '}' : ']';
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return v;
    }
    for (;;) {
        mt_json *key = NULL;
        skip_ws(ps);
        if (is_obj) {
            if (ps->p >= ps->end || *ps->p != '"') {
                perr(ps, ps->p, "member name (a string) expected");
                goto fail;
            }
            key = parse_string(ps);
            if (!key)
                goto fail;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                mt_json_free(key);
                perr(ps, ps->p, "':' expected");
                goto fail;
            }
            ps->p++;
        }
        mt_json *item = parse_value(ps);
        if (!item || !grow(v, is_obj)) {
            mt_json_free(key);
            mt_json_free(item);
            if (item)
                oom(ps);
            goto fail;
        }
        if (is_obj)
            v->keys[v->n] = key;
        v->items[v->n++] = item;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            skip_ws(ps);
            if (ps->p < ps->end && *ps->p == close) {
                perr(ps, ps->p, "trailing comma");
                goto fail;
            }
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            break;
        }
        perr(ps, ps->p, ps->p >= ps->end ? "unterminated %s" : "',' or end of %s expected",
             is_obj ? "object" : "array");
        goto fail;
    }
    if (is_obj) {
        const mt_json *dup = find_duplicate_key(ps, v);
        if (dup)
            perr(ps, open, "duplicate member name \"%.60s\" in the object", dup->s);
        if (ps->st)
            goto fail;
    }
    ps->depth--;
    return v;
fail:
    mt_json_free(v);
    return NULL;
}

static int match_word(parser *ps, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, w, n) != 0)
        return 0;
    ps->p += n;
    return 1;
}

static mt_json *parse_value(parser *ps)
{
    skip_ws(ps);
    if (ps->p >= ps->end)
        return perr(ps, ps->p, "value expected, found the end of the input");
    char c = *ps->p;
    mt_json *v;
    switch (c) {
    case '{':
        return parse_container(ps, 1);
    case '[':
        return parse_container(ps, 0);
    case '"':
        return parse_string(ps);
    case 't':
    case 'f':
        if (!match_word(ps, c == 't' ? "true" : "false"))
            return perr(ps, ps->p, "bad literal");
        v = new_node(ps, MT_JSON_BOOL);
        if (v)
            v->b = c == 't';
        return v;
    case 'n':
        if (!match_word(ps, "null"))
            return perr(ps, ps->p, "bad literal");
        return new_node(ps, MT_JSON_NULL);
    default:
        if (c == '-' || is_digit(c))
            return parse_number(ps);
        return perr(ps, ps->p, "unexpected character '%c'", c >= 0x20 && c < 0x7f ? c : '?');
    }
}

mt_status mt_json_parse(const char *text, size_t len, const mt_json_limits *limits,
                        mt_json **root, char *msg, size_t msg_size)
{
    *root = NULL;
    parser ps = {.start = text, .p = text, .end = text + len, .msg = msg, .msg_size = msg_size};
    ps.lim.max_bytes = MT_JSON_DEFAULT_MAX_BYTES;
    ps.lim.max_depth = MT_JSON_DEFAULT_MAX_DEPTH;
    ps.lim.max_string = MT_JSON_DEFAULT_MAX_STRING;
    if (limits) {
        if (limits->max_bytes)
            ps.lim.max_bytes = limits->max_bytes;
        if (limits->max_depth > 0)
            ps.lim.max_depth = limits->max_depth;
        if (limits->max_string)
            ps.lim.max_string = limits->max_string;
    }
    if (!text && len)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "JSON input is NULL");
    if (len > ps.lim.max_bytes)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG,
                       "JSON input of %zu bytes exceeds the limit of %zu", len, ps.lim.max_bytes);
    mt_json *v = parse_value(&ps);
    if (v) {
        skip_ws(&ps);
        if (ps.p != ps.end)
            perr(&ps, ps.p, "unexpected data after the value");
    }
    if (ps.st) {
        mt_json_free(v);
        return ps.st;
    }
    *root = v;
    return MT_OK;
}

void mt_json_free(mt_json *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n; i++) {
        mt_json_free(v->items[i]);
        if (v->keys)
            mt_json_free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->s);
    free(v);
}

mt_json_type mt_json_type_of(const mt_json *v) { return v ? v->type : MT_JSON_NULL; }

size_t mt_json_len(const mt_json *v)
{
    return v && (v->type == MT_JSON_ARRAY || v->type == MT_JSON_OBJECT) ? v->n : 0;
}

const mt_json *mt_json_at(const mt_json *v, size_t i) { return i < mt_json_len(v) ? v->items[i] : NULL; }

const char *mt_json_key_at(const mt_json *v, size_t i)
{
    return v && v->type == MT_JSON_OBJECT && i < v->n ? v->keys[i]->s : NULL;
}

const mt_json *mt_json_get(const mt_json *obj, const char *key)
{
    if (!obj || obj->type != MT_JSON_OBJECT || !key)
        return NULL;
    size_t n = strlen(key);
    for (size_t i = 0; i < obj->n; i++)
        if (obj->keys[i]->slen == n && memcmp(obj->keys[i]->s, key, n) == 0)
            return obj->items[i];
    return NULL;
}

const char *mt_json_str(const mt_json *v, size_t *len)
{
    if (!v || v->type != MT_JSON_STRING)
        return NULL;
    if (len)
        *len = v->slen;
    return v->s;
}

int mt_json_num(const mt_json *v, double *out)
{
    if (!v || v->type != MT_JSON_NUMBER)
        return 0;
    *out = v->num;
    return 1;
}

int mt_json_int(const mt_json *v, int64_t *out)
{
    if (!v || v->type != MT_JSON_NUMBER || !v->is_int)
        return 0;
    *out = v->i;
    return 1;
}

int mt_json_bool(const mt_json *v, int *out)
{
    if (!v || v->type != MT_JSON_BOOL)
        return 0;
    *out = v->b;
    return 1;
}

/* ---- writer ---- */

static void jw_fail(mt_json_writer *w, mt_status st)
{
    if (w->st == MT_OK)
        w->st = st;
}

static void jw_newline(mt_json_writer *w)
{
    if (!w->pretty)
        return;
    mt_buf_append(&w->buf, "\n", 1);
    for (int i = 0; i < w->depth; i++)
        mt_buf_append(&w->buf, "  ", 2);
}

/* Called before every value: commas, indentation, and the key rule. */
static int jw_value_start(mt_json_writer *w)
{
    if (w->st)
        return 0;
    if (w->depth > 0 && w->is_object[w->depth - 1]) {
        if (!w->after_key) {
            jw_fail(w, MT_ERR_INVALID_ARG);   /* a value without a key */
            return 0;
        }
        w->after_key = 0;
        return 1;
    }
    if (w->depth > 0) {
        if (w->count[w->depth - 1])
            mt_buf_append(&w->buf, ",", 1);
        w->count[w->depth - 1] = 1;
        jw_newline(w);
    } else if (w->buf.len) {
        jw_fail(w, MT_ERR_INVALID_ARG);       /* two top-level values */
        return 0;
    }
    return 1;
}

static void jw_open(mt_json_writer *w, int is_obj)
{
    if (!jw_value_start(w))
        return;
    if (w->depth >= MT_JSON_WRITER_MAX_DEPTH) {
        jw_fail(w, MT_ERR_INVALID_ARG);
        return;
    }
    mt_buf_append(&w->buf, is_obj ? "{" : "[", 1);
    w->is_object[w->depth] = (unsigned char)is_obj;
    w->count[w->depth] = 0;
    w->depth++;
}

static void jw_close(mt_json_writer *w, int is_obj)
{
    if (w->st)
        return;
    if (w->depth == 0 || w->is_object[w->depth - 1] != is_obj || w->after_key) {
        jw_fail(w, MT_ERR_INVALID_ARG);
        return;
    }
    int had = w->count[w->depth - 1];
    w->depth--;
    if (had)
        jw_newline(w);
    mt_buf_append(&w->buf, is_obj ? "}" : "]", 1);
}

void mt_jw_begin_object(mt_json_writer *w) { jw_open(w, 1); }
void mt_jw_end_object(mt_json_writer *w) { jw_close(w, 1); }
void mt_jw_begin_array(mt_json_writer *w) { jw_open(w, 0); }
void mt_jw_end_array(mt_json_writer *w) { jw_close(w, 0); }

static void jw_quoted(mt_json_writer *w, const char *s, size_t n)
{
    mt_buf_append(&w->buf, "\"", 1);
    size_t i = 0, run = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
            i++;
            continue;
        }
        mt_buf_append(&w->buf, s + run, i - run);
        if (c >= 0x80) {
            size_t k = utf8_seq((const unsigned char *)s + i, n - i);
            if (!k) {
                jw_fail(w, MT_ERR_INVALID_ARG);
                return;
            }
            mt_buf_append(&w->buf, s + i, k);
            i += k;
        } else {
            char esc[8];
            switch (c) {
            case '"': memcpy(esc, "\\\"", 3); break;
            case '\\': memcpy(esc, "\\\\", 3); break;
            case '\n': memcpy(esc, "\\n", 3); break;
            case '\r': memcpy(esc, "\\r", 3); break;
            case '\t': memcpy(esc, "\\t", 3); break;
            default: snprintf(esc, sizeof esc, "\\u%04x", c); break;
            }
            mt_buf_puts(&w->buf, esc);
            i++;
        }
        run = i;
    }
    mt_buf_append(&w->buf, s + run, n - run);
    mt_buf_append(&w->buf, "\"", 1);
}

void mt_jw_key(mt_json_writer *w, const char *key)
{
    if (w->st)
        return;
    if (w->depth == 0 || !w->is_object[w->depth - 1] || w->after_key || !key) {
        jw_fail(w, MT_ERR_INVALID_ARG);
        return;
    }
    if (w->count[w->depth - 1])
        mt_buf_append(&w->buf, ",", 1);
    w->count[w->depth - 1] = 1;
    jw_newline(w);
    jw_quoted(w, key, strlen(key));
    mt_buf_append(&w->buf, w->pretty ? ": " : ":", w->pretty ? 2 : 1);
    w->after_key = 1;
}

void mt_jw_string_n(mt_json_writer *w, const char *s, size_t n)
{
    if (!s) {
        mt_jw_null(w);
        return;
    }
    if (jw_value_start(w))
        jw_quoted(w, s, n);
}

void mt_jw_string(mt_json_writer *w, const char *s) { mt_jw_string_n(w, s, s ? strlen(s) : 0); }

void mt_jw_number(mt_json_writer *w, double x)
{
    if (!isfinite(x)) {
        jw_fail(w, MT_ERR_INVALID_ARG);
        return;
    }
    if (jw_value_start(w))
        mt_buf_printf(&w->buf, "%.17g", x);
}

void mt_jw_int(mt_json_writer *w, int64_t x)
{
    if (jw_value_start(w))
        mt_buf_printf(&w->buf, "%lld", (long long)x);
}

void mt_jw_bool(mt_json_writer *w, int b)
{
    if (jw_value_start(w))
        mt_buf_puts(&w->buf, b ? "true" : "false");
}

void mt_jw_null(mt_json_writer *w)
{
    if (jw_value_start(w))
        mt_buf_puts(&w->buf, "null");
}

mt_status mt_jw_finish(mt_json_writer *w)
{
    if (w->st == MT_OK && (w->depth != 0 || w->after_key || w->buf.len == 0))
        w->st = MT_ERR_INVALID_ARG;
    if (w->st == MT_OK && w->buf.oom)
        w->st = MT_ERR_NO_MEMORY;
    return w->st;
}

void mt_json_writer_free(mt_json_writer *w) { mt_buf_free(&w->buf); }

/* ---- base64 ---- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void mt_base64_encode(mt_buf *b, const void *data, size_t n)
{
    const uint8_t *p = data;
    char q[4];
    for (size_t i = 0; i < n; i += 3) {
        uint32_t x = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            x |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            x |= p[i + 2];
        q[0] = b64[(x >> 18) & 63];
        q[1] = b64[(x >> 12) & 63];
        q[2] = i + 1 < n ? b64[(x >> 6) & 63] : '=';
        q[3] = i + 2 < n ? b64[x & 63] : '=';
        mt_buf_append(b, q, 4);
    }
}

static int b64_val(char c)
{
    const char *p = c ? strchr(b64, c) : NULL;
    return p ? (int)(p - b64) : -1;
}

mt_status mt_base64_decode(const char *s, size_t n, uint8_t **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (n % 4)
        return MT_ERR_INVALID_ARG;
    size_t pad = 0;
    if (n >= 1 && s[n - 1] == '=')
        pad++;
    if (n >= 2 && s[n - 2] == '=')
        pad++;
    size_t len = n / 4 * 3 - pad;
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return MT_ERR_NO_MEMORY;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t x = 0;
        for (size_t k = 0; k < 4; k++) {
            int v = b64_val(s[i + k]);
            int is_pad = s[i + k] == '=' && i + 4 == n && k >= 4 - pad;
            if (v < 0 && !is_pad) {
                free(buf);
                return MT_ERR_INVALID_ARG;
            }
            x = (x << 6) | (uint32_t)(v < 0 ? 0 : v);
        }
        uint8_t t[3] = {(uint8_t)(x >> 16), (uint8_t)(x >> 8), (uint8_t)x};
        for (size_t k = 0; k < 3 && o < len; k++)
            buf[o++] = t[k];
    }
    *out = buf;
    *out_len = len;
    return MT_OK;
}
