/*
 * A small, strict, bounded JSON reader and an escaping writer (RFC 8259).
 *
 * The reader builds a tree from a byte buffer. It refuses anything outside
 * the grammar (comments, trailing commas, leading zeros, bare control
 * characters, invalid UTF-8, lone surrogates, duplicate object keys, bytes
 * after the value) and enforces limits on input size, nesting depth and
 * string length, so untrusted files (database imports, vLLM configs) can be
 * read safely. Errors name the byte offset.
 *
 * The writer appends to an mt_buf, escapes strings, and records the first
 * misuse (unbalanced containers, non-finite numbers, invalid UTF-8) as a
 * status instead of writing bad JSON. Also here: base64, which is how the
 * JSON layouts carry binary blobs. May call only common/util.
 */
#ifndef MT_COMMON_JSON_H
#define MT_COMMON_JSON_H

#include <stddef.h>
#include <stdint.h>
#include "common/util.h"
#include "moetune/status.h"

typedef enum mt_json_type {
    MT_JSON_NULL = 0,
    MT_JSON_BOOL,
    MT_JSON_NUMBER,
    MT_JSON_STRING,
    MT_JSON_ARRAY,
    MT_JSON_OBJECT
} mt_json_type;

typedef struct mt_json mt_json;

typedef struct mt_json_limits {
    size_t max_bytes;      /* whole input */
    int max_depth;         /* nested arrays/objects */
    size_t max_string;     /* one string, in bytes after unescaping */
} mt_json_limits;

#define MT_JSON_DEFAULT_MAX_BYTES ((size_t)1 << 30)
#define MT_JSON_DEFAULT_MAX_DEPTH 64
#define MT_JSON_DEFAULT_MAX_STRING ((size_t)512 << 20)
#define MT_JSON_WRITER_MAX_DEPTH 64

/*
 * Parse text[0..len) (need not be NUL-terminated). limits NULL: the
 * defaults above. On success *root owns the tree (free with mt_json_free).
 * On failure *root is NULL, the status is MT_ERR_INVALID_ARG (bad JSON or a
 * limit exceeded) or MT_ERR_NO_MEMORY, and msg says what and at which byte
 * offset.
 */
mt_status mt_json_parse(const char *text, size_t len, const mt_json_limits *limits,
                        mt_json **root, char *msg, size_t msg_size);
/* Free a tree from mt_json_parse. NULL is a no-op. */
void mt_json_free(mt_json *root);

/* Accessors. All accept NULL and then return the "absent" answer. */
mt_json_type mt_json_type_of(const mt_json *v);
/* Elements of an array or members of an object; 0 for other types. */
size_t mt_json_len(const mt_json *v);
const mt_json *mt_json_at(const mt_json *v, size_t i);
/* Member name i of an object (NULL otherwise). */
const char *mt_json_key_at(const mt_json *v, size_t i);
/* Member by name of an object, or NULL. */
const mt_json *mt_json_get(const mt_json *obj, const char *key);
/* String contents (NUL-terminated; *len may be NULL), or NULL. Strings may
 * contain NUL bytes from \u0000: use len when that matters. */
const char *mt_json_str(const mt_json *v, size_t *len);
/* 1 and *out set when v is a number (any number for _num; an integer
 * written without fraction or exponent that fits int64 for _int). */
int mt_json_num(const mt_json *v, double *out);
int mt_json_int(const mt_json *v, int64_t *out);
/* 1 and *out set when v is true/false. */
int mt_json_bool(const mt_json *v, int *out);

/* The writer. Zero-initialize, set pretty if wanted, call the functions,
 * then check st (MT_OK) and take buf.data; mt_json_writer_free releases. */
typedef struct mt_json_writer {
    mt_buf buf;
    int pretty;
    mt_status st;          /* first error, sticky */
    int depth;
    unsigned char count[MT_JSON_WRITER_MAX_DEPTH]; /* 0: empty so far */
    unsigned char is_object[MT_JSON_WRITER_MAX_DEPTH];
    int after_key;
} mt_json_writer;

void mt_jw_begin_object(mt_json_writer *w);
void mt_jw_end_object(mt_json_writer *w);
void mt_jw_begin_array(mt_json_writer *w);
void mt_jw_end_array(mt_json_writer *w);
/* Inside an object: the next member's name; the value call follows. */
void mt_jw_key(mt_json_writer *w, const char *key);
void mt_jw_string(mt_json_writer *w, const char *s);
void mt_jw_string_n(mt_json_writer *w, const char *s, size_t n);
/* A double written so that it parses back to the same value. NaN and
 * infinities set st to MT_ERR_INVALID_ARG. */
void mt_jw_number(mt_json_writer *w, double x);
void mt_jw_int(mt_json_writer *w, int64_t x);
void mt_jw_bool(mt_json_writer *w, int b);
void mt_jw_null(mt_json_writer *w);
/* Final status: st, or MT_ERR_INVALID_ARG when containers are still open,
 * MT_ERR_NO_MEMORY when the buffer could not grow. */
mt_status mt_jw_finish(mt_json_writer *w);
void mt_json_writer_free(mt_json_writer *w);

/* Base64 (RFC 4648, with padding). encode appends to b. decode returns a
 * malloc'd buffer; MT_ERR_INVALID_ARG for a bad character or length. */
void mt_base64_encode(mt_buf *b, const void *data, size_t n);
mt_status mt_base64_decode(const char *s, size_t n, uint8_t **out, size_t *out_len);

#endif
